"""One managed path: every public operation survives throttling, 5xx and resets on S3 and GCS.

Between azarr and the server sits the fault-injection proxy (tests/fault_proxy.py)
answering 10 % of all requests -- listings, metadata, attribute documents, chunk
reads and writes, deletes, size probes -- with 503 (S3 SlowDown) or 429 (GCS), and
resetting 2 % of connections. Every operation must succeed, and azarr's retry
counter must account for every fault: nothing reaches a store outside the
budgeted, retried layer (``StoreIO``), and no hidden layer retries below it.
"""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Iterator

import numpy as np
import pytest
from fault_proxy import FaultProxy
from util import proxied_store_pair

import azarr
from azarr.scheduler import set_budget, stats_for
from azarr.storage import S3Store, Store, from_url

KINDS = [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]


@pytest.fixture(autouse=True)
def fast_retries() -> Iterator[None]:
    with azarr.config.set(retry_initial_delay=0.005, retry_max_delay=0.02, retry_max_attempts=30):
        yield


async def _pair(kind: str, request: pytest.FixtureRequest) -> tuple[Store, Store, FaultProxy]:
    direct, proxied, proxy = proxied_store_pair(kind, request, "m")
    return direct, proxied, proxy


def _faults(proxy: FaultProxy) -> dict[str, int]:
    return {k: v for k, v in proxy.counters().injected.items() if k != "total" and v}


async def _every_public_operation(store: Store, copy_target: Store) -> None:
    """create(overwrite), open, attrs, resize, append, group walks, consolidate, copy_store, sizes."""
    data = np.arange(24 * 30, dtype="i4").reshape(24, 30)
    root = await azarr.group(store, overwrite=True)
    await root.attrs.update(title="managed")
    await azarr.create((24, 30), chunks=(5, 7), dtype="i4", store=store, path="g/a", overwrite=True)
    # overwrite=True again: the listing and bulk delete of the first array go through StoreIO too
    arr = await azarr.create((24, 30), chunks=(5, 7), dtype="i4", store=store, path="g/a", overwrite=True)
    await arr.set_basic_selection(..., data)
    await arr.set_basic_selection((slice(2, 4), slice(3, 9)), -1)  # partial chunks: read-modify-write
    expected = data.copy()
    expected[2:4, 3:9] = -1
    await arr.attrs.update(units="m", scale=2)
    await arr.attrs.refresh()
    assert arr.attrs["units"] == "m"
    await arr.resize(20, 30)
    await arr.append(np.full((4, 30), 7, dtype="i4"))
    expected = np.concatenate([expected[:20], np.full((4, 30), 7, dtype="i4")])
    reopened = await azarr.open_array(store, mode="r", path="g/a")
    np.testing.assert_array_equal(await reopened.get_basic_selection(), expected)
    np.testing.assert_array_equal(
        await reopened.get_orthogonal_selection(([1, 22], slice(None))), expected[[1, 22]]
    )
    assert await reopened.nchunks_initialized() == 5 * 5
    assert await reopened.nbytes_stored() > 0
    await (await root.require_group("h/i")).create_dataset("b", shape=(3,), chunks=(2,), dtype="f8")
    members = [name async for name, _ in (await azarr.open_group(store, mode="r")).members(max_depth=None)]
    assert members == ["g", "g/a", "h", "h/i", "h/i/b"]
    assert "a (24, 30) int32" in await (await azarr.open_group(store, mode="r")).tree()
    await azarr.consolidate_metadata(store)
    consolidated = await azarr.open_consolidated(store)
    assert isinstance(consolidated, azarr.AsyncGroup)
    assert consolidated.attrs["title"] == "managed"
    result = await azarr.copy_store(store, copy_target, if_exists="replace")
    assert result.n_copied > 25
    copied = await azarr.open_array(copy_target, mode="r", path="g/a")
    np.testing.assert_array_equal(await copied.get_basic_selection(), expected)


