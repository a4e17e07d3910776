"""Stores over HTTPS: SeaweedFS's S3 gateway, fake-gcs-server and an aiohttp server, with a test CA's certificate.

Real S3 and GCS are HTTPS; these tests check that both S3 transports verify the
server's certificate against the CA bundle the user names (``client_kwargs["verify"]``,
as s3fs/botocore take it, or ``AWS_CA_BUNDLE``), can be told not to verify, and that
every network store turns an untrusted certificate into one clear, unretried error that
names the key.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal

import numpy as np
import pytest
from aiohttp import web
from servers import S3Server, start_fake_gcs

import azarr
from azarr.errors import RetriesExhaustedError, StoreUnavailableError, TransientStoreError
from azarr.storage import GCSStore, HTTPStore, S3Store, Store

Transport = Literal["aiohttp", "s3fs"]


@pytest.fixture
def https_store(
    seaweedfs: S3Server, s3_bucket: str, closing: Callable[[Store], Any]
) -> Callable[..., S3Store]:
    """``make(transport, **client_kwargs)``: an S3Store on the HTTPS endpoint, closed after the test."""
    assert seaweedfs.https_endpoint_url is not None

    def make(transport: Transport, **client_kwargs: Any) -> S3Store:
        options: dict[str, Any] = {
            "endpoint_url": seaweedfs.https_endpoint_url,
            "key": seaweedfs.key,
            "secret": seaweedfs.secret,
        }
        if client_kwargs:
            options["client_kwargs"] = client_kwargs
        store: S3Store = closing(S3Store(f"{s3_bucket}/data", storage_options=options, transport=transport))
        return store

    return make


@pytest.mark.s3
@pytest.mark.parametrize("transport", ["aiohttp", "s3fs"])
async def test_array_round_trip_over_https_with_a_ca_bundle(
    https_store: Callable[..., S3Store], tls_files: dict[str, str], transport: Transport
) -> None:
    store = https_store(transport, verify=tls_files["ca"])
    data = np.arange(200 * 300, dtype="<f8").reshape(200, 300)
    arr = await azarr.create(shape=data.shape, chunks=(64, 64), dtype=data.dtype, store=store)
    await arr.set_basic_selection(..., data)
    reopened = await azarr.open_array(https_store(transport, verify=tls_files["ca"]), mode="r")
    np.testing.assert_array_equal(await reopened.get_basic_selection(...), data)
    np.testing.assert_array_equal(
        await reopened.get_orthogonal_selection(([3, 150], slice(10, 250))), data[[3, 150], 10:250]
    )


@pytest.mark.s3
async def test_aws_ca_bundle_names_the_ca(
    https_store: Callable[..., S3Store],
    tls_files: dict[str, str],
    seaweedfs: S3Server,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seaweedfs.admin.put_object(Bucket=s3_bucket, Key="data/k", Body=b"over tls")
    monkeypatch.setenv("AWS_CA_BUNDLE", tls_files["ca"])
    assert await https_store("aiohttp").get("k") == b"over tls"


@pytest.mark.s3
@pytest.mark.parametrize("transport", ["aiohttp", "s3fs"])
async def test_verify_false_skips_the_certificate_check(
    https_store: Callable[..., S3Store], seaweedfs: S3Server, s3_bucket: str, transport: Transport
) -> None:
    seaweedfs.admin.put_object(Bucket=s3_bucket, Key="data/k", Body=b"unverified")
    assert await https_store(transport, verify=False).get("k") == b"unverified"


@pytest.mark.s3
@pytest.mark.parametrize("transport", ["aiohttp", "s3fs"])
async def test_an_untrusted_certificate_fails_at_once_naming_key_and_remedy(
    https_store: Callable[..., S3Store],
    seaweedfs: S3Server,
    s3_bucket: str,
    transport: Transport,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seaweedfs.admin.put_object(Bucket=s3_bucket, Key="data/k", Body=b"secret")
    monkeypatch.delenv("AWS_CA_BUNDLE", raising=False)
    with pytest.raises(StoreUnavailableError) as info:
        await https_store(transport).get("k")
    message = str(info.value)
    assert "'k'" in message and "certificate" in message and "verify" in message
    # Not a transient error: the scheduler's retries (with backoff) would meet the same
    # certificate. Opening an array goes through them: one attempt, then this error.
    assert not isinstance(info.value, TransientStoreError)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as opened:
        await azarr.open_array(https_store(transport), mode="r")
    assert not isinstance(opened.value, (TransientStoreError, RetriesExhaustedError))
    # open_array asks for its documents (v2's and v3's) together: whichever failed first is named.
    message = str(opened.value)
    assert re.search(r"'(\.z(array|attrs|group)|zarr\.json)'", message) and "certificate" in message
    assert time.monotonic() - started < 5.0  # the retry policy's backoff alone would take seconds


@pytest.fixture
async def https_site(tls_files: dict[str, str]) -> AsyncIterator[str]:
    """An aiohttp server on 127.0.0.1 serving HTTPS with the test certificate; every
    path answers its own name. Yields the URL of a hierarchy root below it."""

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=request.path.encode())

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tls_files["cert"], tls_files["key"])
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx).start()
    try:
        yield f"https://127.0.0.1:{runner.addresses[0][1]}/data.zarr"
    finally:
        await runner.cleanup()


async def test_http_store_names_an_untrusted_certificate(
    https_site: str, closing: Callable[[Store], Any]
) -> None:
    store = closing(HTTPStore(https_site))
    with pytest.raises(StoreUnavailableError) as info:
        await store.get(".zarray")
    assert not isinstance(info.value, TransientStoreError)
    message = str(info.value)
    assert "'.zarray'" in message and "certificate" in message and "'ssl'" in message


async def test_http_store_ssl_option_trusts_a_ca_or_skips_the_check(
    https_site: str, tls_files: dict[str, str], closing: Callable[[Store], Any]
) -> None:
    context = ssl.create_default_context(cafile=tls_files["ca"])
    for option in (tls_files["ca"], context, False):
        store = closing(HTTPStore(https_site, storage_options={"ssl": option}))
        assert await store.get("k") == b"/data.zarr/k", option
    # Stores with the same option share one connection pool; different options do not.
    same = [HTTPStore(https_site, storage_options={"ssl": tls_files["ca"]}) for _ in range(2)]
    assert same[0]._shared_sessions() is same[1]._shared_sessions()
    other = HTTPStore(https_site, storage_options={"ssl": False})
    assert other._shared_sessions() is not same[0]._shared_sessions()
    with pytest.raises(ValueError, match="ssl must be"):
        HTTPStore(https_site, storage_options={"ssl": 1})


@pytest.mark.gcs
async def test_gcs_store_names_an_untrusted_certificate(
    tls_files: dict[str, str], closing: Callable[[Store], Any]
) -> None:
    server = start_fake_gcs(tls=tls_files)
    try:
        store: GCSStore = closing(GCSStore("some-bucket/data", storage_options=server.storage_options))
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as info:
            await azarr.open_array(store, mode="r")
        assert time.monotonic() - started < 5.0  # one attempt: no backoff between retries
    finally:
        server.stop()
    assert not isinstance(info.value, (TransientStoreError, RetriesExhaustedError))
    # names the metadata key it was reading (open_array asks for v2's and v3's at once)
    assert "certificate" in str(info.value) and ("'.z" in str(info.value) or "'zarr.json'" in str(info.value))
