"""Tests for azarr.codecs: the chunk pipeline (zarr-python 2 semantics) and the codec pool."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import json
import multiprocessing
import pickle
import threading
import time
import tracemalloc
import warnings
from collections.abc import Iterator
from typing import Any, Literal

import msgpack
import numpy as np
import pytest

from azarr import config
from azarr.codecs import (
    ChunkCodec,
    decode_chunk_async,
    encode_chunk_async,
    get_codec_pool,
    reset_codec_pool,
    run_in_codec_pool,
    submit_to_codec_pool,
)
from azarr.errors import CodecError, UnsafeCodecError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import numcodecs
    import numcodecs.pickles
    from numcodecs.abc import Codec

CHUNKS = (6, 7)  # non-square, so C and F layouts differ
Order = Literal["C", "F"]


@pytest.fixture(autouse=True)
def _clean_settings() -> Iterator[None]:
    """Every test starts and ends with default settings and a fresh pool."""
    config.reset()
    reset_codec_pool()
    yield
    config.reset()
    reset_codec_pool()


def sample(dtype: str = "f8", shape: tuple[int, ...] = CHUNKS, order: Order = "C") -> np.ndarray:
    """Compressible but non-trivial data, laid out in ``order``."""
    rng = np.random.default_rng(42)
    base = np.arange(int(np.prod(shape))).reshape(shape) % 17 + rng.integers(0, 3, size=shape)
    return np.asarray(base.astype(dtype), order=order)


def assert_chunk(arr: np.ndarray, codec: ChunkCodec) -> None:
    assert arr.shape == codec.chunks
    assert arr.dtype == codec.dtype
    assert arr.flags.c_contiguous if codec.order == "C" else arr.flags.f_contiguous
    assert arr.flags.writeable


# --------------------------------------------------------------- compressors

BLOSC = [
    {"id": "blosc", "cname": cname, "clevel": 5, "shuffle": shuffle, "blocksize": 0}
    for cname in ("lz4", "lz4hc", "blosclz", "zstd", "zlib")
    for shuffle in (0, 1, 2, -1)  # NOSHUFFLE, SHUFFLE, BITSHUFFLE, AUTOSHUFFLE
]
COMPRESSORS: list[dict[str, Any] | None] = [
    *BLOSC,
    {"id": "zstd", "level": 3},
    {"id": "zlib", "level": 1},
    {"id": "gzip", "level": 1},
    {"id": "bz2", "level": 1},
    {"id": "lzma"},
    {"id": "lz4", "acceleration": 1},
    None,
]


def _cid(c: dict[str, Any] | None) -> str:
    if c is None:
        return "none"
    return "-".join(str(v) for k, v in c.items() if k in ("id", "cname", "shuffle"))


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", COMPRESSORS, ids=_cid)
def test_compressor_round_trip(compressor: dict[str, Any] | None, order: Order) -> None:
    codec = ChunkCodec("<i4", CHUNKS, order, compressor, None)
    x = sample("<i4", order="C")  # the caller's layout need not match the chunk order
    enc = codec.encode(x, key="a/0.0")
    assert type(enc) is bytes
    # zarr 2 semantics: the bytes under the compressor are the chunk in `order`
    raw = enc if codec.compressor is None else bytes(codec.compressor.decode(enc))
    assert raw == x.tobytes(order=order)
    dec = codec.decode(enc, key="a/0.0")
    assert_chunk(dec, codec)
    np.testing.assert_array_equal(dec, x)


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    "compressor",
    [{"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}, {"id": "zstd", "level": 1}],
    ids=_cid,
)
def test_decode_for_copy_reuses_a_thread_buffer(compressor: dict[str, Any], order: Order) -> None:
    """Compressed chunks of 64 KiB or more decode into one buffer per thread (no fresh memory
    per chunk); the values are right each time, and another thread gets its own buffer."""
    codec = ChunkCodec("<f4", (128, 256), order, compressor, None)  # 128 KiB
    a, b = np.arange(128 * 256, dtype="<f4").reshape(128, 256), -np.ones((128, 256), "<f4")
    first = codec.decode_for_copy(codec.encode(a, key="k"), key="k")
    np.testing.assert_array_equal(first, a)
    assert first.flags.c_contiguous if order == "C" else first.flags.f_contiguous
    second = codec.decode_for_copy(codec.encode(b, key="k"), key="k")
    assert second is first  # reused: callers copy out before their next call
    np.testing.assert_array_equal(second, b)
    other: list[np.ndarray] = []
    worker = threading.Thread(
        target=lambda: other.append(codec.decode_for_copy(codec.encode(a, key="k"), key="k"))
    )
    worker.start()
    worker.join()
    assert other[0] is not first
    np.testing.assert_array_equal(other[0], a)
    small = ChunkCodec("<f4", (16, 16), order, compressor, None)  # 1 KiB: malloc's free lists serve it
    assert small.decode_for_copy(small.encode(a[:16, :16], key="k"), key="k") is not small.decode_for_copy(
        small.encode(a[:16, :16], key="k"), key="k"
    )


@pytest.mark.parametrize("order", ["C", "F"])
def test_uncompressed_bytes_are_the_layout_in_order(order: Order) -> None:
    x = sample("<f8", shape=(3, 4, 5))
    codec = ChunkCodec("<f8", (3, 4, 5), order, None, None)
    assert codec.encode(x, key="k") == x.tobytes(order=order)
    np.testing.assert_array_equal(codec.decode(x.tobytes(order=order), key="k"), x)


@pytest.mark.parametrize(
    "dtype",
    ["<f8", ">i2", "u1", "?", "<c16", "<M8[ns]", "<m8[s]", "S5", "<U3", [("a", "<i4"), ("b", "<f8", (2,))]],
    ids=str,
)
@pytest.mark.parametrize("compressor", [{"id": "blosc", "cname": "lz4"}, {"id": "zlib"}, None], ids=_cid)
def test_dtypes_round_trip(dtype: Any, compressor: dict[str, Any] | None) -> None:
    dt = np.dtype(dtype)
    x = np.zeros(CHUNKS, dtype=dt)
    flat = x.reshape(-1)
    for i in range(flat.size):
        if dt.names:
            flat[i] = (i, (i / 2, -i))
        elif dt.kind in "SU":
            flat[i] = str(i)
        elif dt.kind in "mM":
            flat[i] = i * 1000
        else:
            flat[i] = i % 2 if dt.kind == "b" else i
    codec = ChunkCodec(dt, CHUNKS, "F", compressor, None)
    dec = codec.decode(codec.encode(x, key="k"), key="k")
    assert_chunk(dec, codec)
    np.testing.assert_array_equal(dec, x)


def test_zero_dimensional_chunk() -> None:
    codec = ChunkCodec("<f4", (), "C", {"id": "zstd"}, None)
    x = np.array(3.5, dtype="<f4")
    dec = codec.decode(codec.encode(x, key="0"), key="0")
    assert dec.shape == () and dec[()] == 3.5


# ---------------------------------------------------------------- filters


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    ("dtype", "filters", "atol"),
    [
        ("<i4", [{"id": "delta", "dtype": "<i4"}], 0),
        ("<f8", [{"id": "delta", "dtype": "<f8", "astype": "<f4"}], 0),
        (
            "<f8",
            [{"id": "fixedscaleoffset", "offset": 5, "scale": 100, "dtype": "<f8", "astype": "<i4"}],
            0.01,
        ),
        ("<f8", [{"id": "quantize", "digits": 3, "dtype": "<f8"}], 1e-3),
        ("<f8", [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}], 0),
        ("<f8", [{"id": "shuffle", "elementsize": 8}], 0),
        ("<i4", [{"id": "delta", "dtype": "<i4"}, {"id": "shuffle", "elementsize": 4}], 0),
    ],
    ids=lambda v: v[0]["id"] if isinstance(v, list) else str(v),
)
def test_filters_round_trip(dtype: str, filters: list[dict[str, Any]], atol: float, order: Order) -> None:
    codec = ChunkCodec(dtype, CHUNKS, order, {"id": "zstd"}, filters)
    x = sample(dtype) + (0.25 if dtype == "<f8" else 0)
    enc = codec.encode(x, key="a/1.2")
    dec = codec.decode(enc, key="a/1.2")
    assert_chunk(dec, codec)
    np.testing.assert_allclose(dec, x, atol=atol, rtol=0)
    assert not codec.direct_decode


@pytest.mark.parametrize("order", ["C", "F"])
def test_packbits_bool(order: Order) -> None:
    codec = ChunkCodec("?", CHUNKS, order, {"id": "zlib"}, [{"id": "packbits"}])
    x = sample("i4") % 2 == 0
    enc = codec.encode(x, key="k")
    # 42 bools pack into 6 bytes plus the padding byte
    assert len(numcodecs.Zlib().decode(enc)) == 7
    np.testing.assert_array_equal(codec.decode(enc, key="k"), x)


@pytest.mark.parametrize("order", ["C", "F"])
def test_categorize_object(order: Order) -> None:
    labels = ["red", "green", "blue"]
    filters = [{"id": "categorize", "labels": labels, "dtype": "|O", "astype": "|u1"}]
    codec = ChunkCodec(object, CHUNKS, order, {"id": "blosc"}, filters)
    assert codec.is_object
    x = np.array([labels[i % 3] for i in range(42)], dtype=object).reshape(CHUNKS)
    dec = codec.decode(codec.encode(x, key="k"), key="k")
    assert_chunk(dec, codec)
    assert dec.tolist() == x.tolist()


# --------------------------------------------------------- object codecs


def _objects(kind: str) -> np.ndarray:
    if kind == "str":
        items: list[Any] = [f"s{i}" * (i % 4) for i in range(12)]
        items[5] = "ünïcode"
    elif kind == "bytes":
        items = [bytes(range(i % 5)) for i in range(12)]
    elif kind == "array":
        items = [np.arange(i % 4, dtype="<i4") for i in range(12)]
    else:
        items = [{"a": i} if i % 3 == 0 else [i, "x"] if i % 3 == 1 else i for i in range(12)]
    out = np.empty(12, dtype=object)
    out[:] = items
    return out.reshape(3, 4)


OBJECT_CODECS = [
    ({"id": "vlen-utf8"}, "str"),
    ({"id": "vlen-bytes"}, "bytes"),
    ({"id": "vlen-array", "dtype": "<i4"}, "array"),
    ({"id": "json2"}, "str"),
    ({"id": "json2"}, "mixed"),
    ({"id": "msgpack2"}, "str"),
    ({"id": "msgpack2"}, "mixed"),
    ({"id": "pickle"}, "mixed"),
]


def _same_objects(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    for u, v in zip(a.flat, b.flat, strict=True):
        if isinstance(u, np.ndarray):
            np.testing.assert_array_equal(u, v)
        else:
            assert u == v


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [{"id": "zstd"}, None], ids=_cid)
@pytest.mark.parametrize(
    ("object_codec", "kind"), OBJECT_CODECS, ids=lambda v: str(v.get("id", v)) if isinstance(v, dict) else v
)
def test_object_codecs_round_trip(
    object_codec: dict[str, Any], kind: str, compressor: dict[str, Any] | None, order: Order
) -> None:
    codec = ChunkCodec(object, (3, 4), order, compressor, [object_codec], allow_pickle=True)
    x = _objects(kind)
    enc = codec.encode(x, key="o/0.0")
    assert type(enc) is bytes  # numcodecs' vlen codecs return bytearray
    dec = codec.decode(enc, key="o/0.0")
    assert_chunk(dec, codec)
    _same_objects(dec, x)


@pytest.mark.parametrize("codec_id", ["json2", "msgpack2"])
def test_shape_aware_object_codecs_keep_logical_order(codec_id: str) -> None:
    """json2/msgpack2 store the chunk as a nested list: logical order whatever ``order`` is.

    That is what zarr-python 2.18 writes for order="F" (it then reads it back
    transposed); azarr reads the data as written.
    """
    codec = ChunkCodec(object, (2, 3), "F", None, [{"id": codec_id}])
    x = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    enc = codec.encode(x, key="k")
    stored = json.loads(enc) if codec_id == "json2" else msgpack.unpackb(enc)
    assert stored[:-2] == x.tolist()
    assert codec.decode(enc, key="k").tolist() == x.tolist()


def test_object_dtype_without_object_codec() -> None:
    codec = ChunkCodec(object, (4,), "C", {"id": "zstd"}, None)
    x = np.array(["a", "b", "c", "d"], dtype=object)
    with pytest.raises(CodecError, match=r"'o/0'.*without object codec"):
        codec.encode(x, key="o/0")
    with pytest.raises(CodecError, match=r"'o/0'.*without object codec"):
        codec.decode(numcodecs.Zstd().encode(b"\0" * 32), key="o/0")


def test_object_element_count_mismatch() -> None:
    codec = ChunkCodec(object, (4,), "C", None, [{"id": "vlen-utf8"}])
    enc = numcodecs.VLenUTF8().encode(np.array(["a", "b", "c"], dtype=object))
    with pytest.raises(CodecError, match=r"'o/1'.*declares 3 items, the chunk has 4"):
        codec.decode(enc, key="o/1")


def test_object_encode_failure_names_key_and_codec() -> None:
    codec = ChunkCodec(object, (2,), "C", None, [{"id": "vlen-utf8"}])
    with pytest.raises(CodecError, match=r"'s/0'.*VLenUTF8") as info:
        codec.encode(np.array(["ok", 5], dtype=object), key="s/0")
    assert isinstance(info.value.__cause__, TypeError)


# ------------------------------------------------------------- decode into out


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize(
    "compressor", [{"id": "blosc", "cname": "lz4", "shuffle": 1}, {"id": "zstd"}, {"id": "lz4"}], ids=_cid
)
def test_direct_decode_into_out_does_not_copy(compressor: dict[str, Any], order: Order) -> None:
    chunks = (256, 512)  # 1 MiB of float64
    codec = ChunkCodec("<f8", chunks, order, compressor, None)
    assert codec.direct_decode
    x = sample("<f8", shape=chunks)
    enc = codec.encode(x, key="k")
    out = np.empty(chunks, dtype="<f8", order=order)
    tracemalloc.start()
    try:
        result = codec.decode(enc, key="k", out=out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result is out
    np.testing.assert_array_equal(out, x)
    assert peak < codec.nbytes // 8, f"decode allocated {peak} bytes for a {codec.nbytes}-byte chunk"
    # Without `out` the chunk is still decompressed in place into one fresh array.
    tracemalloc.start()
    try:
        fresh = codec.decode(enc, key="k")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert_chunk(fresh, codec)
    assert peak < codec.nbytes * 1.25


@pytest.mark.parametrize(
    ("compressor", "filters", "dtype"),
    [
        ({"id": "zlib"}, None, "<f8"),
        ({"id": "gzip"}, None, "<f8"),
        (None, None, "<f8"),
        ({"id": "zstd"}, [{"id": "delta", "dtype": "<f8"}], "<f8"),
        ({"id": "zstd"}, [{"id": "vlen-utf8"}], object),
    ],
    ids=["zlib", "gzip", "none", "delta", "vlen-utf8"],
)
def test_out_is_honoured_on_copying_paths(compressor: Any, filters: Any, dtype: Any) -> None:
    codec = ChunkCodec(dtype, CHUNKS, "F", compressor, filters)
    assert not codec.direct_decode
    x = sample("<f8", order="F").astype(dtype)
    if codec.is_object:
        x = x.astype(str).astype(object)
    out = np.empty(CHUNKS, dtype=dtype, order="F")
    assert codec.decode(codec.encode(x, key="k"), key="k", out=out) is out
    assert out.tolist() == x.tolist()


@pytest.mark.parametrize(
    "bad",
    [
        np.empty((7, 6), dtype="<f8"),
        np.empty(CHUNKS, dtype="<f4"),
        np.empty(CHUNKS, dtype="<f8", order="F"),
        np.empty((6, 14), dtype="<f8")[:, ::2],
    ],
    ids=["shape", "dtype", "order", "strided"],
)
def test_out_must_fit_the_chunk(bad: np.ndarray) -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", {"id": "zstd"}, None)
    enc = codec.encode(sample(), key="k")
    with pytest.raises(ValueError, match="out must"):
        codec.decode(enc, key="k", out=bad)
    readonly = np.empty(CHUNKS, dtype="<f8")
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        codec.decode(enc, key="k", out=readonly)


def test_decoded_chunk_is_writable_even_from_immutable_bytes() -> None:
    codec = ChunkCodec("<i2", CHUNKS, "C", None, None)
    x = sample("<i2")
    dec = codec.decode(x.tobytes(), key="k")
    dec[0, 0] = 99  # callers modify decoded chunks in read-modify-write
    assert dec[0, 0] == 99


def test_read_only_decode_is_a_view_of_uncompressed_bytes() -> None:
    # Reads only copy each chunk into their output: a chunk stored raw needs no copy of its own.
    codec = ChunkCodec("<i2", CHUNKS, "C", None, None)
    x = sample("<i2")
    stored = x.tobytes()
    view = codec.decode(stored, key="k", writable=False)
    np.testing.assert_array_equal(view, x)
    assert np.shares_memory(view, np.frombuffer(stored, dtype="<i2"))
    assert not np.shares_memory(codec.decode(stored, key="k"), np.frombuffer(stored, dtype="<i2"))
    for f_order in (codec, ChunkCodec("<i2", CHUNKS, "F", None, None)):  # the layout is still honoured
        stored_f = x.tobytes(order=f_order.order)
        np.testing.assert_array_equal(f_order.decode(stored_f, key="k", writable=False), x)


def test_zstd_frame_without_content_size_uses_the_copying_path() -> None:
    """A streamed zstd frame does not state its size: decode falls back to decompress-then-check."""
    payload = np.arange(42, dtype="<i4").tobytes()
    raw_block = (1 | len(payload) << 3).to_bytes(3, "little")  # last block, type raw
    frame = b"\x28\xb5\x2f\xfd" + b"\x00" + b"\x00" + raw_block + payload  # no Frame_Content_Size
    codec = ChunkCodec("<i4", CHUNKS, "C", {"id": "zstd"}, None)
    out = np.empty(CHUNKS, dtype="<i4")
    assert codec.decode(frame, key="z/0", out=out) is out
    np.testing.assert_array_equal(out, np.arange(42).reshape(CHUNKS))
    short = b"\x28\xb5\x2f\xfd\x00\x00" + (1 | 8 << 3).to_bytes(3, "little") + payload[:8]
    with pytest.raises(CodecError, match=r"'z/0'.*8 bytes.*expected 168"):
        codec.decode(short, key="z/0")


@pytest.mark.parametrize("config_", [{"level": 1}, {"level": 5, "checksum": True}, {"level": -3}], ids=str)
@pytest.mark.parametrize("order", ["C", "F"])
def test_zstd_encode_reuses_a_context_and_writes_numcodecs_frames(
    config_: dict[str, Any], order: Order
) -> None:
    """Zstd chunks are compressed with a context kept per thread (`azarr.codecs._zstd`): each
    is one frame declaring its content size (and a checksum when configured), as
    ``numcodecs.Zstd.encode`` writes, and numcodecs decodes it; the same chunk twice gives the
    same bytes (nothing of one frame leaks into the next)."""
    from azarr.codecs._bounded import zstd_content_size

    codec = ChunkCodec("<f4", (64, 48), order, {"id": "zstd", **config_}, None)
    reference = numcodecs.Zstd(**config_)
    chunks = [sample("<f4", (64, 48), order) * k for k in (1, 3)]
    first = [codec.encode(chunk, key="z/0") for chunk in chunks]
    assert [codec.encode(chunk, key="z/0") for chunk in chunks] == first
    for chunk, data in zip(chunks, first, strict=True):
        assert zstd_content_size(memoryview(data)) == chunk.nbytes
        assert bool(data[4] & 0x04) == bool(config_.get("checksum"))  # Content_Checksum_flag
        raw = np.frombuffer(reference.decode(data), dtype="<f4")
        np.testing.assert_array_equal(raw, chunk.ravel(order=order))
        np.testing.assert_array_equal(codec.decode(data, key="z/0"), chunk)
    if (numcodecs.zstd.VERSION_NUMBER // 100) == 105:  # both zstd 1.5.x: the bytes are numcodecs'
        assert first[0] == reference.encode(
            np.ascontiguousarray(chunks[0]) if order == "C" else chunks[0].ravel("F")
        )


def test_zstd_run_decoder_decodes_frames_back_to_back_or_hands_them_back() -> None:
    """`ChunkCodec.scratch_run_decoder`: frames stored back to back, each declaring the chunk's
    size, decoded in one call as they are one by one; anything else is handed back (None)."""
    shape = (128, 130)  # 65 KiB: within the scratch decoder's range
    codec = ChunkCodec("<f4", shape, "C", {"id": "zstd"}, None)
    decode = codec.scratch_run_decoder()
    assert decode is not None
    chunks = [sample("<f4", shape, "C") * k for k in (1, 3, -2)]
    frames = [codec.encode(chunk, key="z/0") for chunk in chunks]
    body = memoryview(b"".join(frames) + frames[0])
    ends = np.cumsum([0, *(len(f) for f in frames)]).tolist()
    spans = list(itertools.pairwise(ends))
    got = decode(body, spans)
    assert got is not None and got.shape == (3, *shape)
    for chunk, decoded in zip(chunks, got, strict=True):
        np.testing.assert_array_equal(decoded, chunk)
    assert decode(body, [spans[0], (ends[3], ends[3] + len(frames[0]))]) is None  # not back to back
    with_checksum = numcodecs.Zstd(level=1, checksum=True).encode(np.ascontiguousarray(chunks[1]))
    assert (
        decode(memoryview(frames[0] + with_checksum), [(0, ends[1]), (ends[1], ends[1] + len(with_checksum))])
        is None
    )
    assert ChunkCodec("<f4", shape, "F", {"id": "zstd"}, None).scratch_run_decoder() is None
    assert ChunkCodec("<f4", shape, "C", {"id": "zlib"}, None).scratch_run_decoder() is None


def test_zstd_run_decoder_accepts_only_what_each_frame_alone_decodes_to() -> None:
    """Damaged runs (bytes flipped, spans moved): whatever the one call accepts, each frame
    decoded alone accepts too, with the same values."""
    shape = (128, 130)
    codec = ChunkCodec("<f4", shape, "C", {"id": "zstd", "checksum": False}, None)
    decode = codec.scratch_run_decoder()
    assert decode is not None
    frames = [codec.encode(sample("<f4", shape, "C") * k, key="z/0") for k in (1, 2, 3)]
    rng = np.random.default_rng(5)
    accepted = 0
    for _ in range(300):
        body = bytearray(b"".join(frames))
        ends = np.cumsum([0, *(len(f) for f in frames)]).tolist()
        if rng.random() < 0.5:
            for at in rng.integers(0, len(body), rng.integers(1, 4)):
                body[at] ^= 1 << int(rng.integers(0, 8))
        else:
            k, by = int(rng.integers(1, 3)), int(rng.integers(-6, 7))
            ends[k] += by
        spans = list(itertools.pairwise(ends))
        got = decode(memoryview(bytes(body)), spans)
        if got is None:
            continue
        accepted += 1
        for (start, stop), chunk in zip(spans, got, strict=True):
            np.testing.assert_array_equal(codec.decode(bytes(body[start:stop]), key="z/0"), chunk)
    assert accepted > 0  # flips in literals go undetected without a checksum: decoded alike


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("compressor", [c for c in COMPRESSORS if c is not None][-7:] + BLOSC[:1], ids=_cid)
def test_corrupt_bytes_raise_codec_error(compressor: dict[str, Any]) -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", compressor, None)
    garbage = bytes(range(7, 250)) * 3
    with pytest.raises(CodecError, match=r"'arr/3\.4'") as info:
        codec.decode(garbage, key="arr/3.4")
    assert type(codec.compressor).__name__ in str(info.value)
    assert not isinstance(info.value, UnsafeCodecError)


@pytest.mark.parametrize("compressor", [c for c in COMPRESSORS if c is not None], ids=_cid)
def test_truncated_bytes_raise_codec_error(compressor: dict[str, Any]) -> None:
    codec = ChunkCodec("<f8", (64, 64), "C", compressor, None)
    rng = np.random.default_rng(0)
    enc = codec.encode(rng.standard_normal((64, 64)), key="k")
    for cut in (len(enc) // 2, 3):
        with pytest.raises(CodecError, match=r"'t/0\.0'"):
            codec.decode(enc[:cut], key="t/0.0")


def test_truncated_blosc_is_caught_before_reading_past_the_buffer() -> None:
    # Incompressible data makes blosc store a memcpy'd frame, which numcodecs
    # would "decode" from memory beyond a truncated buffer without complaint.
    codec = ChunkCodec("u1", (4096,), "C", {"id": "blosc", "cname": "lz4", "shuffle": 0}, None)
    enc = codec.encode(np.random.default_rng(1).integers(0, 256, 4096, dtype="u1"), key="k")
    with pytest.raises(CodecError, match="truncated"):
        codec.decode(enc[:-100], key="b/0")


@pytest.mark.parametrize(
    "compressor",
    [{"id": "blosc"}, {"id": "zstd"}, {"id": "lz4"}, {"id": "zlib"}, {"id": "bz2"}, None],
    ids=_cid,
)
def test_wrong_decompressed_size(compressor: dict[str, Any] | None) -> None:
    small = ChunkCodec("<f8", (5, 7), "C", compressor, None)
    codec = ChunkCodec("<f8", CHUNKS, "C", compressor, None)
    enc = small.encode(sample(shape=(5, 7)), key="k")
    with pytest.raises(CodecError, match=r"'w/0\.0'.*280 bytes.*expected 336"):
        codec.decode(enc, key="w/0.0")
    out = np.zeros(CHUNKS)
    with pytest.raises(CodecError, match="expected 336"):
        codec.decode(enc, key="w/0.0", out=out)


def test_wrong_size_after_filters() -> None:
    codec = ChunkCodec(
        "<f8", CHUNKS, "C", None, [{"id": "astype", "encode_dtype": "<f4", "decode_dtype": "<f8"}]
    )
    with pytest.raises(CodecError, match=r"'f/0'.*expected 336"):
        codec.decode(np.zeros(10, "<f4").tobytes(), key="f/0")


def test_unknown_codec_id() -> None:
    with pytest.raises(CodecError, match=r"unknown codec id 'foo' in compressor of 'a/\.zarray'"):
        ChunkCodec("<f8", CHUNKS, "C", {"id": "foo"}, None, source="a/.zarray")
    with pytest.raises(CodecError, match=r"unknown codec id 'bar' in filters\[1\]"):
        ChunkCodec("<f8", CHUNKS, "C", None, [{"id": "delta", "dtype": "<f8"}, {"id": "bar"}])


@pytest.mark.parametrize(
    ("compressor", "match"),
    [
        (
            {"id": "zstd", "nonsense": 1},
            r"invalid configuration for codec 'zstd' in compressor of 'x/\.zarray'",
        ),
        ({"level": 1}, r"compressor of 'x/\.zarray' has no string 'id'"),
        ("zstd", r"must be a JSON object"),
    ],
)
def test_invalid_codec_config(compressor: Any, match: str) -> None:
    with pytest.raises(CodecError, match=match):
        ChunkCodec("<f8", CHUNKS, "C", compressor, None, source="x/.zarray")


def test_configs_are_not_mutated() -> None:
    compressor = {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2}
    filters = [{"id": "categorize", "labels": ["a", "b"], "dtype": "|O", "astype": "|u1"}]
    before = json.dumps([compressor, filters])
    ChunkCodec(object, CHUNKS, "C", compressor, filters)
    assert json.dumps([compressor, filters]) == before


def test_bad_encode_input_is_a_value_error() -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", None, None)
    with pytest.raises(ValueError, match="shape"):
        codec.encode(np.zeros((6, 6)), key="k")
    with pytest.raises(ValueError, match="dtype"):
        codec.encode(np.zeros(CHUNKS, dtype="<f4"), key="k")


def test_constructor_validation_and_repr() -> None:
    with pytest.raises(ValueError, match="order"):
        ChunkCodec("<f8", CHUNKS, "X", None, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 1"):
        ChunkCodec("<f8", (0, 3), "C", None, None)
    codec = ChunkCodec("<f8", CHUNKS, "F", {"id": "zstd", "level": 2}, [{"id": "delta", "dtype": "<f8"}])
    text = repr(codec)
    assert "chunks=(6, 7)" in text and "'F'" in text and "Zstd" in text and "Delta" in text
    assert codec.nbytes == 6 * 7 * 8 and codec.size == 42 and not codec.is_object


# ------------------------------------------------------------------ pickle

PICKLE_CALLS: list[str] = []


def _record_call(tag: str) -> str:
    PICKLE_CALLS.append(tag)
    return tag


class _Payload:
    """Unpickling this calls _record_call: a stand-in for a malicious pickle."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (_record_call, ("ran",))


