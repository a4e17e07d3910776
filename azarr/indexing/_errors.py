"""Errors raised for invalid selections.

Every class derives from `IndexError` (as in zarr-python 2, and as NumPy
raises for most bad indices) *and* from `azarr.errors.AzarrError`, so callers
can catch the builtin or the azarr base. Where NumPy or zarr-python 2 raise
`TypeError` or `ValueError` for the same mistake, the subclass derives
from that builtin as well, so ``except TypeError`` keeps working:

    SelectionError (IndexError)         too many indices, several ellipses, block step != 1
    ├── BoundsCheckError                integer / array index out of bounds (zarr-python 2 name)
    ├── SelectionTypeError (TypeError)  unsupported item type: float, None, str, float array
    ├── SelectionValueError (ValueError) bad value or shape: zero slice step, Boolean array of
    │                                   the wrong length/shape, index arrays that do not
    │                                   broadcast, non-1-D array in an orthogonal selection
    └── VindexInvalidSelectionError     neither a coordinate nor a mask selection (zarr-python 2 name)

Messages name the axis and the problem, e.g.
``"index 10 is out of bounds for axis 1 with size 5"``.
"""

from __future__ import annotations

from azarr.errors import AzarrError

__all__ = [
    "BoundsCheckError",
    "SelectionError",
    "SelectionTypeError",
    "SelectionValueError",
    "VindexInvalidSelectionError",
]


class SelectionError(AzarrError, IndexError):
    """A selection is invalid for the array it is applied to.

    zarr-python 2 raises plain `IndexError` (or its subclasses) for these.
    """


class BoundsCheckError(SelectionError):
    """An integer or integer-array index is out of bounds (zarr-python 2: ``BoundsCheckError``)."""


class SelectionTypeError(SelectionError, TypeError):
    """A selection item has an unsupported type (float, ``None``, string, float array...)."""


class SelectionValueError(SelectionError, ValueError):
    """A selection item has a supported type but an invalid value or shape."""


class VindexInvalidSelectionError(SelectionError):
    """A vectorized selection is neither a coordinate nor a mask selection.

    zarr-python 2: ``VindexInvalidSelectionError``.
    """
