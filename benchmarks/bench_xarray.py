"""xarray benchmark: ``engine="azarr"`` vs xarray's ``zarr`` engine on zarr-python 3.1, on S3 with latency.

The same path as `benchmarks.bench_cloud`: SeaweedFS on 127.0.0.1 behind
`benchmarks.delay_proxy` (``--delay-ms`` each way, default 20). A dataset of
``--variables`` float32 variables (1 MiB chunks, Blosc-lz4, consolidated) is written
once by ``azarr.xarray.to_zarr`` directly to SeaweedFS; then each implementation, in
its own fresh interpreter (`benchmarks.integration_workers`), after one untimed
open + load of a one-variable dataset (imports, pools, first-use state), times
``xr.open_dataset(...).load()`` (and ``await ds.load_async()``) through the proxy:

==================  ==========================================================
``azarr``           ``engine="azarr"``, ``ds.load()`` (sync facade)
``azarr-load``      ``engine="azarr"``, ``azarr.xarray.load(ds)`` (sync, all variables at once)
``azarr-async``     ``engine="azarr"``, ``await ds.load_async()``
``zarr3``           xarray ``engine="zarr"``, zarr 3.1 ``FsspecStore`` + s3fs, ``ds.load()``
``zarr3-async``     the same, ``await ds.load_async()``
``zarr3-obstore``   xarray ``engine="zarr"`` on zarr 3.1 ``ObjectStore`` + obstore
==================  ==========================================================

It also measures the sync facade's overhead per one-element read (memory store).
Every result's checksum must match azarr's. Implementations run interleaved for
``--rounds`` rounds; medians are reported. Peer venvs come from
`benchmarks.peers` (`benchmarks.integration_peers`).

Usage::

    python -m benchmarks.bench_xarray --quick     # 20 x 4 MiB, 1 round
    python -m benchmarks.bench_xarray             # 20 variables, 1 GiB in all, 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "integration_workers.py"
RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ("azarr", "azarr-load", "azarr-async", "zarr3", "zarr3-async", "zarr3-obstore")


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def interpreter(impl: str) -> str:
    """azarr's own python for azarr impls, else the peer venv's (built on first use)."""
    if impl.startswith("azarr"):
        return sys.executable
    import benchmarks.integration_peers  # noqa: F401 - registers the peers
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python("dask-zarr218" if impl == "zarr218" else "xarray-zarr3"))


def run_worker(
    impl: str, task: dict[str, Any], timeout: float = 1800, python: str | None = None
) -> dict[str, Any]:
    """Run one task in ``python`` (default: `interpreter` of ``impl``); its JSON report."""
    env = {
        **os.environ,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": str(REPO_ROOT) if impl.startswith("azarr") else "",
    }
    proc = subprocess.run(
        [python or interpreter(impl), str(WORKER)],
        input=json.dumps({**task, "impl": impl}),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith('{"impl"')]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{impl} worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(lines[-1])
    return report


@contextmanager
def s3_behind_delay(delay_ms: float) -> Iterator[tuple[Any, Any, str]]:
    """(SeaweedFS server, delay proxy, bucket) for the duration of the block."""
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    from benchmarks.delay_proxy import DelayProxy

    server = start_seaweedfs()
    proxy = None
    try:
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=delay_ms)
        yield server, proxy, server.create_bucket("azarr-bench")
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


def proxied_options(server: Any, proxy: Any) -> dict[str, Any]:
    return {**server.storage_options, "endpoint_url": proxy.url}


def write_dataset(server: Any, url: str, n_vars: int, mib_per_var: int) -> None:
    import numpy as np
    import xarray as xr

    import azarr.xarray

    rng = np.random.default_rng(0)
    shape = (mib_per_var, 512, 512)  # float32: 1 MiB per (1, 512, 512) chunk
    data = {
        f"v{i:02d}": (("t", "y", "x"), rng.standard_normal(shape, dtype="f4"), {"units": "K"})
        for i in range(n_vars)
    }
    ds = xr.Dataset(data, coords={"t": np.arange(shape[0])})
    encoding = {name: {"chunks": (1, 512, 512)} for name in data}
    azarr.xarray.to_zarr(ds, url, mode="w", encoding=encoding, storage_options=server.storage_options)


def summarize(reports: list[dict[str, Any]]) -> dict[str, float]:
    by_impl: dict[str, list[float]] = {}
    for r in reports:
        by_impl.setdefault(r["impl"], []).append(r["seconds"])
    return {impl: statistics.median(v) for impl, v in by_impl.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="20 variables x 4 MiB, 1 round")
    parser.add_argument("--variables", type=int, default=20)
    parser.add_argument("--mib-per-variable", type=int, default=52)
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--impls", default=",".join(IMPLS))
    args = parser.parse_args(argv)
    if args.quick:
        args.mib_per_variable = 4
        args.rounds = args.rounds or 1
    args.rounds = args.rounds or 3
    impls = args.impls.split(",")
    for impl in impls:
        interpreter(impl)  # build peer venvs before the servers start

    overhead = run_worker("azarr", {"task": "sync-overhead", "calls": 2000})
    log(
        f"sync overhead per one-element read: {overhead['overhead_us']:.1f} us "
        f"(sync {overhead['sync_us']:.1f} us, async {overhead['async_us']:.1f} us)"
    )
    reports: list[dict[str, Any]] = []
    failures: dict[str, str] = {}
    with s3_behind_delay(args.delay_ms) as (server, proxy, bucket):
        url = f"s3://{bucket}/ds.zarr"
        total = args.variables * args.mib_per_variable
        log(f"writing {args.variables} variables, {total} MiB with azarr.xarray.to_zarr ...")
        write_dataset(server, url, args.variables, args.mib_per_variable)
        warmup = f"s3://{bucket}/warmup.zarr"
        write_dataset(server, warmup, 1, 1)
        task = {
            "task": "xr-load",
            "url": url,
            "warmup_url": warmup,
            "storage_options": proxied_options(server, proxy),
        }
        for round_ in range(args.rounds):
            for impl in impls:
                try:
                    report = run_worker(impl, task)
                except RuntimeError as exc:  # a peer that cannot do this at all is a result too
                    failures[impl] = str(exc).strip().splitlines()[-1][:300]
                    log(f"round {round_ + 1} {impl}: FAILED {failures[impl]}")
                    continue
                log(f"round {round_ + 1} {impl}: {report['seconds']:.2f} s")
                reports.append(report)
    checks = {r["impl"]: r["check"] for r in reports}
    mismatched = {
        k: v for k, v in checks.items() if abs(v - checks[impls[0]]) > 1e-3 * abs(checks[impls[0]]) + 1e-3
    }
    if mismatched:
        raise SystemExit(f"checksums differ from {impls[0]}'s: {mismatched} vs {checks[impls[0]]}")
    medians = summarize(reports)
    result = {
        "quick": args.quick,
        "variables": args.variables,
        "mib": args.variables * args.mib_per_variable,
        "delay_ms": args.delay_ms,
        "rounds": args.rounds,
        "seconds": medians,
        "sync_overhead_us": overhead["overhead_us"],
        "failed": failures,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg_1min_after": os.getloadavg()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / ("xarray-quick.json" if args.quick else "xarray.json")).write_text(
        json.dumps(result, indent=1)
    )
    base = medians.get("zarr3")
    for impl, s in medians.items():
        ratio = f"  ({base / s:.2f}x zarr3)" if base else ""
        print(f"{impl:15s} {s:7.2f} s  {result['mib'] / s:8.1f} MiB/s{ratio}")
    for impl, why in failures.items():
        print(f"{impl:15s} failed: {why}")
    print(f"sync facade overhead per one-element read: {overhead['overhead_us']:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
