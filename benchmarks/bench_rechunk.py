"""Peak memory of a rechunking copy: ``azarr.array(src, chunks=new, store=...)`` on S3.

Writes a float32 array of ``--mib`` MiB (1 MiB chunks of 256 x 1024, Blosc-lz4)
to SeaweedFS (started here, as the tests start it), then in a fresh subprocess
opens it and copies it into the same bucket with transposed-shape 1 MiB chunks
(1024 x 256): every destination chunk takes rows from four source chunks and
columns from a quarter of each, so nothing lines up. The store's byte budget is
set to ``--budget-mib``. Reports the peak RSS growth of the copy against the
issue's bound: byte budget + 2 x the larger chunk + 10%. Also checks the copy
by comparing both arrays' values.

Run: ``python -m benchmarks.bench_rechunk`` (quick: ``--mib 256``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
COLS = 1024
SRC_CHUNKS = (256, 1024)  # float32: 1 MiB
DST_CHUNKS = (1024, 256)  # float32: 1 MiB


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak_rss() -> None:
    """Start the peak (VmHWM) afresh: opening the S3 session peaks above what the copy needs,
    and ``ru_maxrss`` cannot be reset (Linux: writing 5 to clear_refs resets VmHWM)."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def _store(bucket: str, options: dict[str, Any]) -> Any:
    from azarr.storage import S3Store

    return S3Store(f"{bucket}/rechunk", storage_options=options)


async def _write(bucket: str, options: dict[str, Any], mib: int) -> None:
    import azarr

    rows = mib * 2**20 // (4 * COLS)
    store = _store(bucket, options)
    src = await azarr.create(
        (rows, COLS), chunks=SRC_CHUNKS, dtype="f4", store=store, path="src", overwrite=True
    )
    block = 64 * SRC_CHUNKS[0]
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        values = np.sin(np.arange(start * COLS, stop * COLS, dtype="f4") / 1e5).reshape(stop - start, COLS)
        await src.set_basic_selection(slice(start, stop), values)
    await store.close()


async def _rechunk(bucket: str, options: dict[str, Any], budget_mib: int) -> dict[str, float]:
    import azarr
    from azarr.scheduler import set_budget

    store = _store(bucket, options)
    budget = set_budget(store, max_bytes=budget_mib * 2**20)
    src = await azarr.open_array(store, path="src", mode="r")
    await src.get_basic_selection((slice(0, 1), slice(0, 1)))  # warm imports, sessions, codec pool
    _reset_peak_rss()
    before = _status_bytes("VmRSS")
    t0 = time.perf_counter()
    dst = await azarr.array(src, chunks=DST_CHUNKS, store=store, path="dst", overwrite=True)
    seconds = time.perf_counter() - t0
    growth = _status_bytes("VmHWM") - before
    # check: both arrays hold the same values (row blocks, not the whole array at once)
    step = 4 * DST_CHUNKS[0]
    for start in range(0, src.shape[0], step):
        a = await src.get_basic_selection(slice(start, start + step))
        b = await dst.get_basic_selection(slice(start, start + step))
        if not np.array_equal(a, b):
            raise AssertionError(f"rows {start}:{start + step} differ after the copy")
    await store.close()
    chunk = max(np.prod(SRC_CHUNKS), np.prod(DST_CHUNKS)) * 4
    return {
        "array_bytes": float(src.nbytes),
        "budget_bytes": float(budget.max_bytes),
        "chunk_bytes": float(chunk),
        "peak_rss_growth_bytes": float(growth),
        "limit_bytes": (budget.max_bytes + 2 * chunk) * 1.10,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=1024, help="array size in MiB (default 1 GiB)")
    parser.add_argument("--budget-mib", type=int, default=64, help="the store's byte budget in MiB")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    if args.worker:
        bucket, options, budget = args.worker
        print(json.dumps(asyncio.run(_rechunk(bucket, json.loads(options), int(budget)))))
        return
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    server = start_seaweedfs()
    try:
        bucket = server.create_bucket("azarr-rechunk")
        options = server.storage_options
        asyncio.run(_write(bucket, options, args.mib))
        # A fresh interpreter, so the writer's memory does not hide the copy's peak.
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_rechunk",
                "--worker",
                bucket,
                json.dumps(options),
                str(args.budget_mib),
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        )
    finally:
        server.stop()
    result = json.loads(out.stdout)
    mib = 2**20
    ok = result["peak_rss_growth_bytes"] <= result["limit_bytes"]
    print(
        f"rechunked {result['array_bytes'] / mib:.0f} MiB in {result['seconds']:.1f} s "
        f"({result['array_bytes'] / mib / result['seconds']:.0f} MiB/s): peak RSS grew "
        f"{result['peak_rss_growth_bytes'] / mib:.0f} MiB; limit (budget {result['budget_bytes'] / mib:.0f} MiB "
        f"+ 2 x {result['chunk_bytes'] / mib:.0f} MiB chunk) x 1.10 = {result['limit_bytes'] / mib:.0f} MiB "
        f"-> {'OK' if ok else 'OVER'}"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
