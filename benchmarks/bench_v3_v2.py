"""azarr on Zarr v3 against azarr on the same data as Zarr v2, paired in one process.

Issue #29 asks azarr's v3 reads and writes to be within 5 % of its v2 figures on the same
data. ``bench_cloud --zarr-format 3`` gives that ratio from two worker processes' medians
over two rounds, minutes apart on a shared 2-core machine, where the load of everything
else drifts by more than 5 % between them (a rerun of its 0 ms cell gave v3 / v2 from 0.82
to 1.47 with the code unchanged). This benchmark measures the ratio alone: one process,
SeaweedFS directly (no delay proxy, whose Python shares the cores), the formats alternated
read for read and write for write with the order rotated each round, and each v3 run
divided by the v2 run beside it (the median of those paired ratios is the verdict; load
that drifts slowly cancels in a pair). Besides wall time it records the client's CPU (every
thread), its event-loop thread's CPU, and SeaweedFS's CPU, so a gap can be placed.

Cases: ``v2`` (``.zarray``, keys ``i.j``) and ``v3`` (``zarr.json``, ``bytes`` then the same
compressor, default chunk keys ``c/i/j``); ``--key-layouts`` adds ``v2 /`` (dimension
separator ``/``) and ``v3 .`` (``default`` keys with separator ``.``), to tell the codec
chain from the key layout (nested keys on the server). Array, chunks and compressors are
``bench_cloud``'s (float32 8192 x 8192, 256 MiB, 1 MiB chunks; Blosc-lz4, Zstd 1, none).

    /work/heavy bench python -m benchmarks.bench_v3_v2 --rounds 8

Results: ``benchmarks/results/v3-v2-paired.{json,md}`` (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
SHAPE, CHUNKS = (8192, 8192), (512, 512)
COMPRESSORS = ("blosc-lz4", "zstd", "none")
BASE_CASES = ("v2", "v3")
LAYOUT_CASES = ("v2 /", "v3 .")


def encoding(case: str, compressor: str) -> dict[str, Any]:
    """`azarr.create` keywords of ``case`` (a name of `BASE_CASES` or `LAYOUT_CASES`)."""
    from benchmarks.cloud_workers import numcodecs_compressor, v3_codecs

    if case.startswith("v2"):
        enc: dict[str, Any] = {"compressor": numcodecs_compressor(compressor)}
        if case == "v2 /":
            enc["dimension_separator"] = "/"
        return enc
    enc = {"zarr_format": 3, "codecs": v3_codecs(compressor)}
    if case == "v3 .":
        enc["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": "."}}
    return enc


def _slug(case: str) -> str:
    return case.replace(" /", "-slash").replace(" .", "-dot")


def _server_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure(run: Callable[[], Coroutine[Any, Any, Any]], server_pid: int) -> dict[str, float]:
    """Run ``run()`` in a new event loop: wall, client CPU (every thread / event-loop
    thread), and the server's CPU meanwhile, in seconds."""
    s0 = _server_cpu(server_pid)
    r0, t0, m0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter(), time.thread_time()
    asyncio.run(run())
    wall, main = time.perf_counter() - t0, time.thread_time() - m0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "seconds": wall,
        "cpu_seconds": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
        "sys_seconds": r1.ru_stime - r0.ru_stime,
        "loop_seconds": main,
        "server_cpu_seconds": _server_cpu(server_pid) - s0,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Write the datasets, then time ``args.rounds`` paired rounds; the results as JSON."""
    import numpy as np

    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import digest, make_data

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs

    cases = [*BASE_CASES, *(LAYOUT_CASES if args.key_layouts else ())]
    data = make_data(SHAPE)
    expected = digest(data)
    server = start_seaweedfs()
    try:
        bucket = server.create_bucket("azarr-v3-v2")
        pid = server.process.proc.pid

        def store(prefix: str, read_only: bool = True) -> Any:
            return S3Store(f"{bucket}/{prefix}", storage_options=server.storage_options, read_only=read_only)

        async def write(prefix: str, case: str, comp: str) -> None:
            s = store(prefix, read_only=False)
            try:
                arr = await azarr.create(
                    shape=SHAPE, chunks=CHUNKS, dtype="<f4", store=s, **encoding(case, comp)
                )
                await arr.set_basic_selection(..., data)
            finally:
                await s.close()

        async def read(prefix: str) -> None:
            s = store(prefix)
            try:
                arr = await azarr.open_array(s, mode="r")
                got = await arr.get_basic_selection(...)
            finally:
                await s.close()
            if digest(np.asarray(got)) != expected:
                raise SystemExit(f"read of {prefix} does not match the data written")

        runs: dict[str, list[dict[str, Any]]] = {}
        for comp in args.compressors:
            for case in cases:
                asyncio.run(write(f"data/{comp}/{_slug(case)}", case, comp))
            asyncio.run(read(f"data/{comp}/{_slug(cases[0])}"))  # untimed: first-use work
            for round_ in range(args.rounds):
                order = cases[round_ % len(cases) :] + cases[: round_ % len(cases)]
                for case in order:
                    prefix = f"data/{comp}/{_slug(case)}"
                    m = _measure(functools.partial(read, prefix), pid)
                    runs.setdefault(f"read/{comp}/{case}", []).append({"round": round_, **m})
                for case in order:
                    prefix = f"write/{comp}/{_slug(case)}/r{round_}"
                    m = _measure(functools.partial(write, prefix, case, comp), pid)
                    runs.setdefault(f"write/{comp}/{case}", []).append({"round": round_, **m})
                    _delete(server, bucket, prefix)
                print(f"[v3-v2] {comp}: round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        server.process.stop()
    return {"cases": cases, "compressors": list(args.compressors), "rounds": args.rounds, "runs": runs}


def _delete(server: Any, bucket: str, prefix: str) -> None:
    client = server.admin
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def paired_ratio(v3: list[dict[str, Any]], v2: list[dict[str, Any]], field: str = "seconds") -> float:
    """Median over rounds of the v3 run's ``field`` divided by the v2 run's of the same round."""
    by_round = {r["round"]: r[field] for r in v2}
    return statistics.median(r[field] / by_round[r["round"]] for r in v3 if by_round.get(r["round"]))


def render(result: dict[str, Any]) -> str:
    """The Markdown report of `run`'s result."""
    cases, runs = result["cases"], result["runs"]
    lines = [
        "# azarr: Zarr v3 against the same data as Zarr v2, paired",
        "",
        "`python -m benchmarks.bench_v3_v2` (see its docstring): SeaweedFS (`weed mini`) on "
        "127.0.0.1, directly; float32 8192 x 8192 (256 MiB), chunks 512 x 512 (1 MiB); one "
        f"process, the formats alternated with the order rotated, {result['rounds']} rounds. "
        f"azarr at commit {result['commit']}; {result['machine']}; load average (1 min) "
        f"before / after {result['load'][0]:.1f} / {result['load'][1]:.1f}; {result['wall_s']:.0f} s.",
        "",
        "Cells: medians over rounds of wall seconds / client CPU seconds (every thread) / "
        "event-loop thread CPU / SeaweedFS CPU. `v3 / v2`: the median of each round's v3 time "
        "over its v2 time (target <= 1.05), and the same for the client's CPU.",
        "",
        "| workload | " + " | ".join(cases) + " | v3 / v2 time | v3 / v2 client CPU |",
        "| --- | " + " | ".join("---:" for _ in cases) + " | ---: | ---: |",
    ]
    for op in ("read", "write"):
        for comp in result["compressors"]:
            cells = []
            for case in cases:
                rs = runs[f"{op}/{comp}/{case}"]
                med = [
                    statistics.median(r[k] for r in rs)
                    for k in ("seconds", "cpu_seconds", "loop_seconds", "server_cpu_seconds")
                ]
                cells.append(" / ".join(f"{x:.3f}" for x in med))
            v3, v2 = runs[f"{op}/{comp}/v3"], runs[f"{op}/{comp}/v2"]
            t, c = paired_ratio(v3, v2), paired_ratio(v3, v2, "cpu_seconds")
            verdict = "yes" if t <= 1.05 else "**no**"
            lines.append(f"| {op} {comp} | " + " | ".join(cells) + f" | {t:.3f} {verdict} | {c:.3f} |")
    return "\n".join([*lines, ""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=8, help="paired rounds (default 8)")
    parser.add_argument(
        "--compressors",
        type=lambda s: [c for c in s.split(",") if c],
        default=list(COMPRESSORS),
        help="comma-separated: blosc-lz4, zstd, none",
    )
    parser.add_argument("--key-layouts", action="store_true", help="also v2 with '/' keys and v3 with '.'")
    parser.add_argument("--output-dir", type=Path, default=RESULTS)
    parser.add_argument("--name", default="v3-v2-paired", help="basename of the result files")
    args = parser.parse_args(argv)
    unknown = set(args.compressors) - set(COMPRESSORS)
    if unknown or args.rounds < 1:
        parser.error(f"unknown compressor(s) {sorted(unknown)}" if unknown else "--rounds must be >= 1")
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    from benchmarks.bench_cloud import _azarr_commit, _machine

    started, load_before = time.monotonic(), os.getloadavg()[0]
    result = run(args)
    machine = _machine()
    result.update(
        commit=_azarr_commit(),
        machine=f"{machine['cores']} cores, {machine['memory']}, Python {platform.python_version()}",
        load=[load_before, os.getloadavg()[0]],
        wall_s=time.monotonic() - started,
    )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / f"{args.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = render(result)
    (args.output_dir / f"{args.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
