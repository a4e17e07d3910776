"""A hostile HTTP/S3/GCS/Azure server: every body bounded, every range verified, every read within its deadline.

Each test points a real store (``HTTPStore``, ``S3Store`` on its aiohttp transport,
``GCSStore``, ``AzureBlobStore``) at ``tests/hostile_server.py`` on loopback, which answers as the case in the URL
says (``hostile_server.py`` lists the behaviours). Memory is measured as peak
RSS growth (``tests/rss.py``) for every hostile body.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hostile_server import truth
from rss import MiB, measure_rss
from servers import HostileServer

import azarr
from azarr.errors import (
    AzarrError,
    BodyTooLargeError,
    MetadataError,
    ResponseIntegrityError,
    RetriesExhaustedError,
    StoreError,
    TransientStoreError,
)
from azarr.scheduler import StoreIO
from azarr.storage import (
    AzureBlobStore,
    ByteRange,
    GCSStore,
    HTTPStore,
    MemoryStore,
    S3Store,
    Store,
    UnsafeMemberWarning,
    ZipStore,
)

pytestmark = pytest.mark.timeout(60)

RSS_BUDGET = 256 * MiB
KINDS = ["http", "s3", "gcs", "azure"]
FAST_RETRIES = {"retry_initial_delay": 0.01, "retry_max_delay": 0.02}


def make_store(server: HostileServer, kind: str, case: dict[str, Any]) -> Store:
    if kind == "http":
        return HTTPStore(server.http_root(case))
    if kind == "gcs":
        return GCSStore(server.gcs_root(case), storage_options=server.gcs_options())
    if kind == "azure":
        return AzureBlobStore(server.azure_root(case), storage_options=server.azure_options())
    return S3Store(server.s3_root(case), storage_options=server.s3_options())


def zarray(chunks: list[int], dtype: str = "|u1", compressor: Any = None) -> bytes:
    meta = {
        "zarr_format": 2,
        "shape": chunks,
        "chunks": chunks,
        "dtype": dtype,
        "compressor": compressor,
        "fill_value": 0,
        "filters": None,
        "order": "C",
    }
    return json.dumps(meta).encode()


def files(**documents: bytes) -> dict[str, str]:
    return {key.replace("_", "."): base64.b64encode(value).decode() for key, value in documents.items()}


@pytest.mark.parametrize("kind", KINDS)
async def test_endless_metadata_body_stops_at_max_metadata_bytes(
    hostile_server: HostileServer, kind: str
) -> None:
    store = make_store(hostile_server, kind, {"hostile": [".zarray"], "body": "endless", "length": "none"})
    try:
        limit = azarr.config.set(max_metadata_bytes=16 * MiB)
        refused = pytest.raises(BodyTooLargeError, match=r"'\.zarray'.*more than the 16777216 bytes")
        with limit, measure_rss() as growth, refused as info:
            await azarr.open_array(store, mode="r")
    finally:
        await store.close()
    assert info.value.limit == 16 * MiB
    assert growth.bytes < RSS_BUDGET, f"{growth.bytes / MiB:.0f} MiB"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("length", ["none", "true"])
async def test_endless_or_long_chunk_body_stops_at_the_chunks_stored_bound(
    hostile_server: HostileServer, kind: str, length: str
) -> None:
    # A 256 KiB uncompressed chunk can be stored in exactly 256 KiB: a body going on
    # (chunked and endless, or 1 MiB past a true Content-Length) is refused there.
    body = "endless" if length == "none" else "long"
    case = {
        "files": files(_zarray=zarray([256 * 1024])),
        "hostile": ["/0", "0"],
        "size": 256 * 1024,
        "body": body,
        "length": length,
    }
    store = make_store(hostile_server, kind, case)
    try:
        arr = await azarr.open_array(store, mode="r")
        with measure_rss() as growth, pytest.raises(AzarrError) as info:
            await arr.get_basic_selection(slice(0, 10))
    finally:
        await store.close()
    # Refused at the bound, or (a true Content-Length followed by more bytes) a broken answer.
    assert isinstance(info.value, BodyTooLargeError) or isinstance(
        info.value.__cause__, TransientStoreError
    ), info.value
    if length == "none":
        assert isinstance(info.value, BodyTooLargeError)
        assert "'0'" in str(info.value) and str(256 * 1024) in str(info.value)
    assert growth.bytes < RSS_BUDGET


@pytest.mark.parametrize("kind", KINDS)
async def test_huge_content_length_is_refused_before_allocation(
    hostile_server: HostileServer, kind: str
) -> None:
    store = make_store(hostile_server, kind, {"length": "huge", "body": "endless", "size": 100})
    io = StoreIO(store)
    allocated: list[int] = []

    def allocate(n: int) -> memoryview:
        allocated.append(n)
        return memoryview(bytearray(n))

    try:
        with measure_rss() as growth:
            with pytest.raises(BodyTooLargeError, match="declares Content-Length 1099511627776") as info:
                await io.get_into("k", allocate, max_bytes=4096)
            with pytest.raises(BodyTooLargeError):
                await io.get("k")  # the default bound: max_chunk_bytes
    finally:
        await store.close()
    assert allocated == []
    assert info.value.declared == 2**40 and info.value.limit == 4096
    assert "'k'" in str(info.value)
    assert growth.bytes < RSS_BUDGET


@pytest.mark.parametrize("length", ["none", "true"])
async def test_size_probe_answered_with_a_whole_body_keeps_none_of_it(
    hostile_server: HostileServer, length: str
) -> None:
    # A new S3Store asks its first `exists`/`getsize` as a GET of `bytes=0-0`; a server that
    # ignores the range sends the whole value. Its size is all the probe needs: an endless
    # body (no Content-Length) is counted, not kept, until the request times out; a framed
    # one is taken at its Content-Length without reading it.
    body = "endless" if length == "none" else "exact"
    case = {"size": 300_000, "body": body, "length": length, "range": "ignore"}
    store = make_store(hostile_server, "s3", case)
    try:
        with azarr.config.set(request_timeout=1.0), measure_rss() as growth:
            if length == "none":
                with pytest.raises(AzarrError, match="exists 'k'"):
                    await store.exists("k")
            else:
                assert await store.exists("k")
                assert await store.getsize("k") == 300_000
    finally:
        await store.close()
    assert growth.bytes < 32 * MiB, f"the probe's body took {growth.bytes / MiB:.0f} MiB"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("status", [404, 500])
async def test_endless_error_body_is_read_a_few_kib(
    hostile_server: HostileServer, kind: str, status: int
) -> None:
    case = {"status": status, "body": "endless", "length": "none"}
    store = make_store(hostile_server, kind, case)
    io = StoreIO(store)
    try:
        with azarr.config.set(retry_max_attempts=2, **FAST_RETRIES), measure_rss() as growth:
            if status == 404:
                assert await io.get("missing") is None
            else:
                with pytest.raises(RetriesExhaustedError):
                    await io.get("broken")
    finally:
        await store.close()
    assert growth.bytes < 64 * MiB


@pytest.mark.parametrize("kind", KINDS)
async def test_gzip_bomb_is_never_inflated_past_the_bound(hostile_server: HostileServer, kind: str) -> None:
    # HTTPStore and GCSStore inflate gzip themselves, up to the bound; S3 returns bodies
    # as stored (the 1 MiB of compressed bytes), which are larger than a 64-byte chunk can be.
    case = {"files": files(_zarray=zarray([64])), "hostile": ["/0", "0"], "body": "bomb", "bomb_mib": 256}
    store = make_store(hostile_server, kind, case)
    try:
        arr = await azarr.open_array(store, mode="r")
        with measure_rss() as growth, pytest.raises(BodyTooLargeError, match="'0'"):
            await arr.get_basic_selection(0)
    finally:
        await store.close()
    assert growth.bytes < RSS_BUDGET


@pytest.mark.parametrize("kind", ["http", "gcs"])
async def test_honest_gzip_encoding_is_inflated(hostile_server: HostileServer, kind: str) -> None:
    store = make_store(hostile_server, kind, {"body": "gzip", "size": 5000})
    try:
        assert await store.get("k") == truth("k", 5000)
    finally:
        await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_large_chunk_size_is_refused_before_ranges_are_planned(
    hostile_server: HostileServer, kind: str
) -> None:
    # HEAD says 10**15 bytes for a chunk read in ranges: refused at once (it used to
    # build ~10**8 ranges, 20 s of CPU and 2.8 GiB, before the first request).
    case = {"files": files(_zarray=zarray([1024 * 1024])), "hostile": ["/0", "0"], "head_length": 10**15}
    store = make_store(hostile_server, kind, case)
    try:
        arr = await azarr.open_array(store, mode="r")
        with azarr.config.set(large_chunk_threshold=64 * 1024), measure_rss() as growth:
            started = time.perf_counter()
            with pytest.raises(BodyTooLargeError, match="1000000000000000 bytes") as info:
                await arr.get_basic_selection(0)
            elapsed = time.perf_counter() - started
    finally:
        await store.close()
    assert info.value.declared == 10**15
    assert elapsed < 10 and growth.bytes < RSS_BUDGET


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["shift", "short", "missing"])
async def test_wrong_ranged_answers_are_integrity_errors(
    hostile_server: HostileServer, kind: str, mode: str
) -> None:
    store = make_store(hostile_server, kind, {"range": mode, "size": 1000})
    try:
        with pytest.raises(ResponseIntegrityError, match=r"'k'.*other bytes than asked for"):
            await store.get("k", ByteRange(100, 200))
        if mode == "missing":
            with pytest.raises(ResponseIntegrityError):
                await store.get("k", ByteRange(-10))
        io = StoreIO(store)
        with (
            azarr.config.set(retry_max_attempts=3, **FAST_RETRIES),
            pytest.raises(RetriesExhaustedError) as info,
        ):
            await io.get("k", ByteRange(100, 200))
        assert isinstance(info.value.__cause__, ResponseIntegrityError)
        assert io.stats.retries >= 2  # retried, never returned
    finally:
        await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_honest_ranges_still_read(hostile_server: HostileServer, kind: str) -> None:
    store = make_store(hostile_server, kind, {"size": 1000})
    value = truth("k", 1000)
    try:
        assert await store.get("k", ByteRange(100, 200)) == value[100:200]
        assert await store.get("k", ByteRange(-10)) == value[-10:]
        assert await store.get("k", ByteRange(990, 2000)) == value[990:]
        assert await store.get("k", ByteRange(500)) == value[500:]
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("kind", "body", "length"),
    [
        *((kind, "exact", length) for kind in ("http", "s3", "gcs") for length in ("true", "none")),
        # gzip-encoded for the stores that inflate (S3 bodies are the stored bytes)
        ("http", "gzip", "true"),
        ("gcs", "gzip", "true"),
    ],
)
async def test_a_server_that_ignores_range_gives_the_range(
    hostile_server: HostileServer, kind: str, body: str, length: str
) -> None:
    # 200 with the whole value: the range is cut from it as slicing would, while it is read.
    store = make_store(
        hostile_server, kind, {"range": "ignore", "size": 1000, "body": body, "length": length}
    )
    value = truth("k", 1000)
    try:
        for byte_range in (ByteRange(100, 200), ByteRange(-10), ByteRange(990, 2000), ByteRange(500)):
            assert await store.get("k", byte_range) == byte_range.apply(value), byte_range
        assert await store.get("k", ByteRange(-5000)) == value
        assert await store.get("k", ByteRange(2000, 3000)) == b""
    finally:
        await store.close()


@pytest.mark.parametrize("kind", ["http", "s3", "gcs"])
async def test_a_range_answered_with_an_endless_body_reads_only_the_range(
    hostile_server: HostileServer, kind: str
) -> None:
    # A server that ignores Range and sends an endless (or 1 TiB) value: the range is read
    # and the connection closed, at once, within a few MiB; the rest is never received.
    # (Before, the body was read up to max_chunk_bytes, 2 GiB, and then sliced.)
    block = (truth("k", 1000) * 66)[:65536]  # the endless body repeats this block
    stream = block * 3
    for length in ("none", "huge"):
        case = {"range": "ignore", "size": 1000, "body": "endless", "length": length}
        store = make_store(hostile_server, kind, case)
        try:
            with azarr.config.set(request_timeout=5.0), measure_rss() as growth:
                started = time.perf_counter()
                got = await store.get("k", ByteRange(100_000, 100_100))
                elapsed = time.perf_counter() - started
        finally:
            await store.close()
        assert got == stream[100_000:100_100]
        assert elapsed < 2.0, f"{kind}, length {length}: {elapsed:.1f} s"
        assert growth.bytes < 32 * MiB, f"{kind}, length {length}: {growth.bytes / MiB:.0f} MiB"
    if kind != "s3":  # the stores that inflate: a gzip bomb is inflated only up to the range
        case = {"range": "ignore", "body": "bomb", "bomb_mib": 1024}
        store = make_store(hostile_server, kind, case)
        try:
            with measure_rss() as growth:
                assert await store.get("k", ByteRange(1000, 1100)) == bytes(100)
        finally:
            await store.close()
        assert growth.bytes < 32 * MiB, f"{kind}, bomb: {growth.bytes / MiB:.0f} MiB"


@pytest.mark.parametrize("kind", ["http", "s3", "gcs"])
async def test_a_whole_value_answer_to_a_range_must_end_within_the_bound(
    hostile_server: HostileServer, kind: str
) -> None:
    # The transport fuzzer's cases (random seeds, 2026-11-27): a server that ignores Range and
    # sends a whole value longer than the read's bound (an endless body; for the stores that
    # inflate, a gzip bomb) was trusted for the range's bytes: 50 bytes of an endless body for
    # a 17-byte bound, zeros of a bomb for a 100-byte value. The value must end within the
    # bound: read on (when the bound is near the range's end), it does not.
    cases = [({"range": "ignore", "size": 1, "body": "endless"}, ByteRange(3, 53), 17)]
    cases.append(({"range": "ignore", "size": 1, "body": "endless"}, ByteRange(3, 13), 17))
    if kind != "s3":  # S3 bodies are the stored bytes, never inflated
        cases.append(
            ({"range": "ignore", "size": 100, "body": "bomb", "bomb_mib": 64}, ByteRange(3, 53), 116)
        )
    for case, byte_range, bound in cases:
        store = make_store(hostile_server, kind, case)
        try:
            with pytest.raises(BodyTooLargeError), measure_rss() as growth:
                await StoreIO(store).get("k", byte_range, max_bytes=bound)
        finally:
            await store.close()
        assert growth.bytes < 32 * MiB, case
    # An honest value of unstated length (chunked) within the bound: read to its end, then cut.
    store = make_store(hostile_server, kind, {"range": "ignore", "size": 40, "length": "none"})
    try:
        assert await StoreIO(store).get("k", ByteRange(3, 13), max_bytes=56) == truth("k", 40)[3:13]
    finally:
        await store.close()


async def _azure_connector(store: Store) -> Any:
    """The aiohttp connector under an `AzureBlobStore`'s SDK client (to count the connections it holds)."""
    assert isinstance(store, AzureBlobStore)
    transport = (await store._client())._pipeline._transport
    while not hasattr(transport, "session"):
        transport = transport._transport
    return transport.session.connector


