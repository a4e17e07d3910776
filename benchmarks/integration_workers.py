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
from pathlib import Path
from typing import Any


def _obstore(url: str, options: dict[str, Any], *, read_only: bool = True) -> Any:
    """zarr-python's ``ObjectStore`` over obstore's S3 client, for ``url`` on the benchmark's server."""
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
    return ObjectStore(store, read_only=read_only)


def _xr_open(task: dict[str, Any]) -> Any:
    import xarray as xr

    impl, url, options = task["impl"], task["url"], task["storage_options"]
    if impl.startswith("azarr"):
        return xr.open_dataset(url, engine="azarr", storage_options=options, consolidated=True)
    if "obstore" in impl:
        return xr.open_dataset(_obstore(url, options), engine="zarr", consolidated=True)
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


def _admin(task: dict[str, Any], command: str) -> dict[str, Any]:
    """The delay proxy's counters (``reset`` zeroes them); stdlib only, so any venv can ask."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from delay_proxy import admin_command

    return admin_command(task["admin_port"], command)


def _open_tree(task: dict[str, Any], url: str) -> Any:
    import xarray as xr

    impl, options, consolidated = task["impl"], task["storage_options"], task["consolidated"]
    fmt = task.get("zarr_format", 2)  # every implementation is told the format
    if impl.startswith("azarr"):
        return xr.open_datatree(
            url, engine="azarr", storage_options=options, consolidated=consolidated, zarr_format=fmt
        )
    if "obstore" in impl:
        return xr.open_datatree(
            _obstore(url, options), engine="zarr", consolidated=consolidated, zarr_format=fmt
        )
    return xr.open_datatree(
        url, engine="zarr", storage_options=options, consolidated=consolidated, zarr_format=fmt
    )


def xr_open_tree(task: dict[str, Any]) -> dict[str, Any]:
    """``xr.open_datatree`` of a hierarchy (indexes loaded, as xarray does at open), timed and counted."""
    import numpy as np

    _preimport(task["impl"])
    _open_tree(task, task["warmup_url"])
    _admin(task, "reset")
    start = time.perf_counter()
    tree = _open_tree(task, task["url"])
    seconds = time.perf_counter() - start
    counters = _admin(task, "counters")
    check = sum(
        float(np.asarray(index).astype("f8").sum())
        for node in tree.subtree
        for index in node.to_dataset(inherit=False).indexes.values()
    )
    return {
        "seconds": seconds,
        "check": check,
        "requests": counters["requests"],
        "groups": len(list(tree.subtree)),
    }


def _pipeline_datasets(steps: int, n_vars: int, step: int) -> tuple[Any, list[tuple[slice, Any]]]:
    """The template (dask zeros) and the region parts (seeded random data) of the pipeline."""
    import dask.array as da
    import numpy as np
    import xarray as xr

    shape, chunks = (512, 512), (1, 512, 512)
    names = [f"v{i}" for i in range(n_vars)]
    template = xr.Dataset(
        {n: (("time", "y", "x"), da.zeros((steps, *shape), chunks=chunks, dtype="f4")) for n in names},
        coords={"time": np.arange(steps)},
    )
    parts = []
    for k in range(0, steps, step):
        rs = da.random.RandomState(k)
        data = {
            n: (("time", "y", "x"), rs.random_sample((step, *shape), chunks=chunks).astype("f4"))
            for n in names
        }
        parts.append((slice(k, k + step), xr.Dataset(data)))
    return template, parts


def xr_region_pipeline(task: dict[str, Any]) -> dict[str, Any]:
    """Initialise a store with ``to_zarr(compute=False)``, then fill it with region writes
    computed on a dask LocalCluster: xarray's parallel-write pattern, timed and counted."""
    import dask
    import xarray as xr
    from distributed import Client, LocalCluster

    impl, options = task["impl"], task["storage_options"]
    fmt = task.get("zarr_format", 2)
    _preimport(impl)

    def write(ds: Any, url: str, **kwargs: Any) -> Any:
        if impl.startswith("azarr"):
            import azarr.xarray

            return azarr.xarray.to_zarr(ds, url, storage_options=options, zarr_format=fmt, **kwargs)
        if "obstore" in impl:
            return ds.to_zarr(_obstore(url, options, read_only=False), zarr_format=fmt, **kwargs)
        return ds.to_zarr(url, storage_options=options, zarr_format=fmt, **kwargs)

    def pipeline(url: str, steps: int) -> None:
        template, parts = _pipeline_datasets(steps, task["variables"], task["step"])
        encoding = {name: {"chunks": (1, 512, 512)} for name in template.data_vars}
        write(template, url, mode="w", compute=False, encoding=encoding)
        dask.compute(*(write(part, url, region={"time": region}, compute=False) for region, part in parts))

    with (
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=2,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster),
    ):
        pipeline(task["warmup_url"], task["step"])  # untimed: worker imports, first connections
        _admin(task, "reset")
        start = time.perf_counter()
        pipeline(task["url"], task["steps"])
        seconds = time.perf_counter() - start
        counters = _admin(task, "counters")
    if impl.startswith("azarr"):
        back = xr.open_dataset(task["url"], engine="azarr", storage_options=options)
    elif "obstore" in impl:
        back = xr.open_dataset(_obstore(task["url"], options), engine="zarr")
    else:
        back = xr.open_dataset(task["url"], engine="zarr", storage_options=options)
    return {
        "seconds": seconds,
        "check": _checksum(back),
        "requests": counters["requests"],
        "bytes_up": counters["bytes_up"],
    }


TASKS = {
    "xr-load": xr_load,
    "dask-sum": dask_sum,
    "sync-overhead": sync_overhead,
    "xr-open-tree": xr_open_tree,
    "xr-region-pipeline": xr_region_pipeline,
}


def main() -> None:
    task = json.loads(sys.stdin.read())
    result = TASKS[task["task"]](task)
    print(json.dumps({"impl": task["impl"], **result}))


if __name__ == "__main__":
    main()
