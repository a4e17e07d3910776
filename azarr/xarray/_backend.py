"""``engine="azarr"``: xarray's backend entry point for Zarr v2 data read through azarr."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any

from xarray import Dataset, DataTree, Variable
from xarray.backends.common import BackendEntrypoint, datatree_from_dict_with_io_cleanup
from xarray.backends.store import StoreBackendEntrypoint

import azarr
from azarr.core import AsyncGroup
from azarr.errors import AzarrError, ConsolidatedMetadataNotFoundError, ContainsArrayError
from azarr.storage import Store
from azarr.sync import run
from azarr.xarray._store import AzarrDataStore

_DECODE_ARGS = (
    "mask_and_scale",
    "decode_times",
    "concat_characters",
    "decode_coords",
    "drop_variables",
    "use_cftime",
    "decode_timedelta",
)


async def open_root(
    store: Any,
    *,
    group: str | None,
    consolidated: bool | None,
    storage_options: dict[str, Any] | None,
    allow_pickle: bool | None,
) -> AsyncGroup:
    """The group to read, from consolidated metadata when there is some (``consolidated=None``).

    As xarray's ``zarr`` engine with zarr-python 2: consolidated metadata is the
    ``.zmetadata`` at the store root; ``consolidated=True`` requires it, ``False``
    ignores it, ``None`` uses it when present.

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        ``consolidated=True`` and the store has no ``.zmetadata``.
    GroupNotFoundError
        No group at ``group``.
    ContainsArrayError
        ``group`` names an array, not a group.
    """
    node: Any = None
    if consolidated is not False:
        node = await _open_consolidated(store, group, storage_options, allow_pickle)
        if node is None and consolidated:
            raise ConsolidatedMetadataNotFoundError(
                f"consolidated=True but no consolidated metadata at the root of {store!r}"
                + (f" nor at group {group!r}" if group else "")
            )
    if node is None:
        node = await azarr.open_group(
            store, mode="r", path=group, storage_options=storage_options, allow_pickle=allow_pickle
        )
    if not isinstance(node, AsyncGroup):
        raise ContainsArrayError(f"{node.name!r} in {node.store.url} is an array; xarray opens a group")
    return node


async def _open_consolidated(
    store: Any, group: str | None, storage_options: dict[str, Any] | None, allow_pickle: bool | None
) -> Any:
    """``group`` read from the root's ``.zmetadata`` (zarr-python 2's layout), else from its own; None if neither."""
    for metadata_at, below in ((None, group), (group, None)) if group else ((None, None),):
        try:
            node: Any = await azarr.open_consolidated(
                store, mode="r", path=metadata_at, storage_options=storage_options, allow_pickle=allow_pickle
            )
        except ConsolidatedMetadataNotFoundError:
            continue
        return await node.get(below) if below else node
    return None


def _store_arg(filename_or_obj: Any) -> Any:
    if isinstance(filename_or_obj, os.PathLike):
        return os.fspath(filename_or_obj)
    return filename_or_obj


class AzarrBackendEntrypoint(BackendEntrypoint):
    """Open Zarr v2 stores (local, S3, GCS, HTTP, fsspec) in xarray with ``engine="azarr"``.

    ``xr.open_dataset(url, engine="azarr", group=, consolidated=, storage_options=,
    chunks=, decode_times=, ...)`` reads the layout xarray's ``zarr`` engine writes
    for Zarr v2 (``_ARRAY_DIMENSIONS``, CF attributes), with decoding done by xarray
    itself. Variables are lazy; ``ds.load()`` reads each through azarr's sync facade,
    one variable after another (xarray's ``Dataset.load`` offers a backend no hook to
    do otherwise: one round-trip wave per variable); ``azarr.xarray.load(ds)`` and
    ``await ds.load_async()`` read them all concurrently under the store's budget.
    ``chunks=`` gives dask arrays whose preferred chunks are the Zarr chunks.
    """

    description = "Open Zarr v2 stores with azarr (asyncio-native, budgeted cloud I/O)"
    url = "https://github.com/azarr/azarr"
    open_dataset_parameters = (
        "filename_or_obj",
        *_DECODE_ARGS,
        "group",
        "consolidated",
        "storage_options",
        "allow_pickle",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, Store):
            return True
        if isinstance(filename_or_obj, str | os.PathLike):
            return os.fspath(filename_or_obj).rstrip("/").endswith(".zarr")
        return False

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: Any = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: Any = None,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        allow_pickle: bool | None = None,
    ) -> Dataset:
        root = run(
            open_root(
                _store_arg(filename_or_obj),
                group=group,
                consolidated=consolidated,
                storage_options=storage_options,
                allow_pickle=allow_pickle,
            )
        )
        decode = {
            "mask_and_scale": mask_and_scale,
            "decode_times": decode_times,
            "concat_characters": concat_characters,
            "decode_coords": decode_coords,
            "drop_variables": drop_variables,
            "use_cftime": use_cftime,
            "decode_timedelta": decode_timedelta,
        }
        return StoreBackendEntrypoint().open_dataset(AzarrDataStore.open(root), **decode)

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        allow_pickle: bool | None = None,
        **decode: Any,
    ) -> dict[str, Dataset]:
        """Every group at or below ``group`` as a Dataset, keyed ``"/"``, ``"/a"``, ``"/a/b"``."""
        root = run(
            open_root(
                _store_arg(filename_or_obj),
                group=group,
                consolidated=consolidated,
                storage_options=storage_options,
                allow_pickle=allow_pickle,
            )
        )

        async def walk() -> list[tuple[str, AsyncGroup]]:
            return [
                (name, node)
                async for name, node in root.members(max_depth=None)
                if isinstance(node, AsyncGroup)
            ]

        groups = [("", root), *run(walk())]
        entry = StoreBackendEntrypoint()
        return {"/" + name: entry.open_dataset(AzarrDataStore.open(node), **decode) for name, node in groups}

    def open_datatree(
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        allow_pickle: bool | None = None,
        **decode: Any,
    ) -> DataTree:
        groups = self.open_groups_as_dict(
            filename_or_obj,
            group=group,
            consolidated=consolidated,
            storage_options=storage_options,
            allow_pickle=allow_pickle,
            **decode,
        )
        return datatree_from_dict_with_io_cleanup(groups)


def load(ds: Dataset, *, timeout: float | None = None) -> Dataset:
    """Load every variable of ``ds`` at once, blocking: the sync twin of ``await ds.load_async()``.

    ``ds.load()`` reads variables one after another: xarray 2026.9's ``Dataset.load``
    computes dask-backed variables together but loads every lazily indexed one with its
    own ``Variable.load`` call, so each costs a full round trip, and a backend has no
    hook to change that. This fetches every lazily indexed variable concurrently under
    the store's budget (one round-trip wave), on azarr's I/O loop, from sync code (a
    script, a notebook cell).

    Variables whose xarray decoding has no async path (CF-encoded bools in xarray 2026.9,
    whose ``BoolTypeArray`` lacks ``async_get_duck_array``) are read through the sync path
    in a worker thread, still alongside the others; dask-backed variables are then computed
    together by ``ds.load()``, as xarray does.

    Parameters
    ----------
    ds : xarray.Dataset
        Opened with ``engine="azarr"`` (other lazily loaded variables need an async-capable
        backend too, else they are read one at a time in the worker thread).
    timeout : float, optional
        Seconds for the concurrent reads; on expiry they are cancelled
        (`azarr.sync.SyncTimeoutError`). A variable already being read through
        the sync fallback finishes in its thread.

    Returns
    -------
    xarray.Dataset
        ``ds``, loaded in place (as ``Dataset.load``).

    Raises
    ------
    azarr.sync.SyncTimeoutError
        ``timeout`` expired.
    AzarrError
        A read failed (the error names the key and the cause).
    """
    lazy = [v for v in ds.variables.values() if v.chunks is None]

    async def one(variable: Variable) -> None:
        try:
            await variable.load_async()
        except NotImplementedError as exc:  # raised before any read: a wrapper has no async method
            if isinstance(exc, AzarrError):  # azarr's own (e.g. ConsistencyUnsupportedError)
                raise
            await asyncio.to_thread(variable.load)

    async def go() -> None:
        tasks = [asyncio.ensure_future(one(v)) for v in lazy]
        try:
            await asyncio.gather(*tasks)
        finally:  # one read failed (or the call was cancelled): stop the others' requests too
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    run(go(), timeout)
    # Dask-backed variables (opened with chunks=): one dask compute, as Dataset.load does; the
    # variables loaded above are in memory now, so their load is a no-op.
    return ds.load()
