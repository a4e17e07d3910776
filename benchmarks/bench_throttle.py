"""Reading behind an object store that throttles: azarr, zarr-python 3.4 + obstore, TensorStore.

SeaweedFS (``weed mini``) behind the fault proxy (``tests/fault_proxy.py``) configured as
an overloaded server: it serves at most ``--k`` requests at once and ``--rate`` per
second (a token bucket of ``rate / 10``), refusing the rest at once with ``503
SlowDown``, after ``--latency-ms`` of added latency per request. K and R are chosen so
64 concurrent readers overload it (64 > K, and 64 per request latency > R).

Per implementation, six readers start together and each reads the whole array
(float32, 8192 x 8192 = 256 MiB, 256 KiB Blosc-lz4 chunks: 1,024 GETs per read): one
process running four threads, each with its own event loop (``asyncio.run`` per
thread; TensorStore from its thread), and two more processes with one reader each.
Every reader's result is checked against the MD5 of the array written. Reported:

* failed reads (a reader whose read raised);
* goodput: requests served per second while all six readers ran, against the cap R;
* throttled: refused / all requests after the first 2 s (the proxy's timeline);
* retries: azarr's counters; for peers the refusals (each refused request is sent again);
* peak store calls in flight per process (azarr: counted around its store's calls; its
  budget should keep it <= ``max_requests`` however many loops), and azarr's adaptive limit.

``azarr-baseline`` is the azarr in ``$AZARR_BASELINE`` (a directory holding an older
``azarr/``, e.g. ``git archive main azarr | tar -x -C DIR``): before/after in one run.
Implementations run one after another (never together), ``--rounds`` times interleaved.
Results: ``benchmarks/results/throttle.{md,json}``.

Usage::

    python -m benchmarks.bench_throttle                       # azarr, zarr 3.4 + obstore, TensorStore
    AZARR_BASELINE=/tmp/base python -m benchmarks.bench_throttle --impls azarr,azarr-baseline
    python -m benchmarks.bench_throttle --quick               # 64 MiB

Run it under the heavy lock on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
WORKER = BENCH_DIR / "throttle_workers.py"
CHUNKS = (256, 256)  # float32: 256 KiB per chunk
IMPLS = ("azarr", "azarr-baseline", "zarr3-obstore", "tensorstore")
PEER_VENV = {"zarr3-obstore": "zarr34-obstore", "tensorstore": "tensorstore"}
LABELS = {
    "azarr": "azarr (this checkout)",
    "azarr-baseline": "azarr before (per-loop budget, fixed limit)",
    "zarr3-obstore": "zarr-python 3.4 + obstore",
    "tensorstore": "TensorStore",
}
THREADS_PER_PROCESS = (4, 1, 1)  # one process with four loops, two with one
START_DELAY_S = 0.2  # after every worker is ready: all readers start at the same moment
WORKER_TIMEOUT_S = 900.0
WARM_UP_S = 2.0  # throttled share counted after this


def _log(msg: str) -> None:
    print(f"[bench-throttle] {msg}", file=sys.stderr, flush=True)


def interpreter(impl: str) -> str:
    """The python that runs ``impl``'s worker (peers: their cached venvs)."""
    if impl not in PEER_VENV:
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENV[impl]))


def _pythonpath(impl: str) -> str:
    if impl == "azarr-baseline":
        baseline = os.environ.get("AZARR_BASELINE")
        if not baseline:
            raise SystemExit("azarr-baseline needs AZARR_BASELINE=<directory holding an older azarr/>")
        return baseline
    return str(REPO_ROOT) if impl == "azarr" else ""


async def _write(server: Any, bucket: str, prefix: str, shape: tuple[int, int]) -> str:
    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import digest, make_data, numcodecs_compressor

    data = make_data(shape)
    store = S3Store(f"{bucket}/{prefix}", storage_options=server.storage_options)
    try:
        arr = await azarr.create(
            shape=shape, chunks=CHUNKS, dtype="<f4", compressor=numcodecs_compressor("blosc-lz4"), store=store
        )
        await arr.set_basic_selection(..., data)
    finally:
        await store.close()
    return digest(data)


