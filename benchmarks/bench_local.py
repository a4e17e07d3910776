"""Local disk: azarr against zarr-python 2.18 / 3.4 (three pipelines) and TensorStore on a directory.

Cases (``--cases``):

* ``blosc-lz4``, ``zstd``, ``none`` -- a ``--mib`` MiB (default 1024) float32 array of
  shape ``(mib * 32, 8192)`` in ``(256, 1024)`` chunks (1 MiB each before compression),
  Blosc-LZ4 (clevel 5, byte shuffle), Zstd (level 3) or no compressor;
* ``small-chunks`` -- issue #19's 10,000-chunk case on disk: (2000, 2000) int32 in
  (20, 20) chunks (1,600 bytes each), Blosc-LZ4.

For each case and implementation the driver removes the directory, runs a worker that
creates the array and writes all of it (timed), then -- with ``--drop-caches``, as root --
runs ``sync`` and ``echo 3 > /proc/sys/vm/drop_caches`` so the read comes from the disk,
and runs a second worker that opens the array and reads all of it (timed). Without
``--drop-caches`` the files are freshly written and read once, so the read mostly hits the
page cache. Dropping the cache is machine-wide, which is why this never runs in the test suite.

Implementations, each in its own interpreter (`benchmarks.peers` builds the venvs):
azarr ``LocalStore`` (coroutines on one ``asyncio.Runner`` loop), zarr 2.18 ``DirectoryStore``,
zarr-python 3.4 ``LocalStore`` (``zarr_format=2``) with its default ``BatchedCodecPipeline``
(``zarr34``), its ``FusedCodecPipeline`` (``zarr34-fused``) and the zarrs Rust pipeline
(``zarr34-zarrs``), all from one Python 3.12 venv, TensorStore ``zarr`` driver on the ``file``
kvstore, and ``azarr-baseline`` (``$AZARR_BASELINE/azarr``) for before/after (``zarr3``,
zarr-python 3.1, on request). TensorStore's
``file`` kvstore fsyncs each chunk and its directory by default (the others write a temporary
file and rename it without fsync); ``--ts-no-fsync`` sets its ``file_io_sync`` context
resource to false so the writes compare like for like. The default keeps TensorStore's default.
``--sync`` runs ``sync`` before each timed write: without it a write can be throttled by the
previous worker's dirty pages still going to disk (which implementation follows which then
matters).

Each row reports wall seconds (median over ``--rounds``, implementations interleaved within a
round), throughput, and the worker's CPU seconds (user + system over all its threads,
``getrusage``) -- the client CPU the issue asks for. Checksums of what was read are compared.
Below each table, the ratios of each implementation's fastest round.

Why both: on a VM whose balloon device reports free pages to the host (virtio-balloon free
page reporting; the benchmark machine has it), memory the guest freed is handed back, and
touching it again faults through the hypervisor. A write's page cache and a read's output
array are 1 GiB of such memory. Measured with azarr's own 1 GiB uncompressed write: 0.2-0.9 s
right after the previous array's files were deleted, 1.2-1.6 s (2.0-2.7 s of system time)
when the deletion was 5 s earlier. Every implementation pays it, but how much depends on how
long ago the previous worker freed its memory, so medians of a few rounds mix the two
states; the fastest round is the one least disturbed. ``--settle S`` waits S seconds before
each timed read instead, so every reader finds the previous worker's memory handed back (the
state of a process started on an idle host; the balloon reports freed memory within ~2 s).

Usage::

    python -m benchmarks.bench_local                        # full: 1 GiB, 3 rounds, every case
    python -m benchmarks.bench_local --mib 128 --rounds 1   # quick
    python -m benchmarks.bench_local --drop-caches          # cold reads (root only, machine-wide)

Results go to ``benchmarks/results/local.{md,json}`` (``--output`` changes the stem).

This file must stay importable by the peers' interpreters in ``--worker`` mode: only the
standard library and NumPy at module level.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20241123
IMPLEMENTATIONS = (
    "azarr",
    "zarr218",
    "zarr3",
    "zarr34",
    "zarr34-fused",
    "zarr34-zarrs",
    "tensorstore",
    "azarr-baseline",
)
LABELS = {
    "azarr": "azarr",
    "zarr218": "zarr 2.18",
    "zarr3": "zarr 3.1",
    "zarr34": "zarr 3.4",
    "zarr34-fused": "zarr 3.4 fused",
    "zarr34-zarrs": "zarr 3.4 + zarrs",
    "tensorstore": "TensorStore",
    "azarr-baseline": "azarr (baseline)",
}
#: zarr-python 3.4's codec pipelines (``codec_pipeline.path``), all from the ``zarr34-zarrs``
#: peer venv (Python 3.12): None is its default ``BatchedCodecPipeline``.
ZARR34_PIPELINES: dict[str, str | None] = {
    "zarr34": None,
    "zarr34-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarr34-zarrs": "zarrs.ZarrsCodecPipeline",
}
#: The venv (`benchmarks.peers`) of each peer that is not named after its own.
PEER_VENV = {name: "zarr34-zarrs" for name in ZARR34_PIPELINES}
DEFAULT_PEERS = "zarr218,zarr34,zarr34-fused,zarr34-zarrs,tensorstore"
BASELINE = "azarr-baseline"
#: What each worker imports before its clock starts.
IMPORTS: dict[str, tuple[str, ...]] = {
    "azarr": ("azarr", "azarr.storage", "numcodecs"),
    BASELINE: ("azarr", "azarr.storage", "numcodecs"),
    "zarr218": ("zarr", "numcodecs"),
    "zarr3": ("zarr", "zarr.storage", "numcodecs"),
    "zarr34": ("zarr", "zarr.storage", "numcodecs"),
    "zarr34-fused": ("zarr", "zarr.storage", "numcodecs"),
    "zarr34-zarrs": ("zarr", "zarr.storage", "numcodecs", "zarrs"),
    "tensorstore": ("tensorstore",),
}
CASES = ("blosc-lz4", "zstd", "none", "small-chunks")
RESULTS = Path(__file__).resolve().parent / "results" / "local"
WORKDIR = Path(__file__).resolve().parent.parent / ".cache" / "bench-local"


# ---------------------------------------------------------------------------
# worker side: runs inside each implementation's interpreter


def geometry(case: str, mib: int) -> tuple[tuple[int, int], tuple[int, int], str, str]:
    """``(shape, chunks, dtype, compressor)`` of ``case`` (``mib`` sizes the large cases)."""
    if case == "small-chunks":
        return (2000, 2000), (20, 20), "int32", "blosc-lz4"
    return (mib * 32, 8192), (256, 1024), "float32", case


def make_data(shape: tuple[int, int], dtype: str) -> np.ndarray:
    """The array every implementation writes: seeded, compressible (about 2-3x with Blosc-LZ4).

    A 256-row random block rounded to 2 decimals, tiled down the rows with a per-block offset,
    so building 1 GiB costs about a second rather than the tens a full random draw would.
    """
    rng = np.random.default_rng(SEED)
    if dtype == "int32":
        return rng.integers(0, 1000, shape, dtype=np.int32)
    block = np.round(rng.standard_normal((256, shape[1])), 2).astype(np.float32)
    out = np.empty(shape, dtype=np.float32)
    for i, start in enumerate(range(0, shape[0], 256)):
        stop = min(start + 256, shape[0])
        np.add(block[: stop - start], np.float32(i % 100), out=out[start:stop])
    return out


def _numcodecs_compressor(name: str) -> Any:
    import numcodecs

    if name == "blosc-lz4":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE)
    if name == "zstd":
        return numcodecs.Zstd(level=3)
    return None


def _ts_compressor(name: str) -> Any:
    if name == "blosc-lz4":
        return {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}
    if name == "zstd":
        return {"id": "zstd", "level": 3}
    return None


def write_array(
    impl: str, path: str, data: np.ndarray, chunks: tuple[int, int], comp: str, opts: dict[str, Any]
) -> None:
    """Create the array at ``path`` and write ``data`` into it with ``impl``'s usual API."""
    if impl in ("azarr", BASELINE):
        import asyncio

        import azarr
        from azarr.storage import LocalStore

        async def go() -> None:
            arr = await azarr.create(
                data.shape,
                chunks=chunks,
                dtype=data.dtype,
                compressor=_numcodecs_compressor(comp),
                store=LocalStore(path),
                overwrite=True,
            )
            await arr.setitem(..., data)

        asyncio.run(go())
    elif impl == "zarr218":
        import zarr

        arr = zarr.open_array(
            zarr.DirectoryStore(path),
            mode="w",
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            compressor=_numcodecs_compressor(comp),
        )
        arr[...] = data
    elif impl == "zarr3" or impl in ZARR34_PIPELINES:
        import zarr
        from zarr.storage import LocalStore as Z3LocalStore

        comp_obj = _numcodecs_compressor(comp)
        with _zarr3_config(impl):
            arr = zarr.create_array(
                store=Z3LocalStore(path),
                shape=data.shape,
                chunks=chunks,
                dtype=data.dtype,
                zarr_format=2,
                compressors=comp_obj,
                filters=None,
                fill_value=0,
                overwrite=True,
            )
            arr[...] = data
    elif impl == "tensorstore":
        import tensorstore as ts

        spec = {
            "driver": "zarr",
            "kvstore": {"driver": "file", "path": path},
            "metadata": {
                "shape": list(data.shape),
                "chunks": list(chunks),
                "dtype": data.dtype.str,
                "compressor": _ts_compressor(comp),
                "fill_value": 0,
                "order": "C",
            },
            "create": True,
            "delete_existing": True,
        }
        ctx = ts.Context({"file_io_sync": False}) if opts.get("ts_no_fsync") else ts.Context()
        arr = ts.open(spec, context=ctx).result()
        arr.write(data).result()
    else:
        raise ValueError(impl)


