"""The process-wide codec thread pool, and the file I/O pool beside it.

Decoding and encoding chunks is CPU work; it must never run on an event loop,
or one large chunk stalls every other request in flight. azarr runs it in one
bounded `ThreadPoolExecutor` shared by the whole
process (the TensorStore ``data_copy_concurrency`` idea), sized by
``azarr.config.get("codec_threads")``. Blosc, Zstd, LZ4 and zlib release the
GIL while they work, so the threads run in parallel.

The pool is a shared resource rather than a per-call one: it is not bound to
an event loop (several loops, and successive ``asyncio.run`` calls, use the
same threads), it is created lazily on first use, it is replaced when
``codec_threads`` changes, and a forked child starts with a fresh one.

zarr-python 2 decodes on the calling thread; zarr-python 3 hops to
``asyncio.to_thread`` (the loop's default executor) once per chunk.

The file I/O pool (``azarr.config.get("file_io_threads")``, threads ``azarr-file-io_N``)
runs the chunk jobs of local stores that wait on the disk more than they decode
(`azarr.pipeline._batched`): a thread blocked opening or reading a file cold from the
disk holds no core, so more such jobs than cores keep the device busy, as TensorStore's
``file_io_concurrency`` pool does. It is built, replaced and reset after a fork like the
codec pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

from azarr import config

__all__ = [
    "get_codec_pool",
    "get_file_io_pool",
    "reset_codec_pool",
    "run_in_codec_pool",
    "submit_to_codec_pool",
]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

#: Prefix of the pool's thread names (``azarr-codec_0``, ``azarr-codec_1``, ...).
THREAD_NAME_PREFIX = "azarr-codec"


class _LazyPool:
    """A process-wide `ThreadPoolExecutor` sized by one setting: made on first use,
    retired when the setting changes (running work finishes), forgotten in a forked child."""

    def __init__(self, setting: str, prefix: str) -> None:
        self.setting, self.prefix = setting, prefix
        self.lock = threading.Lock()
        self.pool: ThreadPoolExecutor | None = None
        if hasattr(os, "register_at_fork"):  # POSIX only
            os.register_at_fork(after_in_child=self._after_fork_in_child)
        config.on_change(setting, self.reset)

    def get(self) -> ThreadPoolExecutor:
        pool = self.pool
        if pool is not None:  # fast path: no lock once the pool exists
            return pool
        with self.lock:
            if self.pool is None:
                self.pool = ThreadPoolExecutor(
                    max_workers=int(config.get(self.setting)), thread_name_prefix=self.prefix
                )
            return self.pool

    def reset(self) -> None:
        with self.lock:
            old, self.pool = self.pool, None
        if old is not None:
            old.shutdown(wait=False, cancel_futures=False)

    def _after_fork_in_child(self) -> None:
        # The child inherits the executor object but none of its threads: work
        # submitted to it would wait forever for workers that do not exist. The
        # lock may also have been held by another parent thread at fork time.
        self.lock = threading.Lock()
        self.pool = None


_codec = _LazyPool("codec_threads", THREAD_NAME_PREFIX)
_file_io = _LazyPool("file_io_threads", "azarr-file-io")


def get_codec_pool() -> ThreadPoolExecutor:
    """Return the process-wide codec pool, creating it on first use.

    Returns
    -------
    concurrent.futures.ThreadPoolExecutor
        ``max_workers = azarr.config.get("codec_threads")``; thread names start
        with ``"azarr-codec"``. The same object is returned until
        `reset_codec_pool` runs (``config.set(codec_threads=...)`` calls it)
        or the process forks.
    """
    return _codec.get()


def get_file_io_pool() -> ThreadPoolExecutor:
    """Return the process-wide file I/O pool, creating it on first use.

    Returns
    -------
    concurrent.futures.ThreadPoolExecutor
        ``max_workers = azarr.config.get("file_io_threads")``; thread names start with
        ``"azarr-file-io"``; replaced when that setting changes, as the codec pool is.
    """
    return _file_io.get()


def reset_codec_pool() -> None:
    """Retire the current codec pool; the next use creates a new one from the config.

    Work already submitted to the old pool still runs to completion and its
    awaiting callers get their results: cancelling it would surface as spurious
    ``CancelledError`` in unrelated requests, and a half-finished decode into a
    caller's ``out`` array would leave it torn. The old pool is shut down
    without waiting, so this never blocks (it is safe to call from an event
    loop); its threads exit once their queue is drained.
    """
    _codec.reset()


def _submit(fn: Callable[[*Ts], T], args: tuple[*Ts], lazy: _LazyPool = _codec) -> Future[T]:
    # Run in a copy of the caller's context so contextvars (tracing, logging
    # context) follow the work into the pool, as asyncio.to_thread does.
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args)
    while True:
        pool = lazy.get()
        try:
            return pool.submit(call)
        except RuntimeError:
            # A reset may have shut this pool down between our lookup and submit:
            # retry on its replacement. If the pool is still the current one the
            # cause is something else (interpreter shutdown).
            if lazy.pool is pool:
                raise


def submit_to_codec_pool(
    fn: Callable[[*Ts], object],
    args: tuple[*Ts],
    loop: asyncio.AbstractEventLoop,
    on_done: Callable[[BaseException | None], object],
    *,
    file_io: bool = False,
) -> None:
    """Run ``fn(*args)`` in the codec pool, then call ``on_done(error)`` on ``loop``.

    The lean hop behind `CodecBatcher`: the worker thread
    posts ``on_done`` to the loop itself (``call_soon_threadsafe``), so the loop
    wakes once per job. ``fn``'s return value is discarded (it reports through
    its arguments); ``error`` is what it raised, or None. If ``loop`` has closed
    by then, ``on_done`` is dropped. ``file_io=True`` runs it in the file I/O pool
    (`get_file_io_pool`) instead.
    """

    def finished(cfut: Future[object]) -> None:
        error = None if cfut.cancelled() else cfut.exception()
        try:
            loop.call_soon_threadsafe(on_done, error)
        except RuntimeError:  # the loop closed while the job ran: nobody is waiting
            pass

    try:
        cfut = _submit(fn, args, _file_io if file_io else _codec)
    except RuntimeError as exc:  # interpreter shutdown: report it like a failed job
        loop.call_soon(on_done, exc)
        return
    cfut.add_done_callback(finished)


async def run_in_codec_pool(fn: Callable[[*Ts], T], *args: *Ts) -> T:
    """Run ``fn(*args)`` in the codec pool and await its result.

    The coroutine equivalent of ``loop.run_in_executor(get_codec_pool(), fn, *args)``,
    usable from any event loop and any number of loops.

    Parameters
    ----------
    fn : callable
        Synchronous function; positional arguments only (bind keywords with
        `functools.partial`). Runs in a thread named ``azarr-codec_N``,
        in a copy of the caller's `contextvars` context.
    *args
        Positional arguments for ``fn``.

    Returns
    -------
    T
        What ``fn`` returned.

    Raises
    ------
    Exception
        Whatever ``fn`` raised.
    asyncio.CancelledError
        The awaiting task was cancelled. Work that had not started is dropped;
        work that had started is waited for first, so that when this returns no
        codec thread is still writing into buffers (such as a decode ``out``
        array) that the caller may reuse. Cancellation therefore takes at most
        one codec call's time.
    """
    # The worker thread settles a loop future itself (one ``call_soon_threadsafe``): no
    # ``wrap_future`` and ``shield`` per call, which cost a lone codec hop ~6 us of loop CPU
    # and 13 GC-tracked objects (50 hops at a time; measured for issue #30). A cancel only
    # reaches ``future``: the work itself is dropped or waited for below.
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    cfut = _submit(fn, args)

    def finished(done: Future[T]) -> None:  # in the codec thread
        try:
            loop.call_soon_threadsafe(_settle, future, done)
        except RuntimeError:  # the loop closed while the job ran: nobody is waiting
            pass

    cfut.add_done_callback(finished)
    try:
        return await future
    except asyncio.CancelledError:
        if not cfut.cancel():
            await _wait_quietly(asyncio.wrap_future(cfut))
        raise


def _settle(future: asyncio.Future[T], done: Future[T]) -> None:
    """On the loop: ``future`` gets the outcome of the codec pool's ``done`` (unless cancelled)."""
    if future.done():
        return
    if done.cancelled():  # never ran (the pool was shut down with it queued)
        future.cancel()
        return
    error = done.exception()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(done.result())


async def _wait_quietly(afut: asyncio.Future[T]) -> None:
    """Wait for running work after a cancel; its result or error is discarded."""
    while not afut.done():
        try:
            await asyncio.shield(afut)
        except asyncio.CancelledError:
            # Cancelled again: keep waiting. The caller re-raises CancelledError
            # once the work is done.
            continue
        except Exception:
            break
    if not afut.cancelled():
        afut.exception()  # mark retrieved: no "exception was never retrieved" log
