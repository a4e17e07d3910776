"""Chunk bodies received into reused buffers: ``Store.get_into`` and ``pipeline/_buffers.py``.

Remote reads of chunks of 64 KiB or more receive each body into a pooled buffer
(no new ``bytes`` per body, no page faults for it on the event-loop thread) and
hand it back after decoding. These tests run against SeaweedFS (through the fault
proxy where a body must break) and the test HTTP server: results must equal the
plain path's, never alias a buffer that is reused later, and buffers must
actually come back to the pool.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS
from util import proxied_store_pair

import azarr
from azarr.pipeline._buffers import BODY_BUFFERS, BufferPool
from azarr.scheduler import stats_for
from azarr.storage import ByteRange, HTTPStore, LocalStore, S3Store

CHUNKS = (256, 256)  # 256 KiB of float32: above the pooled path's 64 KiB floor
DATA = np.arange(4 * 256 * 3 * 256, dtype="<f4").reshape(4 * 256, 3 * 256)


@pytest.fixture(autouse=True)
def empty_pool() -> Iterator[None]:
    BODY_BUFFERS.clear()
    yield
    BODY_BUFFERS.clear()


def _s3(seaweedfs: Any, bucket: str, **kwargs: Any) -> S3Store:
    return S3Store(f"{bucket}/{uuid.uuid4().hex[:8]}", storage_options=seaweedfs.storage_options, **kwargs)


# ---------------------------------------------------------------------------- the pool
def test_pool_reuses_buffers_by_capacity() -> None:
    pool = BufferPool()
    view = pool.acquire(100_000)
    assert len(view) == 100_000 and not view.readonly
    buffer = view.obj
    pool.release(view)
    assert len(buffer) == 114_688  # 7/8 of 128 KiB: capacities come in eighths of a power of two
    assert pool.idle_bytes() == 100_000  # idle buffers count what was written into them
    again = pool.acquire(110_000)  # same capacity class
    assert again.obj is buffer and len(again) == 110_000
    assert pool.idle_bytes() == 0
    assert pool.acquire(110_000).obj is not buffer  # in use: a new one
    assert len(pool.acquire(10).obj) == 65_536  # the smallest capacity


def test_pool_serves_a_body_from_an_idle_buffer_up_to_twice_its_capacity() -> None:
    pool = BufferPool()
    large = pool.acquire(900_000)  # capacity 917,504 (7/8 of 1 MiB)
    pool.release(large)
    small = pool.acquire(400_000)  # capacity 458,752: the idle 917,504 is within 2x
    assert small.obj is large.obj and len(small) == 400_000
    assert pool.idle_bytes() == 0
    pool.release(small)  # back in its own class, counting the longest body it held
    assert pool.idle_bytes() == 900_000
    assert pool.acquire(300_000).obj is not large.obj  # 327,680: more than 2x smaller, a new one
    assert pool.acquire(2_000_000).obj is not large.obj  # larger than any idle buffer: a new one
    assert pool.acquire(600_000).obj is large.obj


def test_pool_sizes_a_body_by_at_least() -> None:
    """Bodies of one chunk size share a class whatever they compressed to (``at_least``)."""
    pool = BufferPool()
    chunk = 1 << 20
    compressed = pool.acquire(700_000, at_least=chunk)
    assert len(compressed) == 700_000 and len(compressed.obj) == chunk
    pool.release(compressed)
    raw = pool.acquire(chunk, at_least=chunk)  # an uncompressed body of a same-chunked array
    assert raw.obj is compressed.obj and len(raw) == chunk
    pool.release(raw)
    past = pool.acquire(chunk + 16, at_least=chunk)  # a header past the chunk: the next class
    assert past.obj is not raw.obj and len(past.obj) == 1_310_720
    pool.release(past)
    assert pool.idle_bytes() == 2 * chunk + 16  # what was written, not the capacities
    big = 16 << 20  # from NumPy's huge-page threshold (4 MiB) up, bodies keep their own size
    assert len(BufferPool().acquire(700_000, at_least=big).obj) == 786_432


def test_pool_keeps_every_buffer_while_reads_run_then_trims() -> None:
    pool = BufferPool()
    with azarr.config.set(buffer_pool_bytes=2 * 65_536):
        views = [pool.acquire(65_536) for _ in range(5)]
        with pool.reading():
            with pool.reading():  # reads overlap: the pool trims when the last one ends
                for view in views[:4]:
                    pool.release(view)
            assert pool.idle_bytes() == 4 * 65_536
        assert pool.idle_bytes() == 2 * 65_536
        pool.release(views[4])  # no read running: over the cap, dropped
        assert pool.idle_bytes() == 2 * 65_536


def test_pool_ignores_buffers_it_did_not_make() -> None:
    pool = BufferPool()
    pool.release(memoryview(b"immutable bytes"))
    pool.release(memoryview(bytearray(65_536)))  # a capacity class, but not the pool's
    assert pool.idle_bytes() == 0


def test_buffer_pool_bytes_setting() -> None:
    with pytest.raises(ValueError, match="buffer_pool_bytes"):
        azarr.config.set(buffer_pool_bytes=-1)
    with azarr.config.set(buffer_pool_bytes=0):
        assert not BufferPool.enabled()
    assert BufferPool.enabled()


# ---------------------------------------------------------------------------- Store.get_into
@pytest.mark.s3
async def test_s3_get_into_receives_into_the_allocated_buffer(seaweedfs: Any, s3_bucket: str) -> None:
    store = _s3(seaweedfs, s3_bucket)
    value = bytes(range(256)) * 1000
    await store.set("a/0.0", value)
    asked: list[int] = []

    def allocate(nbytes: int) -> memoryview:
        asked.append(nbytes)
        return memoryview(bytearray(nbytes))

    got = await store.get_into("a/0.0", allocate)
    assert isinstance(got, memoryview) and bytes(got) == value
    assert asked == [len(value)]
    assert await store.get_into("a/missing", allocate) is None
    assert asked == [len(value)]  # a 404 body is not received into a buffer
    await store.close()


@pytest.mark.s3
async def test_get_into_falls_back_to_get(seaweedfs: Any, s3_bucket: str) -> None:
    """Drivers without the primitive, and subclasses overriding ``_get``, return ``get``'s bytes."""

    class Reversed(S3Store):
        async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
            value = await super()._get(key, byte_range)
            return None if value is None else value[::-1]

    plain = _s3(seaweedfs, s3_bucket)
    await plain.set("k", b"abcdef")
    root = plain.url.split("://", 1)[1]
    for store, expected in [
        (Reversed(root, storage_options=seaweedfs.storage_options), b"fedcba"),
        (S3Store(root, storage_options=seaweedfs.storage_options, transport="s3fs"), b"abcdef"),
    ]:
        got = await store.get_into("k", lambda n: memoryview(bytearray(n)))
        assert type(got) is bytes and got == expected
        await store.close()
    await plain.close()