def _zarr3_config(impl: str) -> Any:
    """zarr-python 3's config for ``impl``: its codec pipeline (zarr 3.4 peers), else as it comes."""
    import contextlib

    pipeline = ZARR34_PIPELINES.get(impl)
    if pipeline is None:
        return contextlib.nullcontext()
    import zarr

    return zarr.config.set({"codec_pipeline.path": pipeline})


def read_array(impl: str, path: str) -> np.ndarray:
    """Open the array at ``path`` and read all of it with ``impl``'s usual API."""
    if impl in ("azarr", BASELINE):
        import asyncio

        import azarr
        from azarr.storage import LocalStore

        async def go() -> Any:
            arr = await azarr.open_array(LocalStore(path), mode="r")
            return await arr.getitem(...)

        return np.asarray(asyncio.run(go()))
    if impl == "zarr218":
        import zarr

        return np.asarray(zarr.open_array(zarr.DirectoryStore(path), mode="r")[...])
    if impl == "zarr3" or impl in ZARR34_PIPELINES:
        import zarr
        from zarr.storage import LocalStore as Z3LocalStore

        with _zarr3_config(impl):
            return np.asarray(zarr.open_array(store=Z3LocalStore(path), mode="r")[...])
    if impl == "tensorstore":
        import tensorstore as ts

        arr = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": path}}).result()
        return np.asarray(arr.read().result())
    raise ValueError(impl)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _version(impl: str) -> str:
    from importlib.metadata import version

    if impl == "zarr34-zarrs":
        return f"zarr {version('zarr')} + zarrs {version('zarrs')}"
    name = "azarr" if impl in ("azarr", BASELINE) else "tensorstore" if impl == "tensorstore" else "zarr"
    return f"{name} {version(name)}"


