"""Basic selection: integers, slices (any step) and Ellipsis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from azarr.indexing._errors import SelectionTypeError
from azarr.indexing._normalize import expand_selection, is_integer, is_integer_array
from azarr.indexing._projection import (
    ChunkProjection,
    DimProjections,
    ProjectionProduct,
    check_chunks,
    int_dim,
    slice_dim,
)

__all__ = ["BasicIndexer"]


class BasicIndexer:
    """Per-chunk projections of a basic selection (NumPy semantics).

    zarr-python 2 equivalent: ``zarr.indexing.BasicIndexer`` (which rejects negative
    steps; azarr supports them).

    Parameters
    ----------
    selection : int, slice, Ellipsis or tuple of these
        Integers (negative wrap around), slices with any non-zero step (negative
        steps follow NumPy), at most one Ellipsis. Fewer items than dimensions select
        the trailing dimensions entirely. For a 0-d array only ``()`` and ``...`` are
        valid.
    shape : tuple of int
        Array shape (dimensions may be zero).
    chunks : tuple of int
        Chunk shape.

    Attributes
    ----------
    shape : tuple of int
        Shape of the result (integer-indexed dimensions dropped), as ``a[selection]``.
    result_shape : tuple of int
        Same as ``shape``.
    drop_axes : tuple of int
        Dimensions indexed by an integer. Informational: ``chunk_selection`` already
        holds the integer, so these axes are absent from ``chunk[chunk_selection]``
        and from ``out_selection``; callers must not squeeze them again.
    nchunks : int
        Number of projections (also ``len(indexer)``).

    Raises
    ------
    SelectionError
        Too many indices or more than one Ellipsis.
    BoundsCheckError
        An integer index is out of bounds.
    SelectionTypeError
        An item is not an integer, slice or Ellipsis (e.g. float, None, array).
    SelectionValueError
        A slice step is zero.
    ValueError
        ``shape`` and ``chunks`` are inconsistent.

    Notes
    -----
    Chunk selections hold Python ints and slices only, so reading and writing go
    through NumPy basic indexing (views, no copies of index arrays).
    """

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        shape, chunks = check_chunks(shape, chunks)
        sel = expand_selection(selection, len(shape))
        dims: list[DimProjections] = []
        for axis, (s, n, c) in enumerate(zip(sel, shape, chunks, strict=True)):
            if isinstance(s, slice):
                dims.append(slice_dim(s, n, c, axis))
            elif is_integer(s) or is_integer_array(s, ndim=0):
                dims.append(int_dim(s, n, c, axis))
            else:
                raise SelectionTypeError(
                    f"unsupported selection item for basic indexing at axis {axis}: expected an "
                    f"integer, slice or Ellipsis, got {type(s).__name__}"
                    + (" (None / newaxis is not supported)" if s is None else "")
                    + (
                        "; integer or Boolean arrays select through get_orthogonal_selection "
                        "(oindex) or get_coordinate_selection (vindex)"
                        if isinstance(s, list) or hasattr(s, "dtype")
                        else ""
                    )
                )
        keep = [i for i, d in enumerate(dims) if d.kind != "int"]
        self._product = ProjectionProduct([d.items for d in dims], keep)
        self.shape: tuple[int, ...] = tuple(dims[i].nitems for i in keep)
        self.result_shape: tuple[int, ...] = self.shape
        self.drop_axes: tuple[int, ...] = tuple(i for i, d in enumerate(dims) if d.kind == "int")
        self.nchunks: int = self._product.nchunks

    def __iter__(self) -> Iterator[ChunkProjection]:
        return iter(self._product)

    def __len__(self) -> int:
        return self.nchunks
