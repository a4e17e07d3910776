"""The chunk pipeline's batched path for stores with blocking access (memory, local files).

Each call's chunks run as a few codec-pool jobs that read, decode and scatter (or
merge, encode and store) chunk after chunk. These tests check that it keeps every
promise of the per-chunk async path: results, errors naming the key, cancellation,
progress, counted requests, the request budget, conditional writes for partial
chunks, and ``write_empty_chunks``.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import CodecError, ReadOnlyError
from azarr.pipeline._batched import JobResult, RunningJobs, _JobGate, iter_jobs, iter_write_items
from azarr.scheduler import Progress, StoreIO, bounded_map, set_budget, stats_for
from azarr.storage import LocalStore, MemoryStore
from tests.util import AsyncPathMemoryStore, RecordingStore


class _NonConditionalMemoryStore(MemoryStore):
    """A memory store that offers no conditional writes (as LocalStore without fcntl)."""

    supports_conditional_writes = False


class _OverridingMemoryStore(MemoryStore):
    async def _get(self, key: str, byte_range: Any) -> bytes | None:
        return await super()._get(key, byte_range)


def test_capability_follows_the_backend() -> None:
    assert MemoryStore().supports_blocking_io
    assert LocalStore(".").supports_blocking_io
    # A caller's own mapping may not be thread-safe; a subclass overriding a primitive
    # would be bypassed by the blocking twins; a wrapper translates or adds behaviour.
    assert not MemoryStore(_DictLike()).supports_blocking_io
    assert not _OverridingMemoryStore().supports_blocking_io
    assert not RecordingStore(MemoryStore()).supports_blocking_io
    assert not AsyncPathMemoryStore().supports_blocking_io


class _DictLike(dict[str, bytes]):
    pass


def test_blocking_access_checks_keys_and_read_only() -> None:
    store = MemoryStore()
    store.set_blocking("a/b", b"x")
    assert store.get_blocking("a/b") == b"x"
    store.delete_blocking("a/b")
    assert store.get_blocking("a/b") is None
    with pytest.raises(azarr.errors.InvalidKeyError):
        store.get_blocking("../x")
    with pytest.raises(ReadOnlyError):
        MemoryStore(read_only=True).set_blocking("a", b"x")
    with pytest.raises(NotImplementedError, match="no blocking access"):
        RecordingStore(MemoryStore()).get_blocking("a")


def test_jobs_cover_every_chunk_once_in_order_drawn_lazily() -> None:
    items: list[Any] = list(range(1003))
    with azarr.config.set(codec_threads=2):
        jobs = list(iter_jobs(items, len(items), 800))
        assert [x for job in jobs for x in job] == items
        assert len(jobs) == 8  # four per codec thread
        big = list(iter_jobs(items[:40], 40, 8 << 20))  # chunks over the per-job byte cap: one each
        assert [len(job) for job in big] == [1] * 40
        drawn = 0

        def source() -> Any:
            nonlocal drawn
            for i in range(10_000):
                drawn += 1
                yield i

        first = next(iter_jobs(source(), 10_000, 800))
        assert len(first) == 1250 and drawn == 1250  # not the whole selection up front


def test_write_items_send_conditional_chunks_alone() -> None:
    with azarr.config.set(codec_threads=1):
        items = list(iter_write_items(range(10), 10, 8, lambda p: p % 4 == 3))
    assert items == [[0, 1, 2], 3, [4, 5, 6], 7, [8, 9]]  # jobs of ceil(10 / 4) chunks


@pytest.mark.parametrize("store_kind", ["memory", "local"])
async def test_results_match_numpy(store_kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if store_kind == "memory" else LocalStore(tmp_path)
    data = np.arange(97 * 53, dtype="i4").reshape(97, 53)
    arr = await azarr.array(data, chunks=(10, 7), store=store, fill_value=-1)
    for selection in [(...,), (slice(3, 90, 7), slice(None, None, -3)), (5, slice(None))]:
        np.testing.assert_array_equal(await arr.get_basic_selection(selection), data[selection])
    rows = np.array([90, 3, 3, 50])
    np.testing.assert_array_equal(await arr.get_orthogonal_selection((rows, slice(None))), data[rows])
    await arr.set_basic_selection((slice(5, 60), slice(2, 40)), -data[5:60, 2:40])  # partial chunks
    expected = data.copy()
    expected[5:60, 2:40] *= -1
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)
    await store.delete("0.0")  # a missing chunk reads as fill_value
    expected[:10, :7] = -1
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


async def test_a_corrupt_chunk_fails_the_read_naming_its_key() -> None:
    store = MemoryStore()
    arr = await azarr.array(np.ones((200, 4)), chunks=(1, 4), store=store)
    await store.set("137.0", b"not blosc")
    with pytest.raises(CodecError, match=r"137\.0"):
        await arr.get_basic_selection()


async def test_requests_are_counted_and_progress_reported() -> None:
    store = MemoryStore()
    arr = await azarr.array(np.ones((300, 4)), chunks=(1, 4), store=store, compressor=None)
    stats = stats_for(store)
    stats.reset()
    reports: list[Progress] = []
    await arr.get_basic_selection(progress=reports.append)
    assert stats.requests == 300
    assert stats.bytes_read == 300 * 32
    assert reports[-1].done == reports[-1].total == 300
    assert reports[-1].nbytes == 300 * 32
    assert sum(stats.latency) == 300  # every read in the histogram (recorded a job at a time)
    assert 1 <= len(reports) < 300  # one report per batch, not per chunk
    stats.reset()
    reports.clear()
    await arr.set_basic_selection(..., 2.0, progress=reports.append)
    assert stats.requests == 300
    assert stats.bytes_written == 300 * 32
    assert reports[-1].done == 300


def test_blocking_batch_records_its_calls_when_it_closes() -> None:
    store = MemoryStore()
    io, stats = StoreIO(store), stats_for(store)
    stats.reset()
    with io.blocking_batch() as batch:
        batch.set("k0", b"x")
        batch.set("k1", memoryview(b"xyz"))
        assert [batch.get("k0"), batch.get("k1"), batch.get("missing")] == [b"x", b"xyz", None]
        batch.delete("k0")
        assert stats.requests == 0  # recorded a job at a time, not per call
        assert batch.store_seconds > 0
    assert (stats.requests, stats.bytes_read, stats.bytes_written, stats.errors) == (6, 4, 4, 0)
    assert sum(stats.latency) == 6
    stats.reset()
    with pytest.raises(azarr.errors.InvalidKeyError, match=r"\.\./escape"), io.blocking_batch() as batch:
        assert batch.get("k1") == b"xyz"
        batch.get("../escape")
    assert (stats.requests, stats.bytes_read, stats.errors) == (2, 3, 1)  # the good read and the failure


class _SlowFileLikeStore(MemoryStore):
    """A memory store whose blocking calls wait in a system call, as file creation on a disk
    does (``time.sleep`` releases the GIL); counts how many run at once."""

    supports_blocking_io = True

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay, self.running, self.most = delay, 0, 0
        self.threads: set[str] = set()
        self._lock = threading.Lock()

    def _call(self) -> None:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
            self.threads.add(threading.current_thread().name.rsplit("_", 1)[0])
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.running -= 1

    def _get_blocking(self, key: str, byte_range: Any = None) -> bytes | None:
        self._call()
        return super()._get_blocking(key, byte_range)

    def _set_blocking(self, key: str, value: bytes | memoryview) -> None:
        self._call()
        super()._set_blocking(key, value)


async def test_jobs_run_in_the_file_io_pool_more_than_codec_threads_when_store_calls_dominate() -> None:
    store = _SlowFileLikeStore(0.002)
    data = np.arange(160 * 100, dtype="i4").reshape(160, 100)
    # 40 Blosc chunks of 1,600 B: 8 jobs of 5; the first runs alone, in the codec pool.
    with azarr.config.set(codec_threads=2, file_io_threads=4):
        arr = await azarr.array(np.zeros_like(data), chunks=(20, 20), store=store)
        store.most, store.threads = 0, set()
        await arr.set_basic_selection(..., data)
        writers = store.most
        store.most = 0
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
        readers = store.most
    assert (writers, readers) == (4, 4)
    assert store.threads == {"azarr-codec", "azarr-file-io"}
    # Within the request budget: at most as many jobs as requests in flight.
    set_budget(store, max_requests=3)
    with azarr.config.set(codec_threads=2, file_io_threads=8):
        store.most = 0
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    assert store.most == 3


async def test_job_gate_opens_for_small_chunks_only_after_a_store_bound_job() -> None:
    with azarr.config.set(codec_threads=3):
        small = await azarr.create(shape=(100,), chunks=(10,), dtype="i4", store=MemoryStore())
        large = await azarr.create(shape=(100_000,), chunks=(10_000,), dtype="i4", store=MemoryStore())
        gate = _JobGate(small._pipeline)
        assert (gate.limit, gate.threads, gate.file_io) == (1, 3, False)
        await gate.finished(JobResult(chunks=1, nbytes=1, store_seconds=0.75, seconds=1.0))  # Python-bound
        assert gate.limit == 1
        await gate.finished(JobResult(chunks=1, nbytes=1, store_seconds=0.0, seconds=0.0))  # nothing to learn
        assert gate.limit == 1
        await gate.finished(
            JobResult(chunks=1, nbytes=1, store_seconds=0.85, seconds=1.0)
        )  # waits on the store
        budget = small._pipeline.io.budget.max_requests
        assert (gate.limit, gate.file_io) == (max(3, min(budget, azarr.config.get("file_io_threads"))), True)
        assert _JobGate(large._pipeline).limit == 3  # 40 KB chunks: every thread from the start
        # A write of large chunks stays on the codec threads however long its store calls take
        # (writes into the page cache keep their thread on a core); one of small chunks switches.
        store_bound = JobResult(chunks=1, nbytes=1, store_seconds=0.95, seconds=1.0)
        writes = _JobGate(large._pipeline, writes=True)
        await writes.finished(store_bound)
        assert (writes.limit, writes.file_io) == (3, False)
        small_writes = _JobGate(small._pipeline, writes=True)
        await small_writes.finished(store_bound)
        assert small_writes.file_io and small_writes.limit == gate.limit


async def test_job_gate_admits_jobs_in_the_order_they_ask() -> None:
    with azarr.config.set(codec_threads=2):
        large = await azarr.create(shape=(100_000,), chunks=(10_000,), dtype="i4", store=MemoryStore())
    gate = _JobGate(large._pipeline)
    started: list[int] = []

    async def job(number: int) -> None:
        async with gate.slot():
            started.append(number)
            await asyncio.sleep(0.002)

    # Four workers for nine jobs: a worker whose job ends draws the next while the ones
    # woken for the freed place have not run yet; it still waits its turn.
    await bounded_map(job, range(9), 4)
    assert started == list(range(9))
    # A job cancelled while it waits gives up its turn; one cancelled as it is let in, its place.
    async with gate.slot(), gate.slot():
        waiting = [asyncio.ensure_future(job(n)) for n in (10, 11, 12)]
        await asyncio.sleep(0)
        waiting[0].cancel()
    waiting[1].cancel()  # let in as the block ended, not run yet
    await asyncio.gather(*waiting, return_exceptions=True)
    assert started[9:] == [12] and gate._running == 0


async def test_small_chunk_reads_from_a_store_that_reads_ahead_never_switch_pools() -> None:
    with azarr.config.set(codec_threads=3):
        small = await azarr.create(shape=(100,), chunks=(10,), dtype="i4", store=MemoryStore())
        large = await azarr.create(shape=(100_000,), chunks=(10_000,), dtype="i4", store=MemoryStore())
        gate = _JobGate(small._pipeline, reads_ahead=True)
        await gate.finished(
            JobResult(chunks=1, nbytes=1, store_seconds=0.99, seconds=1.0)
        )  # waits on the store
        assert (gate.limit, gate.file_io) == (1, False)  # the kernel reads ahead: one job at a time
        gate = _JobGate(large._pipeline, reads_ahead=True)
        await gate.finished(JobResult(chunks=1, nbytes=1, store_seconds=0.99, seconds=1.0))
        assert gate.file_io  # large chunks: as before


class _SlowReadAheadStore(_SlowFileLikeStore):
    """`_SlowFileLikeStore` declaring that it reads ahead (its hints do nothing)."""

    reads_ahead = True

    def _read_ahead_blocking(self, keys: Sequence[str]) -> None:
        self.hinted += len(keys)


async def test_small_chunk_reads_that_read_ahead_stay_on_one_codec_thread() -> None:
    store = _SlowReadAheadStore(0.002)
    store.hinted = 0
    data = np.arange(160 * 100, dtype="i4").reshape(160, 100)
    with azarr.config.set(codec_threads=2, file_io_threads=4):
        arr = await azarr.array(data, chunks=(20, 20), store=store)
        assert "azarr-file-io" in store.threads  # writes still switch (they do not read ahead)
        store.most, store.threads = 0, set()
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    assert (store.most, store.threads) == (1, {"azarr-codec"})
    assert store.hinted > 0


class _ColdFromStore(MemoryStore):
    """A memory store that declares it reads ahead, records its hints and reads, and takes
    10 ms (a disk's wait) to read each of ``slow_keys``."""

    supports_blocking_io = True
    reads_ahead = True

    def __init__(self, *slow_keys: str) -> None:
        super().__init__()
        self.slow_keys, self.read, self.hinted = slow_keys, list[str](), list[str]()

    def _get_blocking(self, key: str, byte_range: Any = None) -> bytes | None:
        self.read.append(key)
        if key in self.slow_keys:
            time.sleep(0.01)
        return super()._get_blocking(key, byte_range)

    def _read_ahead_blocking(self, keys: Sequence[str]) -> None:
        self.hinted.extend(keys)


async def test_small_chunk_reads_hint_the_store_from_their_second_slow_read_in_a_row_on() -> None:
    # 40 chunks of 1,600 B, read in the order of their keys: a lone slow read ("1.1") leaves the
    # hints off, two in a row ("2.3", "2.4") turn them on.
    store = _ColdFromStore("1.1", "2.3", "2.4")
    data = np.arange(160 * 100, dtype="i4").reshape(160, 100)
    with azarr.config.set(codec_threads=1):
        arr = await azarr.array(data, chunks=(20, 20), store=store)
        store.read.clear()
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    second = store.read.index("2.4")
    assert store.read.index("1.1") < store.read.index("2.3") == second - 1 < len(store.read) - 2
    # Every read after the second slow one was hinted (in its job and the jobs after), none before.
    assert set(store.hinted) == set(store.read[second + 1 :])


async def test_a_budget_of_one_request_still_completes() -> None:
    store = MemoryStore()
    arr = await azarr.array(np.arange(1000.0), chunks=10, store=store)
    set_budget(store, max_requests=1)
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.arange(1000.0))
    await arr.set_basic_selection(..., 0.5)
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.full(1000, 0.5))


