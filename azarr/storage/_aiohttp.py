"""The aiohttp session base shared by `HTTPStore` and the S3 transport.

Both talk HTTP with aiohttp directly, and both need the same things from it:
one ``ClientSession`` per event loop (sessions are bound to their loop, a store
is not), shared by stores of equal settings and closed when its loop shuts
down; timeouts for connecting and for a stalled body; no silent re-send after a
dropped connection, so that every attempt azarr's scheduler counts is exactly
one request; and bodies received into the caller's buffers (`read_body`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from azarr import config
from azarr.storage._loops import PerLoop

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "Allocator",
    "SharedSessions",
    "ConnectionDropped",
    "new_session",
    "no_silent_resend",
    "read_body",
    "request_body",
    "unwrap_dropped",
]

#: ``allocate(nbytes)``: a writable buffer of exactly ``nbytes`` bytes to receive a body into.
Allocator = Callable[[int], memoryview]


#: Request bodies above this many bytes are written to the connection in slices of it.
#: aiohttp sends its buffered head joined with the first body write (``b"".join``, a copy of
#: the whole body on Python < 3.12.9), and on Python 3.11 asyncio's transport copies a
#: ``bytes`` body's unsent rest twice (``data[n:]``, then into its buffer): three copies of a
#: 16 MiB shard on the event loop, ~0.3 s of loop CPU per GiB in a profile of sharded
#: writes. Memoryview slices are never joined nor sliced by copy; aiohttp awaits the
#: transport's drain between them, so only the part of one slice the socket did not take
#: is buffered.
BODY_SLICE_BYTES = 256 << 10


def request_body(data: bytes | memoryview | None) -> Any:
    """What to pass as ``data=`` to aiohttp for the request body ``data``: ``data`` itself up
    to `BODY_SLICE_BYTES`, else a payload writing it in slices (the same bytes, the same
    ``Content-Length``)."""
    if data is None:
        return None
    view = memoryview(data)
    if view.nbytes <= BODY_SLICE_BYTES or not view.c_contiguous:
        return data
    return _sliced_payload()(view)


@functools.cache
def _sliced_payload() -> type:
    import aiohttp.payload

    class SlicedBody(aiohttp.payload.Payload):
        """A bytes-like body written to the connection in `BODY_SLICE_BYTES` slices (`request_body`)."""

        _value: memoryview

        def __init__(self, value: bytes | memoryview) -> None:
            view = memoryview(value).cast("B")
            super().__init__(view, content_type="application/octet-stream")
            self._size = view.nbytes

        def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
            return bytes(self._value).decode(encoding, errors)

        async def as_bytes(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
            return bytes(self._value)

        async def write(self, writer: Any) -> None:
            await self.write_with_length(writer, None)

        async def write_with_length(self, writer: Any, content_length: int | None) -> None:
            view = self._value if content_length is None else self._value[:content_length]
            for start in range(0, view.nbytes, BODY_SLICE_BYTES):
                await writer.write(view[start : start + BODY_SLICE_BYTES])

    return SlicedBody


class ConnectionDropped(Exception):
    """Carries a connection failure past aiohttp's silent re-send (see `no_silent_resend`)."""


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
    """The connection error a `ConnectionDropped` carries (others unchanged), for classification."""
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

    ``ssl`` is aiohttp's (``True``, ``False``, an `ssl.SSLContext`) or a path to a
    PEM CA bundle to verify servers against. ``session_kwargs`` go to
    `aiohttp.ClientSession` (``auth``, ``headers``, ``auto_decompress``, ...); a
    ``timeout`` there replaces the two given here.
    """
    import aiohttp

    if isinstance(ssl, str):  # a CA bundle: verify against it instead of the default trust
        import ssl as ssl_module

        ssl = ssl_module.create_default_context(cafile=ssl)

    connector_kwargs: dict[str, Any] = {"limit": limit, "ssl": ssl}
    if keepalive_timeout is not None:
        connector_kwargs["keepalive_timeout"] = keepalive_timeout
    session_kwargs.setdefault(
        "timeout", aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout, sock_read=read_timeout)
    )
    if _session_takes_middlewares():
        session_kwargs.setdefault("middlewares", (no_silent_resend,))
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(**connector_kwargs), **session_kwargs)


async def read_body(
    resp: aiohttp.ClientResponse,
    allocate: Allocator | None = None,
    *,
    what: str,
    limit: int | None = None,
    partial_limit: int | None = None,
    decode: bool = False,
    window: tuple[int, int | None] | None = None,
) -> tuple[bytes, memoryview | None]:
    """The body of ``resp`` as ``(body, received)``, never more than ``limit`` bytes.

    Every body is bounded before it is buffered (``docs/security.md``):

    * a success (2xx) body may hold ``limit`` bytes (default `body_limit`: the
      bound `StoreIO` set for this read). A declared ``Content-Length`` above it
      is refused before anything is allocated; a body without one (chunked) is
      read block by block and refused as soon as it passes the limit;
    * an error body (3xx-5xx) is read up to `ERROR_BODY_BYTES` (its XML/JSON
      error code is at the start); the rest is not read, and the connection is
      closed rather than returned to the pool;
    * ``Content-Encoding``: with ``decode`` (HTTPStore, whose whole-value GETs
      accept gzip/deflate), gzip and deflate are inflated incrementally with the
      limit as ``max_length``, so a bomb stops at limit + 1 bytes; other
      encodings are refused. Without ``decode`` (S3: bodies as stored) the
      encoded bytes are the value.

    A 200 body of known length and no ``Content-Encoding`` goes into
    ``allocate(Content-Length)`` when given and comes back as ``(b"", view)``,
    with no new ``bytes`` object; other bodies come back as ``(bytes, None)``.

    A 200 answer to a ranged request (``window``: the range asked) is a server that
    ignored ``Range`` and sent the whole value. Only the window is kept, as Python
    slicing would cut it (`ByteRange.apply`), and the body is read no further than
    the window's end: the connection is then closed. Memory is the window's bytes
    and one network read, however long the value; a suffix window reads the body to
    its end (at most ``limit`` bytes) and keeps its last bytes. A window that ends past
    ``limit`` is refused (no value within the bound has those bytes), and when the
    bound is at most `CHECK_REST_BYTES` past the window's end the body is read on to
    the bound: a value longer than the caller's bound (an endless body, a gzip bomb)
    is refused rather than trusted for its first bytes.

    Parameters
    ----------
    resp : aiohttp.ClientResponse
        A response whose body is unread.
    allocate : callable, optional
        ``allocate(nbytes)`` -> a writable memoryview for a 200 body.
    what : str
        The request for messages (``"get 'a/0.0' in s3://bucket/x"``).
    limit : int, optional
        Most bytes of a success body (after decoding), default `body_limit`.
    partial_limit : int, optional
        Most bytes of a ``206`` body (a range's length), default ``limit``. A server
        that ignores ``Range`` answers 200 with the whole value, bounded by ``limit``.
    decode : bool
        Inflate gzip/deflate ``Content-Encoding`` (else the bytes are kept as sent).
    window : (int, int or None), optional
        The range asked, ``(start, end)`` as in `ByteRange` (``start < 0``: the last
        ``-start`` bytes; ``end`` None: to the end). Only used for a 200 answer.

    Raises
    ------
    BodyTooLargeError
        The body (declared or received or inflated) is larger than ``limit``.
    StoreError
        A ``Content-Encoding`` that cannot be decoded (with ``decode``).
    aiohttp.ClientPayloadError
        The body ended short of, or ran past, its Content-Length.
    """
    from azarr.storage._limits import ERROR_BODY_BYTES, body_limit

    encoding = resp.headers.get("Content-Encoding", "").strip().lower()
    length = resp.content_length
    direct = allocate is not None and resp.status == 200 and length is not None and not encoding
    if not direct:  # aiohttp reads this body: in its usual recv size
        _head_reads(resp.connection, small=False)
    if not 200 <= resp.status < 300:
        return await _read_capped(resp, ERROR_BODY_BYTES, truncate=True) or b"", None
    bound = body_limit() if limit is None else limit
    if resp.status == 206 and partial_limit is not None:
        bound = partial_limit
    if resp.status == 200 and window is not None:
        return await _read_window(resp, _Window(*window), bound, what, encoding if decode else ""), None
    if decode and encoding not in ("", "identity"):
        return await _read_inflated(resp, encoding, bound, what, _Window(0, None)), None
    if length is not None and length > bound:
        resp.close()
        raise _too_large(what, bound, declared=length)
    if length is None:
        body = await _read_capped(resp, bound)
        if body is None:
            raise _too_large(what, bound, received=bound)
        return body, None
    if not direct or allocate is None:
        return await resp.read(), None  # aiohttp reads exactly Content-Length bytes
    return b"", await _receive_into(resp, allocate(length), length)


#: Most bytes asyncio's plain-TCP transport asks ``recv`` for while a response head is
#: awaited on a connection whose last body went straight into its buffer (`_BodyInto`).
#: Its default, 256 KiB, brings the head and up to 256 KiB of body through aiohttp's
#: parser and a copy (medians: 256 KiB of a 0.6-1 MiB chunk body at 0 ms); the rest of
#: the body is received directly either way.
HEAD_RECV_BYTES = 16 * 1024


def _head_reads(connection: Any, *, small: bool) -> None:
    """Make ``connection``'s transport read the next response head in `HEAD_RECV_BYTES`
    pieces (``small``), or in its default size again (a body aiohttp reads itself).
    A no-op where the transport has no ``max_size`` (TLS, uvloop) or is gone."""
    transport = None if connection is None else connection.transport
    default = getattr(type(transport), "max_size", None)
    if isinstance(default, int):
        transport.max_size = min(HEAD_RECV_BYTES, default) if small else default  # type: ignore[union-attr]


async def _receive_into(resp: aiohttp.ClientResponse, view: memoryview, length: int) -> memoryview:
    """The ``length``-byte body of ``resp`` in ``view``: what aiohttp has buffered is copied,
    the rest is received straight into ``view`` (`_BodyInto`) where the connection allows,
    else block by block through aiohttp's parser."""
    import aiohttp

    content, filled = resp.content, 0

    def put(block: bytes) -> int:
        end = filled + len(block)
        if end > length:
            raise aiohttp.ClientPayloadError(f"response body longer than its Content-Length ({length} bytes)")
        view[filled:end] = block
        return end

    while filled < length:  # what arrived with the head (read_nowait raises a stored error)
        block = content.read_nowait()
        if not block:
            break
        filled = put(block)
    if filled < length and not content.is_eof():
        receiver = _BodyInto.attach(resp, view, filled)
        if receiver is not None:
            return await receiver.wait(resp)
    while block := await content.readany():
        filled = put(block)
    if filled != length:
        raise aiohttp.ClientPayloadError(f"response body ended after {filled} of {length} bytes")
    return view


class _BodyInto(asyncio.BufferedProtocol):
    """The rest of one response body, received with ``recv_into`` straight into its buffer.

    aiohttp's protocol hands a body over in ``bytes`` its C parser slices out of each
    ``recv``, which `read_body` then copies into the caller's buffer: two copies and a
    parser, buffer and waiter round per network read, on the event-loop thread. Once the
    head is parsed and ``Content-Length`` is known, this protocol takes the connection's
    transport over (``transport.set_protocol``, asyncio's public switch, which also makes
    the transport call ``get_buffer``/``buffer_updated``; asyncio's TLS transport then
    decrypts into the buffer too), asks the kernel for exactly the bytes still missing,
    and when the last one has arrived gives the transport back to aiohttp's protocol and
    ends the response's payload (``feed_eof``), which returns the connection to the pool
    as aiohttp does when its parser completes a message. The next request on the
    connection gets a new parser (aiohttp makes one per request). A connection that
    breaks is handed to aiohttp's protocol to close; a body that stalls for the
    session's ``sock_read`` seconds, a short body or a cancelled read close the
    connection. Never more than ``Content-Length`` bytes are read.
    """

    __slots__ = (
        "_filled",
        "_handler",
        "_length",
        "_loop",
        "_payload",
        "_progress",
        "_timeout",
        "_timer",
        "_transport",
        "_view",
        "done",
    )

    def __init__(
        self, handler: Any, payload: Any, transport: Any, view: memoryview, filled: int, timeout: float | None
    ) -> None:
        self._handler = handler
        self._payload = payload
        self._transport = transport
        self._view = view
        self._filled = filled
        self._length = len(view)
        self._loop = loop = asyncio.get_running_loop()
        self.done: asyncio.Future[None] = loop.create_future()
        self._timeout = timeout
        self._progress = loop.time()
        self._timer = loop.call_at(self._progress + timeout, self._check_stall) if timeout else None

    @classmethod
    def attach(cls, resp: aiohttp.ClientResponse, view: memoryview, filled: int) -> _BodyInto | None:
        """A receiver reading ``resp``'s body on from byte ``filled``, or None where the
        connection is not in the state this expects (aiohttp then reads on as usual)."""
        connection = resp.connection
        handler = None if connection is None else connection.protocol
        transport = None if handler is None else handler.transport
        if (
            transport is None
            or transport.is_closing()
            or not transport.is_reading()  # paused by flow control: aiohttp is still catching up
            or transport.get_protocol() is not handler
            or handler.upgraded
            or not hasattr(handler, "_drop_timeout")
        ):
            return None
        receiver = cls(handler, resp.content, transport, view, filled, handler.read_timeout)
        # aiohttp's own read timer would fire sock_read seconds from now however fast the
        # body flows, since its protocol sees no more data: this receiver times stalls instead.
        handler._drop_timeout()
        transport.set_protocol(receiver)
        return receiver

    async def wait(self, resp: aiohttp.ClientResponse) -> memoryview:
        """The filled buffer, once the body is in; on any failure the connection is closed."""
        try:
            await self.done
        except BaseException:
            self._stop()
            if self._transport.get_protocol() is self:
                self._transport.set_protocol(self._handler)
            resp.close()  # the connection is mid-body: never back to the pool
            raise
        return self._view

    # ------------------------------------------------------------- asyncio.BufferedProtocol
    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._filled :]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._filled < self._length:
            if self._timer is not None:
                self._progress = self._loop.time()
            return
        self._stop()
        # As aiohttp's parser would on the message's last byte: the connection goes back
        # to its protocol, the payload ends, and the response releases the connection.
        self._transport.set_protocol(self._handler)
        _head_reads(self._handler, small=True)
        self._payload.feed_eof()
        if not self.done.done():
            self.done.set_result(None)

    def eof_received(self) -> bool | None:
        return None  # the transport closes; connection_lost reports the short body

    def connection_lost(self, exc: Exception | None) -> None:
        import aiohttp

        self._stop()
        self._handler.connection_lost(exc)  # aiohttp's own bookkeeping for a lost connection
        if not self.done.done():
            err = aiohttp.ClientPayloadError(
                f"response body ended after {self._filled} of {self._length} bytes"
                + (f": {exc}" if exc is not None else " (connection closed)")
            )
            err.__cause__ = exc
            self.done.set_exception(err)

    # ------------------------------------------------------------- stalls
    def _check_stall(self) -> None:
        assert self._timeout is not None
        due = self._progress + self._timeout
        if self._loop.time() < due:
            self._timer = self._loop.call_at(due, self._check_stall)
            return
        self._timer = None
        if not self.done.done():
            import aiohttp

            stalled = getattr(aiohttp, "SocketTimeoutError", aiohttp.ServerTimeoutError)
            self.done.set_exception(stalled("Timeout on reading data from socket"))

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def _too_large(
    what: str, limit: int, *, declared: int | None = None, received: int | None = None
) -> Exception:
    from azarr.errors import BodyTooLargeError

    if declared is not None:
        size = f"declares Content-Length {declared} bytes"
    else:
        size = f"sent more than {received if received is not None else limit} bytes"
    return BodyTooLargeError(
        f"{what}: the response {size}, more than the {limit} bytes it can hold (the value's largest "
        "stored size, max_metadata_bytes for documents, max_chunk_bytes for chunks; azarr.config)",
        declared=declared,
        limit=limit,
    )


