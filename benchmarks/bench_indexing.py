"""Indexing overhead: azarr against zarr-python 2.18 and 3.1 on an in-memory store.

The array is (10000, 100) float64 in (10, 10) chunks -- 10,000 chunks of 800 bytes,
so per-chunk overhead (indexing, store calls, scheduling, codec hops) dominates
and the cost of moving bytes is small. Workloads:

======================  ==========================================  ===============
workload                expression                                  chunks touched
======================  ==========================================  ===============
full read               ``arr[...]``                                10,000
basic step slice        ``arr[::7]``                                10,000
oindex 500 rows         ``arr.oindex[rows, :]``, 500 random rows    ~4,800
vindex 10,000 points    ``arr.vindex[rows, cols]``, random points   ~6,300
======================  ==========================================  ===============

``--case small-chunks`` (issue #19) is the "new user" case instead: a
(2000, 2000) int32 array in (20, 20) chunks -- 10,000 chunks of 1,600 bytes --
with a full write, a 2-D step slice, a 500-row orthogonal selection and
10,000 coordinate points:

======================  ==========================================  ===============
workload                expression                                  chunks touched
======================  ==========================================  ===============
full write              ``arr[...] = data``                         10,000
2-D step slice          ``arr[::7, ::7]``                           10,000
oindex 500 rows         ``arr.oindex[rows, :]``, 500 random rows    ~10,000
vindex 10,000 points    ``arr.vindex[rows, cols]``, random points   ~6,300
======================  ==========================================  ===============

For that case the table also gives the geometric mean of peer time / azarr time
(the issue's "done" measure: >= 1.0 against zarr 2.18, every case >= 0.9).

Each implementation runs in its own interpreter (`benchmarks.peers` builds
and caches the peers' venvs) as a subprocess of this script in ``--worker``
mode: it builds the same array from the same seed in its own memory store
(azarr ``MemoryStore``, zarr 2.18 ``zarr.MemoryStore``, zarr 3.1
``zarr.storage.MemoryStore`` with ``zarr_format=2``), runs every workload once
to warm up and then ``--repeats`` times, and prints JSON with the timings and
a checksum of each result (the driver checks that every implementation
returned the same data). The driver runs ``--rounds`` such rounds, each
implementation once per round, so that background load on the machine hits
them alike, and reports the median over all timed calls. azarr's coroutines run on one
long-lived event loop (``asyncio.Runner``); the peers use their synchronous
``z[...]`` API, as their users do.

Usage::

    python -m benchmarks.bench_indexing [--repeats 5] [--rounds 3] [--compressors none,blosc-lz4]
                                        [--peers zarr218,zarr3] [--output PATH]
    python -m benchmarks.bench_indexing --profile "vindex 10,000 points"   # cProfile of azarr
    python -m benchmarks.bench_indexing --case small-chunks --output benchmarks/results/indexing-small-chunks.md

The table goes to ``benchmarks/results/indexing.md`` and to stdout.

This file must stay importable by the peers' interpreters in ``--worker``
mode: only the standard library and NumPy at module level.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20240611
#: case name -> shape, chunks, dtype and workloads (name -> expression).
CASES: dict[str, dict[str, Any]] = {
    "wide": {
        "shape": (10_000, 100),
        "chunks": (10, 10),
        "dtype": "float64",
        "workloads": {
            "full read": "arr[...]",
            "basic step slice": "arr[::7]",
            "oindex 500 rows": "arr.oindex[rows, :]",
            "vindex 10,000 points": "arr.vindex[rows, cols]",
        },
    },
    "small-chunks": {
        "shape": (2000, 2000),
        "chunks": (20, 20),
        "dtype": "int32",
        "workloads": {
            "full write": "arr[...] = data",
            "2-D step slice": "arr[::7, ::7]",
            "oindex 500 rows": "arr.oindex[rows, :]",
            "vindex 10,000 points": "arr.vindex[rows, cols]",
        },
    },
}
#: Workloads that write: their check is a read-back of the whole array after the warm-up.
WRITES = frozenset({"full write"})
# Set by ``--case`` before anything runs (worker and driver alike).
SHAPE: tuple[int, ...] = CASES["wide"]["shape"]
CHUNKS: tuple[int, ...] = CASES["wide"]["chunks"]
DTYPE: str = CASES["wide"]["dtype"]
WORKLOADS: dict[str, str] = CASES["wide"]["workloads"]


def select_case(name: str) -> None:
    """Make ``name`` (a key of `CASES`) the array and workloads every function uses."""
    global SHAPE, CHUNKS, DTYPE, WORKLOADS
    case = CASES[name]
    SHAPE, CHUNKS, DTYPE, WORKLOADS = case["shape"], case["chunks"], case["dtype"], case["workloads"]


COMPRESSORS = ("none", "blosc-lz4")
IMPLEMENTATIONS = ("azarr", "zarr218", "zarr3", "zarr34", "zarr34-fused", "azarr-baseline")
LABELS = {
    "azarr": "azarr",
    "zarr218": "zarr 2.18",
    "zarr3": "zarr 3.1",
    "zarr34": "zarr 3.4",
    "zarr34-fused": "zarr 3.4 fused",
    "azarr-baseline": "azarr (baseline)",
}
#: zarr-python 3.4's codec pipelines (``codec_pipeline.path``; None: its default
#: ``BatchedCodecPipeline``), from the ``zarr34-zarrs`` peer venv (Python 3.12). The zarrs
#: pipeline is not here: it supports zarr-python's local and object stores, not ``MemoryStore``.
ZARR34_PIPELINES: dict[str, str | None] = {
    "zarr34": None,
    "zarr34-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
}
PEER_VENV = {name: "zarr34-zarrs" for name in ZARR34_PIPELINES}
DEFAULT_PEERS = "zarr218,zarr34,zarr34-fused"
#: azarr importing ``$AZARR_BASELINE/azarr`` (an older checkout), for before/after in one run.
BASELINE = "azarr-baseline"
RESULTS = Path(__file__).resolve().parent / "results" / "indexing.md"

Op = Callable[[], Any]


# ---------------------------------------------------------------------------
# worker side: runs inside each implementation's interpreter


def make_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The data and the index arrays every implementation uses (same seed, same values).

    Returns
    -------
    data : numpy.ndarray
        ``SHAPE`` of ``DTYPE``: float64 rounded to 3 decimals, or int32 in [0, 1000),
        so Blosc has something to compress.
    rows500 : numpy.ndarray
        500 distinct row indices in random (unsorted) order.
    rows, cols : numpy.ndarray
        10,000 random points, unsorted, duplicates possible.
    """
    rng = np.random.default_rng(SEED)
    if DTYPE == "int32":
        data = rng.integers(0, 1000, SHAPE, dtype=np.int32)
    else:
        data = np.round(rng.standard_normal(SHAPE), 3)
    rows500 = rng.choice(SHAPE[0], 500, replace=False)
    rows = rng.integers(0, SHAPE[0], 10_000)
    cols = rng.integers(0, SHAPE[1], 10_000)
    return data, rows500, rows, cols


