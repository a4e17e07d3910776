"""Block selection: whole chunks, addressed by their position in the chunk grid."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from azarr.indexing._errors import BoundsCheckError, SelectionError, SelectionTypeError, SelectionValueError
from azarr.indexing._normalize import as_index, expand_selection, is_integer, is_integer_array
from azarr.indexing._projection import ChunkProjection, ProjectionProduct, check_chunks, slice_dim

__all__ = ["BlockIndexer"]


class BlockIndexer:
    """Per-chunk projections of a block selection (``arr.blocks[...]``).

    zarr-python 2 equivalent: ``zarr.indexing.BlockIndexer`` (``get_block_selection``).
    The result is the data of the selected blocks, with every dimension kept (an
    integer block index selects one block, not one element), like ``dask.array.blocks``.

    Parameters
    ----------
    selection : int, slice, Ellipsis or tuple of these
        Per dimension of the chunk grid: a block index (negative wraps) or a slice
        of block indices with step 1 (or None).
    shape : tuple of int
        Array shape.
    chunks : tuple of int
        Chunk shape.

    Attributes
    ----------
    shape, result_shape : tuple of int
        Shape of the selected data (edge blocks are cut at the array's bounds).
    drop_axes : tuple of int
        Always ``()``.
    nchunks : int
        Number of projections; each chunk is complete.

    Raises
    ------
    BoundsCheckError
        A block index is out of bounds for the chunk grid.
    SelectionError
        A slice step other than 1, too many indices, several Ellipses.
    SelectionTypeError
        An item is not an integer, slice or Ellipsis.
    ValueError
        ``shape`` and ``chunks`` are inconsistent.

    Notes
    -----
    Block slices follow Python slice semantics on the grid (out-of-range bounds are
    clipped, possibly to an empty selection); zarr-python 2 instead raises when a
    slice starts at or beyond the last block.
    """

    def __init__(self, selection: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> None:
        shape, chunks = check_chunks(shape, chunks)
        sel = expand_selection(selection, len(shape))
        dims = []
        for axis, (s, n, c) in enumerate(zip(sel, shape, chunks, strict=True)):
            nblocks = -(-n // c)
            if isinstance(s, slice):
                if s.step not in (None, 1):
                    raise SelectionError(
                        f"block selections only support slices with step 1; "
                        f"got step {s.step!r} for axis {axis}"
                    )
                try:
                    start, stop, _ = s.indices(nblocks)
                except TypeError as e:
                    raise SelectionTypeError(f"invalid block slice {s!r} for axis {axis}: {e}") from None
                except ValueError as e:  # pragma: no cover - step is 1 here
                    raise SelectionValueError(str(e)) from None
            elif is_integer(s) or is_integer_array(s, ndim=0):
                b = as_index(s, axis)
                start = b + nblocks if b < 0 else b
                if not 0 <= start < nblocks:
                    raise BoundsCheckError(
                        f"block index {b} is out of bounds for axis {axis} with {nblocks} blocks"
                    )
                stop = start + 1
            else:
                raise SelectionTypeError(
                    f"unsupported selection item for block indexing at axis {axis}: expected an integer "
                    f"or a slice with step 1, got {type(s).__name__}"
                )
            dims.append(slice_dim(slice(start * c, max(start, stop) * c), n, c, axis))
        self._product = ProjectionProduct([d.items for d in dims], range(len(dims)))
        self.shape: tuple[int, ...] = tuple(d.nitems for d in dims)
        self.result_shape: tuple[int, ...] = self.shape
        self.drop_axes: tuple[int, ...] = ()
        self.nchunks: int = self._product.nchunks

    def __iter__(self) -> Iterator[ChunkProjection]:
        return iter(self._product)

    def __len__(self) -> int:
        return self.nchunks
