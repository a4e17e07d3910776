"""Reused receive buffers for chunk bodies from remote stores.

Why: a 1 MiB response body read the usual way (``aiohttp``'s ``read()``) is a new
``bytes`` object, allocated on the event-loop thread and freed after decoding.
glibc serves such sizes from the top of the main arena (or from ``mmap``) and
returns them to the kernel when they are freed, so the next body page-faults its
memory in again: measured on a 256 MiB uncompressed read, 20,000-60,000 page
faults on the loop thread per read, and about 60 % more loop CPU than a reader
whose bodies happened to stay in reused memory (``benchmarks/README.md``, "Loop
CPU"). Bodies read into buffers from this pool touch memory that is already
mapped; the decoder hands each buffer back when it has copied the chunk out.

A buffer is handed out as a ``memoryview`` of exactly the requested length over a
``bytearray`` whose capacity is a power of two (>= 64 KiB), and is taken back
only after the code that read it has finished with it. At most
``buffer_pool_bytes`` (:mod:`azarr.config`) of idle capacity is kept; 0 disables
the pool.
"""

from __future__ import annotations

import threading

from azarr import config

__all__ = ["BODY_BUFFERS", "BufferPool"]

_MIN_CAPACITY = 64 * 1024


def _capacity(nbytes: int) -> int:
    return max(_MIN_CAPACITY, 1 << (max(nbytes, 1) - 1).bit_length())


class BufferPool:
    """Idle receive buffers by capacity; :meth:`acquire` on the loop, :meth:`release` from any thread."""

    def __init__(self) -> None:
        self._idle: dict[int, list[bytearray]] = {}
        self._idle_bytes = 0
        self._lock = threading.Lock()

    @staticmethod
    def enabled() -> bool:
        """Whether bodies should be read into pooled buffers (``buffer_pool_bytes`` > 0)."""
        return int(config.get("buffer_pool_bytes")) > 0

    def acquire(self, nbytes: int) -> memoryview:
        """A writable view of exactly ``nbytes`` bytes (contents undefined)."""
        capacity = _capacity(nbytes)
        with self._lock:
            stack = self._idle.get(capacity)
            if stack:
                buffer = stack.pop()
                self._idle_bytes -= capacity
            else:
                buffer = None
        if buffer is None:
            buffer = bytearray(capacity)
        return memoryview(buffer)[:nbytes]

    def release(self, view: memoryview) -> None:
        """Take back the buffer under ``view``; its contents may be overwritten from now on.

        Only call this once nothing refers to the data any more (not after a failed
        decode: a traceback may still hold a view of it).
        """
        buffer = view.obj
        if not isinstance(buffer, bytearray):
            return
        capacity = len(buffer)
        if capacity != _capacity(capacity):
            return  # not one of ours
        limit = int(config.get("buffer_pool_bytes"))
        with self._lock:
            if self._idle_bytes + capacity > limit:
                return  # dropped: freed when the last view goes
            self._idle.setdefault(capacity, []).append(buffer)
            self._idle_bytes += capacity

    def idle_bytes(self) -> int:
        """Capacity held idle, in bytes."""
        return self._idle_bytes

    def clear(self) -> None:
        """Drop every idle buffer."""
        with self._lock:
            self._idle.clear()
            self._idle_bytes = 0


#: The process's pool for chunk bodies (shared by every store and event loop).
BODY_BUFFERS = BufferPool()
