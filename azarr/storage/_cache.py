"""An in-memory LRU cache in front of another store (zarr-python 2 ``LRUStoreCache``)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, get_args

from azarr.storage._base import ByteRange, Store
from azarr.storage._wrapper import WrapperStore

RecheckPolicy = Literal["always", "open", "never"]
"""When cached entries are re-fetched; see `LRUStoreCache`."""

# The Zarr v2 metadata documents, by last key segment. (Spelled out here rather than
# imported from azarr.metadata: the storage layer sits below the metadata layer.)
_METADATA_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def _is_metadata(key: str) -> bool:
    return key.rpartition("/")[2] in _METADATA_NAMES


class _Retry(Exception):
    """Told to tasks waiting on a fetch whose leader was cancelled: fetch yourselves."""


class _InFlight:
    """A whole-value fetch other tasks (on any loop or thread) can wait for."""

    __slots__ = ("cacheable", "future", "generation")

    def __init__(self, generation: int) -> None:
        self.future: concurrent.futures.Future[bytes | None] = concurrent.futures.Future()
        # RUNNING, so a waiter's cancellation (asyncio.wrap_future cancels the
        # concurrent future) cannot cancel the fetch others wait for.
        self.future.set_running_or_notify_cancel()
        self.generation = generation
        # Cleared when a write, delete or invalidation of the key overtakes the fetch:
        # its result may then be older than the store, and must not be cached.
        self.cacheable = True


class _State:
    """Everything cached, shared by a cache and its read-only views; guarded by ``lock``.

    A threading lock, not an asyncio one: one cache may serve several event loops
    (threads, successive ``asyncio.run`` calls). It is never held across an ``await``.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: OrderedDict[str, tuple[bytes, int]] = OrderedDict()  # key -> (value, generation)
        self.current_size = 0
        self.contains: dict[str, tuple[bool, int]] = {}  # key -> (exists, generation)
        self.prefixes: dict[str, tuple[list[str], int]] = {}  # list_prefix results
        self.dirs: dict[str, tuple[list[str], int]] = {}  # list_dir results
        self.inflight: dict[str, _InFlight] = {}
        self.generation = 0  # bumped by revalidate()
        self.epoch = 0  # bumped by every write, delete and invalidation
        self.hits = 0
        self.misses = 0
        _STATES.add(self)

    def after_fork(self) -> None:
        """In a forked child: the parent's lock may be held, and its fetches will never finish here."""
        self.lock = threading.Lock()
        for rec in self.inflight.values():
            rec.cacheable = False
        self.inflight = {}


_STATES: weakref.WeakSet[_State] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for state in list(_STATES):
        state.after_fork()


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)