async def body_size(resp: aiohttp.ClientResponse, *, what: str, limit: int | None = None) -> int:
    """The size of a success body, without keeping it: its ``Content-Length`` (the body is
    not read and its connection is closed), else its bytes counted as they arrive and
    dropped, at most ``limit`` (default `body_limit`). For an answer whose size is all the
    caller needs (a server that ignored ``Range`` on a size probe): memory stays one
    network read, however long the body.

    Raises
    ------
    BodyTooLargeError
        The body runs past ``limit`` bytes.
    aiohttp.ClientPayloadError
        The body broke off.
    """
    from azarr.storage._limits import body_limit

    bound = body_limit() if limit is None else limit
    length = resp.content_length
    if length is not None:
        resp.close()
        if length > bound:
            raise _too_large(what, bound, declared=length)
        return length
    size = 0
    content = resp.content
    while block := await content.readany():
        size += len(block)
        if size > bound:
            resp.close()
            raise _too_large(what, bound, received=bound)
    return size


async def _read_capped(resp: aiohttp.ClientResponse, cap: int, *, truncate: bool = False) -> bytes | None:
    """The body if it holds at most ``cap`` bytes; else its first ``cap`` bytes with
    ``truncate``, None without. A body going on past ``cap`` is not read further, and its
    connection is closed instead of returned to the pool."""
    blocks: list[bytes] = []
    size = 0
    content = resp.content
    while size <= cap:
        block = await content.read(cap + 1 - size)
        if not block:
            return b"".join(blocks)
        blocks.append(block)
        size += len(block)
    resp.close()
    return b"".join(blocks)[:cap] if truncate else None


