"""Selection predicates, routing rules and normalization shared by all indexers.

The routing predicates (`is_pure_fancy_indexing`,
`is_pure_orthogonal_indexing`) reproduce zarr-python 2.18's
``Array.__getitem__`` / ``__setitem__`` dispatch:

    fields, sel = pop_fields(selection)
    if is_pure_fancy_indexing(sel, ndim):        -> vindex (coordinate or mask selection)
    elif is_pure_orthogonal_indexing(sel, ndim): -> orthogonal selection
    else:                                        -> basic selection
"""

from __future__ import annotations

import numbers
import operator
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt

from azarr.indexing._errors import BoundsCheckError, SelectionError, SelectionTypeError

__all__ = [
    "ceildiv",
    "ensure_tuple",
    "expand_selection",
    "is_basic_selection",
    "is_bool_array",
    "is_coordinate_selection",
    "is_integer",
    "is_integer_array",
    "is_integer_list",
    "is_mask_selection",
    "is_pure_fancy_indexing",
    "is_pure_orthogonal_indexing",
    "normalize_integer_selection",
    "replace_lists",
]


def ceildiv(a: int, b: int) -> int:
    """Integer ceiling division for non-negative ``a`` and positive ``b``."""
    return -(-a // b)


def is_integer(x: Any) -> TypeGuard[numbers.Integral]:
    """True for Python and NumPy integer scalars (``bool`` included, as in zarr-python 2)."""
    return isinstance(x, numbers.Integral)


def is_integer_list(x: Any) -> TypeGuard[list[Any]]:
    """True for a non-empty list whose first element is an integer (zarr-python 2 rule).

    Only the first element is inspected, as in zarr-python 2: a list mixing types
    fails later, when it is converted to an array.
    """
    return isinstance(x, list) and len(x) > 0 and is_integer(x[0])


def is_integer_array(x: Any, ndim: int | None = None) -> TypeGuard[npt.NDArray[np.integer[Any]]]:
    """True for an array (not a NumPy scalar) of signed or unsigned integers, of ``ndim`` dims if given."""
    t = not np.isscalar(x) and hasattr(x, "shape") and hasattr(x, "dtype") and x.dtype.kind in "ui"
    if ndim is not None:
        t = t and len(x.shape) == ndim
    return bool(t)


def is_bool_array(x: Any, ndim: int | None = None) -> TypeGuard[npt.NDArray[np.bool_]]:
    """True for an array of dtype ``bool``, of ``ndim`` dims if given."""
    t = hasattr(x, "shape") and hasattr(x, "dtype") and x.dtype == bool
    if ndim is not None:
        t = t and len(x.shape) == ndim
    return bool(t)


def _is_int_iterable(x: Any) -> bool:
    return is_integer_list(x) or is_integer_array(x)


def is_pure_fancy_indexing(selection: Any, ndim: int) -> bool:
    """Whether ``arr[selection]`` is routed to vectorized (coordinate) indexing.

    Same rule as zarr-python 2.18: for a 1-D array, an integer list or integer array;
    otherwise a tuple of exactly ``ndim`` integers / integer lists / integer arrays
    with at least one list or array, and no slice or Ellipsis.

    Parameters
    ----------
    selection : Any
        The selection, with fields already removed (see `pop_fields`).
    ndim : int
        Number of dimensions of the array.

    Returns
    -------
    bool
    """
    if ndim == 1 and (is_integer_list(selection) or is_integer_array(selection)):
        return True
    if not isinstance(selection, tuple) or len(selection) != ndim:
        return False
    if any(isinstance(s, slice) or s is Ellipsis for s in selection):
        return False
    return all(is_integer(s) or _is_int_iterable(s) for s in selection) and any(
        _is_int_iterable(s) for s in selection
    )


def is_pure_orthogonal_indexing(selection: Any, ndim: int) -> bool:
    """Whether ``arr[selection]`` is routed to orthogonal indexing.

    Same rule as zarr-python 2.18: a single 1-D integer list/array, or a tuple of
    exactly ``ndim`` items that are integers, slices or integer lists/arrays, with at
    most one list/array. Two extensions turn zarr-python 2.18 errors into results:
    NumPy integer scalars count as integers (2.18 accepts only Python ``int``), and a
    tuple with one Ellipsis and one integer list/array is routed as the same tuple
    with the Ellipsis written out as full slices, so ``z[..., [0, 3]]`` reads what
    ``z[:, :, [0, 3]]`` (and ``z.oindex[..., [0, 3]]``) reads; 2.18 sends it to basic
    indexing, which raises `IndexError`. An Ellipsis without a list/array
    stays a basic selection, as in 2.18.

    Parameters
    ----------
    selection : Any
        The selection, with fields already removed (see `pop_fields`).
    ndim : int
        Number of dimensions of the array.

    Returns
    -------
    bool
    """
    if not ndim:
        return False
    if is_integer_list(selection) or is_integer_array(selection, ndim=1):
        return True
    selection = _ellipsis_written_out(selection, ndim)
    return (
        isinstance(selection, tuple)
        and len(selection) == ndim
        and sum(_is_int_iterable(s) for s in selection) <= 1
        and all(_is_int_iterable(s) or is_integer(s) or isinstance(s, slice) for s in selection)
    )


def _ellipsis_written_out(selection: Any, ndim: int) -> Any:
    """``selection`` with its Ellipsis replaced by full slices, if it also holds an int list/array.

    Anything else (no Ellipsis, several, too many items, no list/array) comes back
    unchanged, so the basic indexer reports it as before.
    """
    if (
        not isinstance(selection, tuple)
        or sum(s is Ellipsis for s in selection) != 1
        or len(selection) - 1 > ndim
        or not any(_is_int_iterable(s) for s in selection)
    ):
        return selection
    return expand_selection(selection, ndim)


def is_basic_selection(selection: Any) -> bool:
    """Whether every item of ``selection`` is an integer, a slice or Ellipsis.

    zarr-python 2's version also rejects negative-step slices and Ellipsis; azarr's
    `BasicIndexer` supports both, so they count as basic here.
    """
    return all(is_integer(s) or isinstance(s, slice) or s is Ellipsis for s in ensure_tuple(selection))


def is_coordinate_selection(selection: tuple[Any, ...], ndim: int) -> bool:
    """Whether ``selection`` has one integer or integer array per dimension (zarr-python 2 rule)."""
    return len(selection) == ndim and all(is_integer(s) or is_integer_array(s) for s in selection)


def is_mask_selection(selection: tuple[Any, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``selection`` is a single Boolean array of exactly ``shape``."""
    return len(selection) == 1 and is_bool_array(selection[0]) and tuple(selection[0].shape) == shape


def ensure_tuple(v: Any) -> tuple[Any, ...]:
    """Wrap anything that is not a tuple in a 1-tuple."""
    return v if isinstance(v, tuple) else (v,)


def replace_lists(selection: tuple[Any, ...]) -> tuple[Any, ...]:
    """Convert list items of a selection tuple to NumPy arrays."""
    return tuple(np.asarray(s) if isinstance(s, list) else s for s in selection)


def expand_selection(selection: Any, ndim: int) -> tuple[Any, ...]:
    """Return ``selection`` as a tuple of exactly ``ndim`` items.

    The Ellipsis (at most one) is replaced by as many full slices as needed, and
    missing trailing dimensions are filled with full slices (zarr-python 2:
    ``replace_ellipsis``).

    Raises
    ------
    SelectionError
        More than one Ellipsis, or more items than dimensions.
    """
    sel: tuple[Any, ...] = ensure_tuple(selection)
    n_ellipsis = sum(1 for s in sel if s is Ellipsis)
    if n_ellipsis > 1:
        raise SelectionError("an index can only have a single ellipsis ('...')")
    if n_ellipsis == 1:
        pos = next(i for i, s in enumerate(sel) if s is Ellipsis)
        n_fill = max(0, ndim - (len(sel) - 1))
        sel = sel[:pos] + (slice(None),) * n_fill + sel[pos + 1 :]
    if len(sel) > ndim:
        raise SelectionError(
            f"too many indices for array: array is {ndim}-dimensional, but {len(sel)} were indexed"
        )
    return sel + (slice(None),) * (ndim - len(sel))


def as_index(x: Any, axis: int) -> int:
    """Return ``x`` as a Python int if it is an integer scalar (or 0-d integer array).

    Raises
    ------
    SelectionTypeError
        ``x`` is not an integer.
    """
    if is_integer(x) or is_integer_array(x, ndim=0):
        return operator.index(x)
    raise SelectionTypeError(
        f"invalid index {x!r} for axis {axis}: only integers, slices, Ellipsis and integer or "
        f"Boolean arrays are valid indices, got {type(x).__name__}"
    )


def normalize_integer_selection(dim_sel: Any, dim_len: int, axis: int = 0) -> int:
    """Wrap a negative integer index and check it is in bounds.

    Parameters
    ----------
    dim_sel : int
        Integer index along one dimension (Python or NumPy integer).
    dim_len : int
        Length of that dimension.
    axis : int, optional
        Axis number, for the error message.

    Returns
    -------
    int
        The index in ``[0, dim_len)``.

    Raises
    ------
    BoundsCheckError
        ``dim_sel`` is not in ``[-dim_len, dim_len)``.
    SelectionTypeError
        ``dim_sel`` is not an integer.
    """
    i = as_index(dim_sel, axis)
    j = i + dim_len if i < 0 else i
    if not 0 <= j < dim_len:
        raise BoundsCheckError(f"index {i} is out of bounds for axis {axis} with size {dim_len}")
    return j