def _pickle_chunk() -> tuple[bytes, np.ndarray]:
    x = np.empty(2, dtype=object)
    x[:] = [_Payload(), "b"]
    writer = ChunkCodec(object, (2,), "C", {"id": "zlib"}, [{"id": "pickle"}])
    return writer.encode(x, key="p/0"), x  # encoding needs no opt-in


def test_pickle_refused_by_default() -> None:
    enc, _ = _pickle_chunk()
    PICKLE_CALLS.clear()
    codec = ChunkCodec(object, (2,), "C", {"id": "zlib"}, [{"id": "pickle"}])
    assert codec.uses_pickle and not codec.pickle_allowed
    with pytest.raises(
        UnsafeCodecError, match=r"chunk 'p/0' is encoded with the pickle codec.*allow_pickle=True"
    ):
        codec.decode(enc, key="p/0")
    assert PICKLE_CALLS == []  # nothing was unpickled


def test_pickle_allowed_explicitly() -> None:
    enc, _ = _pickle_chunk()
    PICKLE_CALLS.clear()
    codec = ChunkCodec(object, (2,), "C", {"id": "zlib"}, [{"id": "pickle"}], allow_pickle=True)
    assert codec.decode(enc, key="p/0").tolist() == ["ran", "b"]
    assert PICKLE_CALLS == ["ran"]
    # azarr's opt-in does not flip numcodecs' process-wide switch
    assert getattr(numcodecs.pickles, "ALLOW_UNSAFE_PICKLE_DECODE", False) is False


