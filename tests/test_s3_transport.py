"""The lean S3 transport (``azarr.storage._s3_transport``) on real servers and a fake one.

SeaweedFS checks signatures (auth, anonymous access); moto does not, but is a
second implementation of the S3 wire protocol; the fault proxy counts requests, so
"exactly one request per attempt" is checked on the wire. A tiny aiohttp app
stands in for AWS where a real server cannot (region redirects, header capture).
The store-level behaviour of both transports is covered by tests/test_stores.py.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import gzip
import hashlib
import hmac
import pickle
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import botocore.auth
import crc32c
import numpy as np
import pytest
from aiohttp import web
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, RefreshableCredentials
from fault_proxy import CHUNK_KEYS, FaultProxy, FaultRule
from servers import S3Server, free_port

import azarr
from azarr.errors import (
    ConnectionFailedError,
    PermissionDeniedError,
    StoreError,
    StoreUnavailableError,
    ThrottledError,
    TransientStoreError,
)
from azarr.scheduler import stats_for
from azarr.storage import ByteRange, S3Store
from azarr.storage._s3_transport import (
    UNSIGNED_PAYLOAD,
    S3ResponseError,
    S3Transport,
    _SigningKeys,
    crc32c_header,
    derive_signing_key,
    sign_v4,
)

pytestmark = pytest.mark.s3

VALUE = b"0123456789"
# Keys that need URL-quoting, and ones that look like quoting or query syntax already.
ODD_KEYS = [
    "données/ü/0",
    "with space/k",
    "star*?[x]",
    "plus+eq=&x",
    "tilde~x",
    "%41",
    "%2F",
    "hash#frag",
    "q?x=1&y",
    "emoji😀/0.0",
    "semi;colon,comma'quote\"",
    "中文/数据",
]
RANGES = [
    (0, 3),
    (2, 5),
    (5, None),
    (-3, None),
    (-30, None),
    (8, 100),
    (10, None),
    (20, 30),
    (4, 4),
    (12, 12),
]


def transport_for(server: S3Server, bucket: str, prefix: str = "", **options: Any) -> S3Transport:
    return S3Transport(bucket, prefix, storage_options={**server.storage_options, **options})


@pytest.fixture(params=["seaweedfs", "moto_server"])
def server(request: pytest.FixtureRequest) -> S3Server:
    server: S3Server = request.getfixturevalue(request.param)
    return server


@pytest.fixture
def bucket(server: S3Server) -> str:
    return server.create_bucket()


@pytest.fixture
async def transports() -> AsyncIterator[list[S3Transport]]:
    """Transports the test makes; closed at teardown."""
    made: list[S3Transport] = []
    yield made
    for t in made:
        await t.close()


# ---------------------------------------------------------------------- both servers
@pytest.mark.parametrize("key", ODD_KEYS)
async def test_odd_keys_round_trip_with_their_exact_names(
    server: S3Server, bucket: str, key: str, transports: list[S3Transport]
) -> None:
    t = transport_for(server, bucket, "pre fix/ü")
    transports.append(t)
    await t.put(key, VALUE)
    assert await t.get(key) == VALUE
    assert await t.get(key, 2, 5) == VALUE[2:5]
    assert await t.head(key) == len(VALUE)
    # The object carries the key itself: not double-quoted, not unquoted.
    listed = server.admin.list_objects_v2(Bucket=bucket)["Contents"]
    assert [o["Key"] for o in listed] == [f"pre fix/ü/{key}"]
    # And s3fs (botocore's own quoting) finds it under the same name.
    s3fs_store = S3Store(f"{bucket}/pre fix/ü", storage_options=server.storage_options, transport="s3fs")
    try:
        assert await s3fs_store.get(key) == VALUE
    finally:
        await s3fs_store.close()
    await t.delete(key)
    assert await t.get(key) is None
    assert await t.head(key) is None


@pytest.mark.parametrize(("start", "end"), RANGES)
async def test_ranges(
    server: S3Server, bucket: str, start: int, end: int | None, transports: list[S3Transport]
) -> None:
    t = transport_for(server, bucket)
    transports.append(t)
    await t.put("k", VALUE)
    await t.put("empty", b"")
    assert await t.get("k", start, end) == VALUE[start:end]
    assert await t.get("empty", start, end) == b""
    assert await t.get("missing", start, end) is None


async def test_missing_key_vs_missing_bucket(
    server: S3Server, bucket: str, transports: list[S3Transport]
) -> None:
    t = transport_for(server, bucket, "x")
    nobucket = transport_for(server, f"azarr-missing-{uuid.uuid4().hex[:12]}", "x")
    transports += [t, nobucket]
    assert await t.get("nope") is None
    assert await t.head("nope") is None
    await t.delete("nope")  # deleting a missing key is fine
    for op in (
        lambda: nobucket.get("k"),
        lambda: nobucket.get("k", 0, 4),
        lambda: nobucket.head("k"),  # HEAD 404 has no body: a probe tells them apart
        lambda: nobucket.put("k", b"v"),
        lambda: nobucket.delete("k"),
    ):
        with pytest.raises(StoreUnavailableError, match="bucket does not exist") as info:
            await op()
        assert f"s3://{nobucket.bucket}/x" in str(info.value)
        assert "'k'" in str(info.value)
        assert server.endpoint_url in str(info.value)
        assert isinstance(info.value.__cause__, S3ResponseError)
        assert info.value.__cause__.error_code == "NoSuchBucket"


async def test_stored_content_encoding_is_not_decoded(
    server: S3Server, bucket: str, transports: list[S3Transport]
) -> None:
    # Zarr wants the stored bytes; botocore returns them as stored, and so must we.
    packed = gzip.compress(b"x" * 1000)
    server.admin.put_object(Bucket=bucket, Key="gz", Body=packed, ContentEncoding="gzip")
    t = transport_for(server, bucket)
    transports.append(t)
    assert await t.get("gz") == packed
    assert await t.head("gz") == len(packed)


async def test_large_values_and_payload_signing(
    server: S3Server, bucket: str, transports: list[S3Transport]
) -> None:
    big = np.random.default_rng(0).bytes(5 * 2**20 + 7)
    for signing in (None, True, False):
        options: dict[str, Any] = {}
        if signing is not None:
            options["config_kwargs"] = {"s3": {"payload_signing_enabled": signing}}
        t = transport_for(server, bucket, f"sign-{signing}", **options)
        transports.append(t)
        await t.put("big", big)
        await t.put("small", b"abc")
        await t.put("mv", memoryview(big)[10:20])
        await t.put("ba", bytearray(b"xyz"))
        await t.put("big-mv", memoryview(big)[3:])  # written in slices (request_body)
        assert await t.get("big") == big
        assert await t.get("big-mv") == big[3:]
        assert await t.get("small") == b"abc"
        assert await t.get("mv") == big[10:20]
        assert await t.get("ba") == b"xyz"


async def test_large_bodies_are_written_in_slices_without_joining() -> None:
    """`request_body`: a body above `BODY_SLICE_BYTES` goes to aiohttp's writer as memoryview
    slices of itself (no copy joins the head to the whole body), with the body's length."""
    from azarr.storage._aiohttp import BODY_SLICE_BYTES, request_body

    body = np.random.default_rng(1).bytes(3 * BODY_SLICE_BYTES + 5)
    assert request_body(body[:BODY_SLICE_BYTES]) == body[:BODY_SLICE_BYTES]
    assert request_body(None) is None
    payload = request_body(body)
    assert payload.size == len(body)
    written: list[memoryview] = []

    class Writer:
        async def write(self, chunk: memoryview) -> None:
            written.append(chunk)

    await payload.write_with_length(Writer(), None)
    assert [len(w) for w in written] == [BODY_SLICE_BYTES] * 3 + [5]
    assert all(isinstance(w, memoryview) and w.obj is written[0].obj for w in written)
    assert b"".join(written) == body
    written.clear()
    await payload.write_with_length(Writer(), 10)
    assert b"".join(written) == body[:10]