#: Bytes a whole-value (200) answer to a range request is read past the range, at most, to
#: check that the value ends within the read's bound (`_Window.checks_rest`): a gzip bomb or
#: an endless body sent for a value the caller knows to be small is refused, not trusted.
CHECK_REST_BYTES = 1 << 20


class _Window:
    """Keeps bytes ``[start, end)`` of a stream fed block by block, as slicing the whole
    would (``start < 0``: its last ``-start`` bytes); memory is the window and one block."""

    __slots__ = ("end", "kept", "position", "size", "start")

    def __init__(self, start: int, end: int | None) -> None:
        self.start, self.end = start, end
        self.position = 0  # bytes of the stream seen
        self.kept: list[bytes] = []
        self.size = 0  # bytes in kept

    @property
    def complete(self) -> bool:
        """Nothing further in the stream can belong to the window."""
        return self.start >= 0 and self.end is not None and self.position >= self.end

    def within(self, limit: int) -> bool:
        """The window ends at or before byte ``limit`` of the stream: no byte past a value
        of ``limit`` bytes belongs to it (a suffix or open window may need them all)."""
        return self.start >= 0 and self.end is not None and self.end <= limit

    def checks_rest(self, limit: int) -> bool:
        """Whether the stream past the window is read on, to check that the value ends
        within ``limit`` bytes: when that is at most `CHECK_REST_BYTES` more than the window
        needs. Past that, a small range of a large value from a server that ignores
        ``Range`` would cost the whole bound, and the range is returned unchecked."""
        return self.within(limit) and limit - (self.end or 0) <= CHECK_REST_BYTES

    def feed(self, block: bytes) -> None:
        n = len(block)
        if self.start < 0:  # a suffix: keep blocks, drop whole ones no longer needed
            self.kept.append(block)
            self.size += n
            while self.size - len(self.kept[0]) >= -self.start:
                self.size -= len(self.kept.pop(0))
        else:
            lo = max(self.start - self.position, 0)
            hi = n if self.end is None else min(self.end - self.position, n)
            if hi > lo:
                piece = block if (lo, hi) == (0, n) else block[lo:hi]
                self.kept.append(piece)
                self.size += len(piece)
        self.position += n

    def value(self) -> bytes:
        body = b"".join(self.kept)
        return body[self.start :] if self.start < 0 else body  # a suffix kept whole blocks