@pytest.mark.parametrize("length", ["true", "none", "huge"])
async def test_azure_refuses_a_range_answered_whole(hostile_server: HostileServer, length: str) -> None:
    # Azure always honours ranges, and azure-storage-blob needs the Content-Range of the
    # range it asked for: a whole-value answer (framed, chunked or claiming 1 TiB) is a
    # typed error naming the key, never the value's bytes, and nothing past the bound is read.
    case = {
        "range": "ignore",
        "size": 1000,
        "body": "endless" if length != "true" else "exact",
        "length": length,
    }
    store = make_store(hostile_server, "azure", case)
    try:
        with measure_rss() as growth, pytest.raises(ResponseIntegrityError, match=r"'k'.*other bytes"):
            await store.get("k", ByteRange(100, 200))
        # The refused answer's connection is closed, not held checked out until the store
        # closes (the SDK does not close an answer its response hook refused).
        assert not (await _azure_connector(store))._acquired
    finally:
        await store.close()
    assert growth.bytes < 32 * MiB


@pytest.mark.parametrize("kind", KINDS)
async def test_a_416_is_empty_only_past_the_end(hostile_server: HostileServer, kind: str) -> None:
    # Honest: a range starting at or past the end is b"" (Python slicing), a suffix of
    # an empty value too. Hostile: "not satisfiable" for bytes the value holds is a lie
    # (the 416 states no size; the store asks for it), retried and never read as b"".
    honest = make_store(hostile_server, kind, {"size": 100})
    empty = make_store(hostile_server, kind, {"size": 0})
    liar = make_store(hostile_server, kind, {"status": 416, "size": 1000})
    try:
        assert await honest.get("k", ByteRange(100, 200)) == b""
        assert await honest.get("k", ByteRange(500)) == b""
        assert await empty.get("k", ByteRange(0)) == b""
        for byte_range in (ByteRange(100, 200), ByteRange(-10), ByteRange(5)):
            with pytest.raises(AzarrError) as info:
                await liar.get("k", byte_range)
            assert "'k'" in str(info.value), info.value
    finally:
        for store in (honest, empty, liar):
            await store.close()


