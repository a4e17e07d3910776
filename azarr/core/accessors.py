"""Awaitable indexing accessors: ``arr.oindex``, ``arr.vindex``, ``arr.blocks``.

``await arr.oindex[rows, cols]`` reads; ``await arr.oindex.set(sel, value)``
writes (Python has no awaitable ``__setitem__``). They mirror zarr-python 2's
``Array.oindex`` / ``vindex`` / ``blocks``.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.indexing import pop_fields

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray


class OIndex:
    """Orthogonal selection accessor (zarr-python 2 ``Array.oindex``)."""

    def __init__(self, array: AsyncArray) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Coroutine[Any, Any, Any]:
        return self.get(selection)

    async def get(self, selection: Any) -> Any:
        """Read ``selection``; see :meth:`AsyncArray.get_orthogonal_selection`."""
        fields, pure = pop_fields(selection)
        return await self._array.get_orthogonal_selection(pure, fields=fields)

    async def set(self, selection: Any, value: Any) -> None:
        """Write ``value``; see :meth:`AsyncArray.set_orthogonal_selection`."""
        fields, pure = pop_fields(selection)
        await self._array.set_orthogonal_selection(pure, value, fields=fields)


class VIndex:
    """Coordinate and mask selection accessor (zarr-python 2 ``Array.vindex``).

    A single bool array of the array's shape is a mask selection; int arrays
    are a coordinate selection.
    """

    def __init__(self, array: AsyncArray) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Coroutine[Any, Any, Any]:
        return self.get(selection)

    async def get(self, selection: Any) -> Any:
        """Read ``selection``; see :meth:`AsyncArray.get_coordinate_selection` / ``get_mask_selection``."""
        fields, pure = pop_fields(selection)
        if _is_mask(pure):
            return await self._array.get_mask_selection(_unwrap(pure), fields=fields)
        return await self._array.get_coordinate_selection(pure, fields=fields)

    async def set(self, selection: Any, value: Any) -> None:
        """Write ``value``; see :meth:`AsyncArray.set_coordinate_selection` / ``set_mask_selection``."""
        fields, pure = pop_fields(selection)
        if _is_mask(pure):
            await self._array.set_mask_selection(_unwrap(pure), value, fields=fields)
        else:
            await self._array.set_coordinate_selection(pure, value, fields=fields)


class BlockIndex:
    """Block selection accessor over the chunk grid (zarr-python 2 ``Array.blocks``)."""

    def __init__(self, array: AsyncArray) -> None:
        self._array = array

    def __getitem__(self, selection: Any) -> Coroutine[Any, Any, Any]:
        return self.get(selection)

    async def get(self, selection: Any) -> Any:
        """Read whole chunks; see :meth:`AsyncArray.get_block_selection`."""
        fields, pure = pop_fields(selection)
        return await self._array.get_block_selection(pure, fields=fields)

    async def set(self, selection: Any, value: Any) -> None:
        """Write whole chunks; see :meth:`AsyncArray.set_block_selection`."""
        fields, pure = pop_fields(selection)
        await self._array.set_block_selection(pure, value, fields=fields)


def _unwrap(selection: Any) -> Any:
    return selection[0] if isinstance(selection, tuple) and len(selection) == 1 else selection


def _is_mask(selection: Any) -> bool:
    candidate = _unwrap(selection)
    return isinstance(candidate, np.ndarray) and candidate.dtype == bool
