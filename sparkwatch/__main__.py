"""``python -m sparkwatch``: the ``sparkwatch`` command, where the script is not on the PATH (a
virtualenv not activated, a notebook's interpreter)."""

import sys

from sparkwatch.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