async def _read_window(
    resp: aiohttp.ClientResponse, window: _Window, limit: int, what: str, encoding: str
) -> bytes:
    """`_Window` of a whole-value (200) body (inflated first for a gzip/deflate
    ``encoding``), read no further than the window needs, or on to ``limit`` when that is
    cheap (`_Window.checks_rest`); at most ``limit`` bytes of the value are streamed through it."""
    if encoding not in ("", "identity"):
        return await _read_inflated(resp, encoding, limit, what, window)
    length = resp.content_length
    check = window.checks_rest(limit)
    if length is not None and length > limit and (check or not window.within(limit)):
        resp.close()  # the window needs bytes past the bound (or the end of the value)
        raise _too_large(what, limit, declared=length)
    content = resp.content
    while not window.complete:
        block = await content.readany()
        if not block:
            return window.value()
        window.feed(block)
        # Bytes past the bound belong to no value within it: a window that reaches them
        # (a range ending past the bound, of a body that keeps coming) is refused, even
        # when the block that brought them completes it.
        if window.position > limit and not window.within(limit):
            resp.close()
            raise _too_large(what, limit, received=limit)
    if check and length is None:
        # A body of unstated length must end within the bound, as a value within it does.
        while block := await content.readany():
            window.feed(block)
            if window.position > limit:
                resp.close()
                raise _too_large(what, limit, received=limit)
    if not content.at_eof():
        resp.close()  # the rest of the value is not read: this connection cannot be reused
    return window.value()


