"""The process-wide I/O loop thread that runs every synchronous call's coroutine.

Why one loop in its own thread, not ``asyncio.run`` per call:

* a store's sessions and connection pools are per event loop; one loop shared by
  every calling thread keeps one pool per store in the process (16 dask threads do
  not open 16 connection pools; the request budget is process-wide either way);
* a caller that already runs a loop (Jupyter, an ``async def`` that calls sync
  code) cannot ``asyncio.run``; handing the coroutine to another loop works there;
* codec work runs in azarr's codec thread pool, not on the loop, so many calling
  threads share the loop without queueing behind each other's decoding.

The loop starts on first use, restarts in a forked child (``os.register_at_fork``:
the parent's loop thread does not exist there) and is stopped at interpreter exit
the way ``asyncio.run`` ends a loop (tasks cancelled, async generators finalized,
which closes the per-loop store sessions).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from azarr.errors import AzarrError

T = TypeVar("T")

#: Seconds to wait, after cancelling a call, for its coroutine to unwind (close
#: its requests) before giving control back to the caller.
_CANCEL_GRACE_S = 10.0
#: Seconds `shutdown` waits for the loop thread to finish.
_SHUTDOWN_GRACE_S = 10.0


class SyncError(AzarrError, RuntimeError):
    """A synchronous azarr call made where it cannot run (on the I/O loop thread itself)."""


class SyncTimeoutError(AzarrError, TimeoutError):
    """A synchronous call exceeded its ``timeout=``; its coroutine and requests were cancelled."""


class _IOLoop:
    """An event loop running forever in a daemon thread named ``azarr-io``."""

    def __init__(self) -> None:
        self.exiting = False  # set when the interpreter exits (see `_finish`)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="azarr-io", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            self._finish()

    def _finish(self) -> None:
        """End the loop as ``asyncio.run`` does: cancel tasks, finalize async generators, close."""
        loop = self.loop
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            # At interpreter exit Python 3.12+ refuses to start threads, and
            # shutdown_default_executor starts one to join the executor. Nothing is left to
            # join then: concurrent.futures' exit hook, which runs before atexit callbacks
            # (`_at_exit`), has joined every executor's workers.
            if not self.exiting:
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()

    def stop(self, timeout: float) -> None:
        if self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:  # closed between the check and the call
            return
        if threading.current_thread() is not self.thread:
            self.thread.join(timeout)


_lock = threading.Lock()
_io: _IOLoop | None = None


def get_loop() -> asyncio.AbstractEventLoop:
    """The process-wide I/O event loop (started on first use).

    Use it to run your own coroutines next to azarr's synchronous calls
    (``asyncio.run_coroutine_threadsafe(coro, azarr.sync.get_loop())``): they then
    share the stores' sessions and request budgets.
    """
    return _get().loop


def _get() -> _IOLoop:
    global _io
    io = _io
    if io is not None and io.thread.is_alive():
        return io
    with _lock:
        if _io is None or not _io.thread.is_alive():
            _io = _IOLoop()
        return _io


def in_io_thread() -> bool:
    """True when called from the I/O loop thread (where synchronous calls are refused)."""
    io = _io
    return io is not None and threading.current_thread() is io.thread


class _Call:
    """One submitted coroutine: its task, outcome, and a lock the caller blocks on until it ends.

    A bare lock (released by the loop when the task is done) is the cheapest cross-thread
    hand-off Python has; ``concurrent.futures`` adds a condition and waiter objects per call.
    """

    __slots__ = ("done", "error", "result", "task")

    def __init__(self) -> None:
        self.done = threading.Lock()
        self.done.acquire()
        self.task: asyncio.Task[Any] | None = None
        self.result: Any = None
        self.error: BaseException | None = None

    def start(self, coro: Coroutine[Any, Any, Any]) -> None:
        """On the loop: run ``coro`` as a task whose end releases `done`."""
        self.task = asyncio.ensure_future(coro)
        self.task.add_done_callback(self._finish)

    def _finish(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            self.error = asyncio.CancelledError()
        else:
            self.error = task.exception()
            if self.error is None:
                self.result = task.result()
        self.done.release()

    def cancel(self) -> None:
        """On the loop: cancel the task (``start`` ran before: callbacks run in order)."""
        if self.task is not None:
            self.task.cancel()

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the I/O loop and return its result, blocking the calling thread.

    Parameters
    ----------
    coro : coroutine
        What to run, e.g. ``azarr_array.get_basic_selection(...)``.
    timeout : float, optional
        Seconds to wait. On expiry the coroutine is cancelled (its in-flight requests
        are aborted) and `SyncTimeoutError` is raised. None waits without limit.

    Returns
    -------
    object
        The coroutine's result; its exception is raised unchanged.

    Raises
    ------
    SyncError
        Called from the I/O loop thread itself (from a coroutine azarr runs): that
        would wait for the loop it blocks. Use ``await`` there.
    SyncTimeoutError
        ``timeout`` expired.
    KeyboardInterrupt
        Ctrl-C while waiting; the coroutine is cancelled first.

    Notes
    -----
    Works from any thread, including one running its own event loop (Jupyter): the
    coroutine never runs on the caller's loop. zarr-python 3's ``zarr.core.sync``
    has the same shape; unlike it, a timeout here cancels the work, and returns
    only once the cancelled coroutine has unwound (its requests are closed).
    """
    if in_io_thread():
        coro.close()
        raise SyncError(
            "a synchronous azarr call was made on azarr's I/O loop thread (from a coroutine "
            "azarr runs); it would wait for itself. Use 'await' on the async API there."
        )
    loop = _get().loop
    call = _Call()
    loop.call_soon_threadsafe(call.start, coro)
    try:
        finished = call.done.acquire(timeout=-1 if timeout is None else max(timeout, 0.0))
    except BaseException:  # KeyboardInterrupt (Ctrl-C) or SystemExit while waiting
        _cancel(loop, call)
        raise
    if not finished:
        unwound = _cancel(loop, call)
        if unwound and not isinstance(call.error, asyncio.CancelledError):
            finished_late: T = call.outcome()  # it finished while we were cancelling
            return finished_late
        raise SyncTimeoutError(f"azarr call did not finish within timeout={timeout} s; it was cancelled")
    result: T = call.outcome()
    return result


