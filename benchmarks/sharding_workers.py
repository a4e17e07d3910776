"""Workers for `benchmarks.bench_sharding`: one implementation, timed operations on a sharded
Zarr v3 array on S3, JSON out.

    python benchmarks/sharding_workers.py < task.json > result.json

Implementations (``impl``):

``azarr``
    ``azarr.S3Store`` (its aiohttp transport), the async API.
``zarr34`` / ``zarr34-fused`` / ``zarr34-zarrs``
    zarr-python 3.4's async API over obstore (``zarr.storage.ObjectStore``) with its default
    ``BatchedCodecPipeline``, its ``FusedCodecPipeline`` and the zarrs (Rust) pipeline.
``tensorstore``
    TensorStore's ``zarr3`` driver on its ``s3`` kvstore; a ``cache_pool`` of
    ``index_cache_bytes`` for the random reads (it caches shard indexes there, as azarr does
    in its index cache; the reads are of distinct inner chunks, so cached data serves none).
``raw``
    aiohttp ranged GETs of the inner chunks' bytes (ranges given by the driver, read from
    the shard indexes): the path's floor for a random inner-chunk read.

Before each operation a small sharded array (``warm_prefix``) is read whole, untimed.
Operations (``op``): ``write`` (generate the data, untimed; create at a fresh prefix and
write it whole), ``read`` (cold: open, ``arr[...]``), ``slab`` (cold: open, rows
``[r0, r1)`` of every column: a band crossing a row of shards), ``random`` (open, read one
element of every shard untimed -- indexes cached where the implementation caches them --
then each of ``chunks`` (inner chunk grid coordinates) as one selection, ``concurrency``
asyncio tasks; per-read latency). Each records wall and CPU seconds and the HTTP requests the
delay proxy counted while it ran (for ``random``, the timed part only). Only the standard
library and NumPy at module level (the peers' venvs import this file).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cloud_workers import (
    GCMeter,
    _versions,
    digest,
    latency_summary,
    make_data,
    process_cpu,
    run_concurrent_async,
    v3_codecs,
    zarr_obstore,
)
from delay_proxy import admin_command

Sel = tuple[slice, ...]


def inner_region(coords: list[int], chunks: list[int]) -> Sel:
    return tuple(slice(c * n, (c + 1) * n) for c, n in zip(coords, chunks, strict=True))


# ---------------------------------------------------------------------- azarr
class Azarr:
    modules = ("azarr", "numpy", "aiohttp")

    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

    def store(self, prefix: str, read_only: bool = True) -> Any:
        from azarr.storage import S3Store

        options = {
            "endpoint_url": self.task["endpoint"],
            "key": self.task["key"],
            "secret": self.task["secret"],
        }
        return S3Store(f"{self.task['bucket']}/{prefix}", storage_options=options, read_only=read_only)

    async def open(self, prefix: str) -> Any:
        import azarr

        self._store = self.store(prefix)
        # The format is known, as the zarr-python peer says zarr_format=3: zarr.json alone.
        return await azarr.open_array(self._store, mode="r", zarr_format=3)

    async def get(self, arr: Any, sel: Any) -> Any:
        return await arr.get_basic_selection(sel)

    async def write(self, prefix: str, data: np.ndarray) -> None:
        import azarr

        store = self.store(prefix, read_only=False)
        try:
            arr = await azarr.create(
                data.shape,
                chunks=tuple(self.task["chunks"]),
                shards=tuple(self.task["shards"]),
                dtype=data.dtype,
                store=store,
                zarr_format=3,
                compressors=v3_codecs("zstd")[1:],
                fill_value=0.0,
            )
            await arr.set_basic_selection(..., data)
        finally:
            await store.close()

    async def close(self) -> None:
        await self._store.close()

    def stats(self) -> dict[str, Any]:
        from azarr.scheduler import stats_for

        stats = stats_for(self._store).as_dict()
        names = (
            "requests",
            "shard_index_hits",
            "shard_index_misses",
            "coalesced_requests",
            "requests_saved",
            "concurrency_limit",  # the adaptive request limit at the end, and its lowest
            "concurrency_limit_min",
            "retries",
        )
        return {k: stats.get(k) for k in names}


# ---------------------------------------------------------------------- zarr-python 3.4
class Zarr34:
    modules = ("zarr", "numcodecs", "numpy", "obstore", "zarrs")
    pipeline: str | None = None

    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task
        import zarr

        if self.pipeline:
            zarr.config.set({"codec_pipeline.path": self.pipeline})

    def store(self, prefix: str, read_only: bool = True) -> Any:
        return zarr_obstore(self.task, self.task["bucket"], prefix, read_only)

    async def open(self, prefix: str) -> Any:
        import zarr.api.asynchronous as za

        return await za.open_array(store=self.store(prefix), mode="r", zarr_format=3)

    async def get(self, arr: Any, sel: Any) -> Any:
        return await arr.getitem(sel)

    async def write(self, prefix: str, data: np.ndarray) -> None:
        import zarr.api.asynchronous as za

        codecs = v3_codecs("zstd")
        arr = await za.create_array(
            store=self.store(prefix, read_only=False),
            shape=data.shape,
            chunks=tuple(self.task["chunks"]),
            shards=tuple(self.task["shards"]),
            dtype=data.dtype,
            zarr_format=3,
            serializer=codecs[0],
            compressors=codecs[1:],
            filters=None,
            fill_value=0.0,
        )
        await arr.setitem(slice(None), data)

    async def close(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}


class Zarr34Fused(Zarr34):
    pipeline = "zarr.core.codec_pipeline.FusedCodecPipeline"


class Zarr34Zarrs(Zarr34):
    pipeline = "zarrs.ZarrsCodecPipeline"


# ---------------------------------------------------------------------- TensorStore
class TensorStore:
    modules = ("tensorstore", "numpy")

    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task
        os.environ["AWS_ACCESS_KEY_ID"] = task["key"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = task["secret"]
        self.context_spec: dict[str, Any] = {}

    def spec(self, prefix: str) -> dict[str, Any]:
        return {
            "driver": "zarr3",
            "kvstore": {
                "driver": "s3",
                "bucket": self.task["bucket"],
                "path": f"{prefix}/",
                "endpoint": self.task["endpoint"],
                "aws_region": "us-east-1",
                "aws_credentials": {"type": "environment"},
            },
        }

    async def open(self, prefix: str) -> Any:
        import tensorstore as ts

        return await ts.open(self.spec(prefix), read=True, context=ts.Context(self.context_spec))

    async def get(self, arr: Any, sel: Any) -> Any:
        return await arr[sel].read()

    async def write(self, prefix: str, data: np.ndarray) -> None:
        import tensorstore as ts

        spec = self.spec(prefix)
        spec["metadata"] = {
            "shape": list(data.shape),
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.task["shards"])}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0.0,
            "codecs": [
                {
                    "name": "sharding_indexed",
                    "configuration": {
                        "chunk_shape": list(self.task["chunks"]),
                        "codecs": v3_codecs("zstd"),
                        "index_codecs": [
                            {"name": "bytes", "configuration": {"endian": "little"}},
                            {"name": "crc32c"},
                        ],
                        "index_location": "end",
                    },
                }
            ],
        }
        arr = await ts.open(spec, create=True, context=ts.Context())
        await arr.write(data)

    async def close(self) -> None:
        pass

    def stats(self) -> dict[str, Any]:
        return {}


# ---------------------------------------------------------------------- raw ranged GETs
class Raw:
    """Anonymous aiohttp ranged GETs (the benchmark server lets the anonymous identity read)."""

    modules = ("aiohttp", "numpy")

    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task

    async def random(self, op: dict[str, Any]) -> tuple[list[float], float, dict[str, Any] | None]:
        import aiohttp

        base = f"{self.task['endpoint']}/{self.task['bucket']}/{op['prefix']}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=op["concurrency"])) as session:

            async def get(item: Any) -> Any:
                key, start, stop = item
                headers = {"Range": f"bytes={start}-{stop - 1}"}
                async with session.get(f"{base}/{key}", headers=headers) as response:
                    body = await response.read()
                    if response.status != 206 or len(body) != stop - start:
                        raise RuntimeError(f"GET {key} {start}-{stop}: {response.status}, {len(body)} bytes")
                    return np.frombuffer(body, dtype="u1")

            warm = [tuple(r) for r in op["warm_ranges"]]
            await run_concurrent_async(get, warm, min(op["concurrency"], len(warm)))
            admin_command(self.task["admin_port"], "reset")
            ranges = [tuple(r) for r in op["ranges"]]
            with GCMeter() as meter:
                latencies, checksum = await run_concurrent_async(get, ranges, op["concurrency"])
            self.gc = meter.report()
            return latencies, checksum, admin_command(self.task["admin_port"], "counters")


IMPLS: dict[str, Any] = {
    "azarr": Azarr,
    "azarr-baseline": Azarr,  # the azarr in $AZARR_BASELINE (bench_sharding puts it on the path)
    "zarr34": Zarr34,
    "zarr34-fused": Zarr34Fused,
    "zarr34-zarrs": Zarr34Zarrs,
    "tensorstore": TensorStore,
    "raw": Raw,
}
IMPORTS = {
    "azarr": ("azarr", "azarr.storage._s3_transport", "aiohttp"),
    "azarr-baseline": ("azarr", "azarr.storage._s3_transport", "aiohttp"),
    "zarr34": ("zarr", "zarr.api.asynchronous", "zarr.storage", "obstore.store"),
    "zarr34-fused": ("zarr", "zarr.api.asynchronous", "zarr.storage", "obstore.store"),
    "zarr34-zarrs": ("zarr", "zarr.api.asynchronous", "zarr.storage", "obstore.store", "zarrs"),
    "tensorstore": ("tensorstore",),
    "raw": ("aiohttp",),
}


def host_cpu() -> tuple[int, int]:
    """All CPU time of the host so far and its idle part, in clock ticks (``/proc/stat``)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks), ticks[3] + ticks[4]  # idle + iowait


