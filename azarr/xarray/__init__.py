"""xarray integration: the ``engine="azarr"`` backend and ``to_zarr`` writers (extra ``azarr[xarray]``).

Both behave as xarray's own ``zarr`` engine (xarray 2026.9, Zarr formats 2 and 3): the same
parameters, defaults, checks and encodings; xarray's Zarr backend test suite runs
against them (``tests/interop/test_xarray_suite.py``). Reading:

    import xarray as xr
    ds = xr.open_dataset("s3://bucket/era5.zarr", engine="azarr", storage_options={"anon": True})
    ds = await ds.load_async()        # every variable at once, under the store's budget
    ds = azarr.xarray.load(ds)        # the same from sync code; ds.load() waits one round trip per variable
    tree = xr.open_datatree("s3://bucket/era5.zarr", engine="azarr")   # every group concurrently

Writing (``Dataset``, ``DataArray`` or ``DataTree``), as ``obj.to_zarr(...)`` takes it:

    azarr.xarray.to_zarr(ds, "s3://bucket/out.zarr", mode="w")
    delayed = azarr.xarray.to_zarr(big, store, compute=False)      # metadata now, data when computed
    azarr.xarray.to_zarr(part, store, region="auto")                # into existing arrays
    await azarr.xarray.to_zarr_async(ds, store, append_dim="time")
"""

from azarr.xarray._backend import AzarrBackendEntrypoint, async_capable, load, open_root
from azarr.xarray._store import AzarrBackendArray, AzarrDataStore
from azarr.xarray._write import to_zarr, to_zarr_async

__all__ = [
    "AzarrBackendArray",
    "AzarrBackendEntrypoint",
    "AzarrDataStore",
    "async_capable",
    "load",
    "open_root",
    "to_zarr",
    "to_zarr_async",
]
