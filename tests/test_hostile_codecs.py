"""Bounded decoding: hostile chunk bytes get a CodecError naming the key, never a huge allocation.

Each bomb inflates to 128 MiB (or declares sizes up to 2^62 bytes) while the
chunk holds 4 KiB; the test measures peak RSS growth around the decode
(tests/rss.py), so a decoder that inflated the bomb first and checked the
size after would fail here.
"""

from __future__ import annotations

import bz2
import json
import lzma
import zlib
from collections.abc import Callable
from typing import Any

import msgpack
import numcodecs
import numpy as np
import pytest
from backports.zstd import ZstdCompressor
from rss import MiB, measure_rss

import azarr
from azarr.codecs import ChunkCodec
from azarr.codecs._bounded import zstd_content_size
from azarr.errors import CodecError, MetadataError
from azarr.storage import MemoryStore

BOMB_BYTES = 128 * MiB
RSS_LIMIT = 48 * MiB
CHUNK = (1024,)  # 4 KiB of <i4

pytestmark = pytest.mark.timeout(30)


def _stream_compress(compressor: Any, flush: Callable[[], bytes]) -> bytes:
    block = bytes(MiB)
    parts = [compressor(block) for _ in range(BOMB_BYTES // MiB)]
    parts.append(flush())
    return b"".join(parts)


def _zlib_bomb(wbits: int) -> bytes:
    c = zlib.compressobj(1, zlib.DEFLATED, wbits)
    return _stream_compress(c.compress, c.flush)


def _zstd_bomb() -> bytes:
    c = ZstdCompressor()
    data = _stream_compress(c.compress, lambda: c.flush())
    assert zstd_content_size(memoryview(data)) is None  # streamed: no content size
    return data


def _bz2_bomb() -> bytes:
    c = bz2.BZ2Compressor(1)
    return _stream_compress(c.compress, c.flush)


def _lzma_bomb() -> bytes:
    c = lzma.LZMACompressor(preset=0)
    return _stream_compress(c.compress, c.flush)


BOMBS: dict[str, tuple[dict[str, Any], Callable[[], bytes]]] = {
    "zlib": ({"id": "zlib", "level": 1}, lambda: _zlib_bomb(15)),
    "gzip": ({"id": "gzip", "level": 1}, lambda: _zlib_bomb(31)),
    "bz2": ({"id": "bz2", "level": 1}, _bz2_bomb),
    "lzma": ({"id": "lzma"}, _lzma_bomb),
    "zstd-no-content-size": ({"id": "zstd", "level": 1}, _zstd_bomb),
}
_cache: dict[str, bytes] = {}


def bomb(name: str) -> bytes:
    if name not in _cache:
        _cache[name] = BOMBS[name][1]()
    return _cache[name]


def _assert_bounded(codec: ChunkCodec, data: bytes, key: str, match: str) -> None:
    with measure_rss() as growth, pytest.raises(CodecError, match=match) as info:
        codec.decode(data, key=key)
    assert key in str(info.value)
    assert growth.bytes < RSS_LIMIT, f"peak RSS grew by {growth.bytes / MiB:.0f} MiB"


@pytest.mark.parametrize("name", sorted(BOMBS))
@pytest.mark.parametrize("filters", [None, [{"id": "delta", "dtype": "<i4"}]], ids=["plain", "delta"])
def test_compression_bomb_is_refused_bounded(name: str, filters: Any) -> None:
    codec = ChunkCodec("<i4", CHUNK, "C", BOMBS[name][0], filters)
    _assert_bounded(codec, bomb(name), "a/0", "more than 4096 bytes")


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_in_object_chunk_is_capped_by_max_chunk_bytes(name: str) -> None:
    # An object chunk's byte size is not fixed by its shape: max_chunk_bytes caps it.
    with azarr.config.set(max_chunk_bytes=MiB):
        codec = ChunkCodec(object, (4,), "C", BOMBS[name][0], [{"id": "vlen-bytes"}])
    _assert_bounded(codec, bomb(name), "o/0", f"more than {MiB} bytes")


@pytest.mark.parametrize(
    "compressor", [{"id": "blosc", "cname": "lz4", "clevel": 1, "shuffle": 1}, {"id": "lz4"}, {"id": "zstd"}]
)
def test_declared_size_is_checked_before_allocating_with_filters(compressor: dict[str, Any]) -> None:
    # With a filter the direct-decode path is off; the header's size is still checked first.
    codec = ChunkCodec("<i4", CHUNK, "C", compressor, [{"id": "delta", "dtype": "<i4"}])
    data = bytearray(numcodecs.get_codec(dict(compressor)).encode(np.zeros(1024, "<i4")))
    if compressor["id"] == "blosc":
        data[4:8] = (2**31 - 1).to_bytes(4, "little")
    elif compressor["id"] == "lz4":
        data[:4] = (2**31 - 1).to_bytes(4, "little")
    else:  # a zstd frame header declaring 2^62 bytes (8-byte Frame_Content_Size)
        data = bytearray(b"\x28\xb5\x2f\xfd" + bytes([0xE0]) + (2**62).to_bytes(8, "little") + data[6:])
    _assert_bounded(codec, bytes(data), "a/1.2", "declares")


def test_vlen_item_count_is_checked_before_allocating() -> None:
    codec = ChunkCodec(object, (4,), "C", None, [{"id": "vlen-utf8"}])
    data = bytearray(numcodecs.VLenUTF8().encode(np.array(["a", "b", "c", "d"], dtype=object)))
    data[:4] = (2**28).to_bytes(4, "little")  # 2^28 items: numcodecs would allocate 2 GiB of pointers
    _assert_bounded(codec, bytes(data), "s/0", "declares 268435456 items, the chunk has 4")


@pytest.mark.parametrize("codec_id", ["json2", "msgpack2"])
@pytest.mark.parametrize(
    ("dtype", "shape", "match"),
    [
        ("|O", [2**34], "declares 17179869184 elements"),
        ("|V2000000000", [4], "exceeds"),
        ("|O", "x", "shape"),
    ],
)
def test_json_msgpack_trailer_is_checked_before_allocating(
    codec_id: str, dtype: str, shape: Any, match: str
) -> None:
    codec = ChunkCodec(object, (4,), "C", None, [{"id": codec_id}])
    items = ["a", "b", "c", "d", dtype, shape]
    data = msgpack.packb(items) if codec_id == "msgpack2" else repr(items).replace("'", '"').encode()
    _assert_bounded(codec, data, "j/0", match)


def test_deeply_nested_json_chunk_is_a_codec_error() -> None:
    codec = ChunkCodec(object, (1,), "C", None, [{"id": "json2"}])
    with pytest.raises(CodecError, match="'j/0'"):
        codec.decode(b"[" * 100_000 + b"]" * 100_000, key="j/0")


def test_valid_chunks_still_decode_for_every_bounded_codec() -> None:
    data = np.arange(1024, dtype="<i4")
    for conf, _ in BOMBS.values():
        for filters in (None, [{"id": "delta", "dtype": "<i4", "astype": "<i2"}]):
            codec = ChunkCodec("<i4", CHUNK, "C", conf, filters)
            np.testing.assert_array_equal(codec.decode(codec.encode(data, key="k"), key="k"), data)
    # Concatenated gzip members and bz2 streams decode as the one-shot functions do.
    gz = ChunkCodec("<i4", CHUNK, "C", {"id": "gzip"}, None)
    half = data.tobytes()[:2048], data.tobytes()[2048:]
    import gzip as gzip_module

    joined = gzip_module.compress(half[0]) + gzip_module.compress(half[1])
    np.testing.assert_array_equal(gz.decode(joined, key="k"), data)
    b2 = ChunkCodec("<i4", CHUNK, "C", {"id": "bz2"}, None)
    np.testing.assert_array_equal(b2.decode(bz2.compress(half[0]) + bz2.compress(half[1]), key="k"), data)


def test_truncated_stream_is_a_codec_error() -> None:
    codec = ChunkCodec("<i4", CHUNK, "C", {"id": "zlib"}, None)
    good = codec.encode(np.arange(1024, dtype="<i4"), key="k")
    with pytest.raises(CodecError, match=r"'a/0'.*truncated"):
        codec.decode(good[: len(good) // 2], key="a/0")


def test_chunk_over_max_chunk_bytes_is_refused_at_open() -> None:
    store = MemoryStore()
    doc = {
        "zarr_format": 2,
        "shape": [2**40],
        "chunks": [2**34],
        "dtype": "<f8",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
    }
    import json

    store_dict = {"big/.zarray": json.dumps(doc).encode()}

    async def run() -> None:
        for k, v in store_dict.items():
            await store.set(k, v)
        with measure_rss() as growth, pytest.raises(MetadataError) as info:
            await azarr.open_array(store, mode="r", path="big")
        message = str(info.value)
        assert "big/.zarray" in message and "max_chunk_bytes" in message
        assert "azarr.config.set(max_chunk_bytes=" in message
        assert growth.bytes < RSS_LIMIT
        with azarr.config.set(max_chunk_bytes=2**40):
            arr = await azarr.open_array(store, mode="r", path="big")
        assert arr.chunks == (2**34,)

    import asyncio

    asyncio.run(run())


def test_truncated_blosc_frame_used_as_a_filter_is_refused() -> None:
    codec = ChunkCodec("<i4", CHUNK, "C", None, [{"id": "blosc", "cname": "lz4"}])
    frame = codec.encode(np.arange(1024, dtype="<i4"), key="k")
    with pytest.raises(CodecError, match=r"'a/0'.*truncated"):
        codec.decode(frame[: len(frame) // 2], key="a/0")


@pytest.mark.parametrize("level", [None, float("inf"), float("nan")])
async def test_a_zstd_level_that_is_no_integer_reads_and_refuses_writes(level: Any) -> None:
    # Found by the fuzzer (2026-11-27): opening raised a bare TypeError / OverflowError /
    # ValueError. The level matters to writes only: reads work, as in zarr-python 2.
    store = MemoryStore()
    values = np.arange(35, dtype="<i4").reshape(7, 5)
    await azarr.array(values, chunks=(4, 3), store=store, compressor={"id": "zstd", "level": 1})
    meta = json.loads(await store.get(".zarray") or b"")
    meta["compressor"]["level"] = level
    await store.set(".zarray", json.dumps(meta).encode())
    arr = await azarr.open_array(store, mode="a")
    np.testing.assert_array_equal(await arr.getitem(...), values)
    with pytest.raises(CodecError, match=r"'0\.0'.*Zstd"):
        await arr.setitem((0, 0), 5)
    np.testing.assert_array_equal(await arr.getitem(...), values)


async def test_an_object_fill_value_that_is_a_list_fills_each_element() -> None:
    # Found by the fuzzer (2026-11-27): reading a missing chunk of an object array whose
    # fill_value is a JSON list raised NumPy's broadcast ValueError.
    store = MemoryStore()
    await azarr.create((7, 5), chunks=(4, 3), dtype=object, object_codec=numcodecs.MsgPack(), store=store)
    meta = json.loads(await store.get(".zarray") or b"")
    meta["fill_value"] = [["a", "<f8"], ["b", "|O"]]
    await store.set(".zarray", json.dumps(meta).encode())
    arr = await azarr.open_array(store, mode="r")
    for selection in [..., (slice(0, 2), 1)]:
        values = np.asarray(await arr.getitem(selection), dtype=object).ravel()
        assert all(value == [["a", "<f8"], ["b", "|O"]] for value in values), selection
    assert await arr.getitem((6, 4)) == [["a", "<f8"], ["b", "|O"]]  # one element: the value itself
