"""Request collapsing and the decoded-chunk cache (azarr/scheduler/_shared.py).

A store whose reads wait at a gate the test opens, so "concurrent" is a fact, not a
timing: every reader has joined before the one fetch of a chunk is let through. The
store counts its calls; `StoreStats` must say the same.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.scheduler import ChunkCache, stats_for
from azarr.scheduler._shared import SHARED_READS
from azarr.storage import ByteRange, Generation, MemoryStore

DATA = np.arange(4 * 1000, dtype="f8").reshape(4, 1000)
CHUNKS = (1, 1000)  # 4 chunks of 8,000 bytes
KEYS = [f"a/{i}.0" for i in range(4)]


class GatedStore(MemoryStore):
    """A memory store read like a remote one (its own ``_get``: the async path), whose
    chunk reads (whole, ranged, pinned) wait while `gate` is clear, and which counts
    reads and stats per key."""

    # Remote for the cache too: it keeps generations (the value object) and checks them.
    is_local = False

    def __init__(self, data: dict[str, bytes]) -> None:
        super().__init__(data)
        self.gets: Counter[str] = Counter()
        self.stats_calls: Counter[str] = Counter()
        self.gate = threading.Event()
        self.gate.set()

    async def _wait(self, key: str) -> None:
        if key.rpartition("/")[2][0].isdigit():
            # A threading.Event polled (not awaited): readers on other threads' loops wait too.
            while not self.gate.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.001)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        self.gets[key] += 1
        await self._wait(key)
        return await super()._get(key, byte_range)

    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        self.gets[key] += 1
        await self._wait(key)
        return await super()._get_with_generation(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        self.gets[key] += 1
        await self._wait(key)
        return await super()._get_range_with_generation(key, byte_range)

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        self.gets[key] += 1
        await self._wait(key)
        return await super()._get_if_match(key, byte_range, generation)

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        self.stats_calls[key] += 1
        value = self._data.get(key)
        return None if value is None else (len(value), value)


async def make_store() -> GatedStore:
    store = GatedStore({})
    await azarr.array(DATA, chunks=CHUNKS, store=store, path="a")
    return store


async def until(condition: Any, what: str) -> None:
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"timed out waiting for {what}")


def followers(store: GatedStore, key: str) -> int:
    load = SHARED_READS._loads.get((store.budget_key, key))
    return -1 if load is None else load.followers


async def test_concurrent_reads_of_a_chunk_share_one_fetch() -> None:
    store = await make_store()
    stats = stats_for(store)
    readers = [await azarr.open_array(store, path="a", mode="r") for _ in range(6)]  # six array objects
    store.gate.clear()
    tasks = [asyncio.create_task(r.get_basic_selection()) for r in readers]
    tasks.append(asyncio.create_task(readers[0].get_basic_selection((slice(1, 3), slice(10, 20)))))
    await until(lambda: sum(followers(store, k) for k in KEYS) == 5 * 4 + 2, "every reader to join")
    store.gate.set()
    results = await asyncio.gather(*tasks)
    for got in results[:6]:
        np.testing.assert_array_equal(got, DATA)
    np.testing.assert_array_equal(results[6], DATA[1:3, 10:20])
    assert {k: store.gets[k] for k in KEYS} == dict.fromkeys(KEYS, 1)  # one fetch per chunk
    assert stats.collapsed == 5 * 4 + 2 and SHARED_READS.in_flight() == 0
    # A lone reader afterwards fetches again (nothing is kept without a cache).
    np.testing.assert_array_equal(await readers[1].get_basic_selection(), DATA)
    assert store.gets[KEYS[0]] == 2


async def test_read_one_collapses_too_and_collapse_reads_false_does_not() -> None:
    store = await make_store()
    arr = await azarr.open_array(store, path="a", mode="r")
    store.gate.clear()
    tasks = [asyncio.create_task(arr.get_basic_selection((2, slice(i, i + 5)))) for i in range(5)]
    await until(lambda: followers(store, KEYS[2]) == 4, "the tile requests to join")
    store.gate.set()
    for i, got in enumerate(await asyncio.gather(*tasks)):
        np.testing.assert_array_equal(got, DATA[2, i : i + 5])
    assert store.gets[KEYS[2]] == 1
    with azarr.config.set(collapse_reads=False):
        await asyncio.gather(*(arr.get_basic_selection((3, slice(i, i + 5))) for i in range(5)))
    assert store.gets[KEYS[3]] == 5


async def test_cancelling_the_leader_does_not_cancel_the_others() -> None:
    store = await make_store()
    arr = await azarr.open_array(store, path="a", mode="r")
    store.gate.clear()
    leader = asyncio.create_task(arr.get_basic_selection((0, slice(None))))
    await until(lambda: followers(store, KEYS[0]) == 0, "the leader's fetch")
    others = [asyncio.create_task(arr.get_basic_selection((0, slice(i, None)))) for i in range(3)]
    await until(lambda: followers(store, KEYS[0]) == 3, "the followers")
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    # The followers read again: one leads, the two others follow it.
    await until(lambda: followers(store, KEYS[0]) == 2 and store.gets[KEYS[0]] == 2, "a new leader")
    store.gate.set()
    for i, got in enumerate(await asyncio.gather(*others)):
        np.testing.assert_array_equal(got, DATA[0, i:])
    assert store.gets[KEYS[0]] == 2  # the cancelled fetch, then one of the followers' (shared)
    # A cancelled follower does not disturb the leader either.
    store.gate.clear()
    lead = asyncio.create_task(arr.get_basic_selection((1, slice(None))))
    await until(lambda: followers(store, KEYS[1]) == 0, "the leader's fetch")
    follower = asyncio.create_task(arr.get_basic_selection((1, slice(None))))
    await until(lambda: followers(store, KEYS[1]) == 1, "the follower")
    follower.cancel()
    store.gate.set()
    np.testing.assert_array_equal(await lead, DATA[1])
    with pytest.raises(asyncio.CancelledError):
        await follower


async def test_a_failed_fetch_fails_every_reader_sharing_it() -> None:
    store = await make_store()
    arr = await azarr.open_array(store, path="a", mode="r")
    store._data[KEYS[1]] = b"not a blosc frame"
    store.gate.clear()
    tasks = [asyncio.create_task(arr.get_basic_selection((1, slice(None)))) for _ in range(3)]
    await until(lambda: followers(store, KEYS[1]) == 2, "the readers to join")
    store.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, azarr.errors.CodecError) and KEYS[1] in str(r) for r in results), results
    assert store.gets[KEYS[1]] == 1


async def test_a_write_detaches_the_fetch_in_flight() -> None:
    store = await make_store()
    arr = await azarr.open_array(store, path="a", mode="r+")
    store.gate.clear()
    old_reader = asyncio.create_task(arr.get_basic_selection((0, slice(None))))
    await until(lambda: followers(store, KEYS[0]) == 0, "the first fetch")
    # A write of the chunk finishes while that fetch is in flight (writes are not gated):
    await arr.set_basic_selection((0, slice(None)), -DATA[0])
    new_reader = asyncio.create_task(arr.get_basic_selection((0, slice(None))))
    await until(lambda: followers(store, KEYS[0]) == 0 and store.gets[KEYS[0]] == 2, "a fetch of its own")
    store.gate.set()
    np.testing.assert_array_equal(await new_reader, -DATA[0])  # never the older fetch's value
    await old_reader  # began before the write: either value is right


async def test_threads_with_their_own_loops_share_one_fetch() -> None:
    store = await make_store()
    store.gate.clear()
    results: list[Any] = [None] * 4

    def run(i: int) -> None:
        async def read() -> Any:
            arr = await azarr.open_array(store, path="a", mode="r")
            return await arr.get_basic_selection()

        results[i] = asyncio.run(read())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    await until(lambda: sum(followers(store, k) for k in KEYS) == 3 * 4, "every thread to join")
    store.gate.set()
    for thread in threads:
        await asyncio.to_thread(thread.join, 30)
    assert all(np.array_equal(r, DATA) for r in results)
    assert {k: store.gets[k] for k in KEYS} == dict.fromkeys(KEYS, 1)


# ---------------------------------------------------------------------- the decoded-chunk cache
async def test_cache_answers_repeated_reads_without_requests() -> None:
    store = await make_store()
    cache = ChunkCache(1 << 20, recheck_cached_data=False)
    arr = await azarr.open_array(store, path="a", mode="r", cache=cache)
    assert arr.chunk_cache is cache
    np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
    for _ in range(3):
        np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
        np.testing.assert_array_equal(await arr.get_basic_selection((2, slice(5, 9))), DATA[2, 5:9])
    assert {k: store.gets[k] for k in KEYS} == dict.fromkeys(KEYS, 1)
    stats = stats_for(store)
    assert (stats.cache_misses, stats.cache_hits) == (4, 3 * 5) == (cache.misses, cache.hits)
    assert cache.current_bytes == 4 * 8000 and len(cache) == 4
    # Another array object on the same store spec shares the entries; cache=False skips them.
    other = await azarr.open_array(store, path="a", mode="r", cache=cache)
    np.testing.assert_array_equal(await other.get_basic_selection(), DATA)
    uncached = await azarr.open_array(store, path="a", mode="r", cache=False)
    assert uncached.chunk_cache is None
    np.testing.assert_array_equal(await uncached.get_basic_selection(), DATA)
    assert store.gets[KEYS[0]] == 2


async def test_cache_is_bounded_in_bytes_and_evicts_least_recently_used() -> None:
    store = await make_store()
    cache = ChunkCache(2 * 8000, recheck_cached_data=False)  # two chunks
    arr = await azarr.open_array(store, path="a", mode="r", cache=cache)
    await arr.get_basic_selection((0, slice(None)))
    await arr.get_basic_selection((1, slice(None)))
    await arr.get_basic_selection((0, slice(None)))  # 0 is now the most recent
    await arr.get_basic_selection((2, slice(None)))  # evicts 1
    assert cache.current_bytes == 2 * 8000 and cache.evictions == 1 == stats_for(store).cache_evictions
    await arr.get_basic_selection((0, slice(None)))
    await arr.get_basic_selection((1, slice(None)))
    assert store.gets[KEYS[0]] == 1 and store.gets[KEYS[1]] == 2
    # A chunk larger than the whole cache is read but not kept.
    tiny = ChunkCache(100, recheck_cached_data=False)
    small = await azarr.open_array(store, path="a", mode="r", cache=tiny)
    np.testing.assert_array_equal(await small.get_basic_selection(), DATA)
    assert len(tiny) == 0 and tiny.current_bytes == 0


async def test_recheck_cached_data_revalidates_by_generation() -> None:
    store = await make_store()
    cache = ChunkCache(1 << 20, recheck_cached_data=True)
    arr = await azarr.open_array(store, path="a", mode="r", cache=cache)
    await arr.get_basic_selection()
    np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
    # Checked, unchanged: one stat per chunk, no second read.
    assert store.stats_calls[KEYS[0]] == 1 and store.gets[KEYS[0]] == 1
    assert cache.revalidated == 4 == stats_for(store).cache_revalidated
    # Another process rewrites a chunk (not through this process's StoreIO): seen.
    changed = store._data[KEYS[0]]
    writer = await azarr.open_array(MemoryStore(store._data), path="a", mode="r+")
    await writer.set_basic_selection((0, slice(None)), 7.0)
    assert store._data[KEYS[0]] is not changed
    np.testing.assert_array_equal((await arr.get_basic_selection())[0], 7.0)
    assert store.gets[KEYS[0]] == 2

    # False: trusted (stale after an outside write, which is what False promises).
    trusting = await azarr.open_array(
        store, path="a", mode="r", cache=ChunkCache(1 << 20, recheck_cached_data=False)
    )
    await trusting.get_basic_selection()
    await writer.set_basic_selection((0, slice(None)), 8.0)
    np.testing.assert_array_equal((await trusting.get_basic_selection())[0], 7.0)

    # "open": trusted within an open, checked for the next open; seconds: trusted that long.
    by_open = ChunkCache(1 << 20, recheck_cached_data="open")
    first = await azarr.open_array(store, path="a", mode="r", cache=by_open)
    await first.get_basic_selection()
    calls = sum(store.stats_calls.values())
    await first.get_basic_selection()
    assert sum(store.stats_calls.values()) == calls
    second = await azarr.open_array(store, path="a", mode="r", cache=by_open)
    np.testing.assert_array_equal(
        await second.get_basic_selection(), np.where(np.arange(4)[:, None] == 0, 8.0, DATA)
    )
    assert sum(store.stats_calls.values()) == calls + 4 and by_open.revalidated == 4
    aged = ChunkCache(1 << 20, recheck_cached_data=3600.0)
    hour = await azarr.open_array(store, path="a", mode="r", cache=aged)
    await hour.get_basic_selection()
    await hour.get_basic_selection()
    assert aged.revalidated == 0 and aged.hits == 4
    with pytest.raises(ValueError, match="recheck_cached_data"):
        ChunkCache(10, recheck_cached_data="sometimes")  # type: ignore[arg-type]


async def test_writes_through_this_process_drop_cached_chunks() -> None:
    store = await make_store()
    cache = ChunkCache(1 << 20, recheck_cached_data=False)
    arr = await azarr.open_array(store, path="a", mode="r+", cache=cache)
    await arr.get_basic_selection()
    await arr.set_basic_selection((1, slice(0, 10)), -1.0)  # partial: read-modify-write
    expected = DATA.copy()
    expected[1, :10] = -1.0
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)
    other = await azarr.open_array(store, path="a", mode="r+", cache=False)
    await other.set_basic_selection((2, slice(None)), 5.0)  # another array object, same spec
    expected[2] = 5.0
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)
    await other.resize(2, 1000)  # deletes chunks 2 and 3
    await other.resize(4, 1000)
    arr = await azarr.open_array(store, path="a", mode="r", cache=cache)
    got = await arr.get_basic_selection()
    np.testing.assert_array_equal(got[:2], expected[:2])
    assert not got[2:].any()  # fill value, not the cached chunks


async def test_process_cache_from_config() -> None:
    store = await make_store()
    arr = await azarr.open_array(store, path="a", mode="r")
    assert arr.chunk_cache is None
    with pytest.raises(ValueError, match="chunk_cache_bytes"):
        await (await azarr.open_array(store, path="a", mode="r", cache=True)).get_basic_selection()
    with azarr.config.set(chunk_cache_bytes=1 << 20, chunk_cache_recheck=False):
        cache = arr.chunk_cache
        assert cache is not None and cache.max_bytes == 1 << 20
        await arr.get_basic_selection()
        await arr.get_basic_selection()
        assert store.gets[KEYS[0]] == 1 and cache.hits == 4
    assert arr.chunk_cache is None
    with pytest.raises(ValueError, match="chunk_cache_bytes"):
        azarr.config.set(chunk_cache_bytes=-1)


async def test_loader_epochs_after_the_first_make_no_requests() -> None:
    from azarr.loader import BatchLoader

    store = await make_store()
    arr = await azarr.open_array(
        store, path="a", mode="r", cache=ChunkCache(1 << 20, recheck_cached_data=False)
    )
    loader = BatchLoader(arr, batch_size=2, seed=0, preload_chunks=2)
    for epoch in range(3):
        loader.set_epoch(epoch)
        before = sum(store.gets.values())
        rows = [row async for batch in loader for row in batch]
        assert sorted(r[0] for r in rows) == sorted(DATA[:, 0])
        assert sum(store.gets.values()) - before == (len(KEYS) if epoch == 0 else 0)


async def test_cache_on_a_reference_set(tmp_path: Any) -> None:
    import json

    blob = np.arange(64, dtype="<i4")
    (tmp_path / "blob.bin").write_bytes(blob.tobytes())
    zarray = {
        "zarr_format": 2, "shape": [64], "chunks": [16], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": 0, "order": "C",
    }  # fmt: skip
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "x/.zarray": json.dumps(zarray),
        **{f"x/{i}": [str(tmp_path / "blob.bin"), 64 * i, 64] for i in range(4)},
    }
    cache = ChunkCache(1 << 20, recheck_cached_data=True)  # no generations: every check reads again
    arr = await azarr.open_array(refs, path="x", mode="r", cache=cache)
    for _ in range(2):
        np.testing.assert_array_equal(await arr.getitem(...), blob)
    assert cache.misses == 8 and cache.hits == 0
    trusting = await azarr.open_array(
        refs, path="x", mode="r", cache=ChunkCache(1 << 20, recheck_cached_data=False)
    )
    await trusting.getitem(...)
    np.testing.assert_array_equal(await trusting.getitem(slice(20, 40)), blob[20:40])
    assert trusting.chunk_cache is not None and trusting.chunk_cache.hits == 2


async def test_pickled_arrays_keep_cache_false_and_leave_cache_objects_behind() -> None:
    import pickle

    store = MemoryStore.named("shared-reads-pickle")
    await azarr.array(DATA, chunks=CHUNKS, store=store, path="a", overwrite=True)
    own = await azarr.open_array(store, path="a", mode="r", cache=ChunkCache(1 << 20))
    off = await azarr.open_array(store, path="a", mode="r", cache=False)
    with azarr.config.set(chunk_cache_bytes=1 << 20):
        assert pickle.loads(pickle.dumps(own)).chunk_cache is azarr.scheduler.default_chunk_cache()
        assert pickle.loads(pickle.dumps(off)).chunk_cache is None


# ---------------------------------------------------------------------- sharded arrays
# Zarr v3 sharding: inner chunks (1, 250) in shards (2, 1000), two shards of 8 inner chunks.
SHARDS = ["s/c/0/0", "s/c/1/0"]
INNER = 16


async def make_sharded() -> GatedStore:
    store = GatedStore({})
    await azarr.array(DATA, chunks=(1, 250), shards=(2, 1000), store=store, path="s", zarr_format=3)
    return store


def inner_followers(store: GatedStore) -> int:
    """Readers waiting for loads of inner chunks or of whole shards of ``store``."""
    inner = [i for i in SHARED_READS._loads.items() if i[0][0] == store.budget_key and "\x00" in i[0][1]]
    return sum(load.followers for _, load in inner)


async def test_sharded_whole_shard_reads_share_one_fetch() -> None:
    store = await make_sharded()
    stats = stats_for(store)
    readers = [await azarr.open_array(store, path="s", mode="r") for _ in range(4)]
    store.gate.clear()
    tasks = [asyncio.create_task(r.getitem(...)) for r in readers]
    # Reads of whole shards share one load per shard, not one per inner chunk.
    await until(lambda: inner_followers(store) == 3 * len(SHARDS), "every reader to join")
    assert SHARED_READS.in_flight() == len(SHARDS)
    store.gate.set()
    for got in await asyncio.gather(*tasks):
        np.testing.assert_array_equal(got, DATA)
    assert {k: store.gets[k] for k in SHARDS} == dict.fromkeys(SHARDS, 1)  # each shard read once, whole
    assert stats.collapsed == 3 * INNER and SHARED_READS.in_flight() == 0  # counted per inner chunk

    # A read of a whole shard does not wait for the inner chunks a read of part of it is
    # fetching: it reads the shard itself (one GET); the part read shares nothing with it.
    store.gets.clear()
    store.gate.clear()
    first = asyncio.create_task(readers[0].getitem((0, slice(0, 500))))  # inner chunks 0, 1 of shard 0
    await until(lambda: store.gets[SHARDS[0]] >= 1, "the first read's fetch")
    second = asyncio.create_task(readers[1].getitem((slice(0, 2), slice(None))))  # all 8 of shard 0
    await until(lambda: store.gets[SHARDS[0]] >= 2, "the second read's own fetch")
    assert inner_followers(store) == 0
    store.gate.set()
    np.testing.assert_array_equal(await first, DATA[0, :500])
    np.testing.assert_array_equal(await second, DATA[:2])
    assert stats.collapsed == 3 * INNER

    # Two reads of part of a shard still share the inner chunks both want.
    store.gate.clear()
    first = asyncio.create_task(readers[0].getitem((0, slice(0, 500))))
    await until(lambda: inner_followers(store) == 0 and SHARED_READS.in_flight() == 2, "the first read")
    second = asyncio.create_task(readers[1].getitem((0, slice(250, 1000))))  # inner chunks 1, 2, 3
    await until(lambda: inner_followers(store) == 1, "the second read to follow one inner chunk")
    store.gate.set()
    np.testing.assert_array_equal(await first, DATA[0, :500])
    np.testing.assert_array_equal(await second, DATA[0, 250:])
    assert stats.collapsed == 3 * INNER + 1


async def test_sharded_cancelled_leader_and_failed_fetch() -> None:
    store = await make_sharded()
    arr = await azarr.open_array(store, path="s", mode="r")
    store.gate.clear()
    leader = asyncio.create_task(arr.getitem((slice(0, 2), slice(None))))
    await until(lambda: store.gets[SHARDS[0]] == 1, "the leader's fetch")
    others = [asyncio.create_task(arr.getitem((slice(0, 2), slice(i, None)))) for i in (0, 600)]
    # The whole-shard read follows the leader's load of the shard; the other (inner chunks 2
    # and 3 of both rows) reads its own.
    await until(lambda: inner_followers(store) == 1 and store.gets[SHARDS[0]] == 2, "the follower")
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    store.gate.set()
    np.testing.assert_array_equal(await others[0], DATA[:2])
    np.testing.assert_array_equal(await others[1], DATA[:2, 600:])
    assert SHARED_READS.in_flight() == 0

    # A corrupt inner chunk fails every read sharing it, naming the shard and the inner chunk.
    shard = bytearray(store._data[SHARDS[1]])
    shard[:16] = b"\xff" * 16  # the first inner chunk's zstd frame
    store._data[SHARDS[1]] = bytes(shard)
    store.gate.clear()
    tasks = [asyncio.create_task(arr.getitem((2, slice(0, 10)))) for _ in range(3)]
    await until(lambda: inner_followers(store) == 2, "the readers to join")
    store.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(
        isinstance(r, azarr.errors.CodecError) and "s/c/1/0 (inner chunk" in str(r) for r in results
    ), results
    assert SHARED_READS.in_flight() == 0


async def test_sharded_whole_shard_readers_of_a_missing_shard_share_its_one_get() -> None:
    store = await make_sharded()
    del store._data[SHARDS[1]]
    arr = await azarr.open_array(store, path="s", mode="r")
    store.gate.clear()
    tasks = [asyncio.create_task(arr.getitem((slice(2, 4), slice(None)))) for _ in range(3)]
    await until(lambda: inner_followers(store) == 2, "the readers to join the shard's load")
    store.gate.set()
    for got in await asyncio.gather(*tasks):
        assert got.shape == (2, 1000) and (got == 0).all()
    assert store.gets[SHARDS[1]] == 1 and SHARED_READS.in_flight() == 0


async def test_sharded_single_inner_chunk_reads_share_one_ranged_get() -> None:
    # read_one's path for one inner chunk: readers of it share one ranged GET; a cancelled
    # leader's followers read again (one of them leads), and a missing shard reads as fill.
    store = await make_sharded()
    arr = await azarr.open_array(store, path="s", mode="r")
    stats = stats_for(store)
    np.testing.assert_array_equal(await arr.getitem((2, slice(0, 10))), DATA[2, :10])  # caches the index
    store.gets.clear()
    store.gate.clear()
    leader = asyncio.create_task(arr.getitem((2, slice(250, 260))))
    await until(lambda: store.gets[SHARDS[1]] == 1, "the leader's fetch")
    others = [asyncio.create_task(arr.getitem((2, slice(start, 500)))) for start in (250, 400)]
    await until(lambda: inner_followers(store) == 2, "the followers")
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    await until(lambda: inner_followers(store) == 1, "one follower to lead, the other to follow it")
    store.gate.set()
    np.testing.assert_array_equal(await others[0], DATA[2, 250:500])
    np.testing.assert_array_equal(await others[1], DATA[2, 400:500])
    assert store.gets[SHARDS[1]] == 2 and stats.collapsed == 1  # the new leader's GET, shared once
    assert SHARED_READS.in_flight() == 0
    del store._data[SHARDS[1]]
    azarr.pipeline._shards.SHARD_INDEXES.clear()
    got = await asyncio.gather(*(arr.getitem((3, slice(0, 10))) for _ in range(3)))
    assert all((g == 0).all() for g in got) and SHARED_READS.in_flight() == 0


async def test_sharded_cache_keeps_inner_chunks_checked_by_their_shard() -> None:
    store = await make_sharded()
    cache = ChunkCache(1 << 20, recheck_cached_data=False)
    arr = await azarr.open_array(store, path="s", mode="r+", cache=cache)
    np.testing.assert_array_equal(await arr.getitem(...), DATA)
    assert len(cache) == INNER and cache.current_bytes == DATA.nbytes
    requests = sum(store.gets.values())
    np.testing.assert_array_equal(await arr.getitem(...), DATA)
    np.testing.assert_array_equal(await arr.getitem((3, slice(990, None))), DATA[3, 990:])
    assert sum(store.gets.values()) == requests and cache.hits == INNER + 1
    # A write of part of shard 0 through this process drops its inner chunks, not shard 1's.
    await arr.setitem((0, slice(0, 10)), -1.0)
    assert len(cache) == INNER // 2
    expected = DATA.copy()
    expected[0, :10] = -1.0
    np.testing.assert_array_equal(await arr.getitem(...), expected)

    # recheck_cached_data=True: one stat per shard read, however many inner chunks it uses.
    checked = ChunkCache(1 << 20, recheck_cached_data=True)
    fresh = await azarr.open_array(store, path="s", mode="r", cache=checked)
    await fresh.getitem(...)
    store.gets.clear()
    store.stats_calls.clear()
    np.testing.assert_array_equal(await fresh.getitem(...), expected)
    assert dict(store.stats_calls) == dict.fromkeys(SHARDS, 1) and not store.gets
    assert checked.revalidated == INNER == stats_for(store).cache_revalidated
    # Another process rewrites shard 1 (not through this process's StoreIO): only it is read again.
    writer = await azarr.open_array(MemoryStore(store._data), path="s", mode="r+")
    await writer.setitem((3, slice(None)), 7.0)
    expected[3] = 7.0
    np.testing.assert_array_equal(await fresh.getitem(...), expected)
    assert set(store.gets) == {SHARDS[1]}


async def test_cache_on_local_files_keeps_no_generation(tmp_path: Any) -> None:
    # A local file's generation holds the file open: entries keep none and are read again
    # when a check is due (no file descriptor per cached chunk).
    await azarr.array(DATA, chunks=CHUNKS, store=str(tmp_path / "a"))
    cache = ChunkCache(1 << 20, recheck_cached_data=True)
    arr = await azarr.open_array(str(tmp_path / "a"), mode="r", cache=cache)
    for _ in range(2):
        np.testing.assert_array_equal(await arr.getitem(...), DATA)
    assert cache.misses == 8 and cache.hits == 0
    assert all(entry.generation is None for entry in cache._lru.values())