def _blosc() -> Any:
    import numcodecs

    return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)


def _ops(
    arr: Any,
    wrap: Callable[[Any, Any], Any],
    rows500: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    write: Callable[[], Any] | None = None,
) -> dict[str, Op]:
    ops: dict[str, Op] = {
        "full read": lambda: wrap(arr, ...),
        "basic step slice": lambda: wrap(arr, slice(None, None, 7)),
        "2-D step slice": lambda: wrap(arr, (slice(None, None, 7), slice(None, None, 7))),
        "oindex 500 rows": lambda: wrap(arr.oindex, (rows500, slice(None))),
        "vindex 10,000 points": lambda: wrap(arr.vindex, (rows, cols)),
    }
    if write is not None:
        ops["full write"] = write
    return ops


def setup_azarr(compressor: str) -> tuple[dict[str, Op], str]:
    """azarr on its ``MemoryStore``; coroutines run on one ``asyncio.Runner`` loop."""
    import asyncio

    import azarr
    from azarr.storage import MemoryStore

    data, rows500, rows, cols = make_inputs()
    runner = asyncio.Runner()
    comp = None if compressor == "none" else _blosc()
    arr = runner.run(azarr.array(data, chunks=CHUNKS, compressor=comp, store=MemoryStore()))

    def get(target: Any, sel: Any) -> Any:
        if target is arr:
            return runner.run(arr.getitem(sel))
        return runner.run(target.get(sel))

    def write() -> None:
        runner.run(arr.setitem(..., data))

    from importlib.metadata import version

    return _ops(arr, get, rows500, rows, cols, write), f"azarr {version('azarr')}"


