"""Per-store I/O budget: requests and bytes in flight, one budget per store spec per process.

The budget belongs to the store, not to a call: every array, group and concurrent task
using one store shares it, so ten dask tasks reading ten arrays never hold more than
the store's request limit between them (the zarr-python 3 failure mode where each call
builds its own semaphore). It is process-wide: threads each running their own event
loop (``asyncio.run`` per thread, a thread-pool web server, azarr's sync API beside an
async service) share the one limit, like TensorStore's ``"shared"``
``s3_request_concurrency``. Admission takes a `threading.Lock` for a few
field updates; a waiter is woken on its own loop (``call_soon_threadsafe`` when the slot
was freed on another), first come, first served across loops. A forked child starts
with fresh, empty budgets: the parent's holders and waiters do not exist there.

A remote store's request limit adapts (`azarr.scheduler._adaptive`): it drops when the
server throttles and climbs back on success, between ``min_requests`` and
``max_requests``.

A chunk read holds its byte reservation from the request until its bytes are decoded
into the output, so the peak memory of a read is about the output array plus
``max_bytes``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

from azarr import config
from azarr.scheduler._adaptive import AdaptiveLimit
from azarr.scheduler._registry import SpecRegistry

# Imported first so its fork handler (fresh locks for the counters) runs before ours,
# which publishes the reset limits into them.
from azarr.scheduler._stats import StoreStats, stats_for
from azarr.storage import Store


class _Waiter:
    """One task waiting for a request slot or bytes: its loop, its future, and whether
    a release has granted it (decided under the budget's lock)."""

    __slots__ = ("for_bytes", "future", "granted", "loop", "nbytes")

    def __init__(self, loop: asyncio.AbstractEventLoop, nbytes: int | None = None) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.for_bytes = nbytes is not None  # a byte reservation, else a request slot
        self.nbytes = nbytes or 0
        self.granted = False


def _resolve(waiter: _Waiter) -> None:
    # On the waiter's loop. A cancelled future needs nothing here: its task sees
    # ``granted`` under the lock and passes the slot on.
    if not waiter.future.done():
        waiter.future.set_result(None)


class IOBudget:
    """Limits on a store's concurrent requests and bytes in flight, for the whole process.

    Parameters
    ----------
    max_requests : int
        Requests in flight at most (>= 1).
    max_bytes : int
        Bytes of request payloads (and their decoded-but-not-yet-scattered
        buffers) in flight at most, in bytes (>= 1). A single request larger
        than this is admitted alone, so it can never deadlock.
    adaptive : bool
        Let the request limit adapt between ``min_requests`` and ``max_requests``
        (`record_throttle`, `record_success`); False keeps it at ``max_requests``.
    min_requests : int
        Floor of the adaptive limit (1 <= ``min_requests`` <= ``max_requests``; a
        larger value is clipped to ``max_requests``).
    latency_tolerance : float or None
        Adaptive only: lower the limit when recent latency exceeds this many times its
        long-run average (None: latency is ignored).
    stats : StoreStats, optional
        Counters to show the current limit in (``concurrency_limit``).

    Notes
    -----
    Use `reserve` for a whole chunk operation (request + decode) and ``async with
    budget:`` (or `request`) around each store call; both are async context managers,
    usable from any thread's event loop. Waiters are admitted first come, first served
    across loops; cancelling a waiter, or closing its loop, never leaks a slot or bytes.
    Behaviour after ``os.fork``: the child's budgets are empty (nothing in flight,
    nobody waiting) and adaptive limits start again at ``max_requests``.
    """

    def __init__(
        self,
        max_requests: int,
        max_bytes: int,
        *,
        adaptive: bool = False,
        min_requests: int = 1,
        latency_tolerance: float | None = 2.0,
        stats: StoreStats | None = None,
    ) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        if min_requests < 1:
            raise ValueError(f"min_requests must be >= 1, got {min_requests}")
        self.max_requests = max_requests
        self.max_bytes = max_bytes
        self._stats = stats
        self._min_requests = min_requests
        self._latency_tolerance = latency_tolerance
        self._adaptive: AdaptiveLimit | None = self._new_adaptive() if adaptive else None
        self._reset_state()
        _all_budgets.add(self)

    def _new_adaptive(self) -> AdaptiveLimit:
        floor = min(self._min_requests, self.max_requests)
        return AdaptiveLimit(floor, self.max_requests, latency_tolerance=self._latency_tolerance)

    def _reset_state(self) -> None:
        """Nothing in flight, nobody waiting, the limit at its ceiling (also after a fork)."""
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak = 0
        self._waiters: deque[_Waiter] = deque()
        self._bytes = 0
        self._byte_waiters: deque[_Waiter] = deque()
        if self._adaptive is not None:
            self._adaptive = self._new_adaptive()
        #: The request limit in force (``max_requests`` unless adaptive). Read on the hot
        #: path without the lock; written only under it.
        self._limit = self.max_requests
        self._publish_limit()

    # ------------------------------------------------------------------ state
    @property
    def adaptive(self) -> bool:
        """Whether the request limit adapts to throttling (see `azarr.scheduler._adaptive`)."""
        return self._adaptive is not None

    @property
    def min_requests(self) -> int:
        """Floor of the adaptive limit (``max_requests`` when not adaptive)."""
        return self._adaptive.floor if self._adaptive is not None else self.max_requests

    @property
    def limit(self) -> int:
        """Requests allowed in flight now: ``max_requests``, or the adaptive limit."""
        return self._limit

    @property
    def requests_in_flight(self) -> int:
        """Requests holding a slot now, across every thread and loop."""
        return self._in_flight

    @property
    def peak_requests(self) -> int:
        """Most requests seen in flight at once in this process (for tests and stats)."""
        return self._peak

    @property
    def bytes_in_flight(self) -> int:
        """Bytes currently reserved, across every thread and loop."""
        return self._bytes

    @property
    def limit_decreases(self) -> int:
        """Times the adaptive limit was lowered (0 when not adaptive)."""
        return self._adaptive.decreases if self._adaptive is not None else 0

    def set_limits(
        self,
        max_requests: int,
        max_bytes: int,
        *,
        adaptive: bool | None = None,
        min_requests: int | None = None,
    ) -> None:
        """Change the limits in place: every holder of this budget sees them at its next request.

        Lowering takes effect as requests finish (slots are absorbed, not revoked);
        raising admits waiters at once. A new ``max_requests`` or ``min_requests``
        restarts an adaptive limit at ``max_requests``. Safe to call from any thread.

        Raises
        ------
        ValueError
            A limit below 1.
        """
        if max_requests < 1 or max_bytes < 1:
            raise ValueError(f"limits must be >= 1, got max_requests={max_requests}, max_bytes={max_bytes}")
        if min_requests is not None and min_requests < 1:
            raise ValueError(f"min_requests must be >= 1, got {min_requests}")
        with self._lock:
            restart = max_requests != self.max_requests or min_requests is not None
            self.max_requests = max_requests
            self.max_bytes = max_bytes
            if min_requests is not None:
                self._min_requests = min_requests
            if adaptive is False:
                self._adaptive = None
            elif (adaptive and self._adaptive is None) or (self._adaptive is not None and restart):
                self._adaptive = self._new_adaptive()
            self._limit = self._adaptive.limit if self._adaptive is not None else max_requests
            self._publish_limit()
            granted = self._grant_requests() + self._grant_bytes()
        self._wake(granted)

    # ------------------------------------------------------------------ request slots
    @asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        """Hold one request slot for the duration of the block."""
        async with self:
            yield

    async def __aenter__(self) -> int:
        """``async with budget as epoch:`` holds one request slot (same as `request`).

        Returns the adaptive limit's epoch at admission, for `record_success` and
        `record_throttle`. A counter under a lock rather than ``asyncio.Semaphore``:
        this runs once per chunk, and a semaphore belongs to one loop.
        """
        lock = self._lock
        with lock:
            if self._in_flight < self._limit and not self._waiters:
                self._in_flight += 1
                if self._in_flight > self._peak:
                    self._peak = self._in_flight
                adaptive = self._adaptive
                return adaptive.epoch if adaptive is not None else 0
            waiter = _Waiter(asyncio.get_running_loop())
            self._waiters.append(waiter)
        try:
            await waiter.future  # a release counts us in and resolves this
        except BaseException:
            self._abandon(waiter)
            raise
        adaptive = self._adaptive
        return adaptive.epoch if adaptive is not None else 0

    async def __aexit__(self, *exc_info: object) -> None:
        with self._lock:
            self._in_flight -= 1
            if not self._waiters:
                return
            granted = self._grant_requests()
        self._wake(granted)

    def _grant_requests(self) -> list[_Waiter]:
        """Count waiters in, in order, while the limit allows (caller holds the lock)."""
        granted = []
        waiters = self._waiters
        while waiters and self._in_flight < self._limit:
            waiter = waiters.popleft()
            waiter.granted = True
            self._in_flight += 1
            granted.append(waiter)
        if self._in_flight > self._peak:
            self._peak = self._in_flight
        return granted

    # ------------------------------------------------------------------ adaptive limit
    def record_success(self, epoch: int, seconds: float) -> None:
        """A request admitted at ``epoch`` (what ``async with budget`` returned) succeeded
        in ``seconds``: the adaptive limit may grow. Call it inside the block."""
        adaptive = self._adaptive
        if adaptive is None:
            return
        with self._lock:
            if not adaptive.succeeded(epoch, seconds, self._in_flight):
                return
            self._limit = adaptive.limit
            self._publish_limit()
            granted = self._grant_requests()
        self._wake(granted)

    def record_throttle(self, epoch: int) -> None:
        """A request admitted at ``epoch`` was refused with "slow down" (or timed out):
        the adaptive limit drops, once per window. Call it inside the block."""
        adaptive = self._adaptive
        if adaptive is None:
            return
        with self._lock:
            if not adaptive.throttled(epoch, self._in_flight):
                return
            self._limit = adaptive.limit
            self._publish_limit()

    def _publish_limit(self) -> None:
        # Under the budget's lock (or before anyone can use the budget), so the counters
        # see the limits in the order they were set. The stats lock is taken inside ours,
        # never the other way round.
        if self._stats is not None:
            self._stats.set_concurrency_limit(self._limit)

    # ------------------------------------------------------------------ bytes
    def reserve(self, nbytes: int) -> _Reservation:
        """Hold ``nbytes`` of the byte budget for the duration of an ``async with`` block.

        Waits until the reservation fits (or nothing else is reserved); waiting
        reservations are admitted first come, first served, so a large one is not
        overtaken forever by small ones. Cancellation while waiting reserves nothing.
        """
        return _Reservation(self, max(0, int(nbytes)))

    def _fits(self, nbytes: int) -> bool:
        return self._bytes == 0 or self._bytes + nbytes <= self.max_bytes

    def _grant_bytes(self) -> list[_Waiter]:
        """Count waiting reservations in, in order, while they fit (caller holds the lock)."""
        granted = []
        waiters = self._byte_waiters
        while waiters and self._fits(waiters[0].nbytes):
            waiter = waiters.popleft()
            waiter.granted = True
            self._bytes += waiter.nbytes
            granted.append(waiter)
        return granted

    def _release_bytes(self, nbytes: int) -> None:
        with self._lock:
            self._bytes -= nbytes
            if not self._byte_waiters:
                return
            granted = self._grant_bytes()
        self._wake(granted)

    # ------------------------------------------------------------------ waiting
    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter leaves (cancelled, or its coroutine closed with its loop): give back what
        it was granted meanwhile, or take it out of its queue."""
        with self._lock:
            if waiter.granted:
                granted = self._give_back(waiter)
            else:
                try:
                    (self._byte_waiters if waiter.for_bytes else self._waiters).remove(waiter)
                except ValueError:  # revoked by a failed wake-up: nothing to give back
                    return
                # Leaving the head of the byte queue may let the ones behind fit.
                granted = self._grant_bytes() if waiter.for_bytes else []
        self._wake(granted)

    def _give_back(self, waiter: _Waiter) -> list[_Waiter]:
        """Return what ``waiter`` was granted and grant it on (caller holds the lock)."""
        waiter.granted = False
        if waiter.for_bytes:
            self._bytes -= waiter.nbytes
            return self._grant_bytes()
        self._in_flight -= 1
        return self._grant_requests()

    def _wake(self, granted: Iterable[_Waiter]) -> None:
        """Resolve granted waiters on their own loops (outside the lock)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for waiter in granted:
            if waiter.loop is running:
                _resolve(waiter)
                continue
            try:
                waiter.loop.call_soon_threadsafe(_resolve, waiter)
            except RuntimeError:  # its loop is closed: the task will never run to take it
                self._revoke(waiter)

    def _revoke(self, waiter: _Waiter) -> None:
        with self._lock:
            if not waiter.granted:  # its task already gave it back
                return
            granted = self._give_back(waiter)
        self._wake(granted)

    def __repr__(self) -> str:
        kind = f"adaptive, limit={self._limit}, min_requests={self.min_requests}, " if self.adaptive else ""
        return f"IOBudget({kind}max_requests={self.max_requests}, max_bytes={self.max_bytes})"


class _Reservation:
    """``async with budget.reserve(nbytes):`` (a class, not a generator: this runs per chunk)."""

    __slots__ = ("_budget", "_nbytes")

    def __init__(self, budget: IOBudget, nbytes: int) -> None:
        self._budget = budget
        self._nbytes = nbytes

    async def __aenter__(self) -> None:
        budget, nbytes = self._budget, self._nbytes
        with budget._lock:
            if not budget._byte_waiters and budget._fits(nbytes):
                budget._bytes += nbytes
                return
            waiter = _Waiter(asyncio.get_running_loop(), nbytes)
            budget._byte_waiters.append(waiter)
        try:
            await waiter.future  # a release adds our bytes, then resolves this
        except BaseException:
            budget._abandon(waiter)
            raise

    async def __aexit__(self, *exc_info: object) -> None:
        self._budget._release_bytes(self._nbytes)


# Every budget, so a forked child can empty them (os.register_at_fork below).
_all_budgets: weakref.WeakSet[IOBudget] = weakref.WeakSet()

# Budgets by store spec (Store.budget_key): every open of one configuration shares one,
# kept while used, for the specs used most recently, and pinned once `set_budget` set them
# (`SpecRegistry` says why not forever).
_budgets: SpecRegistry[IOBudget] = SpecRegistry()


def _after_fork_in_child() -> None:
    # Another thread of the parent may have held a lock at the fork, and the parent's
    # waiters and holders do not exist here: every budget starts empty.
    _budgets.after_fork()
    for budget in list(_all_budgets):
        budget._reset_state()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def budget_for(store: Store) -> IOBudget:
    """The I/O budget of ``store``, created on first use and shared from then on.

    Budgets are kept per store spec (`azarr.storage.Store.budget_key`), not per
    object: two opens of one URL, unpickled copies, read-only views and wrappers
    (cache, consolidated overlay) all share one, in every thread of the process.
    Limits come from `set_budget`, else from the store's declared ``max_requests``,
    else from ``azarr.config``: ``max_concurrency_local`` (local and memory stores) or
    ``max_concurrency`` (remote), and ``max_bytes_in_flight``. A remote store's
    request limit adapts to throttling between ``min_concurrency`` and that maximum
    unless ``adaptive_concurrency`` is off; local and memory stores keep a fixed one.

    A budget is kept while anything uses it (an open array), for the 256 store specs used
    most recently, and for the life of the process once `set_budget` set its limits:
    a process that makes a store per request does not keep one per request.
    """

    def create() -> IOBudget:
        # Under the budgets' lock; `stats_for` then takes the counters' own (always in that
        # order: the counters never look up a budget).
        requests = store.max_requests
        if requests is None:
            requests = config.get("max_concurrency_local" if store.is_local else "max_concurrency")
        return IOBudget(
            int(requests),
            int(config.get("max_bytes_in_flight")),
            adaptive=not store.is_local and bool(config.get("adaptive_concurrency")),
            min_requests=int(config.get("min_concurrency")),
            latency_tolerance=config.get("adaptive_latency_tolerance"),
            stats=stats_for(store),
        )

    return _budgets.get_or_create(store.budget_key, create)


def set_budget(
    store: Store,
    *,
    max_requests: int | None = None,
    max_bytes: int | None = None,
    adaptive: bool | None = None,
    min_requests: int | None = None,
) -> IOBudget:
    """Set the I/O limits of ``store`` (and of every store sharing its spec).

    The one budget object is changed in place, so arrays and groups already open
    on the store follow it from their next request; in-flight work keeps the slots
    it holds (a lowered limit is reached as those requests finish).

    Parameters
    ----------
    max_requests : int, optional
        Requests in flight at most (the ceiling of an adaptive limit).
    max_bytes : int, optional
        Bytes in flight at most.
    adaptive : bool, optional
        Turn the adaptive request limit on or off for this store (default: unchanged).
    min_requests : int, optional
        Floor of the adaptive limit.

    Raises
    ------
    ValueError
        A limit below 1.
    """
    budget = budget_for(store)
    _budgets.pin(store.budget_key, budget)  # the limits asked for outlive the arrays open now
    budget.set_limits(
        max_requests if max_requests is not None else budget.max_requests,
        max_bytes if max_bytes is not None else budget.max_bytes,
        adaptive=adaptive,
        min_requests=min_requests,
    )
    return budget
