"""``azarr cp`` against ``azarr.copy_store``: a hierarchy copied between two buckets behind 20 ms latency.

SeaweedFS on 127.0.0.1 behind `benchmarks.delay_proxy` (20 ms each way). One
array of ``--size-mib`` MiB in 1 MiB chunks (float32, random: Blosc barely
compresses it, so stored bytes ~ array bytes) is written directly to a source
bucket; then, interleaved for ``--rounds`` rounds, it is copied through the proxy
into a fresh bucket by

* ``copy_store``: ``python -m benchmarks.bench_cli_cp --worker SRC DST`` (a fresh
  interpreter calling ``asyncio.run(azarr.copy_store(...))``), and
* ``azarr cp SRC DST --progress --json`` (the CLI, drawing its progress bar into a pipe).

Both report the copy's own time (listing included, interpreter start excluded);
the driver also times each process end to end. Writes ``benchmarks/results/cli-cp.md``.

Run::

    python -m benchmarks.bench_cli_cp --quick            # 128 MiB, 1 round (~1 min)
    python -m benchmarks.bench_cli_cp                    # 1024 MiB, 3 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results"
CHUNK = (512, 512)  # float32: 1 MiB


def _options(endpoint: str, server: Any) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "key": server.key, "secret": server.secret}


async def _write_source(url: str, options: dict[str, Any], size_mib: int) -> None:
    import numpy as np

    import azarr

    rows = size_mib * 2**20 // (4 * 8192)
    arr = await azarr.zeros(
        (rows, 8192), chunks=CHUNK, dtype="f4", store=url, storage_options=options, overwrite=True
    )
    rng = np.random.default_rng(0)
    step = CHUNK[0] * 16
    for start in range(0, rows, step):
        block = rng.random((min(step, rows - start), 8192), dtype="f4")
        await arr.setitem(slice(start, start + block.shape[0]), block)


def worker(src: str, dst: str, options: dict[str, Any]) -> None:
    """The copy_store side: one copy, its own time as JSON on stdout."""
    import azarr

    async def copy() -> dict[str, Any]:
        start = time.monotonic()
        result = await azarr.copy_store(
            src, dst, source_storage_options=options, dest_storage_options=options
        )
        return {"seconds": time.monotonic() - start, "n_bytes_copied": result.n_bytes_copied}

    print(json.dumps(asyncio.run(copy())))


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[dict[str, Any], float]:
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout), wall


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="128 MiB, 1 round")
    parser.add_argument("--name", default="cli-cp")
    parser.add_argument("--worker", nargs=2, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, json.loads(os.environ["BENCH_OPTIONS"]))
        return 0
    if args.quick:
        args.size_mib, args.rounds = 128, 1

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    from benchmarks.delay_proxy import DelayProxy

    azarr_exe = str(Path(sys.executable).parent / "azarr")
    server = start_seaweedfs()
    proxy = None
    try:
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        src_bucket = server.create_bucket("cli-cp-src")
        src = f"s3://{src_bucket}/data.zarr"
        print(f"writing {args.size_mib} MiB to {src} (directly) ...", file=sys.stderr)
        asyncio.run(_write_source(src, server.storage_options, args.size_mib))
        slow = _options(proxy.url, server)
        env = {**os.environ, "BENCH_OPTIONS": json.dumps(slow), "PYTHONPATH": str(REPO_ROOT)}
        cli_opts = ["--endpoint-url", proxy.url, "-S", f"key={server.key}", "-S", f"secret={server.secret}"]
        runs: dict[str, list[tuple[float, float]]] = {"copy_store": [], "azarr cp": []}
        nbytes = 0
        for n in range(args.rounds):
            # ABBA order: whichever runs first in a round meets a server that has just made a bucket.
            for impl in list(runs) if n % 2 == 0 else list(runs)[::-1]:
                dst = f"s3://{server.create_bucket()}/data.zarr"
                if impl == "copy_store":
                    cmd = [sys.executable, "-m", "benchmarks.bench_cli_cp", "--worker", src, dst]
                else:
                    cmd = [azarr_exe, "cp", src, dst, "--progress", "--json", *cli_opts]
                report, wall = _timed(cmd, env)
                nbytes = report.get("n_bytes_copied", nbytes)
                runs[impl].append((report["seconds"], wall))
                print(
                    f"round {n + 1} {impl}: {report['seconds']:.2f} s copy, {wall:.2f} s process",
                    file=sys.stderr,
                )
        text = _report(args, runs, nbytes)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.name}.md").write_text(text)
        print(text)
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
    return 0


def _report(args: argparse.Namespace, runs: dict[str, list[tuple[float, float]]], nbytes: int) -> str:
    mib = nbytes / 2**20
    rows = []
    medians = {}
    for impl, values in runs.items():
        copy = statistics.median(v[0] for v in values)
        wall = statistics.median(v[1] for v in values)
        medians[impl] = copy
        rows.append(
            f"| {impl} | {mib / copy:.0f} MiB/s ({copy:.2f} s) | {mib / wall:.0f} MiB/s ({wall:.2f} s) |"
        )
    ratio = medians["azarr cp"] / medians["copy_store"]
    return "\n".join(
        [
            "# `azarr cp` against `copy_store`",
            "",
            f"{mib:.0f} MiB ({args.size_mib} MiB float32 array, 1 MiB chunks) copied between two SeaweedFS "
            f"buckets through a {args.delay_ms:g} ms (each way) delay proxy; median of {args.rounds} "
            f"round(s), interleaved (ABBA order). Load average (1 min) at the end: {os.getloadavg()[0]:.1f}. "
            "Generated by `python -m benchmarks.bench_cli_cp"
            + (" --quick" if args.quick else f" --size-mib {args.size_mib} --rounds {args.rounds}")
            + "`.",
            "",
            "| implementation | copy (listing included) | process (interpreter start included) |",
            "| --- | ---: | ---: |",
            *rows,
            "",
            f"`azarr cp` copy time / `copy_store` copy time: **{ratio:.2f}** (the CLI draws its progress bar).",
            "",
        ]
    )


if __name__ == "__main__":
    raise SystemExit(main())
