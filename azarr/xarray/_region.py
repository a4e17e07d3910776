"""``region=``: which part of existing arrays a ``to_zarr`` writes (xarray's rules and messages).

A region maps dimensions to slices with step 1, or to ``"auto"``: the slice
where the dataset's coordinate values sit in the stored coordinate (read from the
store, all such coordinates at once). ``region="auto"`` means ``"auto"`` for every
dimension of the dataset. Every variable written must share a dimension with the
region, and index variables are dropped (a region write changes no coordinate).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pandas as pd
from xarray import Dataset, conventions

from azarr.xarray._store import AzarrDataStore


async def _auto_slice(store: AzarrDataStore, ds: Dataset, dim: Any) -> slice:
    if dim not in ds._variables:  # a dimension without coordinate: the whole of it
        return slice(0, ds.sizes[dim])
    variable = store.open_store_variable(dim)
    values = await variable.load_async()
    stored = conventions.decode_cf_variable(dim, values)
    positions = pd.Index(stored.data).get_indexer(ds[dim].data)
    if (positions == -1).any():
        raise KeyError(
            f"Not all values of coordinate '{dim}' in the new array were found in the original store. "
            "Writing to a zarr region slice requires that no dimensions or metadata are changed by the write."
        )
    if (np.diff(positions) != 1).any():
        raise ValueError(
            f"The auto-detected region of coordinate '{dim}' for writing new data to the original store "
            "had non-contiguous indices. Writing to a zarr region slice requires that the new data "
            "constitute a contiguous subset of the original store."
        )
    return slice(int(positions[0]), int(positions[-1]) + 1)


async def validate_and_autodetect_region(store: AzarrDataStore, ds: Dataset) -> Dataset:
    """Check ``store.write_region`` against ``ds``, resolve ``"auto"``; ``ds`` without its indexes.

    Raises
    ------
    TypeError
        ``region`` is not a dict, or a value is not a slice.
    ValueError
        A region dimension not in ``ds``, a step other than 1, a variable without
        a region dimension, ``append_dim`` in the region, ``"auto"`` outside modes
        ``"r+"``/``"a"``, or coordinate values not contiguous in the store.
    KeyError
        ``"auto"`` and coordinate values the store does not hold.
    """
    region = store.write_region
    if region is None:
        return ds
    if isinstance(region, str) and region == "auto":
        region = dict.fromkeys(ds.dims, "auto")
    if not isinstance(region, dict):
        raise TypeError(f"``region`` must be a dict, got {type(region)}")
    region = dict(region)
    auto = [dim for dim, value in region.items() if isinstance(value, str) and value == "auto"]
    if auto:
        if store.mode not in ("r+", "a"):
            raise ValueError(f"``mode`` must be 'r+' or 'a' when using ``region='auto'``, got {store.mode!r}")
        slices = await asyncio.gather(*(_auto_slice(store, ds, dim) for dim in auto))
        region.update(zip(auto, slices, strict=True))
    for dim, value in region.items():
        if dim not in ds.dims:
            raise ValueError(
                f"all keys in ``region`` are not in Dataset dimensions, got {list(region)} and {list(ds.dims)}"
            )
        if not isinstance(value, slice):
            raise TypeError(f"all values in ``region`` must be slice objects, got region={region}")
        if value.step not in (1, None):
            raise ValueError(f"step on all slices in ``region`` must be 1 or None, got region={region}")
    outside = [name for name, var in ds.variables.items() if not set(region) & set(var.dims)]
    if region and outside:
        raise ValueError(
            "when setting `region` explicitly in to_zarr(), all variables in the dataset to write must have "
            f"at least one dimension in common with the region's dimensions {list(region)}, but that is not "
            "the case for some variables here. To drop these variables from this dataset before exporting "
            f"to zarr, write: .drop_vars({outside!r})"
        )
    if store.append_dim is not None and store.append_dim in region:
        raise ValueError(
            "cannot list the same dimension in both ``append_dim`` and ``region`` with to_zarr(), "
            f"got {store.append_dim} in both"
        )
    store.write_region = region
    return ds.drop_vars(ds.indexes)
