"""The scheduler: shared I/O budget, retries, timeouts, hedging, large chunks, progress, stats, copy_store."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import (
    KeyExistsError,
    PermissionDeniedError,
    RetriesExhaustedError,
    StoreTimeoutError,
    ThrottledError,
)
from azarr.scheduler import IOBudget, Progress, RetryPolicy, StoreIO, retry_call, set_budget, stats_for
from azarr.storage import ByteRange, MemoryStore, Store
from tests.util import AsyncPathMemoryStore, RecordingStore

FAST = RetryPolicy(max_attempts=4, initial_delay=0.001, max_delay=0.002, deadline=10)


class FlakyStore(RecordingStore):
    """A real store that fails the first ``failures`` gets of each key with ``error``, or sleeps."""

    def __init__(self, inner: Store, *, failures: int = 0, error: type[Exception] = ThrottledError) -> None:
        super().__init__(inner)
        self.failures = failures
        self.error = error
        self.delay: dict[str, float] = {}

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        self.gets[key] += 1
        if self.gets[key] <= self.failures:
            raise self.error(f"injected failure of get {key!r}")
        if key in self.delay:
            await asyncio.sleep(self.delay.pop(key))
        return await self.inner.get(key, byte_range)


async def test_retry_call_retries_transient_then_succeeds() -> None:
    calls: list[int] = []

    async def attempt() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ThrottledError("slow down")
        return "ok"

    retried: list[BaseException] = []
    assert await retry_call(attempt, policy=FAST, what="get 'k'", on_retry=retried.append) == "ok"
    assert len(calls) == 3 and len(retried) == 2


async def test_retry_call_fails_fast_on_permanent_and_exhausts_on_transient() -> None:
    calls = 0

    async def forbidden() -> None:
        nonlocal calls
        calls += 1
        raise PermissionDeniedError("403")

    with pytest.raises(PermissionDeniedError):
        await retry_call(forbidden, policy=FAST, what="get 'k'")
    assert calls == 1

    async def always_throttled() -> None:
        raise ThrottledError("503 SlowDown")

    with pytest.raises(RetriesExhaustedError, match=r"get 'k'.*4 attempts") as info:
        await retry_call(always_throttled, policy=FAST, what="get 'k'")
    assert isinstance(info.value.__cause__, ThrottledError)


def test_backoff_is_full_jitter_and_capped() -> None:
    policy = RetryPolicy(initial_delay=0.1, max_delay=1.0)
    delays = [policy.backoff(attempt) for attempt in range(1, 12) for _ in range(50)]
    assert all(0 <= d <= 1.0 for d in delays)
    assert max(policy.backoff(1) for _ in range(200)) <= 0.1


async def test_store_io_counts_retries_and_bytes() -> None:
    inner = MemoryStore()
    await inner.set("a", b"x" * 100)
    flaky = FlakyStore(inner, failures=2)
    io = StoreIO(flaky, policy=FAST)
    stats = stats_for(flaky)
    assert await io.get("a") == b"x" * 100
    counters = stats.as_dict()
    assert counters["retries"] == 2 and counters["errors"] == 2 and counters["requests"] == 3
    assert counters["bytes_read"] == 100
    assert sum(counters["latency_histogram"].values()) == 3
    await io.set("b", b"12345")
    assert stats.as_dict()["bytes_written"] == 5


async def test_request_timeout_trips_on_a_stalled_store() -> None:
    inner = MemoryStore()
    await inner.set("slow", b"1")
    flaky = FlakyStore(inner)
    flaky.is_local = False  # timeouts apply to remote stores
    flaky.delay["slow"] = 30.0  # only the first attempt stalls
    io = StoreIO(flaky, policy=FAST, request_timeout=0.2)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await io.get("slow") == b"1"  # first attempt timed out, the retry answered
    assert loop.time() - t0 < 5
    assert stats_for(flaky).retries == 1
    flaky.delay.update({"slow": 30.0})
    with pytest.raises(RetriesExhaustedError) as info:
        await StoreIO(flaky, policy=RetryPolicy(max_attempts=1), request_timeout=0.1).get("slow")
    assert isinstance(info.value.__cause__, StoreTimeoutError)


async def test_byte_budget_admits_reservations_as_bytes_free_up() -> None:
    budget = IOBudget(max_requests=10, max_bytes=100)
    order: list[str] = []

    async def hold(name: str, nbytes: int, seconds: float) -> None:
        async with budget.reserve(nbytes):
            order.append(f"+{name}")
            await asyncio.sleep(seconds)
            order.append(f"-{name}")

    await asyncio.gather(hold("a", 60, 0.05), hold("b", 30, 0.05), hold("c", 50, 0.01), hold("huge", 500, 0))
    assert order.index("+c") > order.index("-a")  # c waited until a released its bytes
    assert budget.bytes_in_flight == 0


async def test_byte_budget_admits_in_order_and_cancelled_waiters_let_the_next_in() -> None:
    budget = IOBudget(max_requests=10, max_bytes=100)
    admitted: list[str] = []
    release = asyncio.Event()

    async def hold(name: str, nbytes: int) -> None:
        async with budget.reserve(nbytes):
            admitted.append(name)
            await release.wait()

    first = asyncio.ensure_future(hold("a", 80))
    await asyncio.sleep(0)
    big = asyncio.ensure_future(hold("b", 50))  # does not fit next to a: waits
    await asyncio.sleep(0)
    small = asyncio.ensure_future(hold("c", 10))  # would fit, but b came first
    await asyncio.sleep(0.01)
    assert admitted == ["a"] and budget.bytes_in_flight == 80
    big.cancel()
    await asyncio.sleep(0.01)
    assert admitted == ["a", "c"] and budget.bytes_in_flight == 90  # b's place went to c
    release.set()
    await asyncio.gather(first, small)
    assert big.cancelled() and budget.bytes_in_flight == 0


async def test_budget_is_shared_across_arrays_and_settable() -> None:
    inner = MemoryStore()
    for name in "abc":
        await azarr.array(np.arange(500), chunks=5, store=inner, path=name)
    slow = FlakyStore(inner)
    set_budget(slow, max_requests=5)
    arrays = [await azarr.open_array(slow, mode="r", path=name) for name in "abc"]

    original = slow._get

    async def delayed(key: str, byte_range: ByteRange | None) -> bytes | None:
        await asyncio.sleep(0.002)
        return await original(key, byte_range)

    slow._get = delayed  # type: ignore[method-assign]
    results = await asyncio.gather(*(a.get_basic_selection() for a in arrays))
    assert all(np.array_equal(r, np.arange(500)) for r in results)
    assert StoreIO(slow).budget.peak_requests == 5


async def test_cancelling_a_read_leaves_no_tasks_behind() -> None:
    inner = MemoryStore()
    await azarr.array(np.arange(2000.0), chunks=10, store=inner)
    slow = FlakyStore(inner)
    original = slow._get

    async def crawl(key: str, byte_range: ByteRange | None) -> bytes | None:
        await asyncio.sleep(0.05)
        return await original(key, byte_range)

    slow._get = crawl  # type: ignore[method-assign]
    arr = await azarr.open_array(slow, mode="r")
    before = asyncio.all_tasks()
    task = asyncio.ensure_future(arr.get_basic_selection())
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before
    assert StoreIO(slow).budget.bytes_in_flight == 0
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await arr.get_basic_selection()
    await asyncio.sleep(0)
    assert asyncio.all_tasks() == before


async def test_large_chunks_are_fetched_as_parallel_ranges(store: Store) -> None:
    data = np.arange(64 * 1024, dtype="f8")  # one 512 KiB chunk
    await azarr.array(data, chunks=data.shape, compressor=None, store=store)
    recording = RecordingStore(store)
    recording.is_local = False  # treat it as remote, as S3 is
    with azarr.config.set(large_chunk_threshold=100_000, large_chunk_part_size=64 * 1024):
        arr = await azarr.open_array(recording, mode="r")
        recording.reset()
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    assert recording.gets["0"] == 8  # after a size probe (getsize), 512 KiB in 64 KiB ranges


async def test_hedged_reads_answer_from_the_backup_request() -> None:
    inner = MemoryStore()
    for i in range(30):
        await inner.set(f"k{i}", b"v")
    slow = FlakyStore(inner)
    io = StoreIO(slow, policy=FAST)
    with azarr.config.set(hedged_reads=True):
        for i in range(30):  # warm the latency window
            await io.get(f"k{i}")
        slow.delay["k0"] = 5.0  # the first request for k0 stalls; the hedge does not
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await io.get("k0") == b"v"
        assert loop.time() - t0 < 2
    assert stats_for(slow).hedged == 1


async def test_progress_callback_on_reads_and_writes() -> None:
    """Per chunk on the async path (remote stores); per batch of chunks on blocking
    stores (tests/test_batched_io.py)."""
    reports: list[Progress] = []
    arr = await azarr.zeros(100, chunks=10, dtype="i4", store=AsyncPathMemoryStore())
    await arr.set_basic_selection(..., np.arange(100), progress=reports.append)
    assert [r.done for r in reports] == list(range(1, 11)) and reports[-1].total == 10
    assert reports[-1].nbytes > 0
    reports.clear()
    await arr.get_orthogonal_selection(([1, 55, 99],), progress=reports.append)
    assert reports[-1].done == reports[-1].total == 3


def test_tqdm_adapter_draws_a_bar(capsys: pytest.CaptureFixture[str]) -> None:
    from azarr.scheduler import tqdm_progress

    callback = tqdm_progress(desc="copying", mininterval=0)
    for done in range(1, 4):
        callback(Progress(done, 3, done * 10))
    drawn = capsys.readouterr().err
    assert "copying" in drawn and "3/3" in drawn


async def test_copy_store_between_stores(store: Store, tmp_path: Any) -> None:
    src = MemoryStore()
    root = await azarr.group(src)
    await root.array("a/x", np.arange(1000), chunks=100)
    await root.attrs.update(title="copied")
    keys = sorted([k async for k in src.list_prefix("")])
    reports: list[Progress] = []
    result = await azarr.copy_store(src, store, dest_path="copy", progress=reports.append)
    assert result.n_copied == len(keys) and result.n_skipped == 0 and result.n_bytes_copied > 0
    assert reports[-1].done == len(keys)
    copied = await azarr.open_array(store, mode="r", path="copy/a/x")
    np.testing.assert_array_equal(await copied.get_basic_selection(), np.arange(1000))
    with pytest.raises(KeyExistsError, match="if_exists"):
        await azarr.copy_store(src, store, dest_path="copy")
    n_copied, n_skipped, _ = await azarr.copy_store(src, store, dest_path="copy", if_exists="skip")
    assert (n_copied, n_skipped) == (0, len(keys))
    replaced = await azarr.copy_store(src, store, dest_path="copy", if_exists="replace", excludes=r"^a/x/\d")
    assert replaced.n_copied == len(keys) - 10


@pytest.mark.parametrize("kind", ["request", "bytes"])
async def test_a_waiter_cancelled_as_the_budget_frees_up_leaves_cleanly(kind: str) -> None:
    # The holder releases (and the budget drops the cancelled waiter) before the
    # cancelled waiter's task runs: it must still end with CancelledError, holding nothing.
    budget = IOBudget(max_requests=1, max_bytes=100)
    release = asyncio.Event()

    def hold() -> Any:
        return budget.request() if kind == "request" else budget.reserve(100)

    async def holder() -> None:
        async with hold():
            await release.wait()

    async def waiter() -> None:
        async with hold():
            pass

    first = asyncio.ensure_future(holder())
    await asyncio.sleep(0)
    second = asyncio.ensure_future(waiter())
    await asyncio.sleep(0)
    release.set()  # the holder's wake-up is queued first ...
    second.cancel()  # ... then the waiter's cancellation
    results = await asyncio.gather(first, second, return_exceptions=True)
    assert results[0] is None and isinstance(results[1], asyncio.CancelledError)
    assert budget.bytes_in_flight == 0
    async with asyncio.timeout(1):  # the slot / bytes are free again
        async with hold():
            pass
