"""``BlockingBatch``: the blocking store calls of one codec-pool job, timed and counted.

The chunk pipeline's batched path (``pipeline/_batched.py``) reads or writes chunk after
chunk in a codec thread on stores with blocking access (memory, local files). Each call is
timed on its own like any request, and the job's calls go into the store's
`StoreStats` under one lock when the batch closes: a lock round
per 1,600-byte chunk cost as much as a fifth of the read. The batch also says how long
the store's calls took in all (`BlockingBatch.store_seconds`), which tells the
pipeline whether its jobs wait on the store (system calls, run without the GIL) or on
Python.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from azarr.scheduler._shared import SHARED_READS

if TYPE_CHECKING:
    from azarr.scheduler._io import StoreIO

__all__ = ["BlockingBatch"]


class BlockingBatch:
    """Blocking store calls of one job (one thread): use as a context manager.

    Not retried and holding no budget slot of its own, as
    `StoreIO.get_blocking`: the job holds one slot for all its calls.
    """

    __slots__ = ("_ahead", "_ahead_seconds", "_get", "_io", "_latencies", "_read", "_written")

    def __init__(self, io: StoreIO) -> None:
        self._io = io
        self._get = io.store.get_blocking
        self._latencies: list[float] = []
        self._read = 0
        self._written = 0
        self._ahead = False
        self._ahead_seconds = 0.0

    def __enter__(self) -> BlockingBatch:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def last_seconds(self) -> float:
        """Seconds the last successful call took (0 before the first)."""
        return self._latencies[-1] if self._latencies else 0.0

    @property
    def store_seconds(self) -> float:
        """Seconds spent in the store's calls so far (successful ones), reads ahead included."""
        return sum(self._latencies) + self._ahead_seconds

    def get(self, key: str) -> bytes | None:
        """``store.get_blocking(key)``, timed (`_timed` inline: once per chunk of every job)."""
        started = time.perf_counter()
        try:
            value = self._get(key)
        except BaseException:
            self._io.stats.record(time.perf_counter() - started, failed=True)
            raise
        self._latencies.append(time.perf_counter() - started)
        if value is not None:
            self._read += len(value)
        return value

    def readinto(self, key: str, buffers: Sequence[Any], nbytes: int) -> bool | None:
        """``store.readinto_blocking(key, buffers, nbytes)``, timed."""
        found: bool | None = self._timed(self._io.store.readinto_blocking, key, buffers, nbytes)
        if found:
            self._read += nbytes
        return found

    def read_ahead(self, keys: Sequence[str]) -> None:
        """``store.read_ahead_blocking(keys)``: its time counts as the store's (`store_seconds`:
        opening files cold waits on the disk), though not as requests in the stats (the reads
        that follow are); what it started and the job did not read ends with the batch."""
        self._ahead = True
        started = time.perf_counter()
        self._io.store.read_ahead_blocking(keys)
        self._ahead_seconds += time.perf_counter() - started

    def set(self, key: str, value: bytes | memoryview) -> None:
        """``store.set_blocking(key, value)``, timed (``value`` as `Store.set_blocking`)."""
        try:
            self._timed(self._io.store.set_blocking, key, value)
        finally:
            SHARED_READS.forget(self._io.store.budget_key, key)
        self._written += value.nbytes if type(value) is memoryview else len(value)

    def delete(self, key: str) -> None:
        """``store.delete_blocking(key)``, timed."""
        try:
            self._timed(self._io.store.delete_blocking, key)
        finally:
            SHARED_READS.forget(self._io.store.budget_key, key)

    def close(self) -> None:
        """Record the batch's successful calls in the store's stats (once; later calls add
        nothing), and end its reads ahead (`Store.end_read_ahead_blocking`)."""
        if self._ahead:
            self._ahead = False
            self._io.store.end_read_ahead_blocking()
        latencies, self._latencies = self._latencies, []
        read, written, self._read, self._written = self._read, self._written, 0, 0
        self._io.stats.record_many(latencies, read=read, written=written)

    def _timed(self, call: Callable[..., Any], *args: Any) -> Any:
        started = time.perf_counter()
        try:
            result = call(*args)
        except BaseException:
            # Recorded at once, so an error shows in the stats even if the job's close is never reached.
            self._io.stats.record(time.perf_counter() - started, failed=True)
            raise
        self._latencies.append(time.perf_counter() - started)
        return result
