"""The store budget across threads and event loops, its adaptive limit, and fork safety.

Threads here each run their own event loop (``asyncio.run`` per thread, as a
thread-pool server does); one budget serves them all. Orderings are forced with
threading events and the budget's own counters, never with sleeps that must be long
enough: every assertion is about counts and order.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

import azarr
from azarr.scheduler import IOBudget, StoreIO, budget_for, set_budget, stats_for
from azarr.scheduler._adaptive import LATENCY_WARMUP, AdaptiveLimit
from azarr.storage import MemoryStore

WAIT = 10.0  # seconds any cross-thread handshake may take before the test fails


def in_thread(coro: Callable[[], Coroutine[Any, Any, Any]]) -> tuple[threading.Thread, list[Any]]:
    """Run ``coro()`` in a new thread on its own loop; the list gets its result or error."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(asyncio.run(coro()))
        except BaseException as exc:  # surfaced by the test through ``out``
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def wait_until(condition: Callable[[], bool]) -> None:
    """Poll ``condition`` from a synchronous context until it holds (or fail)."""
    event = threading.Event()
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        event.wait(0.001)
    raise AssertionError("condition not reached")


async def async_wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(int(WAIT / 0.001)):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


def join(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()


# ---------------------------------------------------------------------- one budget, many loops
def test_threads_with_their_own_loops_share_one_limit() -> None:
    budget = IOBudget(max_requests=4, max_bytes=2**20)
    lock = threading.Lock()
    in_flight = peak = done = 0

    async def reader() -> None:
        nonlocal in_flight, peak, done

        async def one() -> None:
            nonlocal in_flight, peak, done
            async with budget:
                with lock:
                    in_flight += 1
                    peak = max(peak, in_flight)
                await asyncio.sleep(0.002)
                with lock:
                    in_flight -= 1
                    done += 1

        await asyncio.gather(*(one() for _ in range(16)))

    runs = [in_thread(reader) for _ in range(4)]
    join(*(t for t, _ in runs))
    assert all(out == [None] for _, out in runs)
    assert done == 64
    # Four loops, one limit: before, each loop had the whole max_requests (16 in flight).
    assert peak == budget.peak_requests == 4
    assert budget.requests_in_flight == 0


def test_waiters_on_other_loops_are_admitted_first_come_first_served() -> None:
    budget = IOBudget(max_requests=1, max_bytes=2**20)
    release = threading.Event()
    order: list[str] = []

    async def holder() -> None:
        async with budget:
            await asyncio.to_thread(release.wait, WAIT)
        order.append("holder")

    async def waiter(name: str) -> None:
        async with budget:
            order.append(name)

    held, _ = in_thread(holder)
    wait_until(lambda: budget.requests_in_flight == 1)
    threads = []
    for i, name in enumerate(["b", "c", "d"]):
        thread, _ = in_thread(lambda name=name: waiter(name))
        threads.append(thread)
        wait_until(lambda i=i: len(budget._waiters) == i + 1)  # queued in this order
    release.set()
    join(held, *threads)
    assert [name for name in order if name != "holder"] == ["b", "c", "d"]
    assert budget.requests_in_flight == 0 and budget.peak_requests == 1


def test_a_waiter_cancelled_on_its_loop_leaves_its_place_to_the_next() -> None:
    budget = IOBudget(max_requests=1, max_bytes=2**20)
    release = threading.Event()
    admitted: list[str] = []

    async def holder() -> None:
        async with budget:
            await asyncio.to_thread(release.wait, WAIT)

    async def cancelled_waiter() -> str:
        task = asyncio.ensure_future(budget.__aenter__())
        await async_wait_until(lambda: len(budget._waiters) == 1)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return "cancelled"

    async def next_waiter() -> None:
        async with budget:
            admitted.append("next")

    held, _ = in_thread(holder)
    wait_until(lambda: budget.requests_in_flight == 1)
    first, out = in_thread(cancelled_waiter)
    join(first)
    assert out == ["cancelled"] and len(budget._waiters) == 0
    second, _ = in_thread(next_waiter)
    wait_until(lambda: len(budget._waiters) == 1)
    release.set()
    join(held, second)
    assert admitted == ["next"] and budget.requests_in_flight == 0


def test_a_slot_granted_from_another_thread_to_a_cancelled_waiter_is_passed_on() -> None:
    # The holder's thread grants the slot (call_soon_threadsafe) while the waiter's loop
    # is busy; the waiter is then cancelled before it runs: the slot must not be lost.
    budget = IOBudget(max_requests=1, max_bytes=2**20)
    granted = threading.Event()
    free = threading.Event()

    async def holder() -> None:
        async with budget:
            await asyncio.to_thread(granted.wait, WAIT)

    async def waiter() -> str:
        task = asyncio.ensure_future(budget.__aenter__())
        await async_wait_until(lambda: len(budget._waiters) == 1)
        granted.set()  # the holder releases now; this loop is blocked until it did
        wait_until(lambda: not budget._waiters and budget.requests_in_flight == 1)
        task.cancel()  # cancelled with the grant's wake-up already queued on this loop
        with contextlib.suppress(asyncio.CancelledError):
            await task
        free.set()
        return "done"

    held, _ = in_thread(holder)
    wait_until(lambda: budget.requests_in_flight == 1)
    waiting, out = in_thread(waiter)
    join(held, waiting)
    assert out == ["done"] and free.is_set()
    assert budget.requests_in_flight == 0  # handed back, not leaked

    async def again() -> None:
        async with budget:
            pass

    asyncio.run(asyncio.wait_for(again(), WAIT))


def test_a_waiter_whose_loop_closed_does_not_keep_the_slot() -> None:
    budget = IOBudget(max_requests=1, max_bytes=2**20)
    release = threading.Event()

    async def holder() -> None:
        async with budget:
            await asyncio.to_thread(release.wait, WAIT)

    held, _ = in_thread(holder)
    wait_until(lambda: budget.requests_in_flight == 1)

    # A loop that stops with a task still waiting for the slot, then closes (no
    # asyncio.run: nothing cancels the task), as a thread whose loop just ends.
    loop = asyncio.new_event_loop()
    orphan = loop.create_task(budget.__aenter__())
    loop.run_until_complete(async_wait_until(lambda: len(budget._waiters) == 1))
    loop.close()
    release.set()
    join(held)
    # The grant could not be delivered to the closed loop: revoked, so the slot is free.
    assert budget.requests_in_flight == 0
    del orphan
    gc.collect()  # the orphan's coroutine is closed: it must give back nothing twice
    assert budget.requests_in_flight == 0 and len(budget._waiters) == 0

    async def again() -> None:
        async with budget:
            assert budget.requests_in_flight == 1

    asyncio.run(asyncio.wait_for(again(), WAIT))


def test_asyncio_run_shutdown_leaks_no_slot_or_bytes() -> None:
    budget = IOBudget(max_requests=2, max_bytes=100)

    async def main() -> None:
        async def hold() -> None:
            async with budget.reserve(60), budget:
                await asyncio.sleep(3600)

        # One holds bytes and a slot, five wait for bytes.
        tasks = [asyncio.ensure_future(hold()) for _ in range(6)]
        await async_wait_until(lambda: budget.requests_in_flight == 1 and len(budget._byte_waiters) == 5)
        assert not any(task.done() for task in tasks)
        # Return with everything pending: asyncio.run cancels the tasks.

    asyncio.run(main())
    assert budget.requests_in_flight == 0 and budget.bytes_in_flight == 0
    assert not budget._waiters and not budget._byte_waiters


def test_byte_reservations_from_several_loops_share_one_budget_in_order() -> None:
    budget = IOBudget(max_requests=64, max_bytes=100)
    release = threading.Event()
    order: list[str] = []

    async def big_holder() -> None:
        async with budget.reserve(90):
            await asyncio.to_thread(release.wait, WAIT)

    async def reserve(name: str, nbytes: int) -> None:
        async with budget.reserve(nbytes):
            order.append(name)

    held, _ = in_thread(big_holder)
    wait_until(lambda: budget.bytes_in_flight == 90)
    threads = []
    # "large" and "small" together exceed the budget, so once "large" is served "small"
    # waits for it to finish: the order of the appends is the order of the grants.
    for i, (name, nbytes) in enumerate([("large", 96), ("small", 5)]):
        thread, _ = in_thread(lambda name=name, nbytes=nbytes: reserve(name, nbytes))
        threads.append(thread)
        wait_until(lambda i=i: len(budget._byte_waiters) == i + 1)
    # "small" would fit beside the holder, but it queued behind "large": it waits its turn.
    assert order == []
    release.set()
    join(held, *threads)
    assert order == ["large", "small"] and budget.bytes_in_flight == 0


def test_storeio_on_threads_keeps_the_store_limit() -> None:
    # The managed path itself (StoreIO on a store from four threads' loops).
    store = MemoryStore()
    set_budget(store, max_requests=3)

    async def fill() -> None:
        for i in range(20):
            await store.set(f"k{i}", b"x" * 10)

    asyncio.run(fill())
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    original = store.get

    async def get(key: str, byte_range: Any = None) -> bytes | None:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.001)
        with lock:
            state["now"] -= 1
        return await original(key, byte_range)

    store.get = get  # type: ignore[method-assign]

    async def reader() -> list[bytes | None]:
        io = StoreIO(store)
        return list(await asyncio.gather(*(io.get(f"k{i}") for i in range(20))))

    runs = [in_thread(reader) for _ in range(4)]
    join(*(t for t, _ in runs))
    assert all(out[0] == [b"x" * 10] * 20 for _, out in runs), [out for _, out in runs]
    assert state["peak"] == 3