def _cancel(loop: asyncio.AbstractEventLoop, call: _Call) -> bool:
    """Cancel ``call``'s task and wait (bounded) until it has unwound; True if it did."""
    loop.call_soon_threadsafe(call.cancel)
    return call.done.acquire(timeout=_CANCEL_GRACE_S)


def shutdown() -> None:
    """Stop the I/O loop: cancel what runs there, close per-loop sessions, end the thread.

    Called at interpreter exit; a later synchronous call starts a new loop.
    """
    _shutdown(exiting=False)


def _shutdown(*, exiting: bool) -> None:
    global _io
    with _lock:
        io, _io = _io, None
    if io is not None:
        io.exiting = exiting
        io.stop(_SHUTDOWN_GRACE_S)


def _at_exit() -> None:
    _shutdown(exiting=True)


def _after_fork_in_child() -> None:
    """The parent's loop thread does not exist in a forked child: start afresh there."""
    global _io, _lock
    _lock = threading.Lock()
    _io = None


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)


def iterate(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code, on the I/O loop.

    ``make()`` is called on the I/O loop (so the iterator and any tasks it starts
    belong to it), and each item is fetched with `run`. Leaving the ``for``
    early (``break``, an exception, garbage collection) closes the async iterator
    on its loop, so its pending work (prefetches, requests) is cancelled.

    Raises
    ------
    SyncError
        Called from the I/O loop thread itself.
    """

    async def start() -> AsyncIterator[T]:
        return make()

    async def step() -> T:
        return await anext(iterator)

    iterator = run(start())
    try:
        while True:
            try:
                item = run(step())
            except StopAsyncIteration:
                return
            yield item
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None and not in_io_thread():
            run(aclose())
