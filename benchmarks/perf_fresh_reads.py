"""Fresh-process Zarr v3 reads under ``perf stat``: where a client's CPU and page faults go.

Issues #29/#33 (azarr's 0 ms v3 reads behind TensorStore's on the 2-core benchmark host).
Starts SeaweedFS and `benchmarks.delay_proxy` (``--delay-ms``, default 0), writes the
256 MiB v3 arrays of `benchmarks.bench_cloud` (1 MiB chunks) with azarr once, then for
``--runs`` rounds (order alternating) reads each array once per client, each read in a new
worker process (`benchmarks.cloud_workers`, the same workers as ``bench_cloud``) started
after ``--settle`` idle seconds, under ``perf stat`` (``task-clock``, ``page-faults``,
context switches, migrations; the whole process, imports included). Around the read
itself the worker records ``getrusage`` deltas (minor faults, voluntary / involuntary
context switches) besides ``bench_cloud``'s wall, CPU, system and loop-thread seconds;
the proxy counts the connections each read opened (HTTP/1.1: the most requests it had in
flight). For azarr the worker also counts the receive buffers `BufferPool` had to create
(``fresh_buffers``; every one is page-faulted in on the event loop).

A client label ``impl@tag`` runs ``impl`` with ``--config tag='{"setting": value}'``
applied through `azarr.config.set` (azarr only): A/B of settings in one run. ``--record``
runs ``perf record`` with ``$PERF_RECORD_ARGS`` (default: every minor fault, with call
graphs) instead of ``perf stat``, one ``.data`` file per read.

``--before`` names what precedes each read (issue #30's reads after a write): ``idle``
(``--settle`` seconds idle, the default), ``write`` (the same client's write worker of the
same array size, then the read at once, as ``bench_sharding`` and ``bench_cloud`` run
them) or ``hog`` (a process that allocates, touches and frees ``--hog-mib`` MiB, then the
read at once); ``write:2`` waits 2 s after the write before the read; several,
comma-separated, are alternated. ``--sharded`` reads the 1 GiB
sharded array of `benchmarks.bench_sharding` (16 MiB shards of 64 KiB Zstd inner chunks;
its workers, `benchmarks.sharding_workers`) instead of the v3 arrays of ``--compressors``.
Around the read the worker also records user and system seconds (``getrusage``).

Usage (through ``/work/heavy`` on the benchmark host)::

    python -m benchmarks.perf_fresh_reads --impls azarr,tensorstore --runs 5 \
        --compressors blosc-lz4,zstd,none --out results.jsonl
    python -m benchmarks.perf_fresh_reads --summarize results.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
PERF_EVENTS = "task-clock,page-faults,minor-faults,major-faults,context-switches,cpu-migrations"
RUSAGE_FIELDS = ("ru_minflt", "ru_majflt", "ru_nvcsw", "ru_nivcsw", "ru_utime", "ru_stime")


def worker() -> int:
    """The worker process: `benchmarks.cloud_workers`' task from stdin, plus per-op rusage deltas."""
    sys.path.insert(0, str(REPO_ROOT))
    from benchmarks import cloud_workers, sharding_workers

    fresh = [0]
    settings = os.environ.get("PERF_FRESH_AZARR_CONFIG")
    if settings is not None:  # an azarr worker: apply settings, count the pool's new buffers
        import azarr
        from azarr.pipeline import _buffers

        if settings:
            azarr.config.set(**json.loads(settings))
        empty = _buffers.empty

        def counting_empty(*args: Any, **kwargs: Any) -> Any:
            fresh[0] += 1
            return empty(*args, **kwargs)

        _buffers.empty = counting_empty  # type: ignore[assignment]

    def annotate(out: dict[str, Any], before: Any) -> dict[str, Any]:
        after = resource.getrusage(resource.RUSAGE_SELF)
        out["rusage"] = {k: getattr(after, k) - getattr(before, k) for k in RUSAGE_FIELDS}
        out["fresh_buffers"] = fresh[0]
        out["threads_after"] = threading.active_count()
        return out

    if os.environ.get("PERF_FRESH_SHARDED"):
        run_sharded = sharding_workers.run_op

        async def measured_sharded(impl: Any, task: dict[str, Any], op: dict[str, Any]) -> dict[str, Any]:
            before = resource.getrusage(resource.RUSAGE_SELF)  # includes the small warm-up read
            fresh[0] = 0
            return annotate(await run_sharded(impl, task, op), before)

        sharding_workers.run_op = measured_sharded
        return sharding_workers.main()

    run_op = cloud_workers.run_op

    def measured(impl: Any, op: dict[str, Any], requests: Any) -> dict[str, Any]:
        before = resource.getrusage(resource.RUSAGE_SELF)
        fresh[0] = 0
        return annotate(run_op(impl, op, requests), before)

    cloud_workers.run_op = measured
    return cloud_workers.main()


