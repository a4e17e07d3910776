"""The chunk pipeline's reads and writes for sharded arrays: inner chunks grouped by shard.

A sharded array's selections are cut into inner chunks (its ``chunks``), and the pipeline
decodes, scatters, merges and encodes inner chunks exactly as it does any chunk
(`ChunkPipeline._decode_into`, `ChunkPipeline._update_chunk`, the codec batcher). What
differs is the fetch and store step: inner chunks are grouped by the shard holding them
(a window of projections at a time) and each group goes to the `ShardedChunks` adapter as
one unit -- one read of one version of the shard (its index, then coalesced runs, or the
whole shard in one GET: always when the group is every inner chunk of it), or one write of the shard (a blind PUT when the selection covers
every inner chunk of it, else a conditional read-modify-write). Shards are processed
concurrently under the store's request budget; a group holds its decoded size in the byte
budget while it is fetched (reads) or encoded and sent (writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr import config
from azarr.codecs import CodecBatcher
from azarr.codecs._batcher import run_alone
from azarr.indexing import ChunkProjection, Fields
from azarr.pipeline._buffers import BODY_BUFFERS
from azarr.pipeline._fill import put_fill
from azarr.pipeline._shards import Parts, ShardedChunks
from azarr.scheduler import ProgressTracker, bounded_map
from azarr.scheduler._shared import (
    SHARED_READS,
    ChunkCache,
    JoinAgain,
    Lead,
    Load,
    inner_key,
    whole_shard_key,
)
from azarr.storage import Generation, StoreSpec
from azarr.storage._body_checksum import body_crc32c, crc32c_known

if TYPE_CHECKING:
    from azarr.pipeline._chunks import ChunkPipeline

__all__ = ["read_one_sharded", "read_sharded", "write_sharded"]

#: Inner chunk projections grouped at a time: a group is all of a window's inner chunks of
#: one shard, so a window should span whole rows of shards (a shard split between windows
#: is read or written twice, correctly but at more cost).
_WINDOW = 1 << 16
#: A read needing at least this fraction of a shard's inner chunks reads the whole shard in
#: one GET when its index is not cached (the index, then the runs, is two round trips).
_WHOLE_FRACTION = 0.5
#: Encoded inner chunks per codec job of a shard write, about (bytes of decoded chunks).
_JOB_BYTES = 1 << 20

Member = tuple[int, ChunkProjection]
"""An inner chunk's number within its shard (C order) and its projection."""


Spans = list[tuple[int, int] | None]
"""A shard index's byte span of every inner chunk (`ShardIndex.spans`)."""

_Led = tuple[int, ChunkProjection, Lead | None]
"""An inner chunk a read fetches: its number in the shard, its projection, and, when reads
are shared, its load in `SHARED_READS` (this read leads it)."""

_Followed = tuple[int, ChunkProjection, tuple[StoreSpec, str], Load]
"""An inner chunk another read is fetching: its number in the shard, its projection, its
key in `SHARED_READS` and the load there to wait for."""


def _groups(
    shards: ShardedChunks, projections: Iterable[ChunkProjection]
) -> Iterator[tuple[tuple[int, ...], list[Member]]]:
    """(shard coordinates, members) for each shard a window of projections touches."""
    iterator = iter(projections)
    locate = shards.locate
    while True:
        groups: dict[tuple[int, ...], list[Member]] = {}
        for projection in itertools.islice(iterator, _WINDOW):
            shard, local = locate(projection.chunk_coords)
            found = groups.get(shard)
            if found is None:
                groups[shard] = [(local, projection)]
            else:
                found.append((local, projection))
        if not groups:
            return
        yield from groups.items()