# ---------------------------------------------------------------------- SeaweedFS: authentication
async def test_wrong_secret_is_permission_denied(
    seaweedfs: S3Server, s3_bucket: str, transports: list[S3Transport]
) -> None:
    t = transport_for(seaweedfs, s3_bucket, "x", secret="not-the-secret")
    transports.append(t)
    for op in (lambda: t.get("k"), lambda: t.put("k", b"v"), lambda: t.head("k"), lambda: t.delete("k")):
        with pytest.raises(PermissionDeniedError) as info:
            await op()
        message = str(info.value)
        assert f"s3://{s3_bucket}/x" in message and "'k'" in message
        assert seaweedfs.endpoint_url in message
        assert "not-the-secret" not in message
        assert isinstance(info.value.__cause__, S3ResponseError)
        assert info.value.__cause__.status == 403


async def test_anonymous_reads_are_unsigned(
    seaweedfs: S3Server, s3_bucket: str, transports: list[S3Transport]
) -> None:
    owner = transport_for(seaweedfs, s3_bucket)
    anon = S3Transport(s3_bucket, storage_options={"endpoint_url": seaweedfs.endpoint_url, "anon": True})
    from botocore import UNSIGNED

    unsigned = S3Transport(
        s3_bucket,
        storage_options={
            "endpoint_url": seaweedfs.endpoint_url,
            "config_kwargs": {"signature_version": UNSIGNED},
        },
    )
    transports += [owner, anon, unsigned]
    await owner.put("public", b"data")
    for reader in (anon, unsigned):
        assert reader.anon
        assert await reader.get("public") == b"data"
        assert await reader.get("public", 1, 3) == b"at"
        assert await reader.head("public") == 4
        assert await reader.get("missing") is None
        with pytest.raises(PermissionDeniedError, match="AccessDenied"):
            await reader.put("public", b"vandalism")
    assert await owner.get("public") == b"data"


