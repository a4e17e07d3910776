"""Benchmark worker for bench_xarray.py / bench_dask.py: one timed task per process, any interpreter.

Reads a JSON task on stdin, prints one JSON line ``{"impl": ..., "seconds": ..., "check": ...}``.
Runs in azarr's venv (``azarr*`` impls) or a peer venv (``zarr3*``, ``zarr218``): it imports only
what the task needs.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any


def _xr_open(task: dict[str, Any]) -> Any:
    import xarray as xr

    impl, url, options = task["impl"], task["url"], task["storage_options"]
    if impl.startswith("azarr"):
        return xr.open_dataset(url, engine="azarr", storage_options=options, consolidated=True)
    if impl.startswith("zarr3-obstore"):
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        store = S3Store(
            bucket,
            prefix=prefix,
            endpoint=options["endpoint_url"],
            access_key_id=options["key"],
            secret_access_key=options["secret"],
            region="us-east-1",
            client_options={"allow_http": True},
        )
        return xr.open_dataset(ObjectStore(store, read_only=True), engine="zarr", consolidated=True)
    return xr.open_dataset(url, engine="zarr", storage_options=options, consolidated=True)


def _checksum(ds: Any) -> float:
    return float(sum(float(ds[name].values.astype("f8").sum()) for name in sorted(ds.data_vars)))


def _preimport(impl: str) -> None:
    """Import everything before the clock starts: imports are not what is measured."""
    import xarray  # noqa: F401

    if impl.startswith("azarr"):
        import azarr.xarray  # noqa: F401
    else:
        import s3fs  # noqa: F401
        import zarr
        import zarr.storage  # noqa: F401

        if "obstore" in impl:
            import obstore.store  # noqa: F401


def xr_load(task: dict[str, Any]) -> dict[str, Any]:
    _preimport(task["impl"])
    # One untimed open + load of a small dataset first, in every worker alike (as bench_cloud):
    # lazy imports, thread pools and first-use state are not what is measured.
    _xr_open({**task, "url": task["warmup_url"]}).load()
    start = time.perf_counter()
    ds = _xr_open(task)
    if task["impl"] == "azarr-load":
        import azarr.xarray

        ds = azarr.xarray.load(ds)
    elif task["impl"].endswith("-async"):

        async def load() -> Any:
            return await ds.load_async()

        ds = asyncio.run(load())
    else:
        ds = ds.load()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "check": _checksum(ds)}


def _dask_array(task: dict[str, Any], url: str, chunks: Any = None) -> Any:
    """The array as dask sees it; ``chunks`` None means the Zarr chunks (every implementation's default)."""
    impl, options = task["impl"], task["storage_options"]
    if impl.startswith("azarr"):  # azarr-pool: every read keeps its worker thread (secede=False)
        import azarr.dask

        return azarr.dask.from_azarr(url, chunks=chunks, storage_options=options, secede=impl != "azarr-pool")
    import dask.array as da

    return da.from_zarr(url, chunks=chunks, storage_options=options)


def dask_sum(task: dict[str, Any]) -> dict[str, Any]:
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=task["threads_per_worker"],
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster),
    ):
        # Untimed warm-up on another array: worker imports and first connections are not timed.
        float(_dask_array(task, task["warmup_url"]).sum().compute())
        start = time.perf_counter()
        chunks = tuple(task["chunks"]) if task.get("chunks") else None
        total = float(_dask_array(task, task["url"], chunks).sum(dtype="f8").compute())
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "check": total}


def sync_overhead(task: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    import azarr.sync as zs

    z = zs.array(np.arange(64.0).reshape(8, 8), chunks=(4, 4))
    a = z.async_array
    n = task["calls"]

    async def async_calls() -> float:
        start = time.perf_counter()
        for _ in range(n):
            await a.getitem((1, 2))
        return time.perf_counter() - start

    def sync_calls() -> float:
        start = time.perf_counter()
        for _ in range(n):
            z[1, 2]
        return time.perf_counter() - start

    # Interleaved, best of 5 each: the machine's load drifts, and both sides should see the same.
    asyncio.run(async_calls())
    sync_calls()
    async_s = sync_s = float("inf")
    for _ in range(5):
        async_s = min(async_s, asyncio.run(async_calls()))
        sync_s = min(sync_s, sync_calls())
    return {
        "seconds": sync_s,
        "check": float(z[1, 2]),
        "async_us": async_s / n * 1e6,
        "sync_us": sync_s / n * 1e6,
        "overhead_us": (sync_s - async_s) / n * 1e6,
    }


TASKS = {"xr-load": xr_load, "dask-sum": dask_sum, "sync-overhead": sync_overhead}


def main() -> None:
    task = json.loads(sys.stdin.read())
    result = TASKS[task["task"]](task)
    print(json.dumps({"impl": task["impl"], **result}))


if __name__ == "__main__":
    main()
