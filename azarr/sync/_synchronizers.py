"""zarr-python 2's synchronizers: locks by key, for writers that share chunks.

zarr-python 2 reads, merges and rewrites a chunk that a write covers in part, so two
writers of one chunk can lose each other's update unless a synchronizer's lock is held
around that read-modify-write. azarr makes such writes conditional on the stored chunk's
generation wherever the store can (memory, local files, S3, GCS:
``Store.supports_conditional_writes``): a writer that lost the race re-reads and retries,
so no update is lost with or without a synchronizer (``docs/consistency.md``). On the
other stores (mappings, HTTP, generic fsspec) an `azarr.sync.Array` given a synchronizer
holds its lock for the array's ``.zarray`` key around every write call (chunks, resize,
append, fill value), so writers sharing the synchronizer take turns on the array.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections.abc import Iterator
from typing import Any


class ThreadSynchronizer:
    """One lock per key for the threads of this process (zarr-python 2 ``ThreadSynchronizer``).

    ``synchronizer[key]`` is a `threading.Lock` (a context manager), the same one for
    every use of ``key``.
    """

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def __getitem__(self, key: str) -> threading.Lock:
        with self._mutex:
            return self._locks.setdefault(key, threading.Lock())

    def __getstate__(self) -> dict[str, Any]:
        return {}  # locks are per process: a copy starts with its own

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__()  # type: ignore[misc]


class ProcessSynchronizer:
    """One file lock per key, shared by the processes of this machine (zarr-python 2 ``ProcessSynchronizer``).

    ``synchronizer[key]`` is a context manager holding an exclusive `fcntl.flock` on
    the file ``path/key`` (created with its directories) and a lock for the threads of
    this process.

    Parameters
    ----------
    path : str or os.PathLike
        A directory every cooperating process can reach (a local or network file
        system honouring ``flock``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._threads = ThreadSynchronizer()

    def __getitem__(self, key: str) -> contextlib.AbstractContextManager[None]:
        return self._locked(key)

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        lock_path = os.path.join(self.path, *key.split("/"))
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        with self._threads[key], open(lock_path, "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]