def setup_zarr218(compressor: str) -> tuple[dict[str, Op], str]:
    """zarr-python 2.18 on ``zarr.MemoryStore``."""
    import zarr

    data, rows500, rows, cols = make_inputs()
    comp = None if compressor == "none" else _blosc()
    arr = zarr.array(data, chunks=CHUNKS, compressor=comp, store=zarr.MemoryStore())

    def write() -> None:
        arr[...] = data

    return _ops(arr, lambda t, s: t[s], rows500, rows, cols, write), f"zarr {zarr.__version__}"


def setup_zarr3(compressor: str, pipeline: str | None = None) -> tuple[dict[str, Op], str]:
    """zarr-python 3 on ``zarr.storage.MemoryStore``, Zarr v2 format, default config but for
    ``pipeline`` (``codec_pipeline.path``, set for the whole worker process)."""
    import zarr
    from zarr.storage import MemoryStore

    if pipeline is not None:
        zarr.config.set({"codec_pipeline.path": pipeline})
    data, rows500, rows, cols = make_inputs()
    arr = zarr.create_array(
        store=MemoryStore(),
        shape=SHAPE,
        chunks=CHUNKS,
        dtype=data.dtype,
        zarr_format=2,
        compressors=None if compressor == "none" else _blosc(),
        filters=None,
        fill_value=0,
    )

    def write() -> None:
        arr[...] = data

    write()
    return _ops(arr, lambda t, s: t[s], rows500, rows, cols, write), f"zarr {zarr.__version__}"


SETUPS: dict[str, Callable[[str], tuple[dict[str, Op], str]]] = {
    "azarr": setup_azarr,
    BASELINE: setup_azarr,
    "zarr218": setup_zarr218,
    "zarr3": setup_zarr3,
    **{name: lambda comp, path=path: setup_zarr3(comp, path) for name, path in ZARR34_PIPELINES.items()},
}


def run_worker(impl: str, compressor: str, repeats: int, workloads: list[str]) -> dict[str, Any]:
    """Time ``workloads`` for one implementation; the result is printed as JSON by ``--worker``.

    Returns
    -------
    dict
        ``{"impl", "version", "numpy", "compressor", "results": {workload: {"median", "min",
        "runs", "shape", "checksum"}}}``; seconds per call.
    """
    ops, version = SETUPS[impl](compressor)
    results: dict[str, Any] = {}
    for name in workloads:
        op = ops[name]
        first = np.asarray(op())  # warm-up (and the result to check)
        if name in WRITES:  # a write returns nothing: check what it stored
            first = np.asarray(ops["full read"]())
        runs = []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            op()
            runs.append(time.perf_counter() - t0)
        results[name] = {
            "median": statistics.median(runs),
            "min": min(runs),
            "runs": runs,
            "shape": list(first.shape),
            "checksum": float(np.round(first.sum(dtype=np.float64), 6)),
        }
    return {
        "impl": impl,
        "version": version,
        "numpy": np.__version__,
        "compressor": compressor,
        "results": results,
    }


def profile_azarr(workload: str, compressor: str, repeats: int, limit: int = 30) -> None:
    """Print a cProfile of azarr running ``workload`` ``repeats`` times (after a warm-up)."""
    import cProfile
    import pstats

    ops, _ = setup_azarr(compressor)
    op = ops[workload]
    op()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeats):
        op()
    profiler.disable()
    stats = pstats.Stats(profiler).strip_dirs()
    print(f"--- azarr, {workload}, {compressor}: {repeats} calls, by total time ---")
    stats.sort_stats("tottime").print_stats(limit)
    print("--- by cumulative time ---")
    stats.sort_stats("cumulative").print_stats(limit)


