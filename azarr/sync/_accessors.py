"""``z.oindex`` / ``z.vindex`` / ``z.blocks`` of `azarr.sync.Array`: blocking accessors."""

from __future__ import annotations

from typing import Any

from azarr.core import accessors as _async_accessors
from azarr.sync._mirror import mirrors, to_async
from azarr.sync._owner import Writer


class _Accessor:
    """``acc[sel]`` and ``acc[sel] = value`` of one selection kind, run on the I/O loop."""

    def __init__(self, inner: _async_accessors._Accessor, owner: Writer) -> None:
        self._inner = inner
        self._owner = owner

    def __getitem__(self, selection: Any) -> Any:
        return self._owner._run(self._inner.get(selection), None)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._owner._write(self._inner.set(selection, to_async(value)), None)

    @mirrors(_async_accessors._Accessor.get)
    def get(self, selection: Any, *, timeout: float | None = None) -> Any:
        return self._owner._run(self._inner.get(selection), timeout)

    @mirrors(_async_accessors._Accessor.set)
    def set(self, selection: Any, value: Any, *, timeout: float | None = None) -> None:
        self._owner._write(self._inner.set(selection, to_async(value)), timeout)


class OIndex(_Accessor):
    """Orthogonal selection (zarr-python 2 ``Array.oindex``); see `Array.get_orthogonal_selection`."""


class VIndex(_Accessor):
    """Coordinate or mask selection (zarr-python 2 ``Array.vindex``); see `Array.get_coordinate_selection`."""


class BlockIndex(_Accessor):
    """Chunk-grid selection (zarr-python 2 ``Array.blocks``); see `Array.get_block_selection`."""
