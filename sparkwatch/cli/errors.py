"""Errors the CLI shows as one line (exit status 2), importable by every command module."""


class CliError(Exception):
    """An error to show the user as one clear line, exit status 2."""
