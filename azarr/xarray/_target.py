"""Opening the group a ``to_zarr`` writes into, in xarray's write modes.

As xarray's ``get_writable_zarr_store``/``ZarrStore.open_group``: ``"w"`` replaces
the group, ``"w-"`` fails if one exists, ``"a"``/``"a-"`` open or create it,
``"r+"`` opens an existing one. Consolidated metadata is rewritten at the store
root after the metadata changes (``consolidated`` True or None) except in
``"r+"``, which changes no metadata and instead may open through ``.zmetadata``
(one read for the whole hierarchy: what makes many small region writes cheap).
"""

from __future__ import annotations

from typing import Any

import azarr
from azarr.core import AsyncGroup
from azarr.errors import ConsolidatedMetadataNotFoundError
from azarr.xarray._encoding import check_zarr_format
from azarr.xarray._store import AzarrDataStore


async def _open_group(
    store: Any, mode: str, group: str | None, consolidated: bool | None, storage_options: Any
) -> AsyncGroup:
    if mode in ("r", "r+") and consolidated is not False:
        try:
            return await azarr.open_group(
                store, mode=mode, path=group, storage_options=storage_options, use_consolidated=True
            )
        except ConsolidatedMetadataNotFoundError:
            if consolidated:
                raise
    plain = "a" if mode == "a-" else mode
    return await azarr.open_group(
        store, mode=plain, path=group, storage_options=storage_options, use_consolidated=False
    )


async def open_target(
    store: Any,
    *,
    mode: str,
    group: str | None = None,
    consolidated: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_format: int | None = None,
    append_dim: Any = None,
    write_region: Any = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    write_empty: bool | None = None,
    use_zarr_fill_value_as_mask: bool | None = None,
) -> AzarrDataStore:
    """The `AzarrDataStore` of the group ``to_zarr`` writes (``mode`` already chosen).

    Raises
    ------
    ContainsGroupError, ContainsArrayError
        ``mode="w-"`` and something is there.
    GroupNotFoundError
        ``mode="r+"`` and no group there.
    """
    check_zarr_format(zarr_format)
    root = await _open_group(store, mode, group, consolidated, storage_options)
    return await AzarrDataStore.open_async(
        root,
        mode=mode,
        consolidate_on_close=mode != "r+" and consolidated is not False and mode != "r",
        append_dim=append_dim,
        write_region=write_region,
        safe_chunks=safe_chunks,
        align_chunks=align_chunks,
        write_empty=write_empty,
        use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
    )


async def child_store(parent: AzarrDataStore, path: str) -> AzarrDataStore:
    """The store of group ``path`` below ``parent``'s (created if missing), with its write options."""
    group = await parent.group.require_group(path)
    return await AzarrDataStore.open_async(
        group,
        mode=parent.mode,
        consolidate_on_close=parent.consolidate_on_close,
        append_dim=parent.append_dim,
        write_region=parent.write_region,
        safe_chunks=parent.safe_chunks,
        align_chunks=parent.align_chunks,
        write_empty=parent.write_empty,
        use_zarr_fill_value_as_mask=parent.use_zarr_fill_value_as_mask,
    )
