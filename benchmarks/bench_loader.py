"""Training-loader benchmark: azarr.loader against map-style torch loaders and xbatcher, S3 with latency.

A float32 array of ``--size-mib`` (default 1 GiB) with 4 KiB samples (rows of
1024 values) in chunks of 256 rows (1 MiB, Blosc-lz4) is written once to SeaweedFS;
every implementation reads it through `benchmarks.delay_proxy` (20 ms each
way), shuffled, 256 samples per batch, in its own process
(`benchmarks.loader_workers`; peers in the venvs of `benchmarks.peers`):

=================  ===============================================================
``raw``            anonymous aiohttp GETs of every chunk, 64 at a time: the ceiling
                   for the bytes (no decoding, no batching)
``azarr``          ``async for`` over ``azarr.loader.BatchLoader`` (preload_chunks=16)
``azarr-torch``    the same loader as ``TorchIterableDataset``, ``DataLoader(num_workers=2)``
``zarr218``        ``DataLoader(num_workers=2, shuffle=True)`` over ``z[i]``, zarr 2.18 + s3fs
``zarr3``          the same over zarr 3.1 ``ObjectStore`` + obstore
``xbatcher``       xbatcher ``BatchGenerator`` over ``xarray.open_zarr`` (zarr 2.18 + s3fs),
                   batches in shuffled order, ``DataLoader(num_workers=2)``
``zarr34``         zarr-python 3.4 ``ObjectStore`` + obstore, no DataLoader: each shuffled
                   batch is one ``get_orthogonal_selection`` of its (sorted) sample
                   indices, which zarr fetches concurrently; default pipeline, and
                   ``zarr34-fused`` / ``zarr34-zarrs`` with ``FusedCodecPipeline`` / zarrs
``tensorstore``    TensorStore ``zarr`` driver, ``arr.oindex[indices].read()`` per batch
``azarr-cache``    ``azarr`` with the decoded-chunk cache sized to the dataset, three whole
                   epochs: samples/s and store requests per epoch (later epochs: none)
=================  ===============================================================

Throughput is samples/s from the start of iteration (DataLoader worker start-up included;
"after 1st batch" leaves start-up out; "2nd epoch" is azarr's second epoch in the same
process on a new store, like the raw ceiling's timed pass, which is its second), over
the whole epoch or ``--seconds`` at most (a map-style peer fetches a 1 MiB chunk per
4 KiB sample and would take hours). Results: ``benchmarks/results/loader.md``/``.json``.

Usage::

    python -m benchmarks.bench_loader --quick    # 64 MiB, 15 s cap per implementation, 3 rounds
    python -m benchmarks.bench_loader            # 1 GiB, 60 s cap, 3 rounds
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results"
WORKER = REPO_ROOT / "benchmarks" / "loader_workers.py"
FEATURES, CHUNK_ROWS, BATCH = 1024, 256, 256

PEER_VENVS = {
    "zarr218": "loader-zarr218",
    "zarr3": "loader-zarr3",
    "xbatcher": "loader-xbatcher",
    "zarr34": "zarr34-zarrs",
    "zarr34-fused": "zarr34-zarrs",
    "zarr34-zarrs": "zarr34-zarrs",
    "tensorstore": "tensorstore",
}
IMPLS = (
    "raw",
    "azarr",
    "azarr-torch",
    "zarr218",
    "zarr3",
    "xbatcher",
    "zarr34",
    "zarr34-fused",
    "zarr34-zarrs",
    "tensorstore",
    "azarr-cache",
)
BASELINE = "azarr-baseline"
"""``run_azarr`` importing the azarr in ``$AZARR_BASELINE`` (a directory holding an older ``azarr/``,
e.g. ``git archive <commit> azarr | tar -x -C DIR``): before/after in one interleaved run."""


async def _write(server: Any, bucket: str, nsamples: int) -> None:
    import numpy as np

    import azarr
    from azarr.storage import S3Store

    store = S3Store(f"{bucket}/loader.zarr", storage_options=server.storage_options)
    try:
        root = await azarr.group(store=store)
        x = await root.create_dataset(
            "x", shape=(nsamples, FEATURES), chunks=(CHUNK_ROWS, FEATURES), dtype="<f4"
        )
        rng = np.random.default_rng(0)
        step = 16 * CHUNK_ROWS
        for start in range(0, nsamples, step):  # 16 MiB at a time
            stop = min(start + step, nsamples)
            await x.set_basic_selection(
                slice(start, stop), rng.standard_normal((stop - start, FEATURES), "f4")
            )
        await x.attrs.update(_ARRAY_DIMENSIONS=["sample", "feature"])  # for xarray
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()


def _python(impl: str) -> str:
    if impl not in PEER_VENVS:
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python(PEER_VENVS[impl]))


def _run(impl: str, task: dict[str, Any], timeout: float) -> dict[str, Any]:
    task = dict(task, impl=impl)
    env = dict(os.environ, AWS_EC2_METADATA_DISABLED="true")
    env["PYTHONPATH"] = str(REPO_ROOT)
    if impl == BASELINE:
        baseline = os.environ.get("AZARR_BASELINE")
        if not baseline:
            raise SystemExit("azarr-baseline needs AZARR_BASELINE=<directory holding an older azarr/>")
        env["PYTHONPATH"] = os.pathsep.join([baseline, str(REPO_ROOT)])
    from benchmarks.peers import run_worker_json

    try:
        return run_worker_json(
            [_python(impl), str(WORKER), json.dumps(task)],
            what=f"{impl} worker",
            env=env,
            timeout=timeout,
            stderr_chars=2000,
            cwd=REPO_ROOT,
        )
    except RuntimeError as exc:  # one implementation failing does not end the run
        return {"impl": impl, "error": str(exc)}


def _medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per implementation, the run with the median samples/s (errors count only if every run failed)."""
    by_impl: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_impl.setdefault(run["impl"], []).append(run)
    rows = {}
    for impl, group in by_impl.items():
        ok = sorted((r for r in group if "error" not in r), key=lambda r: r["samples_per_s"])
        rows[impl] = dict(ok[(len(ok) - 1) // 2], rounds=len(ok)) if ok else group[-1]
        # azarr's second epoch (loader_workers.run_azarr): its own median over the rounds
        seconds = sorted(r["second_epoch"]["samples_per_s"] for r in ok if "second_epoch" in r)
        if seconds:
            rows[impl]["second_epoch_samples_per_s"] = seconds[(len(seconds) - 1) // 2]
    return rows


def markdown(results: dict[str, Any]) -> str:
    rows = _medians(results["runs"])
    ceiling = rows.get("raw", {}).get("samples_per_s")
    peers = [
        rows[p]["samples_per_s"]
        for p in IMPLS
        if p not in ("raw", "azarr", "azarr-torch") and "samples_per_s" in rows.get(p, {})
    ]
    best_peer = max(peers) if peers else None
    lines = [
        "# Training-loader benchmark",
        "",
        f"{results['mode']}: float32 ({results['nsamples']}, {FEATURES}) = {results['size_mib']} MiB, 4 KiB samples, "
        f"chunks of {CHUNK_ROWS} rows (1 MiB, Blosc-lz4), batch {BATCH}, shuffled; SeaweedFS behind a "
        f"{results['delay_ms']:g} ms delay proxy; at most {results['seconds']:g} s per implementation, timed from "
        f"the start of iteration; median of {results.get('rounds', 1)} interleaved round(s)"
        + (f"; azarr prefetch {results['prefetch_mib']} MiB" if results.get("prefetch_mib") else "")
        + f". {results['machine']}.",
        "",
        "| implementation | samples/s | samples read | seconds | x best peer | % of raw GETs | after 1st batch"
        " | 1st batch (s) | 2nd epoch samples/s | 2nd epoch % of raw |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for impl in (*IMPLS, BASELINE):
        r = rows.get(impl)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {impl} | error | | | | | | | | |")
            continue
        sps = r["samples_per_s"]
        vs_peer = f"{sps / best_peer:.1f}x" if best_peer else ""
        vs_raw = f"{sps / ceiling:.0%}" if ceiling else ""
        steady = r.get("steady_samples_per_s")
        steady_text = f"{steady:,.0f}" if steady else ""
        first = r.get("first_batch_s")
        first_text = f"{first:.3f}" if first is not None else ""
        second = r.get("second_epoch_samples_per_s")
        second_text = f"{second:,.0f}" if second else ""
        second_raw = f"{second / ceiling:.0%}" if second and ceiling else ""
        lines.append(
            f"| {impl} | {sps:,.0f} | {r['samples']:,} | {r['seconds']:.2f} | {vs_peer} | {vs_raw}"
            f" | {steady_text} | {first_text} | {second_text} | {second_raw} |"
        )
    cached = rows.get("azarr-cache", {})
    if "epochs" in cached:
        lines += [
            "",
            "`azarr-cache`: the decoded-chunk cache sized to the dataset (`chunk_cache_bytes`, "
            "`chunk_cache_recheck=False`), three whole epochs on new stores of one URL (median round):",
            "",
            "| epoch | samples/s | x epoch 1 | store requests | seconds |",
            "| ---: | ---: | ---: | ---: | ---: |",
        ]
        base = cached["epochs"][0]["samples_per_s"]
        for number, e in enumerate(cached["epochs"], 1):
            lines.append(
                f"| {number} | {e['samples_per_s']:,.0f} | {e['samples_per_s'] / base:.1f}x | {e['requests']:,}"
                f" | {e['seconds']:.2f} |"
            )
    errors = [
        f"- {r['impl']}: {r['error'].strip().splitlines()[-1]}" for r in results["runs"] if "error" in r
    ]
    return "\n".join(lines + (["", *errors] if errors else []) + [""])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="64 MiB, 15 s per implementation")
    parser.add_argument("--size-mib", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument(
        "--impls", default=",".join(IMPLS), help=f"comma-separated; also {BASELINE} (see BASELINE)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; tables show medians")
    parser.add_argument(
        "--prefetch-mib",
        type=int,
        default=None,
        help="azarr's max_prefetch_bytes in MiB (default: the loader's 256 MiB); below the dataset's "
        "size a reduced run has the prefetch bound of a 1 GiB run",
    )
    parser.add_argument("--out", default="loader")
    args = parser.parse_args(argv)
    size_mib = args.size_mib or (64 if args.quick else 1024)
    seconds = args.seconds or (15.0 if args.quick else 60.0)
    nsamples = size_mib * 2**20 // (FEATURES * 4)

    impls = [i for i in args.impls.split(",") if i]
    for impl in impls:  # build peer venvs before any timing
        _python(impl)
    runs = []
    with served_dataset(nsamples, args.delay_ms) as served:
        task = {
            **served,
            "nsamples": nsamples,
            "features": FEATURES,
            "chunk_rows": CHUNK_ROWS,
            "batch_size": BATCH,
            "seconds": seconds,
            "seed": 0,
            "preload_chunks": 16,
            "prefetch_mib": args.prefetch_mib,
        }
        for impl in [i for _ in range(args.rounds) for i in impls]:
            result = _run(impl, task, timeout=seconds * 4 + 300)
            print(json.dumps(result)[:400], flush=True)
            runs.append(result)
    results = {
        "mode": "quick" if args.quick else ("full" if size_mib >= 1024 else "reduced"),
        "size_mib": size_mib,
        "nsamples": nsamples,
        "seconds": seconds,
        "delay_ms": args.delay_ms,
        "rounds": args.rounds,
        "prefetch_mib": args.prefetch_mib,
        "runs": runs,
        "machine": f"{platform.machine()}, Python {platform.python_version()}, {os.cpu_count()} cores",
    }
    save_results(args.out, results, markdown)
    return 0


@contextlib.contextmanager
def served_dataset(nsamples: int, delay_ms: float) -> Iterator[dict[str, Any]]:
    """SeaweedFS holding the loader dataset (written directly), behind the delay proxy; yields
    the task fields every worker needs to reach it, and stops both on exit."""
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs

    from benchmarks.delay_proxy import DelayProxy

    server = start_seaweedfs()
    proxy = None
    try:
        bucket = server.create_bucket()
        asyncio.run(_write(server, bucket, nsamples))
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=delay_ms)
        yield {
            "endpoint": proxy.url,
            "key": server.key,
            "secret": server.secret,
            "bucket": bucket,
            "prefix": "loader.zarr",
        }
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()


def save_results(name: str, results: dict[str, Any], render: Callable[[dict[str, Any]], str]) -> None:
    """Write ``results/<name>.json`` and ``.md`` (``render(results)``), and print the table."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1))
    (RESULTS / f"{name}.md").write_text(render(results))
    print(render(results))


if __name__ == "__main__":
    raise SystemExit(main())