def test_pickle_allowed_by_config_read_at_decode_time() -> None:
    enc, _ = _pickle_chunk()
    codec = ChunkCodec(object, (2,), "C", {"id": "zlib"}, [{"id": "pickle"}])
    with config.set(allow_pickle=True):
        assert codec.decode(enc, key="p/0")[1] == "b"
    with pytest.raises(UnsafeCodecError):
        codec.decode(enc, key="p/0")
    # an explicit False wins over the config
    strict = ChunkCodec(object, (2,), "C", {"id": "zlib"}, [{"id": "pickle"}], allow_pickle=False)
    with config.set(allow_pickle=True), pytest.raises(UnsafeCodecError):
        strict.decode(enc, key="p/0")


def test_unsafe_error_is_a_codec_error() -> None:
    assert issubclass(UnsafeCodecError, CodecError)
    for codec_conf in (
        {"id": "vlen-utf8"},
        {"id": "json2"},
        {"id": "msgpack2"},
        {"id": "vlen-array", "dtype": "<i4"},
    ):
        assert not ChunkCodec(object, (2,), "C", None, [codec_conf]).uses_pickle


# ------------------------------------------------------------- fill values


def test_fill_chunk() -> None:
    f = ChunkCodec("<f4", CHUNKS, "F", None, None).fill_chunk(np.float32("nan"))
    assert f.shape == CHUNKS and f.dtype == "<f4" and f.flags.f_contiguous and np.isnan(f).all()
    z = ChunkCodec("<i8", CHUNKS, "C", None, None).fill_chunk(None)
    assert (z == 0).all() and z.flags.writeable
    o = ChunkCodec(object, (2, 2), "C", None, [{"id": "vlen-utf8"}])
    assert o.fill_chunk(None).tolist() == [[None, None], [None, None]]
    assert o.fill_chunk("").tolist() == [["", ""], ["", ""]]
    s = ChunkCodec([("a", "<i4"), ("b", "<f8")], (3,), "C", None, None).fill_chunk((1, 2.5))
    assert s.tolist() == [(1, 2.5)] * 3
    t = ChunkCodec("<M8[s]", (2,), "C", None, None).fill_chunk(np.datetime64("NaT"))
    assert np.isnat(t).all()


