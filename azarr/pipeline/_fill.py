"""Writing fill_value into a read's result where a chunk is not stored."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["put_fill"]


def put_fill(out: np.ndarray[Any, Any], selection: Any, fill: Any) -> None:
    """``out[selection] = fill`` for `ChunkPipeline.fill_for`'s value.

    A selection naming one element (a tuple of integers, ``()`` in a 0-d result) stores what
    it is given as that element: an object dtype's 0-d box (`fill_for`) would become the
    element itself, a nested array. Its element is stored instead, through a 0-d view.
    """
    if (
        type(fill) is np.ndarray
        and fill.dtype.kind == "O"
        and isinstance(selection, tuple)
        and all(isinstance(i, int | np.integer) for i in selection)
    ):
        out[(*selection, Ellipsis)] = fill
    else:
        out[selection] = fill