class Meter:
    """The server's and the proxy's CPU seconds and the host's busy cores over a timed
    operation: the client, SeaweedFS and the proxy share the host's cores, so a client that
    leaves a core idle and one that waits for a core show the same wall time, and these
    tell them apart."""

    def __init__(self, task: dict[str, Any]) -> None:
        self.pids = task.get("cpu_pids") or {}
        self.start()

    def start(self) -> None:
        self.cpu = {name: process_cpu(pid) for name, pid in self.pids.items()}
        self.host = host_cpu()
        self.client = resource.getrusage(resource.RUSAGE_SELF)

    def stop(self, out: dict[str, Any]) -> None:
        for name, pid in self.pids.items():
            out[f"{name}_cpu_seconds"] = process_cpu(pid) - self.cpu[name]
        # The client's kernel time and page faults: on the benchmark VM the cost of a fault
        # moves with the host 2-3x (benchmarks/README.md, "Reads that cost more").
        client = resource.getrusage(resource.RUSAGE_SELF)
        out["sys_seconds"] = client.ru_stime - self.client.ru_stime
        out["minor_faults"] = client.ru_minflt - self.client.ru_minflt
        total, idle = host_cpu()
        span = total - self.host[0]
        if span > 0:
            out["host_busy_cores"] = (os.cpu_count() or 1) * (span - (idle - self.host[1])) / span


