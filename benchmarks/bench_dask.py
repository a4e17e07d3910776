"""dask benchmark: the sum of an S3 array on a 2-process dask.distributed cluster, ``azarr.dask.from_azarr``
vs ``da.from_zarr`` on zarr-python 2.18 and 3.1.

Same path as `benchmarks.bench_xarray` (SeaweedFS behind the delay proxy). One float32 array
(1 MiB chunks, Blosc-lz4) is written once by azarr; each implementation, in its own interpreter
(`benchmarks.integration_workers`), starts ``LocalCluster(n_workers=2, processes=True)``,
makes one untimed warm-up sum of a small array (worker imports, first connections), then times
``x.sum().compute()`` with dask chunks = Zarr chunks (``--zarr-chunks-per-task N``: N Zarr chunks
per dask chunk along axis 0, for every implementation). Sums must agree. ``--impls`` may add
``azarr-pool``: ``from_azarr(..., secede=False)``, every read keeping its worker thread.

Usage::

    python -m benchmarks.bench_dask --quick    # 128 MiB, 1 round
    python -m benchmarks.bench_dask --quick --size-mib 256 --rounds 3 --impls azarr,azarr-pool,zarr218,zarr3
    python -m benchmarks.bench_dask            # 1 GiB, 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from benchmarks.bench_xarray import RESULTS, log, proxied_options, run_worker, s3_behind_delay, summarize

IMPLS = ("azarr", "zarr218", "zarr3")


def write_array(server: Any, url: str, mib: int) -> None:
    import numpy as np

    import azarr.sync as zs

    z = zs.create(
        (mib * 512, 512),
        chunks=(512, 512),
        dtype="f4",
        store=url,
        storage_options=server.storage_options,
        overwrite=True,
    )
    rng = np.random.default_rng(0)
    for start in range(0, z.shape[0], 64 * 512):  # 64 MiB at a time
        block = rng.standard_normal((min(64 * 512, z.shape[0] - start), 512), dtype="f4")
        z[start : start + block.shape[0]] = block


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="128 MiB, 1 round")
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--threads-per-worker", type=int, default=4)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument(
        "--zarr-chunks-per-task",
        type=int,
        default=1,
        help="dask chunks of this many Zarr chunks along axis 0, for every implementation "
        "(default 1: dask chunks = Zarr chunks)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.size_mib = 128
        args.rounds = args.rounds or 1
    args.rounds = args.rounds or 3
    impls = args.impls.split(",")
    reports: list[dict[str, Any]] = []
    with s3_behind_delay(args.delay_ms) as (server, proxy, bucket):
        url, warmup = f"s3://{bucket}/big.zarr", f"s3://{bucket}/warmup.zarr"
        log(f"writing a {args.size_mib} MiB array with azarr ...")
        write_array(server, url, args.size_mib)
        write_array(server, warmup, 4)
        task = {
            "task": "dask-sum",
            "url": url,
            "warmup_url": warmup,
            "threads_per_worker": args.threads_per_worker,
            "chunks": None if args.zarr_chunks_per_task == 1 else [512 * args.zarr_chunks_per_task, 512],
            "storage_options": proxied_options(server, proxy),
        }
        for round_ in range(args.rounds):
            for impl in impls:
                report = run_worker(impl, task)
                log(f"round {round_ + 1} {impl}: {report['seconds']:.2f} s (sum {report['check']:.3f})")
                reports.append(report)
    checks = {r["impl"]: r["check"] for r in reports}
    ref = checks[impls[0]]
    bad = {k: v for k, v in checks.items() if abs(v - ref) > 1e-6 * max(1.0, abs(ref)) + 1e-2}
    if bad:
        raise SystemExit(f"sums differ from {impls[0]}'s {ref}: {bad}")
    medians = summarize(reports)
    result = {
        "quick": args.quick,
        "mib": args.size_mib,
        "rounds": args.rounds,
        "delay_ms": args.delay_ms,
        "threads_per_worker": args.threads_per_worker,
        "zarr_chunks_per_task": args.zarr_chunks_per_task,
        "seconds": medians,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "loadavg_1min_after": os.getloadavg()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    stem = "dask-quick" if args.quick else "dask"
    suffix = f"-x{args.zarr_chunks_per_task}" if args.zarr_chunks_per_task != 1 else ""
    (RESULTS / f"{stem}{suffix}.json").write_text(json.dumps(result, indent=1))
    for impl, s in medians.items():
        ratios = ", ".join(
            f"{medians[p] / s:.2f}x {p}" for p in ("zarr218", "zarr3") if p in medians and p != impl
        )
        print(f"{impl:10s} {s:7.2f} s  {args.size_mib / s:8.1f} MiB/s  ({ratios})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
