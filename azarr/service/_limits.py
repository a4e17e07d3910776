"""What all responses of a service may hold, and how long a client may keep one waiting.

A response body costs memory from the moment its bytes are produced (a slab read
from the store, a block of JSON text) until the server has handed them to the
socket. Bounding each response is not enough: 200 concurrent 16 MB requests, or
50 clients that ask and never read, multiply any per-response bound. So
`ResponseLimits` keeps **one byte budget across every response in flight**:

* a slab or block is *reserved* before it is produced and *released* once its
  last byte was accepted by the server (ASGI ``send`` returned);
* bodies go to the server in pieces of `SEND_PIECE` bytes, so the server's own
  copies of unsent data (h11 frames each piece, the transport buffers what the
  socket did not take) stay a piece per connection: uvicorn waits for its write
  buffer to drain before it accepts the next piece;
* a piece the client does not take within ``send_timeout`` seconds ends the
  response (its reservations are released; the connection is closed);
* responses of at most ``small_bytes`` draw on a separate share of the budget,
  so a health probe or a one-element read is never queued behind large ones.

Waiting for the budget is first come, first served (`azarr.scheduler.IOBudget`'s
byte reservations), within each share.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping, MutableMapping
from typing import Any

from azarr.scheduler import IOBudget

logger = logging.getLogger("azarr.service")

Send = Callable[[MutableMapping[str, Any]], Any]

DEFAULT_RESPONSE_BUDGET = 256 * 1024 * 1024
"""Bytes of response bodies produced but not yet sent, across every response (`ResponseLimits`)."""

DEFAULT_SEND_TIMEOUT = 30.0
"""Seconds a client may leave a piece of a response unread before the response is ended."""

DEFAULT_SMALL_BYTES = 256 * 1024
"""Responses up to this size (bytes) use the budget's share for small responses."""

SEND_PIECE = 64 * 1024
"""Bytes handed to the server per ASGI body message (asyncio's default write-buffer high-water mark)."""

_NO_LIMIT = 2**62  # request slots of the byte-only budgets


class SendTimeoutError(TimeoutError):
    """The client took no part of a response for ``send_timeout`` seconds (the response was ended)."""


class ResponseLimits:
    """One byte budget for all response bodies in flight, and a send timeout.

    Parameters
    ----------
    max_bytes : int
        Bytes of response bodies produced but not yet sent, across every response
        using these limits (default 256 MiB). A single slab larger than what is
        free waits; one larger than the whole budget is admitted alone.
    send_timeout : float or None
        Seconds the client may leave a piece of a response unread (default 30);
        then the response is ended and its memory released. None: wait forever.
    small_bytes : int
        Responses of at most this many bytes (default 256 KiB) draw on a separate
        eighth of ``max_bytes``, so they never queue behind large responses.

    Attributes
    ----------
    timed_out : int
        Responses ended by ``send_timeout`` (since start).

    Notes
    -----
    Share one instance across the whole application (`array_response`'s
    ``limits``); the default is one process-wide instance, `default_limits`.
    Peak memory of response bodies is about ``max_bytes`` plus a `SEND_PIECE`
    per open connection.
    """

    def __init__(
        self,
        max_bytes: int = DEFAULT_RESPONSE_BUDGET,
        *,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        small_bytes: int = DEFAULT_SMALL_BYTES,
    ) -> None:
        if max_bytes < 8:
            raise ValueError(f"max_bytes must be >= 8, got {max_bytes}")
        if send_timeout is not None and not send_timeout > 0:
            raise ValueError(f"send_timeout must be > 0 seconds or None, got {send_timeout}")
        self.max_bytes = int(max_bytes)
        self.send_timeout = send_timeout
        self.small_bytes = int(small_bytes)
        small_share = self.max_bytes // 8
        self._large = IOBudget(_NO_LIMIT, self.max_bytes - small_share)
        self._small = IOBudget(_NO_LIMIT, small_share)
        self.timed_out = 0

    @property
    def slab_bytes(self) -> int:
        """Largest slab a streamed response reads at once: a sixteenth of the budget, so
        at least eight responses (two slabs each: one sent, one read) make progress together."""
        return max(1, self.max_bytes // 16)

    @property
    def bytes_in_flight(self) -> int:
        """Bytes reserved now (on the current event loop)."""
        return self._large.bytes_in_flight + self._small.bytes_in_flight

    def reserve(self, nbytes: int, *, small: bool = False) -> Any:
        """``async with limits.reserve(n):`` -- hold ``n`` bytes of the budget (``small``: of the
        share for small responses). Waits, first come first served, until they fit."""
        return (self._small if small else self._large).reserve(nbytes)

    def as_dict(self) -> dict[str, Any]:
        """Settings and counters, for a health endpoint."""
        return {
            "max_bytes": self.max_bytes,
            "bytes_in_flight": self.bytes_in_flight,
            "send_timeout": self.send_timeout,
            "timed_out": self.timed_out,
        }

    async def send_body(
        self, send: Send, parts: AsyncIterator[bytes | memoryview], *, what: str = "response"
    ) -> bool:
        """Send ``parts`` as the body of a started response, in `SEND_PIECE` pieces.

        Returns False when the client stalled past ``send_timeout`` (the response is then
        left incomplete, which makes the server close the connection), True when the
        body was sent whole. The caller releases each part's reservation once the
        iterator is resumed past it (every piece of it has been accepted by then).
        """
        try:
            async for part in parts:
                view = memoryview(part).cast("B")
                del part  # nothing here may keep a part alive once its producer released it
                for start in range(0, len(view), SEND_PIECE):
                    # A server that takes a piece without waiting (its buffer has room) and a
                    # producer whose reservation fits at once never suspend: yield the loop.
                    await asyncio.sleep(0)
                    piece = view[start : start + SEND_PIECE]
                    await self._send(send, {"type": "http.response.body", "body": piece, "more_body": True})
                    del piece
                del view
            # The server drains the last piece before it takes this one.
            await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})
        except SendTimeoutError:
            self.timed_out += 1
            logger.warning("%s: the client read nothing for %s s; response ended", what, self.send_timeout)
            return False
        return True

    async def _send(self, send: Send, message: Mapping[str, Any]) -> None:
        if self.send_timeout is None:
            await send(dict(message))
            return
        try:
            async with asyncio.timeout(self.send_timeout):
                await send(dict(message))
        except TimeoutError:
            raise SendTimeoutError(f"no progress sending for {self.send_timeout:g} s") from None


_default: ResponseLimits | None = None


def default_limits() -> ResponseLimits:
    """The process-wide `ResponseLimits` used when a response is given none (created on first use)."""
    global _default
    if _default is None:
        _default = ResponseLimits()
    return _default
