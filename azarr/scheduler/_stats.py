"""Per-store request counters and latency histogram."""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from azarr.scheduler._registry import SpecRegistry
from azarr.storage import Store, StoreSpec
from azarr.storage._redact import redact_url

logger = logging.getLogger("azarr.stats")

#: The window of recent successful latencies (`StoreStats.latency_quantile`): at most
#: ``_RECENT_MAX``, cut to the newest ``_RECENT_KEEP`` when it fills.
_RECENT_MAX = 512
_RECENT_KEEP = 256

#: Upper bounds (seconds) of the latency histogram buckets; the last bucket is open.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
)


class StoreStats:
    """Counters of one store's traffic, shared by everything using the store.

    Attributes
    ----------
    requests : int
        Store calls made (each attempt of a retried call counts).
    bytes_read, bytes_written : int
        Payload bytes received and sent.
    retries : int
        Attempts repeated after a transient error.
    errors : int
        Attempts that failed (transient or not).
    hedged : int
        Backup requests sent by hedged reads.
    conflicts : int
        Conditional writes that found another writer's generation (HTTP 412) and
        made a read-modify-write start again (see ``docs/consistency.md``).
    throttled : int
        Attempts the backend refused with "slow down" (S3 ``503 SlowDown``, HTTP 429,
        `azarr.errors.ThrottledError`); also counted in ``errors``.
    concurrency_limit : int or None
        Requests the store may have in flight now (its budget's limit: adaptive for
        remote stores, see `azarr.scheduler.IOBudget`); None before the budget exists.
    concurrency_limit_min : int or None
        The lowest that limit has been since the counters were last reset.
    shard_index_hits, shard_index_misses : int
        Shard reads that found the shard's index in the index cache, and those that read it
        (Zarr v3 sharding; ``azarr.config`` ``shard_index_cache_bytes``).
    coalesced_requests : int
        Ranged requests that served more than one byte range of an object (inner chunks of a
        shard, kerchunk references into one file).
    requests_saved : int
        Requests coalescing saved: ranges read less the requests that read them.
    latency : list of int
        Request counts per latency bucket (see `LATENCY_BUCKETS`, seconds).
    collapsed : int
        Chunk reads answered by another reader's fetch of the same chunk, in flight at
        the time (request collapsing, `azarr.scheduler._shared`).
    cache_hits, cache_misses, cache_evictions, cache_revalidated : int
        Chunk reads answered by a decoded-chunk cache (`azarr.scheduler.ChunkCache`),
        reads that missed it, entries of this store evicted to make room, and hits
        checked against the store first (``recheck_cached_data``; also in ``cache_hits``).
    """

    def __init__(self, url: str = "") -> None:
        self._lock = threading.Lock()
        #: The store's URL without credentials (telemetry's ``azarr.store`` attribute).
        self.url = url
        self.concurrency_limit: int | None = None
        self.reset()

    def reset(self) -> None:
        """Zero every counter (the lowest limit restarts from the current one)."""
        with self._lock:
            self.requests = 0
            self.bytes_read = 0
            self.bytes_written = 0
            self.retries = 0
            self.errors = 0
            self.hedged = 0
            self.conflicts = 0
            self.throttled = 0
            self.collapsed = 0
            self.cache_hits = 0
            self.cache_misses = 0
            self.cache_evictions = 0
            self.cache_revalidated = 0
            self.concurrency_limit_min = self.concurrency_limit
            self.shard_index_hits = 0
            self.shard_index_misses = 0
            self.coalesced_requests = 0
            self.requests_saved = 0
            self.latency = [0] * (len(LATENCY_BUCKETS) + 1)
            self._recent: list[float] = []

    def record(
        self,
        seconds: float,
        *,
        read: int = 0,
        written: int = 0,
        failed: bool = False,
        throttled: bool = False,
    ) -> None:
        """Count one finished attempt taking ``seconds``, moving ``read``/``written`` bytes;
        a ``throttled`` one failed with "slow down"."""
        with self._lock:
            self.requests += 1
            self.bytes_read += read
            self.bytes_written += written
            if failed or throttled:
                self.errors += 1
                if throttled:
                    self.throttled += 1
            self.latency[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            if not (failed or throttled):
                self._remember((seconds,))
        observer = _request_observer
        if observer is not None:
            observer(self, seconds)

    def record_many(self, latencies: list[float], *, read: int = 0, written: int = 0) -> None:
        """Count finished successful attempts, one per entry of ``latencies`` (seconds), that
        moved ``read``/``written`` bytes in all: `record` of each under one lock, for
        the chunk jobs of blocking stores (a lock round per 1,600-byte chunk read cost as
        much as a fifth of the read)."""
        if not latencies:
            return
        bucket, buckets = bisect.bisect_left, LATENCY_BUCKETS
        with self._lock:
            self.requests += len(latencies)
            self.bytes_read += read
            self.bytes_written += written
            histogram = self.latency
            for seconds in latencies:
                histogram[bucket(buckets, seconds)] += 1
            self._remember(latencies)
        observer = _request_observer
        if observer is not None:
            for seconds in latencies:
                observer(self, seconds)

    def _remember(self, latencies: Sequence[float]) -> None:
        """Add successful latencies to the bounded window of recent ones that the hedging
        threshold reads: at most ``_RECENT_MAX``, cut to the newest ``_RECENT_KEEP`` when
        full. Caller holds the lock."""
        recent = self._recent
        recent.extend(latencies[-_RECENT_MAX:])
        if len(recent) > _RECENT_MAX:
            del recent[: len(recent) - _RECENT_KEEP]

    def count_retry(self) -> None:
        """Count one retry."""
        with self._lock:
            self.retries += 1

    def count_conflict(self) -> None:
        """Count one failed precondition that restarted a read-modify-write."""
        with self._lock:
            self.conflicts += 1

    def set_concurrency_limit(self, limit: int) -> None:
        """The store's request limit changed to ``limit`` (called by its `IOBudget`)."""
        with self._lock:
            self.concurrency_limit = limit
            if self.concurrency_limit_min is None or limit < self.concurrency_limit_min:
                self.concurrency_limit_min = limit

    def count_shard_index(self, *, hit: bool) -> None:
        """Count one shard index looked up in the index cache (found or not)."""
        with self._lock:
            if hit:
                self.shard_index_hits += 1
            else:
                self.shard_index_misses += 1

    def count_coalesced(self, ranges: int, requests: int, coalesced: int) -> None:
        """Count ``ranges`` byte ranges read with ``requests`` requests, ``coalesced`` of which
        served more than one range."""
        with self._lock:
            self.coalesced_requests += coalesced
            self.requests_saved += ranges - requests

    def count_shared(
        self, *, collapsed: int = 0, hits: int = 0, misses: int = 0, evictions: int = 0, revalidated: int = 0
    ) -> None:
        """Count chunk reads shared with another reader's fetch, or answered (or not) by a
        decoded-chunk cache, and cache entries evicted."""
        with self._lock:
            self.collapsed += collapsed
            self.cache_hits += hits
            self.cache_misses += misses
            self.cache_evictions += evictions
            self.cache_revalidated += revalidated

    def count_hedge(self) -> None:
        """Count one hedged backup request."""
        with self._lock:
            self.hedged += 1

    def latency_quantile(self, q: float) -> float | None:
        """The ``q`` quantile (0-1) of recent successful latencies in seconds, or None with < 20 samples."""
        with self._lock:
            recent = sorted(self._recent)
        if len(recent) < 20:
            return None
        return recent[min(len(recent) - 1, int(q * len(recent)))]

    def as_dict(self) -> dict[str, Any]:
        """The counters as a plain dict (JSON-ready); histogram keys are bucket upper bounds."""
        with self._lock:
            bounds = [f"<={b}s" for b in LATENCY_BUCKETS] + [f">{LATENCY_BUCKETS[-1]}s"]
            return {
                "requests": self.requests,
                "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written,
                "retries": self.retries,
                "errors": self.errors,
                "hedged": self.hedged,
                "conflicts": self.conflicts,
                "throttled": self.throttled,
                "concurrency_limit": self.concurrency_limit,
                "concurrency_limit_min": self.concurrency_limit_min,
                "shard_index_hits": self.shard_index_hits,
                "shard_index_misses": self.shard_index_misses,
                "coalesced_requests": self.coalesced_requests,
                "requests_saved": self.requests_saved,
                "collapsed": self.collapsed,
                "cache_hits": self.cache_hits,
                "cache_misses": self.cache_misses,
                "cache_evictions": self.cache_evictions,
                "cache_revalidated": self.cache_revalidated,
                "latency_histogram": dict(zip(bounds, self.latency, strict=True)),
            }

    def log(self, level: int = logging.INFO, store: Store | None = None) -> None:
        """Write the counters to the ``azarr.stats`` logger."""
        logger.log(level, "store stats %s: %s", store.url if store else "", self.as_dict())


# Called with (stats, seconds) for every attempt recorded (azarr.telemetry), or None.
_request_observer: Callable[[StoreStats, float], None] | None = None


def set_request_observer(observer: Callable[[StoreStats, float], None] | None) -> None:
    """Have ``observer(stats, seconds)`` called for every attempt recorded (None: nobody)."""
    global _request_observer
    _request_observer = observer


# Counters by store spec (Store.budget_key), like budgets: kept while used, and the most
# recently used ones (`SpecRegistry` says why not forever).
_stats: SpecRegistry[StoreStats] = SpecRegistry()


def _after_fork_in_child() -> None:
    # A lock another thread of the parent held at the fork would stay held forever here.
    _stats.after_fork()
    for stats in _stats.values():
        stats._lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def stats_for(store: Store) -> StoreStats:
    """The traffic counters of ``store``: one set per store spec, shared by every open of it,
    unpickled copies, read-only views and wrappers (like its budget). Kept while anything
    uses them (an open array, its budget) and for the store specs used most recently."""
    return _stats.get_or_create(store.budget_key, lambda: StoreStats(redact_url(store.url)))


def every_stats() -> list[StoreStats]:
    """The counters of every store spec kept now (in use, or among the most recently used),
    copied under the registry's lock (a metrics scrape runs on any thread while others open
    stores)."""
    return _stats.values()


def stats_of_spec(spec: StoreSpec) -> StoreStats | None:
    """The counters of the store spec ``spec``, if kept (see `stats_for`)."""
    return _stats.get(spec)
