"""Readers on several threads behind a server that throttles: one limit, adapting.

SeaweedFS behind the fault proxy, which answers ``503 SlowDown`` whenever more than K
requests are being served (`FaultProxy.configure` ``throttle_in_flight``). Four threads,
each with its own event loop and its own `S3Store` of one URL, read one array at once:
they share one budget (the spec's), so the proxy never sees more than ``max_requests``
in flight; the budget's adaptive limit drops under the refusals, every read completes
with the right data, and once the server stops refusing the limit climbs back to
``max_requests``. Counts only, no timing. The full-size run with peers beside it is
``benchmarks/bench_throttle.py``.

GCS (``429 rateLimitExceeded``) and Azure (``503 ServerBusy``, a gateway's ``429``) say
"slow down" in their own words: fake-gcs-server and Azurite behind the proxy answering
in their formats show each lowers the limit, and a plain 500 does not.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS
from util import proxied_store_pair

import azarr
from azarr.scheduler import budget_for, set_budget, stats_for
from azarr.storage import AzureBlobStore, S3Store

DATA = np.arange(64 * 4096, dtype="f4").reshape(64, 4096)
CHUNKS = (1, 4096)  # 64 chunks of 16 KiB
MAX_REQUESTS = 16
K = 4  # the server serves 4 at a time: 4 loops x 16 would be 64
THREADS = 4


def read_on_threads(url: str, options: dict[str, Any]) -> list[Any]:
    """Each of ``THREADS`` threads opens ``url`` on its own loop and reads it whole."""
    results: list[Any] = [None] * THREADS

    async def read() -> np.ndarray[Any, Any]:
        store = S3Store(url, storage_options=options, read_only=True)
        try:
            arr = await azarr.open_array(store, mode="r")
            data: np.ndarray[Any, Any] = await arr.get_basic_selection()
            return data
        finally:
            await store.close()

    def run(i: int) -> None:
        try:
            results[i] = asyncio.run(read())
        except BaseException as exc:  # reported by the assertions below
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return results


@pytest.mark.s3
async def test_threads_behind_a_throttling_server_share_one_adaptive_limit(
    request: pytest.FixtureRequest,
) -> None:
    seaweedfs = request.getfixturevalue("seaweedfs")
    bucket = request.getfixturevalue("s3_bucket")
    proxy = request.getfixturevalue("s3_fault_proxy")
    url = f"{bucket}/throttled"
    direct = S3Store(url, storage_options=seaweedfs.storage_options)
    await azarr.array(DATA, chunks=CHUNKS, store=direct)
    await direct.close()
    options = proxy.storage_options(seaweedfs.storage_options)
    proxied = S3Store(url, storage_options=options, read_only=True)
    # Latency is a noisier signal than refusals: this test is about counts, so only
    # refusals move the limit here (the latency signal has its own unit tests).
    with azarr.config.set(adaptive_latency_tolerance=None):
        budget = set_budget(proxied, max_requests=MAX_REQUESTS)
    assert budget.adaptive and budget.limit == MAX_REQUESTS
    stats = stats_for(proxied)

    proxy.configure(throttle_in_flight=K, latency_ms=5)
    proxy.reset_counters()
    results = await asyncio.to_thread(read_on_threads, url, options)
    assert all(isinstance(r, np.ndarray) and np.array_equal(r, DATA) for r in results), results
    c = proxy.counters()
    refused = c.injected.get("throttle", 0)
    assert refused > 0  # the server did throttle ...
    # ... every refusal reached azarr as one throttled attempt and was retried once, and
    # no read failed (the threads all returned the data).
    assert stats.throttled == refused and stats.retries == refused
    # One budget for four loops: never more than max_requests at the server.
    assert c.peak_in_flight <= MAX_REQUESTS and budget.peak_requests <= MAX_REQUESTS
    low = stats.as_dict()["concurrency_limit_min"]
    assert low < MAX_REQUESTS and budget.limit_decreases > 0

    # The server recovers: successes bring the limit back up, one step per window.
    proxy.clear_faults()
    rounds = 0
    while budget.limit < MAX_REQUESTS and rounds < 10:
        results = await asyncio.to_thread(read_on_threads, url, options)
        assert all(isinstance(r, np.ndarray) and np.array_equal(r, DATA) for r in results), results
        rounds += 1
    assert budget.limit == MAX_REQUESTS == stats.as_dict()["concurrency_limit"]
    assert proxy.counters().injected.get("throttle", 0) == refused  # no refusal after the recovery
    assert budget_for(proxied) is budget and budget.requests_in_flight == 0
    await proxied.close()


# GCS and Azure say "slow down" in their own words; the adaptive limit must hear each as
# throttling (and a plain server error as not). fake-gcs-server and Azurite never throttle,
# so the fault proxy answers in their formats in front of them.
SMALL = np.arange(32 * 1024, dtype="f4").reshape(32, 1024)
SMALL_CHUNKS = (1, 1024)  # 32 chunks of 4 KiB
REFUSED = 3


def _behind_proxy(kind: str, request: pytest.FixtureRequest) -> tuple[Any, Any, Any]:
    """(direct store, the same store through a fault proxy, the proxy) on fresh storage."""
    if kind == "gcs":
        return proxied_store_pair("gcs", request, "throttled")
    from azurite import ACCOUNT

    azurite = request.getfixturevalue("azurite")
    proxy = request.getfixturevalue("fault_proxy_factory")(azurite.account_url.rsplit("/", 1)[0])
    container = azurite.create_container()
    options = {**azurite.storage_options, "account_url": f"{proxy.url}/{ACCOUNT}"}
    direct = AzureBlobStore(f"{container}/throttled", storage_options=azurite.storage_options)
    return direct, AzureBlobStore(f"{container}/throttled", storage_options=options), proxy


@pytest.mark.parametrize(
    ("kind", "answer", "error_format"),
    [
        pytest.param("gcs", "status_429", "gcs", marks=pytest.mark.gcs, id="gcs-429-rateLimitExceeded"),
        pytest.param("azure", "status_503", "azure", marks=pytest.mark.azure, id="azure-503-ServerBusy"),
        pytest.param("azure", "status_429", "azure", marks=pytest.mark.azure, id="azure-429"),
    ],
)
async def test_gcs_and_azure_throttling_answers_lower_the_adaptive_limit(
    kind: str, answer: str, error_format: str, request: pytest.FixtureRequest
) -> None:
    direct, proxied, proxy = _behind_proxy(kind, request)
    await azarr.array(SMALL, chunks=SMALL_CHUNKS, store=direct)
    with azarr.config.set(adaptive_latency_tolerance=None, retry_initial_delay=0.01, retry_max_delay=0.05):
        budget = set_budget(proxied, max_requests=8)
        stats = stats_for(proxied)
        arr = await azarr.open_array(proxied, mode="r")

        # A plain server error (GCS 500 backendError, Azure 500 InternalError) is retried
        # but says nothing about the request rate: the limit stays.
        proxy.configure(status_500=1.0, fail_first_n=REFUSED, methods=["GET"], path=CHUNK_KEYS,
                        error_format=error_format)  # fmt: skip
        np.testing.assert_array_equal(await arr.get_basic_selection(), SMALL)
        assert proxy.counters().injected == {"status_500": REFUSED}
        assert stats.retries == REFUSED and stats.throttled == 0
        assert budget.limit_decreases == 0 and budget.limit == 8

        # The store's "slow down": one throttled attempt each, retried, and the limit drops.
        proxy.configure(**{answer: 1.0}, fail_first_n=REFUSED, methods=["GET"], path=CHUNK_KEYS,
                        error_format=error_format)  # fmt: skip
        proxy.reset_counters()
        np.testing.assert_array_equal(await arr.get_basic_selection(), SMALL)
        assert proxy.counters().injected == {answer: REFUSED}
        assert stats.throttled == REFUSED and stats.retries == 2 * REFUSED
        assert budget.limit_decreases >= 1 and budget.limit < 8
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.gcs
async def test_gcs_throttling_proxy_sees_at_most_max_requests(request: pytest.FixtureRequest) -> None:
    """GCS behind a server refusing beyond K in flight with 429 rateLimitExceeded: the
    limit adapts, no read fails, and the server never sees more than ``max_requests``."""
    direct, proxied, proxy = _behind_proxy("gcs", request)
    await azarr.array(SMALL, chunks=SMALL_CHUNKS, store=direct)
    with azarr.config.set(adaptive_latency_tolerance=None):
        budget = set_budget(proxied, max_requests=MAX_REQUESTS)
    proxy.configure(throttle_in_flight=K, latency_ms=5, error_format="gcs")
    proxy.reset_counters()
    arr = await azarr.open_array(proxied, mode="r")
    results = await asyncio.gather(*(arr.get_basic_selection() for _ in range(4)))
    assert all(np.array_equal(r, SMALL) for r in results)
    c = proxy.counters()
    assert c.injected["throttle"] > 0 and c.statuses.get("429") == c.injected["throttle"]
    assert stats_for(proxied).throttled == c.injected["throttle"]
    assert c.peak_in_flight <= MAX_REQUESTS and budget.limit_decreases > 0
    await asyncio.gather(direct.close(), proxied.close())
