"""``engine="azarr"``: xarray's backend entry point for Zarr data read through azarr.

It takes the parameters of xarray's ``zarr`` engine (``group``, ``mode``,
``consolidated``, ``storage_options``, ``zarr_format``,
``use_zarr_fill_value_as_mask``, ``cache_members``) and opens what that engine
opens the same way, with azarr's I/O:

* consolidated metadata first (``consolidated=None``), else the group's own
  documents, with xarray's ``RuntimeWarning`` for the fallback;
* ``open_datatree``/``open_groups`` read the whole hierarchy in one concurrent
  walk (nothing at all beyond ``.zmetadata`` when consolidated), then every
  group's dimension coordinates -- which xarray loads at open for its indexes --
  in one wave for all groups, under the store's request budget; xarray's own
  engine reads them group after group;
* every lazily loaded variable supports ``load_async``: the decoding wrapper xarray
  puts around CF-encoded booleans (``int8`` + ``dtype: "bool"``, what xarray wrote
  before 2025) has no async path in xarray 2026.9, so it is replaced by an
  equivalent one that has.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable
from typing import Any

import numpy as np
from xarray import Dataset, DataTree, Variable
from xarray.backends.common import BackendEntrypoint, datatree_from_dict_with_io_cleanup
from xarray.backends.store import StoreBackendEntrypoint
from xarray.coding.common import lazy_elemwise_func
from xarray.coding.variables import BoolTypeArray
from xarray.core.treenode import NodePath

import azarr
from azarr.core import AsyncArray, AsyncGroup
from azarr.errors import (
    AzarrError,
    ConsolidatedMetadataNotFoundError,
    ContainsArrayError,
    GroupNotFoundError,
)
from azarr.storage import Store
from azarr.sync import run
from azarr.xarray._compat import emit_user_level_warning
from azarr.xarray._store import AzarrDataStore, array_dimensions

_DECODE_ARGS = (
    "mask_and_scale",
    "decode_times",
    "concat_characters",
    "decode_coords",
    "drop_variables",
    "use_cftime",
    "decode_timedelta",
)
_READ_MODES = ("r", "r+", "a")

#: xarray's words, so code and tests matching on them keep working.
_FALLBACK_WARNING = (
    "Failed to open Zarr store with consolidated metadata, but successfully read with "
    "non-consolidated metadata. This is typically much slower for opening a dataset. To silence "
    "this warning, consider:\n"
    "1. Consolidating metadata in this existing store with azarr.consolidate_metadata().\n"
    "2. Explicitly setting consolidated=False, to avoid trying to read consolidate metadata, or\n"
    "3. Explicitly setting consolidated=True, to raise an error in this case instead of falling "
    "back to try reading non-consolidated metadata."
)


async def open_root(
    store: Any,
    *,
    group: str | None,
    consolidated: bool | None,
    storage_options: dict[str, Any] | None,
    allow_pickle: bool | None,
    mode: str = "r",
    zarr_format: int | None = None,
) -> tuple[AsyncGroup, bool]:
    """The group to read, and whether consolidated metadata was looked for and missing.

    As xarray's ``zarr`` engine: consolidated metadata (``.zmetadata``, or inline in
    a Zarr v3 ``zarr.json``) at the store root (zarr-python's layout), then at
    ``group``; ``consolidated=True`` requires it, ``False`` ignores it, ``None``
    falls back to the group's documents. ``zarr_format`` (2 or 3) looks for that
    format's documents only; None for either.

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        ``consolidated=True`` and the store has no consolidated metadata.
    GroupNotFoundError
        No group at ``group`` (a ``FileNotFoundError``).
    ContainsArrayError
        ``group`` names an array, not a group.
    """
    node: Any = None
    if consolidated is not False:
        node = await _open_consolidated(store, group, storage_options, allow_pickle, zarr_format)
        if node is None and consolidated:
            raise ConsolidatedMetadataNotFoundError(
                f"consolidated=True but no consolidated metadata at the root of {store!r}"
                + (f" nor at group {group!r}" if group else "")
            )
    missing = node is None and consolidated is None
    if node is None:
        try:
            node = await azarr.open_group(
                store,
                mode="r" if mode == "r" else "r+",
                path=group,
                storage_options=storage_options,
                allow_pickle=allow_pickle,
                use_consolidated=False,
                zarr_format=zarr_format,
            )
        except GroupNotFoundError as exc:
            raise GroupNotFoundError(
                f"No group found in store {store!r} at path {group or '/'!r}: {exc}"
            ) from exc
    if not isinstance(node, AsyncGroup):
        raise ContainsArrayError(f"{node.name!r} in {node.store.url} is an array; xarray opens a group")
    return node, missing


async def _open_consolidated(
    store: Any,
    group: str | None,
    storage_options: dict[str, Any] | None,
    allow_pickle: bool | None,
    zarr_format: int | None,
) -> Any:
    """``group`` read from the root's consolidated metadata (zarr-python's layout), else from its own;
    None if neither."""
    for metadata_at, below in ((None, group), (group, None)) if group else ((None, None),):
        try:
            node: Any = await azarr.open_consolidated(
                store,
                mode="r",
                path=metadata_at,
                storage_options=storage_options,
                allow_pickle=allow_pickle,
                zarr_format=zarr_format,
            )
        except ConsolidatedMetadataNotFoundError:
            continue
        if not below:
            return node
        try:
            return await node.get(below)
        except KeyError as exc:
            raise GroupNotFoundError(f"No group found in store {store!r} at path {below!r}") from exc
    return None


def _store_arg(filename_or_obj: Any) -> Any:
    if isinstance(filename_or_obj, os.PathLike):
        return os.fspath(filename_or_obj)
    return filename_or_obj


def _check_read(mode: str, zarr_format: int | None) -> None:
    if mode not in _READ_MODES:
        raise ValueError(f"engine='azarr' opens with mode in {_READ_MODES}, got {mode!r}")
    if zarr_format not in (None, 2, 3):
        raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")


def _as_bool(values: Any) -> Any:
    return np.asarray(values).astype(bool)


def async_capable(ds: Dataset) -> Dataset:
    """Give every lazily decoded variable of ``ds`` an async path (``load_async``), in place.

    xarray 2026.9 decodes CF booleans with ``BoolTypeArray``, which lacks
    ``async_get_duck_array``; ``lazy_elemwise_func`` builds xarray's equivalent
    lazily indexed wrapper, which has it.
    """
    for variable in ds.variables.values():
        data = variable._data
        if isinstance(data, BoolTypeArray) and type(variable) is Variable:
            variable.data = lazy_elemwise_func(data.array, _as_bool, np.dtype(bool))
    return ds


def _emit_fallback_warning(missing: bool) -> None:
    if missing:
        emit_user_level_warning(_FALLBACK_WARNING, RuntimeWarning)


class AzarrBackendEntrypoint(BackendEntrypoint):
    """Open Zarr stores (local, S3, GCS, HTTP, fsspec) in xarray with ``engine="azarr"``.

    ``xr.open_dataset(url, engine="azarr", group=, consolidated=, storage_options=,
    chunks=, decode_times=, ...)`` takes the parameters of xarray's ``zarr`` engine
    and reads the layouts it writes (Zarr format 2: ``_ARRAY_DIMENSIONS``, CF
    attributes, ``fill_value`` as ``_FillValue``; format 3: ``dimension_names``,
    attributes in ``zarr.json``, inline consolidated metadata), decoding done by
    xarray itself.
    Variables are lazy; ``ds.load()`` reads each through azarr's sync facade, one
    variable after another (xarray's ``Dataset.load`` offers a backend no hook to
    do otherwise); ``azarr.xarray.load(ds)`` and ``await ds.load_async()`` read them
    all concurrently under the store's budget. ``chunks=`` gives dask arrays whose
    preferred chunks are the Zarr chunks. ``xr.open_datatree``/``xr.open_groups``
    open every group of a hierarchy concurrently.
    """

    description = "Open Zarr stores with azarr (asyncio-native, budgeted cloud I/O)"
    url = "https://github.com/azarr/azarr"
    supports_groups = True
    open_dataset_parameters = (
        "filename_or_obj",
        *_DECODE_ARGS,
        "group",
        "mode",
        "consolidated",
        "storage_options",
        "zarr_format",
        "use_zarr_fill_value_as_mask",
        "cache_members",
        "allow_pickle",
        "store",
    )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if isinstance(filename_or_obj, Store | AzarrDataStore):
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
        mode: str = "r",
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        cache_members: bool = True,
        allow_pickle: bool | None = None,
        store: AzarrDataStore | None = None,
    ) -> Dataset:
        """Open one group as a Dataset.

        ``cache_members`` is accepted (azarr lists a group once anyway), and so is
        ``use_zarr_fill_value_as_mask``, which -- as in xarray 2026.9's ``zarr``
        engine, whose ``open_dataset`` does not pass it on -- changes nothing: a Zarr
        format 2 array's ``fill_value`` is always the variable's ``_FillValue``, a
        format 3 array's never is (it is ``encoding["fill_value"]``; a ``_FillValue``
        attribute masks).
        """
        _check_read(mode, zarr_format)
        if store is None and isinstance(filename_or_obj, AzarrDataStore):
            store = filename_or_obj
        if store is None:

            async def go() -> tuple[AzarrDataStore, bool]:
                root, missing = await open_root(
                    _store_arg(filename_or_obj),
                    group=group,
                    consolidated=consolidated,
                    storage_options=storage_options,
                    allow_pickle=allow_pickle,
                    mode=mode,
                    zarr_format=zarr_format,
                )
                opened = await AzarrDataStore.open_async(root, mode=mode)
                await opened.prefetch_indexes()
                return opened, missing

            store, missing = run(go())
            _emit_fallback_warning(missing)
        decode = {
            "mask_and_scale": mask_and_scale,
            "decode_times": decode_times,
            "concat_characters": concat_characters,
            "decode_coords": decode_coords,
            "drop_variables": drop_variables,
            "use_cftime": use_cftime,
            "decode_timedelta": decode_timedelta,
        }
        return async_capable(StoreBackendEntrypoint().open_dataset(store, **decode))

    def open_groups_as_dict(
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        mode: str = "r",
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        allow_pickle: bool | None = None,
        **decode: Any,
    ) -> dict[str, Dataset]:
        """Every group at or below ``group`` as a Dataset, keyed as xarray's engine keys them (``"/"``, ``"/a"``...).

        ``use_zarr_fill_value_as_mask`` changes nothing, as in `open_dataset`.

        The hierarchy is read in one concurrent walk and every group's dimension
        coordinates in one wave (see the module notes).
        """
        _check_read(mode, zarr_format)
        stores, missing = run(
            open_tree(
                _store_arg(filename_or_obj),
                group=group,
                mode=mode,
                consolidated=consolidated,
                storage_options=storage_options,
                allow_pickle=allow_pickle,
                zarr_format=zarr_format,
            )
        )
        _emit_fallback_warning(missing)
        parent = NodePath("/") / NodePath(group) if group else NodePath("/")
        entry = StoreBackendEntrypoint()
        result = {}
        for path, store in stores.items():
            node_path = parent / path if path else parent
            key = str(node_path.relative_to(parent)) if group else str(node_path)
            result[key] = async_capable(entry.open_dataset(store, **decode))
        return result

    def open_datatree(
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        mode: str = "r",
        consolidated: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        zarr_format: int | None = None,
        use_zarr_fill_value_as_mask: bool | None = None,
        allow_pickle: bool | None = None,
        **decode: Any,
    ) -> DataTree:
        """The hierarchy at or below ``group`` as a DataTree (`open_groups_as_dict`, then xarray's assembly)."""
        groups = self.open_groups_as_dict(
            filename_or_obj,
            group=group,
            mode=mode,
            consolidated=consolidated,
            storage_options=storage_options,
            zarr_format=zarr_format,
            use_zarr_fill_value_as_mask=use_zarr_fill_value_as_mask,
            allow_pickle=allow_pickle,
            **decode,
        )
        return datatree_from_dict_with_io_cleanup(groups)


async def open_tree(
    store: Any,
    *,
    group: str | None,
    mode: str,
    consolidated: bool | None,
    storage_options: dict[str, Any] | None,
    allow_pickle: bool | None,
    zarr_format: int | None = None,
) -> tuple[dict[str, AzarrDataStore], bool]:
    """A data store per group at or below ``group`` (keyed by path relative to it, ``""`` for it).

    One walk of the hierarchy (concurrent per level; from consolidated metadata no I/O at
    all), the dimension names of every array at once, then every group's dimension
    coordinates in one wave.
    """
    root, missing = await open_root(
        store,
        group=group,
        consolidated=consolidated,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        mode=mode,
        zarr_format=zarr_format,
    )
    groups: dict[str, AsyncGroup] = {"": root}
    arrays: dict[str, dict[str, AsyncArray]] = {"": {}}
    members = [(name, node) async for name, node in root.members(max_depth=None)]
    for name, node in members:
        if isinstance(node, AsyncGroup):
            groups[name] = node
            arrays.setdefault(name, {})
    for name, node in members:
        if isinstance(node, AsyncArray):
            parent, _, leaf = name.rpartition("/")
            arrays.setdefault(parent, {})[leaf] = node
    flat = [(path, leaf, array) for path, found in arrays.items() for leaf, array in found.items()]
    names = await asyncio.gather(*(array_dimensions(array, try_nczarr=mode == "r") for _, _, array in flat))
    dims: dict[str, dict[str, tuple[str, ...]]] = {path: {} for path in groups}
    for (path, leaf, _), found in zip(flat, names, strict=True):
        dims[path][leaf] = found
    stores = {
        path: AzarrDataStore(node, arrays.get(path, {}), dims[path], mode=mode)
        for path, node in sorted(groups.items())
    }
    await asyncio.gather(*(s.prefetch_indexes() for s in stores.values()))
    return stores, missing


def load(ds: Dataset, *, timeout: float | None = None) -> Dataset:
    """Load every variable of ``ds`` at once, blocking: the sync twin of ``await ds.load_async()``.

    ``ds.load()`` reads variables one after another: xarray 2026.9's ``Dataset.load``
    computes dask-backed variables together but loads every lazily indexed one with its
    own ``Variable.load`` call, so each costs a full round trip, and a backend has no
    hook to change that. This fetches every lazily indexed variable concurrently under
    the store's budget (one round-trip wave), on azarr's I/O loop, from sync code (a
    script, a notebook cell).

    Variables whose decoding has no async path (those of datasets other backends
    opened) are read through the sync path in a worker thread, still alongside the
    others; dask-backed variables are then computed together by ``ds.load()``, as
    xarray does.

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
