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
pool-owned uninitialised NumPy byte array (a ``bytearray`` would be zero-filled:
one more pass over fresh memory on the event loop) whose capacity is rounded up to one of eight steps per
power of two (under a quarter unused, at least 64 KiB; when no buffer of that
capacity is idle, an idle one of up to twice it is used before a new one is made),
and is taken back only
after the code that read it has finished with it. Chunk bodies ask for at least their
chunk's decoded size, so all bodies of arrays with the same chunk size share one class
whatever their codec and compressed size: a Zstd read after a Blosc one, or an
uncompressed one after either, finds the buffers the last read left. Sized by each body
instead, a Zstd read after a Blosc one took 22,000-37,000 page faults on the loop thread
per 256 MiB, and an uncompressed one after that 14,000-49,000; with the shared class,
1-6,500 in 5 of 6 such reads (``benchmarks/README.md``). While reads are in progress
(`BufferPool.reading`) every buffer handed back is kept for the next body:
how many are out at once is bounded by the store's budgets, not here. When the
last read ends, idle buffers beyond ``buffer_pool_bytes`` (`azarr.config`;
each counted by the longest body it held, the part of it ever written) are dropped;
0 disables the pool.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from azarr import config
from azarr.pipeline._pages import empty

__all__ = ["BODY_BUFFERS", "BufferPool"]

_MIN_CAPACITY = 64 * 1024
#: NumPy advises the kernel to back allocations of this many bytes or more with huge pages;
#: on the benchmark VM such a fault can stall for compaction (``benchmarks/README.md``), so a
#: chunk-sized class (``acquire``'s ``at_least``) is only used below it.
_HUGE_PAGE_ADVICE = 4 << 20


def _capacity(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of 1/8 of the next power of two (>= 64 KiB)."""
    nbytes = max(nbytes, _MIN_CAPACITY)
    step = (1 << (nbytes - 1).bit_length()) // 8
    return -(-nbytes // step) * step


class _PoolBuffer(np.ndarray[Any, np.dtype[np.uint8]]):
    """A receive buffer the pool made (only these are taken back): 1-D ``uint8``.

    ``written`` is the longest body it has held: the pages of it that have been touched
    (the rest of its capacity was never written, so it takes no memory).
    """

    written: int


class BufferPool:
    """Idle receive buffers by capacity; `acquire` on the loop, `release` from any thread."""

    def __init__(self) -> None:
        self._idle: dict[int, list[_PoolBuffer]] = {}
        self._idle_bytes = 0
        self._readers = 0
        self._lock = threading.Lock()

    @staticmethod
    def enabled() -> bool:
        """Whether bodies should be read into pooled buffers (``buffer_pool_bytes`` > 0)."""
        return int(config.get("buffer_pool_bytes")) > 0

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """A read in progress: buffers handed back meanwhile are all kept; at the end of the
        last one, idle buffers beyond ``buffer_pool_bytes`` (`idle_bytes`) are dropped."""
        with self._lock:
            self._readers += 1
        try:
            yield
        finally:
            with self._lock:
                self._readers -= 1
                if not self._readers:
                    self._trim(int(config.get("buffer_pool_bytes")))

    def acquire(self, nbytes: int, at_least: int = 0) -> memoryview:
        """A writable view of exactly ``nbytes`` bytes (contents undefined).

        Parameters
        ----------
        nbytes : int
            Length of the view, in bytes (a body's ``Content-Length``).
        at_least : int, default 0
            Capacity to ask for at the least, in bytes: the buffer comes from the class
            of ``max(nbytes, at_least)``. The chunk pipeline passes the decoded chunk
            size, which a compressed body exceeds by a header at most, so every body of
            arrays with one chunk size shares a class whatever its codec. Only the pages
            a body is written to are ever touched: the unused tail of a buffer costs
            address space, not memory (and `idle_bytes` does not count it).
            Ignored from NumPy's huge-page threshold (4 MiB) up.

        Returns
        -------
        memoryview
            Over a pool buffer; give it back with `release`.
        """
        shared = _capacity(at_least)
        capacity = max(_capacity(nbytes), shared if shared < _HUGE_PAGE_ADVICE else 0)
        with self._lock:
            stack = self._idle.get(capacity)
            if not stack:
                stack = self._larger(capacity)
            buffer = stack.pop() if stack else None
            if buffer is not None:
                self._idle_bytes -= buffer.written
        if buffer is None:
            buffer = empty(capacity, np.uint8).view(_PoolBuffer)  # a whole shard's: 4 KiB pages
            buffer.written = 0
        if nbytes > buffer.written:  # the holder's own attribute until it is released
            buffer.written = nbytes
        exported: Any = buffer
        return memoryview(exported)[:nbytes]

    def _larger(self, capacity: int) -> list[_PoolBuffer] | None:
        """The idle buffers of the smallest class above ``capacity`` and at most twice it, if any.

        Caller holds the lock. A fresh buffer costs a page fault per 4 KiB on the event
        loop as the body is copied in (about 350 µs per MiB on the benchmark VM); an idle
        buffer up to twice the size costs nothing but its unused tail while it is out.
        So bodies of a new size (a Zstd array read after a Blosc one) reuse what is idle.
        """
        best = None
        for size, stack in self._idle.items():
            if stack and capacity < size <= 2 * capacity and (best is None or size < best):
                best = size
        return None if best is None else self._idle[best]

    def release(self, view: memoryview) -> None:
        """Take back the buffer under ``view``; its contents may be overwritten from now on.

        Only call this once nothing refers to the data any more (not after a failed
        decode: a traceback may still hold a view of it). Views of other buffers are ignored.
        """
        buffer: Any = view.obj  # (numpy's stubs do not declare ndarray a Buffer on Python 3.11)
        if type(buffer) is not _PoolBuffer:
            return
        written = buffer.written
        with self._lock:
            if not self._readers and self._idle_bytes + written > int(config.get("buffer_pool_bytes")):
                return  # dropped: freed when the last view goes
            self._idle.setdefault(len(buffer), []).append(buffer)
            self._idle_bytes += written

    def _trim(self, limit: int) -> None:
        # Caller holds the lock. Largest first: they are the ones glibc returns to the kernel anyway.
        for capacity in sorted(self._idle, reverse=True):
            stack = self._idle[capacity]
            while stack and self._idle_bytes > limit:
                self._idle_bytes -= stack.pop().written

    def idle_bytes(self) -> int:
        """Bytes held idle: each idle buffer counts the longest body it has held (the part
        of it ever written, so the memory it occupies; the rest of its capacity was never
        touched). ``buffer_pool_bytes`` caps this."""
        return self._idle_bytes

    def clear(self) -> None:
        """Drop every idle buffer."""
        with self._lock:
            self._idle.clear()
            self._idle_bytes = 0


#: The process's pool for chunk bodies (shared by every store and event loop).
BODY_BUFFERS = BufferPool()
