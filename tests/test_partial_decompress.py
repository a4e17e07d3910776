"""``partial_decompress=True``: Blosc chunks read in part give the same bytes as whole reads, with fewer
bytes fetched, on memory, local and SeaweedFS S3 stores; everything else falls back to whole reads."""

from __future__ import annotations

import pickle
from typing import Any

import numcodecs
import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS
from util import proxied_store_pair

import azarr
import azarr.sync
from azarr.errors import ChunkNotFoundError, CodecError
from azarr.scheduler import stats_for
from azarr.storage import MemoryStore, Store

STORES = ["memory", "local", pytest.param("s3", marks=pytest.mark.s3)]

SHAPE = (300, 700)
CHUNKS = (256, 512)  # 131,072 elements: every dtype below makes chunks of >= 128 KiB

# (dtype, cname, shuffle, blocksize): typesizes 1-24, every shuffle, several block sizes
CODECS = [
    ("<f4", "lz4", numcodecs.Blosc.SHUFFLE, 0),
    ("|u1", "zstd", numcodecs.Blosc.NOSHUFFLE, 4096),
    ("<i2", "blosclz", numcodecs.Blosc.BITSHUFFLE, 10_000),
    (">f8", "zlib", numcodecs.Blosc.SHUFFLE, 8192),
    ("<c16", "lz4hc", numcodecs.Blosc.SHUFFLE, 16_384),
    ("|S5", "lz4", numcodecs.Blosc.SHUFFLE, 3000),
    ([("a", "<i4"), ("b", "<f8")], "zstd", numcodecs.Blosc.BITSHUFFLE, 2048),
    ("|V24", "lz4", numcodecs.Blosc.SHUFFLE, 5000),  # typesize > 16: Blosc never splits
]

# (kind, selection): basic, strided, integer, orthogonal, coordinate, mask; edge chunks included
SELECTIONS: list[tuple[str, Any]] = [
    ("basic", (5, 7)),
    ("basic", (slice(10, 20), slice(100, 130))),
    ("basic", (slice(None, None, 37), 3)),
    ("basic", (slice(250, 300), slice(500, 700))),
    ("basic", (17, slice(None))),
    ("basic", (slice(None), 600)),
    ("basic", (slice(3, 290, 11), slice(1, 699, 97))),
    ("basic", (Ellipsis,)),
    ("orthogonal", ([3, 100, 299], slice(None, None, 50))),
    ("orthogonal", (np.array([250, 10]), [699, 0, 1])),
    ("coordinate", ([0, 299, 150, 150, 255, 256], [0, 699, 3, 4, 511, 512])),
    ("mask", None),
]