async def test_http_get_into(http_server: Any) -> None:
    name = uuid.uuid4().hex[:8]
    (Path(http_server.root) / name).mkdir()
    (Path(http_server.root) / name / "blob").write_bytes(b"x" * 200_000)
    store = HTTPStore(f"{http_server.url}/{name}")
    got = await store.get_into("blob", lambda n: memoryview(bytearray(n)))
    assert isinstance(got, memoryview) and bytes(got) == b"x" * 200_000
    assert await store.get_into("missing", lambda n: memoryview(bytearray(n))) is None
    await store.close()


# ---------------------------------------------------------------------------- array reads
CODECS = [None, numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE), numcodecs.Zstd(1)]


@pytest.mark.s3
@pytest.mark.parametrize("compressor", CODECS, ids=["none", "blosc", "zstd"])
async def test_array_reads_use_the_pool_and_match_the_plain_path(
    seaweedfs: Any, s3_bucket: str, compressor: Any
) -> None:
    store = _s3(seaweedfs, s3_bucket)
    await azarr.array(DATA, chunks=CHUNKS, compressor=compressor, store=store)
    arr = await azarr.open_array(store, mode="r")
    selections: list[Any] = [
        ...,
        (slice(100, 700), slice(5, 600, 3)),
        (slice(256, 512), slice(0, 512)),
        (slice(256, 512), slice(0, 256)),  # one chunk: read_one
        (300, 7),  # one element
    ]
    for selection in selections:
        BODY_BUFFERS.clear()
        pooled = await arr.get_basic_selection(selection)
        assert BODY_BUFFERS.idle_bytes() > 0  # bodies were received into pool buffers and came back
        with azarr.config.set(buffer_pool_bytes=0):
            BODY_BUFFERS.clear()
            plain = await arr.get_basic_selection(selection)
            assert BODY_BUFFERS.idle_bytes() == 0
        np.testing.assert_array_equal(pooled, plain)
        np.testing.assert_array_equal(pooled, DATA[selection])
    await store.close()


@pytest.mark.s3
async def test_compressed_bodies_take_buffers_of_the_chunk_size(seaweedfs: Any, s3_bucket: str) -> None:
    """Blosc bodies of ``DATA`` are a few KiB; their buffers are of the chunk's class (256 KiB),
    so a later uncompressed (or otherwise compressed) read of that chunk size reuses them."""
    store = _s3(seaweedfs, s3_bucket)
    await azarr.array(DATA, chunks=CHUNKS, compressor=numcodecs.Blosc("lz4", 5, 1), store=store)
    sizes = [await store.getsize(f"{i}.{j}") for i in range(4) for j in range(3)]
    assert max(sizes) < 65_536
    arr = await azarr.open_array(store, mode="r")
    np.testing.assert_array_equal(await arr.get_basic_selection(...), DATA)
    idle = BODY_BUFFERS.idle_bytes()
    assert 0 < idle <= sum(sizes)  # counted by what was written into them
    chunk_bytes = CHUNKS[0] * CHUNKS[1] * 4
    uncompressed = BODY_BUFFERS.acquire(chunk_bytes, at_least=chunk_bytes)
    assert BODY_BUFFERS.idle_bytes() < idle  # an idle Blosc buffer served the whole chunk
    BODY_BUFFERS.release(uncompressed)
    await store.close()


