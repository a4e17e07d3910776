"""Reading a NetCDF4 file on S3 through kerchunk references: azarr vs fsspec + zarr 3.4 vs h5netcdf.

A NetCDF4 file (netCDF4, uncompressed float32, 4,096 chunks of 256 KiB at 1 GiB) is
written and referenced with kerchunk in the archival venv (tests/interop/archivalenv.py:
Python 3.12, zarr-python 3.4), uploaded to SeaweedFS, and read through the 20 ms delay
proxy (benchmarks/delay_proxy.py) by:

* ``azarr``: ``azarr.open_array("s3://.../refs.json", path="data")`` -- the ReferenceStore,
  neighbouring chunk ranges coalesced into one request per run;
* ``zarr34-reffs``: fsspec's ``ReferenceFileSystem`` under zarr-python 3.4's ``FsspecStore``;
* ``h5netcdf-s3fs``: h5netcdf over an s3fs file object, no references.

Each reads the whole variable (``whole``), its first quarter along time in one call
(``slab``), one chunk column along x in one call (``column``: every eighth chunk of
the file) and a random 10 % of its chunks, one call each, 16 at a time (``subset``), cold (a new process per implementation and round). Reported per operation:
median wall seconds, client CPU seconds, HTTP requests the proxy counted, and for azarr the
coalesced runs planned (its requests should be runs + 1, the reference file; in
``subset`` every call is a run of its own). Run under the
heavy lock::

    flock /work/.heavy.lock python -m benchmarks.bench_references --rounds 2

Results: ``benchmarks/results/references-<size>-<delay>ms.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "reference_workers.py"
RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ["azarr", "zarr34-reffs", "h5netcdf-s3fs"]
CHUNKS = (16, 64, 64)  # float32: 256 KiB per chunk
VAR = "data"
OPS = ("whole", "slab", "column", "subset")

MAKE_FILE = r"""
import json, sys
import numpy as np, netCDF4
from kerchunk.hdf import SingleHdf5ToZarr
path, url, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
    ds.createDimension("time", steps)
    ds.createDimension("y", 512)
    ds.createDimension("x", 512)
    var = ds.createVariable("data", "f4", ("time", "y", "x"), chunksizes=(16, 64, 64))
    var.set_auto_maskandscale(False)
    base = (np.arange(512 * 512, dtype=np.uint32).reshape(512, 512) * np.uint32(2654435761)) >> np.uint32(18)
    for t in range(0, steps, 16):
        block = base[None, :, :] + np.arange(t, t + 16, dtype=np.uint32)[:, None, None]
        var[t:t + 16] = (block % 65521).astype("f4") / np.float32(7)
with open(path, "rb") as fh:
    refs = SingleHdf5ToZarr(fh, url, inline_threshold=0).translate()
json.dump(refs, sys.stdout)
"""


def _log(msg: str) -> None:
    print(f"[bench-references] {msg}", file=sys.stderr, flush=True)


def archival_python() -> str:
    sys.path.insert(0, str(REPO_ROOT / "tests" / "interop"))
    from archivalenv import ensure_archival_python

    return str(ensure_archival_python())


def interpreter(impl: str) -> str:
    return sys.executable if impl == "azarr" else archival_python()


def run_worker(impl: str, task: dict[str, Any]) -> dict[str, Any]:
    env = {
        **os.environ,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": str(REPO_ROOT) if impl == "azarr" else "",
    }
    from benchmarks.peers import run_worker_json

    return run_worker_json(
        [interpreter(impl), str(WORKER)],
        what=f"{impl} worker",
        task={**task, "impl": impl},
        env=env,
        timeout=1800,
        stderr_chars=4000,
    )


def _variant(text: str) -> dict[str, int]:
    """``"gap=0"`` -> ``{"coalesce_max_gap": 0}``; ``"bytes=N"`` -> ``coalesce_max_bytes``."""
    names = {"gap": "coalesce_max_gap", "bytes": "coalesce_max_bytes"}
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[names[name.strip()]] = int(value)
    return out


def planned_runs(refs: dict[str, Any], keys: list[str]) -> int:
    """Requests azarr's coalescing plans for ``keys`` (with the current settings)."""
    from azarr.scheduler._coalesce import coalesce_ranges
    from azarr.storage import ByteRange

    ranges = [ByteRange(refs[k][1], refs[k][1] + refs[k][2]) for k in keys]
    return len(coalesce_ranges(ranges))