@pytest.mark.parametrize(
    ("dtype", "values", "fill", "expected"),
    [
        ("<i4", [0, 0, 0], 0, True),
        ("<i4", [0, 1, 0], 0, False),
        ("<i4", [7, 7, 7], 7, True),
        ("<i4", [7, 7, 7], None, False),
        ("u1", [0, 0, 0], 300, False),
        ("<f8", [np.nan] * 3, np.nan, True),
        ("<f8", [np.nan, 1.0, np.nan], np.nan, False),
        ("<f8", [0.0, -0.0, 0.0], 0.0, True),
        ("<f4", [0.1, 0.1, 0.1], np.float32(0.1), True),
        ("<c16", [complex(np.nan, 1)] * 3, complex(np.nan, 1), True),
        ("<c16", [complex(np.nan, 1)] * 3, complex(np.nan, 2), False),
        ("<M8[s]", ["NaT"] * 3, np.datetime64("NaT"), True),
        ("<M8[s]", ["NaT", "2020-01-01", "NaT"], np.datetime64("NaT"), False),
        ("S2", [b"ab"] * 3, b"ab", True),
        ("<U2", ["", "", ""], "", True),
        ("?", [False] * 3, False, True),
    ],
)
def test_is_fill_chunk(dtype: str, values: list[Any], fill: Any, expected: bool) -> None:
    codec = ChunkCodec(dtype, (3,), "C", None, None)
    assert codec.is_fill_chunk(np.array(values, dtype=dtype), fill) is expected


