"""A selection on one array, validated up front and cut into slabs that each fit a byte budget.

A service has to answer with a status and headers (shape, dtype, length) before the
data, and must not hold a gigabyte result in memory to do it. `SelectionPlan`
checks a selection against the array's shape (so bad ones fail with a 400 before
anything is read), knows the result's shape, dtype and size, and yields
sub-selections ("slabs") whose results, concatenated, are the result's bytes in C
order. Slabs are cut along the first dimension of the result at chunk boundaries,
as many whole rows of chunks per slab as fit, so each chunk is fetched by exactly
one slab. Memory wins over fetching once: when one row of chunks alone is larger
than the budget it is cut too (and a single row of the result larger than the
budget is cut along the next dimension), and the chunks it crosses are fetched
once per slab that needs them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.indexing import (
    CoordinateIndexer,
    OrthogonalIndexer,
    SelectionValueError,
    expand_selection,
    is_pure_fancy_indexing,
)

if TYPE_CHECKING:
    from azarr.core import AsyncArray

# Per dimension of an orthogonal selection, normalized: an int (dimension dropped),
# a range of indices (a slice) or an int array (a list of indices / a Boolean mask).
_Item = int | range | np.ndarray[Any, np.dtype[np.intp]]


class SelectionPlan:
    """One validated selection of ``array`` and how to read it in bounded slabs.

    Parameters
    ----------
    array : AsyncArray
        The array read.
    selection : tuple
        What `azarr.indexing.parse_selection` returns (ints, slices, lists of
        ints or Booleans, Ellipsis), routed like zarr-python 2's ``z[selection]``:
        one integer list per dimension is a coordinate (``vindex``) selection,
        anything else is orthogonal (``oindex``; plain ints and slices are its
        basic special case).

    Attributes
    ----------
    shape : tuple of int
        Shape of the result.
    dtype : numpy.dtype
        Dtype of the result (the array's).
    nbytes : int
        Size of the result in bytes.

    Raises
    ------
    azarr.indexing.SelectionError
        Out-of-bounds index, too many indices, zero step, wrong mask length...
        (HTTP 400 through `http_error_for`).
    """

    def __init__(self, array: AsyncArray, selection: tuple[Any, ...]) -> None:
        self.array = array
        self.dtype: np.dtype[Any] = array.dtype
        self.coordinate = is_pure_fancy_indexing(selection, array.ndim)
        if self.coordinate:
            coords = tuple(np.asarray(s) for s in selection)
            indexer = CoordinateIndexer(coords, array.shape, array.chunks)
            self.shape: tuple[int, ...] = tuple(indexer.result_shape)
            self._coords = np.broadcast_arrays(*coords) if coords else []
            self._items: list[_Item] = []
        else:
            expanded = expand_selection(selection, array.ndim)
            prepared = tuple(np.asarray(s) if isinstance(s, list) else s for s in expanded)
            # Validates bounds, steps and mask lengths with the indexer the read will use.
            self.shape = tuple(OrthogonalIndexer(prepared, array.shape, array.chunks).result_shape)
            self._items = [_normalize(s, n) for s, n in zip(prepared, array.shape, strict=True)]
            self._coords = []
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def slabs(self, max_bytes: int) -> Iterator[tuple[Any, ...]]:
        """Sub-selections in result order, each result at most ``max_bytes`` (bytes) when possible.

        A slab never exceeds ``max_bytes`` unless one element of the result does.
        Read each with `read`.
        """
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if self.coordinate:
            yield from self._coordinate_slabs(max_bytes)
            return
        for items in _split(self._items, self.array.chunks, self.dtype.itemsize, max_bytes):
            yield tuple(_denormalize(item) for item in items)

    def _coordinate_slabs(self, max_bytes: int) -> Iterator[tuple[Any, ...]]:
        npoints = self._coords[0].size if self._coords else 0
        step = max(1, max_bytes // self.dtype.itemsize)
        flat = [c.reshape(-1) for c in self._coords]
        for start in range(0, max(npoints, 1), step):
            yield tuple(f[start : start + step] for f in flat)

    async def read(self, slab: tuple[Any, ...] | None = None) -> np.ndarray[Any, Any]:
        """Read one slab (from `slabs`), or the whole selection when ``slab`` is None.

        Returns
        -------
        numpy.ndarray
            The slab's result, C-contiguous; a 0-d array for a single element.
        """
        if slab is None:
            slab = (
                tuple(self._coords) if self.coordinate else tuple(_denormalize(item) for item in self._items)
            )
        arr = self.array
        if self.coordinate:
            result = await arr.get_coordinate_selection(slab)
        elif any(isinstance(s, np.ndarray) for s in slab):
            result = await arr.get_orthogonal_selection(slab)
        else:
            result = await arr.get_basic_selection(slab)
        return np.ascontiguousarray(result)


def _normalize(item: Any, size: int) -> _Item:
    if isinstance(item, slice):
        return range(*item.indices(size))
    if isinstance(item, np.ndarray):
        if item.dtype == bool:
            return np.flatnonzero(item).astype(np.intp)
        idx = item.astype(np.intp).reshape(-1)
        return np.where(idx < 0, idx + size, idx)
    if item is Ellipsis:  # pragma: no cover - expand_selection removed it
        raise SelectionValueError("unexpected Ellipsis")
    i = int(item)
    return i + size if i < 0 else i


def _denormalize(item: _Item) -> Any:
    if isinstance(item, range):
        stop: int | None = item.stop
        if stop is not None and stop < 0:  # a descending range ending at index 0
            stop = None
        return slice(item.start, stop, item.step)
    return item


def _runs(index: range | np.ndarray[Any, Any], chunk: int) -> Iterator[tuple[int, int]]:
    """``(position, count)`` runs of consecutive positions of ``index`` that fall in one chunk."""
    if isinstance(index, range):
        pos, n, step = 0, len(index), index.step
        while pos < n:
            value = index[pos]
            cid = value // chunk
            # Positions left in this chunk going up (to its end) or down (to its start).
            room = (
                ((cid + 1) * chunk - value + step - 1) // step
                if step > 0
                else (value - cid * chunk) // -step + 1
            )
            count = min(room, n - pos)
            yield pos, count
            pos += count
        return
    if index.size == 0:
        return
    cids = index // chunk
    cuts = np.flatnonzero(np.diff(cids)) + 1
    bounds = [0, *cuts.tolist(), int(index.size)]
    for a, b in itertools.pairwise(bounds):
        yield a, b - a


def _groups(runs: Iterator[tuple[int, int]], limit: int) -> Iterator[tuple[int, int]]:
    """Merge consecutive runs into groups of at most ``limit`` positions (a longer run is cut)."""
    start = count = 0
    for pos, n in runs:
        while n > 0:
            if count and count + n > limit:  # start the next group on a chunk boundary
                yield start, count
                count = 0
            if not count:
                start = pos
            take = min(n, limit - count)
            count, pos, n = count + take, pos + take, n - take
            if count == limit:
                yield start, count
                count = 0
    if count:
        yield start, count


def _split(
    items: Sequence[_Item], chunks: Sequence[int], itemsize: int, max_bytes: int
) -> Iterator[list[_Item]]:
    """Cut a normalized orthogonal selection along its first kept dimension (see the module)."""
    dim = next((d for d, item in enumerate(items) if not isinstance(item, int)), None)
    if dim is None:
        yield list(items)
        return
    index = items[dim]
    assert not isinstance(index, int)
    row_bytes = itemsize * math.prod(len(i) for i in items[dim + 1 :] if not isinstance(i, int))
    if len(index) * row_bytes <= max_bytes:
        yield list(items)
        return
    rows = max_bytes // row_bytes if row_bytes else len(index)
    if rows >= 1:
        for pos, count in _groups(_runs(index, chunks[dim]), rows):
            part = list(items)
            part[dim] = index[pos : pos + count]
            yield part
        return
    # One row along `dim` is larger than the budget: fix it and cut the next dimension.
    for pos in range(len(index)):
        part = list(items)
        part[dim] = int(index[pos])
        yield from _split(part, chunks, itemsize, max_bytes)