def runs_for(
    refs: dict[str, Any],
    whole: list[str],
    slab: list[str],
    column: list[str],
    subset: list[str],
    settings: dict[str, int],
) -> dict[str, int]:
    """azarr's planned requests per operation with ``settings`` applied."""
    from azarr import config

    with config.set(**settings):
        return {
            "whole": planned_runs(refs, whole),
            "slab": planned_runs(refs, slab),
            "column": planned_runs(refs, column),
            # One call per chunk (the service pattern): each call plans its own runs.
            "subset": len(subset),
        }


def summarize(reports: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for report in reports:
        for op in report["ops"]:
            cell = out.setdefault(report["impl"], {}).setdefault(
                op["op"], {"seconds": [], "cpu": [], "requests": []}
            )
            cell["seconds"].append(op["seconds"])
            cell["cpu"].append(op["cpu_seconds"])
            cell["requests"].append(op["requests"])
            cell["md5"] = op["md5"]
    for cells in out.values():
        for cell in cells.values():
            cell["median_s"] = statistics.median(cell["seconds"])
            cell["median_cpu_s"] = statistics.median(cell["cpu"])
            cell["median_requests"] = statistics.median(cell["requests"])
    return out


def markdown(results: dict[str, Any]) -> str:
    cfg, summary = results["config"], results["summary"]
    lines = [
        f"# NetCDF4 through kerchunk references on S3: {cfg['size_mib']} MiB, {cfg['nchunks']} chunks, "
        f"+{cfg['delay_ms']:g} ms each way",
        "",
        f"SeaweedFS behind benchmarks/delay_proxy.py; {cfg['rounds']} cold rounds per implementation (medians); "
        f"subset = {cfg['subset']} random chunks, {cfg['concurrency']} at a time. "
        f"azarr's coalescing: coalesce_max_gap {cfg['coalesce_max_gap']}, coalesce_max_bytes "
        f"{cfg['coalesce_max_bytes']}. Versions: {json.dumps(results['versions'])}.",
        "",
        "| implementation | operation | wall s | client CPU s | requests | azarr runs planned | x azarr (wall) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for op in OPS:
        base = summary["azarr"][op]["median_s"]
        for impl in results["impls"]:
            cell = summary[impl][op]
            runs = cfg["runs"][impl][op] if impl in cfg["runs"] else ""
            lines.append(
                f"| {impl} | {op} | {cell['median_s']:.2f} | {cell['median_cpu_s']:.2f} | "
                f"{cell['median_requests']:.0f} | {runs} | {cell['median_s'] / base:.2f} |"
            )
    lines += ["", f"Same bytes read by all: {results['same_bytes']}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--impls", default=",".join(IMPLS))
    parser.add_argument("--tag", default="")
    parser.add_argument("--max-gap", type=int, default=None, help="azarr coalesce_max_gap (bytes)")
    parser.add_argument("--max-bytes", type=int, default=None, help="azarr coalesce_max_bytes (bytes)")
    parser.add_argument(
        "--azarr-variants",
        default="",
        help="extra azarr runs with other coalescing settings, e.g. 'gap=0;gap=4194304;bytes=4194304' "
        "(reported as azarr[gap=0], ...): how the defaults were chosen",
    )
    args = parser.parse_args(argv)
    impls = args.impls.split(",")
    variants = {f"azarr[{v}]": _variant(v) for v in args.azarr_variants.split(";") if v}
    impls += list(variants)

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs

    from azarr import config
    from benchmarks.delay_proxy import DelayProxy

    settings = {
        k: v
        for k, v in (("coalesce_max_gap", args.max_gap), ("coalesce_max_bytes", args.max_bytes))
        if v is not None
    }
    config.set(**settings)  # for the runs planned here; the azarr worker gets them in its task
    steps = args.size_mib * 2**20 // (512 * 512 * 4)
    steps -= steps % CHUNKS[0]
    workdir = Path(tempfile.mkdtemp(prefix="azarr-bench-refs-"))
    server = start_seaweedfs()
    proxy = None
    try:
        bucket = server.create_bucket("azarr-bench-refs")
        nc = workdir / "bench.nc"
        _log(f"writing {steps}x512x512 float32 NetCDF4 and kerchunk references ...")
        made = subprocess.run(
            [archival_python(), "-c", MAKE_FILE, str(nc), f"s3://{bucket}/bench.nc", str(steps)],
            capture_output=True,
            text=True,
            check=True,
        )
        refs = json.loads(made.stdout)
        import s3fs

        fs = s3fs.S3FileSystem(**server.storage_options, skip_instance_cache=True)
        fs.put_file(str(nc), f"{bucket}/bench.nc")
        fs.pipe_file(f"{bucket}/refs.json", json.dumps(refs).encode())
        chunk_keys = sorted(
            k for k in refs["refs"] if k.startswith(f"{VAR}/") and not k.endswith((".zarray", ".zattrs"))
        )
        rng = random.Random(7)
        subset_keys = rng.sample(chunk_keys, max(1, len(chunk_keys) // 10))
        subset = [[int(x) for x in k.split("/")[1].split(".")] for k in subset_keys]
        slab_stop = steps // 4
        slab_keys = [k for k in chunk_keys if int(k.split("/")[1].split(".")[0]) * CHUNKS[0] < slab_stop]
        column_keys = [k for k in chunk_keys if k.endswith(".0")]
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        _log(
            f"{nc.stat().st_size / 2**20:.0f} MiB, {len(chunk_keys)} chunks on {proxy.url} (+{args.delay_ms:g} ms)"
        )
        task = {
            "endpoint": proxy.url,
            "key": server.key,
            "secret": server.secret,
            "bucket": bucket,
            "refs_key": "refs.json",
            "nc_key": "bench.nc",
            "var": VAR,
            "azarr_settings": settings,
            "admin_port": proxy.admin_port,
            "ops": [
                {"op": "whole"},
                {"op": "slab", "stop": slab_stop},
                {"op": "column", "width": CHUNKS[2]},
                {"op": "subset", "chunks": subset, "concurrency": args.concurrency},
            ],
        }
        reports = []
        for round_ in range(args.rounds):
            order = impls[round_ % len(impls) :] + impls[: round_ % len(impls)]
            for impl in order:
                started = time.perf_counter()
                # One process per operation: each open is cold (azarr keeps a live store per
                # spec in a process, so a second open there would find the references loaded).
                worker = "azarr" if impl in variants else impl
                extra = {"azarr_settings": {**settings, **variants[impl]}} if impl in variants else {}
                parts = [run_worker(worker, {**task, **extra, "ops": [op]}) for op in task["ops"]]
                report = {**parts[0], "impl": impl, "ops": [op for part in parts for op in part["ops"]]}
                reports.append(report)
                _log(
                    f"round {round_ + 1} {impl}: "
                    + ", ".join(
                        f"{op['op']} {op['seconds']:.2f} s / {op['requests']} req" for op in report["ops"]
                    )
                    + f" ({time.perf_counter() - started:.0f} s)"
                )
        summary = summarize(reports)
        digests = {impl: {op: cell["md5"] for op, cell in cells.items()} for impl, cells in summary.items()}
        same = all(len({d[op] for d in digests.values()}) == 1 for op in OPS)
        results = {
            "config": {
                "size_mib": args.size_mib,
                "delay_ms": args.delay_ms,
                "rounds": args.rounds,
                "nchunks": len(chunk_keys),
                "subset": len(subset),
                "concurrency": args.concurrency,
                "coalesce_max_gap": config.get("coalesce_max_gap"),
                "coalesce_max_bytes": config.get("coalesce_max_bytes"),
                "runs": {
                    impl: runs_for(refs["refs"], chunk_keys, slab_keys, column_keys, subset_keys, extra)
                    for impl, extra in {"azarr": {}, **variants}.items()
                },
            },
            "impls": impls,
            "variants": variants,
            "versions": {r["impl"]: r["versions"] for r in reports if r["impl"] not in variants},
            "summary": summary,
            "same_bytes": same,
            "reports": reports,
        }
        name = f"references-{args.size_mib}mib-{args.delay_ms:g}ms{'-' + args.tag if args.tag else ''}"
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1))
        (RESULTS / f"{name}.md").write_text(markdown(results))
        print(markdown(results))
        return 0 if same else 1
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()
        import shutil

        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
