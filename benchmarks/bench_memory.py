"""Peak memory of reading a large array: output + bytes-in-flight budget, not more.

Writes a float32 array of ``--gib`` GiB (1 MiB chunks, Blosc-lz4) to a
LocalStore in a temporary directory, then reads it back whole in a fresh
subprocess and reports the peak RSS growth of that read against the output
size plus azarr's bytes-in-flight budget (``max_bytes_in_flight``). Target:
growth <= (output + budget) * 1.10. Run: ``python -m benchmarks.bench_memory``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import azarr

CHUNK_ELEMENTS = 256 * 1024  # float32: 1 MiB per chunk


def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def _rss_current_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def _write(root: Path, gib: float) -> None:
    n = int(gib * 2**30 // 4)
    arr = await azarr.create(
        (n,), chunks=(CHUNK_ELEMENTS,), dtype="f4", store=azarr.LocalStore(root), overwrite=True
    )
    block = 64 * CHUNK_ELEMENTS  # write 64 MiB at a time to keep the writer small
    for start in range(0, n, block):
        stop = min(n, start + block)
        await arr.set_basic_selection(slice(start, stop), np.sin(np.arange(start, stop, dtype="f4") / 1e4))


async def _read(root: Path) -> dict[str, float]:
    arr = await azarr.open_array(azarr.LocalStore(root), mode="r")
    await arr.get_basic_selection(slice(0, CHUNK_ELEMENTS))  # warm the codec pool and imports
    before = _rss_current_bytes()
    t0 = time.perf_counter()
    data = await arr.get_basic_selection()
    seconds = time.perf_counter() - t0
    growth = _rss_peak_bytes() - before
    budget = int(azarr.config.get("max_bytes_in_flight"))
    return {
        "output_bytes": float(data.nbytes),
        "budget_bytes": float(budget),
        "peak_rss_growth_bytes": float(growth),
        "limit_bytes": (data.nbytes + budget) * 1.10,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0, help="array size in GiB")
    parser.add_argument("--read-only-worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read_only_worker:
        print(json.dumps(asyncio.run(_read(args.read_only_worker))))
        return
    with tempfile.TemporaryDirectory(prefix="azarr-bench-memory-") as tmp:
        root = Path(tmp) / "big.zarr"
        asyncio.run(_write(root, args.gib))
        # A fresh interpreter, so the writer's memory does not hide the reader's peak.
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_memory", "--read-only-worker", str(root)],
            check=True,
            capture_output=True,
            text=True,
        )
    result = json.loads(out.stdout)
    mib = 2**20
    ok = result["peak_rss_growth_bytes"] <= result["limit_bytes"]
    print(
        f"read {result['output_bytes'] / mib:.0f} MiB in {result['seconds']:.2f} s: peak RSS grew "
        f"{result['peak_rss_growth_bytes'] / mib:.0f} MiB; limit (output + budget) x 1.10 = "
        f"{result['limit_bytes'] / mib:.0f} MiB -> {'OK' if ok else 'OVER'}"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
