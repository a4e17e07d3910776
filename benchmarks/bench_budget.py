"""Admission cost of the store budget: nanoseconds per request slot, before and after a change.

The budget (`azarr.scheduler.IOBudget`) is entered once per store request, so its cost is
paid per chunk. Cases, each timed in one event loop, best of ``--repeats``:

``enter/exit``
    ``async with budget:`` in one task, never waiting (the common case).
``enter/exit + reserve``
    the same plus a byte reservation, as a chunk read holds both.
``contended``
    256 tasks through a limit of 16, each yielding once inside: every admission
    waits and is handed a slot by a release.
``StoreIO.get memory``
    `azarr.scheduler.StoreIO.get` of a 100-byte value from a `MemoryStore` (a local
    store: fixed limit, no timeout).
``StoreIO.get remote``
    the same on a memory store marked remote (``is_local=False``): the path S3, GCS
    and HTTP requests take (per-request timeout; the adaptive limit where azarr has one).

Usage::

    python -m benchmarks.bench_budget                      # this checkout
    AZARR_BASELINE=/tmp/base python -m benchmarks.bench_budget --compare
        # interleaved with an older azarr (a directory holding its azarr/ package,
        # e.g. ``git archive <commit> azarr | tar -x -C /tmp/base``); a markdown table out

Run it under the heavy lock on a shared machine (``flock /work/.heavy.lock ...``).
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
from collections.abc import Awaitable, Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CASES = ("enter/exit", "enter/exit + reserve", "contended", "StoreIO.get memory", "StoreIO.get remote")


async def _time(body: Callable[[int], Awaitable[None]], n: int, repeats: int) -> float:
    """Best nanoseconds per operation of ``body(n)`` over ``repeats`` runs."""
    best = float("inf")
    await body(min(n, 1000))  # warm-up
    for _ in range(repeats):
        start = time.perf_counter_ns()
        await body(n)
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


async def _measure(n: int, repeats: int) -> dict[str, float]:
    from azarr.scheduler import IOBudget, StoreIO
    from azarr.storage import MemoryStore

    budget = IOBudget(max_requests=64, max_bytes=2**30)

    async def enter_exit(count: int) -> None:
        for _ in range(count):
            async with budget:
                pass

    async def enter_exit_reserve(count: int) -> None:
        for _ in range(count):
            async with budget.reserve(1024), budget:
                pass

    narrow = IOBudget(max_requests=16, max_bytes=2**30)

    async def contended(count: int) -> None:
        tasks = 256
        each = max(1, count // tasks)

        async def worker() -> None:
            for _ in range(each):
                async with narrow:
                    await asyncio.sleep(0)

        await asyncio.gather(*(worker() for _ in range(tasks)))

    local = MemoryStore()
    await local.set("k", b"x" * 100)
    local_io = StoreIO(local)

    async def get_local(count: int) -> None:
        for _ in range(count):
            await local_io.get("k")

    remote = MemoryStore()
    remote.is_local = False  # the remote path: timeout per request, adaptive limit where there is one
    await remote.set("k", b"x" * 100)
    remote_io = StoreIO(remote)

    async def get_remote(count: int) -> None:
        for _ in range(count):
            await remote_io.get("k")

    bodies = (enter_exit, enter_exit_reserve, contended, get_local, get_remote)
    return {name: await _time(body, n, repeats) for name, body in zip(CASES, bodies, strict=True)}


def _run_child(pythonpath: str, n: int, repeats: int) -> dict[str, float]:
    # Run by path, not with -m from the repository: the current directory would come
    # first on sys.path and shadow the baseline's azarr.
    env = {**os.environ, "PYTHONPATH": pythonpath}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--n", str(n), "--repeats", str(repeats), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare(baseline: str, n: int, repeats: int, rounds: int) -> str:
    """Interleave this checkout and ``baseline`` for ``rounds``; a markdown table of medians."""
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this": []}
    for _ in range(rounds):
        runs["baseline"].append(_run_child(os.pathsep.join([baseline, str(REPO_ROOT)]), n, repeats))
        runs["this"].append(_run_child(str(REPO_ROOT), n, repeats))
    lines = [
        f"Admission cost per request slot, ns (median of {rounds} interleaved runs, each the best of "
        f"{repeats} x {n:,} operations)",
        "",
        "| case | before | after | after / before |",
        "| --- | ---: | ---: | ---: |",
    ]
    for case in CASES:
        before = statistics.median(r[case] for r in runs["baseline"])
        after = statistics.median(r[case] for r in runs["this"])
        lines.append(f"| {case} | {before:,.0f} | {after:,.0f} | {after / before:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000, help="operations per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (best is kept)")
    parser.add_argument("--rounds", type=int, default=3, help="with --compare: interleaved rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--compare", action="store_true", help="against $AZARR_BASELINE, interleaved")
    parser.add_argument("--output", type=Path, help="with --compare: also write the table here")
    args = parser.parse_args(argv)
    if args.compare:
        baseline = os.environ.get("AZARR_BASELINE")
        if not baseline:
            parser.error("--compare needs AZARR_BASELINE=<directory holding an older azarr/>")
        table = compare(baseline, args.n, args.repeats, args.rounds)
        print(table)
        if args.output:
            args.output.write_text(table)
        return 0
    result = asyncio.run(_measure(args.n, args.repeats))
    if args.json:
        print(json.dumps(result))
    else:
        for case, ns in result.items():
            print(f"{case:24s} {ns:8,.0f} ns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