def _data(dtype: Any, seed: int = 0) -> np.ndarray[Any, Any]:
    """Compressible but varied values of ``dtype`` (random small integers, viewed as bytes)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 8, size=int(np.prod(SHAPE)) * dt.itemsize, dtype=np.uint8)
    if dt.kind == "f" or dt.kind == "c":
        return rng.integers(-50, 50, size=SHAPE).astype(dt)
    return raw.view(dt).reshape(SHAPE)


async def _read(arr: azarr.AsyncArray, kind: str, selection: Any) -> np.ndarray[Any, Any]:
    if kind == "basic":
        return await arr.get_basic_selection(selection)
    if kind == "orthogonal":
        return await arr.get_orthogonal_selection(selection)
    if kind == "coordinate":
        return await arr.get_coordinate_selection(selection)
    mask = np.zeros(SHAPE, dtype=bool)
    mask[[1, 40, 260, 299], [2, 650, 513, 0]] = True
    return await arr.get_mask_selection(mask)


def _expected(data: np.ndarray[Any, Any], kind: str, selection: Any) -> np.ndarray[Any, Any]:
    if kind == "orthogonal":
        return data[np.ix_(*(np.arange(n)[s] for s, n in zip(selection, SHAPE, strict=True)))]
    if kind == "coordinate":
        return data[tuple(np.asarray(s) for s in selection)]
    if kind == "mask":
        return data[[1, 40, 260, 299], [2, 650, 513, 0]]
    return data[selection]


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("store_factory", STORES, indirect=True)
@pytest.mark.parametrize(("dtype", "cname", "shuffle", "blocksize"), CODECS)
async def test_bit_exact_like_whole_reads(
    store_factory: Any, dtype: Any, cname: str, shuffle: int, blocksize: int
) -> None:
    store: Store = store_factory()
    data = _data(dtype)
    compressor = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=blocksize)
    whole = await azarr.create(SHAPE, chunks=CHUNKS, dtype=data.dtype, compressor=compressor, store=store)
    await whole.set_basic_selection(..., data)
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    assert part.partial_decompress and not whole.partial_decompress
    stats = stats_for(store)
    for i, (kind, selection) in enumerate(SELECTIONS):
        stats.reset()
        got = await _read(part, kind, selection)
        partial_bytes = stats.bytes_read
        stats.reset()
        want = await _read(whole, kind, selection)
        assert _same(got, want), (kind, selection)
        assert _same(got, _expected(data, kind, selection)), (kind, selection)
        if blocksize and i == 0:  # one element, many blocks: the element's block, not the chunk
            assert partial_bytes * 2 < stats.bytes_read, (partial_bytes, stats.bytes_read)


@pytest.mark.parametrize("store_factory", STORES, indirect=True)
async def test_fewer_bytes_for_a_small_selection(store_factory: Any) -> None:
    store: Store = store_factory()
    data = np.random.default_rng(2).integers(0, 1000, (1024, 1024)).astype("<f4")  # one 4 MiB chunk
    z = await azarr.create(data.shape, chunks=data.shape, dtype="<f4", store=store)
    await z.set_basic_selection(..., data)
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    stats = stats_for(store)
    stats.reset()
    assert await part.get_basic_selection((700, 3)) == data[700, 3]
    partial_bytes, partial_requests = stats.bytes_read, stats.requests
    stats.reset()
    assert await z.get_basic_selection((700, 3)) == data[700, 3]
    # the header with its block table, then one block: two requests, a fraction of the bytes
    assert partial_requests == 2
    assert partial_bytes * 4 < stats.bytes_read, (partial_bytes, stats.bytes_read)
    stats.reset()
    assert _same(await part.get_basic_selection((slice(0, 2), slice(None))), data[0:2])
    assert stats.bytes_read * 4 < len(await store.get("0.0") or b"")


@pytest.mark.parametrize("store_factory", STORES, indirect=True)
async def test_memcpyd_chunk_reads_only_the_selected_bytes(store_factory: Any) -> None:
    store: Store = store_factory()
    data = np.random.default_rng(1).integers(0, 256, size=(512, 1024), dtype=np.uint8)  # incompressible
    z = await azarr.create(data.shape, chunks=data.shape, dtype="u1", store=store)
    await z.set_basic_selection(..., data)
    stored = await store.get("0.0")
    assert stored is not None and stored[2] & 0x02, "expected Blosc to store this chunk memcpy'd"
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    stats = stats_for(store)
    stats.reset()
    assert _same(await part.get_basic_selection((100, slice(10, 20))), data[100, 10:20])
    assert stats.bytes_read < 8192 and stats.requests == 2  # a 4 KiB first read, then 10 bytes
    for sel in [(slice(0, 511, 13), slice(1000, 1024)), (Ellipsis,), (511, 1023)]:
        assert _same(await part.get_basic_selection(sel), data[sel])
    assert _same(
        await part.get_coordinate_selection(([0, 511, 7], [1023, 0, 7])), data[[0, 511, 7], [1023, 0, 7]]
    )


FALLBACKS = [
    pytest.param({"compressor": numcodecs.Zstd(level=1)}, id="zstd"),
    pytest.param({"compressor": None}, id="no-compressor"),
    pytest.param({"filters": [numcodecs.Delta(dtype="<i4")]}, id="filters"),
    pytest.param({"order": "F"}, id="F-order"),
    pytest.param({"chunks": (64, 64)}, id="small-chunks"),
    pytest.param({"compressor": numcodecs.Blosc(blocksize=1 << 22)}, id="one-block"),
]


@pytest.mark.parametrize("store_factory", ["memory", "local"], indirect=True)
@pytest.mark.parametrize("options", FALLBACKS)
async def test_other_layouts_read_whole(store_factory: Any, options: dict[str, Any]) -> None:
    store: Store = store_factory()
    data = (np.arange(512 * 512, dtype="<i4") % 1013).reshape(512, 512)
    kwargs = {"chunks": (256, 512), **options}
    z = await azarr.create(data.shape, dtype="<i4", store=store, **kwargs)
    await z.set_basic_selection(..., data)
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    stats = stats_for(store)
    for kind, selection in [("basic", (5, 7)), ("orthogonal", ([1, 300], slice(0, 512, 5)))]:
        stats.reset()
        got = await _read(part, kind, selection)
        requests, nbytes = stats.requests, stats.bytes_read
        stats.reset()
        assert _same(got, await _read(z, kind, selection))
        assert (requests, nbytes) == (stats.requests, stats.bytes_read)  # whole chunks, as without


async def test_fields_missing_chunks_and_fill() -> None:
    store = MemoryStore()
    dtype = np.dtype([("a", "<i4"), ("b", "<f8")])
    z = await azarr.create((600, 300), chunks=(300, 300), dtype=dtype, fill_value=None, store=store)
    data = np.zeros((300, 300), dtype=dtype)
    data["a"] = np.arange(90_000).reshape(300, 300)
    data["b"] = data["a"] / 7
    await z.set_basic_selection(slice(0, 300), data)  # the second chunk is never written
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    assert _same(await part.get_basic_selection((slice(5, 9), 4), fields="b"), data["b"][5:9, 4])
    assert _same(await part.get_basic_selection((299, slice(2, 5))), data[299, 2:5])
    stats = stats_for(store)
    stats.reset()
    missing = await part.get_basic_selection((slice(400, 402), 0))
    assert _same(missing, np.zeros(2, dtype=dtype)) and stats.requests == 1
    strict = await azarr.open_array(store, mode="r", partial_decompress=True, fill_missing_data_reads=False)
    assert _same(await strict.get_basic_selection((7, 8)), data[7, 8])
    with pytest.raises(ChunkNotFoundError, match=r"'1\.0'"):
        await strict.get_basic_selection((400, 0))


def _chunk(n: int = 1 << 18) -> tuple[np.ndarray[Any, Any], bytes]:
    data = (np.arange(n, dtype="<i4") % 1001).astype("<i4")
    return data, bytes(numcodecs.Blosc(cname="lz4", blocksize=16_384).encode(data))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b[:10], "shorter than a Blosc header"),
        (lambda b: b[:200], "bytes stored"),
        (lambda b: b[:16] + (10**8).to_bytes(4, "little") + b[20:], "block table points outside"),
        (lambda b: b[:4] + (12345).to_bytes(4, "little") + b[8:], "does not fit a chunk"),
        (lambda b: b[: len(b) // 2 + 100] + b"\xff" * (len(b) - len(b) // 2 - 100), "block"),
        (lambda b: b[: len(b) - 40], "missing"),
    ],
    ids=["short-header", "truncated-table", "bad-table", "wrong-nbytes", "corrupt-block", "short-tail"],
)
async def test_corrupt_chunks_raise_codec_error_naming_the_key(damage: Any, message: str) -> None:
    store = MemoryStore()
    data, encoded = _chunk()
    z = await azarr.create((1 << 18,), chunks=(1 << 18,), dtype="<i4", store=store, path="x")
    await store.set("x/0", damage(encoded))
    part = await azarr.open_array(store, mode="r", path="x", partial_decompress=True)
    with pytest.raises(CodecError, match=message) as info:
        # the first element and the last block's elements, so every damaged spot is read
        await part.get_orthogonal_selection(([0, 1 << 17, (1 << 18) - 1],))
    assert "'x/0'" in str(info.value)
    await store.set("x/0", encoded)
    assert _same(await z.get_orthogonal_selection(([0, 5],)), data[[0, 5]])


async def test_option_reaches_every_open_path(tmp_path: Any) -> None:
    root = str(tmp_path / "a.zarr")
    created = await azarr.open_array(
        root, mode="w", shape=(10,), chunks=(5,), dtype="i4", partial_decompress=True
    )
    assert created.partial_decompress
    await created.set_basic_selection(..., np.arange(10, dtype="i4"))
    opened = await azarr.open(root, mode="r", partial_decompress=True)
    assert isinstance(opened, azarr.AsyncArray) and opened.partial_decompress
    assert (await azarr.AsyncArray.open(created.store, partial_decompress=True)).partial_decompress
    assert not (await azarr.open_array(root, mode="r")).partial_decompress
    assert pickle.loads(pickle.dumps(opened)).partial_decompress
    assert opened.view(dtype="u4").partial_decompress
    sync = azarr.sync.open_array(root, mode="r", partial_decompress=True)
    assert sync.partial_decompress and list(sync[3:5]) == [3, 4]


@pytest.mark.s3
async def test_ranged_reads_are_retried_through_faults(request: pytest.FixtureRequest) -> None:
    """Every part of a partial read goes through the managed path: injected 503s are retried."""
    direct, proxied, proxy = proxied_store_pair("s3", request, "p")
    data = np.random.default_rng(3).integers(0, 100, (512, 1024)).astype("<f4")
    compressor = numcodecs.Blosc(cname="lz4", blocksize=8192)
    z = await azarr.create(data.shape, chunks=(512, 512), dtype="<f4", compressor=compressor, store=direct)
    await z.set_basic_selection(..., data)
    proxy.configure(status_503=0.3, methods=["GET"], path=CHUNK_KEYS, seed=11)
    part = await azarr.open_array(proxied, mode="r", partial_decompress=True)
    stats = stats_for(proxied)
    stats.reset()
    proxy.reset_counters()  # after the open's metadata reads
    for row in range(0, 512, 16):
        sel = (row, slice(row, row + 600, 7))
        assert _same(await part.get_basic_selection(sel), data[sel])
    counters = proxy.counters()
    assert stats.retries == counters.injected["status_503"] > 5
    assert counters.methods["GET"] == stats.requests  # no request bypassed StoreIO's counters
    await direct.close()
    await proxied.close()


def _reverse_blocks(encoded: bytes) -> bytes:
    """The same Blosc buffer with its blocks stored last-first (as threads may store them)."""
    nbytes, blocksize = (int.from_bytes(encoded[i : i + 4], "little") for i in (4, 8))
    nblocks = -(-nbytes // blocksize)
    starts = [int.from_bytes(encoded[16 + 4 * b : 20 + 4 * b], "little") for b in range(nblocks)]
    bounds = [*sorted(starts), len(encoded)]
    payload = {s: encoded[s : bounds[bounds.index(s) + 1]] for s in starts}
    offset, new_starts, body = 16 + 4 * nblocks, {}, b""
    for s in sorted(starts, reverse=True):
        new_starts[s] = offset + len(body)
        body += payload[s]
    table = b"".join(new_starts[s].to_bytes(4, "little") for s in starts)
    return encoded[:16] + table + body


async def test_blocks_stored_out_of_order() -> None:
    store = MemoryStore()
    data, encoded = _chunk()
    reordered = _reverse_blocks(encoded)
    assert reordered != encoded and _same(np.frombuffer(numcodecs.Blosc().decode(reordered), "<i4"), data)
    await azarr.create(data.shape, chunks=data.shape, dtype="<i4", store=store)
    await store.set("0", reordered)
    part = await azarr.open_array(store, mode="r", partial_decompress=True)
    for sel in [slice(0, 10), slice(100_000, 100_100), slice((1 << 18) - 5, None), slice(7, None, 4099)]:
        assert _same(await part.get_basic_selection(sel), data[sel])


@pytest.mark.parametrize("seed", range(4))
def test_element_spans_match_brute_force(seed: int) -> None:
    from azarr.pipeline._partial import element_spans

    rng = np.random.default_rng(seed)
    chunks = (7, 11, 13)
    flat = np.arange(np.prod(chunks)).reshape(chunks)
    selections = [
        (3, slice(2, 9, 3), slice(None)),
        (slice(None, None, 2), 4, slice(1, 12, 5)),
        np.ix_(rng.integers(0, 7, 4), [10, 0, 3], rng.integers(0, 13, 5)),
        tuple(rng.integers(0, n, 9) for n in chunks),
    ]
    for sel in selections:
        want = np.unique(flat[sel])
        spans = element_spans(sel, chunks)
        got = np.concatenate([np.arange(a, b) for a, b in spans])
        assert np.array_equal(got, want), sel
