"""ASGI middleware: cancel a request's handler when its client leaves or its deadline passes.

Starlette and FastAPI keep running a handler after the client hung up (fastapi
#3766): an abandoned slice request goes on fetching every chunk. This middleware
runs the application as its own task and reads the ASGI ``receive`` channel
itself; when ``http.disconnect`` arrives before the handler has finished, the
task is cancelled, and the cancellation reaches every chunk request the handler
awaits (azarr's fan-out cancels its workers, which cancel their HTTP requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from azarr.service._errors import DeadlineExceededError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class CancelOnDisconnectMiddleware:
    """Cancel HTTP handlers whose client disconnected; optionally enforce a deadline.

    Parameters
    ----------
    app : ASGI application
        The application to wrap (``app.add_middleware(CancelOnDisconnectMiddleware)``
        on Starlette/FastAPI).
    deadline : float, optional
        Seconds a request may run before its response starts. When it passes the
        handler is cancelled and the client gets ``504`` with a JSON detail. A
        response already streaming is not cut off by the deadline (it only cancels
        when the client leaves). ``None``: no deadline.

    Attributes
    ----------
    active : int
        HTTP requests being handled now.
    cancelled : int
        Handlers cancelled because their client disconnected (since start).
    timed_out : int
        Handlers cancelled by the deadline (since start).

    Notes
    -----
    The wrapped application reads ``receive`` through a queue filled by this
    middleware, so it sees every message (the request body, then
    ``http.disconnect``) as before.
    """

    def __init__(self, app: ASGIApp, *, deadline: float | None = None) -> None:
        if deadline is not None and deadline <= 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline}")
        self.app = app
        self.deadline = deadline
        self.active = 0
        self.cancelled = 0
        self.timed_out = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.active += 1
        try:
            await self._handle(scope, receive, send)
        finally:
            self.active -= 1

    async def _handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        started = False

        async def app_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        async def pump() -> None:
            # The only reader of the real channel: forwards everything, ends at disconnect.
            while True:
                message = await receive()
                inbox.put_nowait(message)
                if message["type"] == "http.disconnect":
                    return

        app_task = asyncio.ensure_future(self.app(scope, inbox.get, app_send))
        pump_task = asyncio.ensure_future(pump())
        deadline = None if self.deadline is None else time.monotonic() + self.deadline
        try:
            while True:
                timeout = None if deadline is None or started else max(0.0, deadline - time.monotonic())
                done, _ = await asyncio.wait(
                    {app_task, pump_task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
                )
                if app_task in done:
                    app_task.result()  # re-raise the handler's error to the server
                    return
                if pump_task in done:
                    pump_task.result()
                    self.cancelled += 1
                    await _cancel(app_task)
                    return
                if not started:
                    self.timed_out += 1
                    await _cancel(app_task)
                    if not started:
                        await _send_504(send, self.deadline)
                    return
        finally:
            await _cancel(pump_task)
            await _cancel(app_task)


async def _cancel(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has finished unwinding (its errors are dropped)."""
    if task.done():
        if not task.cancelled():
            task.exception()  # mark retrieved; the caller already handled the outcome
        return
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


async def _send_504(send: Send, deadline: float | None) -> None:
    body = json.dumps({"detail": f"the request ran past its deadline of {deadline:g} s"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 504,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


@contextlib.asynccontextmanager
async def deadline(seconds: float | None) -> AsyncIterator[None]:
    """Cancel the enclosed block after ``seconds`` and raise `DeadlineExceededError` (HTTP 504).

    For a deadline on one route, or a tighter one than the middleware's:

        async with azarr.service.deadline(2.0):
            data = await arr.get_basic_selection(sel)

    Parameters
    ----------
    seconds : float or None
        Time limit in seconds; ``None`` means no limit.

    Raises
    ------
    DeadlineExceededError
        The block ran longer; every request it was awaiting has been cancelled.
    """
    if seconds is None:
        yield
        return
    timer = asyncio.timeout(seconds)
    try:
        async with timer:
            yield
    except TimeoutError as exc:
        if not timer.expired():
            raise  # a timeout from inside (a store request), not ours
        raise DeadlineExceededError(f"the request ran past its deadline of {seconds:g} s") from exc
