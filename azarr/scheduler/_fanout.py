"""Bounded concurrent fan-out of per-chunk work.

``bounded_map`` runs ``fn(item)`` for every item with at most ``limit`` calls in
flight. It starts ``limit`` workers that pull items from one shared iterator,
so reading 100,000 chunks creates ``limit`` tasks, not 100,000 (zarr-python 3's
``concurrent_map`` creates every task up front). The first failure cancels the
remaining work and is re-raised as itself — not wrapped in an ``ExceptionGroup``
— so callers see ``CodecError`` / ``StoreError`` directly. Cancelling the
awaiting task cancels every worker; no task outlives the call.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence, Sized
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def bounded_map(
    fn: Callable[[T], Awaitable[R]],
    items: Iterable[T],
    limit: int,
) -> list[R]:
    """Await ``fn(item)`` for every item, at most ``limit`` at a time.

    Parameters
    ----------
    fn : async callable
        Called once per item.
    items : iterable
        Consumed lazily by the workers (a generator of chunk projections is fine).
    limit : int
        Maximum concurrent calls (>= 1).

    Returns
    -------
    list
        Results in the order of ``items``.

    Raises
    ------
    Exception
        The first exception raised by ``fn``; the other in-flight calls are
        cancelled and awaited before it propagates.
    """
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    numbered: Iterator[tuple[int, T]] = enumerate(items)
    results: dict[int, R] = {}

    async def worker() -> None:
        # Iterating a shared iterator from several coroutines is safe: next() never
        # awaits, so no two workers interleave inside it.
        for index, item in source:
            results[index] = await fn(item)

    # Fast path: one item needs no extra task (the common "read one chunk" call).
    first = next(numbered, None)
    if first is None:
        return []
    second = next(numbered, None)
    if second is None:
        return [await fn(first[1])]
    source = itertools.chain((first, second), numbered)
    if isinstance(items, Sized):
        limit = min(limit, len(items))
    workers = [asyncio.ensure_future(worker()) for _ in range(limit)]
    try:
        _, pending = await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:
        # The caller was cancelled: stop every worker before propagating.
        await _cancel_all(workers)
        raise
    if pending:
        await _cancel_all(list(pending))
    # Every worker is done now. Retrieve each one's exception, not only the one raised:
    # asyncio.wait inspects a finished task's exception only while it is still waiting,
    # and never the one whose completion ends the wait (its counter reaches 0 first), so
    # two workers failing in the same round left one unretrieved, and asyncio logged
    # "Task exception was never retrieved" with its traceback when it was collected.
    failures = [error for task in workers if not task.cancelled() and (error := task.exception())]
    if failures:
        raise failures[0]
    return [results[i] for i in range(len(results))]


async def _cancel_all(tasks: Sequence[asyncio.Future[None]]) -> None:
    for task in tasks:
        task.cancel()
    # Wait so no worker outlives the call (and no "Task was destroyed" warnings).
    await asyncio.gather(*tasks, return_exceptions=True)
