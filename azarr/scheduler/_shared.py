"""One read of a chunk for the whole process: request collapsing and the decoded-chunk cache.

A service answering many requests for overlapping tiles, or a loader whose workers
share a process, asks for the same chunk many times at once. Without help each ask
is its own GET and its own decode. Here:

* **Request collapsing** (`SharedReads`): concurrent reads of one chunk key of one
  store spec, from any array object, task, thread or event loop, share one fetch and
  one decode. The first reader (the *leader*) fetches; readers arriving while it does
  (*followers*) wait for its decoded chunk and copy their selection out of it. A
  leader reading alone decodes straight into its output as if nothing were shared;
  only when followers wait does it decode into a chunk of its own that they all read.
  A cancelled leader does not fail its followers: they are told to read again (one
  of them leads). A fetch in flight when this process writes or deletes the key is
  detached: readers arriving after the write never join a fetch older than it.
  Reads joining a fetch in flight see the chunk as of that fetch, which began before
  them: for data other processes rewrite while it is read, as for any concurrent
  read, either value may come back (``azarr.config`` ``collapse_reads`` turns it off).
* **The decoded-chunk cache** (`ChunkCache`): opt-in, bounded in bytes, least
  recently used chunks evicted (``cachetools.LRUCache``), keyed by store spec and
  key, and checked against the generation each chunk was read at (TensorStore's
  ``recheck_cached_data``, see `ChunkCache`). Writes and deletes through this process
  drop the entries they change.

The inner chunks of a sharded array (Zarr v3 ``sharding_indexed``) are chunks here too,
keyed by their shard's key and their number in it (`inner_key`), and remember the
shard's generation: a write or delete of the shard drops them all. A read of every inner
chunk of a shard shares one load of the whole shard instead (`whole_shard_key`).

The values are opaque here (the pipeline's decoded chunks, read-only NumPy arrays,
or None for a chunk that is not stored); this module only keeps and shares them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import time
import weakref
from collections.abc import Hashable
from typing import Any, Literal

import cachetools

from azarr.storage import StoreSpec

__all__ = [
    "SHARED_READS",
    "CacheEntry",
    "ChunkCache",
    "JoinAgain",
    "Lead",
    "Load",
    "RecheckCachedData",
    "SharedReads",
    "default_chunk_cache",
    "inner_key",
    "whole_shard_key",
]

RecheckCachedData = bool | Literal["open"] | float
"""When a cached chunk is checked against the store before it is used (see `ChunkCache`)."""

#: What a chunk that is not stored costs in a cache (it holds no array).
_MISSING_NBYTES = 64

#: Between a shard's key and an inner chunk's number in the keys of inner chunks: no store
#: key holds it (keys are validated text paths), so ``shard + INNER`` prefixes only them.
INNER = "\x00"


def inner_key(shard_key: str, local: int) -> str:
    """The key inner chunk ``local`` (its number in the shard, C order) of shard
    ``shard_key`` is shared and cached under."""
    return f"{shard_key}{INNER}{local}"


def whole_shard_key(shard_key: str) -> str:
    """The key a read of every inner chunk of shard ``shard_key`` is shared under: one load
    per shard, not per inner chunk (no inner chunk's key: their numbers are digits). A write
    or delete of the shard detaches it with the shard's inner chunks (`SharedReads.forget`)."""
    return f"{shard_key}{INNER}*"


class JoinAgain(Exception):
    """Told to followers whose leader was cancelled (or whose fetch a write detached):
    read again, one of them leads."""


class Load:
    """A fetch and decode of one chunk that other readers (any loop, any thread) can wait for.

    ``future`` is made when the first follower joins (`SharedReads.join`, under the lock):
    most loads have none (a whole-array read of a sharded array makes one per inner chunk),
    and a ``concurrent.futures.Future`` with its condition and lock is ~10 µs of event-loop
    time each.
    """

    __slots__ = ("cacheable", "followers", "future")

    def __init__(self) -> None:
        self.future: concurrent.futures.Future[Any] | None = None
        self.followers = 0
        # Cleared when a write or delete of the key overtakes the load: its result may
        # then be older than the store, and must not be cached.
        self.cacheable = True

    def _follow(self) -> None:
        """Count a follower in (caller holds the lock), making the future it waits on."""
        if self.future is None:
            self.future = concurrent.futures.Future()
            # RUNNING, so a follower's cancellation (asyncio.wrap_future cancels the concurrent
            # future) cannot cancel the load the others wait for.
            self.future.set_running_or_notify_cancel()
        self.followers += 1


class Lead:
    """The leader's hold on one load: it ends the load exactly once, with `alone`
    (nobody follows), `publish` (a value for the followers) or `fail`; used as a context
    manager, an error leaving the block fails the load if it is still open (a cancelled
    leader's followers then read again).

    One protocol for every shared read (whole chunks, inner chunks, whole shards):
    ``lead, value = await reads.lead_or_follow(ident)``, then for the leader:

        with lead:
            data = await fetch()
            if lead.alone():
                ...  # decode straight into this read's output
            else:
                lead.publish(decode_once(data))  # the followers copy from it
    """

    __slots__ = ("_load", "_reads", "ident")

    def __init__(self, reads: SharedReads, ident: tuple[StoreSpec, str], load: Load) -> None:
        self._reads = reads
        self.ident = ident
        self._load: Load | None = load

    def alone(self) -> bool:
        """The leader's bytes arrived: True (and the load ended) if nobody follows, so the
        leader decodes into its own output; False: followers wait, `publish` for them."""
        assert self._load is not None, "the load was ended"
        if self._reads._alone(self.ident, self._load):
            self._load = None
            return True
        return False

    def publish(self, value: Any) -> bool:
        """End the load with ``value`` for its followers; True if it may be cached (no write
        overtook the read)."""
        load, self._load = self._load, None
        assert load is not None, "the load was ended"
        return self._reads._publish(self.ident, load, value)

    def fail(self, exc: BaseException) -> None:
        """End the load with the leader's error (followers raise it; a cancelled leader's
        followers read again); nothing if it was ended."""
        load, self._load = self._load, None
        if load is not None:
            self._reads._fail(self.ident, load, exc)

    def __enter__(self) -> Lead:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None:
            self.fail(exc)


class SharedReads:
    """The loads of chunks in flight in this process, by ``(store spec, key)``.

    Thread-safe: one lock, never held across an ``await``. The process has one
    (`SHARED_READS`); tests may make their own.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loads: dict[tuple[StoreSpec, str], Load] = {}
        #: Reads answered by another reader's fetch (followers whose leader delivered).
        self.collapsed = 0
        _ALL.add(self)

    def join(self, ident: tuple[StoreSpec, str]) -> Lead | Load:
        """A `Lead` if this read leads the load of ``ident`` (none was in flight: it must end
        it), else the `Load` in flight, to `wait` for (a follower)."""
        with self._lock:
            load, leader = self._join_locked(ident)
        return Lead(self, ident, load) if leader else load

    def join_many(self, idents: list[tuple[StoreSpec, str]]) -> list[Lead | Load]:
        """`join` for each of ``idents``, under one hold of the lock (the inner chunks of a
        shard: thousands per read)."""
        with self._lock:
            joined = [self._join_locked(ident) for ident in idents]
        return [
            Lead(self, ident, load) if leader else load
            for ident, (load, leader) in zip(idents, joined, strict=True)
        ]

    def _join_locked(self, ident: tuple[StoreSpec, str]) -> tuple[Load, bool]:
        load = self._loads.get(ident)
        if load is not None:
            load._follow()
            return load, False
        load = self._loads[ident] = Load()
        return load, True

    async def wait(self, load: Load) -> Any:
        """A follower's wait for ``load``: its value, or its leader's error.

        Raises
        ------
        JoinAgain
            The leader was cancelled: `join` again.
        """
        assert load.future is not None  # made when this follower joined
        try:
            value = await asyncio.wrap_future(load.future)
        except BaseException:
            with self._lock:
                load.followers -= 1
            raise
        with self._lock:
            self.collapsed += 1
        return value

    async def lead_or_follow(self, ident: tuple[StoreSpec, str]) -> tuple[Lead | None, Any]:
        """``(lead, None)`` for the leader of ``ident`` (who must end it: `Lead`), or
        ``(None, value)`` for a follower whose leader delivered (a follower whose leader
        was cancelled joins again, and may lead)."""
        while True:
            joined = self.join(ident)
            if isinstance(joined, Lead):
                return joined, None
            try:
                return None, await self.wait(joined)
            except JoinAgain:
                continue

    def alone_many(self, leads: list[Lead]) -> list[bool]:
        """`Lead.alone` for each of ``leads`` (all open), under one hold of the lock."""
        flags: list[bool] = []
        with self._lock:
            for lead in leads:
                assert lead._load is not None, "the load was ended"
                flags.append(self._alone_locked(lead.ident, lead._load))
        for lead, flag in zip(leads, flags, strict=True):
            if flag:
                lead._load = None
        return flags

    def _alone(self, ident: tuple[StoreSpec, str], load: Load) -> bool:
        """`Lead.alone`."""
        with self._lock:
            return self._alone_locked(ident, load)

    def _alone_locked(self, ident: tuple[StoreSpec, str], load: Load) -> bool:
        if load.followers:
            return False
        if self._loads.get(ident) is load:
            del self._loads[ident]  # nobody waits, and nobody can join any more
        return True

    def _publish(self, ident: tuple[StoreSpec, str], load: Load, value: Any) -> bool:
        """`Lead.publish`."""
        with self._lock:
            if self._loads.get(ident) is load:
                del self._loads[ident]
            cacheable = load.cacheable
            future = load.future  # nobody can join once the load is out of the table
        if future is not None:
            future.set_result(value)
        return cacheable

    def _fail(self, ident: tuple[StoreSpec, str], load: Load, exc: BaseException) -> None:
        """`Lead.fail`: followers raise ``exc``, or, for a cancelled leader, `JoinAgain`."""
        with self._lock:
            if self._loads.get(ident) is load:
                del self._loads[ident]
            future = load.future
        if future is not None:
            future.set_exception(exc if isinstance(exc, Exception) else JoinAgain())

    def forget(self, spec: StoreSpec, key: str | None = None, *, prefix: str | None = None) -> None:
        """A write or delete of ``key`` (or of every key under ``prefix``) finished: detach
        the loads in flight of it, so later readers fetch again, and drop it from every
        `ChunkCache`."""
        if not self._loads and not _CACHES:  # every chunk write passes here: nothing to do
            return
        if self._loads:
            with self._lock:
                if key is not None:
                    load = self._loads.pop((spec, key), None)
                    if load is not None:
                        load.cacheable = False
                    inner = key + INNER  # the shard's inner chunks (few loads are in flight)
                    for ident in [i for i in self._loads if i[0] == spec and i[1].startswith(inner)]:
                        self._loads.pop(ident).cacheable = False
                else:
                    for ident in [i for i in self._loads if i[0] == spec and i[1].startswith(prefix or "")]:
                        self._loads.pop(ident).cacheable = False
        for cache in _all_caches():
            cache.discard(spec, key, prefix=prefix)

    def in_flight(self) -> int:
        """Loads in flight now."""
        return len(self._loads)

    def _after_fork(self) -> None:
        # The parent's lock may be held, and its loads will never finish here.
        self._lock = threading.Lock()
        for load in self._loads.values():
            load.cacheable = False
        self._loads = {}


class CacheEntry:
    """One cached chunk: its decoded value (None: not stored), the generation it was read
    at (its shard's, for an inner chunk), the codec token that decoded it, its size."""

    __slots__ = ("cached_at", "generation", "nbytes", "token", "value")

    def __init__(self, value: Any, generation: object, token: Hashable, nbytes: int) -> None:
        self.value = value
        self.generation = generation
        self.token = token
        self.nbytes = nbytes
        self.cached_at = time.monotonic()

    @property
    def checkable(self) -> bool:
        """Whether `matches` can say the entry is current: it has a generation, or it
        says the chunk is not stored."""
        return self.generation is not None or self.value is None

    def matches(self, found: tuple[int, object] | None) -> bool:
        """Whether the store's `Store.stat` answer for the chunk's key (its shard's, for an
        inner chunk) says the entry is current: the same generation, or still missing."""
        if self.generation is None:
            return self.value is None and found is None
        return found is not None and found[1] is not None and found[1] == self.generation


class _LRU(cachetools.LRUCache[tuple[StoreSpec, str], CacheEntry]):
    """cachetools' LRU, counting what it evicts to make room, and knowing which inner
    chunks of each shard it holds (so a write of the shard drops them without a scan)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize, getsizeof=lambda entry: entry.nbytes)
        self.evicted: list[tuple[StoreSpec, str]] = []
        self.inner: dict[tuple[StoreSpec, str], set[str]] = {}

    def __setitem__(self, ident: tuple[StoreSpec, str], entry: CacheEntry) -> None:
        super().__setitem__(ident, entry)
        shard, inner, _ = ident[1].partition(INNER)
        if inner:
            self.inner.setdefault((ident[0], shard), set()).add(ident[1])

    def __delitem__(self, ident: tuple[StoreSpec, str]) -> None:
        super().__delitem__(ident)
        shard, inner, _ = ident[1].partition(INNER)
        if inner:
            held = self.inner.get((ident[0], shard))
            if held is not None:
                held.discard(ident[1])
                if not held:
                    del self.inner[(ident[0], shard)]

    def popitem(self) -> tuple[tuple[StoreSpec, str], CacheEntry]:
        item = super().popitem()
        self.evicted.append(item[0])
        return item

    def clear(self) -> None:
        super().clear()
        self.inner.clear()


class ChunkCache:
    """Decoded chunks kept in memory, bounded in bytes, least recently used evicted first.

    Opt-in: arrays use the process's cache when ``azarr.config`` ``chunk_cache_bytes``
    is above 0 (`default_chunk_cache`), or the one given to ``open_array(cache=...)``.
    Entries are keyed by store spec and chunk key and remember the generation the chunk
    was read at (S3 ETag, GCS generation, ...) and the codec that decoded it; a write or
    delete of the key through this process drops them. A sharded array's inner chunks
    are entries of their own, checked by their shard's generation (one metadata request
    per shard read, however many of its inner chunks it uses).

    Parameters
    ----------
    max_bytes : int
        Bytes of decoded chunks kept at most (a chunk larger than this is not kept).
    recheck_cached_data : bool, "open" or float, default True
        TensorStore's ``recheck_cached_data``: when a cached chunk is checked against the
        store (one metadata request, ``Store.stat``: the chunk is used if its generation
        is unchanged, else read again) before it is used. True: every time; False: never
        (data that does not change); ``"open"``: if it was cached before the array reading
        it was opened; a number: if it was cached more than that many seconds ago (trust
        for a time; TensorStore's number is a point in time instead). A chunk whose store
        gives no generation is read again whenever it would be checked, as is one of a
        store on this machine (memory, local files: no generation is kept, as a file's
        holds the file open, and reading costs about what checking does).

    Attributes
    ----------
    hits, misses, evictions, revalidated : int
        Reads answered from the cache, reads that had to fetch, entries evicted to make
        room, and hits that were checked against the store first (also in `hits`).
        Per store in `azarr.scheduler.StoreStats` too.

    Notes
    -----
    Cached arrays are shared and read-only: readers get copies of their selections.
    Eviction is `cachetools.LRUCache`'s. Thread-safe; one cache may serve every event
    loop of the process.
    """

    def __init__(self, max_bytes: int, *, recheck_cached_data: RecheckCachedData = True) -> None:
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        _check_recheck(recheck_cached_data)
        self.max_bytes = int(max_bytes)
        self.recheck_cached_data: RecheckCachedData = recheck_cached_data
        self._lock = threading.Lock()
        self._lru = _LRU(max(1, self.max_bytes))
        self.hits = self.misses = self.evictions = self.revalidated = 0
        with _CACHES_LOCK:
            _CACHES.add(self)

    @property
    def current_bytes(self) -> int:
        """Bytes of decoded chunks held now."""
        return int(self._lru.currsize)

    def __len__(self) -> int:
        return len(self._lru)

    def lookup(self, ident: tuple[StoreSpec, str], token: Hashable) -> CacheEntry | None:
        """The entry of ``ident`` decoded by ``token``'s codec, or None (not counted here: a
        lookup may be followed by a revalidation; see `count`)."""
        with self._lock:
            entry = self._lru.get(ident)
        return entry if entry is not None and entry.token == token else None

    def needs_check(self, entry: CacheEntry, opened_at: float) -> bool:
        """Whether ``entry`` must be checked against the store before use (see the class)."""
        recheck = self.recheck_cached_data
        if recheck is True:
            return True
        if recheck is False:
            return False
        if recheck == "open":
            return entry.cached_at < opened_at
        return time.monotonic() - entry.cached_at > float(recheck)

    def count(self, *, hits: int = 0, misses: int = 0, revalidated: int = 0) -> None:
        """Count reads answered from the cache (``revalidated`` of them after a check) and
        reads it could not answer."""
        with self._lock:
            self.hits += hits
            self.misses += misses
            self.revalidated += revalidated

    def put(
        self, ident: tuple[StoreSpec, str], value: Any, generation: object, token: Hashable
    ) -> list[StoreSpec]:
        """Keep ``value`` (a read-only array, or None: not stored) read at ``generation``;
        the specs of the entries evicted for it."""
        nbytes = _MISSING_NBYTES if value is None else int(value.nbytes)
        if nbytes > self.max_bytes:
            self.discard(ident[0], ident[1])
            return []
        with self._lock:
            self._lru[ident] = CacheEntry(value, generation, token, nbytes)
            evicted, self._lru.evicted = self._lru.evicted, []
            self.evictions += len(evicted)
        return [spec for spec, _ in evicted]

    def touch(self, entry: CacheEntry) -> None:
        """``entry`` was just checked against the store: trusted from now."""
        entry.cached_at = time.monotonic()

    def discard(self, spec: StoreSpec, key: str | None, *, prefix: str | None = None) -> None:
        """Drop the entry of ``key`` (and of its inner chunks, if it is a shard), or of
        every key under ``prefix``, of ``spec``."""
        with self._lock:
            if key is not None:
                self._lru.pop((spec, key), None)
                for inner in list(self._lru.inner.get((spec, key), ())):
                    self._lru.pop((spec, inner), None)
            else:
                for ident in [i for i in self._lru if i[0] == spec and i[1].startswith(prefix or "")]:
                    del self._lru[ident]

    def clear(self) -> None:
        """Drop every entry (the counters are kept)."""
        with self._lock:
            self._lru.clear()

    def _after_fork(self) -> None:
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"ChunkCache(max_bytes={self.max_bytes}, held={self.current_bytes}, "
            f"recheck_cached_data={self.recheck_cached_data!r})"
        )


def _check_recheck(value: object) -> None:
    if value is True or value is False or value == "open":
        return
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return
    raise ValueError(f"recheck_cached_data must be True, False, 'open' or seconds >= 0, got {value!r}")


_ALL: weakref.WeakSet[SharedReads] = weakref.WeakSet()
_CACHES: weakref.WeakSet[ChunkCache] = weakref.WeakSet()
_CACHES_LOCK = threading.Lock()  # a WeakSet may not grow while another thread lists it


def _all_caches() -> list[ChunkCache]:
    with _CACHES_LOCK:
        return list(_CACHES)


#: The process's loads in flight.
SHARED_READS = SharedReads()

_default: ChunkCache | None = None
_default_lock = threading.Lock()


def default_chunk_cache() -> ChunkCache | None:
    """The process's decoded-chunk cache, sized by ``azarr.config`` ``chunk_cache_bytes``
    and checked by ``chunk_cache_recheck`` (None while ``chunk_cache_bytes`` is 0, the
    default). Changing the settings resizes it (emptied) from the next call."""
    from azarr import config

    max_bytes = int(config.get("chunk_cache_bytes"))
    if max_bytes <= 0:
        return None
    recheck = config.get("chunk_cache_recheck")
    global _default
    cache = _default
    if cache is None or cache.max_bytes != max_bytes or cache.recheck_cached_data != recheck:
        with _default_lock:
            cache = _default
            if cache is None or cache.max_bytes != max_bytes or cache.recheck_cached_data != recheck:
                cache = _default = ChunkCache(max_bytes, recheck_cached_data=recheck)
    return cache


def _after_fork_in_child() -> None:
    for shared in list(_ALL):
        shared._after_fork()
    global _CACHES_LOCK
    _CACHES_LOCK = threading.Lock()
    for cache in list(_CACHES):
        cache._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
