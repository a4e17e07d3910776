"""Cloud-path benchmark: azarr against zarr-python 2.18 / 3.1 and TensorStore on S3 with latency.

A real SeaweedFS (``weed mini``, from the venv's ``weed``) runs on 127.0.0.1
behind `benchmarks.delay_proxy`, which delays each direction by
``--delay-ms`` (20 ms: ~44 ms per request, a new connection costs one more
round trip) without capping bandwidth. Every implementation talks to the proxy.

Implementations (each a worker subprocess in its own interpreter, see
`benchmarks.cloud_workers` and `benchmarks.peers`):

=================  =========================================================
``raw``            aiohttp GET/PUT of the same objects, concurrency 64: the
                   path's ceiling (no Zarr, no decoding)
``raw-codec``      ``raw`` plus the codec work a Zarr client must do
                   (numcodecs in a thread pool, decoded into the output):
                   the ceiling for a client that decodes in Python threads
``azarr``          ``azarr.S3Store`` as it comes (``transport="aiohttp"``, the
                   lean SigV4 driver); and ``azarr-s3fs``,
                   ``S3Store(transport="s3fs")``, when ``S3Store`` has
                   ``transport=`` (before it had, ``azarr`` alone);
                   ``azarr-uvloop``: ``azarr`` on a uvloop event loop
``zarr218``        zarr-python 2.18 ``FSStore`` + s3fs
``zarr3-fsspec``   zarr-python 3.1 ``FsspecStore`` + s3fs
``zarr3-obstore``  zarr-python 3.1 ``ObjectStore`` + obstore
``tensorstore``    TensorStore ``zarr`` driver, ``s3`` kvstore
=================  =========================================================

Workloads:

1. cold full read of a float32 array, (512, 512) chunks = 1 MiB, Blosc-lz4
   (zarr-python 2's default) and Zstd (level 1); ``--size-mib`` (default 256).
   Cold: a new store/client/context each time (no cached data); connections
   are whatever the library keeps across those -- TensorStore's process-wide
   HTTP transport, azarr's pool shared by stores of equal settings, s3fs's
   cached clients, ``raw``'s one session -- as a service reading again and
   again would see them (the proxy's ``connections`` count shows it). Each
   worker first makes one untimed read (``warm-up``) so that no implementation
   is timed doing its first-use work (thread pools, lazily built state);
2. full write of the same array to a fresh prefix;
3. random small reads: ``--small-requests`` single-element and single-chunk
   reads issued by ``--concurrency`` concurrent tasks (threads for the
   synchronous zarr 2.18), p50/p99 per request; ``raw`` is one GET per request,
   ``raw-codec`` one GET and a decode;
4. opening a ``--tree-arrays`` hierarchy (10 groups) with and without
   consolidated metadata and visiting every array, with the requests the proxy
   counted;
5. indexing overhead on a memory store: `benchmarks.bench_indexing`
   (``results/indexing.md``), not repeated here.

The data every reader reads is written once by azarr (directly to SeaweedFS,
not through the proxy) and every reader's result is checked against the MD5 of
the expected array (``raw`` aside: it returns bytes, not an array); what every
writer wrote is read back by azarr and checked the same way. Every operation
also records the worker process's CPU time. Implementations run interleaved in
``--rounds`` rounds; tables show medians. Results go to
``benchmarks/results/cloud.md``, ``cloud.png`` (a matplotlib chart drawn in the
``plot`` venv) and ``cloud.json``.

Usage::

    python -m benchmarks.bench_cloud                 # default: 256 MiB, 2 rounds (~10 min)
    python -m benchmarks.bench_cloud --quick         # 64 MiB, 1 round, 200-array tree, 300 requests
    python -m benchmarks.bench_cloud --size-mib 1024 --rounds 1
    python -m benchmarks.bench_cloud --profile read  # cProfile of azarr's cold read (blosc-lz4)
    python -m benchmarks.bench_cloud --https         # the same over HTTPS -> results/cloud-https.*

``--https``: TLS with a certificate for 127.0.0.1 issued by a throw-away test CA made
with ``trustme``. By default (``--tls-at server``) SeaweedFS's S3 gateway terminates it
in Go and the delay proxy relays the encrypted bytes, as a cloud object store does TLS
on its own machines; the proxy then cannot count requests. ``--tls-at proxy`` has the
delay proxy terminate TLS in Python (asyncio) and speak plain HTTP to SeaweedFS: requests
are counted, but the proxy's TLS takes CPU the clients need on a 2-core machine. Every
worker trusts the CA through the environment -- ``SSL_CERT_FILE`` (OpenSSL, hence
Python's ``ssl``/aiohttp, and rustls-native-certs under obstore), ``AWS_CA_BUNDLE``
(botocore/s3fs) and ``TENSORSTORE_CA_BUNDLE`` (TensorStore's curl). Real S3 and GCS are
HTTPS, and TLS costs client CPU per byte: run with and without ``--https`` to report the
two side by side (the client CPU column shows what TLS adds).

``--zarr-format 3``: the same arrays stored as Zarr v3 (no sharding; ``bytes`` then the
same Blosc-lz4 / Zstd configuration, `benchmarks.cloud_workers.v3_codecs`), full reads and
writes only, against zarr-python 3.4 + obstore with its default pipeline, its
``FusedCodecPipeline`` and the zarrs pipeline (``zarr34``, ``zarr34-fused``,
``zarr34-zarrs``: one Python 3.12 venv), and TensorStore's ``zarr3`` driver; ``azarr-v2``
is azarr reading and writing the same data as Zarr v2 in the same run, for the "v3 costs
nothing" comparison. Results: ``results/<name>.md`` and ``.json`` (no chart)::

    python -m benchmarks.bench_cloud --zarr-format 3 --delay-ms 20 --name cloud-v3-256-20ms

This module imports only the standard library at module level (the plot
interpreter runs it with ``--plot``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
WORKER = BENCH_DIR / "cloud_workers.py"
COLS = 8192
CHUNKS = (512, 512)  # float32: 1 MiB per chunk
COMPRESSORS = ("blosc-lz4", "zstd", "none")
TREE_GROUPS = 10
SEED = 20240611
WORKER_TIMEOUT_S = 3600.0

IMPLS = (
    "raw",
    "raw-codec",
    "azarr",
    "azarr-s3fs",
    "azarr-uvloop",
    "azarr-baseline",
    "zarr218",
    "zarr3-fsspec",
    "zarr3-obstore",
    "tensorstore",
    "azarr-v2",
    "zarr34",
    "zarr34-fused",
    "zarr34-zarrs",
)
V3_IMPLS = ("azarr", "azarr-v2", "zarr34", "zarr34-fused", "zarr34-zarrs", "tensorstore")
"""What ``--zarr-format 3`` runs by default (``azarr-v2``: azarr on the same data as Zarr v2)."""
ZARR_PYTHON_V3 = ("zarr34", "zarr34-fused", "zarr34-zarrs")
LABELS = {
    "raw": "raw aiohttp GET/PUT (ceiling)",
    "raw-codec": "raw aiohttp + numcodecs, no Zarr",
    "azarr": "azarr S3Store (default, aiohttp transport)",
    "azarr-s3fs": "azarr S3Store (transport='s3fs')",
    "azarr-uvloop": "azarr S3Store (default) on uvloop",
    "azarr-baseline": "azarr at $AZARR_BASELINE (an older checkout, for before/after)",
    "zarr218": "zarr 2.18 FSStore + s3fs",
    "zarr3-fsspec": "zarr 3.1 FsspecStore + s3fs",
    "zarr3-obstore": "zarr 3.1 ObjectStore + obstore",
    "tensorstore": "TensorStore zarr + s3 kvstore",
    "azarr-v2": "azarr S3Store, the same data as Zarr v2",
    "zarr34": "zarr 3.4 ObjectStore + obstore (default pipeline)",
    "zarr34-fused": "zarr 3.4 + obstore, FusedCodecPipeline",
    "zarr34-zarrs": "zarr 3.4 + obstore, zarrs pipeline",
}
SHORT = {
    "raw": "raw",
    "raw-codec": "raw+codec",
    "azarr": "azarr",
    "azarr-s3fs": "azarr (s3fs)",
    "azarr-uvloop": "azarr (uvloop)",
    "azarr-baseline": "azarr (baseline)",
    "zarr218": "zarr 2.18 + s3fs",
    "zarr3-fsspec": "zarr 3.1 + s3fs",
    "zarr3-obstore": "zarr 3.1 + obstore",
    "tensorstore": "TensorStore",
    "azarr-v2": "azarr (v2 data)",
    "zarr34": "zarr 3.4",
    "zarr34-fused": "zarr 3.4 fused",
    "zarr34-zarrs": "zarr 3.4 + zarrs",
}
PEER_VENV = {
    "zarr218": "zarr218-s3",
    "zarr3-fsspec": "zarr3-s3",
    "zarr3-obstore": "zarr3-s3",
    "tensorstore": "tensorstore",
    "zarr34": "zarr34-zarrs",
    "zarr34-fused": "zarr34-zarrs",
    "zarr34-zarrs": "zarr34-zarrs",
}
AZARR_IMPLS = ("azarr", "azarr-s3fs", "azarr-uvloop")
CEILINGS = ("raw", "raw-codec")
"""No Zarr: no metadata, no hierarchy opens."""
BASELINE = "azarr-baseline"
"""The azarr worker run against ``$AZARR_BASELINE`` (a directory holding an older ``azarr/``
package, e.g. ``git archive <commit> azarr | tar -x -C DIR``): before/after in one run."""
LOCAL_IMPLS = (*CEILINGS, *AZARR_IMPLS, BASELINE, "azarr-v2")
"""Run by this interpreter (azarr's venv), with the repository on ``PYTHONPATH``."""
COLORS = {
    "raw": "#999999",
    "raw-codec": "#555555",
    "azarr": "#d62728",
    "azarr-s3fs": "#ff7f0e",
    "azarr-uvloop": "#8c1d1d",
    "azarr-baseline": "#e377c2",
    "zarr218": "#1f77b4",
    "zarr3-fsspec": "#17becf",
    "zarr3-obstore": "#2ca02c",
    "tensorstore": "#9467bd",
    "azarr-v2": "#f7b6d2",
    "zarr34": "#98df8a",
    "zarr34-fused": "#2ca02c",
    "zarr34-zarrs": "#bcbd22",
}
LEGACY_IDS = {"azarr": "azarr-s3fs", "azarr-aiohttp": "azarr"}
"""Ids of results written before ``azarr`` meant the default ``S3Store``: ``azarr`` was
``transport="s3fs"`` and ``azarr-aiohttp`` the aiohttp transport."""
MIB = 1024 * 1024


def _log(msg: str) -> None:
    print(f"[bench-cloud] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- set-up
def azarr_default_transport() -> str | None:
    """``azarr.S3Store``'s default ``transport=``; None when it has no such option (one transport, s3fs)."""
    import inspect

    from azarr.storage import S3Store

    param = inspect.signature(S3Store.__init__).parameters.get("transport")
    return None if param is None else str(param.default)


def label_azarr() -> bool:
    """Label ``azarr`` after the measured azarr's default ``S3Store``; False when ``azarr-s3fs`` cannot run."""
    default = azarr_default_transport()
    if default is None:
        LABELS["azarr"] = "azarr S3Store"
    elif default != "aiohttp":
        LABELS["azarr"] = f"azarr S3Store (default, {default} transport)"
    return default is not None


def interpreter(impl: str) -> str:
    """The python that runs ``impl``'s worker (peers: their cached venvs)."""
    if impl in LOCAL_IMPLS:
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENV[impl]))


