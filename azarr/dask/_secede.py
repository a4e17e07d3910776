"""Let a dask.distributed worker run other tasks while a ``from_azarr`` task waits for its chunks.

Why: a worker runs ``threads_per_worker`` tasks at once, and a task reading one small
block spends nearly all its time waiting for a request round trip. With dask chunks
equal to 1 MiB Zarr chunks and 20 ms of latency each way, a 4-thread worker reads at
most 4 chunks per ~45 ms, whatever azarr's store budget allows. Leaving the worker's
thread pool during the wait (``distributed.secede``, then ``distributed.rejoin``, the
public API distributed documents for tasks that block) lets the worker start more
tasks, so requests in flight are bounded by the store budget instead of the threads.

Bounded both ways, because every task waiting outside the pool is one more thread and
one more block in memory: only blocks of at most `MAX_BLOCK_BYTES`, and at most
`MAX_OUTSIDE` such tasks per worker process at once (a task holds its slot until
it has rejoined the pool). Anywhere else (dask's threaded scheduler, a plain thread,
a worker whose executor is not distributed's thread pool) nothing changes.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Largest block (bytes, decoded) whose read leaves the worker's thread pool; larger
#: blocks keep dask's threads busy decoding and are not latency-bound.
MAX_BLOCK_BYTES = 8 * 2**20
#: Reads per worker process waiting outside the thread pool at once.
MAX_OUTSIDE = 16

_slots = threading.BoundedSemaphore(MAX_OUTSIDE)


def _after_fork_in_child() -> None:
    """Slots held by the parent's threads are never released in a forked child."""
    global _slots
    _slots = threading.BoundedSemaphore(MAX_OUTSIDE)


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _in_worker_pool_thread() -> bool:
    """True inside a task run by a dask.distributed worker's own thread pool."""
    if "distributed" not in sys.modules:  # no worker in a process that never imported it
        return False
    from distributed import get_worker
    from distributed.threadpoolexecutor import thread_state

    try:
        get_worker()
    except ValueError:  # not in a distributed task
        return False
    return getattr(thread_state, "executor", None) is not None


@contextmanager
def outside_worker_pool(nbytes: int) -> Iterator[bool]:
    """Run the block of the ``with`` outside the worker's thread pool when that is allowed.

    Parameters
    ----------
    nbytes : int
        Decoded size of the block to read (bytes).

    Yields
    ------
    bool
        Whether the task left the pool (it rejoins before the ``with`` ends).
    """
    if nbytes > MAX_BLOCK_BYTES or not _in_worker_pool_thread() or not _slots.acquire(blocking=False):
        yield False
        return
    from distributed import rejoin, secede

    try:
        secede()
        try:
            yield True
        finally:
            rejoin()  # blocks until a pool slot is free: the block waits there, counted in _slots
    finally:
        _slots.release()
