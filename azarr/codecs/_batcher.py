"""Batched codec work: many small chunk jobs per codec-pool hop.

A hop to the codec pool (submit, wake a worker, wake the loop with the result)
costs ~25-30 µs, several times the work of decoding a small chunk: reading
10,000 chunks of 800 bytes spent three quarters of its time hopping (measured,
see ``benchmarks/README.md``). `CodecBatcher` queues per-chunk jobs on
the event loop and sends them to the pool in batches.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from azarr import config
from azarr.codecs._pool import run_in_codec_pool, submit_to_codec_pool

T = TypeVar("T")

#: Codec jobs one caller may queue ahead of the codec threads at most. The bytes of chunks
#: (decoded size) queued or being decoded are bounded across every caller on an event loop
#: (``azarr.config`` ``codec_queue_bytes``), so fetched bytes waiting for a codec thread
#: stay bounded when decoding is slower than the store, however many reads run at once.
_MAX_OUTSTANDING_JOBS = 4096
#: Chunk bytes per codec-pool hop at most: small chunks travel together, large ones alone.
_MAX_BATCH_BYTES = 1 << 20


_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any] | None", int]
"""``(fn, args, future, weight)``: one chunk's codec call; ``future`` is None for `CodecBatcher.submit`."""


class _Failure:
    """A job's exception, in a batch's results."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Batch:
    """Jobs run by one codec thread in one hop, and what they returned."""

    __slots__ = ("cancelled", "done", "failed", "has_futures", "jobs", "results", "weight")

    def __init__(self, jobs: list[_Job], weight: int) -> None:
        self.jobs = jobs
        self.weight = weight
        self.results: list[Any] = []  # filled by the codec thread, in job order
        self.has_futures = any(job[2] is not None for job in jobs)
        self.failed = False
        self.cancelled = False  # set on the loop, read by the codec thread (a plain bool: GIL-atomic)
        self.done: asyncio.Future[None] | None = None  # resolved on the loop once the thread is finished


def _run_batch(batch: _Batch) -> None:
    """Run a batch's jobs in a codec thread, stopping early if it is cancelled."""
    append = batch.results.append
    for fn, args, _, _ in batch.jobs:
        if batch.cancelled:
            return
        try:
            append(fn(*args))
        except Exception as exc:
            append(_Failure(exc))
            batch.failed = True


class _LoopQueue:
    """What every batcher on one event loop shares: bytes queued for the codec pool, and who waits."""

    __slots__ = ("outstanding_bytes", "waiters")

    def __init__(self) -> None:
        self.outstanding_bytes = 0
        self.waiters: list[asyncio.Future[None]] = []

    def release(self, nbytes: int) -> None:
        """``nbytes`` of jobs are done: wake every waiter on the loop (the bytes freed may let
        another caller queue)."""
        self.outstanding_bytes -= nbytes
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = weakref.WeakKeyDictionary()


def _loop_queue() -> _LoopQueue:
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = _LoopQueue()
    return queue


