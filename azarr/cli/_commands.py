"""The ``azarr`` click group with every subcommand registered (importing a command module registers it)."""

from azarr.cli import _bench, _copy, _get, _inspect, _verify  # noqa: F401 - registers the commands
from azarr.cli._app import cli, main

__all__ = ["cli", "main"]