@pytest.mark.s3
async def test_results_never_alias_a_reused_buffer(seaweedfs: Any, s3_bucket: str) -> None:
    """A buffer goes back to the pool after decoding; what a read returned must not change
    when the next read reuses it (uncompressed chunks are the risk: no decode copy)."""
    first, second = _s3(seaweedfs, s3_bucket), _s3(seaweedfs, s3_bucket)
    await azarr.array(DATA, chunks=CHUNKS, compressor=None, store=first)
    await azarr.array(-DATA, chunks=CHUNKS, compressor=None, store=second)
    a = await azarr.open_array(first, mode="r")
    b = await azarr.open_array(second, mode="r")
    results = [await a.get_basic_selection(sel) for sel in (..., (slice(0, 256), slice(0, 256)))]
    await b.get_basic_selection(...)
    np.testing.assert_array_equal(results[0], DATA)
    np.testing.assert_array_equal(results[1], DATA[:256, :256])
    await asyncio.gather(first.close(), second.close())


@pytest.mark.s3
@pytest.mark.parametrize("chunks", [CHUNKS, (256, 768)], ids=["pooled", "into-result"])
async def test_bodies_cut_mid_transfer_are_retried(
    request: pytest.FixtureRequest, chunks: tuple[int, int]
) -> None:
    """Into a pooled buffer, or (chunks spanning the rows) into the result itself: a retried
    body is received again from its start."""
    direct, proxied, proxy = proxied_store_pair("s3", request, "cut")
    await azarr.array(DATA, chunks=chunks, compressor=None, store=direct)
    proxy.configure(reset_mid_body=1.0, fail_first_n=3, methods=["GET"], path=CHUNK_KEYS, seed=3)
    with azarr.config.set(retry_initial_delay=0.01, retry_max_delay=0.05):
        arr = await azarr.open_array(proxied, mode="r")
        np.testing.assert_array_equal(await arr.get_basic_selection(...), DATA)
    assert proxy.counters().injected.get("reset_mid_body") == 3
    assert stats_for(proxied).retries == 3
    assert (BODY_BUFFERS.idle_bytes() == 0) == (chunks != CHUNKS)  # no pooled buffer into the result
    await asyncio.gather(direct.close(), proxied.close())


async def test_local_reads_do_not_use_the_pool(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "a")
    await azarr.array(DATA, chunks=CHUNKS, compressor=None, store=store)
    arr = await azarr.open_array(store, mode="r")
    np.testing.assert_array_equal(await arr.get_basic_selection(...), DATA)
    assert BODY_BUFFERS.idle_bytes() == 0


@pytest.mark.s3
@pytest.mark.parametrize("order", ["C", "F"])
async def test_raw_bodies_land_in_the_result(seaweedfs: Any, s3_bucket: str, order: str) -> None:
    """Uncompressed chunks whose region of the result is contiguous (chunks spanning every
    dimension but the outermost) are received straight into it: no pooled buffer is taken,
    nothing is copied, and the result is the data (C and F order)."""
    data = np.asfortranarray(DATA) if order == "F" else DATA
    chunks = (256, 768) if order == "C" else (1024, 256)
    store = _s3(seaweedfs, s3_bucket)
    await azarr.array(data, chunks=chunks, compressor=None, order=order, store=store)
    arr = await azarr.open_array(store, mode="r")
    got = await arr.get_basic_selection(...)
    np.testing.assert_array_equal(got, DATA)
    assert BODY_BUFFERS.idle_bytes() == 0  # every body landed in the result, none in the pool
    np.testing.assert_array_equal(await arr.get_basic_selection(slice(256, 768)), DATA[256:768])
    await store.close()


@pytest.mark.s3
async def test_a_raw_body_of_the_wrong_size_is_refused_by_key(seaweedfs: Any, s3_bucket: str) -> None:
    """A body shorter than the chunk is not received into the result: it goes to a pooled
    buffer and the decode refuses it, naming the key; a longer one is refused by its
    Content-Length before any of it is received."""
    store = _s3(seaweedfs, s3_bucket)
    await azarr.array(DATA, chunks=(256, 768), compressor=None, store=store)
    arr = await azarr.open_array(store, mode="r")
    wrong: list[tuple[bytes, type[Exception]]] = [
        (bytes(100), azarr.errors.CodecError),
        (bytes(256 * 768 * 4 + 4), azarr.errors.BodyTooLargeError),
    ]
    for body, error in wrong:
        await store.set("2.0", body)
        with pytest.raises(error, match=r"'2\.0'"):
            await arr.get_basic_selection(...)
    await store.close()
