"""Where a loader epoch's time goes, next to the raw-GET ceiling's request pattern (reduced size).

Writes the bench_loader dataset (float32, 4 KiB samples, 1 MiB Blosc-lz4 chunks of 256
rows) to SeaweedFS at ``--size-mib``, puts `benchmarks.delay_proxy` in front, then,
for each round and in this process:

- ``raw``: every chunk GET 64 at a time with aiohttp (second pass timed, as in
  ``loader_workers.run_raw``), recording when each response is complete;
- ``azarr``: one ``async for`` epoch of `azarr.loader.BatchLoader`
  (``preload_chunks=16``, batch 256, shuffled) on a store opened on the loop,
  sampling `azarr.scheduler.stats_for` every 2 ms (requests done, bytes
  read) and recording when each batch arrives.

Both get process CPU split by thread (``/proc/self/task``) and minor page faults.
Printed per round: when the first response, half and all of the bytes arrived, the
first and last batch, the tail (last batch after the last byte), CPU and faults.
``--cprofile`` adds the busiest functions of the event-loop thread in one more epoch.

Usage::

    python -m benchmarks.profile_loader                  # 128 MiB, 3 rounds
    python -m benchmarks.profile_loader --size-mib 64 --rounds 5 --cprofile

Results: ``benchmarks/results/{--out}.md`` / ``.json``. Rounds in one process: the
first azarr epoch touches fresh memory, later ones reuse what the allocator kept.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import threading
import time
from pathlib import Path
from typing import Any

CHUNK_ROWS, BATCH, CONCURRENCY = 256, 256, 64
_TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each thread of this process, by thread name (Linux)."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    out: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        name = names.get(int(task.name), "other")
        name = "codec" if name.startswith("azarr-codec") else name
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICKS
    return out


def _minflt() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class Meter:
    """Wall time, per-thread CPU and minor faults from construction to `stop`."""

    def __init__(self) -> None:
        self.t0, self.cpu0, self.flt0 = time.perf_counter(), thread_cpu(), _minflt()

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def stop(self) -> dict[str, Any]:
        cpu = thread_cpu()
        delta = {k: round(v - self.cpu0.get(k, 0.0), 3) for k, v in cpu.items()}
        return {"cpu": {k: v for k, v in delta.items() if v > 0}, "minflt": _minflt() - self.flt0}


async def raw_epoch(task: dict[str, Any]) -> dict[str, Any]:
    """The ceiling's pattern: all chunk GETs at concurrency 64, untimed pass then timed pass."""
    import aiohttp

    keys = [f"{task['prefix']}/x/{i}.0" for i in range(task["nchunks"])]

    async def one_pass() -> dict[str, Any]:
        done: list[tuple[float, int]] = []
        sem = asyncio.Semaphore(CONCURRENCY)
        connector = aiohttp.TCPConnector(limit=CONCURRENCY)
        async with aiohttp.ClientSession(connector=connector) as session:
            meter = Meter()

            async def get(key: str) -> None:
                async with sem, session.get(f"{task['endpoint']}/{task['bucket']}/{key}") as r:
                    body = await r.read()
                    done.append((meter.now(), len(body)))

            await asyncio.gather(*(get(k) for k in keys))
            return {"seconds": meter.now(), "done": done, **meter.stop()}

    await one_pass()
    return await one_pass()


async def azarr_epoch(task: dict[str, Any], prefetch_mib: int) -> dict[str, Any]:
    """One loader epoch, sampling the store's counters every 2 ms."""
    import azarr
    from azarr.loader import BatchLoader
    from azarr.scheduler import stats_for
    from azarr.storage import S3Store

    options = {"endpoint_url": task["endpoint"], "key": task["key"], "secret": task["secret"]}
    warm = await azarr.open_array(S3Store(task["url"], storage_options=options), mode="r", path="x")
    await warm.get_basic_selection(slice(0, CHUNK_ROWS))  # first-use work (codec threads...) untimed
    arr = await azarr.open_array(S3Store(task["url"], storage_options=options), mode="r", path="x")
    stats = stats_for(arr.store)
    loader = BatchLoader(
        arr, batch_size=BATCH, seed=0, preload_chunks=16, max_prefetch_bytes=prefetch_mib * 2**20
    )
    base = (stats.requests, stats.bytes_read)
    curve: list[tuple[float, int, int]] = []
    batches: list[float] = []
    meter = Meter()

    async def sample() -> None:
        while True:
            curve.append((meter.now(), stats.requests - base[0], stats.bytes_read - base[1]))
            await asyncio.sleep(0.002)

    sampler = asyncio.ensure_future(sample())
    try:
        async for _ in loader:
            batches.append(meter.now())
    finally:
        sampler.cancel()
    seconds = meter.now()
    curve.append((seconds, stats.requests - base[0], stats.bytes_read - base[1]))
    return {"seconds": seconds, "curve": curve, "batches": batches, **meter.stop()}


