"""Plain ``for`` over an async iterator: a private event loop on a daemon thread.

A stand-in until the loader can use ``azarr.sync``; everything goes through
:func:`iterate`, so swapping the loop for the sync facade's touches only this
module. The loop is made on first use, per process: after ``os.fork`` the child
forgets the parent's loop (its thread did not survive the fork) and makes its own.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0


def _forget() -> None:
    global _loop, _lock
    _loop, _lock = None, threading.Lock()  # the lock may have been held by a thread that is gone


if hasattr(os, "register_at_fork"):  # POSIX only
    os.register_at_fork(after_in_child=_forget)


@atexit.register
def _shutdown() -> None:
    """Let the loop finish its async generators (network stores close their sessions there)."""
    loop = _loop
    if loop is None or _pid != os.getpid() or not loop.is_running():
        return
    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(loop.shutdown_asyncgens(), loop).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)


def _get_loop() -> asyncio.AbstractEventLoop:
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="azarr-loader-loop", daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the private loop and wait for its result (cancelled if the wait is interrupted)."""
    loop = _get_loop()
    if _running_on(loop):
        coro.close()
        raise RuntimeError("azarr.loader: plain iteration cannot run on its own loop thread; use 'async for'")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # KeyboardInterrupt while waiting: stop the work too
        raise


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def iterate(make: Callable[[], AsyncIterator[T]]) -> Iterator[T]:
    """Iterate ``make()`` (called on the private loop) from synchronous code.

    Leaving the ``for`` early (``break``, an exception, garbage collection) closes
    the async iterator on its loop, so its pending work is cancelled.
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
        if aclose is not None and _get_loop().is_running():
            run(aclose())
