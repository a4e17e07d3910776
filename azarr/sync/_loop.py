"""The process-wide I/O loop thread that runs every synchronous call's coroutine.

Why one loop in its own thread, not ``asyncio.run`` per call:

* a store's request budget, sessions and connection pools are per event loop; one
  loop shared by every calling thread keeps one budget per store in the process
  (16 dask threads do not open 16 connection pools, nor multiply the limit by 16);
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
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from azarr.errors import AzarrError

T = TypeVar("T")

#: Seconds to wait, after cancelling a call, for its coroutine to unwind (close
#: its requests) before giving control back to the caller.
_CANCEL_GRACE_S = 10.0
#: Seconds :func:`shutdown` waits for the loop thread to finish.
_SHUTDOWN_GRACE_S = 10.0


class SyncError(AzarrError, RuntimeError):
    """A synchronous azarr call made where it cannot run (on the I/O loop thread itself)."""


class SyncTimeoutError(AzarrError, TimeoutError):
    """A synchronous call exceeded its ``timeout=``; its coroutine and requests were cancelled."""


class _IOLoop:
    """An event loop running forever in a daemon thread named ``azarr-io``."""

    def __init__(self) -> None:
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


def _start(coro: Coroutine[Any, Any, T], out: concurrent.futures.Future[T]) -> asyncio.Task[T]:
    """On the loop: run ``coro`` as a task whose outcome is relayed to ``out`` (also when cancelled)."""
    task = asyncio.ensure_future(coro)

    def relay(done: asyncio.Task[T]) -> None:
        if done.cancelled():
            out.cancel()
            out.set_running_or_notify_cancel()  # wakes concurrent.futures.wait (cancel() alone does not)
        elif (exc := done.exception()) is not None:
            out.set_exception(exc)
        else:
            out.set_result(done.result())

    task.add_done_callback(relay)
    return task


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the I/O loop and return its result, blocking the calling thread.

    Parameters
    ----------
    coro : coroutine
        What to run, e.g. ``azarr_array.get_basic_selection(...)``.
    timeout : float, optional
        Seconds to wait. On expiry the coroutine is cancelled (its in-flight requests
        are aborted) and :class:`SyncTimeoutError` is raised. None waits without limit.

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
    out: concurrent.futures.Future[T] = concurrent.futures.Future()
    tasks: list[asyncio.Task[T]] = []
    loop.call_soon_threadsafe(lambda: tasks.append(_start(coro, out)))
    try:
        finished, _ = concurrent.futures.wait([out], timeout=timeout)
    except BaseException:  # KeyboardInterrupt (Ctrl-C) or SystemExit while waiting
        _cancel(loop, tasks, out)
        raise
    if not finished:
        _cancel(loop, tasks, out)
        if not out.cancelled() and out.done():  # finished while we were cancelling
            return out.result()
        raise SyncTimeoutError(f"azarr call did not finish within timeout={timeout} s; it was cancelled")
    return out.result()


def _cancel(
    loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[Any]], out: concurrent.futures.Future[Any]
) -> None:
    """Cancel the task feeding ``out`` and wait (bounded) until it has unwound.

    Callbacks run in order, so the task exists by the time the cancelling one runs.
    """
    loop.call_soon_threadsafe(lambda: tasks[0].cancel())
    concurrent.futures.wait([out], timeout=_CANCEL_GRACE_S)


def shutdown() -> None:
    """Stop the I/O loop: cancel what runs there, close per-loop sessions, end the thread.

    Called at interpreter exit; a later synchronous call starts a new loop.
    """
    global _io
    with _lock:
        io, _io = _io, None
    if io is not None:
        io.stop(_SHUTDOWN_GRACE_S)


def _after_fork_in_child() -> None:
    """The parent's loop thread does not exist in a forked child: start afresh there."""
    global _io, _lock
    _lock = threading.Lock()
    _io = None


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_after_fork_in_child)
