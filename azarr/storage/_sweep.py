"""Temporary files of `LocalStore` writers: marked live while written, swept when abandoned.

A `LocalStore` write goes to ``.<name>.azarr-tmp-<hex>`` and is renamed into place;
a writer killed in between (``kill -9``, power loss) leaves the temporary file
behind. The writer holds an exclusive ``flock`` on its temporary file from creation
until it is renamed, and the kernel drops the lock when the process dies, so a
sweeper can tell an abandoned file from a live one: it removes a temporary file
only when it is older than ``azarr.config`` ``local_temp_max_age`` *and* it can
take that lock without waiting. A live writer's file is never removed, however
slow the writer (the age only spares files created an instant ago, before their
writer took the lock).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locks, so nothing is ever swept
    fcntl = None  # type: ignore[assignment]

#: POSIX advisory locks available (without them a live file cannot be told apart: none is swept).
_LOCKS: bool = fcntl is not None


def mark_live(fd: int) -> None:
    """Lock a new temporary file for as long as its writer has ``fd`` open."""
    if _LOCKS:
        fcntl.flock(fd, fcntl.LOCK_EX)


def sweep(paths: Iterable[str], max_age: float) -> list[str]:
    """Remove the abandoned temporary files among ``paths``; returns those removed.

    A file is abandoned when it was last modified more than ``max_age`` seconds
    ago and no writer holds its lock. Errors (a file already gone, no permission)
    leave the file alone: sweeping is housekeeping, never a reason for an
    operation to fail.
    """
    if not _LOCKS:
        return []
    now = time.time()
    return [path for path in paths if _sweep_one(path, max_age, now)]


def _sweep_one(path: str, max_age: float, now: float) -> bool:
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or now - st.st_mtime < max_age:
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        current = os.fstat(fd)
        if (current.st_dev, current.st_ino) != (st.st_dev, st.st_ino):
            return False  # replaced since the stat: not the file judged abandoned
        os.unlink(path)
        return True
    except OSError:  # BlockingIOError: a live writer holds the lock
        return False
    finally:
        os.close(fd)