def run_worker(impl: str, op: str, case: str, mib: int, path: str, opts: dict[str, Any]) -> dict[str, Any]:
    """Time one write or read; returns wall and CPU seconds, bytes and a checksum."""
    shape, chunks, dtype, comp = geometry(case, mib)
    # Imports stay out of the timed region (azarr pulls in aiohttp, fsspec, ...).
    for module in IMPORTS[impl]:
        __import__(module)
    if impl != "tensorstore":
        _numcodecs_compressor(comp)
    data = make_data(shape, dtype) if op == "write" else None
    # The imports leave the collector owing its first full pass over their objects: the
    # first 7,000 or so new objects trigger it, in whichever timed region comes first
    # (7-10 ms of azarr's 0.1 s small-chunk read). It is import cost, so it runs here.
    gc.collect()
    if data is not None:
        t0, c0 = time.perf_counter(), _cpu()
        write_array(impl, path, data, chunks, comp, opts)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
        out = data
    else:
        t0, c0 = time.perf_counter(), _cpu()
        out = read_array(impl, path)
        wall, cpu = time.perf_counter() - t0, _cpu() - c0
    stored = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
    return {
        "impl": impl,
        "op": op,
        "case": case,
        "wall": wall,
        "cpu": cpu,
        "nbytes": int(out.nbytes),
        "stored_bytes": stored,
        "shape": list(out.shape),
        "checksum": float(out[::97, ::89].sum(dtype=np.float64)),
        "version": _version(impl),
    }


