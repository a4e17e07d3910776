"""The aiohttp session base shared by :class:`~azarr.storage.HTTPStore` and the S3 transport.

Both talk HTTP with aiohttp directly, and both need the same things from it:
one ``ClientSession`` per event loop (sessions are bound to their loop, a store
is not), closed when its loop shuts down; timeouts for connecting and for a
stalled body; and no silent re-send after a dropped connection, so that every
attempt azarr's scheduler counts is exactly one request.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from azarr.storage._loops import PerLoop

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "AiohttpSessions",
    "Allocator",
    "ConnectionDropped",
    "new_session",
    "no_silent_resend",
    "read_body",
    "unwrap_dropped",
]

#: ``allocate(nbytes)``: a writable buffer of exactly ``nbytes`` bytes to receive a body into.
Allocator = Callable[[int], memoryview]


class ConnectionDropped(Exception):
    """Carries a connection failure past aiohttp's silent re-send (see :func:`no_silent_resend`)."""


async def no_silent_resend(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
    """aiohttp client middleware: fail instead of re-sending after a dropped connection.

    aiohttp re-sends an idempotent request once when its connection breaks before a
    response arrives (RFC 9112 section 9.3.1). azarr's scheduler retries transient
    errors itself, with backoff, and counts them; a hidden second layer would make
    one attempt two requests. Middlewares are public API (aiohttp >= 3.12); the
    exception type chosen here is not one aiohttp's retry loop catches.
    """
    import aiohttp

    try:
        return await handler(request)
    except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as exc:
        raise ConnectionDropped(str(exc)) from exc


def unwrap_dropped(exc: BaseException) -> BaseException:
    """The connection error a :class:`ConnectionDropped` carries (others unchanged), for classification."""
    if isinstance(exc, ConnectionDropped) and exc.__cause__ is not None:
        return exc.__cause__
    return exc


@functools.cache
def _session_takes_middlewares() -> bool:
    import aiohttp

    return "middlewares" in inspect.signature(aiohttp.ClientSession).parameters


def new_session(
    *,
    limit: int,
    connect_timeout: float | None,
    read_timeout: float | None,
    keepalive_timeout: float | None = None,
    ssl: Any = True,
    **session_kwargs: Any,
) -> aiohttp.ClientSession:
    """A ``ClientSession`` with azarr's defaults: a pool of ``limit`` connections, no
    silent re-send, and per-connect / per-read timeouts in seconds (no total: a large
    download that keeps receiving data does not time out).

    ``session_kwargs`` go to :class:`aiohttp.ClientSession` (``auth``, ``headers``,
    ``auto_decompress``, ...); a ``timeout`` there replaces the two given here.
    """
    import aiohttp

    connector_kwargs: dict[str, Any] = {"limit": limit, "ssl": ssl}
    if keepalive_timeout is not None:
        connector_kwargs["keepalive_timeout"] = keepalive_timeout
    session_kwargs.setdefault(
        "timeout", aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
    )
    if _session_takes_middlewares():
        session_kwargs.setdefault("middlewares", (no_silent_resend,))
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(**connector_kwargs), **session_kwargs)


async def read_body(resp: aiohttp.ClientResponse, allocate: Allocator | None = None) -> bytes | memoryview:
    """The whole body of ``resp``: into ``allocate(Content-Length)`` when given and the
    length is known (no new ``bytes`` object per body), else ``resp.read()``.

    Raises
    ------
    aiohttp.ClientPayloadError
        The body ended short of, or ran past, its Content-Length.
    """
    length = resp.content_length
    if allocate is None or length is None or resp.headers.get("Content-Encoding"):
        return await resp.read()
    import aiohttp

    view = allocate(length)
    content, filled = resp.content, 0
    while True:
        block = await content.readany()
        if not block:
            break
        end = filled + len(block)
        if end > length:
            raise aiohttp.ClientPayloadError(f"response body longer than its Content-Length ({length} bytes)")
        view[filled:end] = block
        filled = end
    if filled != length:
        raise aiohttp.ClientPayloadError(f"response body ended after {filled} of {length} bytes")
    return view


async def _close_session(session: Any) -> None:
    if not session.closed:
        await session.close()


class AiohttpSessions:
    """One aiohttp session per running event loop, made by ``make()`` on first use there.

    Closed by :meth:`close` (the running loop's) or when its loop shuts down
    (:class:`~azarr.storage._loops.PerLoop`). Not picklable: owners rebuild it.
    """

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._loops: PerLoop[Any] = PerLoop(lambda _loop: make(), _close_session)

    async def get(self) -> aiohttp.ClientSession:
        """The running loop's session (created on first use)."""
        session: aiohttp.ClientSession
        session, _ = await self._loops.get()
        return session

    async def close(self) -> None:
        """Close the running loop's session; a later :meth:`get` makes a new one."""
        await self._loops.close()

    def open_count(self) -> int:
        """Sessions currently held (one per event loop that used the owner)."""
        return self._loops.open_count()
