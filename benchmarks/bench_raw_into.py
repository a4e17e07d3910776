"""Full read of an uncompressed 256 MiB Zarr v3 array whose chunks span its rows, on SeaweedFS.

Chunks of 256 x 1024 float32 (1 MiB) in a 65536 x 1024 array: every chunk's region of the
result is contiguous, so azarr receives each body straight into the result
(``ChunkPipeline._fetch_into_region``). Before/after: each reader runs in its own
interpreter with ``PYTHONPATH`` at this checkout or at ``$AZARR_BASELINE`` (a checkout of
the code before), three reads each, alternated for ``--rounds`` rounds; wall time and the
reader process's CPU (every thread). No delay proxy (0 ms)::

    AZARR_BASELINE=/path/to/main python -m benchmarks.bench_raw_into [--rounds 3]

What it showed is in ``benchmarks/README.md`` ("Zstd chunks and uncompressed bodies at 0 ms").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHAPE, CHUNKS = (65536, 1024), (256, 1024)
READER = r"""
import asyncio, json, resource, sys, time
import azarr
from azarr.storage import S3Store

async def main():
    store = S3Store(sys.argv[2], storage_options=json.loads(sys.argv[1]))
    arr = await azarr.open_array(store, mode="r")
    found = []
    for _ in range(3):
        r0 = resource.getrusage(resource.RUSAGE_SELF); t0 = time.perf_counter()
        x = await arr.get_basic_selection(...)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        found.append((time.perf_counter() - t0, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
        assert float(x[12345, 7]) == 12345 * 1024 + 7
        del x
    await store.close()
    print(json.dumps(found))

asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    baseline = os.environ.get("AZARR_BASELINE")
    sys.path.insert(0, str(ROOT / "tests"))
    from servers import start_seaweedfs

    import azarr
    from azarr.storage import S3Store

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    server = start_seaweedfs()
    try:
        prefix = f"{server.create_bucket()}/raw"

        async def write() -> None:
            store = S3Store(prefix, storage_options=server.storage_options)
            codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
            arr = await azarr.create(
                shape=SHAPE, chunks=CHUNKS, dtype="<f4", store=store, zarr_format=3, codecs=codecs
            )
            await arr.set_basic_selection(..., np.arange(SHAPE[0] * SHAPE[1], dtype="<f4").reshape(SHAPE))
            await store.close()

        asyncio.run(write())
        readers = {"azarr": str(ROOT), **({"azarr-baseline": baseline} if baseline else {})}
        found: dict[str, list[list[float]]] = {name: [] for name in readers}
        for _ in range(args.rounds):
            for name, path in readers.items():
                reply = subprocess.run(
                    [sys.executable, "-c", READER, json.dumps(server.storage_options), prefix],
                    env={**os.environ, "PYTHONPATH": path},
                    capture_output=True,
                    text=True,
                    cwd="/",
                    check=True,
                )
                found[name] += json.loads(reply.stdout.strip().splitlines()[-1])
        print(
            "| reader | wall ms, median (min) | CPU s, median (min) | reads |\n| --- | ---: | ---: | ---: |"
        )
        for name, rows in found.items():
            walls, cpus = [r[0] for r in rows], [r[1] for r in rows]
            print(
                f"| {name} | {statistics.median(walls) * 1000:.0f} ({min(walls) * 1000:.0f}) | "
                f"{statistics.median(cpus):.3f} ({min(cpus):.3f}) | {len(rows)} |"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