# ---------------------------------------------------------------------------
# driver side


def _interpreter(impl: str) -> str:
    if impl in ("azarr", BASELINE):
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENV.get(impl, impl)))


def run_impl(
    impl: str, compressor: str, repeats: int, workloads: list[str], case: str = "wide"
) -> dict[str, Any]:
    """Run one implementation's worker in its interpreter and return its JSON report.

    Raises
    ------
    RuntimeError
        The worker failed (its stderr is in the message).
    """
    cmd = [
        _interpreter(impl),
        str(Path(__file__).resolve()),
        "--worker",
        impl,
        "--compressors",
        compressor,
        "--repeats",
        str(repeats),
        "--workloads",
        json.dumps(workloads),
        "--case",
        case,
    ]
    repo = str(Path(__file__).resolve().parent.parent)
    env = None
    if impl == "azarr":
        env = {**os.environ, "PYTHONPATH": repo}
    elif impl == BASELINE:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["AZARR_BASELINE"], repo])}
    from benchmarks.peers import run_worker_json  # here: --worker runs this file in peer interpreters

    return run_worker_json(cmd, what=f"{impl} worker", env=env)


def merge_runs(merged: dict[str, dict[str, Any]], report: dict[str, Any]) -> None:
    """Pool ``report``'s timed calls into ``merged[impl]`` and recompute median and minimum."""
    into = merged.setdefault(report["impl"], {**report, "results": {}})
    for name, result in report["results"].items():
        pooled = into["results"].setdefault(name, {**result, "runs": []})
        pooled["runs"] = pooled["runs"] + result["runs"]
        pooled["median"] = statistics.median(pooled["runs"])
        pooled["min"] = min(pooled["runs"])


def check_agreement(reports: list[dict[str, Any]]) -> list[str]:
    """Names of workloads whose result shape or checksum differs between implementations."""
    bad = []
    for name in reports[0]["results"]:
        seen = {(tuple(r["results"][name]["shape"]), r["results"][name]["checksum"]) for r in reports}
        if len(seen) > 1:
            bad.append(f"{name}: {sorted(seen)}")
    return bad