async def read_sharded(
    pipeline: ChunkPipeline,
    shards: ShardedChunks,
    projections: Iterable[ChunkProjection],
    out: np.ndarray[Any, Any],
    fields: Fields,
    tracker: ProgressTracker,
    cache: ChunkCache | None = None,
) -> None:
    """`ChunkPipeline.read` for a sharded array (see the module docstring).

    A shard whose every inner chunk inside the array is selected (a full read's) is read
    whole in one GET and its inner chunks decoded from the index's spans in ~1 MiB codec
    jobs, with no Python per inner chunk on the event loop but the grouping; with
    ``collapse_reads`` (remote stores) such reads of one shard share one load of it
    (`whole_shard_key`): one GET, one decode, and they never wait for inner chunks a read of
    part of the shard is fetching. Other inner chunks are shared as whole chunks are
    (`azarr.scheduler._shared`, keyed by `inner_key`): with a decoded-chunk ``cache``, inner
    chunks it holds are copied from it (those due a check cost one metadata request per
    shard) and the others are read, a shard's together, and kept; with ``collapse_reads``,
    an inner chunk another read is fetching is waited for, and the rest of its shard read
    without it.

    Raises
    ------
    ShardIndexError, ByteRangeError
        A corrupt or hostile shard.
    CodecError, StoreError
        The first inner chunk or request that failed (also raised in the reads waiting for
        it); no codec thread writes into ``out`` after this returns.
    """
    io = pipeline.io
    codec = CodecBatcher()
    decode, nbytes = pipeline._decode_into, pipeline.codec.nbytes
    decode_shared = pipeline._decode_shared
    direct = pipeline._can_decode_direct(out, fields)
    fill = pipeline.fill_for(fields, out.dtype)
    shard_key, spec = pipeline.chunk_key, io.store.budget_key
    per_job = max(1, _JOB_BYTES // max(nbytes, 1))
    shared = cache is not None or (not io.store.supports_blocking_io and bool(config.get("collapse_reads")))
    # Whole shards from remote stores are received into reused buffers (_buffers.py says why),
    # each handed back once all its inner chunks are decoded. Not for a cache: such a read
    # has no generation, so what it kept could never be checked.
    pooled = not io.store.is_local and BODY_BUFFERS.enabled() and cache is None
    acquire = functools.partial(BODY_BUFFERS.acquire, at_least=shards.count * nbytes) if pooled else None

    def decode_many(items: list[tuple[memoryview, str, ChunkProjection]]) -> None:
        pipeline._decode_many_into(items, out, fields, direct)  # in the codec pool

    async def copy_out(chunk: np.ndarray[Any, Any] | None, projection: ChunkProjection) -> None:
        """One inner chunk shared with other reads (or cached) into ``out``."""
        await pipeline.copy_out(codec, chunk, out, projection, fields, fill)
        tracker.advance(0)

    async def lead(key: str, shard: tuple[int, ...], items: list[_Led]) -> None:
        """Read ``items`` of shard ``key`` (one version, coalesced), decode them into ``out``
        and hand them to the reads waiting for them (their loads, if shared)."""
        whole = len(items) >= _WHOLE_FRACTION * shards.inner_in_array(shard)
        try:
            # Held until the inner chunks are decoded (`azarr.scheduler._budget`): a whole shard
            # received into a pooled buffer keeps it until its last inner chunk is out, so the
            # budget bounds the buffers alive (and the pool reuses them) however far the
            # network runs ahead of the codec threads.
            async with io.budget.reserve(len(items) * nbytes):
                parts, buffer, generation = await shards.get_many(
                    key, [local for local, _, _ in items], whole=whole, acquire=acquire
                )
                lonely = _alone(items, parts) if cache is None else ()
                stored: list[tuple[memoryview, str, ChunkProjection]] = []
                decoded: list[tuple[int, memoryview, str]] = []
                for i, (_, projection, held) in enumerate(items):
                    data = None if parts is None else parts[i]
                    label = shards.label(key, projection.chunk_coords)
                    if data is not None and cache is None and (held is None or i in lonely):
                        # Nobody else wants it: decoded straight into `out`, as if nothing were shared.
                        if buffer is not None:
                            stored.append((data, label, projection))
                        else:
                            job = (data, label, out, projection, fields, direct)
                            if not codec.try_submit(decode, job, nbytes):
                                await codec.submit(decode, job, nbytes)
                            tracker.advance(len(data))
                    elif data is None:
                        _publish(pipeline, cache, held, None, generation)
                        await copy_out(None, projection)
                    else:
                        decoded.append((i, data, label))
                # One decode per inner chunk others wait for (or the cache keeps), copied from.
                chunks = await asyncio.gather(
                    *(codec.run(decode_shared, data, label, weight=nbytes) for _, data, label in decoded)
                )
                for (i, _, _), chunk in zip(decoded, chunks, strict=True):
                    _publish(pipeline, cache, items[i][2], chunk, generation)
                for (i, _, _), chunk in zip(decoded, chunks, strict=True):
                    await copy_out(chunk, items[i][1])
                if buffer is not None:
                    jobs = [stored[i : i + per_job] for i in range(0, len(stored), per_job)]
                    await asyncio.gather(
                        *(codec.run(decode_many, job, weight=len(job) * nbytes) for job in jobs)
                    )
                    BODY_BUFFERS.release(buffer)  # not after a failure: a traceback may hold a view of it
                    tracker.advance_many(len(stored), sum(len(data) for data, _, _ in stored))
        except BaseException as exc:
            for _, _, held in items:
                if held is not None:
                    held.fail(exc)  # the loads still open: a cancelled leader's followers read again
            raise

    async def follow(key: str, shard: tuple[int, ...], item: _Followed) -> None:
        """Wait for an inner chunk another read is fetching; lead it if that read was cancelled."""
        local, projection, ident, load = item
        while True:
            try:
                chunk = await SHARED_READS.wait(load)
            except JoinAgain:
                joined = SHARED_READS.join(ident)
                if isinstance(joined, Lead):
                    await lead(key, shard, [(local, projection, joined)])
                    return
                load = joined
                continue
            io.stats.count_shared(collapsed=1)
            await copy_out(chunk, projection)
            return

    async def lead_whole(key: str, members: list[Member], shard_lead: Lead | None) -> None:
        """Read shard ``key`` whole (one GET), decode ``members`` into ``out`` in ~1 MiB codec
        jobs, and hand every inner chunk to the reads waiting for the shard (``shard_lead``,
        its load, if shared)."""
        with shard_lead or contextlib.nullcontext():
            # Held until decoded, as `lead`'s: it bounds the pooled bodies alive.
            async with io.budget.reserve(len(members) * nbytes):
                got = await shards.get_whole(key, acquire=acquire)
                if got is None:
                    if shard_lead is not None:
                        shard_lead.publish(None)
                    for _, projection in members:
                        put_fill(out, projection.out_selection, fill)
                    tracker.advance_many(len(members))
                    return
                view, spans, buffer, _ = got
                jobs = [members[i : i + per_job] for i in range(0, len(members), per_job)]
                # Nobody waits: decoded straight into `out`; else once into chunks they copy from.
                keep = shard_lead is not None and not shard_lead.alone()
                done = await asyncio.gather(
                    *(
                        codec.run(decode_whole, view, spans, job, key, keep, weight=len(job) * nbytes)
                        for job in jobs
                    )
                )
                if shard_lead is not None and keep:
                    shard_lead.publish(
                        {local: chunk for part, _ in done if part for local, chunk in part.items()}
                    )
                sizes = [size for _, size in done]
                if buffer is not None:
                    BODY_BUFFERS.release(buffer)  # not after a failure: a traceback may hold a view of it
                tracker.advance_many(len(members), sum(sizes))

    def decode_whole(
        view: memoryview, spans: Spans, job: list[Member], key: str, keep: bool
    ) -> tuple[dict[int, np.ndarray[Any, Any]] | None, int]:
        return _decode_spans_into(pipeline, shards, view, spans, job, key, out, fields, direct, fill, keep)

    async def read_whole(key: str, members: list[Member]) -> None:
        """Every inner chunk of shard ``key`` inside the array: one load of the whole shard,
        shared per shard (`whole_shard_key`), never waiting for inner chunks of it that
        reads of part of it fetch."""
        if not shared:
            await lead_whole(key, members, None)
            return
        shard_lead, chunks = await SHARED_READS.lead_or_follow((spec, whole_shard_key(key)))
        if shard_lead is not None:
            await lead_whole(key, members, shard_lead)
            return
        io.stats.count_shared(collapsed=len(members))
        for local, projection in members:
            await copy_out(None if chunks is None else chunks.get(local), projection)

    async def read_shard(group: tuple[tuple[int, ...], list[Member]]) -> None:
        shard, members = group
        key = shard_key(shard)
        if cache is None and len(members) == shards.inner_in_array(shard):
            await read_whole(key, members)
            return
        if not shared:
            await lead(key, shard, [(local, projection, None) for local, projection in members])
            return
        idents = [(spec, inner_key(key, local)) for local, _ in members]
        if cache is not None:
            entries = await pipeline.cached_entries(cache, key, idents)
            for entry, (_, projection) in zip(entries, members, strict=True):
                if entry is not None:
                    await copy_out(entry.value, projection)
        else:
            entries = [None] * len(members)
        # From the first join on, nothing is awaited before `lead` (or the failure path) owns the loads.
        leads: list[_Led] = []
        follows: list[_Followed] = []
        missing = [i for i, entry in enumerate(entries) if entry is None]
        joined = SHARED_READS.join_many([idents[i] for i in missing])
        for i, one in zip(missing, joined, strict=True):
            local, projection = members[i]
            if isinstance(one, Lead):
                leads.append((local, projection, one))
            else:
                follows.append((local, projection, idents[i], one))
        waiting = [asyncio.ensure_future(follow(key, shard, item)) for item in follows]
        try:
            if leads:
                await lead(key, shard, leads)
            if waiting:
                await asyncio.gather(*waiting)
        except BaseException:
            for task in waiting:  # none may write into `out` once the read has failed
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
            raise

    with BODY_BUFFERS.reading() if pooled else contextlib.nullcontext():
        try:
            await bounded_map(read_shard, _groups(shards, projections), max(io.budget.max_requests, 1))
            await codec.drain()
        except BaseException:
            await codec.abandon()  # no codec thread may write into `out` once we return
            raise


async def read_one_sharded(
    pipeline: ChunkPipeline,
    shards: ShardedChunks,
    projection: ChunkProjection,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    fields: Fields,
    tracker: ProgressTracker,
) -> np.ndarray[Any, Any]:
    """`ChunkPipeline.read_one` for a sharded array without a decoded-chunk cache: a new
    ``shape`` result holding a selection inside one inner chunk (the random-access pattern).

    What `read_sharded` does for one inner chunk, without its machinery for many (grouping
    by shard, a task per shard, the codec batcher's queue): the shard's index (cached, or
    read; the whole shard when the inner chunk is most of it), one ranged GET pinned to the
    index's generation, one codec job that allocates and fills the result. Reads are shared
    as `read_sharded` shares them (`inner_key`); the leader holds the inner chunk's decoded
    size in the byte budget until it is decoded, followers hold nothing while they wait.

    Raises
    ------
    ShardIndexError, ByteRangeError
        A corrupt or hostile shard.
    CodecError, StoreError
        The inner chunk or its request failed (also raised in the reads waiting for it).
    """
    io, codec = pipeline.io, pipeline.codec
    nbytes = codec.nbytes
    shard, local = shards.locate(projection.chunk_coords)
    key = pipeline.chunk_key(shard)
    label = shards.label(key, projection.chunk_coords)
    run = run_alone  # one job: no batcher (nothing to batch it with)
    lead: Lead | None = None
    if not io.store.supports_blocking_io and config.get("collapse_reads"):
        lead, chunk = await SHARED_READS.lead_or_follow((io.store.budget_key, inner_key(key, local)))
        if lead is None:  # another read fetched and decoded it
            io.stats.count_shared(collapsed=1)
            tracker.advance(0)
            if chunk is None:
                return pipeline._filled(shape, dtype, projection, fields)
            return await run(pipeline._copy_new, chunk, shape, dtype, projection, fields, weight=nbytes)
    with lead or contextlib.nullcontext():
        async with io.budget.reserve(nbytes):  # held until decoded, as `read_sharded`'s
            # One inner chunk is most of a shard only in shards of one or two (`read_sharded`'s rule).
            whole = shards.count <= 2 and _WHOLE_FRACTION * shards.inner_in_array(shard) <= 1
            parts, _, _ = await shards.get_many(key, [local], whole=whole)
            data = None if parts is None else parts[0]
            tracker.advance(0 if data is None else len(data))
            if lead is not None and (data is None or not lead.alone()):
                # Others wait for it: decoded once into a chunk of its own they copy from.
                chunk = (
                    None if data is None else await run(pipeline._decode_shared, data, label, weight=nbytes)
                )
                lead.publish(chunk)
                if chunk is None:
                    return pipeline._filled(shape, dtype, projection, fields)
                return await run(pipeline._copy_new, chunk, shape, dtype, projection, fields, weight=nbytes)
            # Alone (the load ended: nobody can join any more) or not shared.
            if data is None:
                return pipeline._filled(shape, dtype, projection, fields)
            return await run(
                pipeline._decode_new, data, label, shape, dtype, projection, fields, weight=nbytes
            )


def _decode_spans_into(
    pipeline: ChunkPipeline,
    shards: ShardedChunks,
    view: memoryview,
    spans: Spans,
    members: list[Member],
    key: str,
    out: np.ndarray[Any, Any],
    fields: Fields,
    direct: bool,
    fill: Any,
    shared: bool,
) -> tuple[dict[int, np.ndarray[Any, Any]] | None, int]:
    """``members`` of the shard ``view`` decoded into ``out`` (runs in the codec pool): each
    inner chunk cut from its span here, decoded through the thread's scratch chunk
    (`ChunkCodec.scratch_decoder`, its checks made once per job; inner chunks stored back to
    back in one call, `ChunkCodec.scratch_run_decoder`) or straight into its region of
    ``out`` where that is contiguous; fill where not stored. For a shard other reads wait
    for (``shared``), each is decoded into a read-only chunk of its own instead
    (`ChunkPipeline._decode_shared`) and copied into ``out`` from it in the same job.

    Returns the ``shared`` chunks by number in the shard (not stored: absent; else None) and
    the stored bytes read."""
    fast = None if shared or direct or fields is not None else pipeline.codec.scratch_decoder()
    run = None if fast is None else pipeline.codec.scratch_run_decoder()
    chunks: dict[int, np.ndarray[Any, Any]] | None = {} if shared else None
    total = 0
    for group, bounds in _back_to_back(spans, members) if run is not None else [(members, [])]:
        if run is not None and len(bounds) > 1:
            decoded = run(view, bounds)
            if decoded is not None:
                for (_, projection), chunk in zip(group, decoded, strict=True):
                    out[projection.out_selection] = chunk[projection.chunk_selection]
                total += bounds[-1][1] - bounds[0][0]
                continue
        for local, projection in group:  # one by one
            span = spans[local]
            if span is None:
                put_fill(out, projection.out_selection, fill)
                continue
            data = view[span[0] : span[1]]
            total += span[1] - span[0]
            if chunks is not None:
                chunk = chunks[local] = pipeline._decode_shared(
                    data, shards.label(key, projection.chunk_coords)
                )
                pipeline._scatter(chunk, out, projection, fields)
                continue
            found = None if fast is None else fast(data)
            if found is None:  # the general path (and its errors, named by the label)
                pipeline._decode_into(
                    data, shards.label(key, projection.chunk_coords), out, projection, fields, direct
                )
            else:
                out[projection.out_selection] = found[projection.chunk_selection]
    return chunks, total


def _back_to_back(
    spans: Spans, members: list[Member]
) -> Iterator[tuple[list[Member], list[tuple[int, int]]]]:
    """``members`` in runs of stored inner chunks whose spans follow one another (in the
    order given), with their spans; those not stored alone, with none. The inner chunks of a
    shard written in order make one run."""
    group: list[Member] = []
    bounds: list[tuple[int, int]] = []
    for member in members:
        span = spans[member[0]]
        if group and (span is None or not bounds or span[0] != bounds[-1][1]):
            yield group, bounds
            group, bounds = [], []
        group.append(member)
        if span is not None:
            bounds.append(span)
    if group:
        yield group, bounds


def _alone(items: list[_Led], parts: Parts | None) -> set[int]:
    """Which of ``items`` (by place) have arrived and are wanted by no other read (their
    loads end: `Lead.alone`)."""
    if parts is None:
        return set()
    places: list[int] = []
    leads: list[Lead] = []
    for i, (_, _, lead) in enumerate(items):
        if lead is not None and parts[i] is not None:
            places.append(i)
            leads.append(lead)
    flags = SHARED_READS.alone_many(leads)
    return {i for i, flag in zip(places, flags, strict=True) if flag}


def _publish(
    pipeline: ChunkPipeline,
    cache: ChunkCache | None,
    lead: Lead | None,
    chunk: np.ndarray[Any, Any] | None,
    generation: Generation | None,
) -> None:
    """Hand an inner chunk to the reads waiting for it (``lead``: None when reads are not
    shared), and keep it in ``cache`` unless a write overtook its read (its shard's
    ``generation``: None when not known)."""
    if lead is not None and lead.publish(chunk) and cache is not None:
        pipeline.keep(cache, lead.ident, chunk, generation)


class _Assembled:
    """A shard's bytes (None: no inner chunk stored), from the job that assembled it, and
    their CRC-32C when the store wants one (`Store.wants_body_crc32c`)."""

    __slots__ = ("crc32c", "shard")

    def __init__(self, shard: bytes | None, crc32c: int | None) -> None:
        self.shard = shard
        self.crc32c = crc32c


class _Assembly:
    """The encoded inner chunks of one shard write, joined into the shard by whichever codec
    job finishes last, in its codec thread.

    A separate assembling job would queue behind every encode job submitted meanwhile (the
    pool is first come, first served, and `codec_queue_bytes` lets the jobs of ~16 shards
    queue), so each shard's PUT waited for the encoding of most shards in flight: PUTs went
    out in waves, sending overlapping little with encoding. A job that fails never counts
    itself done, so a failed shard is never assembled.
    """

    def __init__(
        self,
        jobs: int,
        parts: list[bytes | memoryview | None],
        assemble: Callable[[Any], bytes | None],
        checksum: bool = False,
    ) -> None:
        self._left = jobs
        self._parts = parts
        self._assemble = assemble
        self._checksum = checksum
        self._lock = threading.Lock()

    def done(self, results: list[tuple[int, bytes | None]]) -> _Assembled | None:
        """Record one job's encoded inner chunks; the assembled shard if it was the last job."""
        parts = self._parts
        with self._lock:
            for local, data in results:
                parts[local] = data
            self._left -= 1
            if self._left:
                return None
        shard = self._assemble(parts)
        crc = body_crc32c(shard) if self._checksum and shard is not None else None
        return _Assembled(shard, crc)


async def write_sharded(
    pipeline: ChunkPipeline,
    shards: ShardedChunks,
    projections: Iterable[ChunkProjection],
    values: np.ndarray[Any, Any],
    fields: Fields,
    tracker: ProgressTracker,
    *,
    edges_conditional: bool = False,
) -> None:
    """`ChunkPipeline.write` for a sharded array (see the module docstring).

    A shard whose inner chunks inside the array are all covered whole is encoded and
    stored with one PUT (deleted if every inner chunk is ``fill_value`` and
    ``write_empty_chunks`` is False); any other shard is a read-modify-write of the shard,
    conditional on its generation where the store allows (`ShardedChunks.update`).

    Raises
    ------
    CodecError, StoreError
        The first shard that failed; its stored bytes are unchanged.
    """
    io = pipeline.io
    codec = CodecBatcher()
    nbytes = pipeline.codec.nbytes
    shard_key, spec = pipeline.chunk_key, shards.spec
    per_job = max(1, _JOB_BYTES // max(nbytes, 1))

    async def encoded(
        key: str, shard: tuple[int, ...], members: list[Member], old: Parts | None, checksum: bool = False
    ) -> _Assembled:
        items = []
        for local, p in members:
            # An inner chunk covered whole is encoded from the values alone: its stored bytes
            # are not decoded. Not one reaching past the array's end in an append
            # (``edges_conditional``): past the end this writer knows, a concurrent
            # appender's block may be stored in it. The rule of unsharded chunks
            # (`ChunkPipeline._needs_conditional_update`), applied to inner chunks.
            whole = (
                p.is_complete_chunk
                and fields is None
                and not pipeline._needs_conditional_update(p, fields, edges_conditional)
            )
            stored = None if old is None or whole else old[local]
            items.append((local, shards.label(key, p.chunk_coords), p, stored))
        jobs = [items[i : i + per_job] for i in range(0, len(items), per_job)]
        parts: list[bytes | memoryview | None] = [None] * shards.count if old is None else list(old)
        # A blind PUT's checksum (S3) in the assembling codec thread, off the event loop.
        assembly = _Assembly(len(jobs), parts, spec.assemble, checksum)
        update = pipeline._update_chunk

        def encode(job: list[tuple[int, str, ChunkProjection, memoryview | None]]) -> _Assembled | None:
            # Runs in the codec pool: merge (decoding the stored inner chunk if any) and encode.
            return assembly.done(
                [(local, update(data, label, p, values, fields)) for local, label, p, data in job]
            )

        results = await asyncio.gather(*(codec.run(encode, job, weight=len(job) * nbytes) for job in jobs))
        return next(result for result in results if result is not None)

    async def write_shard(group: tuple[tuple[int, ...], list[Member]]) -> None:
        shard, members = group
        key = shard_key(shard)
        complete = (
            fields is None
            and len(members) == shards.inner_in_array(shard)
            and all(p.is_complete_chunk for _, p in members)
            and not (
                edges_conditional
                and io.store.supports_conditional_writes
                and shards.reaches_past_shape(shard)
            )
        )
        async with io.budget.reserve(len(members) * nbytes):
            if complete:
                assembled = await encoded(key, shard, members, None, io.store.wants_body_crc32c)
                data = assembled.shard
                with crc32c_known(data, assembled.crc32c):
                    await shards.put(key, data)
                stored = 0 if data is None else len(data)
            else:

                async def modify(old: Parts | None) -> bytes | None:
                    return (await encoded(key, shard, members, old)).shard

                stored = await shards.update(key, modify)
        for _ in members:
            tracker.advance(stored // len(members))

    limit = max(io.budget.max_requests, 1)
    await bounded_map(write_shard, _groups(shards, projections), limit)