def run_impl(impl: str, task: dict[str, Any], proxy: Any) -> dict[str, Any]:
    """Start the impl's three worker processes together; their reports and the proxy's counters."""
    python = interpreter(impl)
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "PYTHONPATH": _pythonpath(impl)}
    proxy.configure(**task["throttle"])
    procs = []
    for threads in THREADS_PER_PROCESS:
        proc = subprocess.Popen(
            [python, str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({**task, "impl": impl, "threads": threads}) + "\n")
        proc.stdin.flush()
        procs.append(proc)
    for proc in procs:  # imports done everywhere before anyone starts
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            for other in procs:
                other.kill()
                other.wait()
            raise RuntimeError(f"{impl} worker did not get ready: {line!r} {proc.stderr.read()[-2000:]}")
    start_at = time.time() + START_DELAY_S
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write(f"{start_at}\n")
        proc.stdin.close()
    time.sleep(max(0.0, start_at - time.time()))
    proxy.reset_counters()  # the timeline starts with the readers
    reports = []
    for proc in procs:
        assert proc.stdout is not None and proc.stderr is not None
        try:
            proc.wait(WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        out, err = proc.stdout.read(), proc.stderr.read()
        if proc.returncode != 0 or not out.strip():
            reports.append({"impl": impl, "crashed": f"exit {proc.returncode}: {err[-2000:]}", "readers": []})
        else:
            reports.append(json.loads(out.strip().splitlines()[-1]))
    counters = proxy.counters()
    proxy.clear_faults()
    return {"impl": impl, "start_at": start_at, "processes": reports, "proxy": dataclasses.asdict(counters)}


def summarize(run: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    """The figures of one implementation's run (see the module docstring)."""
    readers = [r for p in run["processes"] for r in p["readers"]]
    crashed = [p["crashed"] for p in run["processes"] if "crashed" in p]
    expected = sum(THREADS_PER_PROCESS)
    failed = expected - sum(1 for r in readers if r.get("ok") and r.get("digest") == task["digest"])
    errors = sorted({r["error"][:300] for r in readers if not r.get("ok")} | {c[:300] for c in crashed})
    ends = [r["finished_at"] - run["start_at"] for r in readers if "finished_at" in r]
    timeline = run["proxy"]["timeline"]
    served = [s for s, _ in timeline]
    refused = [r for _, r in timeline]
    all_running = int(min(ends)) if ends else 0  # whole seconds while every reader still read
    rate = task["throttle"]["throttle_rate"]
    busy = served[:all_running] if all_running else served
    goodput = sum(busy) / len(busy) if busy else 0.0
    after = slice(int(WARM_UP_S), None)
    total_after = sum(served[after]) + sum(refused[after])
    out: dict[str, Any] = {
        "impl": run["impl"],
        "readers": expected,
        "failed": failed,
        "errors": errors,
        "seconds": max(ends) if ends else float("nan"),
        "first_done_s": min(ends) if ends else float("nan"),
        "served": sum(served),
        "refused": sum(refused),
        "goodput": goodput,
        "goodput_ratio": goodput / rate,
        "goodput_whole": sum(served) / max(ends) if ends else 0.0,
        "throttled_after_warmup": (sum(refused[after]) / total_after) if total_after else 0.0,
        "throttled_all": sum(refused) / max(1, sum(served) + sum(refused)),
        "proxy_peak_in_flight": run["proxy"]["peak_in_flight"],
        "timeline": timeline,
    }
    stats = [p.get("stats") for p in run["processes"] if p.get("stats")]
    if stats:
        out["retries"] = sum(s["retries"] for s in stats)
        out["throttled_seen"] = sum(s.get("throttled", 0) for s in stats)
        out["limit_min"] = [s.get("concurrency_limit_min") for s in stats]
        out["limit_end"] = [s.get("concurrency_limit") for s in stats]
        out["peak_per_process"] = [p.get("peak_store_calls") for p in run["processes"]]
        out["max_requests"] = run["processes"][0].get("max_requests")
        medians = []
        for p in run["processes"]:
            busy_limits = [lim for t, lim, _ in p.get("limits", []) if 0 <= t <= min(ends or [0])]
            medians.append(statistics.median(busy_limits) if busy_limits else None)
        out["limit_median"] = medians
    else:
        out["retries"] = sum(refused)  # every refused request is sent again (or its read failed)
    out["versions"] = next((p["versions"] for p in run["processes"] if "versions" in p), {})
    return out


def markdown(results: dict[str, Any]) -> str:
    """The results as committed markdown."""
    cfg = results["config"]
    t = cfg["throttle"]
    lines = [
        "# Reading behind a throttling object store",
        "",
        f"SeaweedFS {results['weed_version']} behind the fault proxy acting as an overloaded server: at most "
        f"K = {t['throttle_in_flight']} requests served at once and R = {t['throttle_rate']:g} requests/s "
        f"(token bucket of {t['throttle_rate'] / 10:g}), the rest refused at once with `503 SlowDown`; "
        f"{t['latency_ms']:g} ms added to every request. Array: float32 {cfg['shape'][0]} x {cfg['shape'][1]} "
        f"({cfg['size_mib']} MiB), {CHUNKS[0]} x {CHUNKS[1]} Blosc-lz4 chunks "
        f"({cfg['chunks_per_read']} GETs per read). Six readers start together, each reads the whole array: "
        "one process with four threads (each its own event loop), two processes with one. Every result "
        "checked against the written array's MD5. Implementations one after another, "
        f"{cfg['rounds']} round(s); the table shows the median round (by goodput) of each.",
        "",
        f"azarr at commit {results['azarr_commit']}. Machine: {results['machine']}. Generated by "
        f"`python -m benchmarks.bench_throttle {' '.join(cfg['argv'])}` in {results['wall_s']:.0f} s.",
        "",
        "| implementation | failed reads | goodput (req/s, all six reading) | of R | throttled after 2 s "
        "| retries | wall (s) | peak in flight per process | adaptive limit (median, min) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for impl in IMPLS:
        runs = results["summary"].get(impl)
        if not runs:
            continue
        s = sorted(runs, key=lambda r: r["goodput"])[len(runs) // 2]
        peaks = "/".join(str(x) for x in s.get("peak_per_process", [])) or "—"
        if s.get("max_requests"):
            peaks += f" (max {s['max_requests']})"
        limits = "—"
        if s.get("limit_median") and any(m is not None for m in s["limit_median"]):
            med = "/".join("?" if m is None else f"{m:g}" for m in s["limit_median"])
            low = "/".join("?" if m is None else str(m) for m in s.get("limit_min", []))
            limits = f"{med} ({low})"
        lines.append(
            f"| {LABELS[impl]} | {s['failed']} of {s['readers']} | {s['goodput']:.0f} | "
            f"{100 * s['goodput_ratio']:.0f} % | {100 * s['throttled_after_warmup']:.1f} % | {s['retries']} | "
            f"{s['seconds']:.1f} | {peaks} | {limits} |"
        )
    lines += ["", "Versions: " + "; ".join(f"{LABELS[i]}: {v}" for i, v in results["versions"].items()), ""]
    errors = {i: s["errors"] for i, runs in results["summary"].items() for s in runs if s["errors"]}
    if errors:
        lines += ["Errors (first of each kind):", ""]
        for impl, errs in errors.items():
            for err in errs[:3]:
                lines.append(f"- {LABELS[impl]}: `{err}`")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--size-mib", type=int, default=256, help="array size, a multiple of 64 (default 256)"
    )
    parser.add_argument("--k", type=int, default=24, help="requests the server serves at once (default 24)")
    parser.add_argument(
        "--rate", type=float, default=150.0, help="requests/s the server serves (default 150)"
    )
    parser.add_argument("--latency-ms", type=float, default=50.0, help="added to every request (default 50)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds, implementations interleaved")
    parser.add_argument("--impls", default="azarr,zarr3-obstore,tensorstore", help="comma-separated")
    parser.add_argument("--quick", action="store_true", help="64 MiB")
    parser.add_argument("--name", default="throttle", help="basename of the result files")
    args = parser.parse_args(argv)
    if args.quick:
        args.size_mib = 64
    impls = [i for i in args.impls.split(",") if i]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise SystemExit(f"unknown implementations {unknown}; choose from {IMPLS}")
    cols = 8192
    rows = args.size_mib * 2**20 // (cols * 4)
    if rows % CHUNKS[0] or rows == 0:
        raise SystemExit("--size-mib must be a positive multiple of 64")
    shape = (rows, cols)

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from fault_proxy import FaultProxy
    from servers import start_seaweedfs

    from benchmarks.bench_cloud import _azarr_commit, _weed_version

    for impl in impls:  # build peer venvs before any server starts
        interpreter(impl)
    t0 = time.monotonic()
    server = start_seaweedfs()
    proxy = None
    try:
        bucket = server.create_bucket()
        _log(f"writing {args.size_mib} MiB ...")
        expected = asyncio.run(_write(server, bucket, "data", shape))
        proxy = FaultProxy.start(server.endpoint_url)
        task = {
            "endpoint": proxy.url,
            "key": server.key,
            "secret": server.secret,
            "bucket": bucket,
            "prefix": "data",
            "digest": expected,
            "throttle": {
                "throttle_in_flight": args.k,
                "throttle_rate": args.rate,
                "latency_ms": args.latency_ms,
            },
        }
        summary: dict[str, list[dict[str, Any]]] = {}
        versions: dict[str, Any] = {}
        raw: list[dict[str, Any]] = []
        for round_ in range(args.rounds):
            for impl in impls:
                _log(f"round {round_ + 1}: {impl} ...")
                try:
                    run = run_impl(impl, task, proxy)
                except RuntimeError as exc:  # a worker that never got ready: the others still run
                    _log(str(exc))
                    proxy.clear_faults()
                    run = {"impl": impl, "start_at": 0.0, "proxy": dataclasses.asdict(proxy.counters())}
                    run["processes"] = [{"impl": impl, "crashed": str(exc)[-2000:], "readers": []}]
                raw.append(run)
                s = summarize(run, task)
                summary.setdefault(impl, []).append(s)
                versions[impl] = s["versions"]
                _log(
                    f"{impl}: failed {s['failed']}/{s['readers']}, goodput {s['goodput']:.0f}/s "
                    f"({100 * s['goodput_ratio']:.0f} % of R), throttled after 2 s "
                    f"{100 * s['throttled_after_warmup']:.1f} %, retries {s['retries']}, {s['seconds']:.1f} s"
                )
        results = {
            "config": {
                "argv": list(argv if argv is not None else sys.argv[1:]),
                "size_mib": args.size_mib,
                "shape": list(shape),
                "chunks_per_read": (rows // CHUNKS[0]) * (cols // CHUNKS[1]),
                "rounds": args.rounds,
                "throttle": task["throttle"],
            },
            "weed_version": _weed_version(),
            "azarr_commit": _azarr_commit(),
            "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}",
            "summary": summary,
            "versions": versions,
            "wall_s": time.monotonic() - t0,
            "runs": raw,
        }
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{args.name}.json").write_text(json.dumps(results, indent=1))
    (RESULTS_DIR / f"{args.name}.md").write_text(markdown(results))
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
