"""Type aliases for selections, one per selection kind (zarr-python 2's and 3's names).

They document what each ``get_*_selection`` / ``set_*_selection`` method takes;
the indexers check values at run time and raise
`SelectionError` subclasses for anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import EllipsisType
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = [
    "BasicSelection",
    "BlockSelection",
    "CoordinateSelection",
    "Fields",
    "MaskSelection",
    "OrthogonalSelection",
    "Selection",
]

_BasicItem: TypeAlias = int | np.integer[Any] | slice | EllipsisType
_IntArray: TypeAlias = Sequence[int] | npt.NDArray[np.integer[Any]]
_BoolArray: TypeAlias = Sequence[bool] | npt.NDArray[np.bool_]

BasicSelection: TypeAlias = _BasicItem | tuple[_BasicItem, ...]
"""Integers, slices (any step) and one Ellipsis: NumPy basic indexing (``z[2:10:2, 3]``)."""

OrthogonalSelection: TypeAlias = (
    _BasicItem | _IntArray | _BoolArray | tuple[_BasicItem | _IntArray | _BoolArray, ...]
)
"""Per-dimension ints, slices, 1-D int or bool arrays, applied independently (``z.oindex``)."""

CoordinateSelection: TypeAlias = int | _IntArray | tuple[int | _IntArray, ...]
"""One int array per dimension, broadcast together: the points to read (``z.vindex``)."""

MaskSelection: TypeAlias = npt.NDArray[np.bool_] | tuple[npt.NDArray[np.bool_]]
"""A bool array of the array's shape: the elements to read (``z.vindex[mask]``)."""

BlockSelection: TypeAlias = int | slice | EllipsisType | tuple[int | slice | EllipsisType, ...]
"""Chunk-grid indices: ints and step-1 slices of blocks (``z.blocks``)."""

Selection: TypeAlias = BasicSelection | OrthogonalSelection | CoordinateSelection | MaskSelection | str | Any
"""Anything ``z[...]`` (`getitem`) routes, field names included."""

Fields: TypeAlias = str | list[str] | None
"""Structured-dtype fields a read or write is restricted to (None: all of them)."""
