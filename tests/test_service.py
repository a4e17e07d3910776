"""The example FastAPI service (azarr.service) as a real uvicorn process over real SeaweedFS, via httpx.

Requests go client -> uvicorn (examples/service/app.py) -> fault proxy (tests/fault_proxy.py)
-> SeaweedFS, so the tests can slow or fail chunk requests and watch what the service
still has in flight after a client leaves.
"""

from __future__ import annotations

import asyncio
import io
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.storage import S3Store

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from fault_proxy import CHUNK_KEYS, FaultProxy  # noqa: E402
from service_server import ServiceProcess  # noqa: E402

pytestmark = pytest.mark.s3

GRID = np.arange(16 * 256 * 256, dtype="<f4").reshape(16, 256, 256) / 1000
FINE = np.arange(512 * 512, dtype="<i4").reshape(512, 512)
V3_CODECS = [
    {"name": "transpose", "configuration": {"order": [2, 1, 0]}},
    {"name": "bytes", "configuration": {"endian": "big"}},
    {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0},
    },
    {"name": "crc32c"},
]
TYX = ["t", "y", "x"]


async def _write(bucket: str, options: dict[str, Any]) -> None:
    store = S3Store(f"{bucket}/data.zarr", storage_options=options)
    try:
        root = await azarr.group(store=store)
        grid = await root.create_dataset("grid", shape=GRID.shape, chunks=(4, 64, 64), dtype="<f4")
        await grid.set_basic_selection(..., GRID)
        await grid.attrs.update(valid_range=[0, 100])
        sub = await root.create_group("sub")
        fine = await sub.create_dataset("fine", shape=FINE.shape, chunks=(16, 16), dtype="<i4")
        await fine.set_basic_selection(..., FINE)
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()
    # The grid again as Zarr v3 (F-order chunks, big-endian, blosc, crc32c), consolidated inline.
    store = S3Store(f"{bucket}/data3.zarr", storage_options=options)
    try:
        root = await azarr.group(store=store, zarr_format=3)
        grid = await root.create_dataset(
            "grid", shape=GRID.shape, chunks=(4, 64, 64), dtype="<f4", codecs=V3_CODECS, dimension_names=TYX
        )
        await grid.set_basic_selection(..., GRID)
        await grid.attrs.update(valid_range=[0, 100])
        # The grid sharded: 4 x 2 x 2 inner chunks a shard.
        sharded = await root.create_dataset(
            "sharded",
            shape=GRID.shape,
            chunks=(1, 64, 64),
            shards=(4, 128, 128),
            dtype="<f4",
            dimension_names=TYX,
        )
        await sharded.set_basic_selection(..., GRID)
        await sharded.attrs.update(valid_range=[0, 100])
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()


@pytest.fixture(scope="module")
def bucket(seaweedfs: Any) -> str:
    name: str = seaweedfs.create_bucket()
    asyncio.run(_write(name, seaweedfs.storage_options))
    return name


@pytest.fixture(scope="module")
def proxy(seaweedfs: Any) -> Iterator[FaultProxy]:
    with FaultProxy.start(seaweedfs.endpoint_url) as p:
        yield p


@pytest.fixture(scope="module")
def svc(bucket: str, proxy: FaultProxy, seaweedfs: Any) -> Iterator[ServiceProcess]:
    datasets = {
        "d": {
            "url": f"s3://{bucket}/data.zarr",
            "storage_options": proxy.storage_options(seaweedfs.storage_options),
        },
        "d3": {
            "url": f"s3://{bucket}/data3.zarr",
            "storage_options": proxy.storage_options(seaweedfs.storage_options),
        },
    }
    config = {"retry_max_attempts": 3, "retry_initial_delay": 0.01, "retry_max_delay": 0.05}
    server = ServiceProcess(datasets, config=config, deadline=2.0, max_bytes=256 * 1024)
    yield server
    server.stop()


@pytest.fixture
async def client(svc: ServiceProcess, proxy: FaultProxy) -> Any:
    proxy.reset()
    async with httpx.AsyncClient(base_url=svc.url, timeout=30) as c:
        yield c
    proxy.reset()


async def test_tree_and_info(client: Any) -> None:
    tree = (await client.get("/tree/d")).json()
    kinds = {n["path"]: n["kind"] for n in tree["nodes"]}
    assert {k: kinds[k] for k in ("grid", "sub", "sub/fine")} == {
        "grid": "array",
        "sub": "group",
        "sub/fine": "array",
    }
    info = (await client.get("/info/d/sub/fine")).json()
    assert (info["shape"], info["chunks"], info["dtype"]) == ([512, 512], [16, 16], "<i4")


