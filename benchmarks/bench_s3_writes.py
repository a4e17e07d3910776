"""S3 writes at 0 ms, in process: the server's CPU, the PUT ceiling, the body checksum's cost.

``bench_cloud`` times each client in its own process through the delay proxy; this
benchmark answers what its medians cannot on a loaded 2-core host, in one process
against SeaweedFS directly (started here, no proxy), cases interleaved, rotated round by
round and run in reverse order every other round:

* ``raw cN``: 256 PUTs of the 256 MiB array's 1 MiB chunks, encoded beforehand, through
  `S3Transport.put` at N in flight (no Zarr, no codec, no budget): the server's ceiling
  for this request shape, and its CPU per GiB;
* ``raw cN crc``: the same with ``x-amz-checksum-crc32c`` on every PUT (SeaweedFS
  verifies it);
* ``azarr COMP`` / ``azarr COMP crc``: azarr's full v3 write of the array
  (``request_checksum_calculation`` ``"when_required"``, azarr's default / ``"when_supported"``);
  ``azarr sharded zstd [crc]`` the same in 16 MiB shards of 64 KiB Zstd inner chunks.

Per case, medians over rounds: wall seconds, client CPU (every thread; the event-loop
thread's), and the server process's CPU (``/proc/<pid>/stat``) while it ran.

    python -m benchmarks.bench_s3_writes --rounds 5 --compressors none,zstd
    python -m benchmarks.bench_s3_writes --rounds 10 --only azarr   # the checksum's cost, paired

Figures: ``benchmarks/README.md``, "Writes at 0 ms: the server's share and the body checksum".
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SHAPE, CHUNKS = (8192, 8192), (512, 512)


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(run: Callable[[], Awaitable[Any]], server_pid: int) -> dict[str, float]:
    s0 = _process_cpu(server_pid)
    r0, t0, m0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), time.thread_time()
    await run()
    wall, loop = time.perf_counter() - t0, time.thread_time() - m0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "seconds": wall,
        "cpu_seconds": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
        "loop_seconds": loop,
        "server_cpu_seconds": _process_cpu(server_pid) - s0,
    }


async def run(args: argparse.Namespace, server: Any, bucket: str) -> dict[str, Any]:
    import numpy as np

    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import make_data, numcodecs_compressor, v3_codecs

    pid = server.process.proc.pid
    data = make_data(SHAPE)

    def options(checksum: bool, pool: int = 64) -> dict[str, Any]:
        config = {
            "max_pool_connections": pool,
            "request_checksum_calculation": "when_supported" if checksum else "when_required",
        }
        return {**server.storage_options, "config_kwargs": config}

    bodies: dict[str, list[bytes]] = {}
    for comp in args.compressors:
        codec = numcodecs_compressor(comp)
        bodies[comp] = [
            bytes(codec.encode(np.ascontiguousarray(data[i : i + CHUNKS[0], j : j + CHUNKS[1]])))
            if codec is not None
            else np.ascontiguousarray(data[i : i + CHUNKS[0], j : j + CHUNKS[1]]).tobytes()
            for i in range(0, SHAPE[0], CHUNKS[0])
            for j in range(0, SHAPE[1], CHUNKS[1])
        ]

    stores: list[Any] = []

    def raw(comp: str, n: int, checksum: bool) -> Callable[[], Awaitable[Any]]:
        store = S3Store(f"{bucket}/raw-{comp}-{n}-{checksum}", storage_options=options(checksum, max(n, 64)))
        stores.append(store)
        transport = store._transport
        assert transport is not None

        async def go() -> None:
            sem = asyncio.Semaphore(n)

            async def put(i: int, body: bytes) -> None:
                async with sem:
                    await transport.put(f"c/{i}", body)

            await asyncio.gather(*(put(i, b) for i, b in enumerate(bodies[comp])))

        return go

    def write(comp: str, checksum: bool, sharded: bool = False) -> Callable[[], Awaitable[Any]]:
        # Sharded: 16 MiB shards of 64 KiB inner chunks, as bench_sharding's.
        layout: dict[str, Any] = {"chunks": CHUNKS, "codecs": v3_codecs(comp)}
        if sharded:
            layout = {"chunks": (128, 128), "shards": (2048, 2048), "compressors": v3_codecs(comp)[1:]}

        async def go() -> None:
            store = S3Store(f"{bucket}/azarr-{comp}-{checksum}-{sharded}", storage_options=options(checksum))
            try:
                arr = await azarr.create(
                    shape=SHAPE,
                    dtype="<f4",
                    store=store,
                    zarr_format=3,
                    overwrite=True,
                    **layout,
                )
                await arr.set_basic_selection(..., data)
            finally:
                await store.close()

        return go

    cases: dict[str, Callable[[], Awaitable[Any]]] = {}
    for comp in args.compressors:
        for n in args.raw_concurrency:
            cases[f"raw {comp} c{n}"] = raw(comp, n, False)
        cases[f"raw {comp} c64 crc"] = raw(comp, 64, True)
        cases[f"azarr {comp}"] = write(comp, False)
        cases[f"azarr {comp} crc"] = write(comp, True)
    if "zstd" in args.compressors:
        cases["azarr sharded zstd"] = write("zstd", False, sharded=True)
        cases["azarr sharded zstd crc"] = write("zstd", True, sharded=True)
    names = [name for name in cases if name.startswith(tuple(args.only))]
    for name in names:  # untimed: connections, thread pools, first-use work
        await cases[name]()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        order = names[round_ % len(names) :] + names[: round_ % len(names)]
        if round_ % 2:
            # Each case and its "crc" twin run back to back: alternate which goes first (the
            # second of two 256 MiB writes meets the server's work left from the first).
            order.reverse()
        for name in order:
            runs[name].append(await _measure(cases[name], pid))
        print(f"[s3-writes] round {round_ + 1}/{args.rounds}", file=sys.stderr)
    for store in stores:
        await store.close()
    summary = {
        name: {
            key: round(statistics.median(r[key] for r in rs), 4)
            for key in ("seconds", "cpu_seconds", "loop_seconds", "server_cpu_seconds")
        }
        for name, rs in runs.items()
    }
    return {"rounds": args.rounds, "load": os.getloadavg(), "summary": summary, "runs": runs}


def render(result: dict[str, Any]) -> str:
    per_gib = 4.0  # 256 MiB of array data
    lines = [
        "| case | wall s | MiB/s | client CPU-s/GiB (loop) | server CPU-s/GiB |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, s in result["summary"].items():
        lines.append(
            f"| {name} | {s['seconds']:.3f} | {256 / s['seconds']:.0f} | "
            f"{s['cpu_seconds'] * per_gib:.2f} ({s['loop_seconds'] * per_gib:.2f}) | "
            f"{s['server_cpu_seconds'] * per_gib:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--compressors", type=lambda s: s.split(","), default=["none", "zstd"], help="none, zstd, blosc-lz4"
    )
    parser.add_argument(
        "--raw-concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[16, 32, 64, 128]
    )
    parser.add_argument(
        "--only", type=lambda s: s.split(","), default=[""], help="cases whose names start so (e.g. 'azarr')"
    )
    parser.add_argument("--output", type=Path, help="write the JSON here and the table next to it (.md)")
    args = parser.parse_args()
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    server = start_seaweedfs()
    try:
        bucket = server.create_bucket("azarr-s3-writes")
        result = asyncio.run(run(args, server, bucket))
    finally:
        server.process.stop()
    table = render(result)
    print(table)
    if args.output:
        args.output.write_text(json.dumps(result, indent=1) + "\n")
        args.output.with_suffix(".md").write_text(
            f"Rounds {result['rounds']}, load {result['load'][0]:.1f}; medians.\n\n{table}\n"
        )


if __name__ == "__main__":
    main()
