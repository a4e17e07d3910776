"""Virtual chunks of an Icechunk repository on S3: azarr's IcechunkStore vs icechunk + zarr-python 3.4.

A NetCDF4 file (h5netcdf, uncompressed float32, chunks of 16x64x64 = 256 KiB) is uploaded to
SeaweedFS, and an Icechunk repository (icechunk 2.3) on the same server references every one
of its chunks as a virtual chunk. Both implementations run in the Icechunk venv
(tests/interop/icechunkenv.py: Python 3.12) and read through the delay proxy
(benchmarks/delay_proxy.py, +20 ms each way by default):

* ``azarr``: `azarr.storage.IcechunkStore` -- icechunk lists the chunk references, azarr
  reads the file's ranges through its S3 store, neighbouring ranges coalesced;
* ``zarr34-icechunk``: zarr-python 3.4 on icechunk's own store, icechunk reading each chunk.

Operations, each cold (a new process per implementation, operation and round): ``whole``
(the variable), ``slab`` (its first quarter along time) and ``subset`` (a random 10 % of its
chunks, one call each, 16 at a time). Reported: median wall seconds, client CPU seconds,
HTTP requests counted by the proxy (the repository's own files included). Run under the heavy
gate::

    /work/heavy bench python -m benchmarks.bench_icechunk --rounds 2

Results: ``benchmarks/results/icechunk-<size>mib-<delay>ms.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "icechunk_workers.py"
RESULTS = Path(__file__).resolve().parent / "results"
IMPLS = ["azarr", "zarr34-icechunk"]
CHUNKS = (16, 64, 64)
VAR = "data"
OPS = ("whole", "slab", "subset")

MAKE_REPOSITORY = r"""
import json, sys
import h5netcdf, h5py, numpy as np, s3fs, icechunk as ic, zarr
path, endpoint, key, secret, bucket, steps = sys.argv[1:7]
steps = int(steps)
with h5netcdf.File(path, "w") as f:
    f.dimensions = {"time": steps, "y": 512, "x": 512}
    var = f.create_variable("data", ("time", "y", "x"), "<f4", chunks=(16, 64, 64))
    base = (np.arange(512 * 512, dtype=np.uint32).reshape(512, 512) * np.uint32(2654435761)) >> np.uint32(18)
    for t in range(0, steps, 16):
        block = base[None, :, :] + np.arange(t, t + 16, dtype=np.uint32)[:, None, None]
        var[t:t + 16] = (block % 65521).astype("f4") / np.float32(7)
fs = s3fs.S3FileSystem(key=key, secret=secret, client_kwargs={"endpoint_url": endpoint})
fs.put_file(path, f"{bucket}/bench.nc")
s3 = {"region": "us-east-1", "endpoint_url": endpoint, "allow_http": True, "force_path_style": True}
storage = ic.s3_storage(bucket=bucket, prefix="repo", access_key_id=key, secret_access_key=secret, **s3)
config = ic.RepositoryConfig.default()
prefix = f"s3://{bucket}/"
config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.s3_store(**s3)))
creds = ic.containers_credentials({prefix: ic.s3_credentials(access_key_id=key, secret_access_key=secret)})
repo = ic.Repository.create(storage, config=config, authorize_virtual_chunk_access=creds)
session = repo.writable_session("main")
root = zarr.open_group(session.store, mode="w", zarr_format=3)
root.create_array("data", shape=(steps, 512, 512), chunks=(16, 64, 64), dtype="<f4", compressors=None,
                  fill_value=0, dimension_names=["time", "y", "x"])