def test_is_fill_chunk_structured_and_object() -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    codec = ChunkCodec(dt, (2,), "C", None, None)
    fill = np.array((1, np.nan), dtype=dt)[()]
    assert codec.is_fill_chunk(np.array([(1, np.nan)] * 2, dtype=dt), fill)
    assert not codec.is_fill_chunk(np.array([(1, np.nan), (2, np.nan)], dtype=dt), fill)

    obj = ChunkCodec(object, (3,), "C", None, [{"id": "vlen-utf8"}])
    assert obj.is_fill_chunk(np.array(["", "", ""], dtype=object), "")
    # stricter than zarr 2's "all falsy": None is not the fill value ""
    assert not obj.is_fill_chunk(np.array(["", None, ""], dtype=object), "")
    arrays = np.empty(2, dtype=object)
    arrays[:] = [np.array([1.0, np.nan]), np.array([1.0, np.nan])]
    assert obj.is_fill_chunk(arrays, np.array([1.0, np.nan]))
    assert not obj.is_fill_chunk(arrays, np.array([1.0]))


# ---------------------------------------------------------------- the pool


class ThreadProbe(Codec):  # type: ignore[misc]
    """A pass-through filter recording the thread it runs on."""

    codec_id = "azarr-test-thread-probe"
    threads: list[str] = []  # noqa: RUF012 - deliberately shared by instances

    def encode(self, buf: Any) -> Any:
        ThreadProbe.threads.append(threading.current_thread().name)
        return buf

    def decode(self, buf: Any, out: Any = None) -> Any:
        ThreadProbe.threads.append(threading.current_thread().name)
        return buf


