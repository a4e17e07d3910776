"""Per-store I/O budget: requests in flight and bytes in flight.

The budget belongs to the store, not to a call: every array, group and
concurrent task using one store shares it, so ten dask tasks reading ten arrays
never hold more than ``max_requests`` connections or ``max_bytes`` of chunk
buffers between them (the zarr-python 3 failure mode where each call builds its
own semaphore). asyncio primitives are bound to one event loop, so the waiting
state is kept per running loop; the limits themselves are shared.

A chunk read holds its byte reservation from the request until its bytes are
decoded into the output, so the peak memory of a read is about the output
array plus ``max_bytes``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from azarr import config
from azarr.storage import Store, StoreSpec


@dataclass
class _LoopState:
    """Waiting state of one event loop: free request slots and bytes."""

    free_requests: int
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)
    #: Reservations waiting for bytes, first come first served: ``(nbytes, future)``.
    byte_waiters: deque[tuple[int, asyncio.Future[None]]] = field(default_factory=deque)
    bytes_in_flight: int = 0
    requests_in_flight: int = 0
    peak_requests: int = 0


class IOBudget:
    """Limits on a store's concurrent requests and bytes in flight.

    Parameters
    ----------
    max_requests : int
        Requests in flight at most (>= 1).
    max_bytes : int
        Bytes of request payloads (and their decoded-but-not-yet-scattered
        buffers) in flight at most, in bytes (>= 1). A single request larger
        than this is admitted alone, so it can never deadlock.

    Notes
    -----
    Use `reserve` for a whole chunk operation (request + decode) and
    `request` around each store call; both are async context managers.
    """

    def __init__(self, max_requests: int, max_bytes: int) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )
        # A weak reference would cost as much as the lookup it saves; a closed loop
        # kept alive here until the next loop is used costs nothing.
        self._last: tuple[asyncio.AbstractEventLoop, _LoopState] | None = None

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        # Per-chunk hot path: remember the last loop's state (one loop is the common
        # case). One tuple, assigned at once, so loops in other threads never see a
        # loop paired with another loop's state.
        last = self._last
        if last is not None and last[0] is loop:
            return last[1]
        state = self._states.get(loop)
        if state is None:
            state = self._states[loop] = _LoopState(self.max_requests)
        self._last = (loop, state)
        return state

    def set_limits(self, max_requests: int, max_bytes: int) -> None:
        """Change the limits in place: every holder of this budget sees them at its next request.

        Lowering takes effect as requests finish (slots are absorbed, not revoked);
        raising admits waiters at once. Safe to call from any thread.

        Raises
        ------
        ValueError
            A limit below 1.
        """
        if max_requests < 1 or max_bytes < 1:
            raise ValueError(f"limits must be >= 1, got max_requests={max_requests}, max_bytes={max_bytes}")
        delta = max_requests - self.max_requests
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for loop, state in list(self._states.items()):
            if loop is running:
                self._apply_delta(state, delta)  # before any request this task starts next
            elif not loop.is_closed():
                loop.call_soon_threadsafe(self._apply_delta, state, delta)

    def _apply_delta(self, state: _LoopState, delta: int) -> None:
        state.free_requests += delta
        while state.free_requests > 0 and state.waiters:
            waiter = state.waiters.popleft()
            if not waiter.done():
                state.free_requests -= 1
                waiter.set_result(None)
        self._admit_waiting(state)

    @property
    def peak_requests(self) -> int:
        """Most requests seen in flight at once on the current loop (for tests and stats)."""
        return self._state().peak_requests

    @property
    def bytes_in_flight(self) -> int:
        """Bytes currently reserved on the current loop."""
        return self._state().bytes_in_flight

    def reserve(self, nbytes: int) -> _Reservation:
        """Hold ``nbytes`` of the byte budget for the duration of an ``async with`` block.

        Waits until the reservation fits (or nothing else is reserved); waiting
        reservations are admitted first come, first served, so a large one is not
        overtaken forever by small ones. Cancellation while waiting reserves nothing.
        """
        return _Reservation(self, max(0, int(nbytes)))

    def _fits(self, state: _LoopState, nbytes: int) -> bool:
        return state.bytes_in_flight == 0 or state.bytes_in_flight + nbytes <= self.max_bytes

    def _admit_waiting(self, state: _LoopState) -> None:
        """Grant waiting reservations in order while they fit (their bytes are added here)."""
        waiters = state.byte_waiters
        while waiters:
            nbytes, waiter = waiters[0]
            if waiter.done():  # cancelled while waiting
                waiters.popleft()
            elif self._fits(state, nbytes):
                waiters.popleft()
                state.bytes_in_flight += nbytes
                waiter.set_result(None)
            else:
                return

    @asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        async with self:
            yield

    async def __aenter__(self) -> None:
        """``async with budget:`` holds one request slot (same as `request`).

        A FIFO counter rather than ``asyncio.Semaphore``: this runs once per
        chunk, and the semaphore's ``locked()`` scan of its waiters cost more
        than the rest of a small in-memory chunk read (measured).
        """
        state = self._state()
        if state.free_requests > 0 and not state.waiters:
            state.free_requests -= 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            state.waiters.append(waiter)
            try:
                await waiter  # release() hands its slot over by resolving this
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._release(state)  # the slot arrived as we were cancelled: pass it on
                else:
                    # _release may already have dropped our cancelled future (a slot freed
                    # between the cancellation and this task running).
                    with contextlib.suppress(ValueError):
                        state.waiters.remove(waiter)
                raise
        state.requests_in_flight += 1
        if state.requests_in_flight > state.peak_requests:
            state.peak_requests = state.requests_in_flight

    async def __aexit__(self, *exc_info: object) -> None:
        state = self._state()
        state.requests_in_flight -= 1
        self._release(state)

    @staticmethod
    def _release(state: _LoopState) -> None:
        if state.free_requests < 0:  # the limit was lowered: this slot is absorbed
            state.free_requests += 1
            return
        while state.waiters:
            waiter = state.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        state.free_requests += 1

    def __repr__(self) -> str:
        return f"IOBudget(max_requests={self.max_requests}, max_bytes={self.max_bytes})"


class _Reservation:
    """``async with budget.reserve(nbytes):`` (a class, not a generator: this runs per chunk)."""

    __slots__ = ("_budget", "_nbytes", "_state")

    def __init__(self, budget: IOBudget, nbytes: int) -> None:
        self._budget = budget
        self._nbytes = nbytes

    async def __aenter__(self) -> None:
        budget, nbytes = self._budget, self._nbytes
        state = self._state = budget._state()
        if not state.byte_waiters and budget._fits(state, nbytes):
            state.bytes_in_flight += nbytes
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (nbytes, waiter)
        state.byte_waiters.append(entry)
        try:
            await waiter  # _admit_waiting adds our bytes, then resolves this
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                state.bytes_in_flight -= nbytes  # admitted as we were cancelled: give the bytes back
            else:
                with contextlib.suppress(ValueError):  # _admit_waiting may have dropped it already
                    state.byte_waiters.remove(entry)
            budget._admit_waiting(state)  # whoever queued behind us may fit now
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        state = self._state
        state.bytes_in_flight -= self._nbytes
        if state.byte_waiters:
            self._budget._admit_waiting(state)


# Budgets by store spec (Store.budget_key): every open of one configuration shares one.
_budgets: dict[StoreSpec, IOBudget] = {}
_budgets_lock = threading.Lock()


def budget_for(store: Store) -> IOBudget:
    """The I/O budget of ``store``, created on first use and shared from then on.

    Budgets are kept per store spec (`azarr.storage.Store.budget_key`), not per
    object: two opens of one URL, unpickled copies, read-only views and wrappers
    (cache, consolidated overlay) all share one. Limits come from
    `set_budget`, else from the store's declared ``max_requests``, else from
    ``azarr.config``: ``max_concurrency_local`` (local and memory stores) or
    ``max_concurrency`` (remote), and ``max_bytes_in_flight``.
    """
    key = store.budget_key
    budget = _budgets.get(key)
    if budget is None:
        requests = store.max_requests
        if requests is None:
            requests = config.get("max_concurrency_local" if store.is_local else "max_concurrency")
        with _budgets_lock:
            budget = _budgets.setdefault(key, IOBudget(int(requests), int(config.get("max_bytes_in_flight"))))
    return budget


def set_budget(store: Store, *, max_requests: int | None = None, max_bytes: int | None = None) -> IOBudget:
    """Set the I/O limits of ``store`` (and of every store sharing its spec).

    The one budget object is changed in place, so arrays and groups already open
    on the store follow it from their next request; in-flight work keeps the slots
    it holds (a lowered limit is reached as those requests finish).

    Parameters
    ----------
    max_requests : int, optional
        Requests in flight at most.
    max_bytes : int, optional
        Bytes in flight at most.
    """
    budget = budget_for(store)
    budget.set_limits(
        max_requests if max_requests is not None else budget.max_requests,
        max_bytes if max_bytes is not None else budget.max_bytes,
    )
    return budget
