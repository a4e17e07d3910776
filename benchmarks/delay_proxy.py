"""A user-space TCP proxy that delays each direction by D ms: a cloud-like path on loopback.

This kernel has no ``netem`` qdisc, so latency is injected here. Every byte read
from one side is written to the other side ``D`` ms later; reading goes on while
earlier bytes wait, so the delay is *pipelined*: it adds latency (one round trip
costs ``2 D``) without capping bandwidth. Connection set-up costs a round trip as
it does over a real network: a client's first bytes reach the server ``3 D``
after it connected (SYN, SYN-ACK, then the data), so clients that do not reuse
connections pay for it. Per connection and direction at most
`HIGH_WATER` bytes wait in the delay line before the proxy stops reading
(a receive window: ``HIGH_WATER / D`` = 800 MiB/s per connection at 20 ms,
above anything one connection does here).

The proxy also *counts* HTTP/1.1 requests without touching them: the
client-to-server stream is parsed just enough to find request heads
(``Content-Length`` and ``chunked`` bodies are skipped, not copied), so a
benchmark can assert that a consolidated open is exactly one request.

Run as a subprocess (its own interpreter lock and core, so it does not steal
CPU from the client under test)::

    python benchmarks/delay_proxy.py --upstream 127.0.0.1:8333 --delay-ms 20

Over HTTPS there are two ways to run it:

- ``--upstream https://host:port`` relays an upstream that does TLS itself (SeaweedFS's
  S3 gateway with a certificate): bytes pass through encrypted, so the proxy costs what
  it costs over HTTP and the server's TLS is native code, as a cloud object store's is
  on its own machines. Requests cannot be counted (the stream is encrypted):
  ``counters()["requests"]`` is ``None``; connections and bytes are still counted.
- ``--tls-cert``/``--tls-key`` (PEM files) terminate TLS in the proxy: clients speak
  HTTPS to it and it speaks plain HTTP to the upstream, as a load balancer does.
  Requests are counted on the decrypted stream, but the proxy's Python TLS (asyncio's
  ``sslproto``) takes a large share of a 2-core machine from the client under test.

It binds 127.0.0.1 on kernel-chosen ports, prints ``{"port", "admin_port",
"pid"}`` as one JSON line, and exits on SIGTERM/SIGINT or when its stdin closes
(the parent died). The admin port speaks one line per command: ``counters``
(answers a JSON line) and ``reset`` (zeroes the counters, answers them).
`DelayProxy` is the parent-side handle; only the standard library is used.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HIGH_WATER = 16 * 1024 * 1024
"""Bytes waiting in one direction's delay line at which the proxy stops reading that side."""
LOW_WATER = 4 * 1024 * 1024
"""Bytes waiting at which reading resumes."""
_MAX_HEAD = 64 * 1024
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


