"""An HTTP/1.1 fault-injection reverse proxy for tests, run as a subprocess.

Tests put it between azarr and a real server (SeaweedFS, fake-gcs-server, an aiohttp
app): the client's ``endpoint_url`` is the proxy's `FaultProxy.url`, and the
proxy forwards every request to one upstream base URL. Built on raw asyncio streams,
so it can do what an HTTP framework would not: forward the request head byte for
byte (``Host``, ``Authorization``, ``x-amz-*`` untouched, so SigV4 signatures made
for the proxy's address stay valid), reset a connection with an RST mid-response,
or hold a request without answering.

Design
------
The proxy runs in its own process (``python tests/fault_proxy.py --upstream URL``),
not in a thread of the test process:

* it has its own interpreter lock and core, so proxy work does not steal CPU from
  the client under test (s3fs/botocore are CPU-bound) and throughput numbers
  measured through it mean something;
* a test (or an azarr bug) that blocks its event loop cannot also freeze the proxy
  and turn into a fake "stalled server";
* it is controlled over a tiny JSON admin API on a second port, so the sync control
  methods below work from sync tests, async tests and any event loop alike.

The child binds 127.0.0.1 on ports chosen by the kernel, reports them on stdout,
and exits when its stdin closes (the test process died) or on SIGTERM.

Faults
------
Each rule is ``(kind, probability, methods, path)``; a request matching a rule's
method set and ``path`` regex (``re.search`` over the *percent-decoded* request
target, path and query, so GCS's ``/o/a%2F0.0`` reads ``/o/a/0.0``) may be faulted.
gcsfs uploads (``POST /upload/storage/v1/b/B/o?uploadType=multipart``) carry the
object name in the multipart body, so a path regex cannot tell GCS chunk writes
from metadata writes: filter those by method. Per matching request the proxy draws
one number from ``random.Random(seed)`` and walks the matching rules in order with
cumulative probability, so a run with a given seed and request order is
reproducible. Kinds (see `FAULT_KINDS`):

``status_503``
    ``503`` with the S3 ``SlowDown`` XML body (GCS JSON with ``error_format="gcs"``,
    Azure's ``ServerBusy`` with ``"azure"``).
``status_429``
    ``429`` with a GCS-style JSON ``rateLimitExceeded`` body (XML with ``"s3"``; with
    ``"azure"`` a bare 429 without a storage error code, as a gateway sends it).
``status_500``
    ``500`` with the S3 ``InternalError`` XML body (GCS JSON with ``"gcs"``, Azure's
    ``InternalError`` with ``"azure"``).
``reset``
    Read the request (and its body), then close with SO_LINGER 0: the client gets a
    TCP RST and no response (``ServerDisconnectedError`` / ``ClientOSError``).
``reset_mid_body``
    Forward the request; send the response head and half of its body (half of the
    head when the body is empty), wait until those bytes left the socket, then RST.
``corrupt_body``
    Forward the request with the first byte of its body inverted (a body changed in
    flight, which TCP's checksum can miss): the upstream sees the head as sent and a
    body of the declared length, one byte wrong.
``stall``
    Hold the request ``stall_seconds`` before forwarding it (a stalled server). If
    the client hung up meanwhile the request is dropped, never reaching the upstream
    (``stall_abandoned``): a timed-out PUT does not land later behind a retry.

Throttling
----------
``throttle_in_flight`` (K) and ``throttle_rate`` (R requests/s, a token bucket holding
``throttle_burst`` tokens, default R / 10) make the proxy an overloaded object store: a
request that arrives (after ``latency_ms``) while K requests are being served, or when
the bucket is empty, is refused at once with ``503 SlowDown`` (S3 XML; ``429
rateLimitExceeded`` JSON with ``error_format="gcs"``; ``503 ServerBusy`` with
``"azure"``), counted as ``injected["throttle"]``,
and never reaches the upstream; a refused request takes no token. The counters'
``timeline`` holds ``[served, refused]`` per second since the throttle was configured.

Status faults answer without touching the upstream and keep the connection alive.
``latency_ms`` delays every request (not a fault, not filtered); a client that hangs
up during the delay ends its request there (``client_disconnects``). ``fail_first_n``
caps the number of injected faults: with probability 1.0 exactly the first N
matching requests are faulted and everything after passes.

Waves
-----
``wave`` (N) holds each request whose target matches ``wave_path`` (every request if
None) until N of them are held at once, then lets them all go, and every later one
with them (``counters.waves``); a request that waits ``wave_seconds`` without that goes
on alone. A test that says "these N reads are in flight together" asserts
``peak_in_flight >= N`` behind a wave: a client that issues them one after another
fails it, while a host that stalls the client for a while does not (a fixed latency
only covers stalls shorter than itself).

Fixtures
--------
Plain fixture functions for ``tests/conftest.py`` to import (no ``pytest_plugins``):
``fault_proxy_factory``, ``s3_fault_proxy_server`` / ``s3_fault_proxy`` (in front of
``seaweedfs``) and ``gcs_fault_proxy_server`` / ``gcs_fault_proxy`` (in front of
``fake_gcs``). The ``*_server`` fixtures are session-scoped processes; the
function-scoped ones clear faults and counters before and after each test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import fcntl
import json
import os
import random
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest
from servers import terminate

if TYPE_CHECKING:
    from servers import S3Server

FAULT_KINDS = ("status_503", "status_429", "status_500", "reset", "reset_mid_body", "stall", "corrupt_body")
"""Every fault kind, in the order ``configure`` keyword arguments are turned into rules."""

STATUS_FAULTS = {"status_503": 503, "status_429": 429, "status_500": 500}

ERROR_FORMATS = ("auto", "s3", "gcs", "azure")
"""Body formats of injected error statuses (`FaultConfig.error_format`)."""

CHUNK_KEYS = r"/\d+(?:[./]\d+)*(?:[?&#]|$)"
"""``path`` regex matching Zarr v2 chunk keys (``0``, ``3.1.4``, ``3/1/4``) in S3 paths
(``/bucket/a/0.0``) and GCS downloads (``/download/storage/v1/b/B/o/a%2F0.0?alt=media``)."""

METADATA_KEYS = r"/\.z(?:array|attrs|group|metadata)(?:[?&#]|$)"
"""``path`` regex matching Zarr v2 metadata documents (``.zarray``, ``.zattrs``, ...)."""

S3_SLOWDOWN_BODY = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
S3_INTERNAL_ERROR_BODY = (
    b"<Error><Code>InternalError</Code>"
    b"<Message>We encountered an internal error. Please try again.</Message></Error>"
)
S3_TOO_MANY_REQUESTS_BODY = (
    b"<Error><Code>TooManyRequests</Code><Message>Please reduce your request rate.</Message></Error>"
)


def _gcs_error(code: int, reason: str, message: str) -> bytes:
    error = {
        "code": code,
        "message": message,
        "errors": [{"message": message, "domain": "global", "reason": reason}],
    }
    return json.dumps({"error": error}).encode()


GCS_RATE_LIMIT_BODY = _gcs_error(
    429,
    "rateLimitExceeded",
    "The rate of change requests to the object exceeds the rate limit. "
    "Please reduce the rate of create, update, and delete requests.",
)
GCS_BACKEND_ERROR_BODY = _gcs_error(503, "backendError", "Backend Error")
GCS_INTERNAL_ERROR_BODY = _gcs_error(500, "backendError", "Internal Error")


def _azure_error(code: str, message: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{message}\n'
        f"RequestId:00000000-0000-0000-0000-000000000000\nTime:2026-01-01T00:00:00.0000000Z</Message></Error>"
    ).encode()


#: Azure Storage's answers (code in the body and in ``x-ms-error-code``, as the service
#: sends them): ``ServerBusy`` is its "slow down" (a 503), ``InternalError`` a plain 500.
#: A 429 has no storage code: the service itself throttles with 503, a gateway with 429.
AZURE_ERRORS: dict[int, tuple[str | None, bytes]] = {
    503: ("ServerBusy", _azure_error("ServerBusy", "Operations per second is over the account limit.")),
    500: ("InternalError", _azure_error("InternalError", "The server encountered an internal error.")),
    429: (None, b""),
}

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}

START_TIMEOUT = 20.0  # seconds for the child to report its ports
STOP_TIMEOUT = 5.0  # seconds of SIGTERM grace before SIGKILL
_ADMIN_TIMEOUT = 10.0
_IO_CHUNK = 256 * 1024
_STREAM_LIMIT = 1024 * 1024  # StreamReader buffer: request/response heads must fit
_MAX_IDLE_UPSTREAM = 512
_SENT_WAIT = 0.25  # seconds reset_mid_body waits for its partial bytes to leave the socket


# ---------------------------------------------------------------------- configuration
@dataclasses.dataclass(frozen=True)
class FaultRule:
    """Inject ``kind`` into a fraction ``probability`` of the requests it matches.

    Parameters
    ----------
    kind : str
        One of `FAULT_KINDS`.
    probability : float
        In ``[0, 1]``.
    methods : tuple of str, optional
        Only requests with these HTTP methods (upper case); ``None`` means all.
    path : str, optional
        Only requests whose percent-decoded target (path and query) matches this
        regex (``re.search``); ``None`` means all.
    """

    kind: str
    probability: float
    methods: tuple[str, ...] | None = None
    path: str | None = None

    def validate(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if not 0.0 <= float(self.probability) <= 1.0:
            raise ValueError(f"{self.kind}: probability {self.probability!r} is not in [0, 1]")
        if self.path is not None:
            try:
                re.compile(self.path)
            except re.error as exc:
                raise ValueError(f"{self.kind}: bad path regex {self.path!r}: {exc}") from exc

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "probability": self.probability,
            "methods": list(self.methods) if self.methods is not None else None,
            "path": self.path,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FaultRule:
        unknown = set(data) - {"kind", "probability", "methods", "path"}
        if unknown:
            raise ValueError(f"unknown rule fields {sorted(unknown)}")
        methods = data.get("methods")
        return cls(
            kind=str(data["kind"]),
            probability=float(data["probability"]),
            methods=tuple(str(m).upper() for m in methods) if methods is not None else None,
            path=data.get("path"),
        )


@dataclasses.dataclass(frozen=True)
class FaultConfig:
    """Everything the proxy does besides forwarding (the admin API's JSON document).

    Attributes
    ----------
    rules : tuple of FaultRule
        Tried in order, cumulative probability, one random draw per matching request.
    seed : int
        Seed of the fault decisions (reset by every ``configure``).
    fail_first_n : int, optional
        Stop injecting after this many faults (``None``: no cap).
    stall_seconds : float
        How long ``stall`` holds a request.
    latency_ms : float
        Added to every request before it is handled (not a fault).
    retry_after : float, optional
        Send ``Retry-After`` (seconds) with injected 429 and 503 responses.
    error_format : str
        ``"auto"`` (503/500 S3 XML, 429 GCS JSON), ``"s3"`` (all XML), ``"gcs"`` (all JSON)
        or ``"azure"`` (Azure Storage's XML and ``x-ms-error-code``).
    throttle_in_flight : int, optional
        Refuse requests arriving while this many are being served (see "Throttling").
    throttle_rate : float, optional
        Refuse requests beyond this many per second (a token bucket).
    throttle_burst : float, optional
        Tokens the bucket holds (default ``throttle_rate / 10``, at least 1).
    wave : int, optional
        Hold requests matching ``wave_path`` until this many are held (see "Waves").
    wave_path : str, optional
        Target regex of the held requests (``CHUNK_KEYS``, ...; None: all).
    wave_seconds : float
        Longest hold of one request.
    """

    rules: tuple[FaultRule, ...] = ()
    seed: int = 0
    fail_first_n: int | None = None
    stall_seconds: float = 5.0
    latency_ms: float = 0.0
    retry_after: float | None = None
    error_format: str = "auto"
    throttle_in_flight: int | None = None
    throttle_rate: float | None = None
    throttle_burst: float | None = None
    wave: int | None = None
    wave_path: str | None = None
    wave_seconds: float = 5.0

    def validate(self) -> None:
        for rule in self.rules:
            rule.validate()
        if self.fail_first_n is not None and self.fail_first_n < 0:
            raise ValueError(f"fail_first_n must be >= 0, got {self.fail_first_n}")
        if self.stall_seconds < 0 or self.latency_ms < 0:
            raise ValueError("stall_seconds and latency_ms must be >= 0")
        if self.error_format not in ERROR_FORMATS:
            raise ValueError(f"error_format must be one of {ERROR_FORMATS}, got {self.error_format!r}")
        if self.wave_seconds < 0:
            raise ValueError("wave_seconds must be >= 0")
        for name in ("throttle_in_flight", "throttle_rate", "throttle_burst", "wave"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["rules"] = [rule.to_json() for rule in self.rules]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FaultConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown config fields {sorted(unknown)}")
        kwargs = dict(data)
        kwargs["rules"] = tuple(FaultRule.from_json(r) for r in data.get("rules", ()))
        config = cls(**kwargs)
        config.validate()
        return config


def make_config(
    *,
    methods: Iterable[str] | None = None,
    path: str | None = None,
    rules: Iterable[FaultRule] = (),
    seed: int = 0,
    fail_first_n: int | None = None,
    stall_seconds: float = 5.0,
    latency_ms: float = 0.0,
    retry_after: float | None = None,
    error_format: str = "auto",
    throttle_in_flight: int | None = None,
    throttle_rate: float | None = None,
    throttle_burst: float | None = None,
    wave: int | None = None,
    wave_path: str | None = None,
    wave_seconds: float = 5.0,
    **faults: float,
) -> FaultConfig:
    """Build a `FaultConfig` from ``kind=probability`` keywords (see `FaultProxy.configure`)."""
    unknown = set(faults) - set(FAULT_KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; expected some of {FAULT_KINDS}")
    method_tuple = tuple(m.upper() for m in methods) if methods is not None else None
    keyword_rules = tuple(
        FaultRule(kind, float(faults[kind]), method_tuple, path) for kind in FAULT_KINDS if faults.get(kind)
    )
    config = FaultConfig(
        rules=keyword_rules + tuple(rules),
        seed=seed,
        fail_first_n=fail_first_n,
        stall_seconds=stall_seconds,
        latency_ms=latency_ms,
        retry_after=retry_after,
        error_format=error_format,
        throttle_in_flight=throttle_in_flight,
        throttle_rate=throttle_rate,
        throttle_burst=throttle_burst,
        wave=wave,
        wave_path=wave_path,
        wave_seconds=wave_seconds,
    )
    config.validate()
    return config


# ---------------------------------------------------------------------- HTTP/1.1 plumbing (child)
class _Abort(Exception):
    """Drop the client connection without a response (already counted)."""


@dataclasses.dataclass
class _Head:
    """A parsed request or response head; ``raw`` is what gets forwarded."""

    raw: bytes
    start: list[str]  # request: method, target, version; response: version, status, reason
    headers: list[tuple[str, str]]  # (lower-case name, value)

    def get(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def tokens(self, name: str) -> set[str]:
        return {
            t.strip().lower()
            for key, value in self.headers
            if key == name
            for t in value.split(",")
            if t.strip()
        }

    def framing(self) -> tuple[str, int]:
        """``("chunked", 0)``, ``("length", n)`` or ``("none", 0)`` for a request."""
        if "chunked" in self.tokens("transfer-encoding"):
            return "chunked", 0
        length = self.get("content-length")
        if length is not None:
            return "length", int(length.strip())
        return "none", 0

    def keep_alive(self) -> bool:
        version = self.start[0] if self.start[0].startswith("HTTP/") else self.start[2]
        connection = self.tokens("connection")
        if version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


def _parse_head(raw: bytes) -> _Head:
    lines = raw.decode("latin-1").split("\r\n")
    start = lines[0].split(" ", 2)
    if len(start) < 2:
        raise ValueError(f"malformed start line {lines[0]!r}")
    if len(start) == 2:
        start.append("")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line!r}")
        headers.append((name.strip().lower(), value.strip()))
    return _Head(raw, start, headers)


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    """The next head (through the blank line), or ``None`` on a clean EOF between messages."""
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if exc.partial.strip():
            raise ConnectionResetError("connection closed inside a message head") from exc
        return None


async def _copy_exact(reader: asyncio.StreamReader, writer: _Writer, n: int) -> int:
    left = n
    while left > 0:
        data = await reader.read(min(left, _IO_CHUNK))
        if not data:
            raise asyncio.IncompleteReadError(b"", left)
        writer.write(data)
        left -= len(data)
        await writer.drain()
    return n


async def _copy_chunked(reader: asyncio.StreamReader, writer: _Writer) -> int:
    """Relay a chunked body as-is (sizes, extensions, trailers); returns payload bytes."""
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        writer.write(line)
        size = int(line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while True:
                trailer = await reader.readuntil(b"\r\n")
                writer.write(trailer)
                if trailer == b"\r\n":
                    await writer.drain()
                    return total
        await _copy_exact(reader, writer, size + 2)
        total += size


async def _copy_until_eof(reader: asyncio.StreamReader, writer: _Writer) -> int:
    total = 0
    while data := await reader.read(_IO_CHUNK):
        writer.write(data)
        total += len(data)
        await writer.drain()
    return total


class _Writer(Protocol):
    """What the body copiers write to: a ``StreamWriter`` or a `_Sink`."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class _Sink:
    """A writer that discards (draining request bodies of faulted requests)."""

    def write(self, data: bytes) -> None:
        pass

    async def drain(self) -> None:
        pass


class _FlipFirstByte:
    """A writer passing everything on with the first byte inverted (``corrupt_body``)."""

    def __init__(self, writer: _Writer) -> None:
        self.writer = writer
        self.flipped = False

    def write(self, data: bytes) -> None:
        if data and not self.flipped:
            self.flipped = True
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        self.writer.write(data)

    async def drain(self) -> None:
        await self.writer.drain()


async def _copy_body(reader: asyncio.StreamReader, writer: _Writer, framing: tuple[str, int]) -> None:
    kind, n = framing
    if kind == "chunked":
        await _copy_chunked(reader, writer)
    elif kind == "length":
        await _copy_exact(reader, writer, n)
    elif kind == "eof":
        await _copy_until_eof(reader, writer)


def _set_nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _rst(writer: asyncio.StreamWriter) -> None:
    """Close with SO_LINGER 0: the peer gets a TCP RST, not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _wait_sent(writer: asyncio.StreamWriter, within: float) -> None:
    """Wait until the kernel has no unsent/unacknowledged bytes (an RST would discard them)."""
    await writer.drain()
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    deadline = time.monotonic() + within
    buf = bytearray(4)
    while time.monotonic() < deadline:
        try:
            fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, buf)
        except OSError:
            return
        if struct.unpack("i", buf)[0] == 0:
            return
        await asyncio.sleep(0.002)


@dataclasses.dataclass(eq=False)
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


class _Upstream:
    """Keep-alive connections to the upstream server (unbounded; idle ones reused LIFO)."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.idle: list[_Conn] = []
        self.opened = 0

    async def acquire(self, fresh: bool = False) -> tuple[_Conn, bool]:
        while self.idle and not fresh:
            conn = self.idle.pop()
            if conn.reader.at_eof() or conn.reader.exception() is not None or conn.writer.is_closing():
                conn.writer.transport.abort()
                continue
            return conn, True
        reader, writer = await asyncio.open_connection(self.host, self.port, limit=_STREAM_LIMIT)
        _set_nodelay(writer)
        self.opened += 1
        return _Conn(reader, writer), False

    def release(self, conn: _Conn) -> None:
        if len(self.idle) < _MAX_IDLE_UPSTREAM and not conn.writer.is_closing():
            self.idle.append(conn)
        else:
            conn.writer.transport.abort()

    def close(self) -> None:
        for conn in self.idle:
            conn.writer.transport.abort()
        self.idle.clear()


class _Counters:
    """The proxy's counters (``snapshot`` is the admin API's JSON)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.connections_open = 0
        self.reset()

    def reset(self) -> None:
        self.received = 0
        self.forwarded = 0
        self.completed = 0
        self.upstream_errors = 0
        self.client_disconnects = 0
        self.stall_abandoned = 0
        self.connections_accepted = 0
        self.waves = 0
        self.peak_in_flight = self.in_flight
        self.peak_connections = self.connections_open
        self.methods: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.refused_by: Counter[str] = Counter()
        self.restart_timeline()

    def restart_timeline(self) -> None:
        self.timeline: list[list[int]] = []
        self.timeline_start = time.monotonic()

    def tick(self, refused: bool) -> None:
        """Count one throttle decision in this second's ``[served, refused]``."""
        second = int(time.monotonic() - self.timeline_start)
        while len(self.timeline) <= second:
            self.timeline.append([0, 0])
        self.timeline[second][1 if refused else 0] += 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "forwarded": self.forwarded,
            "completed": self.completed,
            "upstream_errors": self.upstream_errors,
            "client_disconnects": self.client_disconnects,
            "stall_abandoned": self.stall_abandoned,
            "in_flight": self.in_flight,
            "peak_in_flight": self.peak_in_flight,
            "connections_open": self.connections_open,
            "peak_connections": self.peak_connections,
            "connections_accepted": self.connections_accepted,
            "waves": self.waves,
            "methods": dict(self.methods),
            "injected": dict(self.injected),
            "statuses": dict(self.statuses),
            "timeline": self.timeline,
            "refused_by": dict(self.refused_by),
        }


class _Throttle:
    """An overloaded server's admission: at most ``in_flight`` requests served at once and
    ``rate`` per second (a token bucket of ``burst`` tokens); None is no limit."""

    def __init__(self, in_flight: int | None, rate: float | None, burst: float | None) -> None:
        self.limit = in_flight
        self.rate = rate
        self.burst = burst if burst is not None else max(1.0, (rate or 0.0) / 10)
        self.tokens = self.burst
        self.refilled = time.monotonic()
        self.serving = 0

    def refuse(self) -> str | None:
        """Why a request arriving now is refused (``"in_flight"``, ``"rate"``), or None: it
        is served (one more being served, one token taken)."""
        if self.limit is not None and self.serving >= self.limit:
            return "in_flight"
        if self.rate is not None:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.refilled) * self.rate)
            self.refilled = now
            if self.tokens < 1:
                return "rate"
            self.tokens -= 1
        self.serving += 1
        return None

    def done(self) -> None:
        self.serving -= 1


