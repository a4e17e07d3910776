"""Sharded Zarr v3 on S3: azarr against zarr-python 3.4 (+ obstore) and TensorStore.

A float32 array (``--size-mib``, default 1 GiB: 16384 x 16384) in shards of 2048 x 2048
(16 MiB) holding inner chunks of 128 x 128 (64 KiB, ``bytes`` + Zstd level 1, index
``bytes`` + ``crc32c`` at the end) on SeaweedFS behind `benchmarks.delay_proxy`
(``--delay-ms``, 20 by default; 0 is "direct", the proxy still counting requests). Every
implementation runs in its own interpreter (`benchmarks.sharding_workers`,
`benchmarks.peers`): azarr; zarr-python 3.4 with obstore and its default pipeline,
``FusedCodecPipeline`` and zarrs; TensorStore ``zarr3``; and raw aiohttp ranged GETs.
``azarr-baseline`` (not in the default list) is the azarr worker importing the ``azarr/`` of
``$AZARR_BASELINE`` (an older checkout) instead, for before/after in one interleaved run.

Operations, each in a fresh process (cold):

Each worker first reads a small sharded array, untimed (first-use work is not timed).

* ``write``: the whole array to a fresh prefix (read back by azarr and checked);
* ``read``: the whole array (the data written once by azarr; every result's MD5 checked);
* ``slab``: rows ``[1000, 1100)`` of every column: two rows of inner chunks in each of a
  row of shards -- one index and one coalesced run per shard for azarr;
* ``random``: ``--random`` distinct inner chunks at random, one selection each,
  ``--concurrency`` at a time, after one untimed read in every shard (so indexes are
  cached where an implementation caches them: azarr's index cache, TensorStore's
  ``cache_pool``); p50/p99 per read and requests per inner chunk, against raw ranged GETs
  of the same bytes.

Every operation also reports the server's and the proxy's CPU, the host's busy cores over it
(the client, SeaweedFS and the proxy share the host's cores) and the proxy's connections.

Run under the heavy gate::

    /work/heavy bench python -m benchmarks.bench_sharding --delay-ms 20
    /work/heavy bench python -m benchmarks.bench_sharding --quick     # 256 MiB, 300 reads

Results: ``benchmarks/results/sharding-<size>mib-<delay>ms.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "sharding_workers.py"
RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ["azarr", "zarr34", "zarr34-fused", "zarr34-zarrs", "tensorstore", "raw"]
PEER_VENV = {"zarr34": "zarr34-zarrs", "zarr34-fused": "zarr34-zarrs", "zarr34-zarrs": "zarr34-zarrs"}
SHARD, INNER = 2048, 128
SLAB = (1000, 1100)
INDEX_CACHE_BYTES = 64 * 2**20
OPS = ("write", "read", "slab", "random")


def _log(msg: str) -> None:
    print(f"[bench-sharding] {msg}", file=sys.stderr, flush=True)


LOCAL = ("azarr", "azarr-baseline", "raw")
"""Implementations run by this interpreter, from this repository (the baseline's azarr ahead)."""


def interpreter(impl: str) -> str:
    if impl in LOCAL:
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENV.get(impl, impl)))