async def test_partial_chunks_on_a_store_without_conditional_writes_are_merged_in_the_job() -> None:
    store = _NonConditionalMemoryStore()
    data = np.arange(100.0)
    arr = await azarr.array(data, chunks=10, store=store)
    await arr.set_basic_selection(slice(5, 95), 0.0)
    expected = data.copy()
    expected[5:95] = 0
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)
    # A caller requiring conditional writes is refused before anything is written.
    with azarr.config.set(require_consistency=True), pytest.raises(azarr.errors.ConsistencyUnsupportedError):
        await arr.set_basic_selection(slice(5, 95), 1.0)
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


async def test_write_empty_chunks_false_deletes_in_the_job() -> None:
    store = MemoryStore()
    arr = await azarr.create(
        100, chunks=10, dtype="f8", fill_value=0.0, store=store, write_empty_chunks=False
    )
    await arr.set_basic_selection(..., np.arange(100.0))
    assert sorted([k async for k in store.list_prefix("") if not k.startswith(".")], key=int) == [
        str(i) for i in range(10)
    ]
    await arr.set_basic_selection(slice(0, 50), 0.0)
    assert sorted([k async for k in store.list_prefix("") if not k.startswith(".")], key=int) == [
        str(i) for i in range(5, 10)
    ]


async def test_local_store_errors_name_the_key(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    arr = await azarr.array(np.ones(20), chunks=5, store=store)
    (tmp_path / "2").unlink()
    (tmp_path / "2").mkdir()  # a directory where a chunk file should be: reads as missing
    (tmp_path / "2" / "x").write_bytes(b"")
    np.testing.assert_array_equal(
        await arr.get_basic_selection(), np.r_[np.ones(10), np.zeros(5), np.ones(5)]
    )
    with pytest.raises(azarr.errors.StoreError, match=r"'2'"):
        await arr.set_basic_selection(..., 3.0)  # cannot replace a non-empty directory


@pytest.mark.parametrize("dtype", ["<i4", ">i4", "u1", "?", "<f8", ">f4", "<c16", "<i2", "<M8[ns]", "S5"])
@pytest.mark.parametrize(
    "blosc",
    [
        {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
        {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0},
        {"id": "blosc", "cname": "blosclz", "clevel": 9, "shuffle": -1, "blocksize": 256},
        {"id": "blosc", "cname": "lz4hc", "clevel": 1, "shuffle": 0, "blocksize": 0},
    ],
)
@pytest.mark.parametrize("order", ["C", "F"])
def test_blosc_fast_paths_are_bit_exact_with_numcodecs(dtype: str, blosc: dict[str, Any], order: str) -> None:
    """ChunkCodec calls numcodecs.blosc's compress/decompress directly for plain chunks:
    the bytes must be exactly Blosc.encode's, and decoding must give the chunk back."""
    import numcodecs

    from azarr.codecs import ChunkCodec

    rng = np.random.default_rng(3)
    chunk = np.asarray(rng.integers(0, 200, (13, 7)).astype(np.dtype(dtype)), order=order)
    codec = ChunkCodec(dtype, (13, 7), order, blosc, None)
    # Off the main thread, as in the codec pool: there numcodecs uses blosc's contextual
    # API. On the main thread it uses blosc's global context, whose state (block size)
    # carries over between calls and makes frames depend on earlier ones.
    with ThreadPoolExecutor(1) as pool:
        expected = pool.submit(numcodecs.get_codec(blosc).encode, np.asarray(chunk, order=order)).result()
        encoded = pool.submit(codec.encode, chunk, key="k").result()
    assert encoded == bytes(expected)
    np.testing.assert_array_equal(codec.decode(encoded, key="k"), chunk)
    np.testing.assert_array_equal(codec.decode(encoded, key="k", writable=False), chunk)
    out = np.empty((13, 7), dtype=dtype, order=order)
    codec.decode(encoded, key="k", out=out)
    np.testing.assert_array_equal(out, chunk)
    with pytest.raises(CodecError, match="'k'"):
        codec.decode(encoded[:-3], key="k")  # a truncated frame is refused, not read past


async def test_jobs_hold_no_more_request_slots_than_codec_threads() -> None:
    """Queued jobs would only wait for a codec thread while holding a slot others could use."""

    store = MemoryStore()
    with azarr.config.set(codec_threads=2):
        arr = await azarr.array(np.arange(400 * 8192.0), chunks=8192, store=store)  # 400 chunks of 64 KiB
        await arr.set_basic_selection(..., 1.0)
        await arr.get_basic_selection()
    budget = StoreIO(store).budget
    assert 1 <= budget.peak_requests <= 2 < budget.max_requests
    small = MemoryStore()  # small chunks: one job at a time (GIL-bound work)
    arr = await azarr.array(np.arange(4000.0), chunks=10, store=small)
    await arr.get_basic_selection()
    assert StoreIO(small).budget.peak_requests == 1


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [None, {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}])
async def test_whole_chunks_encoded_from_the_values_store_the_same_bytes(
    order: str, compressor: dict[str, Any] | None
) -> None:
    """Whole chunks are encoded straight from the value (no merge copy): the stored bytes
    equal those of a chunk merged into a fill_value chunk, for strided, reversed and
    broadcast values, and chunks equal to fill_value are still dropped."""
    data = np.arange(40 * 30, dtype="<i4").reshape(40, 30)
    stores = [MemoryStore(), MemoryStore()]
    arrays = [
        await azarr.create(
            (40, 30), chunks=(10, 10), dtype="<i4", order=order, compressor=compressor, store=s, fill_value=7
        )
        for s in stores
    ]
    strided = np.asfortranarray(data[::-1, :])[::-1, :]  # same values, not C-contiguous
    await arrays[0].set_basic_selection(..., strided)
    for i in range(0, 40, 10):  # row bands of partial-width writes: always merged
        for j in range(0, 30, 5):
            await arrays[1].set_basic_selection(
                (slice(i, i + 10), slice(j, j + 5)), data[i : i + 10, j : j + 5]
            )
    assert {k: v for k, v in stores[0]._data.items() if not k.startswith(".")} == {
        k: v for k, v in stores[1]._data.items() if not k.startswith(".")
    }
    await arrays[0].set_basic_selection((slice(0, 10), slice(0, 10)), np.int32(7))  # broadcast, all fill
    dropping = await azarr.open_array(stores[0], write_empty_chunks=False)
    await dropping.set_basic_selection((slice(10, 20), slice(0, 10)), np.int32(7))
    assert "1.0" not in stores[0]._data and "0.0" in stores[0]._data
    expected = data.copy()
    expected[:20, :10] = 7
    np.testing.assert_array_equal(await arrays[0].get_basic_selection(), expected)


@pytest.mark.parametrize("store_kind", ["memory", "local"])
def test_readinto_blocking_fills_buffers_or_says_the_size_differs(store_kind: str, tmp_path: Path) -> None:
    store = MemoryStore() if store_kind == "memory" else LocalStore(tmp_path)
    assert store.reads_into_buffers == (store_kind == "local")
    value = bytes(range(256)) * 40  # 10,240 bytes
    store.set_blocking("a/b", value)
    target = np.zeros((8, 2048), dtype="u1")
    rows = list(target[:, 512:1792])  # eight strided rows of 1,280 bytes
    assert store.readinto_blocking("a/b", rows, 10_240) is True
    assert target[:, 512:1792].tobytes() == value
    assert not target[:, :512].any() and not target[:, 1792:].any()
    assert store.readinto_blocking("a/b", rows[:7], 8960) is False  # the value is longer
    assert store.readinto_blocking("a/b", [*rows, bytearray(1)], 10_241) is False  # shorter
    assert store.readinto_blocking("missing", rows, 10_240) is None
    # More buffers than one preadv takes (IOV_MAX): read in several calls.
    many = np.zeros((3000, 16), dtype="u1")
    store.set_blocking("m", bytes(range(250)) * 192)  # 48,000 bytes
    assert store.readinto_blocking("m", list(many[:, :8]) + list(many[:, 8:]), 48_000) is True
    assert many[:, :8].tobytes() + many[:, 8:].tobytes() == store.get_blocking("m")


def test_a_store_overriding_reads_does_not_read_into_buffers() -> None:
    class Translating(LocalStore):
        def _get_blocking(self, key: str, byte_range: Any = None) -> bytes | None:
            return super()._get_blocking(key.upper(), byte_range)

    assert LocalStore(".").reads_into_buffers
    assert not Translating(".").reads_into_buffers


@pytest.mark.parametrize("order", ["C", "F"])
async def test_uncompressed_chunks_are_read_into_the_output_in_place(
    order: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azarr.storage import _local

    read_into: list[str] = []
    original = _local._readinto_whole

    def counting(path: str, buffers: Any, nbytes: int, fd: int | None = None) -> bool | None:
        read_into.append(path)
        return original(path, buffers, nbytes, fd)

    monkeypatch.setattr(_local, "_readinto_whole", counting)
    # Rows of 1,024 elements in the chunk's stored order: along the last axis for C, the first for F.
    shape, chunks = ((40, 3000), (10, 1024)) if order == "C" else ((3000, 40), (1024, 10))
    data = np.random.default_rng(1).standard_normal(shape).astype("<f4")
    arr = await azarr.array(data, chunks=chunks, store=LocalStore(tmp_path), compressor=None, order=order)
    stats = stats_for(arr.store)
    stats.reset()
    np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    assert stats.requests == 12 and stats.bytes_read == 12 * 10 * 1024 * 4
    assert len(read_into) == 8  # the whole chunks; the last column's are cut by the array's edge
    # Edge chunks (the last column of chunks is partial in the output), reversed and
    # stepped selections take the copying path and agree.
    for selection in [(slice(None, None, -1), slice(None)), (slice(5, 35), slice(10, 29, 3))]:
        selection = selection if order == "C" else selection[::-1]
        np.testing.assert_array_equal(await arr.get_basic_selection(selection), data[selection])


async def test_an_uncompressed_chunk_of_the_wrong_size_fails_naming_its_key(tmp_path: Path) -> None:
    arr = await azarr.array(
        np.ones((40, 2048), "<f4"), chunks=(10, 1024), store=LocalStore(tmp_path), compressor=None
    )
    (tmp_path / "2.1").write_bytes((tmp_path / "2.1").read_bytes()[:-4])  # truncated
    with pytest.raises(CodecError, match=r"'2\.1'"):
        await arr.get_basic_selection()
    (tmp_path / "2.1").write_bytes(np.ones((10, 1024), "<f4").tobytes() + b"\0")  # one byte too many
    with pytest.raises(CodecError, match=r"'2\.1'"):
        await arr.get_basic_selection()
    (tmp_path / "2.1").unlink()  # missing: fill_value
    expected = np.ones((40, 2048), "<f4")
    expected[20:30, 1024:] = 0
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


def test_a_thread_out_of_jobs_steals_the_back_half_of_the_fullest_running_job() -> None:
    running = RunningJobs(14)
    first, second = running.parts(running.start(list(range(8)))), running.parts(running.start([8, 9]))
    _, chunks, indices = next(first)
    assert [chunks[next(indices)], chunks[next(indices)]] == [0, 1]
    assert running.steal() is None  # the third job (4 chunks) has not started
    third = running.parts(running.start([10, 11, 12, 13]))
    _, rest, rest_indices = next(third)
    _, own, own_indices = next(second)
    assert [own[i] for i in own_indices] == [8, 9]
    # The second job is done: its thread takes half of the six chunks the first has not reached.
    _, stolen, stolen_indices = next(second)
    assert list(stolen) == [5, 6, 7]
    assert [stolen[next(stolen_indices)]] == [5]
    assert [chunks[i] for i in indices] == [2, 3, 4]  # the first job stops before them
    # Its thread steals in turn: from the third job (4 left), not the stolen part (2 left).
    _, again, again_indices = next(first)
    assert list(again) == [12, 13] and [again[i] for i in again_indices] == [12, 13]
    assert [rest[i] for i in rest_indices] == [10, 11]
    assert [stolen[i] for i in stolen_indices] == [6, 7]
    assert next(third, None) is None and next(first, None) is None  # nothing left worth a steal
    # A helper (a job of no chunks) only steals.
    assert RunningJobs.helpers(3) == [(), ()]
    running.start(list(range(4)))  # a job whose thread has not read a chunk yet
    helper = running.parts(running.start(()))
    assert [list(chunks) for _, chunks, _ in itertools.islice(helper, 2)] == [[], [2, 3]]


class _SlowKeysStore(MemoryStore):
    """A memory store whose reads of ``slow`` keys wait (``time.sleep`` releases the GIL);
    records which thread read each key."""

    supports_blocking_io = True

    def __init__(self) -> None:
        super().__init__()
        self.slow: set[str] = set()
        self.readers: dict[str, str] = {}

    def _get_blocking(self, key: str, byte_range: Any = None) -> bytes | None:
        if key in self.slow:
            time.sleep(0.02)
        self.readers[key] = threading.current_thread().name
        return super()._get_blocking(key, byte_range)


async def test_a_slow_job_is_finished_by_every_codec_thread() -> None:
    store = _SlowKeysStore()
    data = np.arange(64 * 8 * 1024, dtype="f8").reshape(64 * 8, 1024)
    with azarr.config.set(codec_threads=2):
        # 64 chunks of 64 KiB: 8 jobs of 8 chunks, two at a time; the last job's reads are slow.
        arr = await azarr.array(data, chunks=(8, 1024), store=store)
        store.slow = {f"{row}.0" for row in range(56, 64)}
        reports: list[Progress] = []
        np.testing.assert_array_equal(await arr.get_basic_selection(progress=reports.append), data)
    assert reports[-1].done == reports[-1].total == 64  # each chunk counted once, by its reader
    assert len({store.readers[key] for key in store.slow}) == 2
