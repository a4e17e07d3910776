"""xarray integration: the ``engine="azarr"`` backend and ``to_zarr`` writers (extra ``azarr[xarray]``).

Reading:

    import xarray as xr
    ds = xr.open_dataset("s3://bucket/era5.zarr", engine="azarr", storage_options={"anon": True})
    ds = await ds.load_async()        # every variable at once, under the store's budget
    ds = azarr.xarray.load(ds)        # the same from sync code; ds.load() waits one round trip per variable
    tree = xr.open_datatree("s3://bucket/era5.zarr", engine="azarr")

Writing the Zarr v2 layout xarray + zarr-python 2 write:

    azarr.xarray.to_zarr(ds, "s3://bucket/out.zarr", mode="w", consolidated=True)
    await azarr.xarray.to_zarr_async(ds, store, mode="r+", region={"time": slice(0, 10)})
"""

from azarr.xarray._backend import AzarrBackendEntrypoint, load, open_root
from azarr.xarray._store import AzarrBackendArray, AzarrDataStore
from azarr.xarray._write import encode_dataset, to_zarr, to_zarr_async

__all__ = [
    "AzarrBackendArray",
    "AzarrBackendEntrypoint",
    "AzarrDataStore",
    "encode_dataset",
    "load",
    "open_root",
    "to_zarr",
    "to_zarr_async",
]
