"""The ``azarr`` command line: look at, copy, check and time Zarr v2 hierarchies in any store.

Subcommands (``azarr --help``, ``azarr COMMAND --help``)::

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

from azarr.cli import _bench, _copy, _get, _inspect, _verify  # noqa: F401 - registers the commands
from azarr.cli._app import cli, main

__all__ = ["cli", "main"]