numcodecs.register_codec(ThreadProbe)


async def test_async_helpers_run_in_codec_threads() -> None:
    codec = ChunkCodec("<i4", CHUNKS, "F", {"id": "zstd"}, [{"id": ThreadProbe.codec_id}])
    ThreadProbe.threads.clear()
    x = sample("<i4")
    enc = await encode_chunk_async(codec, x, "a/0.0")
    dec = await decode_chunk_async(codec, enc, "a/0.0")
    np.testing.assert_array_equal(dec, x)
    assert len(ThreadProbe.threads) == 2
    assert all(name.startswith("azarr-codec") for name in ThreadProbe.threads), ThreadProbe.threads
    assert threading.current_thread().name not in ThreadProbe.threads


async def test_direct_decode_into_out_via_pool() -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", {"id": "blosc"}, None)
    out = np.empty(CHUNKS)
    enc = codec.encode(sample(), key="k")
    assert await decode_chunk_async(codec, enc, "k", out=out) is out
    np.testing.assert_array_equal(out, sample())


async def test_async_decode_errors_propagate() -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", {"id": "zstd"}, None)
    with pytest.raises(CodecError, match="'bad/0'"):
        await decode_chunk_async(codec, b"not zstd at all", "bad/0")


def test_pool_size_follows_config() -> None:
    pool = get_codec_pool()
    assert pool is get_codec_pool()
    assert pool._max_workers == config.get("codec_threads")
    with config.set(codec_threads=3):
        resized = get_codec_pool()
        assert resized is not pool and resized._max_workers == 3
    reset_codec_pool()  # config's context exit restores the value, not the pool
    assert get_codec_pool()._max_workers == config.get("codec_threads")