def _perf_stat(path: Path) -> dict[str, float]:
    counters: dict[str, float] = {}
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[0][:1].isdigit():
            counters[parts[2]] = float(parts[0])
    return counters


@dataclass(frozen=True)
class _Read:
    """One timed read of the run: where (servers, bucket, array shape), by whom (``impl``,
    ``label`` = ``impl@tag``), of what (``comp``), in which round (``run``)."""

    args: argparse.Namespace
    server: Any
    proxy: Any
    bucket: str
    shape: tuple[int, int]
    impl: str
    label: str
    comp: str
    run: int


def drive(args: argparse.Namespace) -> int:
    """Start the servers, write the arrays, run the reads; one JSON line per read to ``--out``."""
    from benchmarks import bench_cloud, bench_sharding
    from benchmarks.delay_proxy import DelayProxy

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    configs = dict(c.split("=", 1) for c in args.config)
    labels, befores = args.impls.split(","), args.before.split(",")
    compressors = ["sharded"] if args.sharded else args.compressors.split(",")
    if args.sharded:
        side = math.isqrt(args.size_mib * 2**20 // 4)
        shape: tuple[int, int] = (side - side % bench_sharding.SHARD,) * 2
    else:
        shape = bench_cloud.shape_for(args.size_mib)
    server = start_seaweedfs()
    proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
    try:
        bucket = server.create_bucket("azarr-bench")
        if args.sharded:
            asyncio.run(bench_sharding._setup(server, bucket, shape, []))
        else:
            for comp in compressors:
                asyncio.run(bench_cloud._write_dataset(server, bucket, f"data/{comp}", shape, comp, 3))
        with open(args.out, "a") as out, tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                for label in labels if run % 2 == 0 else labels[::-1]:
                    impl, _, tag = label.partition("@")
                    for before in befores if run % 2 == 0 else befores[::-1]:
                        for comp in compressors:
                            read = _Read(args, server, proxy, bucket, shape, impl, label, comp, run)
                            _prepare(read, before)
                            record = _read_once(read, Path(tmp), before)
                            record["before"] = before
                            if tag or impl.startswith("azarr"):
                                record["config"] = configs.get(tag, "")
                            out.write(json.dumps(record) + "\n")
                            out.flush()
                            _print(record)
    finally:
        proxy.stop()
        server.stop()
    return 0


def _task(read: _Read, op: dict[str, Any]) -> dict[str, Any]:
    """The worker's task for ``op``: `bench_sharding`'s with ``--sharded``, else `bench_cloud`'s."""
    from benchmarks import bench_cloud, bench_sharding

    if read.args.sharded:
        task = bench_sharding.worker_task(read.server, read.proxy, read.bucket, read.shape)
        return {**task, "ops": [op], "impl": read.impl}
    task = bench_cloud._task(read.server, read.proxy, read.bucket, {"shape": list(read.shape)}, [op])
    return {**task, "impl": read.impl}


def _env(read: _Read) -> dict[str, str]:
    """The worker's environment: the implementation's ``PYTHONPATH``, azarr's settings of its tag."""
    from benchmarks import bench_cloud

    args, impl, label = read.args, read.impl, read.label
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": bench_cloud._pythonpath(impl)}
    if impl.startswith("azarr"):
        tag = label.partition("@")[2]
        env["PERF_FRESH_AZARR_CONFIG"] = dict(c.split("=", 1) for c in args.config).get(tag, "")
    if args.sharded:
        env["PERF_FRESH_SHARDED"] = "1"
    return env


def _prepare(read: _Read, before: str) -> None:
    """What precedes a read (``--before``): idle seconds, the client's write worker, or a hog;
    ``name:SECONDS`` waits that long after it."""
    from benchmarks import bench_cloud

    args, impl, label, comp = read.args, read.impl, read.label, read.comp
    before, _, wait = before.partition(":")
    if before == "idle":
        time.sleep(args.settle)  # the host idle, freed memory handed back
    elif before == "hog":
        code = f"import numpy as np; a = np.empty({args.hog_mib << 20}, np.uint8); a[::4096] = 1; del a"
        subprocess.run([sys.executable, "-c", code], check=True)
    elif before == "write":
        op: dict[str, Any] = {"op": "write", "prefix": f"w/{label}/{comp}/{read.run}"}
        if not args.sharded:
            op.update(
                workload="write",
                compressor=comp,
                shape=list(read.shape),
                chunks=list(bench_cloud.CHUNKS),
                zarr_format=3,
            )
        proc = subprocess.run(
            [bench_cloud.interpreter(impl), str(Path(__file__).resolve()), "--worker"],
            input=json.dumps(_task(read, op)),
            capture_output=True,
            text=True,
            env=_env(read),
            check=False,
        )
        if proc.returncode or '"error"' in proc.stdout:
            raise RuntimeError(
                f"{label} write failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}{proc.stdout[-2000:]}"
            )
    else:
        raise SystemExit(f"--before: unknown {before!r}")
    time.sleep(float(wait or 0))


def _read_once(read: _Read, tmp: Path, before: str = "idle") -> dict[str, Any]:
    from benchmarks import bench_cloud

    args, impl, label, comp, run = read.args, read.impl, read.label, read.comp, read.run
    if args.sharded:
        op: dict[str, Any] = {"op": "read", "prefix": "data"}
    else:
        op = {
            "op": "read",
            "workload": "read",
            "compressor": comp,
            "prefix": f"data/{comp}",
            "zarr_format": 3,
        }
    task = _task(read, op)
    stat = tmp / "perf-stat.txt"
    if args.record:
        data = Path(args.record_dir) / f"{label}-{comp}-{before}-{run}.data"
        extra = os.environ.get("PERF_RECORD_ARGS", "-e minor-faults -c 1 -g").split()
        wrap = ["perf", "record", "-q", *extra, "-o", str(data)]
    else:
        wrap = ["perf", "stat", "-x,", "-o", str(stat), "-e", PERF_EVENTS]
    probe = _fault_probe(args.probe_mib) if args.probe_mib else None
    host_before = _host_counters()
    proc = subprocess.run(
        [*wrap, bench_cloud.interpreter(impl), str(Path(__file__).resolve()), "--worker"],
        input=json.dumps(task),
        capture_output=True,
        text=True,
        env=_env(read),
        check=False,
    )
    host = {k: v - host_before[k] for k, v in _host_counters().items()}
    if proc.returncode:
        raise RuntimeError(f"{label} worker failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    report = json.loads(next(x for x in reversed(proc.stdout.splitlines()) if x.startswith('{"impl"')))
    op = report["ops"][0]
    if "error" in op:
        raise RuntimeError(f"{label} {comp}: {op['error']}")
    return {
        "label": label,
        "compressor": comp,
        "run": run,
        "perf_stat": {} if args.record else _perf_stat(stat),
        "read": {k: op.get(k) for k in ("seconds", "cpu_seconds", "sys_seconds", "loop_seconds", "rusage")},
        "proxy": op.get("proxy"),
        "fresh_buffers": op.get("fresh_buffers"),
        "host": host,
        "probe_us_per_fault": probe,
    }


#: ``/proc/vmstat`` counters recorded around each read worker (the whole guest's).
VMSTAT = ("pgfault", "thp_fault_alloc", "compact_stall", "pgalloc_normal")
_PROBE = """
import mmap, resource, sys
import numpy as np
m = mmap.mmap(-1, int(sys.argv[1]))  # no huge-page advice: 4 KiB faults, as a read's result
r0 = resource.getrusage(resource.RUSAGE_SELF)
np.frombuffer(m, np.uint8)[::4096] = 1
r1 = resource.getrusage(resource.RUSAGE_SELF)
print((r1.ru_stime + r1.ru_utime - r0.ru_stime - r0.ru_utime) / max(1, r1.ru_minflt - r0.ru_minflt) * 1e6)
"""


def _fault_probe(mib: int) -> float:
    """CPU microseconds per 4 KiB page fault of a fresh process touching ``mib`` MiB now."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, str(mib << 20)], capture_output=True, text=True, check=True
    )
    return float(out.stdout)


def _host_counters() -> dict[str, float]:
    """The guest's steal and busy CPU seconds (``/proc/stat``) and `VMSTAT` counters, now."""
    cpu = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    counters = {"steal_s": cpu[7] / tick, "busy_s": (sum(cpu[:8]) - cpu[3] - cpu[4]) / tick}
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, value = line.split()
        if name in VMSTAT:
            counters[name] = float(value)
    return counters


def _print(r: dict[str, Any]) -> None:
    read, ru, proxy = r["read"], r["read"]["rusage"], r["proxy"] or {}
    print(
        f"{r['label']:16s} {r['compressor']:9s} {r.get('before', 'idle'):5s} r{r['run']} wall {read['seconds']:.3f} cpu {read['cpu_seconds']:.3f} "
        f"sys {read['sys_seconds']:.3f} loop {read['loop_seconds'] or 0:.3f} minflt {ru['ru_minflt']} "
        f"csw {ru['ru_nvcsw']}/{ru['ru_nivcsw']} conns {proxy.get('connections')} fresh {r['fresh_buffers']} "
        f"steal {r['host']['steal_s']:.2f} probe {r['probe_us_per_fault'] or 0:.2f} us/flt",
        flush=True,
    )


def summarize(paths: list[str]) -> str:
    """A markdown table of the reads in ``paths`` (JSON lines): medians (ranges) per client and data."""
    rows: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for path in paths:
        for line in Path(path).read_text().splitlines():
            r = json.loads(line)
            rows[(r["compressor"], r.get("before", "idle"), r["label"])].append(r)

    def med(xs: list[float], fmt: str = ".3f", spread: bool = True) -> str:
        text = format(statistics.median(xs), fmt)
        return f"{text} ({min(xs):{fmt}}-{max(xs):{fmt}})" if spread else text

    lines = [
        "| data | before | client | reads | wall s | CPU s | user s | sys s | sys us / fault | loop thread s | minor faults | "
        "process task-clock s | ctx switches vol / invol | connections | fresh receive buffers |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for (comp, before, label), rs in sorted(rows.items()):
        reads = [r["read"] for r in rs]

        def col(key: str, reads: list[dict[str, Any]] = reads) -> list[float]:
            return [x[key] for x in reads]

        def ru(key: str, reads: list[dict[str, Any]] = reads) -> list[float]:
            return [x["rusage"][key] for x in reads]

        user = [x["cpu_seconds"] - x["sys_seconds"] for x in reads]
        loop = [x["loop_seconds"] or 0.0 for x in reads]
        per_fault = [x["sys_seconds"] / max(1, x["rusage"]["ru_minflt"]) * 1e6 for x in reads]
        task_clock = [r["perf_stat"].get("task-clock", 0.0) / 1000 for r in rs]
        conns = [float((r["proxy"] or {}).get("connections") or 0) for r in rs]
        fresh = [float(r["fresh_buffers"] or 0) for r in rs]
        lines.append(
            f"| {comp} | {before} | {label} | {len(rs)} | {med(col('seconds'))} | {med(col('cpu_seconds'))} | "
            f"{med(user, spread=False)} | {med(col('sys_seconds'))} | {med(per_fault, '.2f')} | "
            f"{med(loop, spread=False)} | {med(ru('ru_minflt'), ',.0f')} | {med(task_clock)} | "
            f"{med(ru('ru_nvcsw'), '.0f', False)} / {med(ru('ru_nivcsw'), '.0f', False)} | "
            f"{med(conns, '.0f', False)} | {med(fresh, '.0f', False)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--impls", default="azarr,tensorstore", help="comma-separated; impl@tag for --config")
    parser.add_argument("--compressors", default="blosc-lz4,zstd,none")
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settle", type=float, default=4.0, help="idle seconds before each read")
    parser.add_argument(
        "--before", default="idle", help="comma-separated: idle, write, hog; name:SECONDS waits after it"
    )
    parser.add_argument("--hog-mib", type=int, default=1536)
    parser.add_argument(
        "--probe-mib",
        type=int,
        default=0,
        help="before each read, time a fresh process's faults on this many MiB",
    )
    parser.add_argument("--sharded", action="store_true", help="the sharded 1 GiB array of bench_sharding")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--config", action="append", default=[], help="tag=JSON of azarr settings")
    parser.add_argument("--record", action="store_true", help="perf record instead of perf stat")
    parser.add_argument("--record-dir", default=".")
    parser.add_argument("--out", default="perf-fresh-reads.jsonl")
    parser.add_argument("--summarize", nargs="+", metavar="JSONL")
    args = parser.parse_args(argv)
    if args.worker:
        return worker()
    if args.summarize:
        print(summarize(args.summarize))
        return 0
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())