async def run_op(impl: Any, task: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
    admin = task["admin_port"]
    out: dict[str, Any] = {
        k: v for k, v in op.items() if k not in ("chunks", "ranges", "warm", "warm_ranges")
    }
    kind = op["op"]
    if task.get("warm_prefix") and not isinstance(impl, Raw):
        # An untimed read of a small sharded array first: no implementation is timed doing
        # its first-use work (thread pools, sessions, lazily built state), as bench_cloud.
        warm = await impl.open(task["warm_prefix"])
        try:
            await impl.get(warm, (slice(None),) * len(task["shape"]))
        finally:
            await impl.close()
    if kind == "random" and isinstance(impl, Raw):
        t0, c0 = time.perf_counter(), time.process_time()
        latencies, checksum, proxy = await impl.random(op)
        out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
        out.update(latency=latency_summary(latencies), count=len(latencies), proxy=proxy, gc=impl.gc)
        return out
    if kind == "write":
        data = make_data(tuple(task["shape"]))
        admin_command(admin, "reset")
        meter = Meter(task)
        t0, c0 = time.perf_counter(), time.process_time()
        await impl.write(op["prefix"], data)
        out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
        meter.stop(out)
        out["proxy"] = admin_command(admin, "counters")
        out["nbytes"] = int(data.nbytes)
        return out
    if kind == "random" and isinstance(impl, TensorStore):
        impl.context_spec = {"cache_pool": {"total_bytes_limit": int(op["index_cache_bytes"])}}
    admin_command(admin, "reset")
    meter = Meter(task)
    t0, c0 = time.perf_counter(), time.process_time()
    arr = await impl.open(op["prefix"])
    try:
        if kind == "read":
            result = await impl.get(arr, (slice(None),) * len(task["shape"]))
        elif kind == "slab":
            r0, r1 = op["rows"]
            result = await impl.get(arr, (slice(r0, r1), slice(None)))
        elif kind == "random":
            chunks = task["chunks"]
            warm = [inner_region(c, chunks) for c in op["warm"]]
            await run_concurrent_async(lambda s: impl.get(arr, s), warm, min(op["concurrency"], len(warm)))
            if hasattr(impl, "_store"):
                from azarr.scheduler import stats_for

                stats_for(impl._store).reset()
            admin_command(admin, "reset")
            meter.start()
            t0, c0 = time.perf_counter(), time.process_time()
            sels = [inner_region(c, chunks) for c in op["chunks"]]
            with GCMeter() as gc_meter:
                latencies, checksum = await run_concurrent_async(
                    lambda s: impl.get(arr, s), sels, op["concurrency"]
                )
            out.update(latency=latency_summary(latencies), count=len(latencies), checksum=round(checksum, 3))
            out["gc"] = gc_meter.report()
            result = None
        else:
            raise ValueError(f"unknown op {kind!r}")
        out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
        meter.stop(out)
        out["proxy"] = admin_command(admin, "counters")
        out["stats"] = impl.stats()
    finally:
        await impl.close()
    if result is not None:
        out["digest"] = digest(result)  # not timed
    return out


def main() -> int:
    task = json.loads(sys.stdin.read())
    name = task["impl"]
    for module in IMPORTS[name]:  # imports are not part of any operation's time
        importlib.import_module(module)
    impl = IMPLS[name](task)
    reports = []
    for op in task["ops"]:
        t0 = time.perf_counter()
        try:
            reports.append(asyncio.run(run_op(impl, task, op)))
        except Exception as exc:  # report and go on: one failing op must not hide the others
            failed = {k: v for k, v in op.items() if k not in ("chunks", "ranges", "warm", "warm_ranges")}
            failed.update(error=f"{type(exc).__name__}: {exc}"[:2000], seconds=time.perf_counter() - t0)
            reports.append(failed)
    print(json.dumps({"impl": name, "versions": _versions(impl.modules), "ops": reports}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
