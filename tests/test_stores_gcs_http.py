"""GCSStore and HTTPStore beyond the shared conformance suites (tests/test_stores.py).

Errors (denied, missing bucket, server down, stalled, 5xx), servers that bend HTTP
(no ``Range``, no ``HEAD``, no listings, a wrong ``Content-Range``), credentials,
URL quoting, HTML index parsing, and zarr hierarchies read through both stores.
The servers are real: fake-gcs-server and tests/http_server.py (see conftest.py).
"""

from __future__ import annotations

import asyncio
import base64
import os
import pickle
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import GCSServer, HTTPServer, free_port, start_fake_gcs

import azarr
from azarr.errors import (
    PermissionDeniedError,
    ReadOnlyError,
    StoreError,
    StoreUnavailableError,
    ThrottledError,
    TransientStoreError,
)
from azarr.storage import ByteRange, GCSStore, HTTPStore, LocalStore, Store, from_url
from azarr.storage._http import parse_index

VALUE = b"0123456789"
RANGES = [(0, 3), (2, 5), (5, None), (-3, None), (-30, None), (8, 100), (10, None), (20, 30), (4, 4)]


async def collect(it: AsyncIterator[str]) -> list[str]:
    return sorted([x async for x in it])


def write_tree(root: Path, data: dict[str, bytes]) -> None:
    for key, value in data.items():
        path = root.joinpath(*key.split("/"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value)


@pytest.fixture
def served(http_server: HTTPServer) -> Callable[[dict[str, bytes]], str]:
    """``served(data) -> name``: write ``data`` under a fresh directory of the served root."""

    def serve(data: dict[str, bytes]) -> str:
        name = f"t-{uuid.uuid4().hex}"
        (http_server.root / name).mkdir()
        write_tree(http_server.root / name, data)
        return name

    return serve


# ====================================================================== HTTP
@pytest.mark.http
class TestHTTPErrors:
    async def test_forbidden(self, http_server: HTTPServer, closing: Callable[[Store], Any]) -> None:
        write_tree(http_server.root / "forbidden", {"x/k": b"secret data"})
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/forbidden/x"))
        for op in (lambda: store.get("k"), lambda: store.exists("k"), lambda: store.getsize("k")):
            with pytest.raises(PermissionDeniedError) as info:
                await op()
            message = str(info.value)
            assert f"{http_server.url}/forbidden/x" in message and "'k'" in message and "403" in message
            assert isinstance(info.value, PermissionError)
        with pytest.raises(PermissionDeniedError):
            await store.get("k", ByteRange(0, 2))

    async def test_missing_keys_are_none(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/{served({'k': VALUE})}"))
        assert await store.get("k") == VALUE
        assert await store.get("missing") is None
        assert await store.get("missing", ByteRange(2, 4)) is None
        assert not await store.exists("missing")
        # A hierarchy root that does not exist: everything is missing, nothing listed.
        gone: HTTPStore = closing(HTTPStore(f"{http_server.url}/no-such-root"))
        assert await gone.get("k") is None
        assert await collect(gone.list_dir("")) == []
        assert not gone.supports_listing  # 404 at the root: no listings to ask for

    @pytest.mark.parametrize(
        ("code", "error"),
        [(500, TransientStoreError), (503, TransientStoreError), (429, ThrottledError), (418, StoreError)],
    )
    async def test_unexpected_status(
        self,
        http_server: HTTPServer,
        served: Callable[[dict[str, bytes]], str],
        closing: Any,
        code: int,
        error: type[Exception],
    ) -> None:
        name = served({"k": VALUE})
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_status/{code}/{name}"))
        for op in (lambda: store.get("k"), lambda: store.exists("k"), lambda: store.getsize("k")):
            with pytest.raises(error) as info:
                await op()
            assert type(info.value) is error  # not "denied", not "unavailable"
            assert f"HTTP {code}" in str(info.value) and store.url in str(info.value)
        with pytest.raises(error):
            await collect(store.list_dir("sub"))

    async def test_unauthorized_without_credentials(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        name = served({"k": VALUE})
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_needauth/{name}"))
        with pytest.raises(PermissionDeniedError, match="401"):
            await store.get("k")
        wrong: HTTPStore = closing(
            HTTPStore(
                f"{http_server.url}/_needauth/{name}",
                storage_options={"headers": {"Authorization": "Bearer wrong-token"}},
            )
        )
        with pytest.raises(PermissionDeniedError) as info:
            await wrong.exists("k")
        assert "wrong-token" not in str(info.value)

    async def test_credentials(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        basic = "Basic " + base64.b64encode(b"azarr:azarr-secret").decode()
        name = served({"k": VALUE})
        url = f"{http_server.url}/_needauth/{name}"
        port = http_server.url.rsplit(":", 1)[1]
        stores: list[HTTPStore] = [
            HTTPStore(url, storage_options={"headers": {"Authorization": "Bearer azarr-test-token"}}),
            HTTPStore(url, storage_options={"client_kwargs": {"headers": {"Authorization": basic}}}),
            HTTPStore(f"http://azarr:azarr-secret@127.0.0.1:{port}/_needauth/{name}"),
        ]
        for store in stores:
            closing(store)
            assert await store.get("k") == VALUE
            assert await store.get("k", ByteRange(-2)) == b"89"
            assert await store.exists("k") and await store.getsize("k") == len(VALUE)
            assert await store.get("missing") is None
            assert "azarr-secret" not in repr(store) and "azarr-test-token" not in repr(store)
            clone = pickle.loads(pickle.dumps(store))  # credentials are configuration
            assert await clone.get("k") == VALUE
            await clone.close()
        assert stores[2].url == url  # no user:password in messages
        assert "azarr-secret" not in stores[2].url

    async def test_connection_refused(self, closing: Any) -> None:
        port = free_port()  # nothing listens there
        store: HTTPStore = closing(HTTPStore(f"http://127.0.0.1:{port}/data.zarr"))
        for op in (
            lambda: store.get("k"),
            lambda: store.get("k", ByteRange(0, 4)),
            lambda: store.exists("k"),
            lambda: store.getsize("k"),
            lambda: collect(store.list_dir("")),
        ):
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailableError) as info:
                await op()
            assert time.monotonic() - t0 < 5
            assert f"http://127.0.0.1:{port}/data.zarr" in str(info.value)
            assert isinstance(info.value, ConnectionError)
            assert isinstance(info.value, TransientStoreError)

    async def test_stalled_server_times_out(self, closing: Any) -> None:
        release = asyncio.Event()

        async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read(4096)  # take the request, never answer
            await release.wait()
            writer.close()

        server = await asyncio.start_server(stall, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store: HTTPStore = closing(HTTPStore(f"http://127.0.0.1:{port}/x", storage_options={"timeout": 0.3}))
        try:
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailableError, match="Timeout") as info:
                await store.get("k")
            assert isinstance(info.value, TransientStoreError)  # retried by the scheduler
            assert time.monotonic() - t0 < 3
        finally:
            release.set()
            server.close()
            await server.wait_closed()


@pytest.mark.http
class TestHTTPServerQuirks:
    @pytest.mark.parametrize(("start", "end"), RANGES)
    async def test_server_ignoring_range(
        self,
        http_server: HTTPServer,
        served: Callable[[dict[str, bytes]], str],
        closing: Any,
        start: int,
        end: int | None,
    ) -> None:
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_norange/{served({'k': VALUE, 'e': b''})}"))
        rng = ByteRange(start, end)
        assert await store.get("k", rng) == VALUE[start:end]
        assert await store.get("e", rng) == b""
        assert await store.get("missing", rng) is None

    async def test_wrong_content_range(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_badrange/{served({'k': VALUE})}"))
        assert await store.get("k") == VALUE
        assert await store.get("k", ByteRange(0, 2)) == b"01"  # what was asked for
        for rng in (ByteRange(5, 8), ByteRange(-3), ByteRange(0, 5), ByteRange(3)):
            with pytest.raises(StoreError, match="Content-Range") as info:
                await store.get("k", rng)
            assert "'k'" in str(info.value) and store.url in str(info.value)

    async def test_server_refusing_head(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_nohead/{served({'k': VALUE, 'e': b''})}"))
        assert await store.exists("k") and await store.exists("e")
        assert not await store.exists("missing")
        assert await store.getsize("k") == len(VALUE) and await store.getsize("e") == 0
        with pytest.raises(FileNotFoundError):
            await store.getsize("missing")
        assert await store.get("e", ByteRange(0, 0)) == b""
        assert await store.get("missing", ByteRange(1, 1)) is None

    async def test_no_directory_listings(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        name = served({".zgroup": b"{}", "a/0": VALUE})
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/_nolist/{name}"))
        assert store.supports_listing  # not known before asking
        assert await collect(store.list_dir("a")) == []  # a sub-directory: no verdict yet
        assert store.supports_listing
        assert await collect(store.list_prefix("")) == []
        assert not store.supports_listing  # the root has no index: none anywhere
        assert await collect(store.list_dir("")) == []
        assert await store.get("a/0") == VALUE  # reads are unaffected

        off: HTTPStore = closing(HTTPStore(f"{http_server.url}/{name}", storage_options={"listings": False}))
        assert not off.supports_listing
        assert await collect(off.list_prefix("")) == []
        clone = pickle.loads(pickle.dumps(store))
        assert clone.supports_listing  # configuration only: asks again
        await clone.close()

    async def test_directory_is_not_a_value(
        self, http_server: HTTPServer, served: Callable[[dict[str, bytes]], str], closing: Any
    ) -> None:
        # The server redirects ".../a" to ".../a/" (an HTML index): not a value.
        store: HTTPStore = closing(HTTPStore(f"{http_server.url}/{served({'a/b/0': VALUE})}"))
        for key in ("a", "a/b"):
            assert await store.get(key) is None
            assert await store.get(key, ByteRange(0, 4)) is None
            assert not await store.exists(key)
            with pytest.raises(FileNotFoundError):
                await store.getsize(key)
        assert await store.get("a/b/0") == VALUE


# ---------------------------------------------------------------------- configuration
class TestHTTPConfiguration:
    def test_urls(self) -> None:
        store = HTTPStore("https://Example.org:8443/data/x.zarr/")
        assert store.url == "https://example.org:8443/data/x.zarr"
        assert repr(store) == "HTTPStore('https://example.org:8443/data/x.zarr', read_only=True)"
        assert HTTPStore("http://[::1]:8080/x").url == "http://[::1]:8080/x"
        for bad in ("ftp://host/x", "http:///x", "/local/path", "https://h/x.zarr?sig=1", "https://h/x#f"):
            with pytest.raises(ValueError):
                HTTPStore(bad)

    def test_key_urls_are_quoted(self) -> None:
        store = HTTPStore("http://h/my data/x%20y.zarr")
        cases = {
            "données/ü/0": "donn%C3%A9es/%C3%BC/0",
            "star*?[x]": "star%2A%3F%5Bx%5D",
            "100%/k": "100%25/k",
            "x#y": "x%23y",
            "with space/k": "with%20space/k",
            "a/.zarray": "a/.zarray",
            "日本": "%E6%97%A5%E6%9C%AC",
        }
        for key, quoted in cases.items():
            assert str(store._key_url(key)) == f"http://h/my%20data/x%20y.zarr/{quoted}"
        assert str(store._key_url("a/", directory=True)) == "http://h/my%20data/x%20y.zarr/a/"
        assert str(store._key_url("", directory=True)) == "http://h/my%20data/x%20y.zarr/"

    def test_options_validated(self) -> None:
        with pytest.raises(TypeError, match="simple_links"):
            HTTPStore("http://h/x", storage_options={"simple_links": True})
        with pytest.raises(TypeError, match="connector"):
            HTTPStore("http://h/x", storage_options={"client_kwargs": {"connector": object()}})
        with pytest.raises(ValueError):
            HTTPStore("http://h/x", storage_options={"timeout": 0})
        with pytest.raises(ValueError):
            HTTPStore("http://h/x", storage_options={"max_connections": 0})
        with pytest.raises(TypeError, match="storage_options"):
            from_url("https://h/x", storage_options={"anon": True})

    async def test_one_pool_per_event_loop(self) -> None:
        store = HTTPStore("http://127.0.0.1:9/x", storage_options={"max_connections": 7, "timeout": 5})
        session = await store.session()
        assert await store.session() is session
        assert session.connector is not None and session.connector.limit == 7
        assert session.timeout.sock_read == 5 and session.timeout.total is None

        def other_loop() -> Any:
            async def get() -> Any:
                return await store.session()

            return asyncio.run(get())  # no close(): the loop's shutdown closes it

        other = await asyncio.to_thread(other_loop)
        assert other is not session and other.closed
        assert not session.closed
        await store.close()
        assert not session.closed  # kept connection_linger seconds for the next store
        assert await store.session() is session
        with azarr.config.set(connection_linger=0):
            await store.close()
        assert session.closed
        assert await store.session() is not session  # usable again after close()
        await store.close()

    async def test_stores_with_equal_options_share_a_pool(self) -> None:
        options: dict[str, Any] = {"max_connections": 5, "timeout": 3}
        first = HTTPStore("http://127.0.0.1:9/a", storage_options=options)
        second = HTTPStore("http://127.0.0.1:9/b", storage_options=dict(options))
        session = await first.session()
        assert await second.session() is session
        other = HTTPStore("http://127.0.0.1:9/a", storage_options={**options, "timeout": 4})
        headers = HTTPStore(
            "http://127.0.0.1:9/a", storage_options={**options, "client_kwargs": {"headers": {"x": "1"}}}
        )
        assert await other.session() is not session
        assert await headers.session() is not session  # unhashable options: its own pool
        with azarr.config.set(connection_linger=0):
            await first.close()
            assert not session.closed  # the second store still uses it
            await second.close()
            assert session.closed
            await asyncio.gather(other.close(), headers.close())

    async def test_default_pool_follows_config(self) -> None:
        store = HTTPStore("http://127.0.0.1:9/x")
        with azarr.config.set(max_concurrency=12):
            session = await store.session()
        assert session.connector is not None and session.connector.limit == 12
        await store.close()

    async def test_writes_refused_before_any_request(self) -> None:
        store = HTTPStore("http://127.0.0.1:9/x")
        for op in (lambda: store.set("k", b"v"), lambda: store.delete("k"), lambda: store.delete_prefix("")):
            with pytest.raises(ReadOnlyError, match=r"http://127\.0\.0\.1:9/x"):
                await op()
        assert store._sessions is None  # no session was made


class TestParseIndex:
    """HTML directory indexes as common servers write them."""

    PAGE = "http://host/data/x.zarr/"

    def test_nginx_autoindex(self) -> None:
        html = """<html><head><title>Index of /data/x.zarr/</title></head><body>
<h1>Index of /data/x.zarr/</h1><hr><pre><a href="../">../</a>
<a href="a/">a/</a>                          21-Nov-2026 20:00       -
<a href="donn%C3%A9es/">donn&#233;es/</a>    21-Nov-2026 20:00       -
<a href=".zgroup">.zgroup</a>                21-Nov-2026 20:00      24
<a href="a-very-long-file-name-nginx-cuts.bin">a-very-long-file-name-ng..&gt;</a> 21-Nov-2026 9
</pre><hr></body></html>"""
        assert parse_index(html, self.PAGE) == (
            {".zgroup", "a-very-long-file-name-nginx-cuts.bin"},
            {"a", "données"},
        )

    def test_apache_autoindex(self) -> None:
        html = """<table><tr><th><img src="/icons/blank.gif" alt="[ICO]"></th>
<th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th></tr>
<tr><td><a href="/data/">Parent Directory</a></td></tr>
<tr><td><a href="0.0">0.0</a></td></tr><tr><td><a href="sub/">sub/</a></td></tr>
<tr><td><a href="a%26b">a&amp;b</a></td></tr></table>"""
        assert parse_index(html, self.PAGE) == ({"0.0", "a&b"}, {"sub"})

    def test_python_http_server(self) -> None:
        html = """<ul><li><a href=".zarray">.zarray</a></li>
<li><a href="with%20space/">with space/</a></li><li><a href="star%2A%3F%5Bx%5D">star*?[x]</a></li></ul>"""
        assert parse_index(html, self.PAGE) == ({".zarray", "star*?[x]"}, {"with space"})

    def test_aiohttp_show_index(self) -> None:
        # Absolute links; directories marked only by the link text.
        html = """<ul><li><a href="/data/x.zarr/a">a/</a></li><li><a href="/data/x.zarr/k">k</a></li>
<li><a href="/data/x.zarr/%C3%BC">ü/</a></li></ul>"""
        assert parse_index(html, self.PAGE) == ({"k"}, {"a", "ü"})

    def test_links_that_are_not_entries(self) -> None:
        html = """<a href="http://other.host/data/x.zarr/evil">x</a>
<a href="/data/elsewhere">x</a><a href="a/b/c">deeper</a><a href="#top">top</a>
<a href="mailto:admin@host">mail</a><a href="javascript:void(0)">js</a><a>no href</a>
<a href="..">up</a><a href="./">here</a><a href="a\\b">bad key</a>
<a href="http://host/data/x.zarr/ok">ok</a><a href="https://host/data/x.zarr/tls">tls</a>"""
        assert parse_index(html, self.PAGE) == ({"ok", "tls"}, set())

    def test_base_href_and_broken_html(self) -> None:
        html = '<head><base href="http://host/other/"></head><a href="k">k</a><a href="/data/x.zarr/j">j</a>'
        assert parse_index(html, self.PAGE) == ({"j"}, set())  # "k" is /other/k
        assert parse_index("", self.PAGE) == (set(), set())
        # Unclosed tags; a page URL without its trailing slash still lists that directory.
        assert parse_index("<a href='q'>q<a href=\"r/\">r", "http://host/data/x.zarr") == ({"q"}, {"r"})


# ---------------------------------------------------------------------- zarr through HTTP
@pytest.mark.http
async def test_zarr_hierarchy_over_http(http_server: HTTPServer, closing: Any) -> None:
    """azarr writes locally, the server publishes it, azarr reads it back over HTTP."""
    name = f"z-{uuid.uuid4().hex}"
    local = LocalStore(http_server.root / name)
    root = await azarr.group(store=local)
    data = np.arange(600, dtype="<i4").reshape(20, 30)
    arr = await root.create_dataset("g/arr", shape=data.shape, chunks=(7, 11), dtype=data.dtype)
    await arr.setitem(Ellipsis, data)
    await arr.attrs.update({"units": "m"})
    await azarr.consolidate_metadata(local)
    await local.close()

    listed: HTTPStore = closing(HTTPStore(f"{http_server.url}/{name}"))
    group = await azarr.open_group(listed, mode="r")
    assert {k async for k in group.group_keys()} == {"g"}
    got = await azarr.open_array(listed, mode="r", path="g/arr")
    assert got.attrs.asdict() == {"units": "m"}
    np.testing.assert_array_equal(await got.getitem(Ellipsis), data)
    np.testing.assert_array_equal(await got.getitem((slice(3, 17), slice(5, 29))), data[3:17, 5:29])

    # Without any directory listing, consolidated metadata is all it takes.
    unlisted: HTTPStore = closing(HTTPStore(f"{http_server.url}/_nolist/{name}"))
    cons = await azarr.open_consolidated(unlisted)
    node = await cons.get("g/arr")
    assert isinstance(node, azarr.AsyncArray)
    np.testing.assert_array_equal(await node.getitem(Ellipsis), data)
    assert {k async for k in cons.group_keys()} == {"g"}
    with pytest.raises(ReadOnlyError):
        await azarr.create(shape=(2,), store=unlisted, path="new")


# ====================================================================== GCS
@pytest.mark.gcs
class TestGCSErrors:
    async def test_unreachable_endpoint(self, closing: Any) -> None:
        port = free_port()  # nothing listens there
        endpoint = f"http://127.0.0.1:{port}"
        store: GCSStore = closing(
            GCSStore("bucket/x", storage_options={"token": "anon", "endpoint_url": endpoint, "retries": 1})
        )
        for op in (lambda: store.get("k"), lambda: store.set("k", b"v"), lambda: store.exists("k")):
            t0 = time.monotonic()
            with pytest.raises(StoreUnavailableError) as info:
                await op()
            assert time.monotonic() - t0 < 10
            assert "gs://bucket/x" in str(info.value) and endpoint in str(info.value)
            assert isinstance(info.value, ConnectionError)

    async def test_stopped_server(self, closing: Any) -> None:
        server = start_fake_gcs()
        try:
            bucket = server.create_bucket()
            options = {**server.storage_options, "retries": 1}
            store: GCSStore = closing(GCSStore(f"{bucket}/x", storage_options=options))
            await store.set("k", b"v")
            assert await store.get("k") == b"v"
        finally:
            server.stop()
        for op in (
            lambda: store.get("k"),
            lambda: store.set("k", b"w"),
            lambda: collect(store.list_prefix("")),
        ):
            with pytest.raises(StoreUnavailableError, match="unreachable") as info:
                await op()
            assert f"gs://{bucket}/x" in str(info.value) and server.endpoint_url in str(info.value)

    @pytest.mark.http
    @pytest.mark.parametrize("path", ["forbidden", "_status/401"])
    async def test_permission_denied(self, http_server: HTTPServer, closing: Any, path: str) -> None:
        # An "endpoint" whose every answer is 403 (or 401), as GCS gives for a bad token or IAM.
        endpoint = f"{http_server.url}/{path}"
        store: GCSStore = closing(
            GCSStore("bucket/x", storage_options={"token": "anon", "endpoint_url": endpoint, "retries": 1})
        )
        for op in (
            lambda: store.get("k"),
            lambda: store.get("k", ByteRange(0, 2)),
            lambda: store.set("k", b"v"),
            lambda: store.exists("k"),
            lambda: collect(store.list_prefix("")),
        ):
            with pytest.raises(PermissionDeniedError) as info:
                await op()
            assert "gs://bucket/x" in str(info.value) and endpoint in str(info.value)

    @pytest.mark.http
    async def test_server_error(self, http_server: HTTPServer, closing: Any) -> None:
        endpoint = f"{http_server.url}/_status/503"
        store: GCSStore = closing(
            GCSStore("bucket/x", storage_options={"token": "anon", "endpoint_url": endpoint, "retries": 2})
        )
        with pytest.raises(TransientStoreError, match="503") as info:
            await store.get("k")  # the scheduler retries these; the store gave up after 2
        assert "gs://bucket/x" in str(info.value)


@pytest.mark.gcs
class TestGCSConfiguration:
    def test_options(self) -> None:
        store = GCSStore(
            "gcs://bucket/data.zarr/",
            storage_options={"project": "p", "token": "anon", "requester_pays": True},
        )
        assert store.url == "gs://bucket/data.zarr" and store.bucket == "bucket"
        assert store.storage_options["requester_pays"] is True
        assert store.endpoint_url is None and repr(store) == "GCSStore('gs://bucket/data.zarr')"
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="retries"):
                GCSStore("b", storage_options={"retries": bad})
        for empty in ("gs://", "", "gcs:///"):
            with pytest.raises(ValueError, match="bucket"):
                GCSStore(empty)

    async def test_filesystem_is_plain_gcsfs(self, fake_gcs: GCSServer, closing: Any) -> None:
        from gcsfs.core import GCSFileSystem

        assert os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"].lower() in ("false", "0")
        store: GCSStore = closing(
            GCSStore(
                "bucket/x",
                storage_options={**fake_gcs.storage_options, "project": "p", "requester_pays": "billing"},
            )
        )
        fs = await store.filesystem()
        assert isinstance(fs, GCSFileSystem)
        # Not gcsfs's experimental zonal-bucket class, whatever the import order.
        assert all(cls.__name__ != "ExtendedGcsFileSystem" for cls in type(fs).__mro__)
        assert fs.requester_pays == "billing" and fs.project == "p"
        assert fs._get_params({})["userProject"] == "billing"
        # azarr's scheduler owns retrying, so gcsfs makes one attempt per request by default.
        assert fs._azarr_request is not None and store.storage_options["retries"] == 1
        custom: GCSStore = closing(
            GCSStore("bucket/x", storage_options={**fake_gcs.storage_options, "retries": 2})
        )
        assert (await custom.filesystem())._azarr_request is not None

    async def test_pickle_keeps_configuration(
        self, fake_gcs: GCSServer, gcs_bucket: str, closing: Any
    ) -> None:
        store: GCSStore = closing(GCSStore(f"{gcs_bucket}/p", storage_options=fake_gcs.storage_options))
        await store.set("k", b"v")
        assert await store.get("missing") is None  # a miss checks the bucket, once
        assert store._bucket_known
        clone: GCSStore = closing(pickle.loads(pickle.dumps(store)))
        assert not clone._bucket_known and not clone._loops.states
        assert clone.storage_options == store.storage_options
        assert await clone.get("k") == b"v"

    @pytest.mark.parametrize("scheme", ["gs", "gcs"])
    async def test_zarr_roundtrip_from_url(self, fake_gcs: GCSServer, gcs_bucket: str, scheme: str) -> None:
        url = f"{scheme}://{gcs_bucket}/data.zarr"
        data = np.linspace(0, 1, 500, dtype="<f8").reshape(25, 20)
        arr = await azarr.create(
            shape=data.shape,
            chunks=(6, 8),
            dtype=data.dtype,
            store=url,
            storage_options=fake_gcs.storage_options,
        )
        await arr.setitem(Ellipsis, data)
        again = await azarr.open_array(url, mode="r", storage_options=fake_gcs.storage_options)
        np.testing.assert_array_equal(await again.getitem(Ellipsis), data)
        for a in (arr, again):
            await a.store.close()
