"""Crash-safe shape changes (``resize``, ``append``): the store is made ready, then the shape published.

What a resize keeps and drops is zarr-python 2's and 3's (``Array.resize``): the
stored objects (chunks; shards of a sharded array) wholly outside the new shape
are deleted, and an object cut by the new edge is kept as it is -- so growing the
array again shows what the shrink cut off inside it (zarr 2.18's own
``test_resize_2d`` asserts exactly that). What azarr adds is the order, so that a
writer killed at any point leaves what a finished or a never-started change
would, and never a state zarr semantics cannot produce:

* **shrinking** deletes the objects beyond the new grid *before* the smaller shape
  is written (zarr-python writes first and deletes after). Killed in between, the
  old shape is still published with some of the region being removed reading as
  ``fill_value``; running the resize again finishes it.
* **growing** (``resize``, ``append``) first deletes whatever stored objects lie
  wholly in the region the new shape exposes -- left by a shrink killed with an
  older azarr or zarr-python (which publish first and delete after), or by a
  writer that used a stale shape -- and only then writes the larger shape. Killed
  in between, the old shape is still published and what was deleted was
  invisible. Objects cut by the old edge are left alone, as a finished shrink
  left them.

Concurrent writers: the exposed region may hold a concurrent ``append``'s block as
soon as that appender has published its own, larger shape. So an object is deleted
only under a generation read *before* the document is checked again unchanged, and
conditionally on that generation (`Store.delete` ``if_generation_match``); the new
shape is then written conditionally on the document's generation read first. Any
change in between starts the round again from the new document.
Both formats alike: objects are found and named by the array's own chunk key
encoding (v2 ``0.0``/``0/0``; v3 ``c/0/0``, or ``0.0`` under the ``v2`` encoding),
and a v3 ``zarr.json`` keeps its attributes, dimension names and extensions.
See ``docs/consistency.md``, "Crash windows".
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from azarr import config
from azarr.errors import ArrayNotFoundError, PreconditionFailedError
from azarr.metadata import AnyArrayMetadata
from azarr.scheduler import bounded_map

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray
    from azarr.storage import Generation

#: Objects one round of deleting checks at once (their generations are held until the document is checked).
_BATCH_OBJECTS = 256


class _Changed(Exception):
    """The metadata document or an object changed under the round: start it again."""


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
    """Delete the stored objects wholly outside ``min(old, new)`` on an axis that changes."""
    chunks = array.shards or array.chunks  # of the stored objects: shards of a sharded array
    keep = tuple(min(o, n) for o, n in zip(old, new, strict=True))
    changing = [i for i, (o, n) in enumerate(zip(old, new, strict=True)) if o != n]
    grid = tuple(math.ceil(n / c) for n, c in zip(new, chunks, strict=True))
    if listing:
        beyond: list[str] = []
        exposed: list[str] = []
        async for coords, chunk_key in array._stored_chunk_coords():
            if any(c >= n for c, n in zip(coords, grid, strict=True)):
                beyond.append(chunk_key)
            elif any(coords[i] * chunks[i] >= keep[i] for i in changing):
                exposed.append(chunk_key)
        # Beyond the new grid: nothing there is visible once the shape is written, so
        # plain deletes (a shrink's region being removed reads as fill_value meanwhile).
        await bounded_map(array._io.delete, beyond, array._budget.max_requests)
    else:
        exposed = [array._chunk_key(c) for c in _exposed_chunks(keep, grid, chunks, changing)]
    for start in range(0, len(exposed), _BATCH_OBJECTS):
        await _delete_exposed(array, exposed[start : start + _BATCH_OBJECTS], raw, key)


def _exposed_chunks(
    keep: tuple[int, ...], grid: tuple[int, ...], chunks: tuple[int, ...], changing: list[int]
) -> Iterable[tuple[int, ...]]:
    """Grid coordinates of the objects of the new grid wholly outside ``keep`` on a changing axis."""
    seen: set[tuple[int, ...]] = set()
    for axis in changing:
        ranges = [range(n) for n in grid]
        ranges[axis] = range(math.ceil(keep[axis] / chunks[axis]), grid[axis])
        for coords in itertools.product(*ranges):
            if coords not in seen:
                seen.add(coords)
                yield coords


async def _delete_exposed(array: AsyncArray, keys: list[str], raw: bytes, key: str) -> None:
    """Delete the objects of ``keys`` that exist, each conditionally on the generation read
    before the metadata document is seen unchanged (see the module)."""
    io = array._io

    async def generation_of(chunk_key: str) -> tuple[str, Generation | None] | None:
        data, generation = await io.get_with_generation(chunk_key)
        return None if data is None else (chunk_key, generation)

    found = [f for f in await bounded_map(generation_of, keys, io.budget.max_requests) if f is not None]
    if not found:
        return
    # Every generation above was read before this check: an object holding a concurrent
    # appender's block was written after that appender published its shape, so either
    # the document differs now, or the object changes after our read and its delete fails.
    if await io.get(key) != raw:
        raise _Changed

    async def delete(item: tuple[str, Generation | None]) -> None:
        chunk_key, generation = item
        if generation is None or not io.store.supports_conditional_writes:
            await io.delete(chunk_key)
        else:
            await io.delete_if(chunk_key, if_generation_match=generation)

    await bounded_map(delete, found, io.budget.max_requests)
