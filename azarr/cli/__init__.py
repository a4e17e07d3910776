"""The ``azarr`` command line: look at, copy, check and time Zarr v2 hierarchies in any store.

Subcommands (``azarr --help``, ``azarr COMMAND --help``):

    info URL         an array's or group's configuration, chunks initialised, bytes stored
    tree URL         the hierarchy as a tree
    ls URL           the members of a group
    get URL          read a selection (``--sel "0:10,::2"``) to the screen or a .npy file
    cp SRC DST       copy every key of a hierarchy, with a progress bar; resumable
    consolidate URL  write ``.zmetadata``
    verify URL       check metadata, chunk keys, chunk decoding and digests
    bench URL        a quick read-throughput probe

Every command takes ``-S key=value`` (storage_options), ``--anon``,
``--endpoint-url``, ``-v``/``-q`` and ``--json``. Exit codes: 0 ok, 1 failure,
2 usage error. Errors are one line naming the key or URL (a traceback with ``-v``).
"""

from __future__ import annotations

import sys
from typing import Any

#: Packages of the ``cli`` extra (``pip install "azarr[cli]"``).
_EXTRA = ("click", "rich")


def main() -> None:
    """Console-script entry point (``azarr``); says which extra to install if click or rich is missing."""
    try:
        from azarr.cli._commands import main as run
    except ModuleNotFoundError as exc:
        if exc.name not in _EXTRA:
            raise
        sys.stderr.write(f"azarr: the command line needs {exc.name}: pip install 'azarr[cli]'\n")
        sys.exit(1)
    run()


def __getattr__(name: str) -> Any:
    # ``azarr.cli.cli`` (the click group, for mkdocs-click and tests) without importing
    # click when only ``main`` is wanted.
    if name == "cli":
        from azarr.cli._commands import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["cli", "main"]