def _fmt(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _cell(result: dict[str, Any]) -> str:
    low = result["min"]
    return (
        f"{_fmt(result['median'])} ({low * 1000:.1f})" if low < 1 else f"{_fmt(result['median'])} ({low:.2f})"
    )


def geometric_mean(values: list[float]) -> float:
    """The geometric mean of positive ``values`` (the summary of a set of ratios)."""
    return float(np.exp(np.mean(np.log(values))))


def markdown(
    all_reports: dict[str, list[dict[str, Any]]],
    repeats: int,
    load: tuple[float, float],
    case: str = "wide",
    note: str = "",
) -> str:
    """The results as commit-worthy markdown: one table per compressor.

    ``load`` is the 1-minute load average before and after the run: other work on the
    machine slows the multi-threaded azarr more than the single-threaded zarr 2.18.
    """
    first = next(iter(all_reports.values()))
    versions = ", ".join(f"{LABELS[r['impl']]}: {r['version']} (numpy {r['numpy']})" for r in first)
    nchunks = int(np.prod([-(-s // c) for s, c in zip(SHAPE, CHUNKS, strict=True)]))
    chunk_bytes = int(np.prod(CHUNKS)) * np.dtype(DTYPE).itemsize
    title = "Indexing overhead on an in-memory store" + (f" ({case})" if case != "wide" else "")
    lines = [
        f"# {title}",
        "",
        *([note, ""] if note else []),
        f"{SHAPE} {DTYPE} in {CHUNKS} chunks ({nchunks:,} chunks of {chunk_bytes:,} bytes); median of {repeats} "
        "calls (rounds of warm-up + timed calls, implementations interleaved), each implementation in "
        "its own interpreter, same data and indices, results checked equal.",
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"{platform.system()}. Versions: {versions}.",
        f"Load average (1 min) before / after the run: {load[0]:.1f} / {load[1]:.1f}.",
        f"Generated by `python -m benchmarks.bench_indexing --case {case}`. Cells: median (minimum); "
        "ratio = azarr median / peer median (below 1: azarr is faster); the geometric mean row gives "
        "peer / azarr (the issue's measure: above 1, azarr is faster).",
        "",
    ]
    for compressor, reports in all_reports.items():
        by_impl = {r["impl"]: r for r in reports}
        peers = [i for i in IMPLEMENTATIONS if i in by_impl and i != "azarr"]
        lines.append(f"## Compressor: {compressor}")
        lines.append("")
        header = ["workload", "expression", "azarr", *(LABELS[p] for p in peers)]
        header += [f"azarr / {LABELS[p]}" for p in peers]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join(["---", "---"] + ["---:"] * (len(header) - 2)) + " |")
        for name, expr in WORKLOADS.items():
            if name not in by_impl["azarr"]["results"]:
                continue
            mine = by_impl["azarr"]["results"][name]["median"]
            row = [name, f"`{expr}`"]
            row += [_cell(by_impl[i]["results"][name]) for i in ("azarr", *peers)]
            row += [f"{mine / by_impl[p]['results'][name]['median']:.2f}" for p in peers]
            lines.append("| " + " | ".join(row) + " |")
        names = [n for n in WORKLOADS if n in by_impl["azarr"]["results"]]
        speedups = {
            p: [by_impl[p]["results"][n]["median"] / by_impl["azarr"]["results"][n]["median"] for n in names]
            for p in peers
        }
        geo = ["**geometric mean, peer / azarr**", ""] + [""] * (1 + len(peers))
        geo += [f"**{geometric_mean(speedups[p]):.2f}** (min {min(speedups[p]):.2f})" for p in peers]
        lines.append("| " + " | ".join(geo) + " |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (driver, ``--worker`` or ``--profile`` mode)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls per workload and round")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every implementation, interleaved")
    parser.add_argument(
        "--compressors", default=",".join(COMPRESSORS), help="comma-separated: none, blosc-lz4"
    )
    parser.add_argument(
        "--peers",
        default=DEFAULT_PEERS,
        help="comma-separated peers ('' for none): " + ", ".join(IMPLEMENTATIONS[1:]),
    )
    parser.add_argument("--workloads", default=None, help="JSON list of workload names (default: the case's)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown file to write")
    parser.add_argument(
        "--case", choices=tuple(CASES), default="wide", help="array shape / chunking / workloads"
    )
    parser.add_argument(
        "--note", default="", help="a line put under the title (e.g. 'quick run, loaded host')"
    )
    parser.add_argument("--worker", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--profile", metavar="WORKLOAD", help="cProfile azarr on one workload and exit")
    args = parser.parse_args(argv)
    select_case(args.case)
    compressors = [c for c in args.compressors.split(",") if c]
    workloads = json.loads(args.workloads) if args.workloads else list(WORKLOADS)

    if args.worker:
        print(json.dumps(run_worker(args.worker, compressors[0], args.repeats, workloads)))
        return 0
    if args.profile:
        profile_azarr(args.profile, compressors[0], args.repeats)
        return 0

    impls = ["azarr", *(p for p in args.peers.split(",") if p)]
    load_before = os.getloadavg()[0]
    all_reports: dict[str, list[dict[str, Any]]] = {}
    for compressor in compressors:
        merged: dict[str, dict[str, Any]] = {}
        # Rounds interleave the implementations in time, so background load hits them alike.
        for round_ in range(args.rounds):
            reports = []
            for impl in impls:
                print(
                    f"[bench] round {round_ + 1}/{args.rounds}: {LABELS[impl]}, compressor {compressor} ...",
                    file=sys.stderr,
                    flush=True,
                )
                reports.append(run_impl(impl, compressor, args.repeats, workloads, args.case))
            disagree = check_agreement(reports)
            if disagree:
                raise SystemExit("implementations returned different data:\n" + "\n".join(disagree))
            for report in reports:
                merge_runs(merged, report)
        all_reports[compressor] = [merged[impl] for impl in impls]
    load = (load_before, os.getloadavg()[0])
    text = markdown(all_reports, args.repeats * args.rounds, load, args.case, args.note)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(text)
    print(f"[bench] written to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