n = 0
with h5py.File(path, "r") as f:
    ds = f["data"]
    for i in range(ds.id.get_num_chunks()):
        info = ds.id.get_chunk_info(i)
        coords = "/".join(str(o // c) for o, c in zip(info.chunk_offset, (16, 64, 64)))
        session.store.set_virtual_ref(f"data/c/{coords}", f"s3://{bucket}/bench.nc",
                                      offset=int(info.byte_offset), length=int(info.size))
        n += 1
session.commit("virtual")
print(json.dumps({"chunks": n}))
"""


def _log(msg: str) -> None:
    print(f"[bench-icechunk] {msg}", file=sys.stderr, flush=True)


def icechunk_python() -> str:
    sys.path.insert(0, str(REPO_ROOT / "tests" / "interop"))
    from icechunkenv import ensure_icechunk_python

    return str(ensure_icechunk_python())


def run_worker(impl: str, task: dict[str, Any]) -> dict[str, Any]:
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "RUST_LOG": "error"}
    from benchmarks.peers import run_worker_json

    return run_worker_json(
        [icechunk_python(), str(WORKER)],
        what=f"{impl} worker",
        task={**task, "impl": impl},
        env=env,
        timeout=1800,
        stderr_chars=4000,
    )


def markdown(results: dict[str, Any]) -> str:
    cfg, summary = results["config"], results["summary"]
    lines = [
        f"# Virtual Icechunk chunks on S3: {cfg['size_mib']} MiB NetCDF4, {cfg['nchunks']} chunks, "
        f"+{cfg['delay_ms']:g} ms each way",
        "",
        f"SeaweedFS behind benchmarks/delay_proxy.py; {cfg['rounds']} cold rounds per implementation "
        f"(medians); subset = {cfg['subset']} random chunks, {cfg['concurrency']} at a time. "
        f"Versions: {json.dumps(results['versions'])}.",
        "",
        "| implementation | operation | wall s | client CPU s | requests | x azarr (wall) |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for op in OPS:
        base = summary["azarr"][op]["median_s"]
        for impl in results["impls"]:
            cell = summary[impl][op]
            lines.append(
                f"| {impl} | {op} | {cell['median_s']:.2f} | {cell['median_cpu_s']:.2f} | "
                f"{cell['median_requests']:.0f} | {cell['median_s'] / base:.2f} |"
            )
    lines += ["", f"Same bytes read by both: {results['same_bytes']}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size-mib", type=int, default=256)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--impls", default=",".join(IMPLS))
    args = parser.parse_args(argv)
    impls = args.impls.split(",")

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs

    from benchmarks.bench_references import summarize
    from benchmarks.delay_proxy import DelayProxy

    steps = args.size_mib * 2**20 // (512 * 512 * 4)
    steps -= steps % CHUNKS[0]
    workdir = Path(tempfile.mkdtemp(prefix="azarr-bench-icechunk-"))
    server = start_seaweedfs()
    proxy = None
    try:
        bucket = server.create_bucket("azarr-bench-icechunk")
        _log(f"writing {steps}x512x512 float32 NetCDF4 and its Icechunk repository ...")
        env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "RUST_LOG": "error"}
        made = subprocess.run(
            [icechunk_python(), "-c", MAKE_REPOSITORY, str(workdir / "bench.nc"), server.endpoint_url,
             server.key, server.secret, bucket, str(steps)],
            capture_output=True, text=True, check=True, env=env,
        )  # fmt: skip
        nchunks = json.loads(made.stdout.strip().splitlines()[-1])["chunks"]
        grid = (steps // CHUNKS[0], 512 // CHUNKS[1], 512 // CHUNKS[2])
        every = [[t, y, x] for t in range(grid[0]) for y in range(grid[1]) for x in range(grid[2])]
        subset = random.Random(7).sample(every, max(1, len(every) // 10))
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        _log(f"{nchunks} virtual chunks; reading through {proxy.url} (+{args.delay_ms:g} ms)")
        task = {
            "endpoint": proxy.url,
            "key": server.key,
            "secret": server.secret,
            "bucket": bucket,
            "repo": "repo",
            "var": VAR,
            "admin_port": proxy.admin_port,
            "ops": [
                {"op": "whole"},
                {"op": "slab", "stop": steps // 4},
                {"op": "subset", "chunks": subset, "concurrency": args.concurrency},
            ],
        }
        reports = []
        for round_ in range(args.rounds):
            order = impls[round_ % len(impls) :] + impls[: round_ % len(impls)]
            for impl in order:
                started = time.perf_counter()
                parts = [run_worker(impl, {**task, "ops": [op]}) for op in task["ops"]]
                report = {**parts[0], "ops": [op for part in parts for op in part["ops"]]}
                reports.append(report)
                _log(
                    f"round {round_ + 1} {impl}: "
                    + ", ".join(
                        f"{op['op']} {op['seconds']:.2f} s / {op['requests']} req" for op in report["ops"]
                    )
                    + f" ({time.perf_counter() - started:.0f} s)"
                )
        summary = summarize(reports)
        same = all(len({summary[i][op]["md5"] for i in impls}) == 1 for op in OPS)
        results = {
            "config": {
                "size_mib": args.size_mib,
                "delay_ms": args.delay_ms,
                "rounds": args.rounds,
                "nchunks": nchunks,
                "subset": len(subset),
                "concurrency": args.concurrency,
            },
            "impls": impls,
            "versions": {r["impl"]: r["versions"] for r in reports},
            "summary": summary,
            "same_bytes": same,
            "reports": reports,
        }
        name = f"icechunk-{args.size_mib}mib-{args.delay_ms:g}ms"
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1))
        (RESULTS / f"{name}.md").write_text(markdown(results))
        print(markdown(results))
        return 0 if same else 1
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
