"""HTTPStore redirects, against real aiohttp servers on 127.0.0.1 (two ports = two origins).

Server A redirects; server B records the headers it receives. Same-origin
redirects are followed with the user's headers; cross-origin ones are refused
unless allowed, and then B sees no custom header; https -> http and
link-local / metadata targets are refused without any connection to them.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.connector
import pytest
import trustme
from aiohttp import web
from yarl import URL

from azarr.errors import StoreError
from azarr.storage import HTTPStore
from azarr.storage._redirects import RedirectPolicy, RedirectRefusedError, forbidden_address

pytestmark = pytest.mark.timeout(60)

SECRET = "Bearer s3cr3t-t0ken-zz9"


class Servers:
    def __init__(self) -> None:
        self.seen: dict[str, list[dict[str, str]]] = {"a": [], "b": []}
        self.runners: list[web.AppRunner] = []
        self.a = self.b = self.tls = ""

    def app(self, name: str, routes: dict[str, Any]) -> web.Application:
        async def handle(request: web.Request) -> web.StreamResponse:
            self.seen[name].append(dict(request.headers))
            target = routes.get(request.path)
            if target is None:
                return web.Response(body=f"{name}:{request.path}".encode())
            return web.Response(status=302, headers={"Location": target() if callable(target) else target})

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        return app

    async def start(self, app: web.Application, ssl_context: ssl.SSLContext | None = None) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        self.runners.append(runner)
        port = runner.addresses[0][1]
        return f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}"


@pytest.fixture
async def servers() -> AsyncIterator[Servers]:
    s = Servers()
    s.b = await s.start(s.app("b", {}))
    routes = {
        "/root/same": "/root/real",
        "/root/same-abs": lambda: f"{s.a}/root/real",
        "/root/cross": lambda: f"{s.b}/root/x?X-Amz-Signature=sig123",
        "/root/link-local": "http://169.254.169.254/latest/meta-data/iam/",
        "/root/link-local-v6": "http://[fe80::1]/x",
        "/root/aws-v6": "http://[fd00:ec2::254]/latest/",
        "/root/gcp": "http://metadata.google.internal/computeMetadata/v1/",
        "/root/mapped": "http://[::ffff:169.254.169.254]/",
        "/root/azure-wire": "http://168.63.129.16/machine/?comp=goalstate",
        "/root/nat64": "http://[64:ff9b::a9fe:a9fe]/latest/",
        "/root/loop": "/root/loop",
        "/root/ftp": "ftp://127.0.0.1/x",
    }
    s.a = await s.start(s.app("a", routes))
    yield s
    for runner in s.runners:
        await runner.cleanup()


async def test_same_origin_redirect_is_followed_with_headers(servers: Servers) -> None:
    store = HTTPStore(f"{servers.a}/root", storage_options={"headers": {"Authorization": SECRET}})
    try:
        assert await store.get("same") == b"a:/root/real"
        assert await store.get("same-abs") == b"a:/root/real"
    finally:
        await store.close()
    assert all(h.get("Authorization") == SECRET for h in servers.seen["a"])


async def test_cross_origin_redirect_is_refused_by_default(servers: Servers) -> None:
    store = HTTPStore(f"{servers.a}/root", storage_options={"headers": {"Authorization": SECRET}})
    try:
        with pytest.raises(RedirectRefusedError, match="leaves the origin") as info:
            await store.get("cross")
    finally:
        await store.close()
    assert servers.seen["b"] == []  # no request reached the other origin
    message = str(info.value)
    assert "'cross'" in message and servers.b in message
    assert "s3cr3t" not in message and "sig123" not in message  # no header, no signed query


async def test_allowed_cross_origin_redirect_drops_custom_headers(servers: Servers) -> None:
    options = {
        "headers": {"Authorization": SECRET, "X-Api-Key": "k3y-zz9"},
        "allow_cross_origin_redirects": True,
    }
    store = HTTPStore(f"{servers.a}/root", storage_options=options)
    try:
        assert await store.get("cross") == b"b:/root/x"
    finally:
        await store.close()
    assert servers.seen["a"][0]["Authorization"] == SECRET
    (seen_by_b,) = servers.seen["b"]
    assert "Authorization" not in seen_by_b and "X-Api-Key" not in seen_by_b


async def test_allowed_cross_origin_redirect_drops_url_credentials(servers: Servers) -> None:
    root = URL(f"{servers.a}/root").with_user("alice").with_password("pw-zz9")
    store = HTTPStore(str(root), storage_options={"allow_cross_origin_redirects": True})
    try:
        assert await store.get("cross") == b"b:/root/x"
        assert await store.get("same") == b"a:/root/real"
    finally:
        await store.close()
    assert "Authorization" in servers.seen["a"][0]  # basic auth to the user's origin
    assert all("Authorization" in h for h in servers.seen["a"])  # kept on same-origin hops
    assert "Authorization" not in servers.seen["b"][0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # aiohttp deprecates BasicAuth; users still pass it
async def test_session_auth_is_never_sent_cross_origin(servers: Servers) -> None:
    options = {
        "client_kwargs": {"auth": aiohttp.BasicAuth("bob", "pw-zz9")},
        "allow_cross_origin_redirects": True,
    }
    store = HTTPStore(f"{servers.a}/root", storage_options=options)
    try:
        with pytest.raises(RedirectRefusedError, match="client_kwargs auth/headers"):
            await store.get("cross")
    finally:
        await store.close()
    assert servers.seen["b"] == []


async def test_session_headers_are_never_sent_cross_origin(servers: Servers) -> None:
    options = {"client_kwargs": {"headers": {"X-Api-Key": "k3y-zz9"}}, "allow_cross_origin_redirects": True}
    store = HTTPStore(f"{servers.a}/root", storage_options=options)
    try:
        with pytest.raises(RedirectRefusedError, match="client_kwargs auth/headers"):
            await store.get("cross")
    finally:
        await store.close()
    assert servers.seen["b"] == []


@pytest.mark.parametrize(
    "path", ["link-local", "link-local-v6", "aws-v6", "gcp", "mapped", "azure-wire", "nat64"]
)
@pytest.mark.parametrize("allow", [False, True])
async def test_metadata_and_link_local_targets_are_refused(servers: Servers, path: str, allow: bool) -> None:
    options = {"headers": {"Authorization": SECRET}, "allow_cross_origin_redirects": allow}
    store = HTTPStore(f"{servers.a}/root", storage_options=options)
    try:
        with pytest.raises(RedirectRefusedError) as info:
            await store.get(path)
    finally:
        await store.close()
    if allow:
        assert "link-local / " in str(info.value)
    assert "s3cr3t" not in str(info.value)


async def test_redirect_loops_and_other_schemes_are_refused(servers: Servers) -> None:
    store = HTTPStore(f"{servers.a}/root", storage_options={"allow_cross_origin_redirects": True})
    try:
        with pytest.raises(RedirectRefusedError, match="more than 10 redirects"):
            await store.get("loop")
        with pytest.raises(RedirectRefusedError, match="not an http"):
            await store.get("ftp")
    finally:
        await store.close()
    assert len(servers.seen["a"]) == 11 + 1


@pytest.fixture
def tls_ca() -> trustme.CA:
    ca = trustme.CA()
    # aiohttp verifies with one module-level context; teach it the test CA (adds trust only).
    ca.configure_trust(aiohttp.connector._SSL_CONTEXT_VERIFIED)
    return ca


async def test_https_to_http_is_refused_even_when_cross_origin_is_allowed(
    servers: Servers, tls_ca: trustme.CA
) -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    downgrade = {"/root/down": lambda: f"{servers.b}/root/plain", "/root/up": "/root/real"}
    tls = await servers.start(servers.app("a", downgrade), ssl_context=server_ctx)
    options = {"headers": {"Authorization": SECRET}, "allow_cross_origin_redirects": True}
    store = HTTPStore(f"{tls}/root", storage_options=options)
    try:
        assert await store.get("up") == b"a:/root/real"  # TLS works, same-origin followed
        with pytest.raises(RedirectRefusedError, match="downgrades https to http"):
            await store.get("down")
    finally:
        await store.close()
    assert servers.seen["b"] == []


async def test_names_resolving_to_metadata_addresses_are_refused() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return {"evil.example": ["169.254.169.254"], "fine.example": ["127.0.0.1"]}[host]

    policy = RedirectPolicy(allow_cross_origin=True, resolver=resolver)
    here = URL("http://127.0.0.1:1/root/a")
    with pytest.raises(RedirectRefusedError, match="resolves to a link-local"):
        await policy.check(here, URL("http://evil.example/x"), hops=1)
    assert await policy.check(here, URL("http://fine.example/x"), hops=1) is True
    assert await policy.check(here, URL("http://127.0.0.1:1/other"), hops=1) is False


@pytest.mark.parametrize(
    ("address", "forbidden"),
    [
        ("169.254.169.254", True),
        ("169.254.0.1", True),
        ("fe80::1", True),
        ("fe80::1%eth0", True),
        ("fd00:ec2::254", True),
        ("::ffff:169.254.169.254", True),
        ("100.100.100.200", True),
        ("168.63.129.16", True),
        ("::ffff:168.63.129.16", True),
        ("64:ff9b::a9fe:a9fe", True),
        ("2002:a9fe:a9fe::1", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("::1", False),
        ("example.org", False),
    ],
)
def test_forbidden_address(address: str, forbidden: bool) -> None:
    assert forbidden_address(address) is forbidden


def test_redirect_refused_error_is_a_store_error() -> None:
    assert issubclass(RedirectRefusedError, StoreError)


async def test_refused_redirect_message_shows_no_url_credentials(servers: Servers) -> None:
    root = URL(f"{servers.a}/root").with_user("alice").with_password("pw-zz9")
    store = HTTPStore(str(root), storage_options={"headers": {"X-Api-Key": SECRET}})
    try:
        with pytest.raises(RedirectRefusedError) as info:
            await store.get("cross")
    finally:
        await store.close()
    message = str(info.value)
    assert "'cross'" in message
    for secret in ("pw-zz9", "alice", "s3cr3t", "sig123"):
        assert secret not in message
    assert "pw-zz9" not in repr(store)
