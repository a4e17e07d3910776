"""Scheduler behaviour under real faults: a fault-injection proxy between azarr and S3 / GCS.

The proxy (tests/fault_proxy.py) forwards to SeaweedFS or fake-gcs-server and
injects 503/429/500 responses, connection resets and stalls. Reads must return
correct data, writes must lose nothing (verified through a direct connection),
and azarr's retry counters must match what the proxy injected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS, FaultProxy
from util import proxied_store_pair

import azarr
from azarr.errors import RetriesExhaustedError, StoreTimeoutError
from azarr.scheduler import set_budget, stats_for
from azarr.storage import Store

DATA = np.arange(40 * 1000, dtype="f8").reshape(40, 1000)
CHUNKS = (1, 1000)  # 40 chunks of 8000 bytes


@pytest.fixture(autouse=True)
def fast_retries() -> Iterator[None]:
    # 25 attempts: a chunk must never exhaust its retries by chance under these fault rates.
    with azarr.config.set(retry_initial_delay=0.01, retry_max_delay=0.05, retry_max_attempts=25):
        yield


def _status_faults(proxy: FaultProxy) -> int:
    injected = proxy.counters().injected
    return sum(n for kind, n in injected.items() if kind.startswith("status_"))


async def _pair(kind: str, request: pytest.FixtureRequest) -> tuple[Store, Store, FaultProxy]:
    direct, proxied, proxy = proxied_store_pair(kind, request, "x")
    return direct, proxied, proxy


KINDS = [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]


@pytest.mark.parametrize("kind", KINDS)
async def test_reads_survive_throttling_and_server_errors(kind: str, request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair(kind, request)
    await azarr.array(DATA, chunks=CHUNKS, store=direct)
    status = "status_503" if kind == "s3" else "status_429"
    proxy.configure(**{status: 0.25, "status_500": 0.1}, methods=["GET"], path=CHUNK_KEYS, seed=7)
    arr = await azarr.open_array(proxied, mode="r")
    np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
    injected = _status_faults(proxy)
    assert injected > 5
    assert stats_for(proxied).retries == injected  # one azarr retry per injected fault, no hidden layers
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.parametrize("kind", KINDS)
async def test_writes_lose_nothing_under_faults(kind: str, request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair(kind, request)
    arr = await azarr.zeros(DATA.shape, chunks=CHUNKS, dtype="f8", store=proxied)
    write_method = "PUT" if kind == "s3" else "POST"  # gcsfs uploads by POST (name in the body)
    proxy.configure(status_503=0.2, reset=0.1, methods=[write_method], seed=3)
    await arr.set_basic_selection(..., DATA)
    injected = proxy.counters().injected
    assert sum(injected.values()) > 5
    stats = stats_for(proxied)
    # Status faults surface once each; aiohttp may silently resend after a reset itself.
    assert _status_faults(proxy) <= stats.retries <= sum(v for k, v in injected.items() if k != "total")
    # Verify every chunk through a connection that bypasses the proxy.
    check = await azarr.open_array(direct, mode="r")
    assert await check.nchunks_initialized() == 40
    np.testing.assert_array_equal(await check.get_basic_selection(), DATA)
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.s3
async def test_budget_is_global_across_arrays(request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair("s3", request)
    for name in "abc":
        await azarr.array(DATA, chunks=CHUNKS, store=direct, path=name)
    set_budget(proxied, max_requests=6)
    proxy.configure(latency_ms=20)
    proxy.reset_counters()
    arrays = [await azarr.open_array(proxied, mode="r", path=name) for name in "abc"]
    results = await asyncio.gather(
        *(a.get_basic_selection() for a in arrays), arrays[0].get_basic_selection()
    )
    assert all(np.array_equal(r, DATA) for r in results)
    peak = proxy.counters().peak_in_flight
    assert peak <= 6, f"{peak} requests in flight at the server with a budget of 6"
    assert peak >= 4  # and the budget was actually used
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.s3
async def test_stalled_server_trips_the_request_timeout(request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair("s3", request)
    await azarr.array(DATA, chunks=CHUNKS, store=direct)
    arr = await azarr.open_array(proxied, mode="r")
    with azarr.config.set(request_timeout=0.5):
        proxy.configure(stall=1.0, stall_seconds=4, fail_first_n=2, methods=["GET"], path=CHUNK_KEYS)
        t0 = time.monotonic()
        np.testing.assert_array_equal(
            await arr.get_basic_selection(), DATA
        )  # two attempts time out, then retry
        assert time.monotonic() - t0 < 10
        assert stats_for(proxied).retries == 2
        proxy.configure(stall=1.0, stall_seconds=4, methods=["GET"], path=CHUNK_KEYS)
        with azarr.config.set(retry_max_attempts=2):
            t0 = time.monotonic()
            with pytest.raises(RetriesExhaustedError) as info:
                await arr.get_basic_selection(3)
            assert time.monotonic() - t0 < 5
            assert isinstance(info.value.__cause__, StoreTimeoutError)
            assert "'3.0'" in str(info.value)  # names the chunk key
    proxy.clear_faults()
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.s3
async def test_cancellation_leaves_no_tasks_or_connections(request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair("s3", request)
    await azarr.array(DATA, chunks=CHUNKS, store=direct)
    arr = await azarr.open_array(proxied, mode="r")
    proxy.configure(latency_ms=300)
    # Connections another test left behind (e.g. ones the proxy still holds in a stall).
    baseline = proxy.counters().connections_open
    before = asyncio.all_tasks()
    task = asyncio.ensure_future(arr.get_basic_selection())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before
    await proxied.close()
    deadline = time.monotonic() + 5
    while proxy.counters().connections_open > baseline and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    assert proxy.counters().connections_open <= baseline  # the cancelled requests left no connection open
    await direct.close()
