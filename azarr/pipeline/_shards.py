"""The inner chunks of a sharded array as keys of a store: a key-value adapter over shard objects.

TensorStore's ``kvstore/zarr3_sharding_indexed``, in azarr's terms: a sharded array's
chunk pipeline reads and writes *inner* chunks (selections, decoding, merging, encoding,
``write_empty_chunks`` are the pipeline's, unchanged), and this adapter turns "inner
chunks ``locals`` of shard ``key``" into store requests through the array's `StoreIO`
(its budget, retries, timeouts and stats). It owns what only shards have:

* **the index**: read with one ranged request (a suffix range when it is at the end),
  checked (`ShardIndex.check`), and kept in `SHARD_INDEXES` -- a process-wide LRU from
  ``cachetools``, bounded in bytes (``azarr.config`` ``shard_index_cache_bytes``), holding
  per (store spec, shard key) the index of the generation it was read at;
* **one version per read**: on stores with conditional reads every data request is pinned
  to the generation the index came from (S3/Azure ``If-Match``, GCS ``generation=``, the
  local file's inode, the memory store's value), so a shard replaced mid-read -- or a cached
  index gone stale -- fails the request (`PreconditionFailedError`), the index is dropped
  and the read starts again: never inner chunks of two versions. Stores without them
  (HTTP, fsspec) get no cache and unpinned reads;
* **coalescing**: the inner chunks a read needs are byte ranges of the shard, planned into
  runs by the shared rule (`azarr.scheduler._coalesce`, ``coalesce_max_gap`` /
  ``coalesce_max_bytes``) and read one ranged request per run; a read needing most of a
  shard whose index is not cached reads the whole shard in one GET instead;
* **writes**: a whole shard is one PUT (or a delete when no inner chunk is stored); a shard
  written in part is an optimistic read-modify-write -- the shard read with its generation,
  merged by the caller, stored only if still that generation (or still absent), again on
  conflict -- serialised per shard within the process (`key_lock`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import numpy as np
from cachetools import LRUCache

from azarr import config
from azarr.codecs._sharding import ShardIndex, ShardingSpec
from azarr.errors import PreconditionFailedError
from azarr.pipeline._locks import key_lock
from azarr.scheduler import StoreIO
from azarr.scheduler._coalesce import read_ranges
from azarr.storage import ByteRange, Generation

__all__ = ["SHARD_INDEXES", "ShardIndexCache", "ShardedChunks"]

Parts = list[memoryview | None]
"""The stored bytes of a shard's inner chunks (views of one body), None where not stored."""


