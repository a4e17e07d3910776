"""Orthogonal (outer) selection: each dimension selected independently."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from azarr.indexing._normalize import expand_selection, is_integer, is_integer_array
from azarr.indexing._projection import (
    ChunkProjection,
    DimItem,
    DimProjections,
    ProjectionProduct,
    array_dim,
    check_chunks,
    int_dim,
    slice_dim,
)

__all__ = ["OrthogonalIndexer"]


def _as_mesh_axis(sel: Any, length: int, q: int, k: int) -> Any:
    """Turn a 1-D selection (slice or index array) into an open-mesh index array.

    The result has ``k`` dimensions, all of length 1 except axis ``q`` — what
    ``np.ix_`` would build, precomputed once per dimension and chunk.
    """
    idx = np.arange(*sel.indices(length)) if isinstance(sel, slice) else np.asarray(sel)
    shape = [1] * k
    shape[q] = idx.size
    return idx.reshape(shape)


class OrthogonalIndexer:
    """Per-chunk projections of an orthogonal (outer) selection.

    zarr-python 2 equivalent: ``zarr.indexing.OrthogonalIndexer`` (``arr.oindex[...]``,
    ``get_orthogonal_selection``). The result equals
    ``a[np.ix_(*per_dim_indices)]`` with integer-indexed dimensions dropped.

    Parameters
    ----------
    selection : int, slice, array-like or tuple of these
        Per dimension: an integer (negative wraps), a slice (any non-zero step), a
        1-D integer array or list (negative, unsorted and duplicate indices allowed),
        or a 1-D Boolean array whose length equals the dimension's. At most one
        Ellipsis; missing trailing dimensions are selected entirely.
    shape : tuple of int
        Array shape.
    chunks : tuple of int
        Chunk shape.

    Attributes
    ----------
    shape : tuple of int
        Result shape: one entry per non-integer dimension.
    result_shape : tuple of int
        Same as ``shape``.
    drop_axes : tuple of int
        Dimensions indexed by an integer. Informational: the chunk selections already
        drop them (``chunk[chunk_selection]`` has shape ``value[out_selection].shape``);
        callers must not squeeze them again.
    nchunks : int
        Number of projections (also ``len(indexer)``).

    Raises
    ------
    SelectionError
        Too many indices or more than one Ellipsis.
    BoundsCheckError
        An integer or array index is out of bounds.
    SelectionTypeError
        An item has an unsupported type (float, None, float array...).
    SelectionValueError
        Zero slice step, a non-1-D index array, or a Boolean array of the wrong length.
    ValueError
        ``shape`` and ``chunks`` are inconsistent.

    Notes
    -----
    Selections stay in NumPy's native form where that is already orthogonal — no
    arrays, or a single index array whose integer neighbours are adjacent to it
    (e.g. ``(rows, slice)``): no ``np.ix_`` at all. Otherwise every non-integer
    dimension becomes an open-mesh index array (integers stay scalars, broadcasting
    against the mesh), precomputed per dimension and chunk rather than per projection
    as zarr-python 2 does. Duplicate indices write last-wins, as in NumPy.
    """

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        shape, chunks = check_chunks(shape, chunks)
        sel = expand_selection(selection, len(shape))
        dims: list[DimProjections] = []
        # One pass (a read of one chunk builds an indexer per call): the dimensions kept in
        # the output, the integer ones, the array ones, and how many output arrays.
        keep: list[int] = []
        ints: list[int] = []
        arrays: list[int] = []
        items: list[list[DimItem]] = []
        out_arrays = 0
        for axis, (s, n, c) in enumerate(zip(sel, shape, chunks, strict=True)):
            if isinstance(s, slice):
                d = slice_dim(s, n, c, axis)
            elif is_integer(s) or is_integer_array(s, ndim=0):
                d = int_dim(s, n, c, axis)
            else:
                # arrays, lists; anything else gets a type error there
                d = array_dim(s, n, c, axis)
            dims.append(d)
            items.append(d.items)
            out_arrays += d.out_is_array
            if d.kind == "int":
                ints.append(axis)
            else:
                keep.append(axis)
                if d.kind == "array":
                    arrays.append(axis)
        k = len(keep)

        # NumPy treats integers next to an index array as advanced indices too, and puts
        # the broadcast dimension first unless all advanced indices are adjacent.
        # With one array whose integer neighbours form one contiguous run with it, the
        # native form is already orthogonal; otherwise build open meshes.
        if len(arrays) >= 2:
            mesh_chunk = True
        elif len(arrays) == 1 and ints:
            adv = sorted(ints + arrays)
            mesh_chunk = adv[-1] - adv[0] + 1 != len(adv)
        else:
            mesh_chunk = False
        # Output selections hold arrays only for unsorted array dimensions (sorted ones
        # are slices): two or more of them need a mesh.
        mesh_out = out_arrays >= 2

        if mesh_chunk or mesh_out:
            for q, i in enumerate(keep):
                items[i] = [
                    (
                        ci,
                        _as_mesh_axis(cs, chunks[i], q, k) if mesh_chunk else cs,
                        _as_mesh_axis(os, dims[i].nitems, q, k) if mesh_out else os,
                        comp,
                    )
                    for ci, cs, os, comp in dims[i].items
                ]

        self._product = ProjectionProduct(items, keep)
        self.shape: tuple[int, ...] = tuple(dims[i].nitems for i in keep)
        self.result_shape: tuple[int, ...] = self.shape
        self.drop_axes: tuple[int, ...] = tuple(ints)
        self.nchunks: int = self._product.nchunks

    def __iter__(self) -> Iterator[ChunkProjection]:
        return iter(self._product)

    def __len__(self) -> int:
        return self.nchunks
