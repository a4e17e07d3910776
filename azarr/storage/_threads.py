"""A small per-store thread pool for stores whose backend is synchronous.

Stores over blocking APIs (a ``MutableMapping``, a zip archive, a synchronous
fsspec filesystem) must never call them on the event loop. They do not use the
codec pool: a slow key-value server would then hold codec threads and stall
decoding for every other array. Nor ``asyncio.to_thread``: the loop's default
executor is shared with everything else on that loop, is bound to one loop,
and would let hundreds of queued chunk requests hit a backend that is not
thread-safe at once. Each store instead owns a `BlockingIO`, sized by
what its backend tolerates.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, TypeVarTuple

from azarr.errors import AzarrError

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class BlockingIO:
    """A lazily created, fork-safe, loop-independent thread pool owned by one store.

    Parameters
    ----------
    max_workers : int
        Threads at most (>= 1). With 1, every call runs on the same thread, one at a
        time: safe for backends that are not thread-safe.
    name : str
        Thread name prefix (``azarr-mapping``, ``azarr-zip``, ...), for debugging.

    Notes
    -----
    * Not bound to an event loop: successive ``asyncio.run`` calls, and loops in
      several threads at once, share the same workers.
    * Created on first use and re-created in a forked child (which inherits the
      executor object but none of its threads).
    * Not pickled: owners drop it in ``__getstate__`` and build a new one.
    * Threads exit once the owner (and so the executor) is garbage collected.
    """

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self.name = name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = os.getpid()

    def _executor(self) -> ThreadPoolExecutor:
        pid = os.getpid()
        pool = self._pool
        if pool is not None and self._pid == pid:
            return pool
        if self._pid != pid:
            # Forked child: the parent's lock may be held and its workers do not exist here.
            self._lock = threading.Lock()
            self._pool = None
            self._pid = pid
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.max_workers, thread_name_prefix=self.name)
            return self._pool

    async def run(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run ``fn(*args)`` on a worker thread and await its result.

        Runs in a copy of the caller's `contextvars` context, like
        ``asyncio.to_thread``. Cancelling the awaiting task does not interrupt a
        call already running (threads cannot be interrupted); its result is dropped.
        """
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, fn, *args)
        while True:
            pool = self._executor()
            try:
                future = loop.run_in_executor(pool, call)
            except RuntimeError:
                # shutdown() retired this pool between lookup and submit: use its successor.
                if self._pool is pool:
                    raise
                continue
            return await future

    async def call(
        self,
        translate: Callable[[Exception, str, str], BaseException | None],
        op: str,
        key: str,
        fn: Callable[[*Ts], T],
        *args: *Ts,
    ) -> T:
        """`run` one store operation, its failure turned into the store's error.

        azarr errors pass through. Any other exception becomes
        ``translate(exc, op, key)``, chained to it, or is re-raised as it is when
        ``translate`` returns None (an exception the store does not classify).
        """
        try:
            return await self.run(fn, *args)
        except AzarrError:
            raise
        except Exception as exc:
            error = translate(exc, op, key)
            if error is None:
                raise
            raise error from exc

    def shutdown(self) -> None:
        """Stop the workers after the calls already queued (a later `run` starts new ones)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"max_workers": self.max_workers, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["max_workers"], state["name"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"BlockingIO(max_workers={self.max_workers}, name={self.name!r})"
