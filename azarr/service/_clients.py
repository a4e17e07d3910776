"""ASGI middleware: at most N requests in flight per client; more get ``429 Too Many Requests``.

One client opening hundreds of connections would otherwise take every slot of the
store's request budget and the whole response budget (`ResponseLimits`), and every
other client would wait behind it. Requests are counted from when they arrive until
the last part of their response is handed to the server; a client is its IP address unless ``key`` says
otherwise (behind a reverse proxy: the forwarded address the proxy sets).
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from typing import Any

from azarr.service._disconnect import ASGIApp, Receive, Scope, Send

DEFAULT_MAX_CLIENT_REQUESTS = 16
"""Requests one client may have in flight (`ClientLimitMiddleware`)."""


def client_address(scope: Scope) -> str:
    """The peer's IP address (``scope["client"]``); ``""`` when the server gives none."""
    client = scope.get("client")
    return str(client[0]) if client else ""


class ClientLimitMiddleware:
    """Answer ``429`` (with ``Retry-After``) to a client that already has ``max_requests`` in flight.

    Parameters
    ----------
    app : ASGI application
        The application to wrap.
    max_requests : int
        HTTP requests one client may have in flight (default 16).
    key : callable, optional
        ``key(scope) -> str``: who the client is (default: its IP address,
        `client_address`).
    retry_after : float
        Seconds sent in ``Retry-After``.

    Attributes
    ----------
    rejected : int
        Requests answered 429 (since start).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_requests: int = DEFAULT_MAX_CLIENT_REQUESTS,
        key: Callable[[Scope], str] = client_address,
        retry_after: float = 1.0,
    ) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests}")
        self.app = app
        self.max_requests = max_requests
        self.key = key
        self.retry_after = retry_after
        self.rejected = 0
        # Requests in flight per client; a client leaves the table with its last request.
        self._active: MutableMapping[str, int] = {}

    @property
    def clients(self) -> int:
        """Clients with at least one request in flight."""
        return len(self._active)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        who = self.key(scope)
        active = self._active.get(who, 0)
        if active >= self.max_requests:
            self.rejected += 1
            await _send_429(send, self.max_requests, self.retry_after)
            return
        self._active[who] = active + 1
        counted = True

        def leave() -> None:
            nonlocal counted
            if counted:
                counted = False
                left = self._active[who] - 1
                if left:
                    self._active[who] = left
                else:
                    del self._active[who]

        async def counting_send(message: MutableMapping[str, Any]) -> None:
            # The request leaves the count *before* the end of its response goes out: a client
            # that sends its next request on the same connection as soon as it has the answer
            # must find it gone (the application returns a moment after the server sent it).
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                leave()
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        finally:
            leave()


async def _send_429(send: Send, limit: int, retry_after: float) -> None:
    detail = f"too many requests in flight from this client (at most {limit}); retry later"
    body = json.dumps({"detail": detail}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(max(0, round(retry_after))).encode()),
    ]
    message: dict[str, Any] = {"type": "http.response.start", "status": 429, "headers": headers}
    await send(message)
    await send({"type": "http.response.body", "body": body, "more_body": False})