# ---------------------------------------------------------------------- request counting
class Counters:
    """What the proxy has seen since the last reset."""

    def __init__(self, *, count_requests: bool = True) -> None:
        self.count_requests = count_requests
        self.reset()

    def reset(self) -> None:
        """Zero everything."""
        self.requests = 0
        self.methods: collections.Counter[str] = collections.Counter()
        self.connections = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.unparsed_connections = 0

    def snapshot(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict."""
        return {
            "requests": self.requests if self.count_requests else None,
            "methods": dict(self.methods),
            "connections": self.connections,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "unparsed_connections": self.unparsed_connections,
        }


class RequestCounter:
    """Finds HTTP/1.1 request heads in a client-to-server byte stream (observes, never edits).

    Bodies framed by ``Content-Length`` are skipped by arithmetic; ``chunked``
    bodies are walked chunk by chunk. Anything unparsable stops counting on that
    connection (reported as ``unparsed_connections``) but never affects forwarding.
    """

    def __init__(self, counters: Counters) -> None:
        self.counters = counters
        self.buf = bytearray()
        self.state = "head"  # head | body | chunk-size | chunk-data | chunk-trailer | lost
        self.remaining = 0

    def feed(self, data: bytes) -> None:
        """Account for the next bytes the client sent."""
        if self.state == "lost":
            return
        view = memoryview(data)
        while view:
            if self.state == "body":
                step = min(self.remaining, len(view))
                self.remaining -= step
                view = view[step:]
                if self.remaining == 0:
                    self.state = "head"
                continue
            if self.state == "chunk-data":
                step = min(self.remaining, len(view))
                self.remaining -= step
                view = view[step:]
                if self.remaining == 0:
                    self.state = "chunk-size"
                continue
            # Line-oriented states: head, chunk-size, chunk-trailer.
            self.buf += view
            view = memoryview(b"")
            if not self._parse_lines():
                return

    def _lose(self) -> bool:
        self.state = "lost"
        self.buf.clear()
        self.counters.unparsed_connections += 1
        return False

    def _parse_lines(self) -> bool:
        """Consume complete heads/lines from ``buf``; False once the stream is lost."""
        while True:
            if self.state == "head":
                # Tolerate stray CRLFs between requests (RFC 9112 2.2).
                while self.buf[:2] == b"\r\n":
                    del self.buf[:2]
                end = self.buf.find(b"\r\n\r\n")
                if end < 0:
                    return len(self.buf) <= _MAX_HEAD or self._lose()
                head = bytes(self.buf[: end + 4])
                del self.buf[: end + 4]
                if not self._on_head(head):
                    return False
            elif self.state == "chunk-size":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return len(self.buf) <= 1024 or self._lose()
                line = bytes(self.buf[:end]).split(b";", 1)[0].strip()
                del self.buf[: end + 2]
                try:
                    size = int(line, 16)
                except ValueError:
                    return self._lose()
                if size == 0:
                    self.state = "chunk-trailer"
                else:
                    self.state, self.remaining = "chunk-data", size + 2  # data + CRLF
            elif self.state == "chunk-trailer":
                end = self.buf.find(b"\r\n")
                if end < 0:
                    return len(self.buf) <= _MAX_HEAD or self._lose()
                line = bytes(self.buf[:end])
                del self.buf[: end + 2]
                if not line:
                    self.state = "head"
            else:
                # body / chunk-data: hand the buffered rest back to feed()'s arithmetic.
                rest = bytes(self.buf)
                self.buf.clear()
                if rest:
                    self.feed(rest)
                return self.state != "lost"
            if not self.buf:
                return True

    def _on_head(self, head: bytes) -> bool:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return self._lose()
        self.counters.requests += 1
        self.counters.methods[parts[0].decode("latin-1")] += 1
        length = 0
        chunked = False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    return self._lose()
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:
            self.state = "chunk-size"
        elif length:
            self.state, self.remaining = "body", length
        else:
            self.state = "head"
        return True


# ---------------------------------------------------------------------- the delay line
_EOF = object()
"""Delay-line marker: the other side half-closed; pass the EOF on."""
_CLOSE = object()
"""Delay-line marker: the other side is gone; close after the bytes before it."""


class _Side(asyncio.Protocol):
    """One socket of a proxied connection; bytes it receives go to its peer ``delay`` s later."""

    def __init__(self, proxy: _Proxy, *, client: bool) -> None:
        self.proxy = proxy
        self.client = client
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        # The delay line towards this side's transport: (due time, bytes or _EOF / _CLOSE).
        self.line: collections.deque[tuple[float, bytes | object]] = collections.deque()
        self.queued = 0
        self.timer: asyncio.TimerHandle | None = None
        self.not_before = 0.0  # earliest time bytes may arrive at this side (connection set-up)
        self.write_paused = False
        self.read_paused = False
        self.closed = False
        self.eof_in = False  # this side's socket sent us EOF
        self.eof_out = False  # we sent EOF to this side's socket
        counting = client and proxy.counters.count_requests
        self.counter = RequestCounter(proxy.counters) if counting else None

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.client:
            self.proxy.counters.connections += 1
            upstream = _Side(self.proxy, client=False)
            upstream.peer, self.peer = self, upstream
            # SYN + SYN-ACK: the client's first bytes reach the server after one more round trip.
            upstream.not_before = self.loop.time() + 2 * self.proxy.delay
            self.loop.create_task(self._connect_upstream(upstream))
        self._schedule()

    async def _connect_upstream(self, upstream: _Side) -> None:
        host, port = self.proxy.upstream
        try:
            await self.loop.create_connection(lambda: upstream, host, port)
        except OSError:
            if self.transport is not None:
                self.transport.abort()

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is None:
            return
        if self.client:
            self.proxy.counters.bytes_up += len(data)
            if self.counter is not None:
                self.counter.feed(data)
        else:
            self.proxy.counters.bytes_down += len(data)
        peer.push(data)

    def eof_received(self) -> bool:
        self.eof_in = True
        if self.peer is not None:
            self.peer.push(_EOF)
        if self.eof_out and self.transport is not None:
            self.transport.close()
        return True  # keep our write side open until the peer's EOF is delivered

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.peer is not None and not self.peer.closed:
            if exc is not None:
                self.peer.abort()
            else:
                self.peer.push(_CLOSE)

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_peer_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self._update_peer_reading()

    # -- delay line
    def push(self, data: bytes | object) -> None:
        """Queue ``data`` (bytes, `_EOF` or `_CLOSE`) for this side, due after the delay."""
        if self.closed:
            return
        due = max(self.loop.time(), self.not_before) + self.proxy.delay
        self.line.append((due, data))
        if isinstance(data, bytes):
            self.queued += len(data)
        self._update_peer_reading()
        self._schedule()

    def abort(self) -> None:
        self.line.clear()
        if self.transport is not None:
            self.transport.abort()

    def _schedule(self) -> None:
        if self.timer is None and self.line and self.transport is not None and not self.closed:
            self.timer = self.loop.call_at(self.line[0][0], self._flush)

    def _flush(self) -> None:
        self.timer = None
        transport = self.transport
        if transport is None or self.closed:
            return
        now = self.loop.time()
        while self.line and self.line[0][0] <= now:
            _, data = self.line.popleft()
            if not isinstance(data, bytes):
                self.line.clear()
                if data is _EOF and transport.can_write_eof() and not self.eof_in:
                    self.eof_out = True
                    transport.write_eof()
                else:
                    transport.close()  # sends what is buffered, then closes
                break
            self.queued -= len(data)
            transport.write(data)
        self._update_peer_reading()
        self._schedule()

    def _update_peer_reading(self) -> None:
        """Pause the peer's reading while this side's line is full or its socket is."""
        peer = self.peer
        if peer is None or peer.transport is None or peer.closed:
            return
        want_pause = self.write_paused or self.queued > HIGH_WATER
        if want_pause and not peer.read_paused:
            peer.read_paused = True
            peer.transport.pause_reading()
        elif not want_pause and peer.read_paused and self.queued < LOW_WATER:
            peer.read_paused = False
            peer.transport.resume_reading()


class _Proxy:
    def __init__(self, upstream: tuple[str, int], delay_s: float, *, count_requests: bool) -> None:
        self.upstream = upstream
        self.delay = delay_s
        self.counters = Counters(count_requests=count_requests)


async def _admin(proxy: _Proxy, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while line := await reader.readline():
            command = line.strip().decode()
            if command == "reset":
                proxy.counters.reset()
            elif command != "counters":
                writer.write(b'{"error": "unknown command"}\n')
                continue
            writer.write(json.dumps(proxy.counters.snapshot()).encode() + b"\n")
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(upstream: str, delay_ms: float, host: str, tls: tuple[str, str] | None = None) -> None:
    # An https:// upstream does its own TLS: relay the encrypted bytes, count no requests.
    passthrough = upstream.startswith("https://")
    up_host, _, up_port = upstream.removeprefix("https://").removeprefix("http://").rpartition(":")
    proxy = _Proxy((up_host or "127.0.0.1", int(up_port)), delay_ms / 1000, count_requests=not passthrough)
    loop = asyncio.get_running_loop()
    ssl_context = None
    if tls is not None:
        import ssl

        ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ssl_context.load_cert_chain(*tls)
    server = await loop.create_server(
        lambda: _Side(proxy, client=True), host, 0, backlog=1024, ssl=ssl_context
    )
    admin = await asyncio.start_server(lambda r, w: _admin(proxy, r, w), host, 0)
    info = {
        "port": server.sockets[0].getsockname()[1],
        "admin_port": admin.sockets[0].getsockname()[1],
        "pid": os.getpid(),
    }
    sys.stdout.write(json.dumps(info) + "\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin() -> None:
        sys.stdin.buffer.read()  # returns when the parent closes our stdin or dies
        loop.call_soon_threadsafe(stop.set)

    loop.run_in_executor(None, watch_stdin)
    await stop.wait()
    server.close()
    admin.close()
    os._exit(0)  # the stdin watcher thread is blocked in read(); do not wait for it


# ---------------------------------------------------------------------- parent-side handle
class DelayProxy:
    """Handle on a delay-proxy subprocess in front of ``upstream`` (``host:port``).

    Examples
    --------
    >>> with DelayProxy.start("127.0.0.1:8333", delay_ms=20) as proxy:  # doctest: +SKIP
    ...     proxy.reset()
    ...     ...  # point clients at proxy.url
    ...     proxy.counters()["requests"]
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, admin_port: int, log: Path, scheme: str = "http"
    ) -> None:
        self.scheme = scheme
        self.proc = proc
        self.port = port
        self.admin_port = admin_port
        self.log_path = log

    @classmethod
    def start(
        cls, upstream: str, *, delay_ms: float, host: str = "127.0.0.1", tls: tuple[str, str] | None = None
    ) -> DelayProxy:
        """Start the proxy process; returns once it listens.

        ``upstream`` is ``host:port`` or ``http://host:port`` (plain HTTP, requests
        counted), or ``https://host:port``: an upstream doing its own TLS, relayed
        encrypted (`url` is ``https://``; no request counts). ``tls`` is
        ``(certificate chain PEM path, private key PEM path)``: the proxy then terminates
        TLS itself and serves HTTPS to a plain-HTTP upstream.

        Raises
        ------
        RuntimeError
            It did not report its ports within ``START_TIMEOUT`` seconds (log attached).
        """
        upstream = upstream.removeprefix("http://").rstrip("/")
        if upstream.startswith("https://") and tls is not None:
            raise ValueError("an https:// upstream does its own TLS: pass tls=None")
        fd, log_name = tempfile.mkstemp(prefix="azarr-delay-proxy-", suffix=".log")
        argv = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--upstream",
            upstream,
            "--delay-ms",
            str(delay_ms),
            "--host",
            host,
            *(["--tls-cert", tls[0], "--tls-key", tls[1]] if tls else []),
        ]
        with os.fdopen(fd, "wb") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True
            )
        assert proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT
        line = b""
        while not line.endswith(b"\n") and time.monotonic() < deadline and proc.poll() is None:
            line += proc.stdout.readline()
        if not line.endswith(b"\n"):
            handle = cls(proc, 0, 0, Path(log_name))
            handle.stop()
            raise RuntimeError(f"delay proxy did not start: {Path(log_name).read_text()[-2000:]}")
        info = json.loads(line)
        scheme = "https" if tls or upstream.startswith("https://") else "http"
        return cls(proc, int(info["port"]), int(info["admin_port"]), Path(log_name), scheme)

    @property
    def url(self) -> str:
        """``http(s)://127.0.0.1:<port>``: the endpoint clients use instead of the upstream."""
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def _command(self, command: str) -> dict[str, Any]:
        return admin_command(self.admin_port, command)

    def counters(self) -> dict[str, Any]:
        """Requests (total and per method), connections and bytes since the last reset."""
        return self._command("counters")

    def reset(self) -> dict[str, Any]:
        """Zero the counters."""
        return self._command("reset")

    def stop(self) -> None:
        """SIGTERM the child by PID (SIGKILL after ``STOP_TIMEOUT`` s) and remove its log."""
        proc = self.proc
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=STOP_TIMEOUT)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def admin_command(admin_port: int, command: str, host: str = "127.0.0.1") -> dict[str, Any]:
    """Send one admin command (``counters`` or ``reset``) and return the JSON answer.

    Standard library only, so benchmark workers in any interpreter can call it.
    """
    with socket.create_connection((host, admin_port), timeout=10) as sock:
        sock.sendall(command.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            part = sock.recv(65536)
            if not part:
                break
            data += part
    answer: dict[str, Any] = json.loads(data)
    return answer


def main(argv: list[str] | None = None) -> None:
    """Child entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--upstream", required=True, help="host:port of the real server (https://host:port: relay its TLS)"
    )
    parser.add_argument("--delay-ms", type=float, default=20.0, help="one-way delay per direction")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tls-cert", help="PEM certificate chain: serve HTTPS (with --tls-key)")
    parser.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    tls = (args.tls_cert, args.tls_key) if args.tls_cert else None
    asyncio.run(_serve(args.upstream, args.delay_ms, args.host, tls))


if __name__ == "__main__":
    main()