async def _read_inflated(
    resp: aiohttp.ClientResponse, encoding: str, limit: int, what: str, into: _Window
) -> bytes:
    """``into``'s part of the body inflated from a gzip/deflate ``Content-Encoding``
    (`_Window` ``(0, None)``: all of it), at most ``limit`` inflated bytes; inflating stops
    once the window is complete, unless the rest is checked (`_Window.checks_rest`)."""
    import zlib

    from azarr.errors import StoreError

    if encoding in ("gzip", "x-gzip"):
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        inflater = zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib-wrapped (raw deflate fails below)
    else:
        resp.close()
        raise StoreError(
            f"{what}: the server answered with Content-Encoding {encoding!r}, which azarr does not "
            "decode (it asks for gzip, deflate or identity)"
        )
    # The encoded body is bounded too (compression can grow incompressible data a little).
    encoded_cap = limit + limit // 64 + 64 * 1024
    check = into.checks_rest(limit)  # inflate on past the window, to the bound, if cheap
    produced = received = 0
    content = resp.content
    try:
        while True:
            block = await content.readany()
            if not block:
                break
            received += len(block)
            if received > encoded_cap:
                resp.close()
                raise _too_large(what, limit, received=encoded_cap)
            data = block
            while data:
                # 1 MiB at a time: one 64 KiB block of a bomb inflates to 64 MiB, which a
                # window that keeps a few bytes of it should not hold.
                piece = inflater.decompress(data, min(limit - produced + 1, 1 << 20))
                produced += len(piece)
                into.feed(piece)
                if produced > limit and (check or not into.within(limit)):
                    resp.close()
                    raise _too_large(what, limit, received=limit)
                if into.complete and not check:
                    resp.close()
                    return into.value()
                data = inflater.unconsumed_tail
        tail = inflater.flush(limit - produced + 1)
        produced += len(tail)
        into.feed(tail)
    except zlib.error as exc:
        resp.close()
        raise StoreError(
            f"{what}: the {encoding} Content-Encoding of the response is corrupt: {exc}"
        ) from None
    if produced > limit:
        raise _too_large(what, limit, received=limit)
    return into.value()