class LRUStoreCache(WrapperStore):
    """Cache values, existence checks and listings of another store in memory, LRU-evicted.

    zarr-python 2 ``LRUStoreCache`` for azarr's async stores, with TensorStore-style
    revalidation of cached data. Intended for slow (remote) stores read repeatedly.

    Parameters
    ----------
    store : Store
        The wrapped store. Every write and delete goes to it.
    max_size : int or None
        Bytes of cached values at most (the sum of their lengths); ``None`` means
        unbounded. Least recently used values are evicted first; a value larger than
        ``max_size`` is not cached. Existence checks and listings are small and are
        not counted (as in zarr-python 2).
    recheck_cached_data : {"open", "always", "never"}
        When cached entries are fetched again (TensorStore ``recheck_cached_data`` /
        ``recheck_cached_metadata``):

        * ``"open"`` (default): everything cached before the latest
          `revalidate` is stale, and is re-fetched on its next use; anything
          cached since is trusted. `azarr.open_array`, `azarr.open_group`,
          `azarr.open` and `azarr.open_consolidated` call
          `revalidate`, so each (re)open sees what other writers changed
          until then, and reads between opens cost no requests for cached keys.
        * ``"always"``: as ``"open"``, and moreover metadata documents
          (``.zarray``, ``.zgroup``, ``.zattrs``, ``.zmetadata``), their existence
          checks and listings are never answered from the cache: every request
          reaches the store. Chunk values stay cached.
        * ``"never"``: cached entries are trusted until evicted, invalidated, or
          replaced by a write through this cache (zarr-python 2 behaviour).
          `revalidate` has no effect.

    Attributes
    ----------
    hits, misses : int
        ``get`` calls answered from the cache (including those that waited for a
        concurrent fetch of the same key) and calls that went to the store
        (zarr-python 2 names).

    Notes
    -----
    * A ``get`` of a missing key caches its absence, so later reads of that key (a
      chunk never written) cost nothing either.
    * A byte-range ``get`` is served from a cached whole value; a range of a value
      not in the cache is read from the store and not cached.
    * Concurrent ``get`` calls for one key, from any tasks, loops or threads, share one
      request to the store.
    * Writes go through and update the cache: ``set`` caches the new value, ``delete``
      caches the absence, and listings that could include the key are dropped.
      Changes made to the wrapped store by others are seen as the policy says, or
      after `invalidate`.
    * The request budget is the wrapped store's (`budget_key`), so wrapping
      never adds connections.
    * Pickling keeps the wrapped store and the settings; the copy starts empty. A
      forked child keeps the cached entries but not the parent's fetches in flight.
    * ``close()`` closes the wrapped store; the cache is kept.

    Examples
    --------
    >>> import asyncio
    >>> from azarr.storage import MemoryStore
    >>> inner = MemoryStore({"a/0": b"chunk"})
    >>> cache = LRUStoreCache(inner, max_size=2**28)
    >>> asyncio.run(cache.get("a/0")), asyncio.run(cache.get("a/0"))
    (b'chunk', b'chunk')
    >>> cache.hits, cache.misses
    (1, 1)
    """

    wrapper_name = "lru-cache"
    # Values it serves come from its cache, without a generation: no conditional pass-through.
    forwards_conditional = False

    def __init__(
        self,
        store: Store,
        *,
        max_size: int | None,
        recheck_cached_data: RecheckPolicy = "open",
    ) -> None:
        if max_size is not None and max_size < 0:
            raise ValueError(f"max_size must be >= 0 bytes or None, got {max_size}")
        if recheck_cached_data not in get_args(RecheckPolicy):
            raise ValueError(
                f"recheck_cached_data must be one of {get_args(RecheckPolicy)}, got {recheck_cached_data!r}"
            )
        super().__init__(store)
        self.max_size = max_size
        self.recheck_cached_data: RecheckPolicy = recheck_cached_data
        self._state = _State()

    # ------------------------------------------------------------------ identity
    @property
    def store(self) -> Store:
        """The wrapped store."""
        return self.inner

    def wrapper_params(self) -> dict[str, Any]:
        return {"max_size": self.max_size, "recheck_cached_data": self.recheck_cached_data}

    def __repr__(self) -> str:
        size = "unbounded" if self.max_size is None else f"{self.max_size}"
        return (
            f"LRUStoreCache({self.inner!r}, max_size={size}, "
            f"recheck_cached_data={self.recheck_cached_data!r})"
        )

    @property
    def hits(self) -> int:
        """``get`` calls answered without a request to the wrapped store."""
        return self._state.hits

    @property
    def misses(self) -> int:
        """``get`` calls that went to the wrapped store."""
        return self._state.misses

    @property
    def current_size(self) -> int:
        """Bytes of values cached now."""
        return self._state.current_size

    @property
    def generation(self) -> int:
        """How many times `revalidate` ran; entries cached before the last one are stale."""
        return self._state.generation

    # ------------------------------------------------------------------ cache control
    async def revalidate(self) -> None:
        """Mark everything cached so far as stale (policies ``"open"`` and ``"always"``).

        Stale entries are fetched again on their next use. Called by
        `azarr.open_array` and the other opening functions; a wrapped store
        with its own ``revalidate`` (a nested cache) is revalidated too.
        """
        with self._state.lock:
            self._state.generation += 1
        await self.inner.revalidate()

    def invalidate(self) -> None:
        """Drop every cached value, existence check and listing (zarr-python 2 ``invalidate``)."""
        with self._state.lock:
            self._drop_values()
            self._drop_keys()

    def invalidate_values(self) -> None:
        """Drop every cached value (zarr-python 2 ``invalidate_values``)."""
        with self._state.lock:
            self._drop_values()

    def invalidate_keys(self) -> None:
        """Drop cached existence checks (including cached absences) and listings (zarr-python 2 ``invalidate_keys``)."""
        with self._state.lock:
            self._drop_keys()

    # The _drop/_forget/_remember helpers run with the state lock held.
    def _drop_values(self) -> None:
        st = self._state
        st.values.clear()
        st.current_size = 0
        for rec in st.inflight.values():
            rec.cacheable = False
        st.inflight.clear()
        st.epoch += 1

    def _drop_keys(self) -> None:
        st = self._state
        st.contains.clear()
        st.prefixes.clear()
        st.dirs.clear()
        st.epoch += 1

    def _fresh(self, key: str | None, generation: int) -> bool:
        """Whether an entry cached at ``generation`` may answer a request (``key`` None: a listing)."""
        policy = self.recheck_cached_data
        if policy == "never":
            return True
        if policy == "always" and (key is None or _is_metadata(key)):
            return False
        return generation == self._state.generation

    def _bypass(self, key: str | None) -> bool:
        """True if requests for ``key`` (None: listings) always go to the store."""
        return self.recheck_cached_data == "always" and (key is None or _is_metadata(key))

    def _drop_value(self, key: str) -> None:
        st = self._state
        old = st.values.pop(key, None)
        if old is not None:
            st.current_size -= len(old[0])

    def _forget(self, key: str) -> None:
        """Drop the value of ``key`` and detach any fetch of it in flight (a write overtook it)."""
        st = self._state
        self._drop_value(key)
        rec = st.inflight.pop(key, None)
        if rec is not None:
            rec.cacheable = False

    def _remember(self, key: str, value: bytes | None, generation: int) -> None:
        st = self._state
        self._forget(key)
        st.contains[key] = (value is not None, generation)
        if value is None or (self.max_size is not None and len(value) > self.max_size):
            return
        st.values[key] = (value, generation)
        st.current_size += len(value)
        if self.max_size is not None:
            while st.current_size > self.max_size:
                _, (evicted, _) = st.values.popitem(last=False)
                st.current_size -= len(evicted)

    def _drop_listings_of(self, key: str) -> None:
        """Drop cached listings that could include ``key``."""
        st = self._state
        for cache in (st.prefixes, st.dirs):
            for prefix in [p for p in cache if key.startswith(p)]:
                del cache[prefix]

    def _lookup(self, key: str) -> tuple[bool, bytes | None]:
        """``(True, value-or-None)`` if the cache can answer a get of ``key``; counts the hit."""
        st = self._state
        entry = st.values.get(key)
        if entry is not None:
            if self._fresh(key, entry[1]):
                st.values.move_to_end(key)
                st.hits += 1
                return True, entry[0]
            self._drop_value(key)  # stale: free its bytes now, it will be fetched again
        known = st.contains.get(key)
        if known is not None and not known[0] and self._fresh(key, known[1]):
            st.hits += 1
            return True, None
        return False, None

    # ------------------------------------------------------------------ reads
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        st = self._state
        if self._bypass(key):
            with st.lock:
                st.misses += 1
            return await self.inner.get(key, byte_range)
        while True:
            with st.lock:
                found, value = self._lookup(key)
                if found:
                    if value is None or byte_range is None:
                        return value
                    return byte_range.apply(value)
                if byte_range is not None:
                    # A part of an uncached value: read just that part, cache nothing.
                    st.misses += 1
                    leader = False
                    rec = None
                else:
                    rec = st.inflight.get(key)
                    leader = rec is None
                    if rec is None:
                        rec = st.inflight[key] = _InFlight(st.generation)
                        st.misses += 1
                    else:
                        st.hits += 1
            if rec is None:
                return await self.inner.get(key, byte_range)
            if leader:
                return await self._fetch(key, rec)
            try:
                return await asyncio.wrap_future(rec.future)
            except _Retry:
                with st.lock:
                    st.hits -= 1  # counted again on the next attempt
                continue

    async def _fetch(self, key: str, rec: _InFlight) -> bytes | None:
        st = self._state
        try:
            value = await self.inner.get(key)
        except BaseException as exc:
            with st.lock:
                if st.inflight.get(key) is rec:
                    del st.inflight[key]
            # A cancelled leader must not fail its waiters: they fetch for themselves.
            rec.future.set_exception(exc if isinstance(exc, Exception) else _Retry())
            raise
        with st.lock:
            if st.inflight.get(key) is rec:
                del st.inflight[key]
            if rec.cacheable:
                self._remember(key, value, rec.generation)
        rec.future.set_result(value)
        return value

    async def _exists(self, key: str) -> bool:
        st = self._state
        if self._bypass(key):
            return await self.inner.exists(key)
        with st.lock:
            entry = st.values.get(key)
            if entry is not None and self._fresh(key, entry[1]):
                return True
            known = st.contains.get(key)
            if known is not None and self._fresh(key, known[1]):
                return known[0]
            epoch, generation = st.epoch, st.generation
        exists = await self.inner.exists(key)
        with st.lock:
            if st.epoch == epoch:  # no write or invalidation overtook the check
                st.contains[key] = (exists, generation)
        return exists

    async def _getsize(self, key: str) -> int:
        st = self._state
        if not self._bypass(key):
            with st.lock:
                entry = st.values.get(key)
                if entry is not None and self._fresh(key, entry[1]):
                    return len(entry[0])
                known = st.contains.get(key)
                if known is not None and not known[0] and self._fresh(key, known[1]):
                    raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return await self.inner.getsize(key)

    async def _listing(
        self, cache: dict[str, tuple[list[str], int]], prefix: str, fetch: Callable[[str], AsyncIterator[str]]
    ) -> list[str]:
        st = self._state
        if self._bypass(None):
            return [name async for name in fetch(prefix)]
        with st.lock:
            cached = cache.get(prefix)
            if cached is not None and self._fresh(None, cached[1]):
                return cached[0]
            epoch, generation = st.epoch, st.generation
        names = [name async for name in fetch(prefix)]
        with st.lock:
            if st.epoch == epoch:  # no write or invalidation overtook the listing
                cache[prefix] = (names, generation)
        return names

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._listing(self._state.prefixes, prefix, self.inner.list_prefix):
            yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await self._listing(self._state.dirs, prefix, self.inner.list_dir):
            yield name

    # ------------------------------------------------------------------ writes
    async def _set(self, key: str, value: bytes) -> None:
        await self._write_through(key, self.inner.set(key, value), value)

    async def _delete(self, key: str) -> None:
        await self._write_through(key, self.inner.delete(key), None)

    async def _write_through(self, key: str, write: Awaitable[None], new_value: bytes | None) -> None:
        """Await ``write`` on the wrapped store, then cache ``new_value`` (None: missing) for ``key``."""
        st = self._state
        try:
            await write
        except BaseException:
            with st.lock:  # the store may or may not hold the new value now
                self._forget(key)
                st.contains.pop(key, None)
                self._drop_listings_of(key)
                st.epoch += 1
            raise
        with st.lock:
            self._remember(key, new_value, st.generation)
            self._drop_listings_of(key)
            st.epoch += 1

    async def _delete_prefix(self, prefix: str) -> None:
        st = self._state
        try:
            await self.inner.delete_prefix(prefix)
        finally:
            with st.lock:
                for key in [k for k in st.values if k.startswith(prefix)]:
                    self._forget(key)
                for key in [k for k in st.inflight if k.startswith(prefix)]:
                    self._forget(key)
                for key in [k for k in st.contains if k.startswith(prefix)]:
                    del st.contains[key]
                st.prefixes.clear()
                st.dirs.clear()
                st.epoch += 1

    async def close(self) -> None:
        """Close the wrapped store (its connections); the cache is kept."""
        await self.inner.close()