def shape_for(size_mib: int) -> tuple[int, int]:
    """Array shape for ``size_mib`` MiB of float32 with ``COLS`` columns (whole chunks)."""
    rows = size_mib * MIB // (COLS * 4)
    if rows % CHUNKS[0] or rows == 0:
        raise SystemExit(f"--size-mib must be a positive multiple of {CHUNKS[0] * COLS * 4 // MIB}")
    return rows, COLS


async def _write_dataset(
    server: Any, bucket: str, prefix: str, shape: tuple[int, int], compressor: str, zarr_format: int = 2
) -> None:
    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import make_data, numcodecs_compressor, v3_codecs

    store = S3Store(f"{bucket}/{prefix}", storage_options=server.storage_options)
    encoding: dict[str, Any] = (
        {"zarr_format": 3, "codecs": v3_codecs(compressor)}
        if zarr_format == 3
        else {"compressor": numcodecs_compressor(compressor)}
    )
    try:
        arr = await azarr.create(shape=shape, chunks=CHUNKS, dtype="<f4", store=store, **encoding)
        await arr.set_basic_selection(..., make_data(shape))
        if compressor == "zstd":
            # numcodecs >= 0.13 records Zstd's "checksum": false; TensorStore's zarr driver
            # rejects any member it does not know ("Object includes extra members"). False
            # is the default, so the document without it means the same to every reader.
            doc = json.loads(await store.get(".zarray") or b"{}")
            if doc.get("compressor", {}).pop("checksum", None) is False:
                await store.set(".zarray", json.dumps(doc, indent=4, sort_keys=True).encode())
    finally:
        await store.close()


async def _write_tree(server: Any, bucket: str, prefix: str, n_arrays: int) -> None:
    import azarr
    from azarr.storage import S3Store

    store = S3Store(f"{bucket}/{prefix}", storage_options=server.storage_options)
    try:
        root = await azarr.group(store)
        per_group = max(1, n_arrays // TREE_GROUPS)
        sem = asyncio.Semaphore(32)

        async def make(g: Any, k: int) -> None:
            async with sem:
                await g.zeros(f"a{k:04d}", shape=(100 + k,), chunks=(100,), dtype="<f4")

        for gi in range(TREE_GROUPS):
            sub = await root.create_group(f"g{gi:02d}")
            await asyncio.gather(*(make(sub, k) for k in range(per_group)))
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()


async def _check_written(server: Any, bucket: str, prefix: str) -> str:
    """MD5 of the array azarr reads back from ``prefix`` (directly, not through the proxy)."""
    import azarr
    from azarr.storage import S3Store
    from benchmarks.cloud_workers import digest

    store = S3Store(f"{bucket}/{prefix}", storage_options=server.storage_options, read_only=True)
    try:
        arr = await azarr.open_array(store, mode="r")
        return digest(await arr.get_basic_selection(...))
    finally:
        await store.close()


def _delete_prefix(server: Any, bucket: str, prefix: str) -> None:
    client = server.admin
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})