def _when(points: list[tuple[float, int]], fraction: float) -> float:
    """First time the cumulative bytes in ``points`` (time, bytes so far) reach ``fraction`` of the total."""
    total = points[-1][1]
    return next(t for t, b in points if b >= fraction * total and b > 0)


def summarize(raw: dict[str, Any], az: dict[str, Any]) -> dict[str, Any]:
    raw_points, acc = [], 0
    for t, n in sorted(raw["done"]):
        acc += n
        raw_points.append((t, acc))
    az_points = [(t, b) for t, _, b in az["curve"]]
    last_byte = _when(az_points, 1.0)
    return {
        "raw": {
            "seconds": raw["seconds"],
            "first_response": raw_points[0][0],
            "half_bytes": _when(raw_points, 0.5),
            "all_bytes": raw_points[-1][0],
            "cpu": raw["cpu"],
            "minflt": raw["minflt"],
        },
        "azarr": {
            "seconds": az["seconds"],
            "first_response": _when(az_points, 1e-9),
            "half_bytes": _when(az_points, 0.5),
            "all_bytes": last_byte,
            "first_batch": az["batches"][0],
            "tail": az["seconds"] - last_byte,
            "cpu": az["cpu"],
            "minflt": az["minflt"],
        },
        "ratio": raw["seconds"] / az["seconds"],
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Loader epoch profile",
        "",
        f"{results['size_mib']} MiB (float32, 4 KiB samples, {results['nchunks']} chunks of 1 MiB), SeaweedFS "
        f"behind a {results['delay_ms']:g} ms delay proxy, prefetch {results['prefetch_mib']} MiB; "
        f"{results['machine']}. Seconds from the start of the epoch; CPU in seconds by thread.",
        "",
        "| round | impl | 1st response | half bytes | all bytes | 1st batch | tail | total | CPU | minor faults"
        " | % of raw |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for i, r in enumerate(results["rounds"]):
        for impl in ("raw", "azarr"):
            x = r[impl]
            cpu = ", ".join(f"{k} {v:.2f}" for k, v in sorted(x["cpu"].items()))
            first_batch = f"{x['first_batch']:.3f}" if "first_batch" in x else ""
            tail = f"{x['tail']:.3f}" if "tail" in x else ""
            ratio = f"{r['ratio']:.0%}" if impl == "azarr" else ""
            lines.append(
                f"| {i} | {impl} | {x['first_response']:.3f} | {x['half_bytes']:.3f} | {x['all_bytes']:.3f}"
                f" | {first_batch} | {tail} | {x['seconds']:.3f} | {cpu} | {x['minflt']:,} | {ratio} |"
            )
    if results.get("cprofile"):
        lines += ["", "Event-loop thread, one more epoch (cProfile, by own time):", "", "```"]
        lines += [results["cprofile"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _cprofile(task: dict[str, Any], prefetch_mib: int) -> str:
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(azarr_epoch(task, prefetch_mib))
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    body = text.getvalue()
    return body[body.index("ncalls") :] if "ncalls" in body else body


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--prefetch-mib", type=int, default=256, help="BatchLoader max_prefetch_bytes")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--out", default="loader-profile")
    args = parser.parse_args(argv)
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    nsamples = args.size_mib * 2**20 // 4096

    from benchmarks.bench_loader import save_results, served_dataset

    rounds = []
    profile = ""
    with served_dataset(nsamples, args.delay_ms) as served:
        task = {
            **served,
            "url": f"{served['bucket']}/loader.zarr",
            "nchunks": -(-nsamples // CHUNK_ROWS),
        }
        for i in range(args.rounds):
            raw = asyncio.run(raw_epoch(task))
            az = asyncio.run(azarr_epoch(task, args.prefetch_mib))
            rounds.append(summarize(raw, az))
            print(f"round {i}: raw {raw['seconds']:.3f} s, azarr {az['seconds']:.3f} s", flush=True)
        if args.cprofile:
            profile = _cprofile(task, args.prefetch_mib)
    results = {
        "size_mib": args.size_mib,
        "nchunks": -(-nsamples // CHUNK_ROWS),
        "delay_ms": args.delay_ms,
        "prefetch_mib": args.prefetch_mib,
        "rounds": rounds,
        "cprofile": profile,
        "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
    }
    save_results(args.out, results, markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