# ---------------------------------------------------------------------------
# driver side


def _interpreter(impl: str) -> str:
    if impl in ("azarr", BASELINE):
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENV.get(impl, impl)))


def drop_caches() -> bool:
    """``sync`` then drop the page cache (root only). False when the machine does not allow it."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def run_one(impl: str, op: str, case: str, mib: int, path: Path, opts: dict[str, Any]) -> dict[str, Any]:
    """Run one worker subprocess and return its JSON report.

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
        "--op",
        op,
        "--cases",
        case,
        "--mib",
        str(mib),
        "--path",
        str(path),
        "--opts",
        json.dumps(opts),
    ]
    repo = str(Path(__file__).resolve().parent.parent)
    env = None
    if impl == "azarr":
        env = {**os.environ, "PYTHONPATH": repo}
    elif impl == BASELINE:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.environ["AZARR_BASELINE"], repo])}
    from benchmarks.peers import run_worker_json  # here: --worker runs this file in peer interpreters

    return run_worker_json(cmd, what=f"{impl} {op} {case}", env=env)


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median wall and CPU seconds over rounds of one (case, op, impl)."""
    walls = [r["wall"] for r in runs]
    return {
        "wall": statistics.median(walls),
        "min": min(walls),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "nbytes": runs[0]["nbytes"],
        "stored_bytes": runs[0]["stored_bytes"],
        "runs": walls,
        "version": runs[0]["version"],
    }


def markdown(results: dict[str, Any], meta: dict[str, Any]) -> str:
    """The results as commit-worthy markdown: one table per case, write and read rows."""
    impls = meta["impls"]
    peers = [i for i in impls if i != "azarr"]
    versions = ", ".join(f"{LABELS[i]}: {v}" for i, v in meta["versions"].items())
    lines = [
        "# Local disk: azarr vs zarr-python 2.18 / 3.4 and TensorStore",
        "",
        *([meta["note"], ""] if meta["note"] else []),
        f"{meta['mib']} MiB float32 arrays in 1 MiB (256, 1024) chunks, plus the (2000, 2000) int32 "
        f"(20, 20)-chunk case; median of {meta['rounds']} round(s), implementations interleaved (each round starts with the next one). "
        f"Page cache {'dropped before every read' if meta['dropped'] else 'NOT dropped (files written fresh and read once: warm reads)'}. "
        f"TensorStore fsync: {'off (--ts-no-fsync)' if meta['ts_no_fsync'] else 'on (its default; fsync is nearly free on this VM)'}.",
        *(["`sync` before every write (--sync)."] if meta.get("sync") else []),
        *(
            [
                f"Each read started {meta['settle']:g} s after its write ended (--settle): freed memory "
                "has been handed back to the VM's host by then, for every reader alike."
            ]
            if meta.get("settle")
            else []
        ),
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}. "
        f"Load average (1 min) before / after: {meta['load'][0]:.1f} / {meta['load'][1]:.1f}. Versions: {versions}.",
        "Cells: wall seconds (client CPU seconds, user + system, all threads). Ratio = peer wall / azarr "
        "wall (above 1: azarr is faster). Issue #33 targets: >= 1.0 vs TensorStore and vs zarr 3.4 + zarrs, "
        ">= 1.2 vs the faster of zarr 3.4's default and fused pipelines (the Targets line under each table). "
        "Under each table, the same ratios on each implementation's fastest round (see the module "
        "docstring: on a VM that hands freed memory back to its host, who pays for the page faults "
        "varies from round to round).",
        "",
    ]
    for case in meta["cases"]:
        lines += [f"## {case}", ""]
        header = ["op", *(LABELS[i] for i in impls), "MiB/s azarr", *(f"{LABELS[p]} / azarr" for p in peers)]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| " + " | ".join(["---"] + ["---:"] * (len(header) - 1)) + " |")
        for op in ("write", "read"):
            cell = results[case][op]
            mine = cell["azarr"]
            row = [op, *(f"{cell[i]['wall']:.2f} s ({cell[i]['cpu']:.2f})" for i in impls)]
            row.append(f"{mine['nbytes'] / 2**20 / mine['wall']:.0f}")
            row += [f"{cell[p]['wall'] / mine['wall']:.2f}" for p in peers]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
        for op in ("write", "read"):
            cell = results[case][op]
            fastest = ", ".join(f"{LABELS[p]} {cell[p]['min'] / cell['azarr']['min']:.2f}" for p in peers)
            lines.append(f"Fastest round, {op}: azarr {cell['azarr']['min']:.2f} s; peer / azarr: {fastest}.")
        lines += targets(results[case], impls)
        stored = {i: results[case]["write"][i]["stored_bytes"] / 2**20 for i in impls}
        lines.append("")
        lines.append("Stored MiB: " + ", ".join(f"{LABELS[i]} {v:.1f}" for i, v in stored.items()) + ".")
        lines.append("")
    return "\n".join(lines)


def targets(cell_ops: dict[str, Any], impls: list[str]) -> list[str]:
    """Issue #33's targets for one case, as markdown lines: per op, azarr against TensorStore
    (>= 1.0), zarr 3.4 + zarrs (>= 1.0) and the faster of zarr 3.4's default and fused
    pipelines (>= 1.2), from the medians and (in brackets) the fastest rounds."""
    bars = [
        ("TensorStore", ["tensorstore"], 1.0),
        ("zarr 3.4 + zarrs", ["zarr34-zarrs"], 1.0),
        ("best zarr 3.4 (default/fused)", ["zarr34", "zarr34-fused"], 1.2),
    ]
    out = []
    for op in ("write", "read"):
        cell, parts = cell_ops[op], []
        for label, peers, goal in bars:
            ran = [p for p in peers if p in impls]
            if not ran:
                continue
            median = min(cell[p]["wall"] for p in ran) / cell["azarr"]["wall"]
            fastest = min(cell[p]["min"] for p in ran) / cell["azarr"]["min"]
            verdict = "yes" if median >= goal else "**no**"
            parts.append(f"{label} {median:.2f} ({fastest:.2f}) >= {goal:.1f} {verdict}")
        if parts:
            out.append(f"Targets, {op}: " + "; ".join(parts) + ".")
    return ["", *out] if out else []


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (driver or ``--worker`` mode)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=1024, help="size of the large arrays, MiB")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, implementations interleaved")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    parser.add_argument(
        "--peers", default=DEFAULT_PEERS, help="comma-separated peers: " + ", ".join(IMPLEMENTATIONS[1:])
    )
    parser.add_argument("--drop-caches", action="store_true", help="drop the page cache before reads (root)")
    parser.add_argument("--ts-no-fsync", action="store_true", help="TensorStore file_io_sync=false")
    parser.add_argument(
        "--sync",
        action="store_true",
        help="os.sync() before each write, so dirty pages of the previous worker do not throttle it",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait before each timed read, so every reader finds freed memory handed back",
    )
    parser.add_argument("--workdir", type=Path, default=WORKDIR, help="directory for the arrays")
    parser.add_argument("--output", type=Path, default=RESULTS, help="results stem (.md and .json)")
    parser.add_argument("--note", default="", help="a line put under the title")
    parser.add_argument("--worker", choices=IMPLEMENTATIONS, help=argparse.SUPPRESS)
    parser.add_argument("--op", choices=("write", "read"), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--opts", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown case(s) {sorted(unknown)}; choose from {', '.join(CASES)}")

    if args.worker:
        report = run_worker(args.worker, args.op, cases[0], args.mib, args.path, json.loads(args.opts))
        print(json.dumps(report))
        return 0

    impls = ["azarr", *(p for p in args.peers.split(",") if p)]
    opts = {"ts_no_fsync": args.ts_no_fsync}
    load_before = os.getloadavg()[0]
    runs: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    dropped = args.drop_caches
    for round_ in range(args.rounds):
        # Each round starts with the next implementation: what ran just before (deleting
        # 10,000 files, 256 MiB of dirty pages still being written back) slows the next
        # one's write and read, and a fixed order gave it to azarr every time.
        shift = round_ % len(impls)
        order = impls[shift:] + impls[:shift]
        for case in cases:
            for impl in order:
                path = args.workdir / f"{impl}-{case}.zarr"
                shutil.rmtree(path, ignore_errors=True)
                print(
                    f"[bench] round {round_ + 1}/{args.rounds}: {case}, {LABELS[impl]} ...",
                    file=sys.stderr,
                    flush=True,
                )
                if args.sync:
                    os.sync()
                w = run_one(impl, "write", case, args.mib, path, opts)
                if args.drop_caches:
                    dropped = drop_caches() and dropped
                if args.settle:
                    time.sleep(args.settle)
                r = run_one(impl, "read", case, args.mib, path, opts)
                if (r["shape"], r["checksum"]) != (w["shape"], w["checksum"]):
                    raise SystemExit(f"{impl} {case}: read back differs from what was written: {w} {r}")
                runs.setdefault(case, {}).setdefault("write", {}).setdefault(impl, []).append(w)
                runs[case].setdefault("read", {}).setdefault(impl, []).append(r)
                shutil.rmtree(path, ignore_errors=True)
    results = {
        case: {op: {impl: summarise(v) for impl, v in by_impl.items()} for op, by_impl in ops.items()}
        for case, ops in runs.items()
    }
    meta = {
        "mib": args.mib,
        "rounds": args.rounds,
        "cases": cases,
        "impls": impls,
        "dropped": dropped,
        "ts_no_fsync": args.ts_no_fsync,
        "settle": args.settle,
        "load": (load_before, os.getloadavg()[0]),
        "note": args.note,
        "sync": args.sync,
        "versions": {i: results[cases[0]]["write"][i]["version"] for i in impls},
    }
    text = markdown(results, meta)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".md").write_text(text)
    args.output.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(text)
    print(f"[bench] written to {args.output}.{{md,json}}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