@pytest.mark.parametrize("kind", KINDS)
async def test_a_trickling_body_fails_by_the_retry_deadline(hostile_server: HostileServer, kind: str) -> None:
    # One byte a second: no read timeout fires, and request_timeout (60 s) is longer
    # than the deadline. The whole read, attempt in progress included, ends by it.
    store = make_store(hostile_server, kind, {"body": "trickle", "interval": 1.0, "length": "none"})
    io = StoreIO(store)
    try:
        with azarr.config.set(retry_deadline=2.0, request_timeout=60.0):
            started = time.perf_counter()
            with pytest.raises(AzarrError, match=r"deadline|within 2\.0 s"):
                await io.get("k")
            elapsed = time.perf_counter() - started
    finally:
        await store.close()
    assert elapsed < 4.0, f"{elapsed:.1f} s"


@pytest.mark.parametrize("kind", ["s3", "gcs", "azure"])
async def test_object_stores_follow_no_redirect(hostile_server: HostileServer, kind: str) -> None:
    # The redirect leads to an honest answer on the same server: followed, it would read.
    target = make_store(hostile_server, "http", {"size": 10}).url + "/k"
    store = make_store(hostile_server, kind, {"redirect": target})
    try:
        with pytest.raises(StoreError, match="'k'"):
            await store.get("k")
    finally:
        await store.close()