def selections(shape: tuple[int, int], n: int, kind: str, seed: int) -> list[list[Any]]:
    """``n`` random single-element or single-chunk selections (JSON form), the same for everyone."""
    rng = random.Random(seed)
    out: list[list[Any]] = []
    for _ in range(n):
        if kind == "element":
            out.append([rng.randrange(shape[0]), rng.randrange(shape[1])])
        else:
            ci, cj = rng.randrange(shape[0] // CHUNKS[0]), rng.randrange(shape[1] // CHUNKS[1])
            out.append([[ci * CHUNKS[0], (ci + 1) * CHUNKS[0]], [cj * CHUNKS[1], (cj + 1) * CHUNKS[1]]])
    return out


# ---------------------------------------------------------------------- workers
def _pythonpath(impl: str) -> str:
    """The repository for azarr's own workers; the baseline's azarr ahead of it for the baseline."""
    from benchmarks.peers import worker_pythonpath

    return worker_pythonpath(impl, LOCAL_IMPLS)


def run_worker(impl: str, task: dict[str, Any], wrap: list[str] | None = None) -> dict[str, Any]:
    """Run ``impl``'s worker on ``task`` (under ``wrap``, e.g. a profiler) and return its JSON report.

    Raises
    ------
    RuntimeError
        The worker crashed (stderr in the message).
    """
    env = {
        **os.environ,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": _pythonpath(impl),
    }
    proc = subprocess.run(
        [*(wrap or []), interpreter(impl), str(WORKER)],
        input=json.dumps({**task, "impl": impl}),
        capture_output=True,
        text=True,
        env=env,
        timeout=WORKER_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"{impl} worker failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    # A profiler wrapping the worker may print its own lines after the JSON.
    line = next(x for x in reversed(proc.stdout.splitlines()) if x.startswith('{"impl"'))
    report: dict[str, Any] = json.loads(line)
    return report


def ops_full(impl: str, cfg: dict[str, Any], round_: int) -> list[dict[str, Any]]:
    """``--zarr-format 3`` or ``--full-only``: an untimed read, then full reads and writes
    (``azarr-v2``: of the same data stored as Zarr v2, under ``data-v2/``)."""
    fmt = 2 if impl == "azarr-v2" else int(cfg.get("zarr_format", 2))
    data = "data-v2" if fmt == 2 and cfg.get("zarr_format") == 3 else "data"
    comp0 = cfg["compressors"][0]
    ops: list[dict[str, Any]] = [
        {
            "op": "read",
            "workload": "warm-up",
            "compressor": comp0,
            "prefix": f"{data}/{comp0}",
            "zarr_format": fmt,
        }
    ]
    if cfg.get("writes_only") and impl in CEILINGS:
        ops = []  # raw's reads know v2 keys only; its writes need no warm-up read
    for comp in [] if cfg.get("writes_only") else cfg["compressors"]:
        ops.append(
            {
                "op": "read",
                "workload": "read",
                "compressor": comp,
                "prefix": f"{data}/{comp}",
                "zarr_format": fmt,
            }
        )
    for comp in cfg["compressors"]:
        ops.append(
            {
                "op": "write",
                "workload": "write",
                "compressor": comp,
                "prefix": f"write/{impl}/{comp}/r{round_}",
                "shape": cfg["shape"],
                "chunks": list(CHUNKS),
                "zarr_format": fmt,
            }
        )
    return ops


def ops_for(impl: str, cfg: dict[str, Any], round_: int) -> list[dict[str, Any]]:
    """The operations ``impl`` runs in round ``round_``."""
    if cfg.get("zarr_format") == 3 or cfg.get("full_only"):
        return ops_full(impl, cfg, round_)
    comp0 = cfg["compressors"][0]
    # One untimed read first, in every worker alike: imports are done before anything runs,
    # and this warms the library's own first-use work (thread pools, lazily built state,
    # the interpreter's specialised code). Every timed operation still builds a new
    # store/client/context, so its caches are cold; connections are what the library
    # keeps across those (see the module docstring).
    ops: list[dict[str, Any]] = [
        {"op": "read", "workload": "warm-up", "compressor": comp0, "prefix": f"data/{comp0}"}
    ]
    for comp in cfg["compressors"]:
        ops.append({"op": "read", "workload": "read", "compressor": comp, "prefix": f"data/{comp}"})
    for comp in cfg["compressors"]:
        prefix = f"write/{impl}/{comp}/r{round_}"
        ops.append(
            {
                "op": "write",
                "workload": "write",
                "compressor": comp,
                "prefix": prefix,
                "shape": cfg["shape"],
                "chunks": list(CHUNKS),
            }
        )
    kinds = ("chunk",) if impl == "raw" else ("element", "chunk")
    for kind in kinds:
        ops.append(
            {
                "op": "small",
                "workload": f"small-{kind}",
                "compressor": comp0,
                "prefix": f"data/{comp0}",
                "concurrency": cfg["concurrency"],
                "selections": cfg["selections"][kind],
            }
        )
    if impl not in (*CEILINGS, "tensorstore"):
        if round_ == 0 and not cfg["skip_unconsolidated"]:
            ops.append({"op": "open", "workload": "open", "consolidated": False, "prefix": "tree"})
        ops.append({"op": "open", "workload": "open-consolidated", "consolidated": True, "prefix": "tree"})
    return ops


# ---------------------------------------------------------------------- results
def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(reports: list[dict[str, Any]], shape: list[int]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{impl: {workload/compressor: pooled results}}`` with medians over rounds."""
    shape_elements = shape[0] * shape[1]
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for report in reports:
        impl = report["impl"]
        for op in report["ops"]:
            name = op["workload"] + (f"/{op['compressor']}" if op["op"] in ("read", "write") else "")
            slot = out.setdefault(impl, {}).setdefault(name, {"runs": [], "errors": []})
            if "error" in op:
                slot["errors"].append(op["error"])
                continue
            slot["runs"].append(op)
    for per_impl in out.values():
        for slot in per_impl.values():
            runs = slot["runs"]
            if not runs:
                continue
            slot["seconds"] = _median([r["seconds"] for r in runs])
            for cpu in ("cpu_seconds", "sys_seconds", "loop_seconds"):
                if all(cpu in r for r in runs):  # results from before it was recorded have none
                    slot[cpu] = _median([r[cpu] for r in runs])
            # None when the proxy relays TLS it cannot read (--tls-at server): nan in the tables
            slot["requests"] = _median(
                [r["proxy"]["requests"] for r in runs if (r.get("proxy") or {}).get("requests") is not None]
            )
            for cpu in ("server_cpu_seconds", "proxy_cpu_seconds"):
                if all(cpu in (r.get("proxy") or {}) for r in runs):
                    slot[cpu] = _median([r["proxy"][cpu] for r in runs])
            if "nbytes" in runs[0]:
                nbytes = runs[0]["nbytes"]
                if "digest" in runs[0] and str(runs[0]["digest"]).startswith("bytes:"):
                    # raw reads move stored bytes; rates are per MiB of array data like everyone's
                    nbytes = 4 * shape_elements
                slot["mbps"] = nbytes / MIB / slot["seconds"]
            if "latency" in runs[0]:
                for q in ("p50", "p99"):
                    slot[q] = _median([r["latency"][q] for r in runs])
    return out


def _fmt_s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _fmt_cpu(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 1 else f"{seconds:.2f} s"


def _machine() -> dict[str, str]:
    mem = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cores": str(os.cpu_count()),
        "cpu": cpu,
        "memory": mem,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
    }


def markdown(results: dict[str, Any]) -> str:
    """The results as commit-worthy markdown."""
    cfg = results["config"]
    if cfg.get("zarr_format") == 3:
        LABELS["tensorstore"] = "TensorStore zarr3 + s3 kvstore"
    summary: dict[str, dict[str, dict[str, Any]]] = results["summary"]
    impls = [i for i in IMPLS if i in summary]
    azarrs = [i for i in AZARR_IMPLS if i in summary]
    m = results["machine"]
    lines = [
        "# Cloud-path benchmark: S3 with latency"
        + (" over HTTPS" if cfg.get("https") else "")
        + (", Zarr v3 (no sharding)" if cfg.get("zarr_format") == 3 else ""),
        "",
        *(
            [
                (
                    "**HTTPS**: the delay proxy terminates TLS (in Python) and speaks plain HTTP to SeaweedFS"
                    if cfg.get("tls_at", "proxy") == "proxy"
                    else "**HTTPS**: SeaweedFS's S3 gateway terminates TLS (in Go); the delay proxy relays "
                    "the encrypted bytes and cannot count requests (`nan req`)"
                )
                + ". Test CA from `trustme`, trusted by every client through SSL_CERT_FILE / "
                "AWS_CA_BUNDLE / TENSORSTORE_CA_BUNDLE. Client CPU includes the TLS handshake and "
                "record decryption.",
                "",
            ]
            if cfg.get("https")
            else []
        ),
        f"SeaweedFS {results['weed_version']} (`weed mini`) on 127.0.0.1 behind a TCP delay proxy adding "
        f"{cfg['delay_ms']:g} ms each way (pipelined; one request ~{2 * cfg['delay_ms']:g} ms + server time, "
        f"a new connection one more round trip). Array: float32 {cfg['shape'][0]} x {cfg['shape'][1]} "
        f"({cfg['size_mib']} MiB), chunks {CHUNKS[0]} x {CHUNKS[1]} (1 MiB). Medians over {cfg['rounds']} "
        "round(s), implementations interleaved; each implementation in its own interpreter, same data, same "
        "server, same path, same run. Every read checked against the expected MD5, every write read back and "
        "checked.",
        "",
        f"azarr at commit {results.get('azarr_commit', '?')}. "
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory']} memory, {m['os']}, Python {m['python']}. "
        f"Load average (1 min) before / after: {results['load'][0]:.1f} / {results['load'][1]:.1f}. "
        f"Generated by `python -m benchmarks.bench_cloud {' '.join(cfg['argv'])}` in {results['wall_s']:.0f} s.",
        "",
        "Versions:",
        "",
    ]
    for impl in impls:
        v = results["versions"].get(impl, {})
        lines.append(f"- {LABELS[impl]}: " + ", ".join(f"{k} {val}" for k, val in v.items()))
    lines.append("")

    def cell(impl: str, name: str, key: str, fmt: str) -> str:
        slot = summary.get(impl, {}).get(name)
        if not slot or key not in slot:
            return "error" if slot and slot.get("errors") else "n/a"
        return fmt.format(slot[key])

    comps = cfg["compressors"]
    for workload, title in (("read", "Cold full read"), ("write", "Full write")):
        codec_note = (
            f"; `raw-codec`: the same plus the numcodecs {'decoding' if workload == 'read' else 'encoding'} "
            f"a Zarr client must do, in a thread pool of {results['machine']['cores']}"
            if "raw-codec" in impls
            else ""
        )
        has_cpu = any(
            "cpu_seconds" in per.get(f"{workload}/{c}", {}) for per in summary.values() for c in comps
        )
        cpu_note = (
            ", CPU seconds of the client process meanwhile: every thread of the worker, native ones included; "
            "not the server's or the proxy's, which share the same cores; `sys`: the kernel's share, mostly "
            "page faults of the new output array, whose cost varies run to run with the kernel's huge-page work"
            if has_cpu
            else ""
        )
        raw_note = (
            "`raw` times its PUTs only (its chunks are encoded beforehand). " if workload == "write" else ""
        )
        lines += [
            f"## {title} ({cfg['size_mib']} MiB)",
            "",
            "MB/s = MiB of array data per second (for `raw`: the same objects moved with no Zarr work, at "
            f"concurrency 64 — the path's ceiling{codec_note}). Cells: MiB/s (median time, requests seen by the "
            f"proxy{cpu_note}). {raw_note}`azarr x` = peer time / azarr time: above 1 azarr is faster.",
            "",
        ]
        header = ["implementation"]
        for comp in cfg["compressors"]:
            header.append(f"{comp}")
            header += [f"{SHORT[a]} x ({comp})" for a in azarrs]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("| --- |" + " ---: |" * (len(header) - 1))
        for impl in impls:
            row = [LABELS[impl]]
            for comp in cfg["compressors"]:
                name = f"{workload}/{comp}"
                slot = summary.get(impl, {}).get(name, {})
                if "seconds" in slot:
                    cpu = f", {_fmt_cpu(slot['cpu_seconds'])} CPU" if "cpu_seconds" in slot else ""
                    if "sys_seconds" in slot:
                        cpu += f" ({slot['sys_seconds']:.2f} sys)"
                    row.append(
                        f"{slot['mbps']:.0f} ({_fmt_s(slot['seconds'])}, {slot['requests']:.0f} req{cpu})"
                    )
                else:
                    row.append("error" if slot.get("errors") else "n/a")
                for a in azarrs:
                    mine = summary.get(a, {}).get(name, {}).get("seconds")
                    theirs = slot.get("seconds")
                    if impl == a or mine is None or theirs is None:
                        row.append("")
                    else:
                        row.append(f"{theirs / mine:.2f}")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")

    lines += _cpu_per_gib(summary, impls, cfg)
    lines += _server_cpu_per_gib(summary, impls, cfg)
    lines += targets_peers(summary, cfg)
    if cfg.get("zarr_format") == 3:  # full reads and writes only
        return "\n".join([*lines, *targets_v3(summary, cfg), ""])
    if cfg.get("full_only"):
        return "\n".join(lines)
    lines += [
        f"## Random small reads ({cfg['small_requests']} requests, {cfg['concurrency']} concurrent, "
        f"{cfg['compressors'][0]})",
        "",
        "Per-request latency after a warm-up of one request per task. Async APIs use "
        f"{cfg['concurrency']} tasks on one event loop (azarr, zarr 3.1's async API, TensorStore futures); "
        f"zarr 2.18 uses a pool of {cfg['concurrency']} threads. `raw` = one aiohttp GET of the chunk's object "
        "(the same for both kinds)"
        + (
            "; `raw-codec` = that GET and a numcodecs decode in a thread pool, then the element or the chunk"
            if "raw-codec" in impls
            else ""
        )
        + ". `p99 / raw` = the implementation's p99 over raw's p99. `loop µs/req`: CPU of the "
        "client's main thread (the event loop, for the asyncio clients) per request, warm-up included, "
        "element / chunk.",
        "",
        "| implementation | element p50 | element p99 | chunk p50 | chunk p99 | element p99 / raw | "
        "chunk p99 / raw | element req/s | loop µs/req |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    requests = cfg["small_requests"] + cfg["concurrency"]
    raw_p99 = summary.get("raw", {}).get("small-chunk", {}).get("p99")
    for impl in impls:
        s = summary.get(impl, {})
        el, ch = s.get("small-element", {}), s.get("small-chunk", {})
        if impl == "raw":
            el = ch
        row = [LABELS[impl]]
        for slot in (el, ch):
            for q in ("p50", "p99"):
                row.append(_fmt_s(slot[q]) if q in slot else ("error" if slot.get("errors") else "n/a"))
        for slot in (el, ch):
            row.append(f"{slot['p99'] / raw_p99:.2f}" if raw_p99 and "p99" in slot else "")
        row.append(f"{cfg['small_requests'] / el['seconds']:.0f}" if "seconds" in el else "")
        row.append(
            " / ".join(f"{slot['loop_seconds'] / requests * 1e6:.0f}" for slot in (el, ch))
            if all("loop_seconds" in slot for slot in (el, ch))
            else ""
        )
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")

    lines += [
        f"## Opening a {cfg['tree_arrays']}-array hierarchy ({TREE_GROUPS} groups)",
        "",
        "Open the root and visit every array (its shape): azarr `open_group`/`open_consolidated` and "
        "`members()` recursively; zarr 2.18 `open_group`/`open_consolidated` and `arrays()`/`groups()`; "
        "zarr 3.1 `open_group(use_consolidated=False)`/`open_consolidated` and `members(max_depth=None)`. "
        "TensorStore has no hierarchy API. Cells: time (requests seen by the proxy). Unconsolidated: first "
        "round only.",
        "",
        "| implementation | unconsolidated | consolidated |",
        "| --- | ---: | ---: |",
    ]
    for impl in impls:
        if impl in (*CEILINGS, "tensorstore"):
            continue
        row = [LABELS[impl]]
        for name in ("open", "open-consolidated"):
            slot = summary.get(impl, {}).get(name, {})
            if "seconds" in slot:
                row.append(f"{_fmt_s(slot['seconds'])} ({slot['requests']:.0f})")
            else:
                row.append("error" if slot.get("errors") else "n/a")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines += targets(summary, cfg, azarrs)
    lines += [
        "## Indexing overhead (in-memory store)",
        "",
        "Not repeated here: `python -m benchmarks.bench_indexing` (`results/indexing.md`).",
        "",
    ]
    errors = [
        f"- {impl} {name}: {err}"
        for impl, per in summary.items()
        for name, slot in per.items()
        for err in slot.get("errors", [])
    ]
    if errors:
        lines += ["## Errors", "", *errors, ""]
    if results.get("mismatches"):
        lines += ["## Data mismatches", "", *(f"- {x}" for x in results["mismatches"]), ""]
    lines.append(
        "Peers use their libraries' defaults (zarr 3.1: `async.concurrency` 10; s3fs/botocore: "
        "10 pooled connections, response checksums on). Raw numbers in `cloud.json`."
    )
    lines.append("")
    return "\n".join(lines)


def _per_gib_table(
    summary: dict[str, Any],
    impls: list[str],
    cfg: dict[str, Any],
    cell: Callable[[dict[str, Any]], str | None],
) -> tuple[list[str], bool]:
    """Markdown rows, one per implementation, of ``cell(slot)`` for every full read and write
    (``n/a`` where it gives None), and whether any cell had a value."""
    cells = [(w, c) for w in ("read", "write") for c in cfg["compressors"]]
    rows, measured = ["| implementation | " + " | ".join(f"{w} {c}" for w, c in cells) + " |"], False
    rows.append("| --- |" + " ---: |" * len(cells))
    for impl in impls:
        row = [LABELS[impl]]
        for w, c in cells:
            value = cell(summary.get(impl, {}).get(f"{w}/{c}", {}))
            measured = measured or value is not None
            row.append("n/a" if value is None else value)
        rows.append("| " + " | ".join(row) + " |")
    return rows, measured


def _cpu_per_gib(summary: dict[str, Any], impls: list[str], cfg: dict[str, Any]) -> list[str]:
    """Markdown: client CPU seconds per GiB of array data, all threads and the main thread's
    (the event loop's for the asyncio clients), for every full read and write."""
    per_gib = 1024 / cfg["size_mib"]

    def cell(slot: dict[str, Any]) -> str | None:
        if "loop_seconds" in slot:
            return f"{slot['cpu_seconds'] * per_gib:.2f} / {slot['loop_seconds'] * per_gib:.2f}"
        if "cpu_seconds" in slot:
            return f"{slot['cpu_seconds'] * per_gib:.2f} / n/a"
        return None

    rows, _ = _per_gib_table(summary, impls, cfg, cell)
    return [
        "## Client CPU per GiB",
        "",
        "CPU seconds per GiB of array data, medians: every thread of the client process / its main "
        "thread (the event loop of the asyncio clients -- azarr, raw, zarr 3.1 -- and the calling "
        "thread of zarr 2.18 and TensorStore, which wait there while native threads work).",
        "",
        *rows,
        "",
    ]


def _server_cpu_per_gib(summary: dict[str, Any], impls: list[str], cfg: dict[str, Any]) -> list[str]:
    """Markdown: the server's and the proxy's CPU seconds per GiB of array data while each
    implementation's full reads and writes ran (medians; none in results from before)."""
    per_gib = 1024 / cfg["size_mib"]

    def cell(slot: dict[str, Any]) -> str | None:
        if "server_cpu_seconds" in slot and "proxy_cpu_seconds" in slot:
            return f"{slot['server_cpu_seconds'] * per_gib:.2f} / {slot['proxy_cpu_seconds'] * per_gib:.2f}"
        return None

    rows, measured = _per_gib_table(summary, impls, cfg, cell)
    if not measured:
        return []
    return [
        "## Server and proxy CPU per GiB",
        "",
        "CPU seconds per GiB of array data, medians, spent by SeaweedFS's process / the delay proxy's "
        "process while the operation ran (`/proc/<pid>/stat`, every thread; both share the host's "
        "cores with the client).",
        "",
        *rows,
        "",
    ]


def targets(
    summary: dict[str, dict[str, dict[str, Any]]], cfg: dict[str, Any], azarrs: list[str]
) -> list[str]:
    """Markdown lines checking azarr against issue #19's targets, per azarr transport.

    Each ratio is given twice: from the medians (the issue's measure) and, in brackets,
    from each implementation's fastest round. On this shared 2-core machine a round can
    lose half a second to the server or the host (one write of 256 MiB took 0.93 s and
    then 1.81 s); the fastest round is the one least disturbed.
    """

    def sec(impl: str, name: str) -> float | None:
        value = summary.get(impl, {}).get(name, {}).get("seconds")
        return float(value) if value is not None else None

    def fastest(impl: str, name: str) -> float | None:
        runs = summary.get(impl, {}).get(name, {}).get("runs") or []
        times = [float(r["seconds"]) for r in runs if "seconds" in r]
        return min(times) if times else None

    def verdict(ok: bool | None) -> str:
        return "n/a" if ok is None else ("yes" if ok else "**no**")

    header = "| target | " + " | ".join(SHORT[a] for a in azarrs) + " |"
    lines = [
        "## Targets (issue #19)",
        "",
        "Ratios as speed-ups (other's time / azarr's time) from the medians, and in brackets from "
        "each implementation's fastest round; the verdict is on the medians. The raw+codec "
        "ceiling is `raw` plus the numcodecs work a Zarr client must do, in a thread pool.",
        "",
        header,
        "| --- |" + " --- |" * len(azarrs),
    ]
    bars = {
        "read": (("tensorstore", "TensorStore", 1.0), ("zarr3-obstore", "zarr 3.1 + obstore", 1.2)),
        "write": (("tensorstore", "TensorStore", 1.0),),
    }
    ceilings = (("raw", "raw ceiling", 0.85), ("raw-codec", "raw+codec ceiling", 0.95))
    for workload in ("read", "write"):
        for comp in cfg["compressors"]:
            name = f"{workload}/{comp}"
            checks = [(peer, f">= {goal:.1f}x {label}", goal) for peer, label, goal in bars[workload]]
            if workload == "read":
                checks += [(peer, f">= {goal:.2f} of {label}", goal) for peer, label, goal in ceilings]
            for peer, what, goal in checks:
                cells = []
                for a in azarrs:
                    mine, other = sec(a, name), sec(peer, name)
                    mine_min, other_min = fastest(a, name), fastest(peer, name)
                    if mine is None or other is None:
                        cells.append("n/a")
                        continue
                    cell = f"{other / mine:.2f}"
                    if mine_min and other_min:
                        cell += f" ({other_min / mine_min:.2f})"
                    cells.append(f"{cell} {verdict(other / mine >= goal)}")
                lines.append(f"| {workload} {comp}: {what} | " + " | ".join(cells) + " |")
    raw_p99 = summary.get("raw", {}).get("small-chunk", {}).get("p99")
    for kind in ("element", "chunk"):
        cells = []
        for a in azarrs:
            p99 = summary.get(a, {}).get(f"small-{kind}", {}).get("p99")
            if p99 is None or not raw_p99:
                cells.append("n/a")
            else:
                cells.append(f"{p99 / raw_p99:.2f} {verdict(p99 / raw_p99 <= 1.2)}")
        lines.append(f"| small {kind} reads: p99 <= 1.2x raw GET p99 | " + " | ".join(cells) + " |")
    cells = []
    for a in azarrs:
        req = summary.get(a, {}).get("open-consolidated", {}).get("requests")
        cells.append("n/a" if req is None or math.isnan(req) else f"{req:.0f} {verdict(req == 1)}")
    lines.append("| consolidated open: exactly 1 request | " + " | ".join(cells) + " |")
    cells = []
    raw_p50 = summary.get("raw", {}).get("small-chunk", {}).get("p50")
    for a in azarrs:
        slot = summary.get(a, {}).get("open", {})
        if "seconds" not in slot or not raw_p50 or math.isnan(slot["requests"]):
            cells.append("n/a")
            continue
        # The floor for a walk that opens levels one after another and every member once:
        # one wave per level (root documents, root listing, the groups, their listings)
        # plus the waves the request budget (64 in flight) forces on the member reads,
        # each wave costing one raw GET under load (raw's p50 at 50 concurrent requests).
        levels = 4
        waves = math.ceil(slot["requests"] / 64)
        floor = (levels + waves) * raw_p50
        ratio = slot["seconds"] / floor
        cells.append(
            f"{slot['requests'] / cfg['tree_arrays']:.1f} requests/array; {_fmt_s(slot['seconds'])} = "
            f"{ratio:.2f}x the floor of ({levels} levels + {waves} budget waves) x raw GET p50 "
            f"{verdict(ratio <= 1.5)}"
        )
    lines.append(
        "| unconsolidated open: round trips ~ levels + requests / budget, not requests "
        "(time <= 1.5x that floor) | " + " | ".join(cells) + " |"
    )
    lines.append("")
    return lines


def _timings(
    summary: dict[str, dict[str, dict[str, Any]]], impl: str, name: str
) -> tuple[float, float, float | None] | None:
    """``impl``'s median and fastest seconds and median CPU seconds for operation ``name``, if it ran."""
    slot = summary.get(impl, {}).get(name, {})
    runs = [float(r["seconds"]) for r in slot.get("runs", []) if "seconds" in r]
    if "seconds" not in slot or not runs:
        return None
    return float(slot["seconds"]), min(runs), slot.get("cpu_seconds")


def _peer_cells(
    summary: dict[str, dict[str, dict[str, Any]]],
    name: str,
    mine: tuple[float, float, float | None],
    verdict: Callable[[bool], str],
) -> list[str]:
    """Markdown cells of azarr's ``mine`` against TensorStore (>= 1.0) and the fastest zarr-python
    3.4 pipeline (>= 1.2) on operation ``name``: median ratio (fastest-round ratio) verdict."""
    cells = []
    ts = _timings(summary, "tensorstore", name)
    cells.append(
        "n/a"
        if ts is None
        else f"{ts[0] / mine[0]:.2f} ({ts[1] / mine[1]:.2f}) {verdict(ts[0] / mine[0] >= 1.0)}"
    )
    found = [(p, t) for p in ZARR_PYTHON_V3 if (t := _timings(summary, p, name)) is not None]
    if found:
        best, (median, _, _) = min(found, key=lambda item: item[1][0])
        best_fastest = min(t[1] for _, t in found)
        cells.append(
            f"{median / mine[0]:.2f} ({best_fastest / mine[1]:.2f}) vs {SHORT[best]} "
            f"{verdict(median / mine[0] >= 1.2)}"
        )
    else:
        cells.append("n/a")
    return [c.rstrip() for c in cells]


def targets_peers(summary: dict[str, dict[str, dict[str, Any]]], cfg: dict[str, Any]) -> list[str]:
    """Markdown lines checking azarr's full reads against issue #33's targets, either format:
    >= 1.0x TensorStore, >= 1.2x the best zarr-python 3.4 + obstore pipeline (default,
    ``FusedCodecPipeline`` or zarrs: the fastest for that cell), and client CPU per GiB
    (every thread) at most TensorStore's. Empty when neither peer ran."""
    peers34 = [p for p in ZARR_PYTHON_V3 if p in summary]
    if "azarr" not in summary or ("tensorstore" not in summary and not peers34):
        return []

    def times(impl: str, name: str) -> tuple[float, float, float | None] | None:
        slot = summary.get(impl, {}).get(name, {})
        runs = [float(r["seconds"]) for r in slot.get("runs", []) if "seconds" in r]
        if "seconds" not in slot or not runs:
            return None
        return float(slot["seconds"]), min(runs), slot.get("cpu_seconds")

    per_gib = 1024 / cfg["size_mib"]
    lines = [
        "## Targets (issue #33)",
        "",
        "Speed-ups = peer's time / azarr's time from the medians, and in brackets from each "
        "implementation's fastest round; the verdict is on the medians (reads: the issue sets no "
        "cloud write target, so writes get none). Best zarr-python 3.4 = the fastest of its default "
        "pipeline, `FusedCodecPipeline` and zarrs for that cell. CPU: client CPU seconds per GiB, "
        "every thread, medians (azarr / TensorStore).",
        "",
        "| workload | >= 1.0x TensorStore | >= 1.2x best zarr-python 3.4 | CPU/GiB <= TensorStore's |",
        "| --- | --- | --- | --- |",
    ]
    for workload in ("read", "write"):

        def verdict(ok: bool, judged: bool = workload == "read") -> str:
            return ("yes" if ok else "**no**") if judged else ""

        for comp in cfg["compressors"]:
            name = f"{workload}/{comp}"
            mine = _timings(summary, "azarr", name)
            if mine is None:
                continue
            cells = _peer_cells(summary, name, mine, verdict)
            ts = _timings(summary, "tensorstore", name)
            if ts is not None and ts[2] is not None and mine[2] is not None:
                cells.append(f"{mine[2] * per_gib:.2f} / {ts[2] * per_gib:.2f} {verdict(mine[2] <= ts[2])}")
            else:
                cells.append("n/a")
            lines.append(f"| {workload} {comp} | " + " | ".join(c.rstrip() for c in cells) + " |")
    lines.append("")
    return lines


def targets_v3(summary: dict[str, dict[str, dict[str, Any]]], cfg: dict[str, Any]) -> list[str]:
    """Markdown lines checking azarr on Zarr v3 against issue #29's targets: reads and writes
    >= 1.0x TensorStore ``zarr3``, >= 1.2x the best zarr-python 3.4 configuration, and within
    5 % of azarr's own time on the same data stored as Zarr v2. Ratios from the medians, and
    in brackets from each implementation's fastest round; the verdict is on the medians."""

    def verdict(ok: bool) -> str:
        return "yes" if ok else "**no**"

    lines = [
        "## Targets (issue #29)",
        "",
        "Speed-ups = other's time / azarr's time (azarr on Zarr v3) from the medians, and in brackets "
        "from each implementation's fastest round; the verdict is on the medians. The best zarr-python "
        "3.4 configuration is the fastest of default / FusedCodecPipeline / zarrs for that cell. "
        "`v3 / v2` is azarr's v3 time over its time on the same data as Zarr v2 (target <= 1.05): "
        "two medians from two workers minutes apart, which a shared host moves by more than 5 %; "
        "`benchmarks/bench_v3_v2.py` measures the ratio paired, with the client's CPU.",
        "",
        "| workload | >= 1.0x TensorStore | >= 1.2x best zarr-python 3.4 | v3 / v2 <= 1.05 |",
        "| --- | --- | --- | --- |",
    ]
    for workload in ("read", "write"):
        for comp in cfg["compressors"]:
            name = f"{workload}/{comp}"
            mine = _timings(summary, "azarr", name)
            if mine is None:
                continue
            cells = _peer_cells(summary, name, mine, verdict)
            v2 = _timings(summary, "azarr-v2", name)
            cells.append(
                "n/a"
                if v2 is None
                else f"{mine[0] / v2[0]:.2f} ({mine[1] / v2[1]:.2f}) {verdict(mine[0] / v2[0] <= 1.05)}"
            )
            lines.append(f"| {workload} {comp} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def plot(results_json: Path, out_png: Path) -> None:
    """Draw the bar chart (run by the ``plot`` venv's interpreter: matplotlib is no azarr dependency)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = json.loads(results_json.read_text())
    summary = results["summary"]
    if "small-chunk" in summary.get("raw", {}):  # raw's one GET per request serves both kinds
        summary["raw"]["small-element"] = summary["raw"]["small-chunk"]
    cfg = results["config"]
    impls = [i for i in IMPLS if i in summary]  # results of ids no longer known are left out
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))

    def bars(
        ax: Any, groups: list[tuple[str, str]], key: str, ylabel: str, title: str, scale: float = 1
    ) -> None:
        width = 0.8 / max(1, len(impls))
        for k, impl in enumerate(impls):
            vals = [summary.get(impl, {}).get(name, {}).get(key, 0) * scale for name, _ in groups]
            xs = [g + (k - (len(impls) - 1) / 2) * width for g in range(len(groups))]
            ax.bar(xs, vals, width, label=SHORT[impl], color=COLORS[impl])
        ax.set_xticks(range(len(groups)), [label for _, label in groups])
        ax.set_ylabel(ylabel)
        ax.set_title(title)

    comps = cfg["compressors"]
    bars(
        axes[0][0],
        [(f"read/{c}", c) for c in comps],
        "mbps",
        "MiB/s (higher is better)",
        f"Cold full read, {cfg['size_mib']} MiB",
    )
    bars(
        axes[0][1],
        [(f"write/{c}", c) for c in comps],
        "mbps",
        "MiB/s (higher is better)",
        f"Full write, {cfg['size_mib']} MiB",
    )
    small = [("small-element", "element p50"), ("small-chunk", "chunk p50")]
    bars(
        axes[1][0],
        small,
        "p50",
        "ms (lower is better)",
        f"Small reads, {cfg['concurrency']} concurrent: p50 (dots: p99)",
        1000,
    )
    width = 0.8 / max(1, len(impls))
    for k, impl in enumerate(impls):
        for g, (name, _) in enumerate(small):
            slot = summary.get(impl, {}).get("small-chunk" if impl == "raw" else name, {})
            if "p99" in slot:
                axes[1][0].plot(g + (k - (len(impls) - 1) / 2) * width, slot["p99"] * 1000, "k.")
    bars(
        axes[1][1],
        [("open", "unconsolidated"), ("open-consolidated", "consolidated")],
        "seconds",
        "seconds, log (lower is better)",
        f"Open {cfg['tree_arrays']}-array hierarchy + visit arrays",
    )
    axes[1][1].set_yscale("log")
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        f"Zarr v2 on S3 (SeaweedFS) through {cfg['delay_ms']:g} ms each way; "
        f"{results['machine']['cores']} cores, Python {results['machine']['python']}"
    )
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


def render(json_path: Path, *, plot_png: bool = True) -> int:
    """Recompute the summary of a results JSON and rewrite its markdown (and chart) beside it."""
    results = json.loads(json_path.read_text())
    label_azarr()
    if any(r["impl"] == "azarr-aiohttp" for r in results["reports"]):  # ids before azarr meant the default
        for r in results["reports"]:
            r["impl"] = LEGACY_IDS.get(r["impl"], r["impl"])
        results["versions"] = {LEGACY_IDS.get(k, k): v for k, v in results["versions"].items()}
    unknown = sorted({r["impl"] for r in results["reports"]} - set(IMPLS))
    if unknown:
        _log(f"leaving out results of unknown implementations: {', '.join(unknown)}")
    results["summary"] = summarize(results["reports"], results["config"]["shape"])
    json_path.write_text(json.dumps(results, indent=1, default=str))
    json_path.with_suffix(".md").write_text(markdown(results))
    if plot_png:
        from benchmarks.peers import ensure_peer_python

        subprocess.run(
            [
                str(ensure_peer_python("plot")),
                str(Path(__file__).resolve()),
                "--plot",
                str(json_path),
                str(json_path.with_suffix(".png")),
            ],
            check=True,
            timeout=300,
        )
    return 0


# ---------------------------------------------------------------------- main
@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit so ``finally`` blocks stop the servers."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _azarr_commit() -> str:
    """``git`` commit of the azarr being measured, ``+dirty`` when ``azarr/`` has local changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "azarr"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return f"{head or '?'}{'+dirty' if dirty else ''}"


def _weed_version() -> str:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import find_binary

    with contextlib.suppress(Exception):
        out = subprocess.run([find_binary("weed"), "version"], capture_output=True, text=True, timeout=30)
        words = out.stdout.split()
        if "version" in words and words.index("version") + 1 < len(words):
            return words[words.index("version") + 1]
    return "?"


def profile_azarr(
    server: Any,
    proxy: Any,
    bucket: str,
    cfg: dict[str, Any],
    workload: str,
    impl: str,
    profiler: str,
    repeat: int,
) -> None:
    """Profile azarr's worker running one workload ``repeat`` times; print where the time goes.

    ``profiler="cprofile"`` sees the event-loop thread only (Python frames);
    ``"py-spy"`` (``pip install py-spy``) samples every thread, codec threads and
    native frames included, and prints the hottest leaf frames and the functions
    with the most samples anywhere on the stack (``py-spy record --format raw``).
    """
    import pstats

    ops = [op for op in ops_for(impl, cfg, 0) if op["workload"] == workload]
    if not ops:
        raise SystemExit(
            f"no workload {workload!r}; one of read, write, small-element, small-chunk, open, open-consolidated"
        )
    ops = [op for op in ops if op.get("compressor") in (None, cfg["compressors"][0])][:1] * repeat
    outdir = Path(tempfile.mkdtemp(prefix="azarr-cloud-prof-"))
    task = _task(server, proxy, bucket, cfg, ops)
    if profiler == "py-spy":
        raw = outdir / "azarr.stacks"
        spy = Path(sys.executable).parent / "py-spy"
        wrap = [
            str(spy),
            "record",
            "--format",
            "raw",
            "--rate",
            "250",
            "--threads",
            "--output",
            str(raw),
            "--",
        ]
        report = run_worker(impl, task, wrap=wrap)
        _print_report_ops(report)
        print_collapsed(raw, within="Azarr.")
        print(f"stacks saved: {raw} (flamegraph.pl or speedscope.app read it)")
        return
    out = outdir / "azarr.prof"
    report = run_worker(impl, {**task, "profile": str(out)})
    _print_report_ops(report)
    stats = pstats.Stats(str(out)).strip_dirs()
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(30)
    print(f"profile saved: {out}")


def _print_report_ops(report: dict[str, Any]) -> None:
    for op in report["ops"]:
        proxy_seen = (op.get("proxy") or {}).get("requests")
        print(
            f"{op['workload']} {op.get('compressor', '')}: {op.get('seconds', 0):.3f} s, "
            f"{op.get('cpu_seconds', 0):.3f} s CPU, {proxy_seen} requests {op.get('error', '')}"
        )


IDLE_LEAVES = (
    "_worker (concurrent/futures/thread.py:81)",
    "EpollSelector.select",
    "Condition.wait",
    "wait (threading",
)
"""Leaf frames of a thread that waits for work (py-spy without ``--idle`` still reports some)."""


def print_collapsed(path: Path, top: int = 30, within: str = "") -> None:
    """Summarize py-spy's collapsed stacks: busy samples per thread, hottest leaves, inclusive time.

    Idle stacks (a pool thread waiting on its queue, the loop in ``select``) are left
    out; with ``within``, main-thread stacks count only when that function is on them
    (e.g. ``Azarr.read`` drops start-up imports and the checksum).
    """
    import collections

    leaf: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = idle = 0
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack:
            continue
        count = int(count_s)
        frames = stack.split(";")
        if any(frames[-1].startswith(x) for x in IDLE_LEAVES):
            idle += count
            continue
        if within and "MainThread" in frames[0] and not any(within in f for f in frames):
            continue
        total += count
        threads[frames[0]] += count
        leaf[frames[-1]] += count
        for frame in set(frames[1:]):
            inclusive[frame] += count
    print(f"--- {total} busy samples ({idle} idle left out); by thread ---")
    for name, n in threads.most_common(10):
        print(f"{100 * n / total:6.1f}%  {name}")
    print("--- hottest leaf frames (self time) ---")
    for name, n in leaf.most_common(top):
        print(f"{100 * n / total:6.1f}%  {name}")
    print("--- inclusive (on the stack) ---")
    for name, n in inclusive.most_common(top):
        print(f"{100 * n / total:6.1f}%  {name}")


def compare_schemes(http_json: Path, https_json: Path) -> str:
    """Markdown putting a plain-HTTP run and an HTTPS run side by side (full reads and writes).

    Cells: seconds (client CPU seconds); ``https / http`` is the HTTPS time over the HTTP time
    and ``CPU +`` the client CPU seconds TLS added. The two runs are separate, so load differs.
    """
    runs = [json.loads(Path(p).read_text()) for p in (http_json, https_json)]
    cfg = runs[0]["config"]
    lines = [
        f"# Cloud path: plain HTTP beside HTTPS ({cfg['size_mib']} MiB, {cfg['delay_ms']:g} ms each way)",
        "",
        f"From `{Path(http_json).name}` and `{Path(https_json).name}` (separate runs, one after the other; "
        f"load average {runs[0]['load'][0]:.1f} and {runs[1]['load'][0]:.1f} at their starts). "
        "Cells: median seconds (client CPU seconds, all threads). `CPU +`: client CPU seconds TLS added.",
        "",
        "| implementation | op | http | https | https / http | CPU + |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    summaries = [r["summary"] for r in runs]
    for impl in IMPLS:
        if impl not in summaries[0] or impl not in summaries[1]:
            continue
        for key in summaries[0][impl]:
            if not key.startswith(("read/", "write/")) or key not in summaries[1][impl]:
                continue
            a, b = summaries[0][impl][key], summaries[1][impl][key]
            if "seconds" not in a or "seconds" not in b:
                continue
            lines.append(
                f"| {LABELS[impl]} | {key} | {a['seconds']:.2f} s ({a['cpu_seconds']:.2f}) | "
                f"{b['seconds']:.2f} s ({b['cpu_seconds']:.2f}) | {b['seconds'] / a['seconds']:.2f} | "
                f"{b['cpu_seconds'] - a['cpu_seconds']:+.2f} |"
            )
    return "\n".join(lines) + "\n"


#: Environment variables through which each client library finds a CA bundle.
CA_ENV_VARS = (
    "SSL_CERT_FILE",
    "AWS_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "TENSORSTORE_CA_BUNDLE",
)


def _task(
    server: Any, proxy: Any, bucket: str, cfg: dict[str, Any], ops: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "endpoint": proxy.url,
        "bucket": bucket,
        "key": server.key,
        "secret": server.secret,
        "admin_port": proxy.admin_port,
        "cpu_pids": {"server": server.process.proc.pid, "proxy": proxy.proc.pid},
        "shape": cfg["shape"],
        "chunks": list(CHUNKS),
        "ops": ops,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=256, help="array size (multiple of 16; default 256)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument(
        "--compressors",
        default=",".join(COMPRESSORS),
        help="comma-separated: blosc-lz4, zstd, none (no compressor: decoding is one copy)",
    )
    parser.add_argument(
        "--impls",
        default=None,
        help="comma-separated implementations (azarr-baseline: see BASELINE); default: the v2 ones, "
        f"or with --zarr-format 3 {','.join(V3_IMPLS)}",
    )
    parser.add_argument("--delay-ms", type=float, default=20.0, help="one-way delay (default 20)")
    parser.add_argument(
        "--zarr-format",
        type=int,
        choices=(2, 3),
        default=2,
        help="3: the arrays as Zarr v3, full reads and writes, zarr-python 3.4 / TensorStore zarr3 peers",
    )
    parser.add_argument(
        "--small-requests", type=int, default=1000, help="small reads per kind (default 1000)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=50, help="concurrent small-read tasks (default 50)"
    )
    parser.add_argument(
        "--tree-arrays", type=int, default=1000, help="arrays in the hierarchy (default 1000)"
    )
    parser.add_argument("--skip-unconsolidated", action="store_true", help="skip the unconsolidated open")
    parser.add_argument(
        "--full-only", action="store_true", help="full reads and writes only (no small reads, no opens)"
    )
    parser.add_argument(
        "--writes-only",
        action="store_true",
        help="with --full-only / --zarr-format 3: the untimed read and the writes",
    )
    parser.add_argument("--quick", action="store_true", help="64 MiB, 1 round, 300 requests, 200-array tree")
    parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR, help="where cloud.md/png/json go")
    parser.add_argument("--name", default="cloud", help="basename of the result files (default cloud)")
    parser.add_argument("--no-plot", action="store_true", help="skip the PNG")
    parser.add_argument("--profile", metavar="WORKLOAD", help="profile azarr on one workload and exit")
    parser.add_argument(
        "--profiler", choices=("cprofile", "py-spy"), default="cprofile", help="with --profile"
    )
    parser.add_argument("--profile-impl", choices=AZARR_IMPLS, default="azarr", help="with --profile")
    parser.add_argument(
        "--profile-repeat", type=int, default=3, help="runs of the workload under the profiler"
    )
    parser.add_argument("--plot", nargs=2, type=Path, metavar=("JSON", "PNG"), help=argparse.SUPPRESS)
    parser.add_argument("--render", type=Path, metavar="JSON", help="rewrite the .md/.png of a results JSON")
    parser.add_argument(
        "--https", action="store_true", help="HTTPS with a test CA the clients trust (needs trustme)"
    )
    parser.add_argument(
        "--tls-at",
        choices=("server", "proxy"),
        default="server",
        help="with --https: SeaweedFS terminates TLS (Go; the proxy relays it, requests not counted) "
        "or the delay proxy does (Python; requests counted)",
    )
    parser.add_argument(
        "--compare",
        nargs=3,
        type=Path,
        metavar=("HTTP_JSON", "HTTPS_JSON", "OUT_MD"),
        help="write a side-by-side table of a plain-HTTP and an HTTPS run and exit",
    )
    args = parser.parse_args(argv)
    if args.compare:
        args.compare[2].write_text(compare_schemes(args.compare[0], args.compare[1]))
        return 0
    if args.plot:
        plot(*args.plot)
        return 0
    if args.render:
        return render(args.render, plot_png=not args.no_plot)
    if args.quick:
        args.size_mib, args.rounds = 64, 1
        args.small_requests, args.tree_arrays = 300, 200
    if args.https and args.name == "cloud":
        args.name = "cloud-https"
    shape = shape_for(args.size_mib)
    compressors = [c for c in args.compressors.split(",") if c]
    v3 = args.zarr_format == 3
    if args.impls is None:
        v3_only = ("azarr-v2",)
        args.impls = ",".join(V3_IMPLS if v3 else (i for i in IMPLS if i not in (BASELINE, *v3_only)))
    if v3:
        args.no_plot = True  # the chart's small-read and hierarchy panels have nothing to show
    impls = [i for i in args.impls.split(",") if i]
    unknown = [i for i in impls if i not in IMPLS]
    if unknown:
        raise SystemExit(f"unknown implementation(s) {', '.join(unknown)}; known: {', '.join(IMPLS)}")
    if not label_azarr() and "azarr-s3fs" in impls:
        _log("azarr's S3Store has no transport= option: measuring its one S3Store as azarr, no azarr-s3fs")
        impls.remove("azarr-s3fs")
    if "azarr" not in impls:
        raise SystemExit("--impls must include azarr")
    cfg: dict[str, Any] = {
        "argv": sys.argv[1:] if argv is None else argv,
        "size_mib": args.size_mib,
        "shape": list(shape),
        "rounds": args.rounds,
        "compressors": compressors,
        "delay_ms": args.delay_ms,
        "small_requests": args.small_requests,
        "concurrency": args.concurrency,
        "tree_arrays": args.tree_arrays,
        "skip_unconsolidated": args.skip_unconsolidated,
        "https": args.https,
        "tls_at": args.tls_at if args.https else None,
        "zarr_format": args.zarr_format,
        "full_only": args.full_only,
        "writes_only": args.writes_only,
        "selections": {
            kind: selections(shape, args.small_requests, kind, SEED + n)
            for n, kind in enumerate(("element", "chunk"))
        },
    }
    for impl in impls:  # build the peer venvs before any server starts
        interpreter(impl)

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    from servers import start_seaweedfs, tls_material

    from benchmarks.cloud_workers import digest, make_data
    from benchmarks.delay_proxy import DelayProxy

    started = time.monotonic()
    load_before = os.getloadavg()[0]
    commit = _azarr_commit()
    server = proxy = None
    tls_dir = tempfile.TemporaryDirectory(prefix="azarr-bench-tls-") if args.https else None
    with _sigterm_as_exit():
        try:
            tls = None
            if tls_dir is not None:
                material = tls_material(Path(tls_dir.name))
                tls = (material["cert"], material["key"])
                # Inherited by every worker (run_worker copies os.environ).
                os.environ.update({var: material["ca"] for var in CA_ENV_VARS})
                _log(f"HTTPS: test CA {material['ca']}")
            _log("starting SeaweedFS ...")
            at_server = tls is not None and args.tls_at == "server"
            server = start_seaweedfs(tls=tls if at_server else None)
            upstream = server.https_endpoint_url if at_server else server.endpoint_url
            proxy = DelayProxy.start(upstream, delay_ms=args.delay_ms, tls=None if at_server else tls)
            bucket = server.create_bucket("azarr-bench")
            _log(f"SeaweedFS {upstream}, delay proxy {proxy.url} (+{args.delay_ms:g} ms each way)")
            opening = args.profile is not None and args.profile.startswith("open")
            for comp in compressors[:1] if args.profile else compressors:
                if opening:
                    break
                _log(f"writing the {args.size_mib} MiB dataset ({comp}) with azarr, directly ...")
                asyncio.run(_write_dataset(server, bucket, f"data/{comp}", shape, comp, args.zarr_format))
                if v3 and "azarr-v2" in impls:  # the same data as Zarr v2, for azarr-v2
                    asyncio.run(_write_dataset(server, bucket, f"data-v2/{comp}", shape, comp, 2))
            if (not args.profile or opening) and not v3:
                _log(f"writing the {args.tree_arrays}-array hierarchy and consolidating ...")
                asyncio.run(_write_tree(server, bucket, "tree", args.tree_arrays))
            expected = digest(make_data(shape))
            if args.profile:
                profile_azarr(
                    server,
                    proxy,
                    bucket,
                    cfg,
                    args.profile,
                    args.profile_impl,
                    args.profiler,
                    args.profile_repeat,
                )
                return 0

            reports: list[dict[str, Any]] = []
            versions: dict[str, dict[str, str]] = {}
            mismatches: list[str] = []
            for round_ in range(args.rounds):
                order = impls[round_ % len(impls) :] + impls[: round_ % len(impls)]
                for impl in order:
                    _log(f"round {round_ + 1}/{args.rounds}: {LABELS[impl]} ...")
                    t0 = time.monotonic()
                    report = run_worker(impl, _task(server, proxy, bucket, cfg, ops_for(impl, cfg, round_)))
                    reports.append(report)
                    versions[impl] = report["versions"]
                    for op in report["ops"]:
                        brief = f"{op['workload']} {op.get('compressor', '')}".strip()
                        if "error" in op:
                            _log(f"  {brief}: ERROR {op['error'][:300]}")
                            continue
                        _log(f"  {brief}: {op['seconds']:.2f} s, {op['proxy']['requests']} requests")
                        # raw returns the bytes it moved, not an array; raw-codec is checked
                        if op["op"] == "read" and impl != "raw" and op["digest"] != expected:
                            mismatches.append(f"{impl} read {op['compressor']}: digest {op['digest']}")
                        if op["op"] == "write" and impl != "raw" and round_ == 0:
                            got = asyncio.run(_check_written(server, bucket, op["prefix"]))
                            if got != expected:
                                mismatches.append(f"{impl} write {op['compressor']}: read back {got}")
                    _log(f"  ({time.monotonic() - t0:.0f} s)")
                    for comp in compressors:
                        _delete_prefix(server, bucket, f"write/{impl}/{comp}/r{round_}")
            small_sums = {
                (r["impl"], op["workload"]): op["checksum"]
                for r in reports
                for op in r["ops"]
                if op["op"] == "small" and "error" not in op and r["impl"] != "raw"
            }
            for kind in ("small-element", "small-chunk"):
                seen = {v for (_, w), v in small_sums.items() if w == kind}
                if len(seen) > 1:
                    mismatches.append(f"{kind}: checksums differ: {small_sums}")
            for r in reports:
                for op in r["ops"]:
                    if op["op"] == "open" and "error" not in op and op["arrays"] != args.tree_arrays:
                        mismatches.append(f"{r['impl']} {op['workload']}: {op['arrays']} arrays")
        finally:
            if proxy is not None:
                proxy.stop()
            if server is not None:
                _log("stopping SeaweedFS ...")
                server.stop()
            if tls_dir is not None:
                tls_dir.cleanup()

    results = {
        "config": {k: v for k, v in cfg.items() if k != "selections"},
        "machine": _machine(),
        "weed_version": _weed_version(),
        "azarr_commit": commit,
        "load": [load_before, os.getloadavg()[0]],
        "wall_s": time.monotonic() - started,
        "versions": versions,
        "summary": summarize(reports, cfg["shape"]),
        "mismatches": mismatches,
        "reports": reports,
    }
    args.output_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.output_dir / f"{args.name}.json"
    json_path.write_text(json.dumps(results, indent=1, default=str))
    text = markdown(results)
    (args.output_dir / f"{args.name}.md").write_text(text)
    print(text)
    if not args.no_plot:
        from benchmarks.peers import ensure_peer_python

        png = args.output_dir / f"{args.name}.png"
        subprocess.run(
            [
                str(ensure_peer_python("plot")),
                str(Path(__file__).resolve()),
                "--plot",
                str(json_path),
                str(png),
            ],
            check=True,
            timeout=300,
        )
        _log(f"chart: {png}")
    _log(f"written to {args.output_dir}/{args.name}.md")
    if mismatches:
        _log("DATA MISMATCHES:\n" + "\n".join(mismatches))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