class ShardIndexCache:
    """Decoded shard indexes by (store spec, shard key), each with the generation it was read at.

    An LRU (``cachetools.LRUCache``) bounded by the indexes' bytes, ``azarr.config``
    ``shard_index_cache_bytes`` (read at each insertion; 0 keeps nothing). Only indexes
    with a generation are kept: every read using one is pinned to that generation, so a
    stale entry costs one failed request and a re-read, never wrong data. Thread-safe
    (event loops in several threads share it).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limit = -1
        self._lru: LRUCache[tuple[Any, str], tuple[Generation, ShardIndex]] = LRUCache(0)

    def get(self, spec: Any, key: str) -> tuple[Generation, ShardIndex] | None:
        """The cached (generation, index) of shard ``key`` in the store of ``spec``, or None."""
        with self._lock:
            return self._lru.get((spec, key))

    def put(self, spec: Any, key: str, generation: Generation, index: ShardIndex) -> None:
        """Keep ``index`` of shard ``key`` at ``generation`` (evicting the least recently used)."""
        limit = int(config.get("shard_index_cache_bytes"))
        with self._lock:
            if limit != self._limit:
                self._lru = LRUCache(limit, getsizeof=_entry_size)
                self._limit = limit
            if index.nbytes <= limit:
                self._lru[(spec, key)] = (generation, index)

    def discard(self, spec: Any, key: str) -> None:
        """Forget shard ``key`` (written, or found stale)."""
        with self._lock:
            self._lru.pop((spec, key), None)

    def clear(self) -> None:
        """Forget every index."""
        with self._lock:
            self._lru.clear()

    @property
    def nbytes(self) -> int:
        """Bytes of the indexes kept."""
        with self._lock:
            return int(self._lru.currsize)

    def __len__(self) -> int:
        with self._lock:
            return len(self._lru)


def _entry_size(entry: tuple[Generation, ShardIndex]) -> int:
    return entry[1].nbytes


#: The process's shard index cache.
SHARD_INDEXES = ShardIndexCache()


class ShardedChunks:
    """One sharded array's inner chunks, read and written through its shard objects.

    Parameters
    ----------
    io : StoreIO
        The managed path to the array's store.
    spec : ShardingSpec
        The ``sharding_indexed`` configuration.
    shard_shape : tuple of int
        The chunk grid's ``chunk_shape``.
    shape : callable
        ``shape() -> tuple``: the array's current shape.
    stored_bound : int
        Most bytes one stored inner chunk can hold (`ChunkCodec.stored_bound`): what an
        index may claim.
    """

    def __init__(
        self,
        io: StoreIO,
        spec: ShardingSpec,
        shard_shape: tuple[int, ...],
        shape: Callable[[], tuple[int, ...]],
        stored_bound: int,
    ) -> None:
        self.io = io
        self.spec = spec
        self.shard_shape = shard_shape
        self.chunks_per_shard = spec.chunks_per_shard(shard_shape)
        self.count = math.prod(self.chunks_per_shard)
        self.index_nbytes = spec.index_nbytes(self.count)
        self._index_range = spec.index_range(self.count)
        self._shape = shape
        self.bound = stored_bound
        store = io.store
        self._versioned = store.supports_conditional_writes and not store.resolves_references
        # Data reads are pinned to the index's generation where the store can pin reads.
        self._pinned = self._versioned and store.supports_conditional_reads
        # Indexes are cached where reads can be pinned to their generation. Local stores read
        # an index for a few microseconds, and their generations hold files open: not cached.
        self._cached = self._versioned and store.supports_conditional_reads and not store.is_local
        strides = (math.prod(self.chunks_per_shard[d + 1 :]) for d in range(len(shard_shape)))
        self._geometry = tuple(zip(self.chunks_per_shard, strides, strict=True))  # (count, stride) per axis

    # ---------------------------------------------------------------- geometry
    def locate(self, coords: Sequence[int]) -> tuple[tuple[int, ...], int]:
        """The shard holding inner chunk ``coords`` (inner grid) and its number there (C order)."""
        local = 0
        shard = []
        for c, (n, stride) in zip(coords, self._geometry, strict=True):  # per inner chunk read
            shard.append(c // n)
            local += c % n * stride
        return tuple(shard), local

    def inner_in_array(self, shard: Sequence[int]) -> int:
        """How many of the shard's inner chunks lie (at least in part) inside the array."""
        total = 1
        for s, n, inner, extent in zip(
            shard, self.chunks_per_shard, self.spec.chunk_shape, self._shape(), strict=True
        ):
            grid = -(-extent // inner)
            total *= max(0, min(n, grid - s * n))
        return total

    def reaches_past_shape(self, shard: Sequence[int]) -> bool:
        """Whether the shard extends beyond the array's current shape (an edge shard)."""
        return any((s + 1) * n > e for s, n, e in zip(shard, self.shard_shape, self._shape(), strict=True))

    # ---------------------------------------------------------------- reads
    async def get_many(
        self,
        key: str,
        locals_: Sequence[int],
        *,
        whole: bool = False,
        acquire: Callable[[int], memoryview] | None = None,
    ) -> tuple[Parts | None, memoryview | None, Generation | None]:
        """The stored bytes of inner chunks ``locals_`` of shard ``key``, all of one version.

        Parameters
        ----------
        key : str
            The shard's store key.
        locals_ : sequence of int
            Inner chunk numbers (C order within the shard).
        whole : bool
            The caller needs most of the shard: when its index is not cached, read the
            whole shard in one GET rather than the index and then the runs.
        acquire : callable, optional
            For that whole-shard GET: ``acquire(size)`` gives the buffer the body is received
            into (`BODY_BUFFERS`, `StoreIO.get_into`) instead of a new ``bytes`` (two copies
            of every body in aiohttp's joins: ~0.5 s of event-loop CPU per GiB). Such a read
            has no generation, so its index is not cached.

        Returns
        -------
        (list or None, memoryview or None, Generation or None)
            One view (or None: not stored) per entry of ``locals_``, None if the shard is
            missing; the pooled buffer they are views of, if any, to hand back
            (`BufferPool.release`) once every part is decoded (the parts themselves are views
            of another object, so decoding one does not hand the buffer back); and the
            generation of the shard they were read from, when it is known (the whole shard
            read with its generation, or ranges pinned to the index's), else None.

        Raises
        ------
        ShardIndexError
            The index is corrupt or hostile.
        ByteRangeError
            The index points past the end of the shard.
        PreconditionFailedError
            The shard changed on each of ``conditional_write_attempts`` tries.
        RetriesExhaustedError, StoreError
            As `StoreIO.get`.
        """
        io, spec_key = self.io, self.io.store.budget_key
        attempts = int(config.get("conditional_write_attempts"))
        for attempt in range(1, attempts + 1):
            cached = SHARD_INDEXES.get(spec_key, key) if self._cached else None
            if self._cached:
                io.stats.count_shard_index(hit=cached is not None)
            if cached is None and whole:
                got = await self.get_whole(key, acquire=acquire)
                if got is None:
                    return None, None, None
                view, every, pooled, generation = got
                return [_cut(view, every[i]) for i in locals_], pooled, generation
            if cached is None:
                data, generation = await self._read(key, self._index_range)
                if data is None:
                    return None, None, None
                index = self._check_index(key, data)
                self._remember(key, generation, index)
            else:
                generation, index = cached
            every = index.spans()
            spans = [every[i] for i in locals_]
            ranges = [ByteRange(*span) for span in spans if span is not None]
            pinned = generation if self._pinned else None
            try:
                pieces = await read_ranges(io, key, ranges, generation=pinned)
            except PreconditionFailedError:
                SHARD_INDEXES.discard(spec_key, key)
                await io.conflicted(attempt)
                continue  # replaced since its index was read: read the new version from the start
            if pieces is None:  # deleted since its index was read
                SHARD_INDEXES.discard(spec_key, key)
                if pinned is None:
                    return None, None, None
                continue
            found = iter(pieces)
            return [None if span is None else next(found) for span in spans], None, pinned
        raise PreconditionFailedError(
            f"read of shard {key!r} in {io.url}: it changed on each of {attempts} attempts to read it"
        )

    async def get_whole(
        self, key: str, *, acquire: Callable[[int], memoryview] | None = None
    ) -> tuple[memoryview, list[tuple[int, int] | None], memoryview | None, Generation | None] | None:
        """Shard ``key`` read whole in one GET (index and data of one version by construction),
        with its index's spans as they are: what a read of all its inner chunks needs, with no
        Python per inner chunk on the event loop.

        Parameters
        ----------
        key : str
            The shard's store key.
        acquire : callable, optional
            ``acquire(size)`` gives the buffer the body is received into (`BODY_BUFFERS`,
            `StoreIO.get_into`; `get_many` says why). Such a read has no generation, so its
            index is not cached.

        Returns
        -------
        (memoryview, list, memoryview or None, Generation or None) or None
            None if the shard is missing; else the body (a view of another object than the
            pool's buffer, so decoding a slice of it does not hand the buffer back), the
            ``(start, stop)`` byte span of every inner chunk in C order (None: not stored;
            `ShardIndex.spans`), the pooled buffer to hand back (`BufferPool.release`) once
            every inner chunk is decoded, and the shard's generation when it is known.

        Raises
        ------
        ShardIndexError
            The index is corrupt or hostile (checked against the shard's size).
        RetriesExhaustedError, StoreError
            As `StoreIO.get`.
        """
        if acquire is not None:
            received = await self.io.get_into(key, acquire)
            if received is None:
                return None
            index = self.spec.index_of_shard(received, self.count, key=key, bound=self.bound)
            pooled = received if isinstance(received, memoryview) else None
            # _decode_into releases views of pool buffers: these are views of an ndarray instead.
            plain: Any = np.frombuffer(received, dtype=np.uint8)
            return memoryview(plain), index.spans(), pooled, None
        body, generation = await self._read(key, None)
        if body is None:
            return None
        index = self.spec.index_of_shard(body, self.count, key=key, bound=self.bound)
        self._remember(key, generation, index)
        return memoryview(body), index.spans(), None, generation

    def _check_index(self, key: str, data: bytes) -> ShardIndex:
        index = self.spec.decode_index(data, self.count, key=key)
        start = self.index_nbytes if self.spec.index_location == "start" else 0
        index.check(key=key, bound=self.bound, data_start=start)
        return index

    def _remember(self, key: str, generation: Generation | None, index: ShardIndex) -> None:
        if self._cached and generation is not None:
            SHARD_INDEXES.put(self.io.store.budget_key, key, generation, index)

    async def _read(self, key: str, byte_range: ByteRange | None) -> tuple[bytes | None, Generation | None]:
        """``key`` (or a range of it) and, on stores that have them, its generation."""
        if self._versioned:
            return await self.io.get_with_generation(key, byte_range)
        return await self.io.get(key, byte_range), None

    async def get_shard(self, key: str) -> tuple[Parts, Generation | None] | tuple[None, Generation | None]:
        """Every inner chunk of shard ``key`` (one GET), and the shard's generation; (None, None)
        if missing.

        Raises
        ------
        ShardIndexError
            The index is corrupt or hostile (checked against the shard's size).
        """
        body, generation = await self._read(key, None)
        if body is None:
            return None, None
        return self.split(body, key), generation

    def split(self, body: bytes, key: str) -> Parts:
        """Every inner chunk's stored bytes (views of ``body``, None where not stored) of the
        whole shard ``body`` stored at ``key``.

        Raises
        ------
        ShardIndexError
            The index is corrupt or hostile (checked against the shard's size).
        """
        index = self.spec.index_of_shard(body, self.count, key=key, bound=self.bound)
        view = memoryview(body)
        return [_cut(view, index.range_of(i)) for i in range(self.count)]

    @staticmethod
    def label(key: str, coords: tuple[int, ...]) -> str:
        """How an inner chunk is named in errors: the shard's key and the inner chunk's
        coordinates in the inner grid (a projection's ``chunk_coords``)."""
        return f"{key} (inner chunk {coords})"

    # ---------------------------------------------------------------- writes
    async def put(self, key: str, shard: bytes | None) -> None:
        """Store a whole shard blind (one PUT), or delete it (None: no inner chunk stored).

        Reserves nothing in the byte budget: the caller holds the shard's bytes already (a
        second reservation inside the first deadlocks once the callers' hold the budget).
        """
        SHARD_INDEXES.discard(self.io.store.budget_key, key)
        if shard is None:
            await self.io.delete(key)
        else:
            await self.io.set(key, shard)
        SHARD_INDEXES.discard(self.io.store.budget_key, key)

    async def update(self, key: str, modify: Callable[[Parts | None], Awaitable[bytes | None]]) -> int:
        """Read-modify-write of shard ``key``: conditional where the store allows; returns the
        bytes stored.

        ``modify(parts)`` gets every inner chunk's stored bytes (None for a missing shard)
        and returns the new shard's bytes, or None to delete it. On stores with conditional
        writes it runs again with the newer shard whenever another writer stored one first
        (``StoreStats.conflicts``); concurrent updates of one shard in this process queue.

        Raises
        ------
        PreconditionFailedError
            Other writers won ``conditional_write_attempts`` rounds in a row.
        ConsistencyUnsupportedError
            ``require_consistency`` on a store without conditional writes.
        ShardIndexError
            The stored shard's index is corrupt (nothing is written).
        """
        io = self.io
        budget_key = io.store.budget_key
        if not io.check_consistency(key):
            parts, _ = await self.get_shard(key)
            shard = await modify(parts)
            await self.put(key, shard)
            return 0 if shard is None else len(shard)
        attempts = int(config.get("conditional_write_attempts"))
        async with key_lock(budget_key, key):
            for attempt in range(1, attempts + 1):
                parts, generation = await self.get_shard(key)
                shard = await modify(parts)
                try:
                    await io.replace_read(key, shard, existed=parts is not None, generation=generation)
                except PreconditionFailedError:
                    await io.conflicted(attempt)
                    continue
                finally:
                    SHARD_INDEXES.discard(budget_key, key)
                return 0 if shard is None else len(shard)
        raise PreconditionFailedError(
            f"write of shard {key!r} in {io.url}: other writers changed it on each of {attempts} attempts"
        )


def _cut(view: memoryview, span: tuple[int, int] | None) -> memoryview | None:
    return None if span is None else view[span[0] : span[1]]