class CodecBatcher:
    """Per-chunk codec work in the codec pool, one thread hop per batch of chunks.

    A hop to the pool (submit, wake a worker, wake the loop with the result)
    costs ~25-30 µs, several times the work of decoding a small chunk: reading
    10,000 chunks of 800 bytes spent three quarters of its time hopping (see
    ``benchmarks/README.md``). Jobs queue on the event loop and are dispatched
    at the loop's next turn (so work queued in one go travels together), as
    long as fewer than ``codec_threads`` batches are in the pool; each finished
    batch dispatches the queue again. The queue is shared between the free
    threads, at most ``max_batch_bytes`` of chunk data per batch, so large
    chunks still go one per hop, in parallel.

    `run` awaits one job's result (writes need the encoded bytes).
    `submit` only queues (reads: the job writes into the output array),
    waiting while ``max_outstanding`` of its jobs, or ``max_outstanding_bytes``
    of chunks of *every* batcher on the event loop (a process-wide limit, not a
    per-call one: ``azarr.config`` ``codec_queue_bytes`` by default), are queued
    or running; `drain` then waits for all of them and
    raises the first error. Cancellation keeps
    `run_in_codec_pool`'s guarantee: queued jobs are
    dropped and running batches stop at their next job and are waited for, so
    no codec thread writes into the caller's buffers after the call returns.
    """

    __slots__ = (
        "_batches",
        "_error",
        "_max_batch_bytes",
        "_max_outstanding",
        "_max_outstanding_bytes",
        "_outstanding",
        "_outstanding_bytes",
        "_pending",
        "_queue",
        "_running",
        "_scheduled",
        "_slots",
    )

    def __init__(
        self,
        *,
        max_outstanding: int = _MAX_OUTSTANDING_JOBS,
        max_outstanding_bytes: int | None = None,
        max_batch_bytes: int = _MAX_BATCH_BYTES,
    ) -> None:
        self._slots = max(1, int(config.get("codec_threads")))
        self._max_outstanding = max_outstanding
        self._max_outstanding_bytes = (
            int(config.get("codec_queue_bytes")) if max_outstanding_bytes is None else max_outstanding_bytes
        )
        self._queue = _loop_queue()
        self._max_batch_bytes = max_batch_bytes
        self._pending: list[_Job] = []
        self._outstanding = 0  # jobs queued or in a running batch
        self._outstanding_bytes = 0  # their weights
        self._running = 0
        self._scheduled = False
        self._batches: set[_Batch] = set()
        self._error: Exception | None = None

    async def run(self, fn: Callable[..., T], *args: Any, weight: int = 0) -> T:
        """``fn(*args)`` in the codec pool, batched with other queued calls; its result."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        job: _Job = (fn, args, future, weight)
        self._enqueue(job)
        try:
            return await future
        except asyncio.CancelledError:
            # (identity, not ==: jobs hold arrays)
            batch = next((b for b in self._batches if any(j is job for j in b.jobs)), None)
            if batch is not None:
                batch.cancelled = True
                await _wait_for(batch.done)
            else:
                for i, queued in enumerate(self._pending):
                    if queued is job:
                        del self._pending[i]
                        self._outstanding -= 1
                        self._outstanding_bytes -= weight
                        self._queue.outstanding_bytes -= weight
                        break
            raise

    def _full(self) -> bool:
        # A batcher with nothing outstanding may always queue one job: progress for every
        # caller, whatever the others hold.
        return self._outstanding > 0 and (
            self._outstanding >= self._max_outstanding
            or self._queue.outstanding_bytes >= self._max_outstanding_bytes
        )

    def try_submit(self, fn: Callable[..., Any], args: tuple[Any, ...], weight: int) -> bool:
        """Queue ``fn(*args)`` if there is room and no job failed (no coroutine: the hot path)."""
        if self._error is not None or self._full():
            return False
        self._enqueue((fn, args, None, weight))
        return True

    async def submit(self, fn: Callable[..., Any], args: tuple[Any, ...], weight: int) -> None:
        """Queue ``fn(*args)`` without awaiting it, once there is room; raises the first error of an earlier job.

        ``weight`` (the chunk's bytes) counts against ``max_outstanding_bytes`` until the job is done.
        """
        while self._error is None and self._full():
            await self._wait_progress()
        if self._error is not None:
            raise self._error
        self._enqueue((fn, args, None, weight))

    async def drain(self) -> None:
        """Wait for every job; raise the first error of a `submit` job."""
        while self._outstanding and self._error is None:
            await self._wait_progress()
        if self._error is not None:
            raise self._error

    async def abandon(self) -> None:
        """Drop queued jobs, stop running batches and wait for them (on failure or cancellation)."""
        dropped = sum(job[3] for job in self._pending)
        self._outstanding -= len(self._pending)
        self._outstanding_bytes -= dropped
        self._queue.outstanding_bytes -= dropped
        self._pending = []
        for batch in list(self._batches):
            batch.cancelled = True
            await _wait_for(batch.done)

    def _enqueue(self, job: _Job) -> None:
        self._pending.append(job)
        self._outstanding += 1
        self._outstanding_bytes += job[3]
        self._queue.outstanding_bytes += job[3]
        self._schedule()

    def _schedule(self) -> None:
        if self._scheduled or self._running >= self._slots:
            return
        if self._running == 0 and len(self._pending) == 1:
            # Idle: send the job now. A single-chunk read (the latency-bound case) then
            # waits no loop turn before decoding; jobs queued behind it in the same turn
            # still travel together, dispatched at the next turn or when this batch ends.
            self._dispatch()
            return
        self._scheduled = True
        asyncio.get_running_loop().call_soon(self._dispatch)

    async def _wait_progress(self) -> None:
        # One future per waiter, awaited directly: a cancelled waiter cancels only its own
        # (asyncio.shield around a shared one would cost every waiter an extra loop turn).
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.waiters.append(waiter)
        await waiter

    def _dispatch(self) -> None:
        self._scheduled = False
        while self._pending and self._running < self._slots:
            share = -(-len(self._pending) // (self._slots - self._running))
            n = weight = 0
            for job in self._pending[:share]:
                if n and weight + job[3] > self._max_batch_bytes:
                    break
                weight += job[3]
                n += 1
            batch = _Batch(self._pending[:n], weight)
            del self._pending[:n]
            self._running += 1
            self._batches.add(batch)
            loop = asyncio.get_running_loop()
            batch.done = loop.create_future()
            # The codec thread posts _finished straight back to the loop: one wake-up per
            # batch (an awaited run_in_executor future would add a Task, a wrap_future
            # and a shield, each a further loop turn before the caller resumes).
            submit_to_codec_pool(_run_batch, (batch,), loop, functools.partial(self._finished, batch))

    def _finished(self, batch: _Batch, failure: BaseException | None) -> None:
        self._running -= 1
        self._batches.discard(batch)
        self._outstanding -= len(batch.jobs)
        self._outstanding_bytes -= batch.weight
        if batch.done is not None and not batch.done.done():
            batch.done.set_result(None)
        if failure is not None or batch.failed or batch.has_futures or batch.cancelled:
            results = batch.results
            for i, (_, _, future, _) in enumerate(batch.jobs):
                result = results[i] if i < len(results) else None
                error = (
                    failure if failure is not None else result.error if isinstance(result, _Failure) else None
                )
                if future is None:
                    if error is not None and self._error is None and not batch.cancelled:
                        self._error = error  # type: ignore[assignment]
                elif future.done():
                    continue
                elif i >= len(results) and failure is None:
                    future.cancel()  # skipped: its batch was cancelled
                elif error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)
        self._queue.release(batch.weight)
        if self._pending or self._outstanding:
            # At the loop's next turn, after the callers just woken above have queued
            # their next jobs: dispatching now would send a near-empty batch.
            self._schedule()


async def run_alone(fn: Callable[..., T], *args: Any, weight: int = 0) -> T:
    """``fn(*args)`` in the codec pool, awaited on its own: what ``CodecBatcher().run`` does
    for a lone job, without a batcher.

    For a read of one chunk (`read_one_sharded`): a batcher made for one job batches nothing,
    and its machinery (the batcher, a batch, a second future, its completion callback) cost
    each hop ~6 us of event-loop CPU, ~15 us of CPU in all and 13 GC-tracked objects (50
    lone jobs at a time; measured, issue #30).
    ``weight`` (the chunk's decoded bytes) counts in the event loop's codec queue bytes
    (``codec_queue_bytes``) until the job is done, as a batcher's jobs do. Cancellation is
    `run_in_codec_pool`'s: a job not yet started is dropped, a running one is waited for, so
    no codec thread writes into the caller's buffers after this returns.
    """
    queue = _loop_queue()
    queue.outstanding_bytes += weight
    try:
        return await run_in_codec_pool(fn, *args)
    finally:
        queue.release(weight)


async def _wait_for(task: asyncio.Future[None] | None) -> None:
    """Wait until ``task`` is done, through repeated cancellation; its outcome is not ours."""
    while task is not None and not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            continue
        except Exception:
            break
