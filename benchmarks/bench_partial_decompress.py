"""One element of a 4 MiB Blosc chunk on SeaweedFS, with and without ``partial_decompress=True``.

SeaweedFS on 127.0.0.1, directly and behind `benchmarks.delay_proxy` (``--delay-ms`` each
way). One 1024 x 1024 float32 chunk (Blosc lz4, byte shuffle, numcodecs' automatic block size)
holding random integers 0-999 (compresses to about 60 %) is written once; then, interleaved, each
mode reads ``--reads`` single elements at random positions, one read at a time. Reported per read:
median and p90 seconds, requests and bytes (``azarr.scheduler.stats_for``). Prints a Markdown table.

Run::

    python -m benchmarks.bench_partial_decompress --quick     # 10 reads per mode and latency (~15 s)
    python -m benchmarks.bench_partial_decompress             # 50 reads
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SHAPE = (1024, 1024)  # float32: one 4 MiB chunk


async def _write(url: str, options: dict[str, Any]) -> int:
    import numpy as np

    import azarr

    arr = await azarr.zeros(
        SHAPE, chunks=SHAPE, dtype="f4", store=url, storage_options=options, overwrite=True
    )
    await arr.setitem(..., np.random.default_rng(0).integers(0, 1000, SHAPE).astype("f4"))
    return int(await arr.nbytes_stored())


async def _measure(url: str, options: dict[str, Any], reads: int) -> dict[str, dict[str, float]]:
    import numpy as np

    import azarr
    from azarr.scheduler import stats_for

    arrays = {
        mode: await azarr.open_array(
            url, mode="r", storage_options=options, partial_decompress=mode == "partial_decompress"
        )
        for mode in ("whole chunk", "partial_decompress")
    }
    rng = np.random.default_rng(1)
    samples: dict[str, list[tuple[float, int, int]]] = {mode: [] for mode in arrays}
    for n in range(reads + 1):
        where = tuple(int(i) for i in rng.integers(0, SHAPE[0], 2))
        for mode in list(arrays) if n % 2 == 0 else list(arrays)[::-1]:
            stats = stats_for(arrays[mode].store)
            stats.reset()
            start = time.perf_counter()
            await arrays[mode].getitem(where)
            if n:  # the first round opens connections
                samples[mode].append((time.perf_counter() - start, stats.requests, stats.bytes_read))
    result = {}
    for mode, rows in samples.items():
        seconds = sorted(r[0] for r in rows)
        result[mode] = {
            "median_s": statistics.median(seconds),
            "p90_s": seconds[int(0.9 * (len(seconds) - 1))],
            "requests": statistics.mean(r[1] for r in rows),
            "bytes": statistics.mean(r[2] for r in rows),
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--reads", type=int, default=50)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="10 reads per mode")
    args = parser.parse_args()
    if args.quick:
        args.reads = 10
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    from benchmarks.delay_proxy import DelayProxy

    server = start_seaweedfs()
    proxy = None
    try:
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        url = f"s3://{server.create_bucket()}/partial.zarr"
        stored = asyncio.run(_write(url, server.storage_options))
        lines = [
            f"One element of a 4 MiB float32 Blosc-lz4 chunk ({stored} bytes stored), {args.reads} reads per row.",
            "",
            "| path | mode | median s | p90 s | requests/read | bytes/read |",
            "|---|---|---|---|---|---|",
        ]
        for label, endpoint in [("loopback", server.endpoint_url), (f"+{args.delay_ms:g} ms", proxy.url)]:
            options = {**server.storage_options, "endpoint_url": endpoint}
            for mode, row in asyncio.run(_measure(url, options, args.reads)).items():
                lines.append(
                    f"| {label} | {mode} | {row['median_s']:.4f} | {row['p90_s']:.4f} | "
                    f"{row['requests']:.1f} | {row['bytes']:,.0f} |"
                )
        print("\n".join(lines))
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
