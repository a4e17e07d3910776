"""Service benchmark: the example FastAPI app (examples/service/app.py) under uvicorn, over S3 with latency.

SeaweedFS runs on 127.0.0.1 behind `benchmarks.delay_proxy` (20 ms each way);
the service (one uvicorn worker, a subprocess) opens a consolidated hierarchy through
the proxy at startup; ``--clients`` concurrent clients in this process request,
for ``--seconds`` each (aiohttp clients), one kind of slice of a float32 (4096, 4096) array in
(256, 256) chunks (256 KiB, Blosc-lz4):

===========  ===========================  ======================
kind         selection                    response
===========  ===========================  ======================
1-element    ``i,j``                      JSON
1-chunk      one aligned 256 x 256 chunk  raw bytes (256 KiB)
16-chunk     an aligned 1024 x 1024 block raw bytes (4 MiB)
===========  ===========================  ======================

Reported per kind: requests/s, p50/p99 latency (seconds, client side), MiB/s of
array data, errors, the service process's CPU time per request (on this 2-core
machine the client process competes with the service for CPU), and the
service's RSS before and after. Results go to
``benchmarks/results/service.md`` and ``service.json``.

Shared reads (issue #31): ``overlap`` requests, unaligned 256 x 256 windows anywhere in
a hot 1024 x 1024 corner (16 chunks; each window touches 1-4 of them, and the clients'
windows overlap), against three services in turn, each fresh: the example app as it is
(request collapsing), the example app with the decoded-chunk cache (``chunk_cache_bytes``
256 MiB, ``chunk_cache_recheck`` 60 s), and the same endpoint written on zarr-python
3.4's async API + obstore (``benchmarks/service_zarr3.py``, in the ``zarr34-service``
peer venv). Reported: requests/s, p50/p99, and the upstream GETs the delay proxy saw
against the chunks the requests touched (per request, and distinct over the run).

Usage::

    python -m benchmarks.bench_service --quick      # 32 clients, 8 s per kind
    python -m benchmarks.bench_service              # 64 clients, 30 s per kind
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = REPO_ROOT / "benchmarks" / "results"
SHAPE, CHUNK = (4096, 4096), 256


HOT = 4 * CHUNK  # the overlap kind's windows lie in the first HOT x HOT elements (16 chunks)


def _chunks_of(sel: str) -> set[tuple[int, int]]:
    """The chunks a 2-d selection ``"i0:i1,j0:j1"`` (or ``"i,j"``) touches."""
    spans = []
    for part in sel.split(","):
        start, _, stop = part.partition(":")
        lo = int(start)
        hi = int(stop) - 1 if stop else lo
        spans.append(range(lo // CHUNK, hi // CHUNK + 1))
    return {(a, b) for a in spans[0] for b in spans[1]}


def _selection(kind: str, rng: random.Random) -> tuple[str, str]:
    n = SHAPE[0] // CHUNK
    if kind == "overlap":
        i, j = rng.randrange(HOT - CHUNK + 1), rng.randrange(HOT - CHUNK + 1)
        return f"{i}:{i + CHUNK},{j}:{j + CHUNK}", "raw"
    if kind == "1-element":
        return f"{rng.randrange(SHAPE[0])},{rng.randrange(SHAPE[1])}", "json"
    if kind == "1-chunk":
        i, j = rng.randrange(n) * CHUNK, rng.randrange(n) * CHUNK
        return f"{i}:{i + CHUNK},{j}:{j + CHUNK}", "raw"
    i, j = rng.randrange(n // 4) * 4 * CHUNK, rng.randrange(n // 4) * 4 * CHUNK
    return f"{i}:{i + 4 * CHUNK},{j}:{j + 4 * CHUNK}", "raw"


async def _write(server: Any, bucket: str) -> None:
    import numpy as np

    import azarr
    from azarr.storage import S3Store

    store = S3Store(f"{bucket}/svc.zarr", storage_options=server.storage_options)
    try:
        root = await azarr.group(store=store)
        arr = await root.create_dataset("a", shape=SHAPE, chunks=(CHUNK, CHUNK), dtype="<f4")
        data = np.random.default_rng(0).standard_normal(SHAPE, dtype=np.float32)
        await arr.set_basic_selection(..., data)
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()


async def _load(url: str, kind: str, clients: int, seconds: float) -> dict[str, Any]:
    # aiohttp, not httpx, drives the load: it spends less CPU per request, and on 2 cores
    # the client process competes with the service for it.
    import aiohttp

    latencies: list[float] = []
    errors: list[str] = []
    nbytes = 0
    touched = 0  # chunks touched, summed over requests
    distinct: set[tuple[int, int]] = set()
    stop_at = time.monotonic() + seconds
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        url, connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as client:

        async def one(seed: int) -> None:
            nonlocal nbytes, touched
            rng = random.Random(seed)
            while time.monotonic() < stop_at:
                sel, fmt = _selection(kind, rng)
                chunks = _chunks_of(sel)
                touched += len(chunks)
                distinct.update(chunks)
                t0 = time.perf_counter()
                try:
                    async with client.get("/slice/d/a", params={"sel": sel, "format": fmt}) as r:
                        body = await r.read()
                        if r.status != 200:
                            errors.append(f"{r.status} {body[:200]!r}")
                        elif fmt == "raw":
                            nbytes += len(body)
                except (aiohttp.ClientError, TimeoutError) as exc:
                    errors.append(repr(exc))
                latencies.append(time.perf_counter() - t0)

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(clients)))
        elapsed = time.monotonic() - started
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [latencies[0]] * 99
    return {
        "kind": kind,
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_s": q[49],
        "p99_s": q[98],
        "mib_s": nbytes / elapsed / 2**20,
        "errors": len(errors),
        "first_errors": errors[:3],
        "chunks_touched": touched,
        "distinct_chunks": len(distinct),
    }


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Service benchmark (examples/service/app.py under uvicorn)",
        "",
        f"{results['mode']}: {results['clients']} concurrent aiohttp clients, {results['seconds']:g} s per kind; "
        f"SeaweedFS behind a {results['delay_ms']:g} ms delay proxy; float32 {SHAPE[0]}x{SHAPE[1]}, "
        f"{CHUNK}x{CHUNK} chunks (Blosc-lz4). One uvicorn worker; clients in another process. "
        f"{results['machine']}.",
        "",
        "| slice | requests/s | p50 | p99 | MiB/s | errors | service CPU per request |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results["kinds"]:
        lines.append(
            f"| {r['kind']} | {r['rps']:.0f} | {r['p50_s'] * 1000:.0f} ms | {r['p99_s'] * 1000:.0f} ms"
            f" | {r['mib_s']:.0f} | {r['errors']} | {r.get('service_cpu_ms', float('nan')):.2f} ms |"
        )
    lines += [
        "",
        f"Service RSS: {results['rss_start'] / 2**20:.0f} MiB after start, "
        f"{results['rss_end'] / 2**20:.0f} MiB at the end.",
        "",
    ]
    shared = results.get("shared")
    if shared:
        peer = next((r for r in shared if r["service"].startswith("zarr")), None)
        lines += [
            "## Overlapping windows: request collapsing and the decoded-chunk cache",
            "",
            f"{results['clients']} clients, {results['seconds']:g} s per service, unaligned 256 x 256 windows in "
            "a hot corner of 16 chunks (each touching 1-4). Upstream GETs as counted by the delay proxy "
            "(chunk GETs only: every service opened its array before the run).",
            "",
            "| service | requests/s | x zarr 3.4 | p50 | p99 | upstream GETs | GETs per request | chunks touched per"
            " request | GETs / distinct chunks | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in shared:
            vs = f"{r['rps'] / peer['rps']:.1f}x" if peer and peer["rps"] else ""
            requests = max(1, r["requests"])
            lines.append(
                f"| {r['service']} | {r['rps']:.0f} | {vs} | {r['p50_s'] * 1000:.0f} ms | {r['p99_s'] * 1000:.0f} ms"
                f" | {r['upstream_gets']:,} | {r['upstream_gets'] / requests:.2f}"
                f" | {r['chunks_touched'] / requests:.2f} | {r['upstream_gets'] / max(1, r['distinct_chunks']):.1f}"
                f" | {r['errors']} |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="32 clients, 8 s per kind")
    parser.add_argument("--clients", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--out", default="service")
    parser.add_argument("--no-shared", action="store_true", help="skip the shared-reads comparison")
    parser.add_argument("--kinds", default="1-element,1-chunk,16-chunk", help="comma-separated ('' for none)")
    args = parser.parse_args(argv)
    clients = args.clients or (32 if args.quick else 64)
    seconds = args.seconds or (8.0 if args.quick else 30.0)

    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs
    from service_server import ServiceProcess

    from benchmarks.delay_proxy import DelayProxy

    server = start_seaweedfs()
    proxy = service = None
    try:
        bucket = server.create_bucket()
        asyncio.run(_write(server, bucket))
        proxy = DelayProxy.start(server.endpoint_url, delay_ms=args.delay_ms)
        options = dict(server.storage_options, endpoint_url=proxy.url)
        # The clients all come from 127.0.0.1, so the per-client limit is raised to their number.
        service = ServiceProcess(
            {"d": {"url": f"s3://{bucket}/svc.zarr", "storage_options": options}},
            env={"AZARR_CLIENT_REQUESTS": str(clients)},
        )
        rss_start = service.rss()
        kinds = []
        for kind in [k for k in args.kinds.split(",") if k]:
            cpu0 = _cpu_seconds(service.proc.pid)
            result = asyncio.run(_load(service.url, kind, clients, seconds))
            result["service_cpu_ms"] = (
                (_cpu_seconds(service.proc.pid) - cpu0) / max(1, result["requests"]) * 1000
            )
            print(json.dumps(result), flush=True)
            kinds.append(result)
        rss_end = service.rss()
        shared = []
        if not args.no_shared:
            shared.append(_shared_run("azarr (collapsing)", service, proxy, clients, seconds))
            service.stop()
            cached = ServiceProcess(
                {"d": {"url": f"s3://{bucket}/svc.zarr", "storage_options": options}},
                config={"chunk_cache_bytes": 256 * 2**20, "chunk_cache_recheck": 60},
                env={"AZARR_CLIENT_REQUESTS": str(clients)},
            )
            try:
                shared.append(_shared_run("azarr + chunk cache", cached, proxy, clients, seconds))
            finally:
                cached.stop()
            peer = _start_peer(server, bucket, proxy)
            try:
                shared.append(_shared_run("zarr 3.4 + obstore", peer, proxy, clients, seconds))
            finally:
                peer.stop()
        results = {
            "mode": "quick" if args.quick else "full",
            "clients": clients,
            "seconds": seconds,
            "delay_ms": args.delay_ms,
            "machine": f"{platform.machine()}, Python {platform.python_version()}, {_cores()} cores",
            "kinds": kinds,
            "rss_start": rss_start,
            "rss_end": rss_end,
            "shared": shared,
        }
    finally:
        if service is not None:
            service.stop()
        if proxy is not None:
            proxy.stop()
        server.stop()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(results, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(results))
    print(markdown(results))
    return 0


class _Peer:
    """The zarr 3.4 + obstore app (``benchmarks/service_zarr3.py``) under uvicorn in its peer venv."""

    def __init__(self, python: str, dataset: dict[str, Any]) -> None:
        import os
        import subprocess
        import tempfile
        import urllib.request

        sys.path.insert(0, str(REPO_ROOT / "tests"))
        from servers import free_port

        self.port = free_port()
        env = dict(os.environ, AZARR_PEER_DATASET=json.dumps(dataset), PYTHONPATH=str(REPO_ROOT))
        self.log = Path(tempfile.mkstemp(prefix="azarr-peer-service-", suffix=".log")[1])
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [python, "-m", "uvicorn", "benchmarks.service_zarr3:app", "--host", "127.0.0.1",
                 "--port", str(self.port), "--no-access-log", "--log-level", "warning"],
                cwd=REPO_ROOT, env=env, stdout=out, stderr=out, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.url + "/health", timeout=5).read()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        "the zarr 3.4 service did not start:\n" + self.log.read_text()[-3000:]
                    ) from None
                time.sleep(0.2)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        from servers import terminate

        terminate(self.proc, 10.0)
        self.log.unlink(missing_ok=True)


def _start_peer(server: Any, bucket: str, proxy: Any) -> _Peer:
    from benchmarks.peers import ensure_peer_python

    options = server.storage_options
    dataset = {
        "bucket": bucket,
        "prefix": "svc.zarr",
        "path": "a",
        "endpoint": proxy.url,
        "key": options["key"],
        "secret": options["secret"],
    }
    return _Peer(str(ensure_peer_python("zarr34-service")), dataset)


def _shared_run(label: str, service: Any, proxy: Any, clients: int, seconds: float) -> dict[str, Any]:
    """The overlap load against ``service`` (already started: its array is open), with the
    upstream GETs the delay proxy saw meanwhile."""
    import urllib.request

    # One request first: every service opens lazily or at startup; either way not timed.
    urllib.request.urlopen(service.url + "/slice/d/a?sel=0,0&format=json", timeout=60).read()
    proxy.reset()
    cpu0 = _cpu_seconds(service.proc.pid)
    result = asyncio.run(_load(service.url, "overlap", clients, seconds))
    counters = proxy.counters()
    result["service"] = label
    result["upstream_gets"] = counters["methods"].get("GET", 0)
    result["service_cpu_ms"] = (_cpu_seconds(service.proc.pid) - cpu0) / max(1, result["requests"]) * 1000
    print(json.dumps(result), flush=True)
    return result


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux ``/proc``)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cores() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    raise SystemExit(main())