async def _close_session(session: Any) -> None:
    if not session.closed:
        await session.close()


@dataclass(eq=False)
class _Pool:
    """A shared session on one event loop, the owners using it, and its pending close."""

    session: Any
    owners: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    closing: asyncio.TimerHandle | None = None


async def _close_pool(pool: _Pool) -> None:
    if pool.closing is not None:
        pool.closing.cancel()
    await _close_session(pool.session)


_SHARED: dict[Hashable, SharedSessions] = {}
_CLOSING: set[asyncio.Task[None]] = set()
_SHARED_LOCK = threading.Lock()


class SharedSessions:
    """One aiohttp session per event loop, shared by every owner with the same settings.

    Connections outlive the store objects that opened them, as s3fs's cached
    filesystem instances and TensorStore's process-wide HTTP transport do: a store
    made per request (a service), or per read, reuses the previous one's warm
    connections instead of paying TCP (and TLS) handshakes again.

    `release` (``Store.close()``) drops an owner; when the last owner on a
    loop has released it, the session closes after ``connection_linger`` seconds
    (`azarr.config`; 0: at once) unless another owner takes it up first.
    Owners that are dropped without closing free their claim too; every session
    still closes when its loop shuts down (`PerLoop`).
    """

    def __init__(self, make: Callable[[], aiohttp.ClientSession]) -> None:
        self._loops: PerLoop[_Pool] = PerLoop(lambda _loop: _Pool(make()), _close_pool)

    @classmethod
    def for_settings(cls, key: Hashable, make: Callable[[], aiohttp.ClientSession]) -> SharedSessions:
        """The sessions of every owner whose settings equal ``key`` (``make`` builds one;
        it must depend on ``key`` alone and reference no owner)."""
        with _SHARED_LOCK:
            shared = _SHARED.get(key)
            if shared is None:
                shared = _SHARED[key] = cls(make)
            return shared

    async def get(self, owner: Any) -> aiohttp.ClientSession:
        """The running loop's session, claimed for ``owner`` (created on first use)."""
        session = self.claim(owner)
        if session is not None:
            return session
        pool, _ = await self._loops.get()
        return self._claimed(pool, owner)

    def claim(self, owner: Any) -> aiohttp.ClientSession | None:
        """`get` without awaiting, when the running loop has its session already (every
        request but a loop's first: no coroutine per request); else None (call `get`)."""
        pool = self._loops.peek()
        return None if pool is None else self._claimed(pool, owner)

    @staticmethod
    def claim_from(sessions: SharedSessions | None, owner: Any) -> aiohttp.ClientSession | None:
        """`claim` on an owner's ``sessions`` not chosen yet (None: the owner's first request)."""
        return None if sessions is None else sessions.claim(owner)

    def _claimed(self, pool: _Pool, owner: Any) -> aiohttp.ClientSession:
        if pool.closing is not None:
            pool.closing.cancel()
            pool.closing = None
        pool.owners.add(owner)
        session: aiohttp.ClientSession = pool.session
        return session

    async def release(self, owner: Any) -> None:
        """``owner`` is done on the running loop: close the session once nobody uses it."""
        pool = self._loops.peek()
        if pool is None:
            return
        pool.owners.discard(owner)
        if pool.owners:
            return
        linger = float(config.get("connection_linger"))
        if linger <= 0:
            await self._loops.close()
            return
        if pool.closing is None:
            loop = asyncio.get_running_loop()
            pool.closing = loop.call_later(linger, self._close_if_unclaimed, pool)

    def _close_if_unclaimed(self, pool: _Pool) -> None:
        pool.closing = None
        if not pool.owners and self._loops.peek() is pool:
            task = asyncio.ensure_future(self._loops.close())
            _CLOSING.add(task)  # held until done: the loop keeps only a weak reference
            task.add_done_callback(_CLOSING.discard)

    def open_count(self) -> int:
        """Sessions currently open (one per event loop that used them)."""
        return self._loops.open_count()
