"""``to_zarr``: write an xarray Dataset as the Zarr v2 layout xarray + zarr-python 2 write.

Encoding is xarray's own (``conventions.encode_dataset_coordinates`` and the zarr
engine's ``encode_zarr_variable``: CF times, ``scale_factor``, ``_FillValue``, UTF-8
strings); azarr only lays the encoded variables out as xarray's ``ZarrStore`` does
for Zarr v2: one array per variable, ``_FillValue`` as the array's ``fill_value``,
``_ARRAY_DIMENSIONS`` plus the encoded attributes in ``.zattrs``, the dataset
attributes on the group, and consolidated metadata at the store root.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from typing import Any

import numcodecs
import numpy as np
from xarray import Dataset, Variable
from xarray.backends.zarr import encode_zarr_attr_value, encode_zarr_variable
from xarray.coding.strings import check_vlen_dtype
from xarray.coding.variables import BooleanCoder
from xarray.conventions import encode_dataset_coordinates

import azarr
from azarr.core import AsyncArray, AsyncGroup
from azarr.sync import Group, run
from azarr.xarray._store import DIMENSION_KEY

_MODES = ("w", "w-", "a", "r+")


def _chunks(name: Hashable, var: Variable) -> Any:
    """Zarr chunks: ``encoding["chunks"]``, else the dask chunks (uniform but the last), else auto."""
    if var.encoding.get("chunks") is not None:
        return tuple(var.encoding["chunks"])
    if var.chunks is None:
        return True
    chunks = []
    for dim, sizes in zip(var.dims, var.chunks, strict=True):
        if len(set(sizes[:-1])) > 1 or (len(sizes) > 1 and sizes[-1] > sizes[0]):
            raise ValueError(
                f"variable {name!r}: dask chunks {sizes} along {dim!r} are not uniform (but the last), "
                "so they cannot be Zarr chunks; rechunk, or give encoding={'chunks': ...}"
            )
        chunks.append(sizes[0])
    return tuple(chunks)


def _array_kwargs(name: Hashable, var: Variable) -> dict[str, Any]:
    """``azarr.create`` arguments for encoded variable ``var`` (mutates nothing)."""
    attrs = dict(var.attrs)
    fill_value = attrs.pop("_FillValue", None)
    kwargs: dict[str, Any] = {"shape": var.shape, "dtype": var.dtype, "fill_value": fill_value}
    for key in ("compressor", "filters", "write_empty_chunks"):
        if key in var.encoding:
            kwargs[key] = var.encoding[key]
    if check_vlen_dtype(var.dtype) is str or var.dtype.kind == "O":
        # UTF-8 strings as zarr-python 2 stores dtype=str: an object array with the VLenUTF8 object
        # codec (which azarr puts first among the filters; one read from the store is dropped here).
        kwargs["dtype"] = object
        kwargs["object_codec"] = numcodecs.VLenUTF8()
        others = [f for f in kwargs.get("filters") or [] if getattr(f, "codec_id", None) != "vlen-utf8"]
        kwargs["filters"] = others or None
    kwargs["chunks"] = _chunks(name, var)
    kwargs["attributes"] = {
        DIMENSION_KEY: list(map(str, var.dims)),
        **{str(k): encode_zarr_attr_value(v) for k, v in attrs.items()},
    }
    return kwargs


def _v2_layout(var: Variable) -> Variable:
    """Undo two xarray >= 2025 changes so the documents are those xarray + zarr-python 2 wrote.

    * bools are stored as ``int8`` with the attribute ``dtype: "bool"`` (xarray's ``BooleanCoder``,
      which newer xarray skips for Zarr); every xarray version decodes that back to bool;
    * the ``dtype`` attribute newer xarray adds to encoded timedeltas is dropped (older readers
      would show it as an attribute; newer ones decode CF timedeltas with ``decode_timedelta=True``).
    """
    if var.dtype == bool:
        var = BooleanCoder().encode(var)
    dtype = var.attrs.get("dtype")
    if isinstance(dtype, str) and dtype.startswith("timedelta64") and "units" in var.attrs:
        var = var.copy(deep=False)
        var.attrs = {k: v for k, v in var.attrs.items() if k != "dtype"}
    return var


def encode_dataset(
    ds: Dataset, encoding: Mapping[Hashable, Mapping[str, Any]] | None = None
) -> tuple[dict[Hashable, Variable], dict[str, Any]]:
    """``ds``'s variables CF-encoded for Zarr v2 and its encoded attributes (xarray's own coders).

    Raises
    ------
    ValueError
        ``encoding`` names a variable not in ``ds``, or holds an unknown key.
    """
    ds = ds.copy(deep=False)
    for name, extra in (encoding or {}).items():
        if name not in ds.variables:
            raise ValueError(f"encoding given for {name!r}, which is not a variable of the dataset")
        ds.variables[name].encoding = {**ds.variables[name].encoding, **extra}
    variables, attrs = encode_dataset_coordinates(ds)
    encoded = {
        name: _v2_layout(encode_zarr_variable(var, name=name, zarr_format=2))
        for name, var in variables.items()
    }
    return encoded, {str(k): encode_zarr_attr_value(v) for k, v in attrs.items()}


def _region_selection(var: Variable, region: Mapping[Hashable, slice] | None) -> tuple[slice, ...]:
    if not region:
        return tuple(slice(None) for _ in var.dims)
    return tuple(region.get(dim, slice(None)) for dim in var.dims)


async def _write_values(array: AsyncArray, var: Variable, selection: tuple[slice, ...]) -> None:
    """Write ``var``'s values into ``selection`` of ``array``, off the event loop where it computes.

    A dask-backed variable goes through `azarr.dask.to_azarr` block by block (never
    whole in memory; on a dask.distributed cluster when one is the default scheduler). A
    lazily opened one is read through azarr's sync facade, which must not run on a loop
    thread, so it is materialised in a worker thread.
    """
    if var.chunks is not None and var.ndim:
        from azarr.dask import to_azarr

        await asyncio.to_thread(to_azarr, var.data, array, region=selection)
        return
    values = await asyncio.to_thread(lambda: np.asarray(var.values))
    if var.ndim == 0:
        await array.set_basic_selection(Ellipsis, values)
    else:
        await array.set_basic_selection(selection, values)


async def _existing_array(target: AsyncGroup, name: Hashable) -> AsyncArray:
    node = await target.get(str(name))
    if not isinstance(node, AsyncArray):
        raise ValueError(f"{name!r} in {target.store.url} is a group, not the array of variable {name!r}")
    return node


async def _open_target(store: Any, mode: str, group: str | None, storage_options: Any) -> AsyncGroup:
    if mode in ("w", "w-"):
        return await azarr.open_group(store, mode=mode, path=group, storage_options=storage_options)
    return await azarr.open_group(
        store, mode="r+" if mode == "r+" else "a", path=group, storage_options=storage_options
    )


async def to_zarr_async(
    ds: Dataset,
    store: Any,
    *,
    mode: str = "w-",
    group: str | None = None,
    consolidated: bool = True,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    region: Mapping[Hashable, slice] | None = None,
    append_dim: Hashable | None = None,
    storage_options: dict[str, Any] | None = None,
) -> AsyncGroup:
    """Write ``ds`` to a Zarr v2 group, every array concurrently under the store's budget.

    The layout is xarray's ``Dataset.to_zarr`` with zarr-python 2 (``zarr_format=2``):
    readable by ``xr.open_zarr`` of any xarray version and by ``engine="azarr"``.

    Parameters
    ----------
    ds : xarray.Dataset
        What to write; dask-backed variables are written block by block with
        `azarr.dask.to_azarr` (extra ``azarr[dask]``), others at once.
    store : str, os.PathLike, Store or MutableMapping
        Where (a URL like ``"s3://bucket/x.zarr"`` or a store).
    mode : {"w-", "w", "a", "r+"}
        ``"w-"`` fails if something is there, ``"w"`` replaces the group, ``"a"``
        adds or overwrites variables, ``"r+"`` writes into existing arrays only
        (with ``region``), as xarray's ``to_zarr``.
    group : str, optional
        Group path within the store.
    consolidated : bool
        Write ``.zmetadata`` at the store root afterwards (xarray's default).
    encoding : dict, optional
        Per-variable encoding, e.g. ``{"t": {"chunks": (10, 10), "dtype": "i2",
        "scale_factor": 0.01, "_FillValue": -9999, "compressor": Blosc()}}``.
    region : dict of str to slice, optional
        Write ``ds`` into this part of existing arrays (``{"time": slice(0, 10)}``);
        every variable must have a region dimension; variables and attributes
        are not created.
    append_dim : str, optional
        With ``mode="a"``: grow existing arrays along this dimension by ``ds``'s
        values (encoded as the stored ones: same ``units``, ``scale_factor``,
        ``dtype``...); variables without it are replaced, new ones created.
    storage_options : dict, optional
        fsspec-style options for a URL ``store``.

    Returns
    -------
    AsyncGroup
        The written group.

    Raises
    ------
    ValueError
        Bad ``mode``, a variable without a region dimension, ragged dask chunks.
    ContainsGroupError, ContainsArrayError
        ``mode="w-"`` and a node exists.
    ArrayNotFoundError
        ``region`` names arrays that do not exist.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    if region is not None and mode not in ("a", "r+"):
        raise ValueError(f"region writes need mode='r+' or 'a', got {mode!r}")
    if append_dim is not None and (mode != "a" or region is not None):
        raise ValueError("append_dim needs mode='a' and no region")
    target = await _open_target(store, mode, group, storage_options)
    existing: set[str] = set()
    if region is not None or append_dim is not None:
        existing = {name async for name in target.array_keys()}
        encoding = {**await _existing_encoding(target, ds, existing), **(encoding or {})}
    # In a worker thread: encoding may touch lazily opened data (see _write_values).
    variables, attrs = await asyncio.to_thread(encode_dataset, ds, encoding)
    if region is not None:
        await _write_region(target, variables, region)
    else:
        if attrs or mode in ("w", "w-"):
            await target.attrs.update(attrs)

        async def write(name: Hashable, var: Variable) -> None:
            if str(name) in existing and append_dim in var.dims:
                array = await _existing_array(target, name)
                values = await asyncio.to_thread(lambda: np.asarray(var.values))
                await array.append(values, axis=var.dims.index(append_dim))
                return
            array = await target.create_dataset(str(name), overwrite=True, **_array_kwargs(name, var))
            await _write_values(array, var, _region_selection(var, None))

        await asyncio.gather(*(write(n, v) for n, v in variables.items()))
    if consolidated:
        await azarr.consolidate_metadata(target.store)
    return target


#: Attributes of an existing array that fix how new values must be encoded into it.
_CF_KEYS = ("scale_factor", "add_offset", "units", "calendar", "dtype")


async def _existing_encoding(
    target: AsyncGroup, ds: Dataset, existing: set[str]
) -> dict[Hashable, dict[str, Any]]:
    """The CF encoding of the arrays ``ds`` writes into (so new values are encoded as the rest was)."""

    async def one(name: Hashable) -> tuple[Hashable, dict[str, Any]]:
        array = await _existing_array(target, name)
        enc = {k: array.attrs[k] for k in _CF_KEYS if k in array.attrs}
        if ds.variables[name].dtype.kind not in "OSU":
            enc["dtype"] = array.dtype
        if array.fill_value is not None:
            enc["_FillValue"] = array.fill_value
        return name, enc

    return dict(await asyncio.gather(*(one(name) for name in ds.variables if str(name) in existing)))


async def _write_region(
    target: AsyncGroup, variables: Mapping[Hashable, Variable], region: Mapping[Hashable, slice]
) -> None:
    for name, var in variables.items():
        if not set(region) & set(var.dims):
            raise ValueError(
                f"variable {name!r} has none of the region dimensions {list(region)}; "
                "drop it from the dataset before a region write (as xarray requires)"
            )

    async def write(name: Hashable, var: Variable) -> None:
        array = await _existing_array(target, name)
        await _write_values(array, var, _region_selection(var, region))

    await asyncio.gather(*(write(n, v) for n, v in variables.items()))


def to_zarr(
    ds: Dataset,
    store: Any,
    *,
    mode: str = "w-",
    group: str | None = None,
    consolidated: bool = True,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    region: Mapping[Hashable, slice] | None = None,
    append_dim: Hashable | None = None,
    storage_options: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> Group:
    """Write ``ds`` to a Zarr v2 group; blocking form of `to_zarr_async` (same parameters).

    ``timeout`` (seconds) cancels the write on expiry (`azarr.sync.SyncTimeoutError`).

    Returns
    -------
    azarr.sync.Group
        The written group.
    """
    coro = to_zarr_async(
        ds,
        store,
        mode=mode,
        group=group,
        consolidated=consolidated,
        encoding=encoding,
        region=region,
        append_dim=append_dim,
        storage_options=storage_options,
    )
    return run(coro, timeout).to_sync()