async def test_credentials_from_environment_and_profile(
    seaweedfs: S3Server,
    s3_bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    transports: list[S3Transport],
) -> None:
    owner = transport_for(seaweedfs, s3_bucket)
    transports.append(owner)
    await owner.put("k", b"v")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    endpoint = {"endpoint_url": seaweedfs.endpoint_url}

    # Nothing anywhere: a clear error, not an unsigned request.
    t = S3Transport(s3_bucket, storage_options=endpoint)
    transports.append(t)
    with pytest.raises(PermissionDeniedError, match="no AWS credentials"):
        await t.get("k")

    # botocore's default chain: environment variables.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweedfs.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweedfs.secret)
    t = S3Transport(s3_bucket, storage_options=endpoint)
    try:
        assert await t.get("k") == b"v"
    finally:
        await t.close()
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    # A named profile in the shared credentials file (and its region in the config file).
    (tmp_path / "credentials").write_text(
        f"[azarr]\naws_access_key_id = {seaweedfs.key}\naws_secret_access_key = {seaweedfs.secret}\n"
    )
    (tmp_path / "config").write_text("[profile azarr]\nregion = eu-central-1\n")
    t = S3Transport(s3_bucket, storage_options={**endpoint, "profile": "azarr"})
    try:
        assert await t.get("k") == b"v"
        assert (await t._environment()).region == "eu-central-1"
    finally:
        await t.close()
    t = S3Transport(s3_bucket, storage_options={**endpoint, "profile": "azarr-nope"})
    transports.append(t)
    with pytest.raises(StoreError, match="azarr-nope"):
        await t.get("k")


async def test_refreshable_credentials_refresh_off_the_loop(
    seaweedfs: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, transports: list[S3Transport]
) -> None:
    owner = transport_for(seaweedfs, s3_bucket)
    transports.append(owner)
    await owner.put("k", b"v")
    loop_thread: list[Any] = []
    refresh_threads: list[Any] = []

    def metadata(minutes: float) -> dict[str, str]:
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=minutes)
        return {
            "access_key": seaweedfs.key,
            "secret_key": seaweedfs.secret,
            "token": "",
            "expiry_time": expiry.isoformat(),
        }

    def refresh() -> dict[str, str]:
        import threading

        refresh_threads.append(threading.current_thread())
        return metadata(60)

    # Expiring in 5 minutes: inside botocore's advisory window (15 min), so due a refresh.
    credentials = RefreshableCredentials.create_from_metadata(metadata(5), refresh, "azarr-test")
    monkeypatch.setattr("botocore.session.Session.get_credentials", lambda self: credentials)
    t = S3Transport(s3_bucket, storage_options={"endpoint_url": seaweedfs.endpoint_url})
    try:
        import threading

        loop_thread.append(threading.current_thread())
        assert await t.get("k") == b"v"
        assert len(refresh_threads) == 1 and refresh_threads[0] is not loop_thread[0]
        assert await t.get("k") == b"v"
        assert len(refresh_threads) == 1  # fresh for an hour now
    finally:
        await t.close()

    # Expired, and the refresh cannot reach its endpoint: an azarr error, retried as transient.
    def unreachable() -> dict[str, str]:
        from botocore.exceptions import EndpointConnectionError

        raise EndpointConnectionError(endpoint_url="https://sts.example.invalid")

    expired = RefreshableCredentials.create_from_metadata(metadata(-1), unreachable, "azarr-test")
    monkeypatch.setattr("botocore.session.Session.get_credentials", lambda self: expired)
    t = S3Transport(s3_bucket, "x", storage_options={"endpoint_url": seaweedfs.endpoint_url})
    try:
        with pytest.raises(ConnectionFailedError, match=r"sts\.example\.invalid") as info:
            await t.get("k")
        assert f"s3://{s3_bucket}/x" in str(info.value)
    finally:
        await t.close()


# ---------------------------------------------------------------------- connection failures
async def test_refused_endpoint_fails_fast() -> None:
    port = free_port()
    t = S3Transport("bucket", "x", storage_options={"endpoint_url": f"http://127.0.0.1:{port}", "anon": True})
    try:
        for op in (lambda: t.get("k"), lambda: t.put("k", b"v"), lambda: t.head("k")):
            start = time.monotonic()
            with pytest.raises(ConnectionFailedError) as info:
                await op()
            assert time.monotonic() - start < 2
            assert isinstance(info.value, StoreUnavailableError) and isinstance(
                info.value, TransientStoreError
            )
            assert f"127.0.0.1:{port}" in str(info.value) and "s3://bucket/x" in str(info.value)
    finally:
        await t.close()


# ---------------------------------------------------------------------- fault proxy: one request per attempt
@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("status_503", ThrottledError),
        ("status_429", ThrottledError),
        ("status_500", TransientStoreError),
        ("reset", ConnectionFailedError),
        ("reset_mid_body", TransientStoreError),
    ],
)
@pytest.mark.parametrize("method", ["GET", "PUT"])
async def test_each_call_is_exactly_one_request(
    seaweedfs: S3Server,
    s3_bucket: str,
    s3_fault_proxy: FaultProxy,
    kind: str,
    error: type[Exception],
    method: str,
    transports: list[S3Transport],
) -> None:
    t = S3Transport(s3_bucket, storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options))
    transports.append(t)
    await t.put("a/0.0", b"v" * 100_000)
    s3_fault_proxy.configure(
        rules=[FaultRule(kind, 1.0, (method,), CHUNK_KEYS)], fail_first_n=1, error_format="s3"
    )
    s3_fault_proxy.reset_counters()
    with pytest.raises(error) as info:
        if method == "GET":
            await t.get("a/0.0")
        else:
            await t.put("a/0.0", b"w" * 100_000)
    assert f"s3://{s3_bucket}" in str(info.value)
    c = s3_fault_proxy.counters()
    assert c.received == 1, "aiohttp re-sent the request by itself"
    assert c.injected == {kind: 1}
    # The fault is spent: the next call is one clean request.
    assert await t.get("a/0.0") in (b"v" * 100_000, b"w" * 100_000)
    assert s3_fault_proxy.counters().received == 2


