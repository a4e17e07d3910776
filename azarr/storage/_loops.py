"""One resource per running event loop: the per-loop sessions of every network store.

aiohttp sessions and fsspec async filesystems are bound to the event loop they
were made on, but an azarr store must work from any loop (``asyncio.run`` twice,
several threads). `PerLoop` keeps one resource per loop, creates it on
first use in that loop, and closes it when the store is closed or when the loop
shuts down -- shared by ``FsspecStore``, ``HTTPStore`` and the S3 transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# Per-loop state inherited from a parent process (see PerLoop._forget_parent).
_FORKED_AWAY: list[Any] = []


@dataclass(eq=False)
class _LoopState:
    """The filesystem instance serving one event loop."""

    fs: Any
    guard: AsyncGenerator[None, None] | None = None
    abandoned: bool = False  # its loop closed without letting us close the session
    # Closes the resource when the owner is garbage-collected (see _owner_dropped).
    finalizer: weakref.finalize[Any, Any] | None = None

    def release(self) -> None:
        """Forget the owner-dropped hook (the resource is closed or abandoned)."""
        if self.finalizer is not None:
            self.finalizer.detach()
            self.finalizer = None


async def _session_guard(
    state: _LoopState, close: Callable[[Any], Awaitable[None]]
) -> AsyncGenerator[None, None]:
    """Close ``state.fs`` when its event loop shuts down.

    An async generator iterated once is tracked by its loop, and ``asyncio.run`` /
    ``asyncio.Runner`` close every such generator before closing the loop
    (``loop.shutdown_asyncgens``). Its ``finally`` is therefore a reliable "this loop
    is ending" hook: sessions get closed on the right loop even when the caller
    never calls `Store.close`. It references no store, so dropping the store
    lets the loop close the generator (and the session) too.
    """
    try:
        yield
    finally:
        if not state.abandoned:
            with contextlib.suppress(Exception):  # best effort at shutdown
                await close(state.fs)


def _owner_dropped(loop: asyncio.AbstractEventLoop, state: _LoopState) -> None:
    """The owner of ``state`` was garbage-collected: close its resource on its own loop.

    Registered with `weakref.finalize`, whose registry holds ``state`` -- and so
    the resource -- strongly. Without it the resource would hang only off the dropped
    owner: a store is a reference cycle (it holds its ``PerLoop``, which holds its
    bound ``create``), so the collector would finalize the aiohttp session in the same
    pass as the guard that was about to close it, and aiohttp would log "Unclosed client
    session" for a session closed a moment later (measured: every S3Store dropped after
    a listing did so).
    """
    guard = state.guard
    state.finalizer = None
    if guard is None or state.abandoned:
        return
    try:
        loop.call_soon_threadsafe(lambda: loop.create_task(guard.aclose()))
    except RuntimeError:  # its loop is closed: nothing can close the session now
        state.abandoned = True
        _finish_sync(guard)


def _finish_sync(guard: AsyncGenerator[None, None]) -> None:
    """Finish a guard whose loop is already closed, without any event loop.

    With ``state.abandoned`` set its ``finally`` awaits nothing, so one ``send``
    completes ``aclose()``; a finished generator then never asks its dead loop to
    finalize it (which would raise "Event loop is closed" during garbage collection).
    """
    closing = guard.aclose()
    try:
        closing.send(None)
    except StopIteration:
        pass
    except Exception:  # pragma: no cover - defensive: never raise from cleanup
        closing.close()


class PerLoop(Generic[T]):
    """A resource per running event loop, closed with its loop.

    Parameters
    ----------
    create : callable
        ``create(loop) -> resource``, called on first use in a loop (no I/O).
    close : async callable
        ``await close(resource)``. Must not reference the owning store (pass a
        static or class-level function): the loop-shutdown guard holds it, and
        a dropped store must not be kept alive by its loop.

    Notes
    -----
    Not picklable: owners rebuild it. Fork-safe: in a child process the parent's
    resources are dropped unused (their sockets belong to the parent) and new ones
    are made on first use.
    """

    def __init__(
        self, create: Callable[[asyncio.AbstractEventLoop], T], close: Callable[[Any], Awaitable[None]]
    ) -> None:
        self._create = create
        self._close = close
        self.states: dict[asyncio.AbstractEventLoop, _LoopState] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _forget_parent(self) -> None:
        """In a forked child: the parent's sessions are not ours to use or close.

        Their sockets are shared with the parent (closing them here would break the
        parent's connections) and their loops do not run in this process. They are
        dropped unclosed; the child makes its own on first use.
        """
        self._lock = threading.Lock()  # the parent's may have been held at fork time
        for state in self.states.values():
            state.abandoned = True
        # Kept alive, never finalized: collecting a guard would ask the parent's loop (a
        # dead copy here) to close it, through a self-pipe this process shares with it.
        _FORKED_AWAY.extend(self.states.values())
        self.states = {}
        self._pid = os.getpid()

    async def get(self) -> tuple[T, bool]:
        """The running loop's resource, and whether this call created it."""
        loop = asyncio.get_running_loop()
        if self._pid != os.getpid():
            self._forget_parent()
        with self._lock:
            state = self.states.get(loop)
            created = state is None
            stale: list[_LoopState] = []
            if state is None:
                stale = self._pop_closed_loops()
                state = self.states[loop] = _LoopState(self._create(loop))
        self._abandon(stale)
        if created:
            guard = _session_guard(state, self._close)
            await guard.__anext__()  # first iteration: the loop now tracks the guard
            state.guard = guard
            state.finalizer = weakref.finalize(self, _owner_dropped, loop, state)
            state.finalizer.atexit = False  # at exit the loops' own shutdown closes it
        resource: T = state.fs
        return resource, created

    def peek(self) -> T | None:
        """The running loop's resource if it has one (none is made)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self.states.get(loop)
        return None if state is None or self._pid != os.getpid() else state.fs

    async def close(self) -> None:
        """Close the running loop's resource (a later `get` makes a new one).

        Resources of other loops are closed by those loops (or when they shut down).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            state = self.states.pop(loop, None)
            stale = self._pop_closed_loops()
        self._abandon(stale)
        if state is None:
            return
        state.release()
        if state.guard is not None:
            await state.guard.aclose()  # its finally closes the resource
        else:
            await self._close(state.fs)

    def open_count(self) -> int:
        """Resources currently held (one per running or not yet closed event loop that used the owner)."""
        with self._lock:
            return sum(
                1 for loop, state in self.states.items() if not state.abandoned and not loop.is_closed()
            )

    def _pop_closed_loops(self) -> list[_LoopState]:
        # Caller holds self._lock.
        dead = [loop for loop in self.states if loop.is_closed()]
        return [self.states.pop(loop) for loop in dead]

    @staticmethod
    def _abandon(states: list[_LoopState]) -> None:
        for state in states:
            state.abandoned = True
            state.release()
            if state.guard is not None:
                _finish_sync(state.guard)