async def _add_array(bucket: str, options: dict[str, Any]) -> None:
    store = S3Store(f"{bucket}/data.zarr", storage_options=options)
    try:
        root = await azarr.open_group(store)
        await root.full("extra", 7, shape=(3,), dtype="u1", overwrite=True)
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()


async def test_metadata_is_cached_until_refresh(
    client: Any, bucket: str, seaweedfs: Any, proxy: FaultProxy
) -> None:
    await client.get("/info/d/grid")
    assert proxy.counters().received == 0  # served from the metadata read at startup
    await _add_array(bucket, seaweedfs.storage_options)
    assert (await client.get("/info/d/extra")).status_code == 404  # not seen yet
    refreshed = await client.post("/refresh/d")
    assert refreshed.status_code == 200 and refreshed.json()["age"] < 5
    # One round trip: .zmetadata, and zarr.json (a v3 root's inline consolidated metadata) beside it.
    assert proxy.counters().received == 2
    body = (await client.get("/slice/d/extra", params={"format": "json"})).json()
    assert body["data"] == [7, 7, 7]


@pytest.mark.parametrize(
    ("sel", "expected"),
    [
        ("3,4,5", GRID[3, 4, 5]),
        ("0:2,10:20:3,-1", GRID[0:2, 10:20:3, -1]),
        ("[1,5,9],0,::-40", GRID[[1, 5, 9], 0, ::-40]),
        ("...,7", GRID[..., 7]),
    ],
)
async def test_slice_json(client: Any, sel: str, expected: Any) -> None:
    response = await client.get("/slice/d/grid", params={"sel": sel, "format": "json"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["shape"] == list(np.shape(expected))
    np.testing.assert_array_equal(np.asarray(body["data"], dtype="<f4"), expected)


async def test_slice_npy_and_raw_stream_the_whole_array(client: Any) -> None:
    # 4 MiB through slabs of 64 KiB (the service's budget is 256 KiB): every byte in order.
    response = await client.get("/slice/d/grid", params={"format": "npy"})
    assert response.status_code == 200
    assert int(response.headers["content-length"]) == len(response.content)
    np.testing.assert_array_equal(np.load(io.BytesIO(response.content)), GRID)
    raw = await client.get("/slice/d/sub/fine", params={"sel": "[3,1],100:300", "format": "raw"})
    assert raw.headers["x-array-shape"] == "2,200" and raw.headers["x-array-dtype"] == "<i4"
    np.testing.assert_array_equal(np.frombuffer(raw.content, "<i4").reshape(2, 200), FINE[[3, 1], 100:300])


async def test_timeseries(client: Any) -> None:
    body = (await client.get("/timeseries/d/grid", params={"at": "100,200"})).json()
    np.testing.assert_array_equal(np.asarray(body["data"], "<f4"), GRID[:, 100, 200])


async def test_png_tile(client: Any) -> None:
    from PIL import Image

    response = await client.get("/tile/d/grid/1/0/0.png", params={"lead": "2"})
    assert response.status_code == 200 and response.headers["content-type"] == "image/png"
    image = Image.open(io.BytesIO(response.content))
    assert image.size == (256, 256) and image.mode == "LA"
    pixels = np.asarray(image)
    expected = np.clip(GRID[2, ::2, ::2] / 100, 0, 1) * 255
    np.testing.assert_allclose(pixels[:128, :128, 0], expected.astype(np.uint8), atol=1)
    assert (pixels[:128, :128, 1] == 255).all() and (pixels[128:, :, 1] == 0).all()  # padding is transparent


async def test_zarr_v3_dataset_serves_as_v2(client: Any) -> None:
    info = (await client.get("/info/d3/grid")).json()
    assert (info["zarr_format"], info["order"], info["codecs"]) == (3, "F", V3_CODECS)
    assert [n["path"] for n in (await client.get("/tree/d3")).json()["nodes"]] == ["grid", "sharded"]
    for name in ("grid", "sharded"):
        body = (await client.get(f"/slice/d3/{name}", params={"sel": "[1,5,9],0,::-40"})).json()
        np.testing.assert_array_equal(np.asarray(body["data"], dtype="<f4"), GRID[[1, 5, 9], 0, ::-40])
        response = await client.get(f"/slice/d3/{name}", params={"format": "npy"})
        np.testing.assert_array_equal(np.load(io.BytesIO(response.content)), GRID)
    tiles = [
        (await client.get(f"/tile/{d}/{a}/1/0/0.png", params={"lead": "2"})).content
        for d, a in (("d", "grid"), ("d3", "grid"), ("d3", "sharded"))
    ]
    assert tiles[0] == tiles[1] == tiles[2]


@pytest.mark.parametrize(
    ("url", "params", "status"),
    [
        ("/slice/d/grid", {"sel": "1:2:3:4"}, 400),
        ("/slice/d/grid", {"sel": "99"}, 400),
        ("/slice/d/grid", {"format": "xml"}, 400),
        ("/slice/d/nothing", {}, 404),
        ("/slice/d/sub", {}, 404),
        ("/slice/nope/grid", {}, 404),
        ("/tile/d/grid/0/9/9.png", {"lead": "0"}, 404),
    ],
)
async def test_error_statuses(client: Any, url: str, params: dict[str, str], status: int) -> None:
    response = await client.get(url, params=params)
    assert response.status_code == status, response.text
    assert response.json()["detail"]


async def test_throttled_upstream_is_503_with_retry_after(client: Any, proxy: FaultProxy) -> None:
    proxy.configure(status_503=1.0, path=CHUNK_KEYS)
    response = await client.get("/slice/d/grid", params={"sel": "0,0,0"})
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 0
    assert proxy.counters().injected["status_503"] == 3  # retried by azarr, then answered
    proxy.clear_faults()
    assert (await client.get("/slice/d/grid", params={"sel": "0,0,0"})).status_code == 200


async def _scrape(client: Any) -> dict[tuple[str, str], float]:
    from prometheus_client.parser import text_string_to_metric_families

    response = await client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith(
        "text/plain; version=0.0.4"
    )
    return {
        (
            sample.name + (f"[{sample.labels['le']}]" if "le" in sample.labels else ""),
            sample.labels.get("store", ""),
        ): (sample.value)
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


async def test_metrics_endpoint_counts_requests_and_throttles(
    client: Any, proxy: FaultProxy, bucket: str
) -> None:
    store = f"s3://{bucket}/data.zarr"
    await client.get("/slice/d/grid", params={"sel": "0,0,0"})  # the store has been used
    before = await _scrape(client)
    proxy.configure(status_503=1.0, fail_first_n=2, methods=["GET"], path=CHUNK_KEYS)
    response = await client.get("/slice/d/grid", params={"sel": "4:8,0:4,0:4", "format": "json"})
    assert response.status_code == 200, response.text
    after = await _scrape(client)

    def grew(name: str) -> float:
        return after[(name, store)] - before[(name, store)]

    assert grew("azarr_store_throttled_total") == 2 == grew("azarr_store_retries_total")
    assert grew("azarr_store_requests_total") == 3  # two refused, then the chunk
    assert grew("azarr_store_read_bytes_total") > 0
    assert after[("azarr_store_request_seconds_count", store)] == after[("azarr_store_requests_total", store)]
    assert (
        after[("azarr_store_request_seconds_bucket[+Inf]", store)]
        == after[("azarr_store_requests_total", store)]
    )
    assert 1 <= after[("azarr_store_concurrency_limit", store)] <= 64
    assert ("azarr_chunk_cache_hits_total", store) in after and (
        "azarr_reads_collapsed_total",
        store,
    ) in after
    assert after[("azarr_service_requests_in_flight", "")] == 0


async def test_deadline_is_504_and_cancels(client: Any, proxy: FaultProxy, svc: ServiceProcess) -> None:
    proxy.configure(latency_ms=5000)
    started = time.monotonic()
    response = await client.get("/slice/d/grid", params={"sel": "0,0,0"})
    assert response.status_code == 504 and time.monotonic() - started < 4
    await _until(lambda: proxy.counters().in_flight == 0, within=1.0)
    assert svc.health()["timed_out"] >= 1


async def _until(condition: Any, *, within: float) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < within, "condition not reached in time"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


@pytest.mark.parametrize("fmt", ["json", "npy"])
async def test_client_disconnect_cancels_chunk_requests(
    client: Any, proxy: FaultProxy, svc: ServiceProcess, fmt: str
) -> None:
    baseline = svc.health()
    proxy.configure(latency_ms=400)
    # 1,024 chunks at 0.4 s each, 64 at a time: ~6 s of work the client abandons after ~0.5 s.
    # As npy the array streams in 64 KiB slabs (two rows of 32 chunks): the client leaves mid-stream.
    _reader, writer = await asyncio.open_connection("127.0.0.1", svc.port)
    writer.write(f"GET /slice/d/sub/fine?format={fmt} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    await _until(lambda: proxy.counters().in_flight > 0, within=3.0)
    await asyncio.sleep(0.3)
    writer.close()
    elapsed = await _until(lambda: proxy.counters().in_flight == 0, within=1.0)
    received = proxy.counters().received
    await asyncio.sleep(0.5)
    assert proxy.counters().received == received  # nothing new sent after the cancellation
    health = svc.health()
    assert health["cancelled"] == baseline["cancelled"] + 1
    assert health["active_requests"] == 0 and health["tasks"] == baseline["tasks"]  # no task left
    print(f"in-flight chunk requests reached 0 {elapsed * 1000:.0f} ms after the client left")


# ---------------------------------------------------------------------- load through the 20 ms delay proxy
@pytest.fixture(scope="module")
def delayed_svc(bucket: str, seaweedfs: Any) -> Iterator[ServiceProcess]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.delay_proxy import DelayProxy

    with DelayProxy.start(seaweedfs.endpoint_url, delay_ms=20) as delay:
        options = dict(seaweedfs.storage_options, endpoint_url=delay.url)
        # Its clients all come from 127.0.0.1: the per-client limit would turn most away.
        server = ServiceProcess(
            {"d": {"url": f"s3://{bucket}/data.zarr", "storage_options": options}},
            env={"AZARR_CLIENT_REQUESTS": "1000"},
        )
        yield server
        server.stop()


LOAD_URLS = [
    ("/slice/d/grid", {"sel": "3,4,5"}),  # one element
    ("/slice/d/sub/fine", {"sel": "32:48,16:32"}),  # one chunk
    ("/slice/d/grid", {"sel": "0,0:128,0:128", "format": "raw"}),  # four chunks
]


async def run_load(url: str, clients: int, seconds: float, *, rss: Any = None) -> dict[str, Any]:
    """``clients`` concurrent clients looping over LOAD_URLS for ``seconds``; latencies and errors."""
    latencies: list[float] = []
    errors: list[str] = []
    rss_samples: list[tuple[float, int]] = []
    stop_at = time.monotonic() + seconds
    # One httpx client (one connection) per simulated user, as separate users would be: a
    # single pool shared by 200 tasks spends its time in the pool, not on the service.

    async def one(i: int) -> None:
        n = i
        async with httpx.AsyncClient(base_url=url, timeout=30) as c:
            # At least one request each, however late a busy host starts the client.
            while n == i or time.monotonic() < stop_at:
                path, params = LOAD_URLS[n % len(LOAD_URLS)]
                n += 1
                t0 = time.perf_counter()
                try:
                    r = await c.get(path, params=params)
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))
                latencies.append(time.perf_counter() - t0)

    async def sample() -> None:
        while rss is not None and time.monotonic() < stop_at:
            rss_samples.append((time.monotonic(), rss()))
            await asyncio.sleep(0.5)

    await asyncio.gather(sample(), *(one(i) for i in range(clients)))
    q = statistics.quantiles(latencies, n=100)
    return {
        "requests": len(latencies),
        "errors": errors,
        "rps": len(latencies) / seconds,
        "p50": q[49],
        "p99": q[98],
        "rss": rss_samples,
    }


async def test_short_load_through_delay_proxy(delayed_svc: ServiceProcess) -> None:
    result = await run_load(delayed_svc.url, clients=20, seconds=3.0)
    assert result["errors"] == []
    assert result["requests"] >= 20  # every client's requests answered (not a rate: hosts differ)
    print(
        f"20 clients x 3 s: {result['rps']:.0f} req/s, p50 {result['p50'] * 1000:.0f} ms, p99 {result['p99'] * 1000:.0f} ms"
    )


@pytest.mark.slow
async def test_200_clients_30_s_rss_flat(delayed_svc: ServiceProcess) -> None:
    result = await run_load(delayed_svc.url, clients=200, seconds=30.0, rss=delayed_svc.rss)
    assert result["errors"] == []
    after_warmup = [r for t, r in result["rss"] if t >= result["rss"][0][0] + 10]
    growth = after_warmup[-1] / after_warmup[0] - 1
    print(
        f"200 clients x 30 s: {result['requests']} requests, {result['rps']:.0f} req/s, "
        f"p50 {result['p50'] * 1000:.0f} ms, p99 {result['p99'] * 1000:.0f} ms, RSS growth after warm-up {growth:+.1%}"
    )
    assert growth <= 0.10