# ---------------------------------------------------------------------- fork
@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork only")
def test_a_forked_child_starts_with_a_fresh_budget() -> None:
    budget = IOBudget(max_requests=2, max_bytes=100, adaptive=True)
    release = threading.Event()

    async def holder() -> None:
        async with budget.reserve(100), budget:
            budget.record_throttle(0)  # the parent's adaptive limit drops to 1
            await asyncio.to_thread(release.wait, WAIT)

    held, _ = in_thread(holder)
    wait_until(lambda: budget.requests_in_flight == 1 and budget.bytes_in_flight == 100)
    assert budget.limit == 1
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork of a multi-threaded process
        pid = os.fork()
    if pid == 0:  # the child: no holder thread here, nothing in flight
        try:

            async def child() -> str:
                async with budget.reserve(100), budget, budget:
                    return f"{budget.requests_in_flight} {budget.bytes_in_flight} {budget.limit}"

            os.write(write, asyncio.run(asyncio.wait_for(child(), WAIT)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    release.set()
    join(held)
    # Two slots and the whole byte budget at once in the child, limit back at its ceiling.
    assert answer == "2 100 2"
    assert budget.requests_in_flight == 0 and budget.bytes_in_flight == 0


# ---------------------------------------------------------------------- the adaptive limit
def test_adaptive_limit_decreases_once_per_window_from_what_was_in_flight() -> None:
    limit = AdaptiveLimit(1, 64, latency_tolerance=None)
    assert limit.limit == 64
    assert limit.throttled(epoch=0, in_flight=40)
    assert limit.limit == 28  # 0.7 x the 40 in flight, not x the nominal 64
    # More refusals from requests admitted before the decrease: no further cut.
    assert not limit.throttled(epoch=0, in_flight=30)
    assert limit.limit == 28 and limit.decreases == 1
    assert limit.throttled(epoch=1, in_flight=28)
    assert limit.limit == 19
    for epoch in range(2, 20):
        limit.throttled(epoch, in_flight=limit.limit)
    assert limit.limit == 1  # the floor


def test_adaptive_limit_grows_a_quarter_per_window_only_while_in_use() -> None:
    limit = AdaptiveLimit(2, 16, latency_tolerance=None)
    limit.throttled(0, in_flight=6)  # 6 * 0.7 = 4.2
    assert limit.limit == 4
    for _ in range(100):
        limit.succeeded(1, 0.01, in_flight=1)  # one request out of a limit of 4: idle
    assert limit.limit == 4
    successes = 0
    while limit.limit < 16:
        limit.succeeded(1, 0.01, in_flight=limit.limit)
        successes += 1
    # A quarter request per window (limit successes), 0.25 / v a success: from 4.2 to 16
    # takes the integral of 4 v dv, about 477 successes.
    expected = 2 * (16**2 - 4.2**2)
    assert 0.95 * expected <= successes <= 1.05 * expected
    limit.succeeded(1, 0.01, in_flight=16)
    assert limit.limit == 16  # the ceiling


def test_adaptive_limit_drops_when_latency_inflates_and_not_when_it_is_steady() -> None:
    limit = AdaptiveLimit(1, 64, latency_tolerance=2.0)
    for _ in range(LATENCY_WARMUP * 3):
        limit.succeeded(0, 0.040, in_flight=64)
    assert limit.limit == 64 and limit.decreases == 0  # steady latency: no decrease
    changed = [limit.succeeded(0, 0.400, in_flight=64) for _ in range(20)]
    assert any(changed) and limit.decreases == 1  # 10x slower: cut once in this window
    assert limit.limit == int(64 * 0.9)


def test_adaptive_limit_ignores_latency_when_told() -> None:
    limit = AdaptiveLimit(1, 64, latency_tolerance=None)
    for seconds in [0.01] * (LATENCY_WARMUP * 2) + [1.0] * 50:
        limit.succeeded(0, seconds, in_flight=64)
    assert limit.decreases == 0


def test_adaptive_limit_rejects_bad_ranges() -> None:
    with pytest.raises(ValueError, match="floor"):
        AdaptiveLimit(0, 4)
    with pytest.raises(ValueError, match="floor"):
        AdaptiveLimit(5, 4)
    with pytest.raises(ValueError, match="latency_tolerance"):
        AdaptiveLimit(1, 4, latency_tolerance=1.0)


async def test_a_lowered_adaptive_limit_holds_back_new_requests_until_it_recovers() -> None:
    budget = IOBudget(max_requests=4, max_bytes=2**20, adaptive=True, latency_tolerance=None)
    holders = [await budget.__aenter__() for _ in range(4)]
    budget.record_throttle(holders[0])  # 0.7 x 4 in flight -> 2
    assert budget.limit == 2 and budget.limit_decreases == 1
    waiter = asyncio.ensure_future(budget.__aenter__())
    for _ in range(2):  # 4 -> 2 in flight: not below the limit of 2
        await budget.__aexit__(None, None, None)
        await asyncio.sleep(0)
    assert not waiter.done()
    await budget.__aexit__(None, None, None)  # 1 in flight: room for one
    epoch = await asyncio.wait_for(waiter, WAIT)
    assert epoch == 1 and budget.requests_in_flight == 2
    # Successes with the limit in use raise it (2.8 + 0.25/2.8 each): past 3, the next
    # waiter gets in.
    blocked = asyncio.ensure_future(budget.__aenter__())
    await asyncio.sleep(0)
    assert not blocked.done()
    for _ in range(3):
        budget.record_success(epoch, 0.01)
    await asyncio.wait_for(blocked, WAIT)
    assert budget.limit == 3 and budget.requests_in_flight == 3
    while budget.requests_in_flight:
        await budget.__aexit__(None, None, None)


def test_the_limit_is_in_store_stats_and_throttles_are_counted() -> None:
    store = MemoryStore()
    store.is_local = False  # a remote store's budget: adaptive by default
    budget = budget_for(store)
    stats = stats_for(store)
    assert budget.adaptive and budget.limit == azarr.config.get("max_concurrency")
    assert stats.as_dict()["concurrency_limit"] == budget.limit
    budget.record_throttle(0)
    as_dict = stats.as_dict()
    assert as_dict["concurrency_limit"] == as_dict["concurrency_limit_min"] == 1  # nothing was in flight
    stats.reset()
    assert stats.as_dict()["concurrency_limit_min"] == 1


def test_local_stores_keep_a_fixed_limit_and_config_turns_adaptation_off() -> None:
    assert not budget_for(MemoryStore()).adaptive
    with azarr.config.set(adaptive_concurrency=False):
        remote = MemoryStore()
        remote.is_local = False
        assert not budget_for(remote).adaptive
    remote = MemoryStore()
    remote.is_local = False
    with azarr.config.set(min_concurrency=4, adaptive_latency_tolerance=None):
        budget = budget_for(remote)
    assert budget.adaptive and budget.min_requests == 4
    set_budget(remote, adaptive=False)
    assert not budget.adaptive and budget.limit == budget.max_requests
    set_budget(remote, adaptive=True, max_requests=8, min_requests=2)
    assert budget.adaptive and budget.limit == 8 and budget.min_requests == 2
    with pytest.raises(ValueError, match="adaptive_latency_tolerance"):
        azarr.config.set(adaptive_latency_tolerance=0.5)
    with pytest.raises(ValueError, match="min_concurrency"):
        azarr.config.set(min_concurrency=0)


async def test_budgets_and_counters_of_stores_gone_are_not_kept_forever() -> None:
    """A store per request (or per test) used to leave its budget and counters behind for
    good, ~15 KiB a store: the fuzzer's 50,000 stores grew the process by 331 MiB."""
    from azarr.scheduler import _budget, _stats

    in_use = MemoryStore()
    kept_open = await azarr.array(list(range(10)), chunks=5, store=in_use)
    configured = MemoryStore()
    set_budget(configured, max_requests=3)
    again = MemoryStore()
    again_budget = weakref.ref(budget_for(again))
    again_stats = weakref.ref(stats_for(again))
    gc.collect()  # nothing uses them now: kept as recently used
    assert budget_for(again) is again_budget() and stats_for(again) is again_stats()
    for _ in range(1000):
        await azarr.array(list(range(10)), chunks=5, store=MemoryStore())
    gc.collect()
    keep = _budget._budgets.keep
    assert len(_budget._budgets.values()) <= keep + 10 and len(_stats.every_stats()) <= keep + 10
    # In use (an open array) or configured (set_budget): still the same objects.
    assert budget_for(in_use) is kept_open._io.budget and stats_for(in_use) is kept_open._io.stats
    assert budget_for(configured).max_requests == 3
    # Used long ago and by nothing since: let go (a new store of that spec starts afresh).
    assert again_budget() is None and again_stats() is None
