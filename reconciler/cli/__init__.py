"""The command line: click commands that parse, call one runtime function and print through views."""

from reconciler.cli.commands import cli, main

__all__ = ["cli", "main"]
