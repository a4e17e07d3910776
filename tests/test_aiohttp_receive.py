"""Bodies received straight into the caller's buffer (`read_body` with ``allocate``).

Once a response's head is parsed, `storage/_aiohttp._BodyInto` takes the connection's
transport over and receives the rest of the body with ``recv_into`` (TLS: decrypted into
the buffer), then hands the connection back to aiohttp. A scripted asyncio server sends
each response in timed pieces, so these tests can split a body anywhere, stall it, cut
it short or cancel the read mid-body, over plain TCP, TLS and uvloop, and check that the
bytes land whole, that a finished connection is reused and that a broken one is not.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
import pytest
from servers import tls_material

from azarr.storage import _aiohttp
from azarr.storage._aiohttp import new_session, read_body

T = TypeVar("T")
BODY = bytes(range(256)) * 4096  # 1 MiB, every offset distinguishable

#: One response: (bytes, seconds to wait before sending them) pieces; "close" ends the connection.
Script = list[tuple[bytes, float] | str]


def head(length: int) -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nContent-Type: application/octet-stream\r\n\r\n".encode()


def pieces(body: bytes, n: int, delay: float = 0.0, *, with_head: int = 0) -> Script:
    """``body`` after its head in ``n`` pieces ``delay`` seconds apart (the first ``with_head``
    bytes in the head's own write)."""
    script: Script = [(head(len(body)) + body[:with_head], 0.0)]
    rest = body[with_head:]
    step = -(-len(rest) // n)
    script += [(rest[i : i + step], delay) for i in range(0, len(rest), step)]
    return script


@dataclass
class ScriptedServer:
    """Answers the k-th request with ``scripts[k]``, counting connections."""

    scripts: list[Script]
    connections: int = 0
    served: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                script = self.scripts[min(self.served, len(self.scripts) - 1)]
                self.served += 1
                for step in script:
                    if step == "close":
                        return
                    data, delay = step
                    if delay:
                        await asyncio.sleep(delay)
                    writer.write(data)
                    await writer.drain()
        except ConnectionError:
            return
        finally:
            writer.close()


@asynccontextmanager
async def serving(
    scripts: list[Script], tls: dict[str, str] | None = None
) -> AsyncIterator[tuple[ScriptedServer, str, Any]]:
    """The server, its URL and the client's ``ssl`` setting."""
    scripted = ScriptedServer(scripts)
    server_ssl = client_ssl = None
    if tls is not None:
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(tls["cert"], tls["key"])
        client_ssl = ssl.create_default_context(cafile=tls["ca"])
    server = await asyncio.start_server(scripted.handle, "127.0.0.1", 0, ssl=server_ssl)
    port = server.sockets[0].getsockname()[1]
    try:
        yield scripted, f"{'https' if tls else 'http'}://127.0.0.1:{port}/k", client_ssl
    finally:
        server.close()
        await server.wait_closed()


def allocator() -> Callable[[int], memoryview]:
    return lambda n: memoryview(bytearray(n))


async def get(session: aiohttp.ClientSession, url: str) -> memoryview | None:
    async with session.get(url) as resp:
        _, view = await read_body(resp, allocator(), what=f"get {url}")
        return view


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("trustme")
    return tls_material(Path(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def attached(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each body (that did not arrive with its head) was received directly."""
    seen: list[bool] = []
    original = _aiohttp._BodyInto.attach.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, *args: Any) -> Any:
        receiver = original(cls, *args)
        seen.append(receiver is not None)
        return receiver

    monkeypatch.setattr(_aiohttp._BodyInto, "attach", classmethod(spy))
    return seen


@asynccontextmanager
async def connected(
    scripts: list[Script], tls: dict[str, str] | None = None, *, read_timeout: float = 5.0
) -> AsyncIterator[tuple[ScriptedServer, str, aiohttp.ClientSession]]:
    """The server, its URL and a one-connection session to it (azarr's `new_session`)."""
    async with serving(scripts, tls) as (server, url, client_ssl):
        session = new_session(limit=1, connect_timeout=5, read_timeout=read_timeout, ssl=client_ssl or True)
        async with session:
            yield server, url, session


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_split_bodies_land_whole_and_the_connection_is_reused(
    scheme: str, tls: dict[str, str], attached: list[bool]
) -> None:
    scripts = [
        pieces(BODY, 7, 0.01, with_head=1000),  # part of the body in the head's write
        pieces(BODY, 64, 0.0),  # many small writes
        pieces(BODY[:300_000], 2, 0.05),
        pieces(b"x", 1, 0.02),  # one byte after the head
    ]
    async with connected(scripts, tls if scheme == "https" else None) as (server, url, session):
        for script in scripts:
            expected = b"".join(step[0] for step in script if isinstance(step, tuple))
            got = await get(session, url)
            assert got is not None and bytes(got) == expected[expected.index(b"\r\n\r\n") + 4 :]
    assert server.served == 4 and server.connections == 1  # kept alive throughout
    assert attached and all(attached)


async def test_a_body_sent_with_its_head_is_copied_without_taking_the_connection(
    attached: list[bool],
) -> None:
    async with connected([[(head(10) + b"0123456789", 0.0)]]) as (server, url, session):
        for _ in range(3):
            got = await get(session, url)
            assert got is not None and bytes(got) == b"0123456789"
    assert server.connections == 1
    assert attached == []  # taken over only when bytes are still missing


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_a_short_body_fails_and_its_connection_is_not_reused(
    scheme: str, tls: dict[str, str], attached: list[bool]
) -> None:
    short: Script = [(head(len(BODY)) + BODY[:100], 0.0), (BODY[100:5000], 0.05), "close"]
    async with connected([short, pieces(BODY, 3, 0.01)], tls if scheme == "https" else None) as (
        server,
        url,
        session,
    ):
        with pytest.raises(aiohttp.ClientPayloadError, match=f"ended after 5000 of {len(BODY)} bytes"):
            await get(session, url)
        got = await get(session, url)
        assert got is not None and bytes(got) == BODY
    assert server.connections == 2
    assert attached[0]


async def test_a_stalled_body_times_out_after_sock_read(attached: list[bool]) -> None:
    stalled: Script = [(head(len(BODY)) + BODY[:100], 0.0), (BODY[100:200], 0.05), (BODY[200:], 3.0)]
    async with connected([stalled, pieces(BODY, 2)], read_timeout=0.3) as (server, url, session):
        t0 = time.monotonic()
        with pytest.raises(aiohttp.ServerTimeoutError, match="Timeout on reading"):
            await get(session, url)
        assert time.monotonic() - t0 < 2
        got = await get(session, url)
        assert got is not None and bytes(got) == BODY
    assert server.connections == 2 and attached[0]


async def test_a_body_that_keeps_flowing_outlasts_sock_read(attached: list[bool]) -> None:
    # Twelve pieces 0.1 s apart: 1.2 s in all against a 0.3 s sock_read, which times a
    # stall, not the body (aiohttp's own read timer must not fire behind the receiver).
    async with connected([pieces(BODY, 12, 0.1)], read_timeout=0.3) as (server, url, session):
        got = await get(session, url)
        assert got is not None and bytes(got) == BODY
        got = await get(session, url)  # and the connection is fine afterwards
        assert got is not None and bytes(got) == BODY
    assert server.connections == 1 and all(attached)


async def test_a_read_cancelled_mid_body_closes_its_connection(attached: list[bool]) -> None:
    async with connected([pieces(BODY, 4, 0.2), pieces(BODY, 2)]) as (server, url, session):
        task = asyncio.ensure_future(get(session, url))
        await asyncio.sleep(0.3)  # mid-body
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        got = await get(session, url)
        assert got is not None and bytes(got) == BODY
    assert server.connections == 2 and attached[0]


async def test_after_a_direct_body_the_next_head_is_read_in_small_pieces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    firsts: list[int] = []  # bytes of each body that came with its head
    original = _aiohttp._BodyInto.attach.__func__  # type: ignore[attr-defined]

    def spy(cls: Any, resp: Any, view: memoryview, filled: int) -> Any:
        firsts.append(filled)
        return original(cls, resp, view, filled)

    monkeypatch.setattr(_aiohttp._BodyInto, "attach", classmethod(spy))
    whole: Script = [(head(len(BODY)) + BODY, 0.0)]  # the whole response in one write
    async with connected([whole]) as (server, url, session):
        for _ in range(3):
            assert bytes(await get(session, url) or b"") == BODY
        async with session.get(url) as resp:  # a body aiohttp reads itself: default recv size again
            transport = resp.connection.transport if resp.connection else None
            assert transport is not None and transport.max_size == _aiohttp.HEAD_RECV_BYTES  # type: ignore[attr-defined]
            body, view = await read_body(resp, None, what="get")
            assert body == BODY and view is None
            assert transport.max_size == type(transport).max_size  # type: ignore[attr-defined]
    assert server.connections == 1
    assert len(firsts) == 3 and firsts[0] > _aiohttp.HEAD_RECV_BYTES  # asyncio's default: 256 KiB
    assert all(0 < n < _aiohttp.HEAD_RECV_BYTES for n in firsts[1:])


def test_uvloop_transports_receive_directly(attached: list[bool]) -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> None:
        scripts = [pieces(BODY, 5, 0.01, with_head=10), pieces(BODY, 5, 0.01)]
        async with connected(scripts) as (server, url, session):
            for _ in scripts:
                got = await get(session, url)
                assert got is not None and bytes(got) == BODY
        assert server.connections == 1

    run(main, uvloop.new_event_loop)
    assert attached and all(attached)  # uvloop's transports switch protocols too


def run(main: Callable[[], Awaitable[T]], loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> T:
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())  # type: ignore[arg-type]