@pytest.mark.parametrize("kind", KINDS)
async def test_every_public_operation_survives_faults(kind: str, request: pytest.FixtureRequest) -> None:
    direct, proxied, proxy = await _pair(kind, request)
    target = direct  # the same data, reached without the proxy
    await direct.delete_prefix("")
    status = "status_503" if kind == "s3" else "status_429"
    proxy.configure(**{status: 0.10, "reset": 0.02}, seed=11)
    proxy.reset_counters()
    stats = stats_for(proxied)
    stats.reset()
    copy_target = from_url(f"memory://managed-{kind}")
    await _every_public_operation(proxied, copy_target)
    faults = _faults(proxy)
    assert faults.get(status, 0) > 10, faults
    # Every injected status reached azarr and was retried there, exactly once each; a reset
    # may also be retried below azarr by a client library (counted at most once here).
    assert faults[status] <= stats.retries <= sum(faults.values()), (faults, stats.as_dict())
    proxy.clear_faults()
    check = await azarr.open_array(target, mode="r", path="g/a")
    assert check.shape == (24, 30)
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.parametrize("kind", KINDS)
async def test_status_faults_are_each_retried_exactly_once(kind: str, request: pytest.FixtureRequest) -> None:
    """Without resets the count is exact: retries == faults injected, across every operation."""
    direct, proxied, proxy = await _pair(kind, request)
    await direct.delete_prefix("")
    status = "status_503" if kind == "s3" else "status_429"
    proxy.configure(**{status: 0.10}, seed=5)
    proxy.reset_counters()
    stats = stats_for(proxied)
    stats.reset()
    await _every_public_operation(proxied, from_url(f"memory://exact-{kind}"))
    faults = _faults(proxy)
    assert faults[status] > 10
    assert stats.retries == faults[status], (faults, stats.as_dict())
    proxy.clear_faults()
    await asyncio.gather(direct.close(), proxied.close())


@pytest.mark.s3
async def test_two_opens_and_an_unpickled_copy_share_one_budget(request: pytest.FixtureRequest) -> None:
    direct, _, proxy = await _pair("s3", request)
    server = request.getfixturevalue("seaweedfs")
    data = np.arange(60 * 500, dtype="f8").reshape(60, 500)
    await azarr.array(data, chunks=(1, 500), store=direct, path="x")
    options = proxy.storage_options(server.storage_options)
    url = f"s3://{direct.spec.root}"
    a = await azarr.open_array(url, mode="r", path="x", storage_options=options)
    b = await azarr.open_array(url, mode="r", path="x", storage_options=options)
    c = pickle.loads(pickle.dumps(a))
    assert a.store.spec == b.store.spec == c.store.spec
    set_budget(a.store, max_requests=5)
    proxy.configure(latency_ms=15)
    proxy.reset_counters()
    results = await asyncio.gather(*(x.get_basic_selection() for x in (a, b, c)))
    assert all(np.array_equal(r, data) for r in results)
    peak = proxy.counters().peak_in_flight
    assert 3 <= peak <= 5, f"{peak} requests in flight at the server with one budget of 5"
    proxy.clear_faults()
    await direct.close()


@pytest.mark.s3
def test_store_works_in_a_forked_child_and_parent_keeps_its_connections(
    request: pytest.FixtureRequest,
) -> None:
    """A forked child makes its own sessions (the parent's sockets are not its to use or close)."""
    import os

    server = request.getfixturevalue("seaweedfs")
    bucket = request.getfixturevalue("s3_bucket")
    store = S3Store(f"{bucket}/fork", storage_options=server.storage_options)
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(store.set("k", b"v"))  # the parent's session on `loop` stays open
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child's outcome is its exit status
            try:
                ok = asyncio.run(store.get("k")) == b"v"
                os._exit(0 if ok else 1)
            except BaseException:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert loop.run_until_complete(store.get("k")) == b"v"  # the parent's pool still works
        loop.run_until_complete(store.close())
    finally:
        loop.close()
