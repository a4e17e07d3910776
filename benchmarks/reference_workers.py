"""Workers for `benchmarks.bench_references`: one implementation reading a NetCDF4 file on S3
through a kerchunk reference set (or directly), timed operations, JSON out.

    python benchmarks/reference_workers.py < task.json > result.json

Implementations (``impl``):

``azarr``
    ``azarr.open_array("s3://bucket/refs.json", path=VAR)``: the `ReferenceStore`, chunks
    read through the bucket's `S3Store` with neighbouring ranges coalesced.
``zarr34-reffs``
    fsspec's ``ReferenceFileSystem`` (``reference://`` with ``remote_protocol="s3"``) under
    zarr-python 3.4's ``FsspecStore``: what kerchunk's and VirtualiZarr's docs show.
``h5netcdf-s3fs``
    h5netcdf (h5py) reading the file itself through an s3fs file object (default
    ``readahead`` cache): no reference set at all.

Operations: ``whole`` (a cold open and ``arr[...]``), ``slab`` (a cold open and
``arr[:stop]``: a block of neighbouring chunks in one call), ``column`` (``arr[:, :, :width]``:
one chunk in eight, spaced by the other seven, in one call) and ``subset`` (a cold open, then the
given chunks, each one selection, ``concurrency`` at a time: asyncio tasks for the async
APIs, threads for h5netcdf). Each records wall seconds, the worker's CPU seconds
(``time.process_time()``, all threads) and the HTTP requests the delay proxy counted while
it ran; an MD5 of what was read (computed after the timing) lets the driver check every implementation
read the same bytes. Only the standard library and NumPy at module level.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import json
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from delay_proxy import admin_command


def digest_parts(parts: list[np.ndarray]) -> str:
    """MD5 over the C-order bytes of ``parts`` in order."""
    h = hashlib.md5()
    for part in parts:
        h.update(memoryview(np.ascontiguousarray(part)).cast("B"))
    return h.hexdigest()


def region(coords: list[int], chunks: list[int]) -> tuple[slice, ...]:
    return tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks, strict=True))


def s3_options(task: dict[str, Any]) -> dict[str, Any]:
    return {"endpoint_url": task["endpoint"], "key": task["key"], "secret": task["secret"]}


# ---------------------------------------------------------------------- azarr
async def azarr_op(task: dict[str, Any], op: dict[str, Any]) -> list[Any]:
    import azarr

    azarr.config.set(**task.get("azarr_settings", {}))
    options = s3_options(task)
    arr = await azarr.open_array(
        f"s3://{task['bucket']}/{task['refs_key']}",
        path=task["var"],
        mode="r",
        storage_options={**options, "remote_options": options},
    )
    try:
        if op["op"] == "whole":
            return [await arr.getitem(...)]
        if op["op"] == "slab":
            return [await arr.getitem(slice(0, op["stop"]))]
        if op["op"] == "column":
            return [await arr.getitem((slice(None), slice(None), slice(0, op["width"])))]
        chunks = list(arr.chunks)
        results = await asyncio.gather(*(arr.getitem(region(c, chunks)) for c in op["chunks"]))
        return list(results)
    finally:
        await arr.store.close()


# ---------------------------------------------------------------------- zarr 3.4 + ReferenceFileSystem
async def zarr_reffs_op(task: dict[str, Any], op: dict[str, Any]) -> list[Any]:
    import zarr
    from zarr.storage import FsspecStore

    options = s3_options(task)
    store = FsspecStore.from_url(
        "reference://",
        storage_options={
            "fo": f"s3://{task['bucket']}/{task['refs_key']}",
            "target_protocol": "s3",
            "target_options": options,
            "remote_protocol": "s3",
            # zarr's FsspecStore makes the reference filesystem asynchronous; its remote
            # filesystem must be too (fsspec refuses a mix).
            # A new filesystem per operation: each runs in its own asyncio.run.
            "remote_options": {**options, "asynchronous": True, "skip_instance_cache": True},
            "skip_instance_cache": True,
        },
        read_only=True,
    )
    arr = await zarr.api.asynchronous.open_array(store=store, path=task["var"], zarr_format=2, mode="r")
    return await limited_op(arr, op)


async def limited_op(arr: Any, op: dict[str, Any]) -> list[Any]:
    """One operation on an async array (zarr-python's), the subset ``concurrency`` calls at a time."""
    if op["op"] == "whole":
        return [await arr.getitem(...)]
    if op["op"] == "slab":
        return [await arr.getitem(slice(0, op["stop"]))]
    if op["op"] == "column":
        return [await arr.getitem((slice(None), slice(None), slice(0, op["width"])))]
    chunks = list(arr.chunks)
    limit = asyncio.Semaphore(op["concurrency"])

    async def one(c: list[int]) -> Any:
        async with limit:
            return await arr.getitem(region(c, chunks))

    return list(await asyncio.gather(*(one(c) for c in op["chunks"])))


# ---------------------------------------------------------------------- h5netcdf over s3fs
def h5netcdf_op(task: dict[str, Any], op: dict[str, Any]) -> list[Any]:
    import h5netcdf
    import s3fs

    fs = s3fs.S3FileSystem(**s3_options(task), skip_instance_cache=True)
    with fs.open(f"{task['bucket']}/{task['nc_key']}", "rb") as fh, h5netcdf.File(fh, "r") as ds:
        var = ds[task["var"]]
        if op["op"] == "whole":
            return [var[...]]
        if op["op"] == "slab":
            return [var[0 : op["stop"]]]
        if op["op"] == "column":
            return [var[:, :, 0 : op["width"]]]
        chunks = list(var.chunks)
        # h5py holds one lock per file: the threads take turns, as they would in a service.
        with ThreadPoolExecutor(op["concurrency"]) as pool:
            return list(pool.map(lambda c: var[region(c, chunks)], op["chunks"]))


IMPLS: dict[str, tuple[Callable[..., Any], bool]] = {
    "azarr": (azarr_op, True),
    "zarr34-reffs": (zarr_reffs_op, True),
    "h5netcdf-s3fs": (h5netcdf_op, False),
}
MODULES = {
    # Whatever each path imports on first use is imported before the first timing.
    "azarr": ("azarr", "numpy", "azarr.storage._s3_transport", "s3fs", "aiohttp"),
    "zarr34-reffs": ("zarr", "fsspec", "s3fs", "numpy", "fsspec.implementations.reference", "zarr.storage"),
    "h5netcdf-s3fs": ("h5netcdf", "h5py", "s3fs", "numpy"),
}


def main() -> None:
    task = json.loads(sys.stdin.read())
    impl = task["impl"]
    fn, is_async = IMPLS[impl]
    for module in MODULES[impl]:  # imports are not part of any operation's time
        importlib.import_module(module)
    reports = []
    for op in task["ops"]:
        admin_command(task["admin_port"], "reset")
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = asyncio.run(fn(task, op)) if is_async else fn(task, op)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        counters = admin_command(task["admin_port"], "counters")
        result = digest_parts(result)  # not timed
        reports.append(
            {**{k: v for k, v in op.items() if k != "chunks"}, "nchunks": len(op.get("chunks", [])),
             "seconds": seconds, "cpu_seconds": cpu, "requests": counters["requests"],
             "bytes": counters.get("bytes_down") or counters.get("bytes_from_upstream"), "md5": result}
        )  # fmt: skip
    versions = {m: importlib.metadata.version(m) for m in MODULES[impl] if "." not in m}
    print(json.dumps({"impl": impl, "versions": versions, "ops": reports}))


if __name__ == "__main__":
    main()