@pytest.mark.parametrize("calculation", ["when_supported", "when_required"])
async def test_a_put_body_corrupted_in_flight_is_refused(
    seaweedfs: S3Server,
    s3_bucket: str,
    s3_fault_proxy: FaultProxy,
    transports: list[S3Transport],
    calculation: str,
) -> None:
    # One byte of the body inverted between client and server, the request head as sent:
    # with x-amz-checksum-crc32c SeaweedFS answers 400 BadDigest and keeps the old object;
    # without it (azarr's default) the corrupted body is stored: what the checksum prevents.
    config = {} if calculation == "when_required" else {"request_checksum_calculation": calculation}
    t = S3Transport(
        s3_bucket,
        storage_options={
            **s3_fault_proxy.storage_options(seaweedfs.storage_options),
            "config_kwargs": config,
        },
    )
    transports.append(t)
    assert t.request_checksum_calculation == calculation
    old, new = b"v" * 300_000, b"w" * 300_000
    await t.put("a/0.0", old)
    s3_fault_proxy.configure(rules=[FaultRule("corrupt_body", 1.0, ("PUT",), CHUNK_KEYS)], fail_first_n=1)
    if calculation == "when_supported":
        with pytest.raises(StoreError, match="BadDigest") as info:
            await t.put("a/0.0", new)
        assert f"s3://{s3_bucket}" in str(info.value) and "'a/0.0'" in str(info.value)
        assert await t.get("a/0.0") == old
    else:
        await t.put("a/0.0", new)
        assert await t.get("a/0.0") == bytes([new[0] ^ 0xFF]) + new[1:]
    assert s3_fault_proxy.counters().injected == {"corrupt_body": 1}
    await t.put("a/0.0", new)  # the fault is spent
    assert await t.get("a/0.0") == new


@pytest.mark.parametrize("sharded", [False, True])
async def test_array_writes_checksum_chunks_in_the_codec_threads(
    seaweedfs: S3Server,
    s3_bucket: str,
    s3_fault_proxy: FaultProxy,
    monkeypatch: pytest.MonkeyPatch,
    sharded: bool,
) -> None:
    # Chunk and shard PUTs carry the CRC-32C the codec thread computed (SeaweedFS checks
    # every one); the transport computes only the small metadata documents' itself.
    import azarr.storage._s3_transport as transport_module

    on_loop: list[int] = []

    def counted(data: Any) -> int:
        on_loop.append(len(data or b""))
        return crc32c.crc32c(data or b"")

    monkeypatch.setattr(transport_module, "body_crc32c", counted)
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    on = {"config_kwargs": {"request_checksum_calculation": "when_supported"}}
    store = S3Store(f"{s3_bucket}/crc-{sharded}", storage_options={**options, **on})
    assert store.wants_body_crc32c
    data = np.random.default_rng(2).random((64, 64))
    layout: dict[str, Any] = {"shards": (32, 64)} if sharded else {}
    try:
        z = await azarr.create((64, 64), chunks=(16, 64), dtype="f8", store=store, zarr_format=3, **layout)
        await z.setitem(..., data)
        assert on_loop and max(on_loop) < 4096  # metadata only
        np.testing.assert_array_equal(await z.getitem(...), data)
        # The codec thread's checksum is the body's: a byte flipped in flight is refused.
        s3_fault_proxy.configure(rules=[FaultRule("corrupt_body", 1.0, ("PUT",), CHUNK_KEYS)], fail_first_n=1)
        with pytest.raises(StoreError, match="BadDigest"):
            await z.setitem(..., data + 1)
        assert s3_fault_proxy.counters().injected == {"corrupt_body": 1}
    finally:
        await store.close()
    off = S3Store(f"{s3_bucket}/crc-off-{sharded}", storage_options=options)  # the default
    assert not off.wants_body_crc32c
    await off.close()


async def test_existence_checks_take_one_request_each(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy, transports: list[S3Transport]
) -> None:
    # A new store's first check must still tell a missing key from a missing bucket
    # (a HEAD 404 cannot), yet cost one round trip: `create` and `open` start there.
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    seeded = S3Transport(s3_bucket, "p", storage_options=options)
    transports.append(seeded)
    await seeded.put("k", VALUE)
    await seeded.put("empty", b"")
    for key, size in (("missing", None), ("k", len(VALUE)), ("empty", 0)):
        fresh = S3Transport(s3_bucket, "p", storage_options=options)
        transports.append(fresh)
        s3_fault_proxy.reset_counters()
        assert await fresh.head(key) == size
        assert s3_fault_proxy.counters().received == 1
        assert await fresh.head(key) == size  # the bucket is known now: a HEAD
        assert dict(s3_fault_proxy.counters().methods) == {"GET": 1, "HEAD": 1}
    nobucket = S3Transport(f"azarr-missing-{uuid.uuid4().hex[:12]}", storage_options=options)
    transports.append(nobucket)
    s3_fault_proxy.reset_counters()
    with pytest.raises(StoreUnavailableError, match="bucket does not exist"):
        await nobucket.head("k")
    assert s3_fault_proxy.counters().received == 1


