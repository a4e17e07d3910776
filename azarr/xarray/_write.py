"""``to_zarr``: write a Dataset, DataArray or DataTree as xarray's ``to_zarr`` does, through azarr.

Behaviour is xarray 2026.9's ``Dataset.to_zarr`` / ``DataTree.to_zarr`` with its
``zarr`` engine, for Zarr formats 2 and 3: the same modes and their defaults, checks and
messages, encodings, ``region``, ``append_dim``, ``safe_chunks``/``align_chunks``,
``write_empty_chunks`` and ``compute=False``; readable by ``xr.open_zarr`` of any
xarray version and by ``engine="azarr"``. What azarr does differently:

* everything is checked and encoded before anything is written, so a refused
  write writes nothing (xarray writes variable after variable);
* metadata is written in one concurrent wave, then in-memory variables
  concurrently and dask variables with one ``dask.array.store`` (a dask array
  shared between variables or DataTree nodes is computed once), all under the
  store's request budget;
* a write that fails stops every other write of the call before ``to_zarr``
  raises (``azarr.xarray._writes``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from typing import Any

from xarray import DataArray, Dataset, DataTree

from azarr.core import AsyncGroup
from azarr.sync import run
from azarr.xarray._compat import _choose_default_mode, _validate_dataset_names, dump_to_store
from azarr.xarray._region import validate_and_autodetect_region
from azarr.xarray._store import AzarrDataStore
from azarr.xarray._target import child_store, open_target
from azarr.xarray._writes import Writes, commit, write_data

#: ``DataArray.to_zarr`` stores an unnamed array, or one named like a coordinate, under
#: this variable name, keeping its own name in the ``__xarray_dataarray_name__`` attribute
#: (xarray's ``DATAARRAY_VARIABLE`` / ``DATAARRAY_NAME``).
_DATAARRAY_VARIABLE = "__xarray_dataarray_variable__"
_DATAARRAY_NAME = "__xarray_dataarray_name__"


def _as_dataset(array: DataArray) -> Dataset:
    if array.name is None:
        return array.to_dataset(name=_DATAARRAY_VARIABLE)
    if array.name in array.coords or array.name in array.dims:
        ds = array.to_dataset(name=_DATAARRAY_VARIABLE)
        ds.attrs[_DATAARRAY_NAME] = array.name
        return ds
    return array.to_dataset()


def _check_encoding(store: AzarrDataStore, encoding: Mapping[Any, Any]) -> None:
    """An existing variable keeps its encoding: refuse ``encoding=`` for it (xarray's rule)."""
    if encoding and store.mode in ("a", "a-", "r+"):
        for name in store.arrays:
            if name in encoding:
                raise ValueError(f"variable {name!r} already exists, but encoding was provided")


def _load_empty(ds: Dataset) -> None:
    # As xarray: zero-sized variables are loaded (dask < 2023.12 could not store them).
    for variable in ds.variables.values():
        if variable.size == 0:
            variable.load()


async def _plan(store: AzarrDataStore, ds: Dataset, writes: Writes, encoding: Any) -> None:
    ds = await validate_and_autodetect_region(store, ds)
    _check_encoding(store, encoding or {})
    # In a worker thread: encoding and ``var.data`` may read lazily opened variables through
    # azarr's sync facade, which must not block an event loop.
    await asyncio.to_thread(dump_to_store, ds, store, writes, encoding=dict(encoding or {}))


async def _finish(stores: list[AzarrDataStore], writes: Writes, compute: bool, store_kwargs: Any) -> Any:
    """Commit the metadata of ``stores``, consolidate, write the data (or return the delayed write)."""
    import azarr

    await commit(stores)
    root = stores[0]
    if root.consolidate_on_close:
        await azarr.consolidate_metadata(root.group.store)
    delayed = await write_data(writes, compute=compute, chunkmanager_store_kwargs=store_kwargs)
    if compute:
        return root.group
    import dask

    return dask.delayed(_written)(delayed)


def _written(_: Any) -> None:
    """What the ``compute=False`` delayed returns once the data is written."""


async def to_zarr_async(
    obj: Dataset | DataArray | DataTree,
    store: Any = None,
    mode: str | None = None,
    group: str | None = None,
    encoding: Mapping[Any, Any] | None = None,
    *,
    compute: bool = True,
    consolidated: bool | None = None,
    append_dim: Hashable | None = None,
    region: Mapping[Any, Any] | str | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    storage_options: dict[str, Any] | None = None,
    zarr_format: int | None = None,
    write_empty_chunks: bool | None = None,
    chunkmanager_store_kwargs: dict[str, Any] | None = None,
    write_inherited_coords: bool = False,
) -> Any:
    """Write ``obj`` to a Zarr group as xarray's ``to_zarr`` does, every array concurrently.

    The parameters are those of xarray 2026.9's ``Dataset.to_zarr`` (and, for a
    DataTree, ``DataTree.to_zarr``), with the same defaults and meaning.

    Parameters
    ----------
    obj : xarray.Dataset, xarray.DataArray or xarray.DataTree
        What to write. Dask-backed variables are written block by block.
    store : str, os.PathLike, Store or MutableMapping
        Where (a URL like ``"s3://bucket/x.zarr"``, a path, or a store).
    mode : {None, "w-", "w", "a", "a-", "r+"}, optional
        None (the default, as in xarray) means ``"a"`` with ``append_dim``, ``"r+"``
        with ``region`` and ``"w-"`` otherwise. ``"w-"`` fails if something is
        there; ``"w"`` replaces the group; ``"a"`` adds or overwrites variables;
        ``"a-"`` with ``append_dim`` also leaves variables without that dimension
        alone; ``"r+"`` writes into existing arrays only.
    group : str, optional
        Group path within the store (not for a DataTree).
    encoding : dict, optional
        Per-variable encoding (per node path for a DataTree): ``chunks`` (int or
        tuple), ``compressors`` (a tuple of one numcodecs codec, or None),
        ``filters``, ``chunk_key_encoding``, ``write_empty_chunks``, CF keys
        (``dtype``, ``scale_factor``, ``add_offset``, ``_FillValue``, ``units``,
        ``calendar``); azarr also takes ``compressor`` (zarr-python 2).
    compute : bool
        Write the data now (True) or return a ``dask.delayed`` that writes the
        dask-backed variables when computed; metadata and in-memory variables are
        written now either way.
    consolidated : bool, optional
        Consolidate the store root's metadata after the metadata changes (True or None):
        ``.zmetadata``, or inline in the root ``zarr.json`` for Zarr format 3;
        with ``mode="r+"``, open through it when present.
    append_dim : hashable, optional
        Grow existing arrays along this dimension by ``obj``'s values, encoded as the
        stored ones.
    region : dict or "auto", optional
        ``{dim: slice}`` (or ``"auto"`` per dimension, or for all): write into that
        part of existing arrays, found from the coordinate values for ``"auto"``.
    safe_chunks : bool
        Refuse dask chunks that would have two tasks write one Zarr chunk.
    align_chunks : bool
        Rechunk dask arrays onto the Zarr chunk grid instead (implies no refusal).
    storage_options : dict, optional
        fsspec-style options for a URL ``store``.
    zarr_format : int, optional
        The format of groups and arrays created (2 or 3; default ``azarr.config``
        ``zarr_format``, 2 -- xarray over zarr-python 3 defaults to 3). Existing
        groups are written in their own format; naming the other one is a ValueError.
    write_empty_chunks : bool, optional
        Store chunks that are entirely ``fill_value``; by default they are not
        (xarray's default, zarr-python 3's; zarr-python 2 stored them).
    chunkmanager_store_kwargs : dict, optional
        Passed to ``dask.array.store`` (its ``compute``), e.g. ``{"scheduler": ...}``.
    write_inherited_coords : bool
        DataTree only: write inherited coordinates in every node, not just the root.

    Returns
    -------
    AsyncGroup or dask.delayed.Delayed
        The written group (the DataTree's root group), or the delayed data write.

    Raises
    ------
    ValueError, TypeError
        Everything xarray's ``to_zarr`` refuses, with its messages: a bad mode or
        region, ``append_dim`` not a stored dimension, different dimension sizes
        without ``append_dim``, a dtype mismatch when appending (fixed-width
        strings), ``encoding=`` for an existing variable, an unknown encoding key,
        non-integer chunks, overlapping dask chunks, non-string variable names,
        attributes JSON cannot hold.
    ContainsGroupError, ContainsArrayError
        ``mode="w-"`` and a node exists (both are ``FileExistsError``).
    NotImplementedError
        ``group`` or ``append_dim`` with a DataTree.
    """
    if isinstance(obj, DataTree):
        _check_tree_arguments(obj, group, append_dim, encoding)
        mode = "w-" if mode is None else mode  # DataTree.to_zarr's default
        ds = None
    else:
        ds = _as_dataset(obj) if isinstance(obj, DataArray) else obj
        _validate_dataset_names(ds)
        await asyncio.to_thread(_load_empty, ds)
    target = await open_target(
        store,
        mode=_choose_default_mode(mode=mode, append_dim=append_dim, region=region),
        group=group,
        consolidated=consolidated,
        storage_options=storage_options,
        zarr_format=zarr_format,
        append_dim=append_dim,
        write_region=region,
        safe_chunks=safe_chunks,
        align_chunks=align_chunks,
        write_empty=write_empty_chunks,
    )
    writes = Writes()
    if ds is None:
        stores = await _plan_tree(target, obj, writes, dict(encoding or {}), write_inherited_coords)
    else:
        await _plan(target, ds, writes, encoding)
        stores = [target]
    return await _finish(stores, writes, compute, chunkmanager_store_kwargs)


def _check_tree_arguments(tree: DataTree, group: Any, append_dim: Any, encoding: Any) -> None:
    """What ``DataTree.to_zarr`` refuses (xarray's messages)."""
    if group is not None:
        raise NotImplementedError("specifying a root group for the tree has not been implemented")
    if append_dim is not None:
        raise NotImplementedError(
            "specifying ``append_dim`` with ``DataTree.to_zarr`` has not been implemented"
        )
    if set(encoding or {}) - set(tree.groups):
        raise ValueError(f"unexpected encoding group name(s) provided: {set(encoding) - set(tree.groups)}")


async def _plan_tree(
    root: AzarrDataStore, tree: DataTree, writes: Writes, encoding: dict[Any, Any], inherited: bool
) -> list[AzarrDataStore]:
    """``DataTree.to_zarr``: every node a group, created level by level, all planned into ``writes``."""
    nodes = list(tree.subtree_with_keys)
    stores: dict[str, AzarrDataStore] = {"": root}
    # Groups level by level (each level one concurrent wave): a parent exists before its children.
    for depth in sorted({path.count("/") for path, node in nodes if node is not tree}):
        level = [path for path, node in nodes if node is not tree and path.count("/") == depth]
        children = await asyncio.gather(*(child_store(root, path) for path in level))
        stores.update(zip(level, children, strict=True))
    for path, node in nodes:
        at_root = node is tree
        dataset = node.to_dataset(inherit=inherited or at_root)
        await _plan(stores["" if at_root else path], dataset, writes, encoding.get(node.path))
    return list(stores.values())


def to_zarr(
    obj: Dataset | DataArray | DataTree,
    store: Any = None,
    mode: str | None = None,
    group: str | None = None,
    encoding: Mapping[Any, Any] | None = None,
    *,
    compute: bool = True,
    consolidated: bool | None = None,
    append_dim: Hashable | None = None,
    region: Mapping[Any, Any] | str | None = None,
    safe_chunks: bool = True,
    align_chunks: bool = False,
    storage_options: dict[str, Any] | None = None,
    zarr_format: int | None = None,
    write_empty_chunks: bool | None = None,
    chunkmanager_store_kwargs: dict[str, Any] | None = None,
    write_inherited_coords: bool = False,
    timeout: float | None = None,
) -> Any:
    """Write ``obj`` to a Zarr group as xarray's ``to_zarr`` does; blocking form of `to_zarr_async`.

    Same parameters as `to_zarr_async`, plus ``timeout`` (seconds): on expiry the
    write is cancelled, every write of the call stopped, and
    `azarr.sync.SyncTimeoutError` raised.

    Returns
    -------
    azarr.sync.Group or dask.delayed.Delayed
        The written group, or with ``compute=False`` the delayed data write.

    Raises
    ------
    ValueError, TypeError, FileExistsError, NotImplementedError
        As `to_zarr_async`.
    """
    result = run(
        to_zarr_async(
            obj,
            store,
            mode,
            group,
            encoding,
            compute=compute,
            consolidated=consolidated,
            append_dim=append_dim,
            region=region,
            safe_chunks=safe_chunks,
            align_chunks=align_chunks,
            storage_options=storage_options,
            zarr_format=zarr_format,
            write_empty_chunks=write_empty_chunks,
            chunkmanager_store_kwargs=chunkmanager_store_kwargs,
            write_inherited_coords=write_inherited_coords,
        ),
        timeout,
    )
    return result.to_sync() if isinstance(result, AsyncGroup) else result
