"""Awaitable indexing accessors: ``arr.oindex``, ``arr.vindex``, ``arr.blocks``.

``await arr.oindex[rows, cols]`` reads; ``await arr.oindex.set(sel, value)``
writes (Python has no awaitable ``__setitem__``). They mirror zarr-python 2's
``Array.oindex`` / ``vindex`` / ``blocks``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.indexing import pop_fields

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray


class _Accessor(ABC):
    """``get``/``set`` of one selection kind; subclasses name the kind per selection."""

    def __init__(self, array: AsyncArray) -> None:
        self._array = array

    @abstractmethod
    def _kind(self, selection: Any) -> tuple[str, Any]:
        """(selection kind, selection to pass) for the ``get_<kind>_selection`` methods."""

    def __getitem__(self, selection: Any) -> Coroutine[Any, Any, Any]:
        return self.get(selection)

    async def get(self, selection: Any) -> Any:
        """Read ``selection`` (field names in it select structured fields)."""
        fields, pure = pop_fields(selection)
        kind, pure = self._kind(pure)
        return await getattr(self._array, f"get_{kind}_selection")(pure, fields=fields)

    async def set(self, selection: Any, value: Any) -> None:
        """Write ``value`` into ``selection`` (scalars broadcast)."""
        fields, pure = pop_fields(selection)
        kind, pure = self._kind(pure)
        await getattr(self._array, f"set_{kind}_selection")(pure, value, fields=fields)


class OIndex(_Accessor):
    """Orthogonal selection accessor (zarr-python 2 ``Array.oindex``); see `AsyncArray.get_orthogonal_selection`."""

    def _kind(self, selection: Any) -> tuple[str, Any]:
        return "orthogonal", selection


class VIndex(_Accessor):
    """Coordinate and mask selection accessor (zarr-python 2 ``Array.vindex``).

    A single bool array (or nested list of bools, as zarr-python 2 takes it)
    is a mask selection (`AsyncArray.get_mask_selection`); int arrays are a
    coordinate selection (`AsyncArray.get_coordinate_selection`).
    """

    def _kind(self, selection: Any) -> tuple[str, Any]:
        candidate = selection[0] if isinstance(selection, tuple) and len(selection) == 1 else selection
        if isinstance(candidate, list):
            as_array = np.asarray(candidate)
            if as_array.dtype == bool:
                candidate = as_array
        if isinstance(candidate, np.ndarray) and candidate.dtype == bool:
            return "mask", candidate
        return "coordinate", selection


class BlockIndex(_Accessor):
    """Block selection accessor over the chunk grid (zarr-python 2 ``Array.blocks``); see `AsyncArray.get_block_selection`."""

    def _kind(self, selection: Any) -> tuple[str, Any]:
        return "block", selection
