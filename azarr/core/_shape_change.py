"""Crash-safe shape changes (``resize``, ``append``): the store is made ready, then the shape published.

A reader trusts the array's metadata document (``.zarray``, or ``zarr.json`` in Zarr
v3; "the document" below): every element inside the published shape is either
data written there or ``fill_value``. So what lies *outside* the shape must never
become visible by surprise, whenever a writer is killed:

* **shrinking** deletes the chunks beyond the new chunk grid, and clears (sets to
  ``fill_value``) the part of the chunks cut by the new edge that falls outside
  it, *before* the smaller shape is written. Killed in between, the old shape is
  still published: the region being removed reads partly as ``fill_value``,
  nothing else changed, and running the resize again finishes it.
* **growing** (``resize``, ``append``) first clears whatever the newly exposed
  region holds -- chunks left by a shrink killed with an older azarr or
  zarr-python 2 (which publish first and delete after), by a writer that used a
  stale shape, or the part of an edge chunk beyond the old shape -- and only then
  writes the larger shape. Killed in between, the old shape is still published
  and what was cleared was invisible.

Concurrent writers: the exposed region may hold a concurrent ``append``'s block as
soon as that appender has published its own, larger shape. So a chunk is cleared
only under a generation read *before* the document is checked again unchanged, and
written conditionally on that generation (`Store.set` ``if_generation_match``);
the new shape is then written conditionally on the document's generation read
first. Any change in between starts the round again from the new document.
Both formats alike: chunks are found and named by the array's own chunk key
encoding (v2 ``0.0``/``0/0``; v3 ``c/0/0``, or ``0.0`` under the ``v2`` encoding),
and a v3 ``zarr.json`` keeps its attributes, dimension names and extensions.

Sharded arrays: the stored objects are shards, so shards are what is listed, deleted
and rewritten (one conditional PUT each); a shard cut by the new edge is rewritten
without its inner chunks wholly outside, and with those cut by the edge cleared. Its
index then no longer names data outside the shape, so a later grow cannot expose any.
A shard index cached for a rewritten shard is stale by generation: its next read fails
its pin and reads the shard again (`azarr.pipeline._shards`).
See ``docs/consistency.md``, "Crash windows".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr import config
from azarr.codecs._pool import run_in_codec_pool
from azarr.errors import ArrayNotFoundError, PreconditionFailedError
from azarr.metadata import AnyArrayMetadata
from azarr.scheduler import bounded_map

if TYPE_CHECKING:
    from azarr.codecs import ChunkCodec
    from azarr.core.array import AsyncArray
    from azarr.pipeline._shards import ShardedChunks
    from azarr.storage import Generation

#: Bytes of decoded chunks one round of clearing holds at once (chunks are cleared in batches).
_BATCH_BYTES = 64 * 2**20
#: Chunks per batch at most, whatever their size.
_BATCH_CHUNKS = 256


class _Changed(Exception):
    """The metadata document or a chunk changed under the round: start it again."""


class _Delete:
    """What clearing a chunk leaves when nothing of it stays: delete it."""


_DELETE = _Delete()


async def change_shape(
    array: AsyncArray,
    change: Callable[[AnyArrayMetadata], AnyArrayMetadata],
    *,
    idempotent: bool = True,
    listing: bool = True,
) -> AnyArrayMetadata:
    """Apply ``change`` to the stored ``.zarray`` or ``zarr.json``, making the store ready for the new shape first.

    Parameters
    ----------
    array : AsyncArray
        The array resized (its metadata is replaced by what was written).
    change : callable
        ``change(stored metadata) -> new metadata``; called again after every
        conflict with the newer document, so it must be a pure function of it.
    idempotent : bool
        As `StoreIO.set_if`: False where *who* wrote matters (``append``'s claim).
    listing : bool
        Find stored chunks by listing the array (``resize``: also deletes chunks
        beyond the new grid anywhere), or by probing the chunk keys of the exposed
        region only (``append``: costs one read per chunk the append writes anyway,
        whatever the size of the array).

    Returns
    -------
    ArrayMetadata or ArrayV3Metadata
        The metadata written.

    Raises
    ------
    ArrayNotFoundError
        The metadata document is gone.
    PreconditionFailedError
        Other writers changed the metadata document or the chunks on each of
        ``conditional_write_attempts`` rounds.
    ConsistencyUnsupportedError
        ``require_consistency`` on a store without conditional writes.
    """
    io = array._io
    key = array._metadata_key
    conditional = io.check_consistency(key)
    attempts = int(config.get("conditional_write_attempts"))
    for _ in range(attempts):
        raw, generation = await io.get_with_generation(key)
        if raw is None:
            raise ArrayNotFoundError(f"no array at path {array.path!r} in {io.url} ({key!r} is missing)")
        current = array._parse_metadata(raw)
        new = change(current)
        if current.replace(shape=array.shape) != array.metadata:
            array._use_metadata(current)  # replaced by another writer: clear with its encoding
        try:
            await _prepare(array, current.shape, new.shape, raw, key, listing=listing)
            encoded = new.to_json()
            if encoded != raw:
                if conditional and generation is not None:
                    await io.set_if(key, encoded, if_generation_match=generation, idempotent=idempotent)
                else:
                    await io.set(key, encoded)
        except (_Changed, PreconditionFailedError):
            io.stats.count_conflict()
            continue
        array._use_metadata(new)
        return new
    raise PreconditionFailedError(
        f"resize of {key!r} in {io.url}: other writers changed it on each of {attempts} attempts"
    )


async def _prepare(
    array: AsyncArray,
    old: tuple[int, ...],
    new: tuple[int, ...],
    raw: bytes,
    key: str,
    *,
    listing: bool,
) -> None:
    """Delete and clear what lies outside ``min(old, new)`` on every axis that changes."""
    chunks = array.shards or array.chunks  # of the stored objects: shards of a sharded array
    keep = tuple(min(o, n) for o, n in zip(old, new, strict=True))
    changing = [i for i, (o, n) in enumerate(zip(old, new, strict=True)) if o != n]
    grid = tuple(math.ceil(n / c) for n, c in zip(new, chunks, strict=True))

    def reaches_out(coords: tuple[int, ...]) -> bool:
        return any((coords[i] + 1) * chunks[i] > keep[i] for i in changing)

    if listing:
        beyond: list[str] = []
        candidates: list[tuple[tuple[int, ...], str]] = []
        async for coords, chunk_key in array._stored_chunk_coords():
            if any(c >= n for c, n in zip(coords, grid, strict=True)):
                beyond.append(chunk_key)
            elif reaches_out(coords):
                candidates.append((coords, chunk_key))
        # Beyond the new grid: nothing there is visible once the shape is written, so
        # plain deletes (a shrink's region being removed reads as fill_value meanwhile).
        await bounded_map(array._io.delete, beyond, array._budget.max_requests)
    else:
        candidates = [(c, array._chunk_key(c)) for c in _exposed_chunks(keep, grid, chunks, changing)]
    shards = array._pipeline.shards
    nbytes = array._codec.nbytes * (1 if shards is None else shards.count)
    batch = max(1, min(_BATCH_CHUNKS, _BATCH_BYTES // max(1, nbytes)))
    for start in range(0, len(candidates), batch):
        await _clear_batch(array, candidates[start : start + batch], keep, changing, raw, key)


def _exposed_chunks(
    keep: tuple[int, ...], grid: tuple[int, ...], chunks: tuple[int, ...], changing: list[int]
) -> Iterable[tuple[int, ...]]:
    """Grid coordinates of the chunks of the new grid reaching outside ``keep`` on a changing axis."""
    seen: set[tuple[int, ...]] = set()
    for axis in changing:
        ranges = [range(n) for n in grid]
        ranges[axis] = range(keep[axis] // chunks[axis], grid[axis])
        for coords in itertools.product(*ranges):
            if coords not in seen:
                seen.add(coords)
                yield coords


async def _clear_batch(
    array: AsyncArray,
    items: list[tuple[tuple[int, ...], str]],
    keep: tuple[int, ...],
    changing: list[int],
    raw: bytes,
    key: str,
) -> None:
    """Read a batch of chunks, clear what lies outside ``keep``, and write the changed ones back
    conditionally, once the metadata document is seen unchanged after the reads (see the module)."""
    io, codec = array._io, array._codec
    pipeline = array._pipeline
    shards = pipeline.shards
    size = codec.chunks if shards is None else shards.shard_shape

    async def plan(
        item: tuple[tuple[int, ...], str],
    ) -> tuple[str, Generation | None, bytes | _Delete] | None:
        coords, chunk_key = item
        data, generation = await io.get_with_generation(chunk_key)
        if data is None:
            return None
        cuts = _cuts(coords, size, keep, changing)
        if any(cut <= 0 for cut in cuts.values()):
            return chunk_key, generation, _DELETE  # wholly outside: nothing of it stays
        fill = (pipeline.fill_value, pipeline.write_empty_chunks)
        if shards is None:
            cleared = await run_in_codec_pool(_cleared, codec, data, chunk_key, cuts, *fill)
        else:
            where = (coords, keep, changing)
            cleared = await run_in_codec_pool(_cleared_shard, shards, codec, data, chunk_key, *where, *fill)
        return None if cleared is None else (chunk_key, generation, cleared)

    actions = [a for a in await bounded_map(plan, items, io.budget.max_requests) if a is not None]
    if not actions:
        return
    # Every generation above was read before this check: a chunk holding a concurrent
    # appender's block was written after that appender published its shape, so either
    # the document differs now, or the chunk changes after our read and its write below fails.
    if await io.get(key) != raw:
        raise _Changed

    async def apply(action: tuple[str, Generation | None, bytes | _Delete]) -> None:
        chunk_key, generation, value = action
        plain = generation is None or not io.store.supports_conditional_writes
        if isinstance(value, _Delete):
            if plain:
                await io.delete(chunk_key)
            else:
                await io.delete_if(chunk_key, if_generation_match=generation)
        elif plain:
            await io.set(chunk_key, value)
        else:
            await io.set_if(chunk_key, value, if_generation_match=generation)

    await bounded_map(apply, actions, io.budget.max_requests)


def _cuts(
    coords: tuple[int, ...], size: tuple[int, ...], keep: tuple[int, ...], changing: list[int]
) -> dict[int, int]:
    """Where ``keep`` cuts the object of ``size`` at grid ``coords``, per changing axis that
    reaches outside it (the position from which on it is outside; <= 0: wholly outside)."""
    origin = [c * n for c, n in zip(coords, size, strict=True)]
    return {i: keep[i] - origin[i] for i in changing if origin[i] + size[i] > keep[i]}


def _cleared_shard(
    shards: ShardedChunks,
    codec: ChunkCodec,
    data: bytes,
    key: str,
    shard: tuple[int, ...],
    keep: tuple[int, ...],
    changing: list[int],
    fill_value: Any,
    write_empty_chunks: bool,
) -> bytes | _Delete | None:
    """Shard ``key`` without the inner chunks wholly outside ``keep``, and those cut by it
    cleared (`_cleared`); None if nothing changes, `_DELETE` if no inner chunk is left
    (runs in the codec pool).

    Raises
    ------
    ShardIndexError
        The stored shard's index is corrupt (nothing is written).
    """
    parts: list[bytes | memoryview | None] = list(shards.split(data, key))
    changed = False
    for local, part in enumerate(parts):
        if part is None:
            continue
        cuts = _cuts(shards.inner_coords(shard, local), codec.chunks, keep, changing)
        if not cuts:
            continue
        if any(cut <= 0 for cut in cuts.values()):
            cleared: bytes | _Delete | None = _DELETE
        else:
            label = shards.label(key, shard, local)
            cleared = _cleared(codec, part, label, cuts, fill_value, write_empty_chunks)
        if cleared is not None:
            parts[local] = None if isinstance(cleared, _Delete) else cleared
            changed = True
    if not changed:
        return None
    assembled = shards.spec.assemble(parts)
    return _DELETE if assembled is None else assembled


def _cleared(
    codec: ChunkCodec,
    data: bytes | memoryview,
    key: str,
    cuts: dict[int, int],
    fill_value: Any,
    write_empty_chunks: bool,
) -> bytes | _Delete | None:
    """The chunk with ``fill_value`` from position ``cuts[axis]`` on along each axis; None if
    it is so already, `_DELETE` if nothing else is left (runs in the codec pool)."""
    chunk = codec.decode(data, key=key)
    fill = codec.fill_chunk(fill_value)
    regions = [
        tuple(slice(cut, None) if i == axis else slice(None) for i in range(chunk.ndim))
        for axis, cut in cuts.items()
    ]
    if all(_equal(chunk[r], fill[r]) for r in regions):
        return None
    for region in regions:
        chunk[region] = fill[region]
    if not write_empty_chunks and codec.is_fill_chunk(chunk, fill_value):
        return _DELETE
    encoded: bytes = codec.encode(chunk, key=key)
    return encoded


def _equal(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> bool:
    """Element-wise equality, NaN equal to NaN (compared as stored bytes where the dtype has no objects)."""
    if a.dtype.hasobject:
        try:
            return bool(np.array_equal(a, b))
        except (TypeError, ValueError):
            return False
    return np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
