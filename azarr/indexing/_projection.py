"""Chunk projections and the per-dimension building blocks of the indexers.

A selection along one dimension (an integer, a slice, or an integer/Boolean array)
is turned once, at construction time, into a list of `DimItem` — one per chunk
of that dimension holding at least one selected element. The N-dimensional
projections are the Cartesian product of those lists, generated lazily.

zarr-python 2 recomputes each dimension's projections in Python generators on every
iteration and converts orthogonal selections with ``np.ix_`` per chunk; here the
arithmetic is vectorized with NumPy per dimension and iteration only assembles tuples.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from azarr.indexing._errors import BoundsCheckError, SelectionTypeError, SelectionValueError
from azarr.indexing._normalize import ceildiv, normalize_integer_selection

__all__ = [
    "ChunkProjection",
    "DimItem",
    "DimProjections",
    "ProjectionProduct",
    "array_dim",
    "int_dim",
    "slice_dim",
]


class ChunkProjection(NamedTuple):
    """How one chunk takes part in a selection (zarr-python 2: ``ChunkProjection``, plus completeness).

    Reading does ``out[out_selection] = chunk[chunk_selection]`` and writing does
    ``chunk[chunk_selection] = value[out_selection]``, with plain NumPy semantics,
    where ``chunk`` is the full decoded chunk (shape = the metadata ``chunks``, edge
    chunks included) and ``out`` / ``value`` have the indexer's ``shape``.

    Attributes
    ----------
    chunk_coords : tuple of int
        Index of the chunk in the chunk grid.
    chunk_selection : tuple
        Selection to apply to the decoded chunk array.
    out_selection : tuple
        Selection to apply to the output (read) or value (write) array.
    is_complete_chunk : bool
        The selection covers every in-bounds element of the chunk, so a write needs
        no read-modify-write. For an edge chunk, covering the in-bounds part counts.
    """

    chunk_coords: tuple[int, ...]
    chunk_selection: tuple[Any, ...]
    out_selection: tuple[Any, ...] | Any
    is_complete_chunk: bool


DimItem = tuple[int, Any, Any, bool]
"""One chunk's share of a one-dimensional selection.

