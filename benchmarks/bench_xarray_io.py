"""xarray I/O patterns: ``open_datatree`` of a hierarchy, and ``compute=False`` + region writes on a cluster.

The path of `benchmarks.bench_cloud`: SeaweedFS on 127.0.0.1 behind
`benchmarks.delay_proxy` (``--delay-ms`` each way, default 20), which also counts
the requests. Each implementation runs in its own fresh interpreter
(`benchmarks.integration_workers`), untimed warm-up first:

=====================  =======================================================================
``azarr``              ``engine="azarr"`` / ``azarr.xarray.to_zarr`` (azarr's venv, Python 3.11)
``zarr34-obstore``     xarray's ``zarr`` engine, zarr-python 3.4 ``ObjectStore`` + obstore
                       (peer ``xarray-zarr34``, Python 3.12)
``zarr34``             the same with zarr-python's ``FsspecStore`` + s3fs (``storage_options``)
=====================  =======================================================================

Scenarios:

``tree``
    ``xr.open_datatree`` of ``--groups`` groups (each: a 24-value ``time`` coordinate,
    which xarray loads at open for its index, and two small float32 variables),
    consolidated and not: wall time and requests. The hierarchy is written once
    per format by azarr, straight to SeaweedFS.
``pipeline``
    On ``LocalCluster(n_workers=2, processes=True, threads_per_worker=2)``:
    ``template.to_zarr(url, compute=False)`` (``--variables`` float32 variables of
    ``--steps`` 1 MiB chunks, dask zeros: metadata and coordinate only), then
    ``part.to_zarr(url, region={"time": ...}, compute=False)`` for every ``--step``
    steps, all computed at once on the cluster: wall time, requests, bytes sent.
    Each implementation reads its result back with its own engine (untimed) and
    the checksums must agree.

Both run in each Zarr format of ``--zarr-formats`` (default ``2,3``), every
implementation told the format (``zarr_format=``).

Rounds interleave the implementations; medians are reported. Results go to
``results/xarray-io[-quick].{json,md}``.

Usage::

    python -m benchmarks.bench_xarray_io --quick      # 40 groups; 8 x 2 MiB pipeline; 1 round; v2 and v3
    python -m benchmarks.bench_xarray_io              # 200 groups; 32 steps x 4 variables (128 MiB); 3 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_xarray import REPO_ROOT, log, proxied_options, run_worker, s3_behind_delay

RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ("azarr", "zarr34-obstore", "zarr34")
LABELS = {
    "azarr": 'azarr (`engine="azarr"`, `azarr.xarray.to_zarr`)',
    "zarr34-obstore": "xarray `zarr` engine, zarr 3.4 + obstore",
    "zarr34": "xarray `zarr` engine, zarr 3.4 + s3fs",
}


def interpreter(impl: str) -> str:
    if impl.startswith("azarr"):
        return sys.executable
    import benchmarks.integration_peers  # noqa: F401 - registers the peers
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python("xarray-zarr34"))


def _run(impl: str, task: dict[str, Any]) -> dict[str, Any]:
    return run_worker(impl, task, python=interpreter(impl))


def write_tree(server: Any, url: str, groups: int, consolidated: bool, zarr_format: int) -> None:
    import numpy as np
    import xarray as xr

    import azarr.xarray

    rng = np.random.default_rng(1)
    nodes = {
        f"/region{i:03d}": xr.Dataset(
            {
                "t2m": (("time", "station"), rng.standard_normal((24, 16), dtype="f4"), {"units": "K"}),
                "tp": (("time", "station"), rng.random((24, 16), dtype="f4"), {"units": "m"}),
            },
            coords={"time": np.arange(24) + 24 * i},
            attrs={"region": i},
        )
        for i in range(groups)
    }
    tree = xr.DataTree.from_dict({"/": xr.Dataset(attrs={"title": "bench"}), **nodes})
    azarr.xarray.to_zarr(
        tree,
        url,
        mode="w",
        consolidated=consolidated,
        storage_options=server.storage_options,
        zarr_format=zarr_format,
    )


def _measure(
    impl: str, task: dict[str, Any], what: str, reports: list[dict[str, Any]], failures: dict[str, str]
) -> None:
    """Run one measurement: its report appended to ``reports``, or its failure kept (by ``what``)."""
    try:
        report = _run(impl, task)
    except RuntimeError as exc:
        failures[f"{what.split(' ', 2)[2]}/{impl}"] = str(exc).strip().splitlines()[-1][:300]
        log(f"{what} {impl}: FAILED {str(exc).strip().splitlines()[-1][:300]}")
        return
    sent = f", {report['bytes_up'] / 2**20:.0f} MiB sent" if "bytes_up" in report else ""
    log(f"{what} {impl}: {report['seconds']:.2f} s, {report['requests']} requests{sent}")
    reports.append(report)


def _median(reports: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in reports))


def _table(title: str, rows: dict[str, list[dict[str, Any]]], extra: tuple[str, ...]) -> list[str]:
    lines = [f"### {title}", "", "| implementation | seconds | vs azarr | " + " | ".join(extra) + " |"]
    lines.append("| --- | ---: | ---: | " + " | ".join("---:" for _ in extra) + " |")
    base = _median(rows["azarr"], "seconds") if rows.get("azarr") else None
    for impl, reports in rows.items():
        if not reports:
            continue
        seconds = _median(reports, "seconds")
        ratio = f"{seconds / base:.2f}x" if base else ""
        values = [f"{_median(reports, key):,.0f}" for key in extra]
        lines.append(f"| {LABELS.get(impl, impl)} | {seconds:.2f} | {ratio} | " + " | ".join(values) + " |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="40 groups, 8-step 2-variable pipeline, 1 round")
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--step", type=int, default=4)
    parser.add_argument("--variables", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--scenarios", default="tree,pipeline")
    parser.add_argument("--zarr-formats", default="2,3", help="Zarr formats to run each scenario in")
    args = parser.parse_args(argv)
    if args.quick:
        args.groups, args.steps, args.step, args.variables = 40, 8, 2, 2
        args.rounds = args.rounds or 1
    args.rounds = args.rounds or 3
    impls = args.impls.split(",")
    scenarios = args.scenarios.split(",")
    formats = [int(f) for f in args.zarr_formats.split(",")]
    for impl in impls:
        interpreter(impl)  # build peer venvs before the servers start
    # "v2 consolidated" -> impl -> reports; "v2" -> impl -> reports.
    tree_runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"v{fmt} {kind}": {i: [] for i in impls}
        for fmt in formats
        for kind in ("consolidated", "unconsolidated")
    }
    pipeline_runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"v{fmt}": {i: [] for i in impls} for fmt in formats
    }
    failures: dict[str, str] = {}
    with s3_behind_delay(args.delay_ms) as (server, proxy, bucket):
        options = proxied_options(server, proxy)
        base = {"storage_options": options, "admin_port": proxy.admin_port}
        if "tree" in scenarios:
            for label in tree_runs:
                fmt, kind = int(label[1]), label.split()[1]
                log(f"writing a {args.groups}-group hierarchy ({label}) with azarr.xarray.to_zarr ...")
                slug = label.replace(" ", "-")
                write_tree(
                    server, f"s3://{bucket}/tree-{slug}.zarr", args.groups, kind == "consolidated", fmt
                )
                write_tree(server, f"s3://{bucket}/warm-{slug}.zarr", 2, kind == "consolidated", fmt)
        for round_ in range(args.rounds):
            for impl in impls:
                for label, runs in tree_runs.items() if "tree" in scenarios else ():
                    slug = label.replace(" ", "-")
                    task = {
                        **base,
                        "task": "xr-open-tree",
                        "url": f"s3://{bucket}/tree-{slug}.zarr",
                        "warmup_url": f"s3://{bucket}/warm-{slug}.zarr",
                        "consolidated": label.endswith(" consolidated"),
                        "zarr_format": int(label[1]),
                    }
                    _measure(impl, task, f"round {round_ + 1} tree {label}", runs[impl], failures)
                for label, runs in pipeline_runs.items() if "pipeline" in scenarios else ():
                    task = {
                        **base,
                        "task": "xr-region-pipeline",
                        "url": f"s3://{bucket}/pipeline-{label}-{impl}.zarr",
                        "warmup_url": f"s3://{bucket}/pipeline-warm-{label}-{impl}.zarr",
                        "steps": args.steps,
                        "step": args.step,
                        "variables": args.variables,
                        "zarr_format": int(label[1]),
                    }
                    _measure(impl, task, f"round {round_ + 1} pipeline {label}", runs[impl], failures)
    every = [
        *((f"tree {k}", v) for k, v in tree_runs.items()),
        *((f"pipeline {k}", v) for k, v in pipeline_runs.items()),
    ]
    for label, runs in every:
        checks = {impl: reports[0]["check"] for impl, reports in runs.items() if reports}
        if checks and max(checks.values()) - min(checks.values()) > 1e-6 * max(
            1.0, abs(max(checks.values()))
        ):
            raise SystemExit(f"{label}: checksums differ: {checks}")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = {
        "quick": args.quick,
        "delay_ms": args.delay_ms,
        "rounds": args.rounds,
        "groups": args.groups,
        "zarr_formats": formats,
        "pipeline": {"steps": args.steps, "step": args.step, "variables": args.variables, "chunk_mib": 1},
        "tree": tree_runs,
        "region_pipeline": pipeline_runs,
        "failed": failures,
        "when": when,
        "loadavg_1min_after": os.getloadavg()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    name = "xarray-io-quick" if args.quick else "xarray-io"
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1))
    lines = [
        f"# xarray I/O patterns ({when}, {args.delay_ms:g} ms each way, {args.rounds} round(s), medians)",
        "",
        f"Command: `python -m benchmarks.bench_xarray_io {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"(load average after: {result['loadavg_1min_after']:.1f}).",
        "",
    ]
    for label, runs in tree_runs.items():
        if any(runs.values()):
            fmt, kind = label.split()
            lines += _table(
                f"`xr.open_datatree`, {args.groups} groups, Zarr {fmt}, {kind}", runs, ("requests",)
            )
    for label, runs in pipeline_runs.items():
        if any(runs.values()):
            mib = args.steps * args.variables
            title = (
                f"`to_zarr(compute=False)` + {args.steps // args.step} region writes on a 2-process "
                f"LocalCluster, Zarr {label}, {args.variables} variables x {args.steps} steps ({mib} MiB)"
            )
            lines += _table(title, runs, ("requests", "bytes_up"))
    for what, why in failures.items():
        lines.append(f"- {what} failed: {why}")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO_ROOT))
    sys.exit(main())
