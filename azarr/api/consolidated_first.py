"""xarray's default: open through ``.zmetadata`` when it is there, else walk the hierarchy.

``xarray.open_zarr(consolidated=None)`` first tries consolidated metadata and
falls back to reading each node's documents; zarr-python 3 calls the same
switch ``use_consolidated`` (None: try, True: require, False: never). azarr's
``open_group``/``open`` take it with that name. Only read-only opens try by
default: a consolidated hierarchy's structure and attributes cannot change.
The fallback costs no round trip: the ``.zmetadata`` read runs beside the
unconsolidated open's first step (`consolidated_and_kind`).
"""

from __future__ import annotations

import asyncio
from typing import Literal

from azarr.core._hierarchy import node_kind
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import ConsolidatedMetadataNotFoundError
from azarr.scheduler import StoreIO
from azarr.storage import Store


def wants_consolidated(use_consolidated: bool | None, mode: str) -> bool:
    """Whether an open in ``mode`` should look for ``.zmetadata`` first.

    Raises
    ------
    ValueError
        ``use_consolidated=True`` with a mode that may change structure (consolidated
        metadata is read-only there).
    """
    if use_consolidated and mode not in ("r", "r+"):
        raise ValueError(f"use_consolidated=True needs mode 'r' or 'r+', got {mode!r}")
    return bool(use_consolidated) or (use_consolidated is None and mode == "r")


async def open_consolidated_or_none(
    store: Store, path: str, mode: str, *, required: bool, allow_pickle: bool | None
) -> AsyncArray | AsyncGroup | None:
    """The node at ``path`` opened from ``.zmetadata``, or None when there is none (unless ``required``).

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        ``required`` and no ``.zmetadata`` at ``path``.
    """
    from azarr.api.consolidated import open_consolidated

    try:
        return await open_consolidated(store, mode, path=path, allow_pickle=allow_pickle)
    except ConsolidatedMetadataNotFoundError:
        if required:
            raise
        return None


async def consolidated_and_kind(
    store: Store, path: str, mode: str, *, required: bool, allow_pickle: bool | None
) -> tuple[AsyncArray | AsyncGroup | None, Literal["array", "group"] | None, bool]:
    """The consolidated open and the plain open's first step (what is at ``path``) side by side.

    Returns ``(node or None, kind, kind_known)``: when ``.zmetadata`` is absent the
    fallback already knows what is at ``path``, so it costs no extra round trip.
    With ``required`` only the consolidated open runs (there is no fallback).
    """
    if required:
        node = await open_consolidated_or_none(store, path, mode, required=True, allow_pickle=allow_pickle)
        return node, None, False
    node, kind = await asyncio.gather(
        open_consolidated_or_none(store, path, mode, required=False, allow_pickle=allow_pickle),
        node_kind(StoreIO(store), path),
    )
    return node, kind, True