def test_concurrent_decodes_share_codecs_safely() -> None:
    config.set(codec_threads=8)
    codecs = [
        ChunkCodec("<f8", (64, 64), "F", {"id": "blosc", "cname": "zstd", "shuffle": 2}, None),
        ChunkCodec("<f8", (64, 64), "C", {"id": "zstd"}, [{"id": "shuffle", "elementsize": 8}]),
        ChunkCodec(object, (8, 8), "C", {"id": "lz4"}, [{"id": "vlen-utf8"}]),
    ]
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((64, 64)) for _ in range(16)]
    strings = [
        np.array([str(v) for v in rng.integers(0, 99, 64)], dtype=object).reshape(8, 8) for _ in range(16)
    ]

    async def main() -> None:
        for codec in codecs:
            data = strings if codec.is_object else inputs
            encoded = await asyncio.gather(
                *(encode_chunk_async(codec, x, f"k{i}") for i, x in enumerate(data))
            )
            decoded = await asyncio.gather(
                *(decode_chunk_async(codec, e, f"k{i}") for i, e in enumerate(encoded * 4))
            )
            for i, arr in enumerate(decoded):
                assert arr.tolist() == data[i % len(data)].tolist()

    asyncio.run(main())


async def test_pool_is_bounded() -> None:
    config.set(codec_threads=2)
    active = 0
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.02)
        with lock:
            active -= 1

    await asyncio.gather(*(run_in_codec_pool(work) for _ in range(10)))
    assert peak == 2