``(chunk index, selection within the chunk, selection within the output, whether the
chunk's in-bounds extent is fully covered)``. For an integer selection the output
selection is ``None``: the dimension is dropped.
"""


@dataclass(frozen=True, slots=True)
class DimProjections:
    """The projections of a one-dimensional selection onto one dimension's chunks.

    Attributes
    ----------
    kind : {"int", "slice", "array"}
        The selection's kind; ``"int"`` dimensions are dropped from the output.
    nitems : int
        Number of output elements along this dimension (1 for ``"int"``).
    items : list of DimItem
        One entry per chunk holding at least one selected element, each chunk once.
    out_is_array : bool
        The output selections are integer arrays (an unsorted array selection)
        rather than slices.
    """

    kind: Literal["int", "slice", "array"]
    nitems: int
    items: list[DimItem]
    out_is_array: bool = False


def int_dim(dim_sel: Any, dim_len: int, chunk_len: int, axis: int) -> DimProjections:
    """Project an integer index (negative wraps around).

    Raises
    ------
    BoundsCheckError
        The index is out of bounds.
    SelectionTypeError
        The index is not an integer.
    """
    i = normalize_integer_selection(dim_sel, dim_len, axis)
    c = i // chunk_len
    complete = min(chunk_len, dim_len - c * chunk_len) == 1
    return DimProjections("int", 1, [(c, i - c * chunk_len, None, complete)])


def slice_dim(dim_sel: slice, dim_len: int, chunk_len: int, axis: int) -> DimProjections:
    """Project a slice with any step, negative included (NumPy semantics).

    Chunk selections are slices (negative-step slices for negative steps), output
    selections are step-1 slices.

    Raises
    ------
    SelectionTypeError
        A slice bound is not an integer or None.
    SelectionValueError
        The step is zero.
    """
    try:
        start, stop, step = dim_sel.indices(dim_len)
    except TypeError as e:
        raise SelectionTypeError(f"invalid slice {dim_sel!r} for axis {axis}: {e}") from None
    except ValueError as e:
        raise SelectionValueError(f"invalid slice {dim_sel!r} for axis {axis}: {e}") from None
    n = len(range(start, stop, step))
    items: list[DimItem] = []
    if n == 0:
        return DimProjections("slice", 0, items)
    L = chunk_len
    if abs(step) > L:
        # Each chunk holds at most one element: walk the elements, not the (possibly
        # far more numerous) chunks in between.
        for i, p in enumerate(range(start, stop, step)):
            c = p // L
            off = c * L
            items.append((c, slice(p - off, p - off + 1), slice(i, i + 1), min(L, dim_len - off) == 1))
    elif step > 0:
        # |step| <= chunk length: every chunk between the first and last element is hit.
        last = start + (n - 1) * step
        for c in range(start // L, last // L + 1):
            off = c * L
            end = min(off + L, dim_len)
            i_lo = 0 if off <= start else ceildiv(off - start, step)
            i_hi = min(n, ceildiv(end - start, step))
            lo = start + i_lo * step - off
            hi = start + (i_hi - 1) * step - off + 1
            items.append((c, slice(lo, hi, step), slice(i_lo, i_hi), i_hi - i_lo == end - off))
    else:
        s = -step
        last = start - (n - 1) * s
        for c in range(start // L, last // L - 1, -1):
            off = c * L
            end = min(off + L, dim_len)
            # elements p_i = start - i*s with off <= p_i < end
            i_lo = max(0, (start - end) // s + 1)
            i_hi = min(n, (start - off) // s + 1)
            first = start - i_lo * s - off
            after = start - (i_hi - 1) * s - off - 1
            # a stop of -1 would mean "the last element": use None to run to the start
            csel = slice(first, after if after >= 0 else None, step)
            items.append((c, csel, slice(i_lo, i_hi), i_hi - i_lo == end - off))
    return DimProjections("slice", n, items)


def _coerce_index_array(dim_sel: Any, axis: int) -> npt.NDArray[Any]:
    arr = np.asarray(dim_sel)
    if arr.size == 0 and isinstance(dim_sel, (list, tuple)):
        # np.asarray([]) is float64; an empty list is a valid (empty) integer selection
        return np.empty(0, dtype=np.intp)
    if arr.dtype != bool and arr.dtype.kind not in "ui":
        raise SelectionTypeError(
            f"arrays used as indices must be of integer or Boolean type; "
            f"got dtype {arr.dtype} for axis {axis}"
        )
    if arr.ndim != 1:
        raise SelectionValueError(
            f"integer and Boolean arrays in an orthogonal selection must be 1-dimensional; "
            f"got a {arr.ndim}-dimensional array for axis {axis}"
        )
    return arr


def wrap_and_check(arr: npt.NDArray[Any], dim_len: int, axis: int) -> npt.NDArray[np.intp]:
    """Return ``arr`` as ``intp`` with negative indices wrapped, never modifying the input.

    (zarr-python 2 wraps negative indices in place, altering the caller's array.)

    Raises
    ------
    BoundsCheckError
        Some index is not in ``[-dim_len, dim_len)``; the message names the first one.
    """
    if arr.size == 0:
        return np.empty(arr.shape, dtype=np.intp)
    lo, hi = arr.min(), arr.max()
    if lo < -dim_len or hi >= dim_len:
        bad = arr[(arr < -dim_len) | (arr >= dim_len)].flat[0]
        raise BoundsCheckError(f"index {bad} is out of bounds for axis {axis} with size {dim_len}")
    idx = arr.astype(np.intp, copy=False)
    if lo < 0:
        idx = np.where(idx < 0, idx + dim_len, idx)
    return idx


def array_dim(dim_sel: Any, dim_len: int, chunk_len: int, axis: int) -> DimProjections:
    """Project a 1-D integer array/list (any order, duplicates allowed) or 1-D Boolean array.

    Elements are grouped by chunk with a stable sort, so duplicates keep their order
    and a write with duplicate indices is last-wins, as in NumPy.

    Raises
    ------
    BoundsCheckError
        An index is out of bounds.
    SelectionTypeError
        The array is neither integer nor Boolean.
    SelectionValueError
        The array is not 1-D, or a Boolean array's length differs from ``dim_len``.
    """
    arr = _coerce_index_array(dim_sel, axis)
    if arr.dtype == bool:
        if arr.shape[0] != dim_len:
            raise SelectionValueError(
                f"Boolean index has the wrong length for axis {axis}: expected {dim_len}, got {arr.shape[0]}"
            )
        idx: npt.NDArray[np.intp] = np.flatnonzero(arr)
        unique = True
    else:
        idx = wrap_and_check(arr, dim_len, axis)
        unique = False
    n = int(idx.size)
    if n == 0:
        return DimProjections("array", 0, [])
    L = chunk_len
    chunk = idx // L
    order: npt.NDArray[np.intp] | None = None
    if n < 2 or bool(np.all(chunk[1:] >= chunk[:-1])):
        # already grouped by chunk (e.g. sorted): output selections are plain slices
        sidx, schunk = idx, chunk
    else:
        order = np.argsort(chunk, kind="stable")
        sidx, schunk = idx[order], chunk[order]
    brk = np.flatnonzero(schunk[1:] != schunk[:-1]) + 1
    starts = np.concatenate(([0], brk))
    ends = np.concatenate((brk, [n]))
    cids = schunk[starts]
    local = sidx - schunk * L
    inb = np.minimum(L, dim_len - cids * L)
    counts = ends - starts
    if unique:
        complete = counts == inb
    else:
        complete = np.zeros(len(cids), dtype=bool)
        # duplicates may inflate counts: only count distinct indices where it could matter
        if np.any(counts >= inb):
            distinct = np.bincount(np.unique(idx) // L, minlength=int(cids[-1]) + 1)
            complete = distinct[cids] == inb
    starts_l, ends_l = starts.tolist(), ends.tolist()
    outs: Sequence[Any]
    if order is None:
        outs = [slice(s, e) for s, e in zip(starts_l, ends_l, strict=True)]
    else:
        outs = [order[s:e] for s, e in zip(starts_l, ends_l, strict=True)]
    items: list[DimItem] = [
        (c, local[s:e], o, k)
        for c, s, e, o, k in zip(cids.tolist(), starts_l, ends_l, outs, complete.tolist(), strict=True)
    ]
    return DimProjections("array", n, items, out_is_array=order is not None)


class ProjectionProduct:
    """The Cartesian product of per-dimension items, enumerated lazily as projections.

    Parameters
    ----------
    item_lists : sequence of list of DimItem
        Per-dimension items, in dimension order.
    keep : sequence of int
        Dimensions whose output selection appears in ``out_selection``; the others
        must be integer-indexed (exactly one item each) and are dropped.

    Notes
    -----
    The items are transposed once into per-component lists, so that four
    ``itertools.product`` streams advance in lockstep and yield the coordinate,
    chunk-selection, output-selection and completeness tuples directly (dropped
    dimensions have one item each, so leaving them out of the output stream keeps it
    aligned). This avoids regrouping tuples per projection, which dominated the
    cost of zarr-python 2's per-chunk loop. A 0-d array yields one projection of
    empty tuples.
    """

    __slots__ = ("_comps", "_coords", "_csels", "_osels", "nchunks")

    def __init__(self, item_lists: Sequence[list[DimItem]], keep: Sequence[int]) -> None:
        if len(keep) != len(item_lists) and any(
            len(item_lists[i]) != 1 for i in set(range(len(item_lists))) - set(keep)
        ):
            raise AssertionError("dropped dimensions must have exactly one item")
        # Transposed in one pass per dimension (zip), not one comprehension per component:
        # a read of one chunk builds one of these per call.
        coords, csels, osels, comps = [], [], [], []
        n = 1
        for items in item_lists:
            n *= len(items)
            if items:
                c, cs, os, comp = zip(*items, strict=True)
            else:
                c = cs = os = comp = ()
            coords.append(c)
            csels.append(cs)
            osels.append(os)
            comps.append(comp)
        self._coords = coords
        self._csels = csels
        self._osels = osels if len(keep) == len(item_lists) else [osels[i] for i in keep]
        self._comps = comps
        self.nchunks: int = n

    def __iter__(self) -> Iterator[ChunkProjection]:
        # tuple.__new__ on the class: what ChunkProjection._make does, without its
        # Python-level call (a fifth of the time per projection of 10,000 small chunks).
        new, cls = tuple.__new__, ChunkProjection
        product = itertools.product
        return map(
            lambda coords, csel, osel, comp: new(cls, (coords, csel, osel, False not in comp)),
            product(*self._coords),
            product(*self._csels),
            product(*self._osels),
            product(*self._comps),
        )


def check_chunks(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Validate and normalize an array shape and chunk shape to tuples of Python ints.

    Raises
    ------
    ValueError
        Lengths differ, a dimension is negative, or a chunk length is below 1.
    """
    shape_t = tuple(map(int, shape))
    chunks_t = tuple(map(int, chunks))
    if len(shape_t) != len(chunks_t):
        raise ValueError(f"shape {shape_t} and chunks {chunks_t} have different numbers of dimensions")
    if shape_t and min(shape_t) < 0:
        raise ValueError(f"shape must be non-negative, got {shape_t}")
    if chunks_t and min(chunks_t) < 1:
        raise ValueError(f"chunk lengths must be at least 1, got {chunks_t}")
    return shape_t, chunks_t
