"""Zarr v3 sharding (``sharding_indexed``): metadata, reads and writes through the shard adapter,
request counts, index cache, consistency, hostile shards.

Interop with zarr-python 3.4 and TensorStore is ``tests/interop/test_sharding_interop.py``; the
multi-process no-lost-update test is in ``tests/test_consistency.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest

import azarr
import azarr.sync
from azarr.codecs._sharding import MISSING
from azarr.errors import (
    ByteRangeError,
    ConsistencyUnsupportedError,
    MetadataError,
    ShardIndexError,
)
from azarr.metadata import ArrayV3Metadata
from azarr.pipeline._shards import SHARD_INDEXES
from azarr.scheduler import stats_for
from azarr.storage import ByteRange, Generation, LocalStore, MemoryStore, Store
from tests.util import AsyncPathMemoryStore, RecordingStore

ZSTD_INNER = [
    {"name": "bytes", "configuration": {"endian": "little"}},
    {"name": "zstd", "configuration": {"level": 1}},
]


def sharding(
    inner: list[int], *, location: str = "end", codecs: Any = None, index_codecs: Any = None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "chunk_shape": inner,
        "codecs": codecs or ZSTD_INNER,
        "index_location": location,
    }
    if index_codecs is not None:
        config["index_codecs"] = index_codecs
    return {"name": "sharding_indexed", "configuration": config}


def document(
    codecs: list[Any], *, shape: list[int] | None = None, chunks: list[int] | None = None
) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape or [20, 20],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks or [10, 10]}},
        "chunk_key_encoding": {"name": "default"},
        "fill_value": 0,
        "codecs": codecs,
    }


async def make(store: Any, shape: tuple[int, ...] = (40, 30), **kwargs: Any) -> azarr.AsyncArray:
    kwargs.setdefault("chunks", (5, 5))
    kwargs.setdefault("shards", (10, 15))
    kwargs.setdefault("dtype", "i4")
    return await azarr.create(shape, store=store, zarr_format=3, overwrite=True, fill_value=-1, **kwargs)


def values(shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    return np.arange(int(np.prod(shape)), dtype="i4").reshape(shape)


@pytest.fixture(autouse=True)
def _fresh_index_cache() -> None:
    SHARD_INDEXES.clear()


# ---------------------------------------------------------------------- metadata
def test_a_sharded_document_describes_inner_chunks_and_shards() -> None:
    meta = ArrayV3Metadata.from_json(json.dumps(document([sharding([5, 2])])).encode())
    assert meta.shards == (10, 10) and meta.chunks == (10, 10) and meta.inner_chunks == (5, 2)
    assert meta.sharding is not None and meta.sharding.index_location == "end"
    assert meta.chain.compressors[0]["id"] == "zstd"
    assert ArrayV3Metadata.from_json(meta.to_json()) == meta
    # index_codecs and index_location default to zarr-python 3's
    bare = {"name": "sharding_indexed", "configuration": {"chunk_shape": [5, 5], "codecs": ZSTD_INNER}}
    parsed = ArrayV3Metadata.from_json(document([bare]))
    assert (
        parsed.sharding is not None
        and parsed.sharding.index_checksum
        and parsed.sharding.index_endian == "little"
    )


@pytest.mark.parametrize(
    ("codecs", "message"),
    [
        ([sharding([3, 5])], "does not divide"),
        ([sharding([5])], "2 positive integers"),
        ([sharding([5, 5], codecs=[sharding([5, 5])])], "nested sharding"),
        ([sharding([5, 5]), {"name": "crc32c"}], "only as an array's one codec"),
        ([{"name": "transpose", "configuration": {"order": [1, 0]}}, sharding([5, 5])], "one codec"),
        ([sharding([5, 5], location="middle")], "'start' or 'end'"),
        (
            [sharding([5, 5], index_codecs=[{"name": "bytes"}, {"name": "zstd"}])],
            "[bytes] or [bytes, crc32c]",
        ),
        (
            [sharding([5, 5], index_codecs=[{"name": "bytes", "configuration": {"endian": "middle"}}])],
            "endian",
        ),
        (
            [
                {
                    "name": "sharding_indexed",
                    "configuration": {"chunk_shape": [5, 5], "codecs": ZSTD_INNER, "x": 1},
                }
            ],
            "unknown",
        ),
        ([sharding([5, 5], codecs=[{"name": "zstd", "configuration": {"level": 1}}])], "array -> bytes"),
    ],
)
def test_invalid_sharding_configurations_are_refused_by_name(codecs: list[Any], message: str) -> None:
    with pytest.raises(MetadataError, match=r"zarr\.json") as info:
        ArrayV3Metadata.from_json(document(codecs))
    assert message in str(info.value)


async def test_creation_takes_shards_or_an_explicit_codec_list(tmp_path: Path) -> None:
    a = await make(str(tmp_path / "a"), shards={"shape": (10, 15), "index_location": "start"})
    stored = json.loads((tmp_path / "a" / "zarr.json").read_text())
    assert stored["chunk_grid"]["configuration"]["chunk_shape"] == [10, 15]
    (codec,) = stored["codecs"]
    assert codec["name"] == "sharding_indexed" and codec["configuration"]["chunk_shape"] == [5, 5]
    assert codec["configuration"]["index_location"] == "start"
    assert codec["configuration"]["index_codecs"] == [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "crc32c"},
    ]
    assert [c["name"] for c in codec["configuration"]["codecs"]] == ["bytes", "zstd"]
    assert (a.chunks, a.shards, a.cdata_shape, a.nchunks) == ((5, 5), (10, 15), (8, 6), 48)
    b = await azarr.create(
        (40, 30),
        chunks=(10, 15),
        dtype="i4",
        store=str(tmp_path / "b"),
        zarr_format=3,
        codecs=[sharding([5, 5])],
    )
    assert (b.chunks, b.shards) == ((5, 5), (10, 15))
    with pytest.raises(MetadataError, match="does not divide"):
        await make(MemoryStore(), chunks=(4, 4))
    with pytest.raises(ValueError, match="shards must be"):
        await make(MemoryStore(), shards=(10,))
    with pytest.raises(TypeError, match="Zarr v3"):
        await azarr.create((4,), chunks=(2,), shards=(4,), store=MemoryStore(), zarr_format=2)


# ---------------------------------------------------------------------- reads and writes
SELECTIONS: list[tuple[str, Any]] = [
    ("basic", (slice(3, 37, 3), slice(None, None, -2))),
    ("orthogonal", ([0, 7, 8, 39], slice(2, 29))),
    ("coordinate", ([0, 17, 39, 5], [29, 0, 14, 15])),
    ("mask", None),
    ("block", (slice(1, 3), 2)),
]


@pytest.mark.parametrize("location", ["start", "end"])
@pytest.mark.parametrize("kind", ["memory", "local", "async-memory"])
async def test_every_selection_reads_and_writes(tmp_path: Path, location: str, kind: str) -> None:
    store: Any = {"memory": MemoryStore(), "local": str(tmp_path), "async-memory": AsyncPathMemoryStore()}[
        kind
    ]
    a = await make(store, shards={"shape": (10, 15), "index_location": location})
    expected = values((40, 30))
    await a.set_basic_selection(..., expected)
    np.testing.assert_array_equal(await a.get_basic_selection(...), expected)
    mask = (expected % 7) == 0
    for name, sel in SELECTIONS:
        if name == "basic":
            np.testing.assert_array_equal(await a.get_basic_selection(sel), expected[sel])
            await a.set_basic_selection(sel, -expected[sel])
            expected[sel] = -expected[sel]
        elif name == "orthogonal":
            np.testing.assert_array_equal(
                await a.get_orthogonal_selection(sel), expected[np.ix_(sel[0], range(2, 29))]
            )
            await a.set_orthogonal_selection(sel, 7)
            expected[np.ix_(sel[0], range(2, 29))] = 7
        elif name == "coordinate":
            np.testing.assert_array_equal(await a.get_coordinate_selection(sel), expected[sel])
            await a.set_coordinate_selection(sel, [1, 2, 3, 4])
            expected[sel] = [1, 2, 3, 4]
        elif name == "mask":
            np.testing.assert_array_equal(await a.get_mask_selection(mask), expected[mask])
            await a.set_mask_selection(mask, 11)
            expected[mask] = 11
        else:
            np.testing.assert_array_equal(await a.get_block_selection(sel), expected[5:15, 10:15])
            await a.set_block_selection(sel, 0)
            expected[5:15, 10:15] = 0
        np.testing.assert_array_equal(await a.get_basic_selection(...), expected)
    assert await a.get_basic_selection((39, 29)) == expected[39, 29]  # inside one inner chunk
    reopened = await azarr.open_array(store, mode="r")
    np.testing.assert_array_equal(await reopened.get_basic_selection(...), expected)


async def test_f_order_inner_chunks_structured_fields_and_strings() -> None:
    store = MemoryStore()
    f = await make(store, order="F")
    assert f.metadata.chain.order == "F"
    data = values((40, 30))
    await f.set_basic_selection(..., data)
    await f.set_basic_selection((slice(2, 9), 4), 0)
    data[2:9, 4] = 0
    np.testing.assert_array_equal(await f.get_basic_selection(...), data)
    dtype = np.dtype([("a", "<i4"), ("b", "<f8")])
    s = await azarr.create((12,), chunks=(3,), shards=(6,), dtype=dtype, store=MemoryStore(), zarr_format=3)
    record = np.zeros(12, dtype=dtype)
    record["a"] = np.arange(12)
    record["b"] = np.arange(12) / 2
    await s.set_basic_selection(..., record)
    await s.set_basic_selection(slice(1, 5), np.full(4, 9, dtype="<i4"), fields="a")
    record["a"][1:5] = 9
    np.testing.assert_array_equal(await s.get_basic_selection(...), record)
    np.testing.assert_array_equal(await s.get_basic_selection(slice(0, 7), fields="b"), record["b"][:7])
    t = await azarr.create((7,), chunks=(2,), shards=(4,), dtype=str, store=MemoryStore(), zarr_format=3)
    words = np.array(["", "é", "ab", "xyz", "q" * 50, "7", "end"], dtype=object)
    await t.set_basic_selection(..., words)
    await t.set_basic_selection(slice(3, 5), np.array(["new", "too"], dtype=object))
    words[3:5] = ["new", "too"]
    assert list(await t.get_basic_selection(...)) == list(words)


async def test_resize_append_and_nchunks_initialized() -> None:
    store = MemoryStore()
    a = await make(store)
    await a.set_basic_selection(..., values((40, 30)))
    assert await a.nchunks_initialized() == 48  # 8 shards of 6 inner chunks, all stored
    await a.resize(15, 30)  # shards wholly past row 15 go
    assert sorted(k for k in store.data if "/c/" in f"/{k}") == [
        f"c/{i}/{j}" for i in range(2) for j in range(2)
    ]
    assert await a.nchunks_initialized() == 24
    await a.resize(40, 30)
    got = await a.get_basic_selection(...)
    # the shard row cut at row 15 kept all its rows, as in zarr-python 3; the shards past
    # row 20 were deleted before the smaller shape was published (test_crash_windows.py)
    np.testing.assert_array_equal(got[:20], values((40, 30))[:20])
    assert (got[20:] == -1).all()
    b = await make(MemoryStore(), shape=(0, 4), shards=(6, 4), chunks=(3, 2))
    for i in range(4):
        await b.append(np.full((5, 4), i, dtype="i4"))
    assert b.shape == (20, 4)
    np.testing.assert_array_equal(
        await b.get_basic_selection(...), np.repeat(np.arange(4), 5)[:, None] * np.ones(4, "i4")
    )


# ---------------------------------------------------------------------- write_empty_chunks
async def test_write_empty_chunks_applies_per_inner_chunk_and_an_empty_shard_is_deleted() -> None:
    store = MemoryStore()
    a = await make(store, write_empty_chunks=False)
    data = values((40, 30))
    data[0:5, 0:5] = -1  # one inner chunk of shard (0, 0) is all fill
    await a.set_basic_selection(..., data)
    index = _index(store.data["c/0/0"], 6)
    assert index[0].tolist() == [MISSING, MISSING] and (index[1:, 1] != MISSING).all()
    await a.set_basic_selection((slice(0, 10), slice(0, 15)), -1)  # the whole shard: fill
    assert "c/0/0" not in store.data
    await a.set_basic_selection((slice(10, 20), slice(0, 15)), -1)  # a shard made empty in parts
    await a.set_basic_selection((slice(10, 13), slice(0, 15)), -1)
    assert "c/1/0" not in store.data
    np.testing.assert_array_equal((await a.get_basic_selection(...))[:20, :15], -1)
    b = await make(MemoryStore(), write_empty_chunks=True)
    await b.set_basic_selection(..., -1)
    assert (_index(b.store.data["c/0/0"], 6)[:, 1] != MISSING).all()  # type: ignore[attr-defined]


def _index(shard: bytes, count: int, *, start: bool = False) -> np.ndarray[Any, Any]:
    raw = shard[: 16 * count] if start else shard[-16 * count - 4 : -4]
    return np.frombuffer(raw, dtype="<u8").reshape(count, 2)


# ---------------------------------------------------------------------- requests
async def test_requests_whole_shards_one_get_one_put_and_cached_indexes() -> None:
    inner = MemoryStore()
    store = RecordingStore(inner, remote=True)
    a = await make(store, shape=(40, 30))
    store.reset()
    data = values((40, 30))
    await a.set_basic_selection(..., data)
    assert sum(store.sets.values()) == 8 and not store.gets  # one blind PUT per shard
    store.reset()
    stats = stats_for(store)
    stats.reset()
    np.testing.assert_array_equal(await a.get_basic_selection(...), data)
    assert dict(store.gets) == {f"c/{i}/{j}": 1 for i in range(4) for j in range(2)}  # one GET per shard
    # A read of every inner chunk of a shard reads it whole, without looking for its index in
    # the cache (one GET, one version), received into a pooled buffer, without a generation:
    # its index is not cached either.
    assert stats.shard_index_misses == stats.shard_index_hits == 0
    # One inner chunk then costs its index (a suffix range) and its data;
    # the next one, its data alone.
    store.reset()
    stats.reset()
    assert await a.get_basic_selection((12, 17)) == data[12, 17]
    assert store.requests == 2 and stats.shard_index_misses == 1
    store.reset()
    assert await a.get_basic_selection((13, 17)) == data[13, 17]
    assert store.requests == 1 and stats.shard_index_hits == 1
    # A row crossing both shards of a row of shards (3 of their 6 inner chunks each): shard
    # (1, 1), index cached, one run of 3; shard (1, 0), index not cached and half of it
    # needed, one GET of the whole shard. Again, with both indexes cached: one run each.
    for saved, coalesced in ((2, 1), (4, 2)):
        store.reset()
        stats.reset()
        np.testing.assert_array_equal(await a.get_basic_selection(11), data[11])
        assert (store.requests, stats.requests_saved, stats.coalesced_requests) == (2, saved, coalesced)
        await a.get_basic_selection((11, 2))  # caches shard (1, 0)'s index
    # Uncached: the index (a suffix range), then the run.
    SHARD_INDEXES.clear()
    store.reset()
    np.testing.assert_array_equal(await a.get_basic_selection((slice(21, 24), slice(0, 3))), data[21:24, :3])
    assert store.requests == 2 and stats.shard_index_misses == 1


async def test_partial_shard_writes_are_one_get_and_one_conditional_put() -> None:
    store = RecordingStore(MemoryStore(), remote=True)
    a = await make(store)
    await a.set_basic_selection(..., values((40, 30)))
    store.reset()
    await a.set_basic_selection((slice(0, 3), slice(0, 3)), 5)
    assert dict(store.gets) == {"c/0/0": 1} and dict(store.sets) == {"c/0/0": 1}
    got = await a.get_basic_selection(...)
    assert (got[:3, :3] == 5).all() and got[3, 3] == values((40, 30))[3, 3]


# ---------------------------------------------------------------------- consistency
async def test_concurrent_partial_writes_of_one_shard_lose_nothing(tmp_path: Path) -> None:
    for store in (MemoryStore(), LocalStore(tmp_path)):
        a = await make(store, shape=(10, 15))
        others = [await azarr.open_array(store) for _ in range(8)]  # separate handles, one process

        async def writer(i: int, handle: azarr.AsyncArray) -> None:
            for k in range(i, 150, 8):
                await handle.set_basic_selection(divmod(k, 15), k)

        await asyncio.gather(*(writer(i, h) for i, h in enumerate(others)))
        np.testing.assert_array_equal(await a.get_basic_selection(...), np.arange(150).reshape(10, 15))


class ReplacingStore(RecordingStore):
    """Replaces a shard with ``replacement`` right after its index was read (once)."""

    def __init__(self, inner: Store, key: str, replacement: bytes) -> None:
        super().__init__(inner, remote=True)
        self.key, self.replacement, self.armed = key, replacement, False

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        result = await super()._get_range_with_generation(key, byte_range)
        if self.armed and key == self.key:
            self.armed = False
            await self.inner.set(key, self.replacement)
        return result


async def test_a_shard_replaced_between_its_index_and_its_data_is_read_again_whole() -> None:
    inner = MemoryStore()
    old = await make(inner)
    await old.set_basic_selection(..., values((40, 30)))
    old_shard = inner.data["c/0/0"]
    new = await make(MemoryStore())
    await new.set_basic_selection(..., -values((40, 30)))
    replacement = new.store.data["c/0/0"]  # type: ignore[attr-defined]
    store = ReplacingStore(inner, "c/0/0", replacement)
    a = await azarr.open_array(store, mode="r")
    stats = stats_for(store)
    stats.reset()
    store.armed = True
    got = await a.get_basic_selection((slice(0, 8), slice(0, 4)))  # part of shard (0, 0): index, then data
    np.testing.assert_array_equal(got, -values((40, 30))[:8, :4])  # all of the new version
    assert stats.conflicts == 1
    # A cached index gone stale: the pinned data read fails, the index is read again.
    np.testing.assert_array_equal(await a.get_basic_selection((1, 1)), -values((40, 30))[1, 1])  # cached now
    await inner.set("c/0/0", bytes(bytearray(old_shard)))  # the old version again, as a new object
    stats.reset()
    np.testing.assert_array_equal(await a.get_basic_selection((1, 1)), values((40, 30))[1, 1])
    assert stats.conflicts == 1 and stats.shard_index_hits == 1 and stats.shard_index_misses == 1


async def test_partial_writes_refuse_stores_without_conditional_writes_when_asked() -> None:
    class Plain(MemoryStore):
        supports_conditional_writes = False
        supports_conditional_reads = False

    a = await make(Plain())
    await a.set_basic_selection(..., values((40, 30)))
    await a.set_basic_selection((0, 0), 9)  # a plain read-modify-write
    assert await a.get_basic_selection((0, 0)) == 9
    with azarr.config.set(require_consistency=True), pytest.raises(ConsistencyUnsupportedError):
        await a.set_basic_selection((0, 0), 8)
    await a.set_basic_selection((slice(0, 10), slice(0, 15)), 3)  # whole shards need no condition


async def test_a_store_with_conditional_writes_but_no_conditional_reads_reads_unpinned() -> None:
    class WritesOnly(MemoryStore):
        supports_conditional_reads = False

    a = await make(WritesOnly())
    await a.set_basic_selection(..., values((40, 30)))
    await a.set_basic_selection((0, 0), 9)  # conditional read-modify-write
    np.testing.assert_array_equal(
        await a.get_basic_selection((slice(0, 3), slice(0, 12))),
        [[9, *range(1, 12)], *values((40, 30))[1:3, :12]],
    )
    assert len(SHARD_INDEXES) == 0  # nothing cached without pinned reads


# ---------------------------------------------------------------------- hostile shards
async def _hostile(entries: Any, *, checksum: bool = True) -> tuple[azarr.AsyncArray, MemoryStore]:
    store = MemoryStore()
    a = await make(store, shape=(10, 15))
    await a.set_basic_selection(..., values((10, 15)))
    shard = store.data["c/0/0"]
    table = np.array(_index(shard, 6))
    entries(table, len(shard))
    payload = table.astype("<u8").tobytes()
    crc = crc32c.crc32c(payload) if checksum else crc32c.crc32c(payload) ^ 1
    store.data["c/0/0"] = shard[: -16 * 6 - 4] + payload + crc.to_bytes(4, "little")
    return a, store


def _past_end(table: Any, size: int) -> None:
    table[2, 0] = size + 100


def _overlap(table: Any, size: int) -> None:
    table[3, 0] = table[2, 0] + 1


def _huge(table: Any, size: int) -> None:
    table[1, 1] = 2**40


def _half_empty(table: Any, size: int) -> None:
    table[4, 0] = MISSING


def _wraps(table: Any, size: int) -> None:
    table[0, 0] = MISSING - 5


@pytest.mark.parametrize(
    ("tamper", "whole_error", "part_error", "message"),
    [
        (_past_end, ShardIndexError, ByteRangeError, "past"),
        (_overlap, ShardIndexError, ShardIndexError, "overlap"),
        (_huge, ShardIndexError, ShardIndexError, "claims 1099511627776 bytes"),
        (_half_empty, ShardIndexError, ShardIndexError, "only one of offset and nbytes"),
        (_wraps, ShardIndexError, ShardIndexError, r"2\^64"),
    ],
)
async def test_hostile_indexes_give_typed_errors_in_bounded_memory(
    tamper: Any, whole_error: type[Exception], part_error: type[Exception], message: str
) -> None:
    a, _ = await _hostile(tamper)
    tracemalloc.start()
    try:
        with pytest.raises(whole_error, match=message if whole_error is ShardIndexError else None) as info:
            await a.get_basic_selection(...)
        assert "'c/0/0'" in str(info.value)
        with pytest.raises(part_error):
            # inner chunks 1 and 2 of the shard: the index, then ranged reads
            await a.get_basic_selection((slice(0, 4), slice(5, 15)))
        with pytest.raises(whole_error):
            await a.set_basic_selection((0, 0), 1)  # a partial write reads the shard first: refused
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


async def test_a_bad_index_checksum_or_size_is_refused() -> None:
    a, store = await _hostile(lambda t, s: None, checksum=False)
    with pytest.raises(ShardIndexError, match="checksum mismatch"):
        await a.get_basic_selection((0, 0))
    store.data["c/0/0"] = b"short"
    with pytest.raises(ShardIndexError, match="shorter than its"):
        await a.get_basic_selection(...)
    with pytest.raises(ShardIndexError, match="not the 100 bytes"):
        await a.get_basic_selection((0, 0))
    store.data["c/0/0"] = b""
    with pytest.raises(ShardIndexError):
        await a.get_basic_selection((0, 0))


# ---------------------------------------------------------------------- the rest of azarr on sharded arrays
async def test_copies_and_like_arrays_keep_the_shards(tmp_path: Path) -> None:
    src_group = await azarr.open_group(MemoryStore(), mode="w", zarr_format=3)
    src = await make(src_group.store, path="x", shards={"shape": (10, 15), "index_location": "start"})
    data = values((40, 30))
    await src.set_basic_selection(..., data)
    v3 = await azarr.open_group(MemoryStore(), mode="w", zarr_format=3)
    await azarr.copy(src, v3, name="kept")
    await azarr.copy(src, v3, name="recompressed", compressors=None)  # the caller's inner chain
    v2 = await azarr.open_group(MemoryStore(), mode="w", zarr_format=2)
    await azarr.copy(src, v2, name="x")
    like = await azarr.zeros_like(src, store=MemoryStore())
    for arr, shards in [
        (await v3.get("kept"), (10, 15)),
        (await v3.get("recompressed"), (10, 15)),
        (await v2.get("x"), None),
        (like, (10, 15)),
    ]:
        assert isinstance(arr, azarr.AsyncArray)
        assert (arr.chunks, arr.shards) == ((5, 5), shards)
        if arr is not like:
            np.testing.assert_array_equal(await arr.get_basic_selection(...), data)
    kept = await v3.get("kept")
    assert kept.metadata.sharding.index_location == "start"  # type: ignore[union-attr]
    assert (await v3.get("recompressed")).compressors == ()  # type: ignore[union-attr]
    tree = await v3.tree(codecs=True)
    assert "kept (40, 30) int32 v3 sharding_indexed[bytes > zstd]" in tree
    assert "recompressed (40, 30) int32 v3 sharding_indexed[bytes]" in tree


def test_dask_chunks_are_shards_and_writes_align_to_them(tmp_path: Path) -> None:
    import dask.array as da

    import azarr.dask as ad

    a = azarr.sync.create(
        (40, 30), chunks=(5, 5), shards=(10, 15), dtype="i4", store=str(tmp_path / "a"), zarr_format=3
    )
    x = ad.from_azarr(a)
    assert x.chunks == ((10,) * 4, (15, 15))  # one task per shard
    data = values((40, 30))
    with pytest.raises(ValueError, match="Zarr shard boundaries"):
        ad.to_azarr(da.from_array(data, chunks=(5, 5)), a, rechunk=False)
    ad.to_azarr(da.from_array(data, chunks=(5, 5)), a)  # rechunked onto whole shards
    np.testing.assert_array_equal(x.compute(), data)


def test_xarray_reads_the_shards_into_the_encoding(tmp_path: Path) -> None:
    import xarray as xr

    g = azarr.sync.open_group(str(tmp_path / "ds.zarr"), mode="w", zarr_format=3)
    v = g.create("v", shape=(40, 30), chunks=(5, 5), shards=(10, 15), dtype="i4", dimension_names=["y", "x"])
    v[...] = values((40, 30))
    ds = xr.open_dataset(str(tmp_path / "ds.zarr"), engine="azarr")
    assert ds.v.encoding["shards"] == (10, 15) and ds.v.encoding["chunks"] == (5, 5)
    np.testing.assert_array_equal(ds.v.values, values((40, 30)))


def test_cli_info_shows_the_shards_and_verify_decodes_every_inner_chunk(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from azarr.cli import cli

    url = str(tmp_path / "a.zarr")
    a = azarr.sync.create((40, 30), chunks=(5, 5), shards=(10, 15), dtype="i4", store=url, zarr_format=3)
    a[...] = values((40, 30))
    runner = CliRunner()
    info = runner.invoke(cli, ["info", url])
    assert "Chunks             : (5, 5)" in info.output and "Shards             : (10, 15)" in info.output
    assert "sharding_indexed(chunk_shape=[5, 5], codecs=[bytes(endian='little'), zstd(" in info.output
    assert json.loads(runner.invoke(cli, ["info", url, "--json"]).output)["shards"] == [10, 15]
    result = runner.invoke(cli, ["verify", "--decode", url])
    assert result.exit_code == 0 and "8 chunks, 8 decoded: ok" in result.output, result.output
    # One inner chunk's bytes damaged: verify names the shard and the inner chunk.
    shard = tmp_path / "a.zarr" / "c" / "1" / "1"
    raw = bytearray(shard.read_bytes())
    raw[3] ^= 0xFF
    shard.write_bytes(bytes(raw))
    result = runner.invoke(cli, ["verify", "--decode", url])
    assert (
        result.exit_code == 1 and "PROBLEM c/1/1" in result.output and "inner chunk (2, 3)" in result.output
    )


async def test_the_loader_reads_a_unit_with_one_ranged_request_once_indexes_are_cached() -> None:
    from azarr.loader import BatchLoader

    store = RecordingStore(MemoryStore(), remote=True)
    a = await make(store, shape=(200, 6), chunks=(5, 6), shards=(50, 6))  # 10 inner chunks per shard
    await a.set_basic_selection(..., values((200, 6)))
    loader = BatchLoader(a, batch_size=10, seed=1, preload_chunks=2)
    assert loader.unit == 5  # a unit is one inner chunk of rows
    store.reset()
    first = np.concatenate([batch async for batch in loader])
    assert store.requests == 4 + 40  # each shard's index once, then one ranged GET per unit
    store.reset()
    second = np.concatenate([batch async for batch in loader])
    assert store.requests == 40
    np.testing.assert_array_equal(np.sort(first[:, 0]), values((200, 6))[:, 0])
    np.testing.assert_array_equal(np.sort(second[:, 0]), values((200, 6))[:, 0])


class ReceivingStore(MemoryStore):
    """A memory store that behaves as a remote one receiving bodies into the caller's buffers
    (as the S3 transport does with `BODY_BUFFERS`), slowly, so reads overlap."""

    is_local = False

    async def _get_into(self, key: str, allocate: Any) -> bytes | memoryview | None:
        value = await self._get(key, None)
        if value is None:
            return None
        await asyncio.sleep(0.002)
        view = allocate(len(value))
        view[:] = value
        return view


async def test_whole_shards_are_received_into_pooled_buffers_handed_back_after_decoding() -> None:
    from azarr.pipeline._buffers import BODY_BUFFERS

    store = ReceivingStore()
    arrays = [await make(store, shape=(40, 30), path=f"a{i}") for i in range(3)]
    datas = [values((40, 30)) * (i + 1) for i in range(3)]
    for arr, data in zip(arrays, datas, strict=True):
        await arr.set_basic_selection(..., data)
    with azarr.config.set(codec_threads=1):  # decoding lags behind the reads: buffers would be reused early
        for _ in range(3):
            got = await asyncio.gather(*(arr.get_basic_selection(...) for arr in arrays))
            for g, data in zip(got, datas, strict=True):
                np.testing.assert_array_equal(g, data)
    assert BODY_BUFFERS.idle_bytes() > 0  # the shards' buffers came back to the pool
    assert len(SHARD_INDEXES) == 0  # received without a generation: no index cached


async def test_shards_larger_in_all_than_the_byte_budget_are_written_and_read() -> None:
    # Each shard holds its decoded size in the byte budget while it is encoded and sent (or
    # fetched): nothing inside may reserve again, or 8 shards under a 3-shard budget hang.
    from azarr.scheduler import set_budget

    store = RecordingStore(MemoryStore(), remote=True)
    a = await make(store, shape=(80, 30))  # 16 shards of 10 x 15 int32 (600 bytes each)
    set_budget(store, max_bytes=1800)
    data = values((80, 30))
    await asyncio.wait_for(a.set_basic_selection(..., data), 10)
    await asyncio.wait_for(a.set_basic_selection((slice(0, 80), slice(0, 3)), -5), 10)  # partial shards
    data[:, :3] = -5
    np.testing.assert_array_equal(await asyncio.wait_for(a.get_basic_selection(...), 10), data)


async def test_whole_shard_buffers_stay_in_the_byte_budget_until_their_inner_chunks_are_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A shard received whole holds its buffer until its last inner chunk is decoded: the byte
    # budget bounds the buffers alive however far the network runs ahead of the codec threads
    # (released after the receive, 23 of the 24 shards' buffers were alive at once here).
    from azarr.pipeline import _sharded
    from azarr.scheduler import set_budget

    store = ReceivingStore()
    a = await make(store, shape=(40, 90), dtype="f8")  # 24 shards of 10 x 15 (1,200 bytes each)
    data = values((40, 90)).astype("f8")
    await a.set_basic_selection(..., data)
    set_budget(store, max_bytes=2 * 10 * 15 * 8)  # two shards' decoded size
    alive: set[int] = set()
    peak = 0
    acquire, release = _sharded.BODY_BUFFERS.acquire, _sharded.BODY_BUFFERS.release

    def counting_acquire(nbytes: int, at_least: int = 0) -> memoryview:
        nonlocal peak
        view = acquire(nbytes, at_least)
        alive.add(id(view.obj))
        peak = max(peak, len(alive))
        return view

    def counting_release(view: memoryview) -> None:
        alive.discard(id(view.obj))  # (views of inner chunks are handed back too, and ignored)
        release(view)

    monkeypatch.setattr(_sharded.BODY_BUFFERS, "acquire", counting_acquire)
    monkeypatch.setattr(_sharded.BODY_BUFFERS, "release", counting_release)
    # Decoding far slower than receiving: every inner chunk through the general path, slowly.
    from azarr.codecs import ChunkCodec
    from azarr.pipeline._chunks import ChunkPipeline

    decode_into = ChunkPipeline._decode_into

    def slow_decode_into(self: Any, *args: Any) -> None:
        time.sleep(0.001)
        decode_into(self, *args)

    monkeypatch.setattr(ChunkCodec, "scratch_decoder", lambda self: None)
    monkeypatch.setattr(ChunkPipeline, "_decode_into", slow_decode_into)
    with azarr.config.set(codec_threads=1):
        got = await a.get_basic_selection(...)
    np.testing.assert_array_equal(got, data)
    assert not alive
    assert peak == 2


@pytest.mark.parametrize("damage", ["corrupt frame", "declared size"])
async def test_a_damaged_inner_chunk_of_a_pooled_whole_shard_names_the_shard_and_the_inner_chunk(
    damage: str,
) -> None:
    # Whole shards from remote stores are decoded through ChunkCodec.scratch_decoder, which
    # hands anything it cannot decode to the general path to say what is wrong.
    from azarr.errors import CodecError

    store = ReceivingStore()
    a = await make(store, shape=(20, 30), dtype="f4", chunks=(10, 10), shards=(20, 30))
    await a.set_basic_selection(..., values((20, 30)).astype("f4") + 0.5)
    shard = bytearray(await store.get("c/0/0") or b"")
    index = np.frombuffer(bytes(shard[-(6 * 16 + 4) : -4]), dtype="<u8").reshape(-1, 2)
    offset, nbytes = (int(v) for v in index[4])  # inner chunk (1, 1)
    if damage == "corrupt frame":
        shard[offset + nbytes // 2 : offset + nbytes] = bytes(nbytes - nbytes // 2)
    else:
        shard[offset + 5] ^= (
            0x01  # the frame's content size (one byte after the 4-byte magic and the descriptor)
        )
    await store.set("c/0/0", bytes(shard))
    with pytest.raises(CodecError, match=r"c/0/0 \(inner chunk \(1, 1\)\)"):
        await a.get_basic_selection(...)


def _shard_of(frames: dict[int, bytes], count: int, order: list[int]) -> bytes:
    """A shard (index at the end, crc32c) holding ``frames`` by inner chunk number, stored in
    ``order``; inner chunks without a frame are missing."""
    body, table = b"", np.full((count, 2), MISSING, dtype="<u8")
    for local in order:
        table[local] = (len(body), len(frames[local]))
        body += frames[local]
    index = table.tobytes()
    return body + index + crc32c.crc32c(index).to_bytes(4, "little")


def _frames_of(shard: bytes, count: int) -> dict[int, bytes]:
    table = np.frombuffer(shard[-(count * 16 + 4) : -4], dtype="<u8").reshape(-1, 2)
    return {i: shard[int(o) : int(o) + int(n)] for i, (o, n) in enumerate(table) if o != MISSING}


async def _runs_read(store: Any, a: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[int]]:
    """``a`` read whole, and the number of inner chunks in each call of the run decoder."""
    from azarr.codecs import ChunkCodec

    runs: list[int] = []
    make_decoder = ChunkCodec.scratch_run_decoder

    def spied(self: ChunkCodec) -> Any:
        decode = make_decoder(self)
        assert decode is not None

        def run(data: memoryview, spans: list[tuple[int, int]]) -> Any:
            runs.append(len(spans))
            return decode(data, spans)

        return run

    monkeypatch.setattr(ChunkCodec, "scratch_run_decoder", spied)
    return await a.get_basic_selection(...), runs


async def test_inner_chunks_stored_back_to_back_are_decoded_in_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Whole shards of 64 KiB Zstd inner chunks: those stored back to back in the order read
    # are decoded in one call per run (ChunkCodec.scratch_run_decoder), split where one is not
    # stored; stored in another order, one by one; the same values either way.
    store = ReceivingStore()
    a = await make(store, shape=(256, 384), dtype="f4", chunks=(128, 128), shards=(256, 384))
    data = np.arange(256 * 384, dtype="f4").reshape(256, 384) / 7
    await a.set_basic_selection(..., data)
    got, runs = await _runs_read(store, a, monkeypatch)
    np.testing.assert_array_equal(got, data)
    assert runs == [6]
    frames = _frames_of(await store.get("c/0/0") or b"", 6)
    del frames[3]  # inner chunk (1, 0): not stored, read as the fill value
    data[128:, :128] = -1
    await store.set("c/0/0", _shard_of(frames, 6, [0, 1, 2, 4, 5]))
    got, runs = await _runs_read(store, a, monkeypatch)
    np.testing.assert_array_equal(got, data)
    assert runs == [3, 2]
    await store.set("c/0/0", _shard_of(frames, 6, [5, 4, 2, 1, 0]))
    got, runs = await _runs_read(store, a, monkeypatch)
    np.testing.assert_array_equal(got, data)
    assert runs == []


@pytest.mark.parametrize("damage", ["corrupt frame", "declared size", "frame ends past its span", "checksum"])
async def test_a_damaged_inner_chunk_in_a_run_is_refused_as_alone(
    damage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a run's one Zstd call would accept but the inner chunk's own decode refuses never
    # passes: the run is decoded one by one and the damaged inner chunk named.
    from azarr.errors import CodecError

    store = ReceivingStore()
    zstd = [{"name": "zstd", "configuration": {"level": 1, "checksum": damage == "checksum"}}]
    a = await make(
        store, shape=(256, 384), dtype="f4", chunks=(128, 128), shards=(256, 384), compressors=zstd
    )
    await a.set_basic_selection(..., np.arange(256 * 384, dtype="f4").reshape(256, 384) / 7)
    frames = _frames_of(await store.get("c/0/0") or b"", 6)
    one = bytearray(frames[4])  # inner chunk (1, 1)
    if damage == "corrupt frame":
        one[len(one) // 2 :] = bytes(len(one) - len(one) // 2)
    elif damage == "declared size":
        one[6] ^= 0x01  # Frame_Content_Size (magic, descriptor, window descriptor, then it)
    elif damage == "checksum":
        one[-1] ^= 0x01
    frames[4] = bytes(one)
    shard = _shard_of(frames, 6, list(range(6)))
    if damage == "frame ends past its span":
        # Spans 3 and 4 shifted by a byte: the run's bytes and frames are the same.
        table = np.frombuffer(shard[-(6 * 16 + 4) : -4], dtype="<u8").reshape(-1, 2).copy()
        table[3, 1] -= 1
        table[4, 0] -= 1
        table[4, 1] += 1
        index = table.tobytes()
        shard = shard[: -(6 * 16 + 4)] + index + crc32c.crc32c(index).to_bytes(4, "little")
    await store.set("c/0/0", shard)
    where = r"c/0/0 \(inner chunk \(1, 0\)\)" if damage == "frame ends past its span" else r"\(1, 1\)"
    with pytest.raises(CodecError, match=where):
        await _runs_read(store, a, monkeypatch)


async def test_a_shard_is_stored_once_its_own_inner_chunks_are_encoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The codec job finishing a shard assembles it (write_sharded's _Assembly): its PUT does not
    # wait for the encoding of the other shards queued in the codec pool meanwhile.
    from azarr.pipeline._chunks import ChunkPipeline

    events: list[str] = []
    update = ChunkPipeline._update_chunk

    def slow_update(self: Any, data: Any, label: str, *args: Any) -> Any:
        time.sleep(0.002)
        events.append("encode " + label.split(" ")[0])
        return update(self, data, label, *args)

    class Recording(RecordingStore):
        async def _set(self, key: str, value: bytes) -> None:
            events.append("set " + key)
            await super()._set(key, value)

    store = Recording(MemoryStore(), remote=True)
    a = await make(store, shape=(40, 30))  # 8 shards of 6 inner chunks, one codec job each
    data = values((40, 30))
    monkeypatch.setattr(ChunkPipeline, "_update_chunk", slow_update)
    with azarr.config.set(codec_threads=1):
        await a.set_basic_selection(..., data)
    sets = [i for i, e in enumerate(events) if e.startswith("set c/")]
    encodes = [i for i, e in enumerate(events) if e.startswith("encode")]
    assert len(sets) == 8 and len(encodes) == 48
    assert sets[0] < encodes[-1] - 6  # the first shard went out while others were still encoding
    np.testing.assert_array_equal(await a.get_basic_selection(...), data)
