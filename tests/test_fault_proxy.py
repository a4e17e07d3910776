"""The fault-injection proxy (``tests/fault_proxy.py``) proven with real clients.

Forwarding is checked byte for byte against an aiohttp upstream and end to end with
S3Store (SigV4 signatures verified by SeaweedFS) and GCSStore (fake-gcs-server);
every fault kind is observed by a raw aiohttp client, and the counters are checked
under 100 concurrent requests. The last tests pin how s3fs/botocore/aiohttp react
to faults, and the knobs that turn their hidden retries off.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from fault_proxy import (
    CHUNK_KEYS,
    METADATA_KEYS,
    S3_INTERNAL_ERROR_BODY,
    S3_SLOWDOWN_BODY,
    FaultProxy,
    FaultRule,
    ProxyCounters,
)
from servers import GCSServer, S3Server, free_port

from azarr.errors import PermissionDeniedError, StoreError
from azarr.storage import GCSStore, S3Store


# ---------------------------------------------------------------------- an aiohttp upstream
def _pattern(n: int) -> bytes:
    return (bytes(range(256)) * (n // 256 + 1))[:n]


async def _blob(request: web.Request) -> web.Response:
    return web.Response(body=_pattern(int(request.match_info["n"])), content_type="application/octet-stream")


async def _chunked(request: web.Request) -> web.StreamResponse:
    n = int(request.match_info["n"])
    response = web.StreamResponse()
    response.enable_chunked_encoding()
    await response.prepare(request)
    data = _pattern(n)
    for i in range(0, n, 10_000):
        await response.write(data[i : i + 10_000])
    await response.write_eof()
    return response


async def _echo(request: web.Request) -> web.Response:
    body = await request.read()
    return web.json_response(
        {
            "method": request.method,
            "raw_path": request.raw_path,
            "raw_headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.raw_headers],
            "length": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    """An aiohttp app on its own loop in a thread: ``/blob/{n}``, ``/chunked/{n}``, ``/echo...``."""
    loop = asyncio.new_event_loop()
    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_route("*", "/blob/{n}", _blob)
    app.router.add_get("/chunked/{n}", _chunked)
    app.router.add_route("*", "/echo{tail:.*}", _echo)
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    port = free_port()
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture(scope="module")
def proxy_server(upstream: str) -> Iterator[FaultProxy]:
    with FaultProxy.start(upstream) as proxy:
        yield proxy


@pytest.fixture
def proxy(proxy_server: FaultProxy) -> Iterator[FaultProxy]:
    """The proxy in front of the aiohttp upstream, no faults, zeroed counters."""
    proxy_server.reset()
    yield proxy_server
    proxy_server.reset()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        yield s


async def _get(session: aiohttp.ClientSession, url: str, **kwargs: Any) -> tuple[int, bytes]:
    async with session.get(url, **kwargs) as response:
        return response.status, await response.read()


async def _eventually(
    proxy: FaultProxy, predicate: Callable[[ProxyCounters], bool], within: float = 5.0
) -> ProxyCounters:
    """The first counters snapshot satisfying ``predicate`` (polled; fails after ``within`` s)."""
    deadline = time.monotonic() + within
    while True:
        c = proxy.counters()
        if predicate(c) or time.monotonic() > deadline:
            return c
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------- forwarding
async def _read_response(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head[1:] if line)}
    body = await reader.readexactly(int(headers["content-length"]))
    return head[0], headers, body


async def test_request_head_is_forwarded_byte_for_byte(proxy: FaultProxy) -> None:
    # What a SigV4 client sends: Host carries the proxy address the signature covers.
    headers = [
        ("Host", "pretend.example:9000"),
        ("Authorization", "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/s3/aws4_request, Signature=ab"),
        ("x-amz-date", "20260101T000000Z"),
        ("X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD"),
        ("X-Dup", "1"),
        ("x-dup", "2"),
        ("Content-Length", "5"),
    ]
    head = "PUT /echo/a%2Fb?x=1&y=%20z&list-type=2 HTTP/1.1\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        for _ in range(2):  # twice on one connection: keep-alive towards the client
            writer.write(head.encode() + b"hello")
            status, _, body = await _read_response(reader)
            assert status == "HTTP/1.1 200 OK"
            echo = json.loads(body)
            assert echo["method"] == "PUT"
            assert echo["raw_path"] == "/echo/a%2Fb?x=1&y=%20z&list-type=2"
            assert echo["raw_headers"] == [list(h) for h in headers]
            assert echo["sha256"] == hashlib.sha256(b"hello").hexdigest()
    finally:
        writer.close()
    c = proxy.counters()
    assert (c.received, c.forwarded, c.completed, c.connections_accepted) == (2, 2, 2, 1)
    assert c.methods == {"PUT": 2} and c.injected == {}


async def test_bodies_stream_both_ways(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    big = _pattern(5 * 2**20)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(big), 100_000):
            yield big[i : i + 100_000]

    # Content-Length body, chunked request body, and a 100-continue handshake.
    for data, expect100 in ((big, False), (chunks(), False), (big, True)):
        async with session.put(f"{proxy.url}/echo/x", data=data, expect100=expect100) as response:
            echo = await response.json()
        assert echo["length"] == len(big) and echo["sha256"] == hashlib.sha256(big).hexdigest()
    # Content-Length and chunked responses; HEAD has no body.
    assert await _get(session, f"{proxy.url}/blob/{8 * 2**20}") == (200, _pattern(8 * 2**20))
    assert await _get(session, f"{proxy.url}/chunked/123457") == (200, _pattern(123457))
    async with session.head(f"{proxy.url}/blob/100") as response:
        assert response.status == 200 and response.headers["Content-Length"] == "100"
        assert await response.read() == b""
    c = proxy.counters()
    assert c.received == c.forwarded == c.completed == 6
    assert c.methods == {"PUT": 3, "GET": 2, "HEAD": 1}
    assert c.upstream_errors == 0 and c.statuses == {"200": 6}


async def test_upstream_down_is_502(fault_proxy_factory: Any, session: aiohttp.ClientSession) -> None:
    proxy = fault_proxy_factory(f"http://127.0.0.1:{free_port()}")
    status, body = await _get(session, f"{proxy.url}/x")
    assert status == 502 and b"upstream error" in body
    assert proxy.counters().upstream_errors == 1


@pytest.mark.s3
async def test_s3store_round_trip_through_proxy(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    store = S3Store(
        f"{s3_bucket}/data", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    direct = S3Store(f"{s3_bucket}/data", storage_options=seaweedfs.storage_options)
    values = {".zgroup": b"{}", "a/.zarray": b"{}", "a/0.0": _pattern(3 * 2**20), "a/0.1": b""}
    try:
        for key, value in values.items():
            await store.set(key, value)
        for key, value in values.items():
            assert await store.get(key) == value
            assert await direct.get(key) == value  # it really landed on SeaweedFS
        assert sorted([k async for k in store.list_prefix("")]) == sorted(values)
        await store.delete("a/0.1")
        assert not await store.exists("a/0.1")
    finally:
        await store.close()
        await direct.close()
    c = s3_fault_proxy.counters()
    assert c.received == c.forwarded == c.completed and c.received >= 10
    assert c.injected == {} and c.upstream_errors == 0
    assert {"PUT", "GET", "DELETE"} <= set(c.methods)
    assert all(200 <= int(s) < 300 or s == "404" for s in c.statuses), c.statuses


@pytest.mark.s3
async def test_signatures_are_still_checked_through_proxy(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    options["secret"] = "wrong-secret"
    store = S3Store(s3_bucket, storage_options=options)
    try:
        with pytest.raises(PermissionDeniedError):
            await store.set("x", b"1")
    finally:
        await store.close()
    assert s3_fault_proxy.counters().statuses.get("403", 0) >= 1


@pytest.mark.gcs
async def test_gcsstore_round_trip_through_proxy(
    fake_gcs: GCSServer, gcs_bucket: str, gcs_fault_proxy: FaultProxy
) -> None:
    options = {**gcs_fault_proxy.storage_options(fake_gcs.storage_options), "retries": 1}
    store = GCSStore(f"{gcs_bucket}/data", storage_options=options)
    try:
        await store.set("a/0.0", _pattern(300_000))
        await store.set("a/.zarray", b"{}")
        assert await store.get("a/0.0") == _pattern(300_000)
        gcs_fault_proxy.configure(status_503=1.0, path=CHUNK_KEYS, error_format="gcs")
        with pytest.raises(StoreError):
            await store.get("a/0.0")
        assert await store.get("a/.zarray") == b"{}"  # metadata is not matched
    finally:
        await store.close()
    c = gcs_fault_proxy.counters()
    assert c.injected == {"status_503": 1} and c.upstream_errors == 0


# ---------------------------------------------------------------------- faults
@pytest.mark.parametrize(
    ("kind", "status", "content_type", "body"),
    [
        ("status_503", 503, "application/xml", S3_SLOWDOWN_BODY),
        ("status_500", 500, "application/xml", S3_INTERNAL_ERROR_BODY),
        ("status_429", 429, "application/json; charset=UTF-8", None),
    ],
)
async def test_status_faults(
    proxy: FaultProxy,
    session: aiohttp.ClientSession,
    kind: str,
    status: int,
    content_type: str,
    body: bytes | None,
) -> None:
    proxy.configure(rules=[FaultRule(kind, 1.0)], retry_after=2)
    for _ in range(2):  # the connection survives an injected status
        async with session.put(f"{proxy.url}/echo/k", data=b"x" * 100_000) as response:
            assert response.status == status
            assert response.headers["Content-Type"] == content_type
            assert response.headers["X-Fault-Proxy"] == kind
            got = await response.read()
        if body is not None:
            assert got == body
        else:
            error = json.loads(got)["error"]
            assert error["code"] == 429 and error["errors"][0]["reason"] == "rateLimitExceeded"
        if status in (429, 503):
            assert response.headers["Retry-After"] == "2"
    c = proxy.counters()
    assert c.injected == {kind: 2} and c.forwarded == 0 and c.connections_accepted == 1


async def test_error_format_gcs(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(status_503=1.0, error_format="gcs")
    status, body = await _get(session, f"{proxy.url}/blob/1")
    assert status == 503 and json.loads(body)["error"]["code"] == 503


async def test_error_format_azure(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    # Azure Storage names its error in the x-ms-error-code header and the XML body; a 429
    # (a gateway's) has no storage code.
    for kind, code in (("status_503", "ServerBusy"), ("status_500", "InternalError"), ("status_429", None)):
        proxy.configure(**{kind: 1.0}, error_format="azure")
        async with session.get(f"{proxy.url}/blob/1") as response:
            body = await response.read()
            assert response.headers.get("x-ms-error-code") == code
        assert (f"<Code>{code}</Code>".encode() in body) if code else body == b""
    with pytest.raises(ValueError, match="error_format"):
        proxy.configure(error_format="azur")


async def test_reset_is_a_connection_error(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(reset=1.0)
    # POST: aiohttp does not silently re-send non-idempotent requests (see below).
    with pytest.raises(aiohttp.ClientConnectionError):
        async with session.post(f"{proxy.url}/echo/k", data=b"abc") as response:
            await response.read()
    c = proxy.counters()
    assert (c.received, c.forwarded, c.injected) == (1, 0, {"reset": 1})


async def test_aiohttp_silently_resends_a_reset_get_once(
    proxy: FaultProxy, session: aiohttp.ClientSession
) -> None:
    # aiohttp re-sends GET/HEAD/PUT/DELETE/... once after ServerDisconnectedError or
    # ClientOSError (ClientSession._retry_connection): a single reset is invisible.
    proxy.configure(reset=1.0, fail_first_n=1)
    assert await _get(session, f"{proxy.url}/blob/10") == (200, _pattern(10))
    assert proxy.counters().received == 2
    proxy.configure(reset=1.0)
    proxy.reset_counters()
    with pytest.raises(aiohttp.ClientConnectionError):
        await _get(session, f"{proxy.url}/blob/10")
    assert proxy.counters().received == 2


async def test_reset_mid_body(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(reset_mid_body=1.0)
    async with session.get(f"{proxy.url}/blob/{2**20}") as response:
        assert response.status == 200  # the head arrived
        with pytest.raises(aiohttp.ClientPayloadError, match="received 524288 of 1048576"):
            await response.read()
    # No body to cut: half of the head is sent, then the reset.
    with pytest.raises(aiohttp.ClientConnectionError):
        async with session.post(f"{proxy.url}/blob/0") as response:
            await response.read()
    c = proxy.counters()
    assert c.injected == {"reset_mid_body": 2} and c.received == c.forwarded == 2


async def test_stall(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(stall=1.0, stall_seconds=0.5)
    start = time.monotonic()
    assert await _get(session, f"{proxy.url}/blob/10") == (200, _pattern(10))
    assert 0.5 <= time.monotonic() - start < 1.5
    # A client that gives up first: the stalled request is never forwarded.
    with pytest.raises(TimeoutError):
        await _get(session, f"{proxy.url}/blob/10", timeout=aiohttp.ClientTimeout(sock_read=0.1))
    c = await _eventually(proxy, lambda c: c.in_flight == 0)
    assert c.injected == {"stall": 2} and c.forwarded == 1 and c.stall_abandoned == 1


async def test_latency_is_pipelined_not_a_fault(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(latency_ms=200)
    start = time.monotonic()
    results = await asyncio.gather(*(_get(session, f"{proxy.url}/blob/10") for _ in range(20)))
    elapsed = time.monotonic() - start
    assert all(r == (200, _pattern(10)) for r in results)
    assert 0.2 <= elapsed < 3.0  # 20 requests overlap: not 20 x 0.2 s (room for a loaded host)
    c = proxy.counters()
    assert c.injected == {} and c.forwarded == 20


async def test_fail_first_n_is_exact(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(status_503=1.0, fail_first_n=3)
    statuses = [(await _get(session, f"{proxy.url}/blob/1"))[0] for _ in range(8)]
    assert statuses == [503, 503, 503, 200, 200, 200, 200, 200]
    # Concurrently too: exactly N faults, whatever the arrival order.
    proxy.configure(status_500=1.0, fail_first_n=5)
    proxy.reset_counters()
    results = await asyncio.gather(*(_get(session, f"{proxy.url}/blob/1") for _ in range(30)))
    assert sorted(s for s, _ in results).count(500) == 5
    c = proxy.counters()
    assert c.injected == {"status_500": 5} and c.forwarded == 25


async def test_method_and_path_filters(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(status_503=1.0, path=CHUNK_KEYS)
    cases = {
        "/echo/bucket/a/.zarray": 200,
        "/echo/bucket/a/.zattrs?x-id=GetObject": 200,
        "/echo/bucket/a/0.0": 503,
        "/echo/bucket/a/3/1/4": 503,
        "/echo/bucket/a/7?x-id=GetObject": 503,
        "/echo/download/storage/v1/b/bkt/o/a%2F0.0?alt=media": 503,
        "/echo/download/storage/v1/b/bkt/o/a%2F.zarray?alt=media": 200,
    }
    for target, expected in cases.items():
        assert (await _get(session, proxy.url + target))[0] == expected, target
    proxy.configure(status_503=1.0, path=METADATA_KEYS)
    for target, expected in cases.items():
        assert (await _get(session, proxy.url + target))[0] == 703 - expected, target
    # Rules with their own filters: 500 for DELETE, 429 for PUT of chunks only.
    proxy.configure(
        rules=[
            FaultRule("status_500", 1.0, methods=("DELETE",)),
            FaultRule("status_429", 1.0, methods=("PUT",), path=CHUNK_KEYS),
        ]
    )
    async with session.delete(f"{proxy.url}/echo/a/.zarray") as r:
        assert r.status == 500
    async with session.put(f"{proxy.url}/echo/a/.zarray", data=b"{}") as r:
        assert r.status == 200
    async with session.put(f"{proxy.url}/echo/a/0.0", data=b"x") as r:
        assert r.status == 429
    assert (await _get(session, f"{proxy.url}/echo/a/0.0"))[0] == 200


async def test_seeded_draws_are_reproducible(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    async def pattern(seed: int) -> list[int]:
        proxy.configure(status_503=0.3, seed=seed)
        return [(await _get(session, f"{proxy.url}/blob/1"))[0] for _ in range(40)]

    first = await pattern(7)
    assert await pattern(7) == first
    assert await pattern(8) != first
    assert 4 <= first.count(503) <= 24


async def test_counters_peak_concurrency(proxy: FaultProxy, session: aiohttp.ClientSession) -> None:
    proxy.configure(latency_ms=1000)  # holds all 100 requests in flight together
    results = await asyncio.gather(*(_get(session, f"{proxy.url}/blob/1000") for _ in range(100)))
    assert all(status == 200 for status, _ in results)
    c = proxy.counters()
    # (>=: connections of an earlier test may still be closing when counters were reset)
    assert c.peak_in_flight == 100 and c.peak_connections >= 100
    assert c.in_flight == 0
    assert c.received == c.forwarded == c.completed == 100 and c.methods == {"GET": 100}
    proxy.reset_counters()
    c = proxy.counters()
    assert (c.received, c.peak_in_flight, c.methods) == (0, 0, {})


async def test_wave_holds_matching_requests_until_n_are_held(
    proxy: FaultProxy, session: aiohttp.ClientSession
) -> None:
    proxy.configure(wave=6, wave_path=CHUNK_KEYS, wave_seconds=30)
    start = time.monotonic()
    assert (await _get(session, f"{proxy.url}/echo/a/.zarray"))[0] == 200  # not a chunk key: not held
    assert time.monotonic() - start < 5
    # Five chunk reads stay held while nothing else comes; the sixth releases all six.
    held = [asyncio.ensure_future(_get(session, f"{proxy.url}/blob/{n}")) for n in range(10, 15)]
    await asyncio.sleep(0.5)
    assert not any(task.done() for task in held) and proxy.counters().in_flight == 5
    assert (await _get(session, f"{proxy.url}/blob/15"))[0] == 200
    assert [status for status, _ in await asyncio.gather(*held)] == [200] * 5
    assert (await _get(session, f"{proxy.url}/blob/16"))[0] == 200  # after the wave: not held
    c = proxy.counters()
    assert (c.waves, c.peak_in_flight, c.received) == (1, 6, 8)
    assert time.monotonic() - start < 10


async def test_wave_lets_a_lone_request_go_after_wave_seconds(
    proxy: FaultProxy, session: aiohttp.ClientSession
) -> None:
    proxy.configure(wave=3, wave_seconds=0.3)
    start = time.monotonic()
    assert (await _get(session, f"{proxy.url}/blob/10"))[0] == 200
    assert (await _get(session, f"{proxy.url}/blob/10"))[0] == 200
    assert time.monotonic() - start >= 0.6  # one after another: each waited its full hold
    assert proxy.counters().waves == 0
    with pytest.raises(Exception, match="wave"):
        proxy.configure(wave=0)


async def test_throttle_refuses_beyond_k_in_flight_and_r_per_second(
    proxy: FaultProxy, session: aiohttp.ClientSession
) -> None:
    # K = 5: twenty requests held (stall) together, five are served, the rest refused at once.
    proxy.configure(stall=1.0, stall_seconds=0.5, throttle_in_flight=5)
    results = await asyncio.gather(*(_get(session, f"{proxy.url}/blob/10") for _ in range(20)))
    assert sorted(status for status, _ in results) == [200] * 5 + [503] * 15
    assert all(body == S3_SLOWDOWN_BODY for status, body in results if status == 503)
    c = proxy.counters()
    assert c.injected == {"stall": 5, "throttle": 15} and c.forwarded == 5
    assert c.refused_by == {"in_flight": 15}
    assert sum(served for served, _ in c.timeline) == 5 and sum(refused for _, refused in c.timeline) == 15
    # R = 0.5/s with a bucket of 3: a quick burst of ten gets three through (a fourth
    # token takes 2 s); GCS format answers 429 rateLimitExceeded.
    proxy.configure(throttle_rate=0.5, throttle_burst=3, error_format="gcs")
    proxy.reset_counters()
    statuses = [(await _get(session, f"{proxy.url}/blob/1"))[0] for _ in range(10)]
    assert 3 <= statuses.count(200) <= 4 and statuses[:3] == [200] * 3
    assert set(statuses[4:]) == {429}
    c = proxy.counters()
    assert c.injected["throttle"] == statuses.count(429) and c.forwarded == statuses.count(200)
    assert c.refused_by == {"rate": statuses.count(429)}
    with pytest.raises(ValueError, match="throttle_rate"):
        proxy.configure(throttle_rate=0)


def test_configure_validates(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="unknown fault kinds"):
        proxy.configure(status_404=1.0)
    with pytest.raises(ValueError, match="probability"):
        proxy.configure(reset=1.5)
    with pytest.raises(ValueError, match="regex"):
        proxy.configure(reset=1.0, path="(")
    config = proxy.configure(stall=0.25, methods=["get"], path=CHUNK_KEYS, seed=3, stall_seconds=1.0)
    assert proxy.config() == config
    assert config.rules == (FaultRule("stall", 0.25, ("GET",), CHUNK_KEYS),)


# ---------------------------------------------------------------------- s3fs/botocore retry knobs
def _no_retry_session_cls() -> type:
    """aiobotocore's HTTP session without aiohttp's hidden re-send after a reset."""
    from aiobotocore.httpsession import AIOHTTPSession

    class NoResendAIOHTTPSession(AIOHTTPSession):  # type: ignore[misc]
        async def _get_session(self, proxy_url: Any) -> Any:
            session = await super()._get_session(proxy_url)
            session._retry_connection = False  # private: no public switch in aiohttp 3.14
            return session

    return NoResendAIOHTTPSession


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["status_503", "status_500", "reset", "reset_mid_body"])
@pytest.mark.parametrize("op", ["GET", "PUT"])
async def test_s3_hidden_retries_can_all_be_disabled(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy, kind: str, op: str
) -> None:
    # Three layers retry on their own: botocore (retries config), s3fs (fs.retries, an
    # attribute, not a constructor option) and aiohttp (one silent re-send after a reset).
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    options["config_kwargs"] = {
        "retries": {"mode": "standard", "total_max_attempts": 1},
        "http_session_cls": _no_retry_session_cls(),
    }
    store = S3Store(s3_bucket, storage_options=options)
    try:
        (await store.filesystem()).retries = 1
        await store.set("a/0.0", b"v" * 1000)
        s3_fault_proxy.configure(rules=[FaultRule(kind, 1.0, methods=(op,), path=CHUNK_KEYS)])
        s3_fault_proxy.reset_counters()
        with pytest.raises(StoreError):
            if op == "GET":
                await store.get("a/0.0")
            else:
                await store.set("a/0.0", b"w" * 1000)
    finally:
        await store.close()
    c = s3_fault_proxy.counters()
    assert c.received == 1 and c.injected == {kind: 1}


@pytest.mark.s3
async def test_s3_stalled_put_fails_within_read_timeout(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    # botocore sends PUT bodies with "Expect: 100-continue", and aiohttp waits for the
    # "100 Continue" with no read timeout, so a server stalling there would hang the PUT.
    # S3Store drops botocore's add_expect_header handler: read_timeout applies to PUTs.
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    options["config_kwargs"] = {"read_timeout": 0.3}
    store = S3Store(s3_bucket, storage_options=options)
    try:
        s3_fault_proxy.configure(stall=1.0, stall_seconds=1.2, methods=["PUT"])
        start = time.monotonic()
        with pytest.raises(StoreError):
            await store.set("a/0.0", b"v" * 1000)
        assert time.monotonic() - start < 1.0
    finally:
        await store.close()
    c = await _eventually(s3_fault_proxy, lambda c: c.in_flight == 0)
    # One attempt (no botocore/s3fs retries), abandoned by the client during the stall.
    # (>= 1: a stall left by an earlier test may end, and be counted, during this one.)
    assert c.received == 1 and c.stall_abandoned >= 1
