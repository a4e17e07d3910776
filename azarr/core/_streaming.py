"""Arrays as write values: copy a chunked source into an array slab by slab (rechunking).

``await dst.set_basic_selection(..., src)`` and ``azarr.array(src, chunks=...)``
accept, besides NumPy values, any object with ``shape``, ``dtype`` and a
chunked read: an `AsyncArray` (read with its own coroutines), an
h5py dataset, a zarr-python 2 array, a NumPy memmap (read with ``source[sel]``
in a worker thread). The source is never read whole: the destination region is
cut into slabs aligned on the destination's chunk grid, each at most
`slab_bytes` big, and at most `SLABS_IN_FLIGHT` slabs are held at a
time, so reading slab *n+1* overlaps writing slab *n* while memory stays at
about ``SLABS_IN_FLIGHT * slab_bytes`` plus the stores' own in-flight chunks;
each slab is also reserved in the destination store's bytes budget, so the
chunk transfers beneath the slabs get the rest of it and the whole copy stays
near the budget.
Because slabs are aligned on the destination's chunks, every destination chunk
inside the region is written whole, once, without a read-modify-write.

zarr-python 2 does the same job by reading the whole source into memory
(``z[...] = other`` calls ``np.asanyarray``), which fails for sources larger
than memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.scheduler import Progress, ProgressCallback, ProgressTracker, budget_for

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray

#: Slabs read or being written at once: one being written while the next is read.
SLABS_IN_FLIGHT = 2
#: Upper bound of one slab (bytes), whatever the store's byte budget.
MAX_SLAB_BYTES = 256 << 20


def is_array_source(value: Any) -> bool:
    """Whether ``value`` is a chunked array to stream from rather than a value to hold in memory.

    True for `AsyncArray` and for objects that have ``shape``,
    ``dtype`` and ``__getitem__`` but are not NumPy arrays or scalars (h5py
    datasets, zarr-python 2 arrays). A NumPy array is already in memory and
    takes the ordinary write path.
    """
    from azarr.core.array import AsyncArray

    if isinstance(value, AsyncArray):
        return True
    if isinstance(value, (np.ndarray, np.generic)):
        return False
    return hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "__getitem__")


async def prepare_source(source: Any) -> None:
    """Let an ``AsyncArray`` source apply its metadata recheck policy before its shape is used."""
    from azarr.core._array_ops import recheck_if_due
    from azarr.core.array import AsyncArray

    if isinstance(source, AsyncArray):
        await recheck_if_due(source)


def source_chunks(source: Any) -> tuple[int, ...] | None:
    """The source's chunk shape, or None if it has none.

    ``chunks`` of zarr and h5py arrays; ``chunklen`` rows of a bcolz ``carray`` (as
    zarr-python 2 reads it: ``(chunklen,) + shape[1:]``).
    """
    chunks = getattr(source, "chunks", None)
    if isinstance(chunks, tuple) and chunks and all(isinstance(c, int) and c > 0 for c in chunks):
        return chunks
    chunklen = getattr(source, "chunklen", None)
    shape = getattr(source, "shape", None)
    if isinstance(chunklen, int) and chunklen > 0 and isinstance(shape, tuple) and shape:
        return (chunklen, *shape[1:])
    return None


async def read_source(source: Any, selection: tuple[slice, ...] | Any = Ellipsis) -> np.ndarray[Any, Any]:
    """``source[selection]`` as a NumPy array: awaited for an AsyncArray, in a worker thread otherwise.

    h5py and zarr-python 2 reads block on file or network I/O, so they never run
    on the event loop.
    """
    from azarr.core.array import AsyncArray

    if isinstance(source, AsyncArray):
        result: np.ndarray[Any, Any] = await source.get_basic_selection(selection)
        return result
    return await asyncio.to_thread(lambda: np.asarray(source[selection]))


def slab_bytes(dest: AsyncArray) -> int:
    """Bytes of one slab: an eighth of the destination store's byte budget, at least one chunk.

    Two slabs in flight then leave three quarters of the budget to the chunk
    reads and writes beneath them, whose encoded chunks waiting for the store
    are not all counted in the budget (measured with
    ``benchmarks/bench_rechunk.py``: a quarter per slab went 5% over the bound).
    """
    chunk_bytes = math.prod(dest.chunks) * dest.dtype.itemsize
    return max(chunk_bytes, min(budget_for(dest.store).max_bytes // 8, MAX_SLAB_BYTES))


def region_of(selection: Any, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...] | None:
    """``[(start, stop), ...]`` per axis if ``selection`` is a step-1 slice region, else None.

    Only ``...``, ``slice(a, b)`` with step 1 (or None) and a tuple of those are
    regions; integers and strides take the general path.
    """
    items = selection if isinstance(selection, tuple) else (selection,)
    if sum(item is Ellipsis for item in items) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        fill = (slice(None),) * (len(shape) - len(items) + 1)
        items = items[:at] + fill + items[at + 1 :]
    items = items + (slice(None),) * (len(shape) - len(items))
    if len(items) != len(shape):
        return None
    region = []
    for item, extent in zip(items, shape, strict=True):
        if not isinstance(item, slice) or item.step not in (None, 1):
            return None
        start, stop, _ = item.indices(extent)
        region.append((start, max(start, stop)))
    return tuple(region)


def plan_slabs(
    region: tuple[tuple[int, int], ...], chunks: tuple[int, ...], itemsize: int, target: int
) -> Iterator[tuple[slice, ...]]:
    """Cut ``region`` into slabs aligned on the ``chunks`` grid, each at most ``target`` bytes (one chunk at least).

    Slabs grow over whole chunks from the last axis to the first, so a slab is
    a run of complete chunk rows where the budget allows.
    """
    ndim = len(region)
    # extent of a slab per axis, in chunks
    per_axis = [1] * ndim
    spans = [math.ceil(stop / c) - start // c for (start, stop), c in zip(region, chunks, strict=True)]
    size = math.prod(chunks) * itemsize
    for axis in reversed(range(ndim)):
        room = max(1, target // size) if size else spans[axis]
        per_axis[axis] = max(1, min(spans[axis], room))
        size *= per_axis[axis]
        if per_axis[axis] < spans[axis]:
            break
    edges = []
    for (start, stop), c, step in zip(region, chunks, per_axis, strict=True):
        first = (start // c) * c
        bounds = [max(start, b) for b in range(first, stop, c * step)] + [stop]
        edges.append([slice(a, b) for a, b in itertools.pairwise(bounds) if b > a])
    if any(not e for e in edges):
        return
    yield from itertools.product(*edges)


async def stream_into(
    dest: AsyncArray,
    region: tuple[tuple[int, int], ...],
    source: Any,
    *,
    progress: ProgressCallback | None = None,
) -> None:
    """Write ``source`` into ``dest[region]`` slab by slab (see the module docstring).

    Raises
    ------
    ValueError
        ``source``'s shape is not the region's shape (named both).
    """
    await prepare_source(source)
    shape = tuple(stop - start for start, stop in region)
    source_shape = tuple(int(n) for n in source.shape)
    if source_shape != shape:
        raise ValueError(
            f"source of shape {source_shape} does not match the selection of shape {shape} "
            "(array sources are not broadcast)"
        )
    if math.prod(shape) == 0:
        return
    slabs = plan_slabs(region, dest.chunks, dest.dtype.itemsize, slab_bytes(dest))
    total = math.prod(
        math.ceil(stop / c) - start // c for (start, stop), c in zip(region, dest.chunks, strict=True)
    )
    tracker = ProgressTracker(total, progress)

    def forward() -> ProgressCallback | None:
        if progress is None:
            return None
        seen = [0]

        def report(update: Progress) -> None:
            tracker.advance(update.nbytes - seen[0])
            seen[0] = update.nbytes

        return report

    budget = budget_for(dest.store)
    itemsize = dest.dtype.itemsize
    # The slabs are held in the destination's bytes budget while they are read and
    # written, so slabs plus the chunk transfers beneath them stay within it; but
    # only when a chunk transfer still fits beside them (else it would wait forever).
    chunk_bytes = math.prod(dest.chunks) * itemsize
    src_chunks = source_chunks(source)
    if src_chunks is not None:
        chunk_bytes = max(chunk_bytes, math.prod(src_chunks) * np.dtype(source.dtype).itemsize)
    reserve = SLABS_IN_FLIGHT * slab_bytes(dest) + chunk_bytes <= budget.max_bytes

    async def copy_slab(slab: tuple[slice, ...]) -> None:
        local = tuple(slice(s.start - r[0], s.stop - r[0]) for s, r in zip(slab, region, strict=True))
        held = budget.reserve(math.prod(s.stop - s.start for s in slab) * itemsize) if reserve else None
        async with held if held is not None else contextlib.nullcontext():
            data = await read_source(source, local)
            await dest.set_basic_selection(slab, data, progress=forward())

    from azarr.scheduler import bounded_map

    await bounded_map(copy_slab, slabs, SLABS_IN_FLIGHT)