def run_worker(impl: str, task: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.peers import run_worker_json, worker_pythonpath

    # azarr-baseline: the azarr in $AZARR_BASELINE (a checkout of main) for before/after.
    path = worker_pythonpath(impl, ("azarr", "raw"))
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": path}
    return run_worker_json(
        [interpreter(impl), str(WORKER)],
        what=f"{impl} worker",
        task={**task, "impl": impl},
        env=env,
        timeout=3600,
        stderr_chars=4000,
    )


def worker_task(server: Any, proxy: Any, bucket: str, shape: tuple[int, int]) -> dict[str, Any]:
    """What every `benchmarks.sharding_workers` worker is told, before its ``ops``: the proxy's
    endpoint, the bucket, the array's geometry, and the pids whose CPU each op meters."""
    return {
        "endpoint": proxy.url,
        "key": server.key,
        "secret": server.secret,
        "bucket": bucket,
        "admin_port": proxy.admin_port,
        "cpu_pids": {"server": server.process.proc.pid, "proxy": proxy.proc.pid},
        "shape": list(shape),
        "shards": [SHARD, SHARD],
        "chunks": [INNER, INNER],
        "warm_prefix": "warm",
    }


async def _setup(server: Any, bucket: str, shape: tuple[int, int], picks: list[list[int]]) -> dict[str, Any]:
    """Write the shared array with azarr (directly, not through the proxy); the byte ranges of
    the picked inner chunks, read from their shard indexes; the expected MD5."""
    import numpy as np

    import azarr
    from azarr.storage import ByteRange, S3Store
    from benchmarks.cloud_workers import digest, make_data, v3_codecs

    options = {"endpoint_url": server.endpoint_url, "key": server.key, "secret": server.secret}
    store = S3Store(f"{bucket}/data", storage_options=options)
    data = make_data(shape)
    try:
        arr = await azarr.create(
            shape,
            chunks=(INNER, INNER),
            shards=(SHARD, SHARD),
            dtype="<f4",
            store=store,
            zarr_format=3,
            compressors=v3_codecs("zstd")[1:],
            fill_value=0.0,
        )
        await arr.set_basic_selection(..., data)
        warm_store = S3Store(f"{bucket}/warm", storage_options=options)
        warm = await azarr.create(
            (2 * INNER, 2 * INNER),
            chunks=(INNER, INNER),
            shards=(INNER, 2 * INNER),
            dtype="<f4",
            store=warm_store,
            zarr_format=3,
            compressors=v3_codecs("zstd")[1:],
            fill_value=0.0,
        )
        await warm.set_basic_selection(..., data[: 2 * INNER, : 2 * INNER])
        await warm_store.close()
        per = SHARD // INNER
        index_bytes = per * per * 16 + 4
        indexes: dict[tuple[int, int], Any] = {}

        async def index_of(shard: tuple[int, int]) -> Any:
            if shard not in indexes:
                raw = await store.get(f"c/{shard[0]}/{shard[1]}", ByteRange(-index_bytes))
                assert raw is not None
                indexes[shard] = np.frombuffer(raw[:-4], dtype="<u8").reshape(-1, 2)
            return indexes[shard]

        async def byte_range(coords: list[int]) -> list[Any]:
            shard = (coords[0] // per, coords[1] // per)
            local = (coords[0] % per) * per + coords[1] % per
            offset, nbytes = (int(v) for v in (await index_of(shard))[local])
            return [f"c/{shard[0]}/{shard[1]}", offset, offset + nbytes]

        ranges = [await byte_range(c) for c in picks]
        warm = [[s * per, t * per] for s in range(shape[0] // SHARD) for t in range(shape[1] // SHARD)]
        warm_ranges = [await byte_range(c) for c in warm]
        return {"ranges": ranges, "warm": warm, "warm_ranges": warm_ranges, "md5": digest(data)}
    finally:
        await store.close()


async def _check_written(server: Any, bucket: str, prefix: str, expected: str) -> str | None:
    """What azarr reads back from ``prefix`` (directly), as an MD5; None if it matches."""
    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import digest

    options = {"endpoint_url": server.endpoint_url, "key": server.key, "secret": server.secret}
    store = S3Store(f"{bucket}/{prefix}", storage_options=options)
    try:
        arr = await azarr.open_array(store, mode="r")
        got = digest(await arr.get_basic_selection(...))
        return None if got == expected else got
    finally:
        await store.close()


def summarize(reports: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for report in reports:
        for op in report["ops"]:
            cell = out.setdefault(report["impl"], {}).setdefault(op["op"], {"runs": []})
            cell["runs"].append(op)
    for cells in out.values():
        for cell in cells.values():
            runs = [r for r in cell["runs"] if "error" not in r]
            cell["errors"] = [r["error"] for r in cell["runs"] if "error" in r]
            if not runs:
                continue
            cell["median_s"] = statistics.median(r["seconds"] for r in runs)
            cell["median_cpu_s"] = statistics.median(r["cpu_seconds"] for r in runs)
            for name in ("server", "proxy"):
                if all(f"{name}_cpu_seconds" in r for r in runs):
                    cell[f"median_{name}_cpu_s"] = statistics.median(r[f"{name}_cpu_seconds"] for r in runs)
            if all("sys_seconds" in r and r.get("minor_faults") for r in runs):
                cell["median_sys_s"] = statistics.median(r["sys_seconds"] for r in runs)
                cell["median_sys_us_per_fault"] = statistics.median(
                    r["sys_seconds"] / r["minor_faults"] * 1e6 for r in runs
                )
            if all("host_busy_cores" in r for r in runs):
                cell["median_host_busy_cores"] = statistics.median(r["host_busy_cores"] for r in runs)
            cell["median_connections"] = statistics.median(
                (r.get("proxy") or {}).get("connections") or 0 for r in runs
            )
            cell["median_requests"] = statistics.median(
                (r.get("proxy") or {}).get("requests") or 0 for r in runs
            )
            if "latency" in runs[0]:
                cell["p50"] = statistics.median(r["latency"]["p50"] for r in runs)
                cell["p99"] = statistics.median(r["latency"]["p99"] for r in runs)
                cell["count"] = runs[0]["count"]
            if all("gc" in r for r in runs):
                cell["gc"] = [r["gc"] for r in runs]
            cell["digest"] = runs[0].get("digest")
            cell["stats"] = runs[-1].get("stats")
    return out


def markdown(results: dict[str, Any]) -> str:
    cfg, summary = results["config"], results["summary"]
    mib = cfg["size_mib"]
    lines = [
        f"# Sharded Zarr v3 on S3: {mib} MiB float32 {tuple(cfg['shape'])}, shards {SHARD}x{SHARD} "
        f"(16 MiB), inner chunks {INNER}x{INNER} (64 KiB, Zstd 1), +{cfg['delay_ms']:g} ms each way",
        "",
        f"SeaweedFS behind benchmarks/delay_proxy.py; {cfg['rounds']} round(s), medians; ratios are "
        "peer time / azarr time (> 1: azarr faster). Requests are what the proxy counted. "
        f"Versions: {json.dumps(results['versions'])}.",
        "",
    ]
    base = summary.get("azarr", {})
    for op, title in (
        ("write", "full write"),
        ("read", "full read"),
        ("slab", "slab: rows 1000-1100, all columns"),
    ):
        lines += [
            f"## {title}",
            "",
            "| implementation | wall s | MiB/s | client CPU s | server / proxy CPU s | host busy cores "
            "| requests (connections) | peer / azarr |",
        ]
        lines.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for impl in results["impls"]:
            cell = summary.get(impl, {}).get(op)
            if not cell:
                continue
            if "median_s" not in cell:
                lines.append(f"| {impl} | failed: {cell['errors'][0][:120]} | | | | | | |")
                continue
            ref = base.get(op, {}).get("median_s")
            server = (
                f"{cell['median_server_cpu_s']:.2f} / {cell['median_proxy_cpu_s']:.2f}"
                if "median_server_cpu_s" in cell and "median_proxy_cpu_s" in cell
                else ""
            )
            rate = f"{mib / cell['median_s']:.0f}" if op != "slab" else ""
            ratio = f"{cell['median_s'] / ref:.2f}" if ref else ""
            busy = f"{cell['median_host_busy_cores']:.2f}" if "median_host_busy_cores" in cell else ""
            kernel = (
                f" (sys {cell['median_sys_s']:.2f}, {cell['median_sys_us_per_fault']:.1f} us/fault)"
                if "median_sys_us_per_fault" in cell
                else ""
            )
            lines.append(
                f"| {impl} | {cell['median_s']:.2f} | {rate} | {cell['median_cpu_s']:.2f}{kernel} | {server} | {busy} | "
                f"{cell['median_requests']:.0f} ({cell['median_connections']:.0f}) | {ratio} |"
            )
        if op == "slab" and base.get("slab", {}).get("stats"):
            lines += ["", f"azarr's counters for the slab: {json.dumps(base['slab']['stats'])}."]
        lines.append("")
    raw_p99 = summary.get("raw", {}).get("random", {}).get("p99")
    lines += [
        f"## random inner chunks: {cfg['random']} distinct, {cfg['concurrency']} concurrent, indexes warmed",
        "",
        "| implementation | p50 ms | p99 ms | p99 / raw p99 | requests | requests per inner chunk | wall s | "
        "Python GC: collections (gen 0/1/2), full pauses ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for impl in results["impls"]:
        cell = summary.get(impl, {}).get("random")
        if not cell:
            continue
        if "median_s" not in cell:
            lines.append(f"| {impl} | failed: {cell['errors'][0][:120]} | | | | | | |")
            continue
        vs_raw = f"{cell['p99'] / raw_p99:.2f}" if raw_p99 else ""
        lines.append(
            f"| {impl} | {cell['p50'] * 1000:.1f} | {cell['p99'] * 1000:.1f} | {vs_raw} | "
            f"{cell['median_requests']:.0f} | {cell['median_requests'] / cell['count']:.3f} | "
            f"{cell['median_s']:.2f} | {_gc_cell(cell.get('gc'))} |"
        )
    lines += ["", f"Every reader read the expected bytes: {results['same_bytes']}; every write read back "
              f"as written: {results['writes_ok']}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _gc_cell(runs: list[dict[str, Any]] | None) -> str:
    """Each run's collections per generation and its full collections' pauses (TensorStore: none)."""
    if not runs:
        return ""
    return "; ".join(
        "/".join(str(n) for n in r["collections"])
        + (
            " (" + ", ".join(f"{p * 1000:.0f}" for p in r["full_pause_seconds"]) + ")"
            if r["full_pause_seconds"]
            else ""
        )
        for r in runs
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--random", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--quick", action="store_true", help="256 MiB, 300 random reads")
    parser.add_argument("--tag", default="")
    parser.add_argument(
        "--output-dir", type=Path, default=RESULTS, help="where the .json and .md go (default: results/)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.size_mib, args.random = 256, 300
    impls, ops = args.impls.split(","), args.ops.split(",")
    side = math.isqrt(args.size_mib * 2**20 // 4)
    side -= side % SHARD
    shape = (side, side)

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs

    from benchmarks.delay_proxy import DelayProxy

    grid = side // INNER
    picks = [[i // grid, i % grid] for i in random.Random(7).sample(range(grid * grid), args.random)]
    server = start_seaweedfs()
    proxy = None
    try:
        bucket = server.create_bucket("azarr-bench-shards")
        _log(f"writing {shape} float32 ({side * side * 4 / 2**20:.0f} MiB) sharded ...")
        setup = asyncio.run(_setup(server, bucket, shape, picks))
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        task = worker_task(server, proxy, bucket, shape)
        op_specs = {
            "read": {"op": "read", "prefix": "data"},
            "slab": {"op": "slab", "prefix": "data", "rows": list(SLAB)},
            "random": {
                "op": "random",
                "prefix": "data",
                "chunks": picks,
                "warm": setup["warm"],
                "ranges": setup["ranges"],
                "warm_ranges": setup["warm_ranges"],
                "concurrency": args.concurrency,
                "index_cache_bytes": INDEX_CACHE_BYTES,
            },
        }
        reports = []
        writes_ok = True
        for round_ in range(args.rounds):
            order = impls[round_ % len(impls) :] + impls[: round_ % len(impls)]
            for impl in order:
                names = ["random"] if impl == "raw" else ops
                for name in names:
                    if name not in ops:
                        continue
                    spec = op_specs.get(name) or {"op": "write", "prefix": f"w-{impl}-{round_}"}
                    started = time.perf_counter()
                    report = run_worker(impl, {**task, "ops": [spec]})
                    reports.append(report)
                    result = report["ops"][0]
                    if name == "write" and "error" not in result:
                        bad = asyncio.run(_check_written(server, bucket, spec["prefix"], setup["md5"]))
                        result["read_back_ok"] = bad is None
                        writes_ok &= bad is None
                    _log(
                        f"round {round_ + 1} {impl} {name}: "
                        + (
                            result["error"][:300]
                            if "error" in result
                            else f"{result['seconds']:.2f} s, {(result.get('proxy') or {}).get('requests')} req"
                        )
                        + f" ({time.perf_counter() - started:.0f} s)"
                    )
        summary = summarize(reports)
        digests = {
            cells["read"]["digest"] for cells in summary.values() if cells.get("read", {}).get("digest")
        }
        results = {
            "config": {
                "size_mib": args.size_mib,
                "shape": list(shape),
                "delay_ms": args.delay_ms,
                "rounds": args.rounds,
                "random": args.random,
                "concurrency": args.concurrency,
            },
            "impls": impls,
            "versions": {r["impl"]: r["versions"] for r in reports},
            "summary": {
                impl: {op: {k: v for k, v in c.items() if k != "runs"} for op, c in cells.items()}
                for impl, cells in summary.items()
            },
            "same_bytes": digests <= {setup["md5"]},
            "writes_ok": writes_ok,
            "reports": reports,
        }
        name = f"sharding-{args.size_mib}mib-{args.delay_ms:g}ms{'-' + args.tag if args.tag else ''}"
        args.output_dir.mkdir(parents=True, exist_ok=True)
        (args.output_dir / f"{name}.json").write_text(json.dumps(results, indent=1))
        (args.output_dir / f"{name}.md").write_text(markdown(results))
        print(markdown(results))
        return 0 if results["same_bytes"] and writes_ok else 1
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