async def test_bucket_region_must_be_a_region_name(hostile_server: HostileServer) -> None:
    case = {"status": 301, "headers": {"x-amz-bucket-region": "evil.example.org/x"}}
    store = make_store(hostile_server, "s3", case)
    try:
        with pytest.raises(StoreError, match=r"'evil\.example\.org/x', which is not an AWS region name"):
            await store.get("k")
    finally:
        await store.close()


async def test_itemsize_is_capped_before_anything_is_allocated() -> None:
    store = MemoryStore()
    store_dict = {".zarray": zarray([1], dtype="|V2147483647")}
    for key, value in store_dict.items():
        await store.set(key, value)
    with measure_rss() as growth, pytest.raises(MetadataError, match="max_itemsize"):
        await azarr.open_array(store, mode="r")
    assert growth.bytes < 64 * MiB
    with azarr.config.set(max_itemsize=4096):
        await store.set(".zarray", zarray([1], dtype="|V8192"))
        with pytest.raises(MetadataError, match=r"set\(max_itemsize=8192\)"):
            await azarr.open_array(store, mode="r")


def test_zip_store_warns_once_about_members_it_skips(tmp_path: Path) -> None:
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("ok/.zgroup", b"{}")
        zf.writestr("../escape", b"x")
        zf.writestr("/abs", b"x")
    store = ZipStore(path, mode="r")

    async def listing() -> list[str]:
        return [key async for key in store.list_prefix("")]

    try:
        with pytest.warns(UnsafeMemberWarning, match=r"skipped 2 member\(s\).*'\.\./escape'"):
            keys = asyncio.run(listing())
        assert keys == ["ok/.zgroup"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            asyncio.run(listing())  # once
    finally:
        asyncio.run(store.close())


def test_truth_is_deterministic() -> None:
    assert truth("a", 40) == truth("a", 40) and truth("a", 40) != truth("b", 40)
    assert len(truth("a", 0)) == 0 and np.frombuffer(truth("a", 64), "u1").size == 64