class _Proxy:
    """The proxy engine: one instance per child process."""

    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname:
            raise ValueError(f"upstream must be an http://host:port URL, got {upstream!r}")
        if parsed.path not in ("", "/"):
            raise ValueError(f"upstream must have no path (requests are forwarded as-is), got {upstream!r}")
        self.upstream = _Upstream(parsed.hostname, parsed.port or 80)
        self.counters = _Counters()
        self.config = FaultConfig()
        self._rules: list[tuple[FaultRule, re.Pattern[str] | None]] = []
        self._rng = random.Random(0)
        self._faults_left: int | None = None
        self._throttle: _Throttle | None = None
        self._wave_path: re.Pattern[str] | None = None
        self._wave_held = 0
        self._wave_released = asyncio.Event()
        self.set_config(FaultConfig())

    # ------------------------------------------------------------------ control
    def set_config(self, config: FaultConfig) -> None:
        self.config = config
        self._rules = [(r, re.compile(r.path) if r.path is not None else None) for r in config.rules]
        self._rng = random.Random(config.seed)
        self._faults_left = config.fail_first_n
        self._wave_path = re.compile(config.wave_path) if config.wave_path is not None else None
        self._wave_released.set()  # requests held under the old configuration go on
        self._wave_released = asyncio.Event()
        self._wave_held = 0
        if config.throttle_in_flight is None and config.throttle_rate is None:
            self._throttle = None
        else:
            self._throttle = _Throttle(config.throttle_in_flight, config.throttle_rate, config.throttle_burst)
            self.counters.restart_timeline()

    def _decide(self, method: str, target: str) -> str | None:
        if not self._rules or self._faults_left == 0:
            return None
        decoded: str | None = None
        matching = []
        for rule, pattern in self._rules:
            if rule.methods is not None and method not in rule.methods:
                continue
            if pattern is not None:
                if decoded is None:
                    decoded = urllib.parse.unquote(target)
                if not pattern.search(decoded):
                    continue
            matching.append(rule)
        if not matching:
            return None
        draw = self._rng.random()
        cumulative = 0.0
        for rule in matching:
            cumulative += rule.probability
            if draw < cumulative:
                if self._faults_left is not None:
                    self._faults_left -= 1
                return rule.kind
        return None

    # ------------------------------------------------------------------ client side
    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        c = self.counters
        c.connections_accepted += 1
        c.connections_open += 1
        c.peak_connections = max(c.peak_connections, c.connections_open)
        _set_nodelay(writer)
        try:
            while True:
                try:
                    raw = await _read_head(reader)
                except asyncio.LimitOverrunError:
                    await self._reply(writer, 431, b"request head too large\n", "text/plain", keep=False)
                    break
                if raw is None:
                    break
                if not await self._handle(raw, reader, writer):
                    break
        except _Abort:
            pass
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            c.client_disconnects += 1
        except Exception as exc:  # a proxy bug or unparsable upstream response: log, drop
            print(f"fault proxy: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            writer.transport.abort()
        finally:
            c.connections_open -= 1
            if not writer.transport.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, raw: bytes, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; True if the client connection may carry another."""
        c = self.counters
        try:
            req = _parse_head(raw)
            framing = req.framing()
        except ValueError as exc:
            await self._reply(writer, 400, f"bad request: {exc}\n".encode(), "text/plain", keep=False)
            return False
        method, target = req.start[0].upper(), req.start[1]
        c.received += 1
        c.methods[method] += 1
        c.in_flight += 1
        c.peak_in_flight = max(c.peak_in_flight, c.in_flight)
        try:
            config = self.config
            if config.latency_ms and not await _wait_unless_gone(config.latency_ms / 1000, reader, writer):
                # A real server stops work on a request whose client hung up: so does the
                # proxy, so in_flight shows what the client still waits for.
                c.client_disconnects += 1
                raise _Abort
            if config.wave is not None and not await self._join_wave(config, target, reader, writer):
                c.client_disconnects += 1
                raise _Abort
            throttle = self._throttle
            if throttle is not None:
                reason = throttle.refuse()
                c.tick(refused=reason is not None)
                if reason is not None:
                    c.injected["throttle"] += 1
                    c.refused_by[reason] += 1
                    # Each store's own "slow down": GCS 429 rateLimitExceeded, S3 503
                    # SlowDown, Azure 503 ServerBusy.
                    refusal = "status_429" if config.error_format == "gcs" else "status_503"
                    return await self._status_fault(refusal, req, framing, reader, writer)
                try:
                    return await self._serve(method, target, req, framing, reader, writer)
                finally:
                    throttle.done()
            return await self._serve(method, target, req, framing, reader, writer)
        finally:
            c.in_flight -= 1

    async def _join_wave(
        self, config: FaultConfig, target: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Hold a matching request until ``config.wave`` are held (see "Waves"); False if
        its client hung up meanwhile."""
        released = self._wave_released
        if released.is_set() or config.wave is None:
            return True
        if self._wave_path is not None and not self._wave_path.search(urllib.parse.unquote(target)):
            return True
        self._wave_held += 1
        if self._wave_held >= config.wave:
            self.counters.waves += 1
            released.set()
            return True
        deadline = time.monotonic() + config.wave_seconds
        try:
            while not released.is_set() and (left := deadline - time.monotonic()) > 0:
                if _client_gone(reader, writer):
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(released.wait(), min(left, 0.01))
            return not _client_gone(reader, writer)
        finally:
            if released is self._wave_released and not released.is_set():
                self._wave_held -= 1

    async def _serve(
        self,
        method: str,
        target: str,
        req: _Head,
        framing: tuple[str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Inject the configured fault, if any, or forward the request."""
        c = self.counters
        kind = self._decide(method, target)
        if kind is not None:
            c.injected[kind] += 1
        if kind in STATUS_FAULTS:
            return await self._status_fault(kind, req, framing, reader, writer)
        if kind == "reset":
            if not _expects_continue(req):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(_copy_body(reader, _Sink(), framing), 10)
            _rst(writer)
            raise _Abort
        if kind == "stall":
            await asyncio.sleep(self.config.stall_seconds)
            if _client_gone(reader, writer):
                c.stall_abandoned += 1
                raise _Abort
        return await self._forward(
            req,
            framing,
            reader,
            writer,
            reset_mid_body=kind == "reset_mid_body",
            corrupt=kind == "corrupt_body",
        )

    async def _status_fault(
        self,
        kind: str,
        req: _Head,
        framing: tuple[str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        status = STATUS_FAULTS[kind]
        fmt = self.config.error_format
        if fmt == "auto":
            fmt = "gcs" if status == 429 else "s3"
        extra = {"X-Fault-Proxy": kind}
        if fmt == "s3":
            body = {503: S3_SLOWDOWN_BODY, 500: S3_INTERNAL_ERROR_BODY, 429: S3_TOO_MANY_REQUESTS_BODY}[
                status
            ]
            content_type = "application/xml"
        elif fmt == "azure":
            code, body = AZURE_ERRORS[status]
            content_type = "application/xml"
            if code is not None:
                extra["x-ms-error-code"] = code
        else:
            body = {503: GCS_BACKEND_ERROR_BODY, 500: GCS_INTERNAL_ERROR_BODY, 429: GCS_RATE_LIMIT_BODY}[
                status
            ]
            content_type = "application/json; charset=UTF-8"
        # The body must be consumed to keep the connection in step; a client waiting for
        # "100 Continue" never sends it, so answer and close instead.
        keep = req.keep_alive() and not _expects_continue(req)
        if keep:
            await _copy_body(reader, _Sink(), framing)
        if self.config.retry_after is not None and status in (429, 503):
            extra["Retry-After"] = f"{self.config.retry_after:g}"
        await self._reply(
            writer, status, body, content_type, keep=keep, extra=extra, head=req.start[0].upper() == "HEAD"
        )
        return keep

    async def _reply(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        *,
        keep: bool,
        extra: Mapping[str, str] | None = None,
        head: bool = False,
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            f"Connection: {'keep-alive' if keep else 'close'}",
            *(f"{k}: {v}" for k, v in (extra or {}).items()),
        ]
        # A response to HEAD has the headers of the full response but never a body (RFC 9110
        # section 9.3.2): a body would be read as the start of the next response.
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else body))
        await writer.drain()
        self.counters.statuses[str(status)] += 1
        self.counters.completed += 1

    # ------------------------------------------------------------------ upstream side
    async def _forward(
        self,
        req: _Head,
        framing: tuple[str, int],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        reset_mid_body: bool,
        corrupt: bool = False,
    ) -> bool:
        c = self.counters
        has_body = framing[0] != "none" and not (framing[0] == "length" and framing[1] == 0)
        conn: _Conn | None = None
        body_task: asyncio.Task[None] | None = None
        try:
            head: _Head | None = None
            for attempt in range(2):
                try:
                    conn, reused = await self.upstream.acquire(fresh=attempt > 0)
                except OSError as exc:
                    return await self._bad_gateway(writer, exc)
                conn.writer.write(req.raw)
                if attempt == 0:
                    c.forwarded += 1
                if has_body:
                    flip = corrupt and framing[0] == "length"  # chunked: the size lines stay intact
                    target: _Writer = _FlipFirstByte(conn.writer) if flip else conn.writer
                    body_task = asyncio.create_task(_copy_body(reader, target, framing))
                try:
                    head = await self._response_head(conn, body_task, writer)
                    break
                except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
                    # A reused keep-alive connection the upstream closed meanwhile: safe to
                    # retry once on a fresh one, but only without a (consumed) body.
                    conn.writer.transport.abort()
                    conn = None
                    if body_task is not None or not reused:
                        return await self._bad_gateway(writer, exc)
            assert head is not None and conn is not None
            status = int(head.start[1])
            no_body = req.start[0].upper() == "HEAD" or status in (204, 304) or 100 <= status < 200
            if no_body:
                resp_framing: tuple[str, int] = ("none", 0)
            else:
                resp_framing = head.framing()
                if resp_framing[0] == "none":
                    resp_framing = ("eof", 0)
            c.statuses[str(status)] += 1
            if reset_mid_body:
                await self._partial_then_reset(head, resp_framing, conn, writer)
                conn = None
                raise _Abort
            writer.write(head.raw)
            try:
                await _copy_body(conn.reader, writer, resp_framing)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
                # The upstream broke off mid-body: pass the breakage on.
                c.upstream_errors += 1
                conn.writer.transport.abort()
                conn = None
                _rst(writer)
                raise _Abort from exc
            await writer.drain()
            c.completed += 1
            body_ok = True
            if body_task is not None:
                if not body_task.done():
                    await asyncio.wait({body_task}, timeout=0 if _expects_continue(req) else 1.0)
                body_ok = body_task.done() and not body_task.cancelled() and body_task.exception() is None
            upstream_keep = body_ok and head.keep_alive() and resp_framing[0] != "eof" and req.keep_alive()
            if upstream_keep:
                self.upstream.release(conn)
            else:
                conn.writer.transport.abort()
            conn = None
            return body_ok and req.keep_alive() and head.keep_alive() and resp_framing[0] != "eof"
        finally:
            if body_task is not None and not body_task.done():
                body_task.cancel()
                with contextlib.suppress(BaseException):
                    await body_task
            if conn is not None:
                conn.writer.transport.abort()

    async def _response_head(
        self, conn: _Conn, body_task: asyncio.Task[None] | None, writer: asyncio.StreamWriter
    ) -> _Head:
        """The final response head, relaying interim ``1xx`` heads (``100 Continue``) to the client."""
        while True:
            read = asyncio.ensure_future(_read_head(conn.reader))
            if body_task is not None and not body_task.done():
                await asyncio.wait({read, body_task}, return_when=asyncio.FIRST_COMPLETED)
                if body_task.done() and body_task.exception() is not None and not read.done():
                    read.cancel()
                    with contextlib.suppress(BaseException):
                        await read
                    # The client broke off its request body.
                    self.counters.client_disconnects += 1
                    raise _Abort
            raw = await read
            if raw is None:
                raise ConnectionResetError("upstream closed the connection before responding")
            head = _parse_head(raw)
            status = int(head.start[1])
            if 100 <= status < 200 and status != 101:
                writer.write(raw)
                await writer.drain()
                continue
            return head

    async def _bad_gateway(self, writer: asyncio.StreamWriter, exc: BaseException) -> bool:
        self.counters.upstream_errors += 1
        message = f"fault proxy: upstream error: {type(exc).__name__}: {exc}\n".encode()
        await self._reply(writer, 502, message, "text/plain", keep=False)
        return False

    async def _partial_then_reset(
        self, head: _Head, framing: tuple[str, int], conn: _Conn, writer: asyncio.StreamWriter
    ) -> None:
        kind, length = framing
        if kind == "length" and length > 0:
            writer.write(head.raw)
            part = await conn.reader.readexactly(max(1, length // 2))
            writer.write(part)
        elif kind in ("chunked", "eof"):
            writer.write(head.raw)
            part = await conn.reader.read(_IO_CHUNK)
            writer.write(part[: max(1, len(part) // 2)])
        else:  # nothing to cut in half but the head itself
            writer.write(head.raw[: len(head.raw) // 2])
        conn.writer.transport.abort()
        with contextlib.suppress(ConnectionError, OSError):
            await _wait_sent(writer, _SENT_WAIT)
        _rst(writer)


def _client_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """The client hung up (FIN or RST), even if part of its request is still buffered."""
    # StreamReader._eof: set by the FIN whether or not buffered bytes remain
    # (at_eof() also wants an empty buffer, which a PUT body sitting there defeats).
    return bool(getattr(reader, "_eof", False)) or reader.exception() is not None or writer.is_closing()


async def _wait_unless_gone(
    seconds: float, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    """Sleep ``seconds``; False as soon as the client hangs up (polled every 10 ms)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        if _client_gone(reader, writer):
            return False
        await asyncio.sleep(min(left, 0.01))
    return not _client_gone(reader, writer)


def _expects_continue(req: _Head) -> bool:
    return (req.get("expect") or "").lower() == "100-continue"


# ---------------------------------------------------------------------- child process
async def _admin(proxy: _Proxy, request: Any) -> Any:
    from aiohttp import web

    path = request.path
    if path == "/health":
        return web.json_response({"ok": True})
    if path == "/counters" and request.method == "GET":
        return web.json_response(proxy.counters.snapshot())
    if path == "/counters/reset" and request.method == "POST":
        proxy.counters.reset()
        return web.json_response(proxy.counters.snapshot())
    if path == "/config" and request.method == "GET":
        return web.json_response(proxy.config.to_json())
    if path == "/config" and request.method == "PUT":
        try:
            config = FaultConfig.from_json(await request.json())
        except (ValueError, TypeError, KeyError) as exc:
            return web.json_response({"error": f"{type(exc).__name__}: {exc}"}, status=400)
        proxy.set_config(config)
        return web.json_response(config.to_json())
    if path == "/reset" and request.method == "POST":
        proxy.set_config(FaultConfig())
        proxy.counters.reset()
        return web.json_response({"ok": True})
    return web.json_response({"error": f"no route {request.method} {path}"}, status=404)


async def _run_child(upstream: str, host: str, port: int, admin_port: int) -> None:
    from aiohttp import web

    proxy = _Proxy(upstream)
    server = await asyncio.start_server(proxy.serve_client, host, port, limit=_STREAM_LIMIT, backlog=1024)
    app = web.Application()

    async def handle(request: web.Request) -> web.StreamResponse:
        response: web.StreamResponse = await _admin(proxy, request)
        return response

    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    admin_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    admin_sock.bind((host, admin_port))
    await web.SockSite(runner, admin_sock).start()
    ports = {
        "port": server.sockets[0].getsockname()[1],
        "admin_port": admin_sock.getsockname()[1],
        "pid": os.getpid(),
    }
    sys.stdout.write(json.dumps(ports) + "\n")
    sys.stdout.flush()

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin() -> None:
        # Parent gone (its end of our stdin closed): exit rather than linger.
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(stop.set)

    loop.run_in_executor(None, watch_stdin)
    await stop.wait()
    server.close()
    proxy.upstream.close()
    await runner.cleanup()
    os._exit(0)  # the stdin watcher thread blocks in read(); do not wait for it


def main(argv: list[str] | None = None) -> None:
    """Child entry point: ``python tests/fault_proxy.py --upstream http://127.0.0.1:8333``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="http://host:port of the real server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--admin-port", type=int, default=0)
    args = parser.parse_args(argv)
    asyncio.run(_run_child(args.upstream, args.host, args.port, args.admin_port))


# ---------------------------------------------------------------------- test-side handle
@dataclasses.dataclass(frozen=True)
class ProxyCounters:
    """A snapshot of the proxy's counters.

    Attributes
    ----------
    received : int
        Requests whose head arrived (faulted or not).
    forwarded : int
        Requests sent upstream (a transparent re-send on a stale keep-alive
        connection is not counted twice).
    completed : int
        Responses sent in full to the client (injected status responses included).
    upstream_errors : int
        Upstream unreachable or broke off (the client got a 502 or a reset).
    client_disconnects : int
        Clients that hung up mid-request or mid-response.
    stall_abandoned : int
        Stalled requests dropped because the client had gone.
    in_flight, peak_in_flight : int
        Requests being handled now / at most since the last reset (from head
        received to response sent; includes stalls and latency).
    connections_open, peak_connections, connections_accepted : int
        Client TCP connections now / at most / accepted since the last reset.
    waves : int
        Waves released since the last reset (see "Waves"; 0 when none formed).
    methods : dict
        Requests received per HTTP method.
    injected : dict
        Faults injected per kind (``latency_ms`` is not a fault); ``"throttle"``: requests
        refused by ``throttle_in_flight`` / ``throttle_rate``.
    statuses : dict
        Responses per status code (str), injected and upstream.
    timeline : list of [int, int]
        With a throttle: ``[served, refused]`` per second since it was configured (or the
        counters were reset).
    refused_by : dict
        Throttle refusals by cause: ``"in_flight"`` (K reached) or ``"rate"`` (R reached).
    """

    received: int
    forwarded: int
    completed: int
    upstream_errors: int
    client_disconnects: int
    stall_abandoned: int
    in_flight: int
    peak_in_flight: int
    connections_open: int
    peak_connections: int
    connections_accepted: int
    waves: int
    methods: dict[str, int]
    injected: dict[str, int]
    statuses: dict[str, int]
    timeline: list[list[int]] = dataclasses.field(default_factory=list)
    refused_by: dict[str, int] = dataclasses.field(default_factory=dict)

    @property
    def injected_total(self) -> int:
        """All faults injected, every kind."""
        return sum(self.injected.values())


class FaultProxy:
    """Handle on a fault-injection proxy subprocess in front of ``upstream_url``.

    Use `start` (or the fixtures) to get one; all methods are synchronous
    and safe to call from async tests (the proxy runs in another process).

    Examples
    --------
    >>> proxy = FaultProxy.start(seaweedfs.endpoint_url)  # doctest: +SKIP
    >>> proxy.configure(status_503=1.0, fail_first_n=2, path=CHUNK_KEYS)  # doctest: +SKIP
    >>> options = proxy.storage_options(seaweedfs.storage_options)  # doctest: +SKIP
    >>> store = S3Store(bucket, storage_options=options)  # doctest: +SKIP
    >>> proxy.counters().injected  # doctest: +SKIP
    {'status_503': 2}
    >>> proxy.stop()  # doctest: +SKIP
    """

    def __init__(self, upstream_url: str, *, log_dir: Path | None = None) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self._log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.admin_port = 0
        self.log_path: Path | None = None

    @classmethod
    def start(cls, upstream_url: str, *, log_dir: Path | None = None) -> FaultProxy:
        """Start a proxy process forwarding to ``upstream_url`` (``http://host:port``).

        Returns once it listens (~0.3 s). Raises ``RuntimeError`` with the child's log
        if it does not come up within ``START_TIMEOUT`` seconds.
        """
        proxy = cls(upstream_url, log_dir=log_dir)
        proxy._launch()
        return proxy

    def _launch(self) -> None:
        log_dir = self._log_dir or Path(tempfile.gettempdir())
        fd, log_name = tempfile.mkstemp(prefix="azarr-fault-proxy-", suffix=".log", dir=log_dir)
        self.log_path = Path(log_name)
        argv = [sys.executable, str(Path(__file__).resolve()), "--upstream", self.upstream_url]
        with os.fdopen(fd, "wb") as log:
            # A new session so Ctrl-C aimed at pytest does not hit it; stdin is a pipe whose
            # closing (we exit or die) makes the child exit.
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        line = b""
        deadline = time.monotonic() + START_TIMEOUT
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(timeout=left):
                    break
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                line += chunk
        if not line.endswith(b"\n"):
            self.stop()
            raise RuntimeError(f"fault proxy for {self.upstream_url} did not start; log:\n{self.log_tail()}")
        info = json.loads(line)
        self.port = int(info["port"])
        self.admin_port = int(info["admin_port"])

    # ------------------------------------------------------------------ addresses
    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the endpoint clients use instead of the upstream."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        """Base URL of the JSON admin API (``/config``, ``/counters``, ``/reset``)."""
        return f"http://127.0.0.1:{self.admin_port}"

    def storage_options(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """``base`` fsspec options with ``endpoint_url`` pointing at the proxy."""
        options = dict(base)
        options["endpoint_url"] = self.url
        return options

    # ------------------------------------------------------------------ control
    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.admin_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=_ADMIN_TIMEOUT) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            if exc.code == 400:
                raise ValueError(json.loads(detail).get("error", detail)) from None
            raise RuntimeError(f"fault proxy admin {method} {path}: {exc.code} {detail}") from exc

    def configure(
        self,
        *,
        methods: Iterable[str] | None = None,
        path: str | None = None,
        rules: Iterable[FaultRule] = (),
        seed: int = 0,
        fail_first_n: int | None = None,
        stall_seconds: float = 5.0,
        latency_ms: float = 0.0,
        retry_after: float | None = None,
        error_format: str = "auto",
        throttle_in_flight: int | None = None,
        throttle_rate: float | None = None,
        throttle_burst: float | None = None,
        wave: int | None = None,
        wave_path: str | None = None,
        wave_seconds: float = 5.0,
        **faults: float,
    ) -> FaultConfig:
        """Replace the fault configuration (counters are kept; see `reset_counters`).

        Parameters
        ----------
        methods, path : optional
            Restrict the keyword faults to these HTTP methods / a target regex
            (`CHUNK_KEYS`, `METADATA_KEYS`).
        rules : iterable of FaultRule
            Extra rules with their own filters, tried after the keyword faults.
        seed : int
            Seed for the per-request draws (the sequence restarts on every call).
        fail_first_n : int, optional
            Inject at most this many faults, then pass everything.
        stall_seconds : float
            Hold time of ``stall``.
        latency_ms : float
            Delay added to every request (not a fault; ignores ``methods``/``path``).
        retry_after : float, optional
            ``Retry-After`` seconds on injected 429/503.
        error_format : {"auto", "s3", "gcs", "azure"}
            Body format of injected error statuses.
        throttle_in_flight, throttle_rate, throttle_burst : optional
            Refuse requests beyond K being served or R per second (a bucket of ``burst``
            tokens) with the format's throttling answer (see the module's "Throttling").
        wave, wave_path, wave_seconds : optional
            Hold requests matching ``wave_path`` until ``wave`` of them are held, then
            release them together (at most ``wave_seconds`` each; the module's "Waves").
        **faults : float
            ``kind=probability`` for kinds in `FAULT_KINDS`, e.g. ``status_503=0.2``.

        Returns
        -------
        FaultConfig
            The configuration now in force.

        Raises
        ------
        ValueError
            Unknown fault kind, probability outside ``[0, 1]``, bad regex, ...
        """
        config = make_config(
            methods=methods,
            path=path,
            rules=rules,
            seed=seed,
            fail_first_n=fail_first_n,
            stall_seconds=stall_seconds,
            latency_ms=latency_ms,
            retry_after=retry_after,
            error_format=error_format,
            throttle_in_flight=throttle_in_flight,
            throttle_rate=throttle_rate,
            throttle_burst=throttle_burst,
            wave=wave,
            wave_path=wave_path,
            wave_seconds=wave_seconds,
            **faults,
        )
        return FaultConfig.from_json(self._call("PUT", "/config", config.to_json()))

    def clear_faults(self) -> None:
        """No faults, no latency (counters are kept)."""
        self._call("PUT", "/config", FaultConfig().to_json())

    def config(self) -> FaultConfig:
        """The configuration now in force."""
        return FaultConfig.from_json(self._call("GET", "/config"))

    def counters(self) -> ProxyCounters:
        """A snapshot of the counters."""
        return ProxyCounters(**self._call("GET", "/counters"))

    def reset_counters(self) -> None:
        """Zero the counters (peaks restart from the current in-flight values)."""
        self._call("POST", "/counters/reset")

    def reset(self) -> None:
        """Clear faults and zero counters (what the function-scoped fixtures do)."""
        self._call("POST", "/reset")

    # ------------------------------------------------------------------ lifecycle
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, nbytes: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-nbytes:].decode("utf-8", "replace") if self.log_path else ""
        except OSError:
            return "<no log>"

    def stop(self) -> None:
        """SIGTERM the child (by PID), SIGKILL after ``STOP_TIMEOUT`` s; remove its log."""
        proc = self.proc
        if proc is not None:
            terminate(proc, STOP_TIMEOUT)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"FaultProxy({self.url} -> {self.upstream_url})"


# ---------------------------------------------------------------------- fixtures
@pytest.fixture
def fault_proxy_factory() -> Iterator[Callable[[str], FaultProxy]]:
    """``make(upstream_url) -> FaultProxy``: proxies in front of any server, stopped at teardown."""
    made: list[FaultProxy] = []

    def make(upstream_url: str) -> FaultProxy:
        proxy = FaultProxy.start(upstream_url)
        made.append(proxy)
        return proxy

    yield make
    for proxy in made:
        proxy.stop()


@pytest.fixture(scope="session")
def s3_fault_proxy_server(seaweedfs: S3Server) -> Iterator[FaultProxy]:
    """One proxy process in front of ``seaweedfs`` for the session (use ``s3_fault_proxy``)."""
    with FaultProxy.start(seaweedfs.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def s3_fault_proxy(s3_fault_proxy_server: FaultProxy) -> Iterator[FaultProxy]:
    """The SeaweedFS proxy with no faults and zeroed counters; cleared again afterwards.

    Point S3 clients at it with
    ``storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)``.
    """
    s3_fault_proxy_server.reset()
    yield s3_fault_proxy_server
    s3_fault_proxy_server.reset()


@pytest.fixture(scope="session")
def gcs_fault_proxy_server(fake_gcs: Any) -> Iterator[FaultProxy]:
    """One proxy process in front of ``fake_gcs`` (anything with ``.endpoint_url``)."""
    with FaultProxy.start(fake_gcs.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def gcs_fault_proxy(gcs_fault_proxy_server: FaultProxy) -> Iterator[FaultProxy]:
    """The fake-gcs-server proxy with no faults and zeroed counters; cleared again afterwards.

    Configure with ``error_format="gcs"`` so injected 500/503 carry JSON bodies as GCS
    sends them. Resumable uploads would bypass it: fake-gcs-server's upload session
    URLs point at its ``-external-url``, not at the proxy.
    """
    gcs_fault_proxy_server.reset()
    yield gcs_fault_proxy_server
    gcs_fault_proxy_server.reset()


if __name__ == "__main__":
    main()
