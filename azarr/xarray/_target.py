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
from azarr.errors import ConsolidatedMetadataNotFoundError, ContainsArrayError, GroupNotFoundError
from azarr.xarray._store import AzarrDataStore


async def _open_group(
    store: Any,
    mode: str,
    group: str | None,
    consolidated: bool | None,
    storage_options: Any,
    zarr_format: int | None,
) -> AsyncGroup:
    """The group, opened or created as ``mode`` says; a created one in ``zarr_format``.

    Raises
    ------
    ValueError
        ``zarr_format`` was given and the existing group is of the other format.
    """
    if mode in ("r", "r+") and consolidated is not False:
        try:
            # zarr_format, when given, reads that format's consolidated metadata only (one request).
            found = await azarr.open_consolidated(
                store, mode=mode, path=group, storage_options=storage_options, zarr_format=zarr_format
            )
        except ConsolidatedMetadataNotFoundError:
            if consolidated:
                raise
        else:
            if not isinstance(found, AsyncGroup):
                raise ContainsArrayError(f"{found.name!r} in {found.store.url} is an array, not a group")
            return _check_format(found, zarr_format)
    plain = "a" if mode == "a-" else mode
    try:
        found = await azarr.open_group(
            store,
            mode=plain,
            path=group,
            storage_options=storage_options,
            use_consolidated=False,
            zarr_format=zarr_format,  # what a created group gets (None: azarr.config's)
        )
    except GroupNotFoundError:
        if plain not in ("a", "r+") or zarr_format is None:
            raise
        # Maybe a group of the other format (open_group looked for zarr_format's only).
        found = await azarr.open_group(
            store, mode="r", path=group, storage_options=storage_options, use_consolidated=False
        )
    return _check_format(found, zarr_format)


def _check_format(group: AsyncGroup, zarr_format: int | None) -> AsyncGroup:
    if zarr_format is not None and group.zarr_format != zarr_format:
        raise ValueError(
            f"zarr_format={zarr_format} but the group {group.name!r} in {group.store.url} is Zarr format "
            f"{group.zarr_format}: write it in that format (leave zarr_format unset), or replace it (mode='w')"
        )
    return group


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
    ValueError
        ``zarr_format`` is not 2 or 3, or not the existing group's.
    """
    root = await _open_group(store, mode, group, consolidated, storage_options, zarr_format)
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
    return await AzarrDataStore.open_async(group, **parent.write_options())
