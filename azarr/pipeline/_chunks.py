"""``ChunkPipeline``: fetch -> decode -> scatter, and gather -> merge -> encode -> store.

The one hand-off between an array and its chunks (zarr-python 3's
``codec_pipeline.read(batch, out)``). An `AsyncArray` turns a
selection into chunk projections (`azarr.indexing`) and an output or a
value array; the pipeline does everything per chunk:

* **read**: the chunk's bytes through the store's managed path
  (`StoreIO`: budget, retries, timeouts, large chunks as
  parallel ranges), then decoding and scattering into the output in the codec
  pool (`CodecBatcher`), straight into it where the chunk
  maps onto a contiguous region; a missing chunk fills its region with
  ``fill_value``.
* **write**: for a chunk the selection covers in part, its current bytes are
  read; then merging, encoding (and the ``write_empty_chunks`` check) run in the
  codec pool, and the encoded chunk is stored, or deleted. On stores with
  conditional writes a partial chunk is an optimistic read-modify-write: it is
  read with its generation and stored only if it is still that generation,
  else read, merged and tried again (``StoreStats.conflicts``), so concurrent
  writers of one chunk never revert each other's elements. Inside one process
  such writes of one chunk are serialised (per store spec and key), so they
  queue instead of fighting over the network. Whole chunks are written blind:
  no read and no extra request.

Byte budget: this is the one layer that reserves chunk bytes in the store's
bytes-in-flight budget. Reads reserve a chunk's *decoded* size (the buffer its
decode needs) from the request until it is scattered; writes reserve the
*encoded* size while the chunk is sent. Chunks under 64 KiB reserve nothing:
under the request limit they cannot add up to much, and skip the cost.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import numpy as np

from azarr import config
from azarr.codecs import ChunkCodec, CodecBatcher
from azarr.errors import PreconditionFailedError
from azarr.indexing import ChunkProjection, Fields
from azarr.pipeline._batched import RESERVE_MIN_BYTES, BatchedWrites, iter_write_items, read_batched
from azarr.pipeline._buffers import BODY_BUFFERS
from azarr.pipeline._coalesced import read_coalesced
from azarr.pipeline._fill import put_fill
from azarr.pipeline._locks import key_lock
from azarr.pipeline._pages import empty
from azarr.pipeline._partial import PartialChunk, PartialReader, is_partial_blosc
from azarr.pipeline._sharded import read_one_sharded, read_sharded, write_sharded
from azarr.pipeline._shards import ShardedChunks
from azarr.scheduler import ProgressCallback, ProgressTracker, StoreIO, bounded_map
from azarr.scheduler._shared import SHARED_READS, CacheEntry, ChunkCache, default_chunk_cache
from azarr.scheduler._stats import stats_of_spec
from azarr.storage import StoreSpec
from azarr.storage._body_checksum import body_crc32c, crc32c_known

__all__ = ["ChunkPipeline"]

#: Chunks a write keeps in flight (read, encoded or being stored) at least.
_WRITE_PIPELINE = 64


class ChunkPipeline:
    """Reads and writes of one array's chunks, given their projections.

    Parameters
    ----------
    io : StoreIO
        The managed path to the store.
    codec : ChunkCodec
        The array's codec (dtype, chunk shape, order, filters, compressor).
    chunk_key : callable
        ``chunk_key(coords) -> str``: the store key of the chunk at grid ``coords``.
    fill_value : Any
        The array's decoded ``fill_value`` (None: zeros, or None for object dtypes).
    write_empty_chunks : bool
        Store chunks equal to ``fill_value`` (True) or delete them (False).
    shape : callable, optional
        ``shape() -> tuple``: the array's current shape, for writes with
        ``edges_conditional`` (see `write`).
    partial_decompress : bool, default False
        Read only the Blosc blocks a selection needs of a chunk it covers in part
        (`azarr.pipeline._partial`); ignored for codecs that cannot, for sharded arrays,
        and when a chunk cache is used (it keeps whole chunks).
    shards : ShardedChunks, optional
        For a sharded Zarr v3 array: ``codec`` and the projections are its inner chunks,
        ``chunk_key`` gives its shards' keys, and chunks are fetched and stored through
        this adapter, a shard at a time (`azarr.pipeline._sharded`).
    cache : ChunkCache, bool or None
        The decoded-chunk cache reads use: None, the process's (`default_chunk_cache`,
        none unless ``azarr.config`` ``chunk_cache_bytes`` is set), False none, True
        the process's (ValueError at the first read if ``chunk_cache_bytes`` is 0).
    opened_at : float, optional
        ``time.monotonic()`` when the array was opened (``recheck_cached_data="open"``).

    Notes
    -----
    Concurrent reads of one chunk share one fetch and one decode (``azarr.config``
    ``collapse_reads``; `azarr.scheduler._shared`), on the async path: stores with
    blocking access (memory, local files), reference stores and partial reads read on
    their own.
    """

    def __init__(
        self,
        io: StoreIO,
        codec: ChunkCodec,
        chunk_key: Callable[[tuple[int, ...]], str],
        fill_value: Any,
        *,
        write_empty_chunks: bool,
        shape: Callable[[], tuple[int, ...]] | None = None,
        partial_decompress: bool = False,
        shards: ShardedChunks | None = None,
        cache: ChunkCache | bool | None = None,
        opened_at: float | None = None,
    ) -> None:
        self.io = io
        self.shards = shards
        self.codec = codec
        self.chunk_key = chunk_key
        self.fill_value = fill_value
        self.write_empty_chunks = write_empty_chunks
        self._shape = shape
        self._partial = (
            PartialReader(io, codec)
            if partial_decompress and shards is None and is_partial_blosc(codec)
            else None
        )
        self._cache = cache
        self._opened_at = time.monotonic() if opened_at is None else opened_at
        # What decoded a cached chunk: an entry read by another codec (the array was
        # re-created with another dtype or compressor over the same keys) is not used.
        self._token = (
            codec.dtype.descr if codec.dtype.fields else codec.dtype.str,
            codec.chunks,
            codec.order,
            tuple(
                json.dumps(c.get_config(), sort_keys=True, default=str)
                for c in (*codec.filters, *codec.compressors)
            ),
        )

    def chunk_cache(self) -> ChunkCache | None:
        """The decoded-chunk cache reads use now (see ``cache``).

        Raises
        ------
        ValueError
            ``cache=True`` while ``azarr.config`` ``chunk_cache_bytes`` is 0.
        """
        cache = self._cache
        if cache is None or cache is True:
            found = default_chunk_cache()
            if found is None and cache is True:
                raise ValueError(
                    "cache=True needs a process chunk cache: set azarr.config chunk_cache_bytes "
                    "(or pass cache=ChunkCache(max_bytes))"
                )
            return found
        return None if cache is False else cache

    # ---------------------------------------------------------------- reads
    async def read(
        self,
        projections: Iterable[ChunkProjection],
        nchunks: int,
        out: np.ndarray[Any, Any],
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Fill ``out`` from the chunks of ``projections`` (``out[p.out_selection] = chunk[p.chunk_selection]``).

        Parameters
        ----------
        projections : iterable of ChunkProjection
            One per chunk the selection touches (an indexer).
        nchunks : int
            How many there are (for progress).
        out : numpy.ndarray
            The selection's output, of the indexer's allocation shape.
        fields : str or list of str, optional
            Structured fields to read.
        progress : callable, optional
            Called with a `Progress` after each chunk.

        Raises
        ------
        CodecError, StoreError
            The first chunk that failed; the other in-flight chunks are cancelled
            and no codec thread writes into ``out`` after this returns.
        """
        tracker = ProgressTracker(nchunks, progress)
        cache = self.chunk_cache()
        if self.shards is not None:  # inner chunks of shards: a shard at a time
            await read_sharded(self, self.shards, projections, out, fields, tracker, cache)
            return
        if cache is not None:
            await self._read_cached(cache, projections, out, fields, tracker)
            return
        if self.io.store.resolves_references:  # kerchunk references: runs of ranges per request
            await read_coalesced(self, projections, out, fields, tracker)
            return
        if self.io.store.supports_blocking_io and self._partial is None:  # partial reads: the async path
            await read_batched(self, projections, nchunks, out, fields, tracker)
            return
        fill = self.fill_for(fields, out.dtype)
        nbytes = self.codec.nbytes
        chunk_key, partial = self.chunk_key, self._partial
        fetch_bytes = self._make_fetcher()  # partial reads fetch through this
        pooled = None if partial is not None else self._make_pooled_fetcher()
        fetch: Callable[[str], Awaitable[bytes | memoryview | None]] = (
            fetch_bytes if pooled is None else pooled
        )
        decode, scatter = self._decode_into, self._scatter
        codec = CodecBatcher()
        direct = self._can_decode_direct(out, fields)
        collapse = partial is None and bool(config.get("collapse_reads"))
        # Stored chunks that are their own decoded bytes: received straight into their region
        # of ``out`` (`_fetch_into_region`), not into a pooled buffer and then copied.
        raw_into = pooled is not None and direct and fields is None and self.codec.stores_raw

        async def read_chunk(projection: ChunkProjection) -> None:
            key = chunk_key(projection.chunk_coords)
            data: bytes | memoryview | PartialChunk | None
            chunk: np.ndarray[Any, Any] | None = None
            region = self._direct_region(out, projection) if raw_into else None
            flat: Any = None if region is None else region if region.flags.c_contiguous else region.T
            this_fetch = fetch if flat is None else functools.partial(self._fetch_into_region, flat)
            if collapse:
                data, chunk = await self._fetch_or_share(key, this_fetch)
            elif partial is None:
                data = await this_fetch(key)
            else:
                data = await partial.fetch(key, projection, fields, fetch_bytes)
            if chunk is not None:
                shared = (chunk, out, projection, fields)
                if not codec.try_submit(scatter, shared, nbytes):
                    await codec.submit(scatter, shared, nbytes)
                tracker.advance(0 if data is None else len(data))
                return
            if flat is not None and type(data) is memoryview and data.obj is flat:
                tracker.advance(len(data))  # received in place (memory order): nothing to decode
                return
            if data is None:
                put_fill(out, projection.out_selection, fill)
            else:
                job = (data, key, out, projection, fields, direct)
                if not codec.try_submit(decode, job, nbytes):
                    await codec.submit(decode, job, nbytes)
            tracker.advance(0 if data is None else len(data))

        with BODY_BUFFERS.reading() if pooled is not None else contextlib.nullcontext():
            try:
                await bounded_map(read_chunk, projections, self.io.budget.max_requests)
                await codec.drain()
            except BaseException:
                await codec.abandon()  # no codec thread may write into `out` once we return
                raise

    async def read_one(
        self,
        projection: ChunkProjection,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> np.ndarray[Any, Any]:
        """A new array of ``shape`` holding a selection inside one chunk (an element, a window,
        a whole chunk: the service pattern), allocated by the codec thread that fills it.

        Allocated on the event loop, a chunk-sized result churns the top of the loop
        thread's malloc arena (trimmed when results are freed, page-faulted back in by
        the next ones); see ``benchmarks/README.md``.
        """
        cache = self.chunk_cache()
        if self.shards is not None:
            if cache is None:  # one inner chunk of one shard: no grouping, no task, no batcher queue
                return await read_one_sharded(
                    self, self.shards, projection, shape, dtype, fields, ProgressTracker(1, progress)
                )
            result: np.ndarray[Any, Any] = empty(shape, dtype, self.codec.order)
            await self.read([projection], 1, result, fields=fields, progress=progress)
            return result
        key, partial = self.chunk_key(projection.chunk_coords), self._partial
        if cache is not None:

            def copy_new(chunk: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
                return self._copy_new(chunk, shape, dtype, projection, fields)

            chunk, done = await self._cached_chunk(cache, key, copy_new)
            ProgressTracker(1, progress).advance(0)
            if chunk is None:
                return self._filled(shape, dtype, projection, fields)
            if done is not None:
                return done[0]  # type: ignore[no-any-return]
            return await CodecBatcher().run(
                self._copy_new, chunk, shape, dtype, projection, fields, weight=self.codec.nbytes
            )
        if self.io.store.supports_blocking_io and partial is None:
            # Read and decode in one codec-pool job (no thread hop for the file itself).
            async with self.io.budget:
                result, nbytes = await CodecBatcher().run(
                    self._read_one_blocking, key, shape, dtype, projection, fields, weight=self.codec.nbytes
                )
            ProgressTracker(1, progress).advance(nbytes)
            return result
        pooled = None if partial is not None else self._make_pooled_fetcher()
        fetch = self._make_fetcher()  # partial reads fetch through this
        # While pooled: the buffer goes back inside, kept for the next read.
        with BODY_BUFFERS.reading() if pooled is not None else contextlib.nullcontext():
            if partial is not None:
                data: bytes | memoryview | PartialChunk | None = await partial.fetch(
                    key, projection, fields, fetch
                )
            elif config.get("collapse_reads"):
                data, chunk = await self._fetch_or_share(key, fetch if pooled is None else pooled)
                if chunk is not None:
                    ProgressTracker(1, progress).advance(0 if data is None else len(data))
                    return await CodecBatcher().run(
                        self._copy_new, chunk, shape, dtype, projection, fields, weight=self.codec.nbytes
                    )
            else:
                data = await (fetch if pooled is None else pooled)(key)
            ProgressTracker(1, progress).advance(0 if data is None else len(data))
            if data is None:
                return self._filled(shape, dtype, projection, fields)
            return await CodecBatcher().run(
                self._decode_new, data, key, shape, dtype, projection, fields, weight=self.codec.nbytes
            )

    def fill_for(self, fields: Fields, dtype: np.dtype[Any]) -> Any:
        """Value for elements of chunks that are not stored.

        zarr-python 2 leaves them uninitialized when ``fill_value`` is null; azarr
        returns zeros (None for object dtypes) so reads are deterministic.
        """
        fill = self.fill_value
        if fill is None:
            return None if dtype.hasobject else np.zeros((), dtype=dtype)
        if fields is not None:
            return np.asarray(fill, dtype=self.codec.dtype)[fields]
        if dtype.kind == "O":
            # The value itself in every element, as `ChunkCodec.fill_chunk`: assigning a list
            # or dict fill value would broadcast it instead (found by the fuzzer).
            box = np.empty((), dtype=object)
            box[()] = fill
            return box
        return fill

    def _read_one_blocking(
        self,
        key: str,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        projection: ChunkProjection,
        fields: Fields,
    ) -> tuple[np.ndarray[Any, Any], int]:
        """`read_one` on a store with blocking access (runs in the codec pool): the
        result and the bytes read."""
        data = self.io.get_blocking(key)
        if data is None:
            return self._filled(shape, dtype, projection, fields), 0
        return self._decode_new(data, key, shape, dtype, projection, fields), len(data)

    def _filled(
        self, shape: tuple[int, ...], dtype: np.dtype[Any], projection: ChunkProjection, fields: Fields
    ) -> np.ndarray[Any, Any]:
        """`read_one`'s result for a chunk that is not stored: ``fill_value``."""
        result: np.ndarray[Any, Any] = np.empty(shape, dtype=dtype, order=self.codec.order)
        put_fill(result, projection.out_selection, self.fill_for(fields, dtype))
        return result

    def _decode_new(
        self,
        data: bytes | memoryview | PartialChunk,
        key: str,
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        projection: ChunkProjection,
        fields: Fields,
    ) -> np.ndarray[Any, Any]:
        """A new ``shape`` result holding one chunk's selected part (runs in the codec pool; a
        copy, never a view of ``data``, whose pooled buffer goes back)."""
        result: np.ndarray[Any, Any] = np.empty(shape, dtype=dtype, order=self.codec.order)
        self._decode_into(data, key, result, projection, fields, self._can_decode_direct(result, fields))
        return result

    async def _fetch_or_share(
        self, key: str, fetch: Callable[[str], Awaitable[bytes | memoryview | None]]
    ) -> tuple[bytes | memoryview | None, np.ndarray[Any, Any] | None]:
        """Read chunk ``key`` with request collapsing: ``(body, None)`` for a reader that
        fetched it alone (it decodes the body itself, straight into its output),
        ``(body or None, chunk)`` for one whose chunk was decoded once for several readers
        (copy out of ``chunk``), ``(None, None)`` when the chunk is not stored."""
        lead, chunk = await SHARED_READS.lead_or_follow((self.io.store.budget_key, key))
        if lead is None:
            self.io.stats.count_shared(collapsed=1)
            return None, chunk
        with lead:
            data = await fetch(key)
            if data is None:
                lead.publish(None)
            elif not lead.alone():
                # Followers wait: one decode into a chunk of its own that every reader copies
                # from. (Alone: the caller decodes straight into its output, as if nothing
                # were shared.)
                chunk = await CodecBatcher().run(self._decode_shared, data, key, weight=self.codec.nbytes)
                lead.publish(chunk)
        return data, chunk

    def _decode_shared(self, data: bytes | memoryview, key: str) -> np.ndarray[Any, Any]:
        """One chunk decoded into memory of its own, read-only, for several readers to copy
        from (runs in the codec pool; hands a pooled receive buffer back)."""
        chunk = self.codec.decode(data, key=key)
        # A view of the body (no compressor) is copied unless the body is immutable bytes,
        # which the view keeps alive: a pooled receive buffer goes back, a bytearray may change.
        if (
            type(data) is not bytes
            and chunk.base is not None
            and np.shares_memory(chunk, np.frombuffer(data, dtype=np.uint8))
        ):
            chunk = chunk.copy(order="K")
        chunk.flags.writeable = False
        if type(data) is memoryview:
            BODY_BUFFERS.release(data)
        return chunk

    def _decode_shared_then(
        self, data: bytes | memoryview, key: str, then: Callable[[np.ndarray[Any, Any]], Any] | None
    ) -> tuple[np.ndarray[Any, Any], tuple[Any] | None]:
        """`_decode_shared`, then ``then(chunk)`` in the same job: ``(chunk, (result,) or None)``."""
        chunk = self._decode_shared(data, key)
        return chunk, None if then is None else (then(chunk),)

    @staticmethod
    def _scatter(
        chunk: np.ndarray[Any, Any], out: np.ndarray[Any, Any], projection: ChunkProjection, fields: Fields
    ) -> None:
        """Copy a shared decoded chunk's selected part into ``out`` (runs in the codec pool)."""
        if fields is not None:
            chunk = chunk[fields]
        out[projection.out_selection] = chunk[projection.chunk_selection]

    def _copy_new(
        self,
        chunk: np.ndarray[Any, Any],
        shape: tuple[int, ...],
        dtype: np.dtype[Any],
        projection: ChunkProjection,
        fields: Fields,
    ) -> np.ndarray[Any, Any]:
        """`read_one`'s result from a shared decoded chunk (runs in the codec pool)."""
        result: np.ndarray[Any, Any] = np.empty(shape, dtype=dtype, order=self.codec.order)
        self._scatter(chunk, result, projection, fields)
        return result

    async def _read_cached(
        self,
        cache: ChunkCache,
        projections: Iterable[ChunkProjection],
        out: np.ndarray[Any, Any],
        fields: Fields,
        tracker: ProgressTracker,
    ) -> None:
        """`read` through a decoded-chunk cache: every chunk from the cache or one shared
        load, then copied into ``out``."""
        fill = self.fill_for(fields, out.dtype)
        chunk_key, copy_out = self.chunk_key, self.copy_out
        codec = CodecBatcher()

        async def read_chunk(projection: ChunkProjection) -> None:
            def scatter(chunk: np.ndarray[Any, Any]) -> None:
                self._scatter(chunk, out, projection, fields)

            chunk, done = await self._cached_chunk(cache, chunk_key(projection.chunk_coords), scatter)
            if done is None:
                await copy_out(codec, chunk, out, projection, fields, fill)
            tracker.advance(0)

        try:
            await bounded_map(read_chunk, projections, self.io.budget.max_requests)
            await codec.drain()
        except BaseException:
            await codec.abandon()
            raise

    async def copy_out(
        self,
        codec: CodecBatcher,
        chunk: np.ndarray[Any, Any] | None,
        out: np.ndarray[Any, Any],
        projection: ChunkProjection,
        fields: Fields,
        fill: Any,
    ) -> None:
        """A shared or cached decoded chunk's selected part into ``out`` (a job of ``codec``),
        or ``fill`` where the chunk is not stored (None)."""
        if chunk is None:
            put_fill(out, projection.out_selection, fill)
            return
        job = (chunk, out, projection, fields)
        if not codec.try_submit(self._scatter, job, self.codec.nbytes):
            await codec.submit(self._scatter, job, self.codec.nbytes)

    async def _cached_chunk(
        self, cache: ChunkCache, key: str, then: Callable[[np.ndarray[Any, Any]], Any] | None = None
    ) -> tuple[np.ndarray[Any, Any] | None, tuple[Any] | None]:
        """The decoded chunk at ``key`` (None: not stored) from ``cache`` when it holds it
        and it passes ``recheck_cached_data``, else from one shared load that fills it; and
        ``(then(chunk),)`` if this call's load decoded it (``then`` runs in the same codec-pool
        job as the decode: one pool hop per chunk on a cold cache, not two), else None."""
        io = self.io
        ident = (io.store.budget_key, key)
        (entry,) = await self.cached_entries(cache, key, [ident])
        if entry is not None:
            return entry.value, None
        lead, value = await SHARED_READS.lead_or_follow(ident)
        if lead is None:
            io.stats.count_shared(collapsed=1)
            return value, None
        nbytes = self.codec.nbytes
        with lead:
            async with io.budget.reserve(nbytes) if nbytes >= RESERVE_MIN_BYTES else contextlib.nullcontext():
                bound = self.codec.stored_bound
                if io.store.resolves_references or io.store.is_local:  # no generation kept (`keep`)
                    data, generation = await io.get(key, max_bytes=bound), None
                else:
                    data, generation = await io.get_with_generation(key, max_bytes=bound)
            chunk, done = (
                (None, None)
                if data is None
                else await CodecBatcher().run(self._decode_shared_then, data, key, then, weight=nbytes)
            )
            if lead.publish(chunk):
                self.keep(cache, ident, chunk, generation)
        return chunk, done

    async def cached_entries(
        self, cache: ChunkCache, stat_key: str, idents: Sequence[tuple[StoreSpec, str]]
    ) -> list[CacheEntry | None]:
        """The entries of ``cache`` that may answer reads of ``idents`` now, None for the
        others (all counted, as hits or misses).

        ``idents`` are one chunk, or inner chunks of one shard: ``stat_key`` is the chunk's
        or the shard's key. Entries due a check under ``recheck_cached_data`` are checked
        together with one `StoreIO.stat` of it; those that cannot be checked (no
        generation) are misses.
        """
        io = self.io
        entries: list[CacheEntry | None] = []
        due: list[int] = []
        for ident in idents:
            entry = cache.lookup(ident, self._token)
            if entry is not None and cache.needs_check(entry, self._opened_at):
                if entry.checkable:
                    due.append(len(entries))
                else:
                    entry = None  # read without a generation: read again
            entries.append(entry)
        if due:
            current = await io.stat(stat_key)
            for i in due:
                entry = entries[i]
                assert entry is not None
                if entry.matches(current):
                    cache.touch(entry)
                else:
                    entries[i] = None
        hits = sum(entry is not None for entry in entries)
        revalidated = sum(entries[i] is not None for i in due)
        misses = len(entries) - hits
        cache.count(hits=hits, misses=misses, revalidated=revalidated)
        io.stats.count_shared(hits=hits, misses=misses, revalidated=revalidated)
        return entries

    def keep(
        self,
        cache: ChunkCache,
        ident: tuple[StoreSpec, str],
        chunk: np.ndarray[Any, Any] | None,
        generation: Any,
    ) -> None:
        """Put a chunk just read at ``generation`` into ``cache`` (counting what it evicts, per
        store). Stores on this machine keep no generation: a local file's holds the file open."""
        kept = None if self.io.store.is_local else generation
        for spec in cache.put(ident, chunk, kept, self._token):
            stats = stats_of_spec(spec)
            if stats is not None:
                stats.count_shared(evictions=1)

    def _can_decode_direct(self, target: np.ndarray[Any, Any], fields: Fields) -> bool:
        """Whether whole chunks can be decoded straight into ``target``: only if chunk-shaped
        regions of it can be contiguous, as it spans the chunk's extent on every dimension
        but the outermost (the last, for ``order="F"``)."""
        chunks = self.codec.chunks
        return fields is None and (
            target.shape[1:] == chunks[1:] and target.flags.c_contiguous
            if self.codec.order == "C"
            else target.shape[:-1] == chunks[:-1] and target.flags.f_contiguous
        )

    def _decode_into(
        self,
        data: bytes | memoryview | PartialChunk,
        key: str,
        out: np.ndarray[Any, Any],
        projection: ChunkProjection,
        fields: Fields,
        direct: bool = True,
    ) -> None:
        """Decode one chunk and scatter its selected part into ``out`` (runs in the codec pool),
        then hand a pooled receive buffer back (not after a failure: the traceback may still
        hold a view of it; other values are left alone).

        ``direct=False`` says no chunk-shaped region of ``out`` is contiguous (skips the checks).
        """
        if isinstance(data, PartialChunk):
            data.scatter(key, out, projection)  # partial_decompress: only the blocks it needs
            return
        codec = self.codec
        region = self._direct_region(out, projection) if direct and fields is None else None
        if region is not None:
            codec.decode(data, key=key, out=region)
        else:
            chunk = codec.decode_for_copy(data, key=key)  # only copied out of, right here
            if fields is not None:
                chunk = chunk[fields]
            out[projection.out_selection] = chunk[projection.chunk_selection]
        if type(data) is memoryview:
            BODY_BUFFERS.release(data)

    def _decode_many_into(
        self,
        items: Sequence[tuple[bytes | memoryview, str, ChunkProjection]],
        out: np.ndarray[Any, Any],
        fields: Fields,
        direct: bool,
    ) -> None:
        """`_decode_into` for each ``(data, key, projection)`` of ``items`` (runs in the codec
        pool): a shard's inner chunks, scattered through `ChunkCodec.scratch_decoder` where no
        region of ``out`` takes a chunk whole, else one by one."""
        fast = None if direct or fields is not None else self.codec.scratch_decoder()
        for data, key, projection in items:
            chunk = None if fast is None else fast(data)
            if chunk is None:
                self._decode_into(data, key, out, projection, fields, direct)
                continue
            out[projection.out_selection] = chunk[projection.chunk_selection]
            if type(data) is memoryview:
                BODY_BUFFERS.release(data)

    def _direct_region(
        self, out: np.ndarray[Any, Any], projection: ChunkProjection
    ) -> np.ndarray[Any, Any] | None:
        """The region of ``out`` a whole chunk can be decoded straight into: the chunk,
        unpermuted (step-1 slices, not a reversed slice or index arrays that cover it), is
        exactly a contiguous view of it. None otherwise (a 0-d selection yields a scalar,
        not a view: np.void for structured dtypes)."""
        if not projection.is_complete_chunk:
            return None
        codec = self.codec
        region = out[projection.out_selection]
        if (
            isinstance(region, np.ndarray)
            and all(isinstance(s, slice) and s.step in (None, 1) for s in projection.chunk_selection)
            and region.shape == codec.chunks
            and region.dtype == codec.dtype
            and np.shares_memory(region, out)
            and (region.flags.c_contiguous if codec.order == "C" else region.flags.f_contiguous)
        ):
            return region
        return None

    def _make_pooled_fetcher(self) -> Callable[[str], Awaitable[bytes | memoryview | None]] | None:
        """A fetcher receiving chunk bodies into reused buffers (``_buffers.py`` says why), for
        whole-chunk reads from remote stores of chunks big enough to matter; None otherwise.
        What it returns must be decoded by `_decode_into` (which hands the buffer back)."""
        io, nbytes = self.io, self.codec.nbytes
        if (
            io.store.is_local
            or nbytes < RESERVE_MIN_BYTES
            or nbytes > int(config.get("large_chunk_threshold"))
            or not BODY_BUFFERS.enabled()
        ):
            return None
        # Every body in the class of the decoded chunk: whatever it compressed to, it fits
        # any buffer this array's (or a same-chunked array's) earlier bodies left idle.
        acquire = functools.partial(BODY_BUFFERS.acquire, at_least=nbytes)
        return functools.partial(self._receive, allocate=acquire)

    async def _receive(self, key: str, allocate: Callable[[int], memoryview]) -> bytes | memoryview | None:
        """Chunk ``key``'s body received into ``allocate(size)``, bounded by the codec's
        stored size, holding the decoded chunk's size in the store's bytes-in-flight budget."""
        async with self.io.budget.reserve(self.codec.nbytes):
            return await self.io.get_into(key, allocate, max_bytes=self.codec.stored_bound)

    async def _fetch_into_region(self, flat: np.ndarray[Any, Any], key: str) -> bytes | memoryview | None:
        """`_make_pooled_fetcher`'s read of ``key`` for a chunk stored as its own bytes
        (`ChunkCodec.stores_raw`) whose region of the output is ``flat`` (C-contiguous, in
        the chunk's memory order): a body of exactly the chunk's size is received into
        ``flat`` (a view of ``flat`` comes back: nothing left to decode), any other into a pooled
        buffer, which the decode then refuses with the sizes named. Saves a copy of the
        chunk per chunk (``benchmarks/README.md``, "Zarr v3 without sharding")."""
        nbytes = self.codec.nbytes
        target = memoryview(flat).cast("B")  # type: ignore[arg-type]

        def allocate(size: int) -> memoryview:
            return target if size == nbytes else BODY_BUFFERS.acquire(size, at_least=nbytes)

        return await self._receive(key, allocate)

    def _make_fetcher(self) -> Callable[[str], Awaitable[bytes | None]]:
        """How one chunk is read: retried and timed (``StoreIO``), split into parallel ranges
        when large on a remote store, and holding its decoded size in the store's
        bytes-in-flight budget when it is big enough to matter. Chosen per call, so
        ``large_chunk_threshold`` changed after an array was opened still applies."""
        io, nbytes, bound = self.io, self.codec.nbytes, self.codec.stored_bound
        if not io.store.is_local and nbytes > int(config.get("large_chunk_threshold")):

            async def fetch_large(key: str) -> bytes | None:
                async with io.budget.reserve(nbytes):
                    return await io.get_large(key, expected_nbytes=nbytes, max_bytes=bound)

            return fetch_large
        if nbytes >= RESERVE_MIN_BYTES:

            async def fetch_reserved(key: str) -> bytes | None:
                async with io.budget.reserve(nbytes):
                    return await io.get(key, max_bytes=bound)

            return fetch_reserved

        async def fetch(key: str) -> bytes | None:
            return await io.get(key, max_bytes=bound)

        return fetch

    # ---------------------------------------------------------------- writes
    async def write(
        self,
        projections: Iterable[ChunkProjection],
        nchunks: int,
        values: np.ndarray[Any, Any],
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        edges_conditional: bool = False,
    ) -> None:
        """Write ``values`` (of the indexer's allocation shape) into the chunks of ``projections``.

        A chunk the selection covers only in part is read, merged and written back;
        a fully covered one is written without a read. A chunk that ends up all
        ``fill_value`` is deleted instead when ``write_empty_chunks`` is False.
        With ``edges_conditional`` (``append``), an edge chunk the selection covers
        up to the array's end is still merged conditionally: beyond the end this
        writer knows, a concurrent appender's block may already be stored.

        Raises
        ------
        CodecError, StoreError
            The first chunk that failed (encoding failures before anything of that
            chunk is written).
        """
        if self.shards is not None:  # inner chunks of shards: a shard at a time
            await write_sharded(
                self,
                self.shards,
                projections,
                values,
                fields,
                ProgressTracker(nchunks, progress),
                edges_conditional=edges_conditional,
            )
            return
        io, fetch = self.io, self._make_fetcher()
        codec = CodecBatcher()
        reserve = self.codec.nbytes >= RESERVE_MIN_BYTES
        tracker = ProgressTracker(nchunks, progress)
        chunk_key, weight = self.chunk_key, self.codec.nbytes
        # The PUT's checksum (S3): computed in the codec thread, off the event loop.
        checksum, update = io.store.wants_body_crc32c, self._update_chunk_to_put

        async def write_chunk(projection: ChunkProjection) -> None:
            key = chunk_key(projection.chunk_coords)
            if self._needs_conditional_update(projection, fields, edges_conditional):
                async with key_lock(io.store.budget_key, key):
                    stored = await self._update_conditionally(key, codec, projection, values, fields)
                tracker.advance(stored)
                return
            complete = projection.is_complete_chunk and fields is None
            if not complete:
                io.check_consistency(key)  # raises if the caller requires conditional writes
            data = None if complete else await fetch(key)
            encoded, crc = await codec.run(
                update, checksum, data, key, projection, values, fields, weight=weight
            )
            if encoded is None:
                await io.delete(key)
            elif reserve:
                async with io.budget.reserve(len(encoded)):
                    with crc32c_known(encoded, crc):
                        await io.set(key, encoded)
            else:
                with crc32c_known(encoded, crc):
                    await io.set(key, encoded)
            tracker.advance(0 if encoded is None else len(encoded))

        if not io.store.supports_blocking_io:
            # More chunks in flight than the request budget (which still bounds store calls):
            # the codec batcher needs a queue to batch from.
            await bounded_map(write_chunk, projections, max(io.budget.max_requests, _WRITE_PIPELINE))
            return
        # Chunks that need no conditional read-modify-write go in batches (codec-pool jobs
        # that merge, encode and store); the others take the async path, from one stream.
        batched = BatchedWrites(self, values, fields, tracker)

        def is_conditional(projection: ChunkProjection) -> bool:
            if self._needs_conditional_update(projection, fields, edges_conditional):
                return True
            if not (projection.is_complete_chunk and fields is None):
                io.check_consistency(chunk_key(projection.chunk_coords))  # raises if required
            return False

        async def write_item(item: list[ChunkProjection] | ChunkProjection) -> None:
            if isinstance(item, list):
                await batched.run(item)
            else:
                await write_chunk(item)

        items = iter_write_items(projections, nchunks, self.codec.nbytes, is_conditional)
        await bounded_map(write_item, items, max(io.budget.max_requests, _WRITE_PIPELINE))

    def _needs_conditional_update(
        self, projection: ChunkProjection, fields: Fields, edges_conditional: bool
    ) -> bool:
        """Whether a chunk write must be an optimistic read-modify-write (see `write`)."""
        if not self.io.store.supports_conditional_writes:
            return False
        if not (projection.is_complete_chunk and fields is None):
            return True
        # A whole chunk reaching past the end this writer knows: a concurrent append's
        # block may already be stored there.
        return edges_conditional and self._reaches_past_shape(projection.chunk_coords)

    def _reaches_past_shape(self, coords: tuple[int, ...]) -> bool:
        if self._shape is None:
            return False
        chunks = self.codec.chunks
        return any((c + 1) * n > s for c, n, s in zip(coords, chunks, self._shape(), strict=True))

    async def _update_conditionally(
        self,
        key: str,
        codec: CodecBatcher,
        projection: ChunkProjection,
        values: np.ndarray[Any, Any],
        fields: Fields,
    ) -> int:
        """Optimistic read-modify-write of one partial chunk; returns the bytes stored.

        Read with generation -> merge and encode -> store only if still that
        generation (or only if still absent); on a failed precondition, again.
        """
        io, nbytes = self.io, self.codec.nbytes
        attempts = int(config.get("conditional_write_attempts"))
        for attempt in range(1, attempts + 1):
            if nbytes >= RESERVE_MIN_BYTES:
                async with io.budget.reserve(nbytes):
                    data, generation = await io.get_with_generation(key)
            else:
                data, generation = await io.get_with_generation(key)
            encoded = await codec.run(
                self._update_chunk, data, key, projection, values, fields, weight=nbytes
            )
            try:
                await io.replace_read(key, encoded, existed=data is not None, generation=generation)
            except PreconditionFailedError:
                await io.conflicted(attempt)
                continue
            return 0 if encoded is None else len(encoded)
        raise PreconditionFailedError(
            f"write of chunk {key!r} in {io.url}: other writers changed it on each of {attempts} attempts"
        )

    def _update_chunk(
        self,
        data: bytes | memoryview | None,
        key: str,
        projection: ChunkProjection,
        values: np.ndarray[Any, Any],
        fields: Fields,
    ) -> bytes | None:
        """Merge new values into one chunk and encode it (runs in the codec pool).

        Returns None when the chunk should be deleted (all fill_value with
        ``write_empty_chunks=False``).
        """
        chunk = self._updated_chunk(data, key, projection, values, fields)
        return None if chunk is None else self.codec.encode(chunk, key=key)

    def _update_chunk_to_put(
        self,
        checksum: bool,
        data: bytes | memoryview | None,
        key: str,
        projection: ChunkProjection,
        values: np.ndarray[Any, Any],
        fields: Fields,
    ) -> tuple[bytes | None, int | None]:
        """`_update_chunk`, and with ``checksum`` the encoded chunk's CRC-32C for its PUT
        (`Store.wants_body_crc32c`), computed here in the codec thread."""
        encoded = self._update_chunk(data, key, projection, values, fields)
        return encoded, None if encoded is None or not checksum else body_crc32c(encoded)

    def _updated_chunk(
        self,
        data: bytes | memoryview | None,
        key: str,
        projection: ChunkProjection,
        values: np.ndarray[Any, Any],
        fields: Fields,
    ) -> np.ndarray[Any, Any] | None:
        """The chunk with new values merged in, not yet encoded (None: delete it, as
        `_update_chunk`). Whole chunks are views of ``values``, not copies."""
        codec = self.codec
        # When the values hold the whole chunk it is encoded from them, with no merge copy.
        chunk = self._whole_chunk_of(values, projection) if data is None and fields is None else None
        if chunk is None:
            chunk = codec.fill_chunk(self.fill_value) if data is None else codec.decode(data, key=key)
            self._merge(chunk, projection, values, fields)
        if not self.write_empty_chunks and codec.is_fill_chunk(chunk, self.fill_value):
            return None
        return chunk

    def _whole_chunk_of(
        self, values: np.ndarray[Any, Any], projection: ChunkProjection
    ) -> np.ndarray[Any, Any] | None:
        """``values[out_selection]`` when it is the whole chunk (every element, in order, no
        part beyond the array's edge), else None. zarr-python 2 encodes such chunks
        straight from the value too (``Array._process_for_setitem``)."""
        if not projection.is_complete_chunk or self.codec.filters or self.codec.is_object:
            return None  # filters (object codecs among them) may need a writable, owned chunk
        for sel, n in zip(projection.chunk_selection, self.codec.chunks, strict=True):
            if not (
                isinstance(sel, slice) and sel.start in (0, None) and sel.stop == n and sel.step in (1, None)
            ):
                return None
        region = values[projection.out_selection]
        if (
            not isinstance(region, np.ndarray)
            or region.shape != self.codec.chunks
            or region.dtype != self.codec.dtype
        ):
            return None
        return region

    @staticmethod
    def _merge(
        chunk: np.ndarray[Any, Any], projection: ChunkProjection, values: np.ndarray[Any, Any], fields: Fields
    ) -> None:
        """``chunk[chunk_selection] = values[out_selection]`` (of ``fields``)."""
        if isinstance(fields, (list, tuple)):
            # Through a multi-field view NumPy's fancy-index assignment copies whole items,
            # padding included, clobbering the fields not named: assign field by field.
            for name in fields:
                chunk[name][projection.chunk_selection] = values[name][projection.out_selection]
        else:
            target = chunk if fields is None else chunk[fields]
            target[projection.chunk_selection] = values[projection.out_selection]
