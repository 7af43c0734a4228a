"""YAML output that stays readable in review: multi-line strings as ``|`` blocks, keys in the
order given, and a generated-file header."""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: Any, header: str) -> str:
    """``data`` as YAML after ``header`` (each line becomes a comment)."""
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=4096, allow_unicode=True)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + body