def test_pool_works_across_event_loops() -> None:
    codec = ChunkCodec("<f8", CHUNKS, "C", {"id": "lz4"}, None)
    enc = codec.encode(sample(), key="k")

    async def decode_many() -> list[np.ndarray]:
        return await asyncio.gather(*(decode_chunk_async(codec, enc, f"k{i}") for i in range(8)))

    first = asyncio.run(decode_many())
    pool = get_codec_pool()
    second = asyncio.run(decode_many())  # the first loop is closed; the pool is not bound to it
    assert get_codec_pool() is pool
    results: list[list[np.ndarray]] = []
    threads = [threading.Thread(target=lambda: results.append(asyncio.run(decode_many()))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 3
    for batch in [first, second, *results]:
        for arr in batch:
            np.testing.assert_array_equal(arr, sample())


async def test_run_in_codec_pool_args_errors_and_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("caller")
    assert await run_in_codec_pool(lambda a, b: a + b, 2, 3) == 5
    assert await run_in_codec_pool(var.get) == "caller"

    def boom() -> None:
        raise KeyError("inside")

    with pytest.raises(KeyError, match="inside"):
        await run_in_codec_pool(boom)


async def test_submit_to_codec_pool_reports_on_the_loop_thread() -> None:
    """The lean hop: the work runs in a codec thread, ``on_done`` on the loop, errors passed along."""
    loop = asyncio.get_running_loop()
    reports: asyncio.Queue[tuple[BaseException | None, str]] = asyncio.Queue()
    ran_in: list[str] = []

    def work(fail: bool) -> None:
        ran_in.append(threading.current_thread().name)
        if fail:
            raise KeyError("inside")

    for fail in (False, True):
        submit_to_codec_pool(
            work, (fail,), loop, lambda error: reports.put_nowait((error, threading.current_thread().name))
        )
        error, reported_in = await asyncio.wait_for(reports.get(), 10)
        assert reported_in == threading.current_thread().name  # the loop's thread
        assert (error is None) is (not fail)
        if fail:
            assert isinstance(error, KeyError)
    assert all(name.startswith("azarr-codec") for name in ran_in)


def test_submit_to_codec_pool_drops_the_report_when_the_loop_closed() -> None:
    started, release = threading.Event(), threading.Event()
    reports: list[BaseException | None] = []
    loop = asyncio.new_event_loop()
    submit_to_codec_pool(lambda: (started.set(), release.wait(10)), (), loop, reports.append)
    assert started.wait(10)
    loop.close()
    release.set()
    get_codec_pool().submit(lambda: None).result(10)  # the job's callback has run by now ...
    time.sleep(0.05)
    assert reports == []  # ... and raised nothing into the codec thread or the caller


async def test_awaited_codec_jobs_and_cancellation_of_a_running_one() -> None:
    from azarr.codecs import CodecBatcher

    batcher = CodecBatcher()
    assert await asyncio.gather(*(batcher.run(lambda x: x * 2, i, weight=10) for i in range(100))) == [
        i * 2 for i in range(100)
    ]
    started, finished = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.set()

    task = asyncio.ensure_future(batcher.run(slow, weight=1 << 20))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()  # the cancelled call returned only once the thread was done
    assert await batcher.run(lambda: "after") == "after"


async def test_a_lone_codec_job_returns_raises_and_is_counted_in_the_loops_queue_bytes() -> None:
    from azarr.codecs._batcher import _loop_queue, run_alone

    queue = _loop_queue()
    seen: list[int] = []

    def job(x: int) -> int:
        seen.append(queue.outstanding_bytes)  # read in the codec thread, while the job runs
        return x * 2

    assert await asyncio.gather(*(run_alone(job, i, weight=10) for i in range(20))) == [
        i * 2 for i in range(20)
    ]
    assert min(seen) >= 10 and queue.outstanding_bytes == 0

    def fail() -> None:
        raise ValueError("corrupt chunk 'c/0'")

    with pytest.raises(ValueError, match="corrupt chunk"):
        await run_alone(fail, weight=1 << 20)
    assert queue.outstanding_bytes == 0


async def test_a_cancelled_lone_codec_job_waits_for_its_thread_or_never_runs() -> None:
    from azarr.codecs._batcher import _loop_queue, run_alone

    started, finished = threading.Event(), threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.set()

    task = asyncio.ensure_future(run_alone(slow, weight=1 << 20))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()  # returned only once the codec thread was done
    assert _loop_queue().outstanding_bytes == 0

    config.set(codec_threads=1)
    gate = threading.Event()
    ran: list[str] = []
    blocker = asyncio.ensure_future(run_alone(gate.wait, 10.0))
    queued = asyncio.ensure_future(run_alone(ran.append, "queued", weight=5))
    await asyncio.sleep(0.05)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued  # at once: the job never started
    gate.set()
    assert await blocker is True
    await run_alone(lambda: None)  # the single thread has drained its queue
    assert ran == [] and _loop_queue().outstanding_bytes == 0


async def test_reset_lets_running_work_finish() -> None:
    started = threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.2)
        return "done"

    task = asyncio.ensure_future(run_in_codec_pool(slow))
    assert await asyncio.to_thread(started.wait, 10)
    old = get_codec_pool()
    reset_codec_pool()
    assert await task == "done"
    assert get_codec_pool() is not old
    assert await run_in_codec_pool(lambda: 1) == 1


async def test_cancel_waits_for_running_work() -> None:
    """A cancelled decode returns only after the codec thread stopped touching ``out``."""
    started = threading.Event()
    finished = threading.Event()

    def slow() -> None:
        started.set()
        time.sleep(0.2)
        finished.set()

    task = asyncio.ensure_future(run_in_codec_pool(slow))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished.is_set()

    # asyncio.timeout still turns the cancellation into TimeoutError
    started.clear()
    finished.clear()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await run_in_codec_pool(slow)
    assert finished.is_set()


async def test_cancel_drops_queued_work() -> None:
    config.set(codec_threads=1)
    gate = threading.Event()
    ran: list[str] = []
    blocker = asyncio.ensure_future(run_in_codec_pool(gate.wait, 10.0))
    queued = asyncio.ensure_future(run_in_codec_pool(ran.append, "queued"))
    await asyncio.sleep(0.05)
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued  # returns at once: the work never started
    gate.set()
    assert await blocker is True
    await run_in_codec_pool(lambda: None)  # the single thread has drained its queue
    assert ran == []


def _child_uses_pool(conn: Any) -> None:
    async def go() -> str:
        return await run_in_codec_pool(lambda: threading.current_thread().name)

    conn.send(asyncio.run(go()))
    conn.close()


def test_pool_survives_fork() -> None:
    config.set(codec_threads=1)
    # Make the parent's only worker thread exist: a child inheriting this pool
    # without the at-fork reset would queue work for a thread it does not have.
    assert asyncio.run(run_in_codec_pool(lambda: 1)) == 1
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child_uses_pool, args=(child,))
    proc.start()
    try:
        assert parent.poll(60), "the forked child never got a result from the codec pool"
        assert parent.recv().startswith("azarr-codec")
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0


def test_pickle_module_roundtrip_sanity() -> None:
    # the stand-in payload really does run code when unpickled
    PICKLE_CALLS.clear()
    pickle.loads(pickle.dumps(_Payload()))
    assert PICKLE_CALLS == ["ran"]