async def test_scheduler_retries_equal_injected_faults(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    data = np.arange(40 * 1000, dtype="f8").reshape(40, 1000)
    direct = S3Store(f"{s3_bucket}/x", storage_options=seaweedfs.storage_options)
    proxied = S3Store(
        f"{s3_bucket}/x", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    assert proxied.transport == "aiohttp"
    try:
        # 25 attempts: with faults on half the requests, 10 let a chunk exhaust them in ~4% of runs.
        with azarr.config.set(retry_initial_delay=0.01, retry_max_delay=0.05, retry_max_attempts=25):
            await azarr.array(data, chunks=(1, 1000), store=direct)
            arr = await azarr.open_array(proxied, mode="r")
            s3_fault_proxy.configure(
                status_503=0.2,
                status_429=0.1,
                status_500=0.1,
                reset=0.1,
                methods=["GET"],
                path=CHUNK_KEYS,
                seed=11,
            )
            s3_fault_proxy.reset_counters()
            np.testing.assert_array_equal(await arr.get_basic_selection(), data)
            c = s3_fault_proxy.counters()
            injected = sum(c.injected.values())
            assert injected > 5
            # Every injected fault (statuses and resets alike) is one azarr retry, and every
            # attempt one request on the wire: no botocore, s3fs or aiohttp layer retried.
            assert stats_for(proxied).retries == injected
            assert c.methods == {"GET": 40 + injected}

            s3_fault_proxy.configure(status_503=0.2, reset=0.1, methods=["PUT"], seed=5)
            s3_fault_proxy.reset_counters()
            before = stats_for(proxied).retries
            writable = await azarr.open_array(proxied, mode="r+")
            await writable.set_basic_selection(..., data + 1)
            c = s3_fault_proxy.counters()
            assert stats_for(proxied).retries - before == sum(c.injected.values()) > 0
            check = await azarr.open_array(direct, mode="r")
            np.testing.assert_array_equal(await check.get_basic_selection(), data + 1)
    finally:
        await asyncio.gather(direct.close(), proxied.close())


# ---------------------------------------------------------------------- S3Store integration
def test_store_falls_back_to_s3fs_for_what_the_transport_lacks() -> None:
    assert S3Store("b/x", storage_options={"anon": True}).transport == "aiohttp"
    assert S3Store("b/x", storage_options={"anon": True}, transport="s3fs").transport == "s3fs"
    cases: dict[str, dict[str, Any]] = {
        "storage_options['s3_additional_kwargs']": {
            "s3_additional_kwargs": {"ServerSideEncryption": "AES256"}
        },
        "storage_options['session']": {"session": object()},
        "storage_options['version_aware']": {"version_aware": True},
        "client_kwargs['aws_account_id']": {"client_kwargs": {"aws_account_id": "1"}},
        "config_kwargs['http_session_cls']": {"config_kwargs": {"http_session_cls": object}},
        "config_kwargs['s3']['use_accelerate_endpoint']": {
            "config_kwargs": {"s3": {"use_accelerate_endpoint": True}}
        },
        "config_kwargs['signature_version']='s3'": {"config_kwargs": {"signature_version": "s3"}},
    }
    for reason, options in cases.items():
        store = S3Store("b/x", storage_options=options)
        assert store.transport == "s3fs", reason
        assert reason in store.transport_fallback
        with pytest.raises(ValueError, match="does not implement"):
            S3Transport("b", storage_options=options)
    # Falsy defaults and s3fs-only knobs do not force the fallback.
    fine = {
        "session": None,
        "s3_additional_kwargs": {},
        "version_aware": False,
        "default_block_size": 2**20,
        "cache_regions": True,
        "requester_pays": True,
        "use_ssl": True,
        "config_kwargs": {"signature_version": "s3v4", "s3": {"addressing_style": "path"}, "proxies": {}},
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
    }
    assert S3Store("b/x", storage_options=fine).transport_fallback == ()
    assert (
        S3Transport("b", storage_options={"config_kwargs": {"connect_timeout": None}}).connect_timeout is None
    )
    with pytest.raises(ValueError, match="transport"):
        S3Store("b/x", transport="httpx")  # type: ignore[arg-type]
    # Buckets that need botocore's endpoint rules and auth.
    for path in ("arn:aws:s3:us-west-2:123456789012:accesspoint/ap/x", "data--usw2-az1--x-s3/x"):
        store = S3Store(path, storage_options={"anon": True})
        assert store.transport == "s3fs" and "S3 Express" in store.transport_fallback[0]


def test_store_falls_back_for_fips_and_dualstack_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_USE_FIPS_ENDPOINT", "true")
    assert S3Store("b/x", storage_options={"anon": True}).transport_fallback == (
        "environment AWS_USE_FIPS_ENDPOINT=true",
    )
    # An explicit endpoint is used as given, whatever the environment says.
    assert S3Store("b/x", storage_options={"anon": True, "endpoint_url": "http://h:1"}).transport == "aiohttp"


async def test_store_pickles_its_transport_choice(seaweedfs: S3Server, s3_bucket: str) -> None:
    transports: tuple[Literal["aiohttp", "s3fs"], ...] = ("aiohttp", "s3fs")
    for transport in transports:
        store = S3Store(f"{s3_bucket}/p", storage_options=seaweedfs.storage_options, transport=transport)
        await store.set("k", b"v")
        clone = pickle.loads(pickle.dumps(store))
        assert clone.transport == transport
        assert (clone._transport is None) == (transport == "s3fs")
        assert clone._transport is not store._transport or transport == "s3fs"
        assert await clone.get("k") == b"v"
        assert ("transport='s3fs'" in repr(clone)) == (transport == "s3fs")
        await asyncio.gather(store.close(), clone.close())
    t = transport_for(seaweedfs, s3_bucket, "p")
    await t.get("k")
    clone_t = pickle.loads(pickle.dumps(t))
    assert clone_t.open_sessions() == 0 and clone_t._resolved is None
    assert await clone_t.get("k") == b"v"
    await asyncio.gather(t.close(), clone_t.close())


async def test_sessions_per_loop_closed_when_the_loop_ends(seaweedfs: S3Server, s3_bucket: str) -> None:
    store = S3Store(f"{s3_bucket}/loops", storage_options=seaweedfs.storage_options)
    transport = store._transport
    assert transport is not None

    async def use() -> Any:
        await store.set("k", b"v")
        return await transport.session()

    session = await asyncio.to_thread(asyncio.run, use())
    assert session.closed  # asyncio.run's shutdown closed it
    assert await store.get("k") == b"v"  # this loop gets its own session
    assert await transport.session() is not session
    assert transport.open_sessions() >= 1  # this loop's (stores of other tests may share the settings)
    assert store.with_read_only()._transport is transport  # the copy shares connections
    here = await transport.session()
    await store.close()
    assert not here.closed  # lingering for the next store with these settings
    assert await transport.session() is here
    with azarr.config.set(connection_linger=0):
        await store.close()
    assert here.closed


async def test_stores_with_equal_settings_share_connections(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: Any
) -> None:
    """A store made per read (or per request) reuses the last one's connections, as s3fs's
    cached instances and TensorStore's process-wide transport do; a closed store's pool
    closes after ``connection_linger`` seconds unless another store takes it up."""
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    setup = S3Store(f"{s3_bucket}/share", storage_options=seaweedfs.storage_options)
    await setup.set("k", b"v")
    await setup.close()  # same settings (any endpoint): an unclosed store would keep the pool

    async def read_with_a_new_store(prefix: str = "share") -> None:
        store = S3Store(f"{s3_bucket}/{prefix}", storage_options=options)
        assert await store.get("k") in (b"v", None)
        await store.close()

    baseline = s3_fault_proxy.counters().connections_open  # ones other tests' proxies still hold
    with azarr.config.set(connection_linger=0.5):
        await read_with_a_new_store()
        accepted = s3_fault_proxy.counters().connections_accepted
        for prefix in ("share", "share", "elsewhere"):  # another prefix or bucket: same settings
            await read_with_a_new_store(prefix)
        assert s3_fault_proxy.counters().connections_accepted == accepted  # no new connection
        other = S3Store(
            f"{s3_bucket}/share", storage_options={**options, "config_kwargs": {"connect_timeout": 7}}
        )
        await other.get("k")  # other settings: its own pool
        assert s3_fault_proxy.counters().connections_accepted == accepted + 1
        await other.close()
        deadline = time.monotonic() + 5
        while s3_fault_proxy.counters().connections_open > baseline and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        assert s3_fault_proxy.counters().connections_open <= baseline  # closed once the linger ran out


# ---------------------------------------------------------------------- signing
@pytest.mark.parametrize("payload_hash", [UNSIGNED_PAYLOAD, hashlib.sha256(b"body").hexdigest()])
@pytest.mark.parametrize("token", [None, "session-token"])
@pytest.mark.parametrize("method", ["GET", "PUT", "HEAD", "DELETE"])
@pytest.mark.parametrize("key", ["0.0", *ODD_KEYS])
def test_signer_matches_botocore_exactly(
    payload_hash: str, token: str | None, method: str, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # sign_v4 replaces botocore's S3SigV4Auth on the hot path: every header it adds
    # must equal botocore's, byte for byte, for the requests the transport sends.
    fixed = datetime.datetime(2026, 11, 21, 12, 34, 56)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: fixed)
    credentials = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
    host = "bucket.s3.eu-west-1.amazonaws.com"
    path = "/pre%20fix/" + quote(key, safe="/")
    extra = {"range": "bytes=0-99", "x-amz-request-payer": "requester"} if method == "GET" else {}

    ours = sign_v4(
        method,
        path,
        {"host": host, **extra},
        payload_hash=payload_hash,
        access_key=credentials.access_key,
        secret_key=credentials.secret_key,
        token=token,
        region="eu-west-1",
        amz_date="20261121T123456Z",
        keys=_SigningKeys(),
    )
    theirs = AWSRequest(method=method, url=f"https://{host}{path}", headers={"host": host, **extra})
    reference = botocore.auth.S3SigV4Auth(credentials.get_frozen_credentials(), "s3", "eu-west-1")
    monkeypatch.setattr(reference, "payload", lambda request: payload_hash)
    reference.add_auth(theirs)
    assert ours == {name.lower(): value for name, value in theirs.headers.items()}
    assert ours["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/eu-west-1/s3/")


def test_signing_key_derivation() -> None:
    # AWS's documented example ("Examples of how to derive a signing key for Signature Version 4").
    key = derive_signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam")
    assert key.hex() == "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
    keys = _SigningKeys()
    assert keys._entry("s", "20260101", "r") is keys._entry("s", "20260101", "r")  # derived once
    first, second = keys.mac("s", "20260101", "r"), keys.mac("s", "20260101", "r")
    first.update(b"string to sign")
    expected = hmac.new(derive_signing_key("s", "20260101", "r"), b"string to sign", hashlib.sha256)
    assert first.digest() == expected.digest()
    assert second.digest() == hmac.new(derive_signing_key("s", "20260101", "r"), b"", hashlib.sha256).digest()


# ---------------------------------------------------------------------- addressing (a fake AWS)
class FakeS3:
    """Records requests; answers per ``handler`` (default: 200 with the path as body)."""

    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.handler: Callable[[web.Request], web.Response] = lambda r: web.Response(body=r.raw_path.encode())


@pytest.fixture
async def fake_s3() -> AsyncIterator[tuple[FakeS3, str]]:
    fake = FakeS3()

    async def handle(request: web.Request) -> web.Response:
        fake.requests.append(request)
        return fake.handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield fake, f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _scope_region(request: web.Request) -> str:
    return request.headers["Authorization"].split("Credential=")[1].split("/")[2]


async def test_region_redirect_is_followed_once(fake_s3: tuple[FakeS3, str]) -> None:
    fake, url = fake_s3

    def handler(request: web.Request) -> web.Response:
        if _scope_region(request) != "eu-west-1":
            body = b"<Error><Code>AuthorizationHeaderMalformed</Code><Message>wrong region</Message></Error>"
            return web.Response(status=400, body=body, headers={"x-amz-bucket-region": "eu-west-1"})
        return web.Response(body=b"found")

    fake.handler = handler
    t = S3Transport("b", storage_options={"endpoint_url": url, "key": "k", "secret": "s"})
    try:
        assert await t.get("x") == b"found"
        assert [_scope_region(r) for r in fake.requests] == ["us-east-1", "eu-west-1"]
        assert await t.get("x") == b"found"  # remembered: no second detour
        assert len(fake.requests) == 3
    finally:
        await t.close()


async def test_requests_carry_path_host_and_signed_headers(fake_s3: tuple[FakeS3, str]) -> None:
    fake, url = fake_s3
    t = S3Transport(
        "b",
        "root dir",
        storage_options={"endpoint_url": url + "/base/", "key": "k", "secret": "s", "requester_pays": True},
    )
    try:
        # Quoted once, below the endpoint's own path, exactly as signed.
        assert await t.get("données/0 1") == b"/base/b/root%20dir/donn%C3%A9es/0%201"
        # This server ignores Range (answers 200 with everything): sliced locally.
        assert await t.get("k", 3, 9) == b"/base/b/root%20dir/k"[3:9]
        await t.put("k", b"payload")
    finally:
        await t.close()
    whole, get, put = fake.requests
    assert "Range" not in whole.headers
    assert get.headers["Range"] == "bytes=3-8"
    assert get.headers["Host"] == url.removeprefix("http://")
    assert "Accept-Encoding" not in get.headers
    signed = get.headers["Authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert signed == ["host", "range", "x-amz-content-sha256", "x-amz-date", "x-amz-request-payer"]
    assert put.headers["x-amz-content-sha256"] == UNSIGNED_PAYLOAD
    assert "Expect" not in put.headers and put.headers["Content-Length"] == "7"
    assert "x-amz-checksum-crc32c" not in put.headers  # azarr's default: "when_required"


async def test_request_checksum_calculation_setting(
    fake_s3: tuple[FakeS3, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """botocore's ``request_checksum_calculation``: the option, else the environment, else
    azarr's ``"when_required"``, which sends no checksum (PutObject requires none)."""
    fake, url = fake_s3
    monkeypatch.delenv("AWS_REQUEST_CHECKSUM_CALCULATION", raising=False)
    base = {"endpoint_url": url, "key": "k", "secret": "s"}

    def made(config: dict[str, Any] | None = None) -> S3Transport:
        return S3Transport("b", storage_options={**base, "config_kwargs": config or {}})

    assert made().request_checksum_calculation == "when_required"
    assert (
        made({"request_checksum_calculation": "WHEN_SUPPORTED"}).request_checksum_calculation
        == "when_supported"
    )
    with pytest.raises(ValueError, match="request_checksum_calculation"):
        made({"request_checksum_calculation": "always"})
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    on = made()
    assert on.request_checksum_calculation == "when_supported"
    off = made({"request_checksum_calculation": "when_required"})  # the option wins
    try:
        await off.put("k", b"x")
        await off.put_if("k2", b"x", if_match=None)
        await on.put("k", b"")
        await on.put_if("k2", b"x", if_match=None)
    finally:
        await off.close()
        await on.close()
    sent = [r.headers.get("x-amz-checksum-crc32c") for r in fake.requests]
    assert sent == [None, None, "AAAAAA==", crc32c_header(b"x")]
    # CRC-32C, base64 of its big-endian bytes (as botocore sends it).
    assert base64.b64decode(crc32c_header(b"x")) == crc32c.crc32c(b"x").to_bytes(4, "big")


@pytest.mark.parametrize("calculation", [None, "when_supported"])
async def test_s3fs_transport_takes_the_checksum_option_as_botocore_does(
    seaweedfs: S3Server, s3_bucket: str, calculation: str | None
) -> None:
    # botocore's "when_supported" (aws-chunked bodies with a trailing CRC) and azarr's
    # "when_required" default on s3fs both store the bytes on SeaweedFS.
    config = {} if calculation is None else {"request_checksum_calculation": calculation}
    store = S3Store(
        f"{s3_bucket}/s3fs-{calculation}",
        storage_options={**seaweedfs.storage_options, "config_kwargs": config},
        transport="s3fs",
    )
    assert not store.wants_body_crc32c
    try:
        fs = await store.filesystem()
        assert fs.config_kwargs["request_checksum_calculation"] == (calculation or "when_required")
        await store.set("k", VALUE * 1000)
        assert await store.get("k") == VALUE * 1000
    finally:
        await store.close()


def test_store_checksum_defaults_per_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """`S3Store`: both transports default to ``"when_required"`` unless the caller chose,
    and the choice (or its absence) survives the store's spec."""
    monkeypatch.delenv("AWS_REQUEST_CHECKSUM_CALCULATION", raising=False)
    store = S3Store("b/x", storage_options={"anon": True})
    assert store._transport is not None and store._transport.request_checksum_calculation == "when_required"
    assert not store.wants_body_crc32c
    assert "request_checksum_calculation" not in store.storage_options["config_kwargs"]
    assert store._fs_options()["config_kwargs"]["request_checksum_calculation"] == "when_required"
    again = S3Store.from_spec(store.spec)
    assert again._transport is not None and again._transport.request_checksum_calculation == "when_required"
    chosen = {"anon": True, "config_kwargs": {"request_checksum_calculation": "when_supported"}}
    on_s3fs = S3Store("b/x", storage_options=chosen, transport="s3fs")
    assert on_s3fs._fs_options()["config_kwargs"]["request_checksum_calculation"] == "when_supported"
    on = S3Store(
        "b/x",
        storage_options={"anon": True, "config_kwargs": {"request_checksum_calculation": "when_supported"}},
    )
    assert on._transport is not None and on.wants_body_crc32c
    assert S3Store.from_spec(on.spec).wants_body_crc32c
    monkeypatch.setenv("AWS_REQUEST_CHECKSUM_CALCULATION", "when_supported")
    assert (
        "request_checksum_calculation" not in S3Store("b/x", transport="s3fs")._fs_options()["config_kwargs"]
    )


def test_aws_addressing() -> None:
    def resolved(bucket: str, **options: Any) -> Any:
        t = S3Transport(bucket, storage_options={"anon": True, **options})
        return t._resolve()

    r = resolved("my-bucket", client_kwargs={"region_name": "eu-west-1"})
    assert (r.origin, r.path_prefix, r.aws) == ("https://my-bucket.s3.eu-west-1.amazonaws.com", "/", True)
    r = resolved("dotted.bucket", client_kwargs={"region_name": "eu-west-1"})  # TLS wildcard: path style
    assert (r.origin, r.path_prefix) == ("https://s3.eu-west-1.amazonaws.com", "/dotted.bucket/")
    r = resolved(
        "my-bucket",
        client_kwargs={"region_name": "eu-west-1"},
        config_kwargs={"s3": {"addressing_style": "path"}},
    )
    assert (r.origin, r.path_prefix) == ("https://s3.eu-west-1.amazonaws.com", "/my-bucket/")
    r = resolved(
        "b-1", endpoint_url="http://minio:9000", config_kwargs={"s3": {"addressing_style": "virtual"}}
    )
    assert (r.origin, r.host, r.path_prefix) == ("http://b-1.minio:9000", "b-1.minio:9000", "/")
    r = resolved("b-1", endpoint_url="https://s3.example.org:443/prefix/")
    assert (r.origin, r.host, r.path_prefix, r.aws) == (
        "https://s3.example.org",
        "s3.example.org",
        "/prefix/b-1/",
        False,
    )


def test_configured_endpoint_and_region_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9999")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    r = S3Transport("b", storage_options={"anon": True})._resolve()
    assert (r.origin, r.path_prefix, r.region) == ("http://127.0.0.1:9999", "/b/", "ap-south-1")


@pytest.fixture(autouse=True)
def _no_leftover_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # Tests above set AWS_* variables through monkeypatch only; make sure none leak in.
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    yield


async def test_store_getsize_exists_and_empty_ranges(seaweedfs: S3Server, s3_bucket: str) -> None:
    store = S3Store(f"{s3_bucket}/g", storage_options=seaweedfs.storage_options)
    try:
        await store.set("a/k", VALUE)
        assert await store.getsize("a/k") == len(VALUE)
        assert await store.exists("a/k") and not await store.exists("a")  # a "directory" is no value
        assert await store.get("a/k", ByteRange(3, 3)) == b""
        assert await store.get("a/missing", ByteRange(3, 3)) is None
        with pytest.raises(FileNotFoundError, match="'a/missing'"):
            await store.getsize("a/missing")
    finally:
        await store.close()
