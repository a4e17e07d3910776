"""Focused tests of ZipStore, MappingStore, LRUStoreCache, SyncFsspecStore, BlockingIO, chained URLs,
and pickling arrays and groups as configuration (the conformance suite is in test_stores.py)."""

from __future__ import annotations

import asyncio
import dbm.dumb
import multiprocessing
import os
import pickle
import threading
import time
import uuid
import zipfile
from collections.abc import AsyncIterator, Iterator, MutableMapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import pytest
from mappings import SQLiteMapping, UnpicklableSQLiteMapping
from servers import S3Server
from util import RecordingStore

import azarr
from azarr.errors import (
    ConnectionFailedError,
    KeyExistsError,
    PermissionDeniedError,
    ReadOnlyError,
    StoreError,
    StoreUnavailableError,
)
from azarr.scheduler import budget_for
from azarr.storage import (
    ByteRange,
    FsspecStore,
    LRUStoreCache,
    MappingStore,
    MemoryStore,
    S3Store,
    Store,
    SyncFsspecStore,
    ZipStore,
    from_url,
    make_store,
)

DATA = np.arange(12 * 10, dtype="i4").reshape(12, 10)


async def collect(it: AsyncIterator[str]) -> list[str]:
    return [x async for x in it]


async def write_array(store: Store, path: str = "a") -> azarr.AsyncArray:
    return await azarr.array(DATA, chunks=(5, 4), store=store, path=path, attributes={"units": "m"})


async def read_array(store: Store, path: str = "a") -> np.ndarray[Any, Any]:
    arr = await azarr.open_array(store, mode="r", path=path)
    assert arr.attrs["units"] == "m"
    result: np.ndarray[Any, Any] = await arr.get_basic_selection()
    return result


# ====================================================================== ZipStore
class TestZipStore:
    async def test_array_round_trip(self, tmp_path: Path) -> None:
        path = tmp_path / "data.zip"
        async with ZipStore(path, mode="w") as store:
            root = await azarr.group(store)
            await root.attrs.put({"title": "zipped"})
            await write_array(store)
            # Readable from the open archive before it is finalized.
            np.testing.assert_array_equal(await read_array(store), DATA)
        for reader in (ZipStore(path), from_url(f"zip::{path}"), from_url(f"zip://{path}")):
            assert isinstance(reader, ZipStore) and reader.read_only
            np.testing.assert_array_equal(await read_array(reader), DATA)
            group = await azarr.open_group(reader, mode="r")
            assert group.attrs["title"] == "zipped"
            await reader.close()
        with zipfile.ZipFile(path) as zf:  # a plain zip archive, stored (uncompressed) entries
            assert {".zgroup", ".zattrs", "a/.zarray", "a/0.0", "a/2.2"} <= set(zf.namelist())
            assert {info.compress_type for info in zf.infolist()} == {zipfile.ZIP_STORED}
            assert zf.testzip() is None

    async def test_rewriting_a_key_raises(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        await store.set("k", b"1")
        with pytest.raises(KeyExistsError, match=r"'k'.*write-once") as info:
            await store.set("k", b"2")
        assert isinstance(info.value, StoreError) and isinstance(info.value, FileExistsError)
        assert await store.get("k") == b"1"
        # A partial update of a written chunk is a rewrite too.
        arr = await write_array(store)
        with pytest.raises(KeyExistsError, match=r"a/0\.0"):
            await arr.set_basic_selection((0, 0), 99)
        await store.close()
        with zipfile.ZipFile(store.path) as zf:
            assert zf.namelist().count("k") == 1

    async def test_close_is_required_and_final(self, tmp_path: Path) -> None:
        path = tmp_path / "x.zip"
        store = ZipStore(path, mode="w")
        await store.set("a/k", b"v")
        with pytest.raises(zipfile.BadZipFile):  # no central directory yet
            zipfile.ZipFile(path)
        await store.close()
        with zipfile.ZipFile(path) as zf:
            assert zf.read("a/k") == b"v"
        assert await store.get("a/k") == b"v"  # reopened read-only
        assert await collect(store.list_dir("")) == ["a"]
        with pytest.raises(StoreError, match="finalized"):
            await store.set("b", b"w")
        await store.close()

    async def test_close_without_writes_creates_an_empty_archive(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "empty.zip", mode="w")
        await store.close()
        with zipfile.ZipFile(store.path) as zf:
            assert zf.namelist() == []

    async def test_flush_keeps_writing(self, tmp_path: Path) -> None:
        path = tmp_path / "x.zip"
        store = ZipStore(path, mode="w")
        await store.set("one", b"1")
        await store.flush()
        with zipfile.ZipFile(path) as zf:
            assert zf.namelist() == ["one"]
        await store.set("two", b"2")
        with pytest.raises(KeyExistsError):
            await store.set("one", b"again")
        await store.close()
        with zipfile.ZipFile(path) as zf:
            assert sorted(zf.namelist()) == ["one", "two"]

    async def test_modes(self, tmp_path: Path) -> None:
        path = tmp_path / "x.zip"
        async with ZipStore(path, mode="x") as store:
            await store.set("k", b"v")
        with pytest.raises(StoreError, match="mode 'x'"):
            await ZipStore(path, mode="x").set("k2", b"v")
        async with ZipStore(path, mode="a") as store:
            await store.set("k2", b"w")
            with pytest.raises(KeyExistsError):
                await store.set("k", b"again")
        reader = ZipStore(path)
        assert await collect(reader.list_prefix("")) == ["k", "k2"]
        with pytest.raises(ReadOnlyError):
            await reader.set("k3", b"x")
        async with ZipStore(path, mode="w") as store:  # "w" truncates
            assert await collect(store.list_prefix("")) == []
        with pytest.raises(ValueError, match="mode"):
            ZipStore(path, mode="rw")  # type: ignore[arg-type]

    async def test_missing_or_corrupt_archive(self, tmp_path: Path) -> None:
        with pytest.raises(StoreUnavailableError, match="does not exist"):
            await ZipStore(tmp_path / "nope.zip").get("k")
        (tmp_path / "bad.zip").write_bytes(b"not a zip file at all")
        with pytest.raises(StoreError, match="BadZipFile"):
            await ZipStore(tmp_path / "bad.zip").get("k")

    async def test_deletes(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        await store.set("a/k", b"v")
        await store.delete("missing")  # nothing to remove: fine
        await store.delete_prefix("b")
        with pytest.raises(StoreError, match="cannot be removed"):
            await store.delete("a/k")
        with pytest.raises(StoreError, match="cannot be removed"):
            await store.delete_prefix("a")
        # Creating with overwrite=True on an empty path needs no delete.
        await azarr.create((4,), chunks=(2,), store=store, path="new", overwrite=True)
        await store.close()

    async def test_compressed_entries_and_ranges(self, tmp_path: Path) -> None:
        value = bytes(range(256)) * 64
        async with ZipStore(tmp_path / "x.zip", mode="w", compression=zipfile.ZIP_DEFLATED) as store:
            await store.set("k", value)
        reader = ZipStore(tmp_path / "x.zip")
        for rng in (ByteRange(0, 10), ByteRange(1000, 1200), ByteRange(-5), ByteRange(len(value) - 3, 10**6)):
            assert await reader.get("k", rng) == rng.apply(value)
        assert await reader.getsize("k") == len(value)
        with zipfile.ZipFile(tmp_path / "x.zip") as zf:
            assert zf.getinfo("k").compress_type == zipfile.ZIP_DEFLATED
            assert zf.getinfo("k").compress_size < len(value)

    async def test_archive_made_by_zip_tools(self, tmp_path: Path) -> None:
        # `zip -r` style: directory entries and a top-level folder; plus names no key can have.
        async with ZipStore(tmp_path / "src.zip", mode="w") as src:
            await write_array(src, "data.zarr/a")
        with (
            zipfile.ZipFile(tmp_path / "src.zip") as zin,
            zipfile.ZipFile(tmp_path / "tool.zip", "w") as zout,
        ):
            zout.writestr("data.zarr/", b"")
            zout.writestr("data.zarr/a/", b"")
            zout.writestr("../evil", b"x")
            for info in zin.infolist():
                zout.writestr(info, zin.read(info))
        store = ZipStore(tmp_path / "tool.zip")
        keys = await collect(store.list_prefix(""))
        assert "../evil" not in keys and not any(k.endswith("/") for k in keys)
        assert await collect(store.list_dir("")) == [".zgroup", "data.zarr"]
        assert await store.get("data.zarr/a") is None and not await store.exists("data.zarr/a")
        np.testing.assert_array_equal(await read_array(store, "data.zarr/a"), DATA)

    async def test_pickle(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        await store.set("k", b"v")
        clone = pickle.loads(pickle.dumps(store))  # flushes; the copy appends, never truncates
        assert clone.mode == "a" and clone.path == store.path
        assert await clone.get("k") == b"v"
        await clone.close()
        await store.set("k2", b"w")
        await store.close()
        reader = pickle.loads(pickle.dumps(ZipStore(store.path)))
        assert reader.mode == "r" and await collect(reader.list_prefix("")) == ["k", "k2"]

    async def test_runs_off_the_event_loop(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        await store.set("k", b"v")
        seen: list[str] = []
        await store._io.run(lambda: seen.append(threading.current_thread().name))
        assert seen[0].startswith("azarr-zip")
        await store.close()

    def test_forked_children_reopen_the_archive(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        asyncio.run(write_array(store))
        asyncio.run(store.flush())
        global _FORK_STORE
        _FORK_STORE = store  # inherited by the forked children, with its open handle
        ctx = multiprocessing.get_context("fork")
        try:
            with ctx.Pool(2) as pool:
                sums = pool.map(_zip_child, [None, None])
        finally:
            _FORK_STORE = None
        assert sums == [(int(DATA.sum()), "refused")] * 2
        np.testing.assert_array_equal(asyncio.run(read_array(store)), DATA)
        asyncio.run(store.set("after", b"fork"))  # the parent still writes
        asyncio.run(store.close())
        with zipfile.ZipFile(store.path) as zf:
            assert zf.testzip() is None and "after" in zf.namelist()

    def test_two_event_loops(self, tmp_path: Path) -> None:
        store = ZipStore(tmp_path / "x.zip", mode="w")
        asyncio.run(write_array(store))
        np.testing.assert_array_equal(asyncio.run(read_array(store)), DATA)
        asyncio.run(store.close())


_FORK_STORE: ZipStore | None = None


def _zip_child(_: object) -> tuple[int, str]:
    """Runs in a forked child: read through the inherited store, try to write."""
    assert _FORK_STORE is not None

    async def main() -> tuple[int, str]:
        data = await read_array(_FORK_STORE)
        try:
            await _FORK_STORE.set("child", b"x")
            outcome = "written"
        except StoreError:
            outcome = "refused"
        return int(data.sum()), outcome

    return asyncio.run(main())


# ====================================================================== MappingStore
class _ProbeMapping(MutableMapping[str, bytes]):
    """A dict that records which threads call it, how many at once, and can fail or stall."""

    def __init__(self, delay: float = 0.0) -> None:
        self.data: dict[str, bytes] = {}
        self.delay = delay
        self.threads: set[str] = set()
        self.active = 0
        self.max_active = 0
        self.fail: BaseException | None = None
        self._lock = threading.Lock()

    def _enter(self) -> None:
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        if self.fail is not None:
            with self._lock:
                self.active -= 1
            raise self.fail
        time.sleep(self.delay)
        with self._lock:
            self.active -= 1

    def __getitem__(self, key: str) -> bytes:
        self._enter()
        return self.data[key]

    def __setitem__(self, key: str, value: bytes) -> None:
        self._enter()
        self.data[key] = value

    def __delitem__(self, key: str) -> None:
        self._enter()
        del self.data[key]

    def __iter__(self) -> Iterator[str]:
        self._enter()
        return iter(list(self.data))

    def __len__(self) -> int:
        return len(self.data)


class TestMappingStore:
    async def test_dbm_array_round_trip(self, tmp_path: Path) -> None:
        with dbm.dumb.open(str(tmp_path / "db"), "c") as db:
            store = make_store(db)
            assert isinstance(store, MappingStore) and store.mapping is db
            await write_array(store)
            np.testing.assert_array_equal(await read_array(store), DATA)
            arr = await azarr.open_array(db, mode="r", path="a")  # a mapping straight into open
            np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
        with dbm.dumb.open(str(tmp_path / "db"), "r") as db:  # persisted
            np.testing.assert_array_equal(await read_array(MappingStore(db, read_only=True)), DATA)

    async def test_sqlite_array_round_trip(self, tmp_path: Path) -> None:
        mapping = SQLiteMapping(str(tmp_path / "kv.sqlite"))
        store = MappingStore(mapping, max_workers=4)
        await write_array(store)
        np.testing.assert_array_equal(await read_array(store), DATA)
        assert len(mapping) == 3 + 9  # .zgroup, a/.zarray, a/.zattrs and 3 x 3 chunks

    def test_make_store_keeps_dicts_in_memory(self) -> None:
        data: dict[str, bytes] = {}
        assert isinstance(make_store(data), MemoryStore)
        assert isinstance(make_store(_ProbeMapping()), MappingStore)
        with pytest.raises(TypeError, match="MutableMapping"):
            MappingStore(42)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="max_workers"):
            MappingStore({}, max_workers=0)

    async def test_calls_run_on_its_own_threads(self) -> None:
        mapping = _ProbeMapping()
        store = MappingStore(mapping)
        await store.set("k", b"v")
        await store.get("k")
        await collect(store.list_prefix(""))
        assert mapping.threads and all(t.startswith("azarr-mapping") for t in mapping.threads)
        assert budget_for(store).max_requests == 2

    async def test_one_worker_serializes_calls(self) -> None:
        serial, parallel = _ProbeMapping(delay=0.02), _ProbeMapping(delay=0.02)
        for mapping, workers in ((serial, None), (parallel, 4)):
            store = MappingStore(mapping, max_workers=workers)
            await asyncio.gather(*(store.set(f"k{i}", b"v") for i in range(12)))
        assert serial.max_active == 1
        assert parallel.max_active > 1

    async def test_slow_mapping_does_not_block_the_loop(self) -> None:
        store = MappingStore(_ProbeMapping(delay=0.3))
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticker = asyncio.create_task(tick())
        await store.set("k", b"v")
        ticker.cancel()
        assert ticks >= 10

    async def test_errors_are_translated(self) -> None:
        mapping = _ProbeMapping()
        store = MappingStore(mapping)
        for exc, kind in (
            (OSError("disk on fire"), StoreError),
            (PermissionError("no"), PermissionDeniedError),
            (ConnectionError("refused"), ConnectionFailedError),
            (type("ConnectionError", (Exception,), {})("redis-py style"), ConnectionFailedError),
        ):
            mapping.fail = exc
            with pytest.raises(kind, match="'some/key'") as info:
                await store.get("some/key")
            assert info.value.__cause__ is exc
            assert store.url in str(info.value)

    async def test_values_and_keys_of_other_types(self, tmp_path: Path) -> None:
        data: dict[Any, Any] = {"a": bytearray(b"xyz"), b"b/c": memoryview(b"1234"), "../bad": b"x"}

        class Raw(MutableMapping[str, bytes]):
            def __getitem__(self, key: str) -> bytes:
                return data.get(key, data.get(key.encode()))  # type: ignore[no-any-return]

            def __setitem__(self, key: str, value: bytes) -> None:
                data[key] = value

            def __delitem__(self, key: str) -> None:
                del data[key]

            def __iter__(self) -> Iterator[str]:
                return iter(list(data))

            def __len__(self) -> int:
                return len(data)

        store = MappingStore(Raw())
        assert await store.get("a") == b"xyz" and type(await store.get("a")) is bytes
        assert await store.get("b/c", ByteRange(1, 3)) == b"23"
        assert await store.getsize("b/c") == 4
        assert await collect(store.list_prefix("")) == ["a", "b/c"]  # "../bad" is no key

    async def test_pickling(self, tmp_path: Path) -> None:
        good = MappingStore(SQLiteMapping(str(tmp_path / "kv.sqlite")), max_workers=3)
        await good.set("k", b"v")
        clone = pickle.loads(pickle.dumps(good))
        assert clone.max_workers == 3 and clone.mapping is not good.mapping
        assert await clone.get("k") == b"v"  # same database file
        bad = MappingStore(UnpicklableSQLiteMapping(str(tmp_path / "kv2.sqlite")))
        with pytest.raises(TypeError, match="UnpicklableSQLiteMapping is not picklable"):
            pickle.dumps(bad)

    def test_two_event_loops(self, tmp_path: Path) -> None:
        with dbm.dumb.open(str(tmp_path / "db"), "c") as db:
            store = MappingStore(db)
            asyncio.run(write_array(store))
            np.testing.assert_array_equal(asyncio.run(read_array(store)), DATA)


# ====================================================================== LRUStoreCache
class SlowStore(RecordingStore):
    """A recording MemoryStore whose gets take ``delay`` seconds."""

    def __init__(self, inner: Store, delay: float = 0.0) -> None:
        super().__init__(inner)
        self.delay = delay

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        await asyncio.sleep(self.delay)
        return await super()._get(key, byte_range)


def recorded(data: dict[str, bytes] | None = None) -> RecordingStore:
    return RecordingStore(MemoryStore(data if data is not None else {}))


class TestLRUStoreCache:
    async def test_hits_and_misses(self) -> None:
        inner = recorded({"k": b"value"})
        cache = LRUStoreCache(inner, max_size=None)
        assert await cache.get("k") == b"value"
        assert (cache.hits, cache.misses) == (0, 1)
        assert await cache.get("k") == b"value"
        assert await cache.get("k", ByteRange(1, 3)) == b"al"  # a range of a cached value
        assert await cache.getsize("k") == 5 and await cache.exists("k")
        assert (cache.hits, cache.misses) == (2, 1)
        assert inner.gets["k"] == 1
        # Absence is cached too: a chunk never written costs one request.
        assert await cache.get("nope") is None and await cache.get("nope") is None
        assert not await cache.exists("nope")
        with pytest.raises(FileNotFoundError):
            await cache.getsize("nope")
        assert inner.gets["nope"] == 1
        # A range of an uncached value is read as a range and not cached.
        await inner.inner.set("big", b"0123456789")
        assert await cache.get("big", ByteRange(2, 4)) == b"23"
        assert await cache.get("big") == b"0123456789"
        assert inner.gets["big"] == 2

    async def test_eviction_by_bytes(self) -> None:
        inner = recorded({"a": b"a" * 10, "b": b"b" * 10, "c": b"c" * 10, "huge": b"h" * 26})
        cache = LRUStoreCache(inner, max_size=25)
        await cache.get("a")
        await cache.get("b")
        assert cache.current_size == 20
        await cache.get("a")  # a is now the most recently used
        await cache.get("c")  # 30 > 25: evicts the least recently used, b
        assert cache.current_size == 20
        inner.reset()
        await cache.get("a")
        await cache.get("c")
        assert inner.requests == 0
        await cache.get("b")
        assert inner.gets["b"] == 1
        await cache.get("huge")  # larger than max_size: never cached
        await cache.get("huge")
        assert inner.gets["huge"] == 2
        assert cache.current_size <= 25
        unbounded = LRUStoreCache(inner, max_size=None)
        for k in ("a", "b", "c", "huge"):
            await unbounded.get(k)
        assert unbounded.current_size == 56
        nothing = LRUStoreCache(inner, max_size=0)
        await nothing.get("a")
        assert nothing.current_size == 0
        with pytest.raises(ValueError, match="max_size"):
            LRUStoreCache(inner, max_size=-1)

    async def test_writes_go_through_and_update_the_cache(self) -> None:
        inner = recorded()
        cache = LRUStoreCache(inner, max_size=None, recheck_cached_data="never")
        assert await collect(cache.list_prefix("")) == []
        await cache.set("g/k", b"v1")
        assert await inner.inner.get("g/k") == b"v1"
        assert await collect(cache.list_prefix("")) == ["g/k"]  # listing refreshed by the write
        assert await collect(cache.list_dir("g")) == ["k"]
        assert await collect(cache.list_prefix("g")) == ["g/k"]
        inner.reset()
        assert await cache.get("g/k") == b"v1"
        assert await collect(cache.list_prefix("g")) == ["g/k"]
        assert await collect(cache.list_dir("g")) == ["k"]
        assert inner.requests == 0  # all answered from the cache
        await cache.set("g/k", b"v2")
        assert await cache.get("g/k") == b"v2"
        await cache.delete("g/k")
        assert await cache.get("g/k") is None and not await cache.exists("g/k")
        assert await collect(cache.list_prefix("")) == []
        await cache.set("h/1", b"x")
        await cache.set("h/2", b"y")
        await cache.delete_prefix("h")
        assert await cache.get("h/1") is None
        assert await collect(cache.list_dir("")) == []
        assert inner.gets["g/k"] == 0

    async def test_invalidation(self) -> None:
        inner = recorded({"k": b"old", "d/x": b"1"})
        cache = LRUStoreCache(inner, max_size=None, recheck_cached_data="never")
        await cache.get("k")
        await cache.get("gone")
        assert await collect(cache.list_prefix("d")) == ["d/x"]
        # Changes behind the cache's back are not seen ...
        await inner.inner.set("k", b"new")
        await inner.inner.set("gone", b"here")
        await inner.inner.set("d/y", b"2")
        assert await cache.get("k") == b"old"
        assert await cache.get("gone") is None
        # ... until the matching part of the cache is invalidated.
        cache.invalidate_values()
        assert await cache.get("k") == b"new"
        assert await cache.get("gone") is None  # absence is a key fact, still cached
        assert await collect(cache.list_prefix("d")) == ["d/x"]
        cache.invalidate_keys()
        assert await cache.get("gone") == b"here"
        assert await collect(cache.list_prefix("d")) == ["d/x", "d/y"]
        await inner.inner.set("k", b"newer")
        cache.invalidate()
        assert await cache.get("k") == b"newer"
        assert cache.current_size == len(b"newer")

    async def test_recheck_policies(self) -> None:
        meta1, meta2 = b'{"v": 1}', b'{"v": 2}'
        results = {}
        for policy in ("always", "open", "never"):
            inner = MemoryStore({"a/.zarray": meta1, "a/0": b"chunk1"})
            cache = LRUStoreCache(inner, max_size=None, recheck_cached_data=policy)  # type: ignore[arg-type]
            assert await cache.get("a/.zarray") == meta1 and await cache.get("a/0") == b"chunk1"
            assert await collect(cache.list_dir("a")) == [".zarray", "0"]
            # Another writer changes metadata, a chunk, and adds a key.
            await inner.set("a/.zarray", meta2)
            await inner.set("a/0", b"chunk2")
            await inner.set("a/1", b"new")
            before = (
                await cache.get("a/.zarray"),
                await cache.get("a/0"),
                await collect(cache.list_dir("a")),
            )
            await cache.revalidate()
            after = (await cache.get("a/.zarray"), await cache.get("a/0"), await collect(cache.list_dir("a")))
            results[policy] = (before, after)
        old, new = [".zarray", "0"], [".zarray", "0", "1"]
        assert results["always"] == ((meta2, b"chunk1", new), (meta2, b"chunk2", new))
        assert results["open"] == ((meta1, b"chunk1", old), (meta2, b"chunk2", new))
        assert results["never"] == ((meta1, b"chunk1", old), (meta1, b"chunk1", old))
        with pytest.raises(ValueError, match="recheck_cached_data"):
            LRUStoreCache(MemoryStore(), max_size=None, recheck_cached_data="sometimes")  # type: ignore[arg-type]

    async def test_always_rechecks_metadata_existence(self) -> None:
        inner = recorded()
        cache = LRUStoreCache(inner, max_size=None, recheck_cached_data="always")
        assert not await cache.exists("g/.zgroup")
        await inner.inner.set("g/.zgroup", b"{}")
        assert await cache.exists("g/.zgroup")
        await cache.get("g/0")
        await cache.get("g/0")
        assert inner.gets["g/0"] == 1  # chunk keys still cached

    async def test_open_policy_through_open_array(self) -> None:
        inner = MemoryStore()
        arr = await azarr.zeros((4,), chunks=(2,), dtype="i4", store=inner)
        for policy, expected_shape in (("open", (8,)), ("never", (4,)), ("always", (8,))):
            cache = LRUStoreCache(inner, max_size=None, recheck_cached_data=policy)  # type: ignore[arg-type]
            first = await azarr.open_array(cache, mode="r")
            assert first.shape == (4,) and cache.generation == 1
            await arr.resize(8)  # through the inner store: the cache does not see the write
            reopened = await azarr.open_array(cache, mode="r")
            assert reopened.shape == expected_shape, policy
            group_view = await azarr.open(cache, mode="r")
            assert isinstance(group_view, azarr.AsyncArray)
            await arr.resize(4)

    async def test_open_consolidated_revalidates(self) -> None:
        inner = MemoryStore()
        root = await azarr.group(inner)
        await root.create_dataset("x", shape=(3,), chunks=(3,), dtype="i2")
        await azarr.consolidate_metadata(inner)
        cache = LRUStoreCache(inner, max_size=None)
        one = await azarr.open_consolidated(cache)
        assert await collect(one.keys()) == ["x"]  # type: ignore[union-attr]
        await root.create_dataset("y", shape=(3,), chunks=(3,), dtype="i2")
        await azarr.consolidate_metadata(inner)
        two = await azarr.open_consolidated(cache)
        assert await collect(two.keys()) == ["x", "y"]  # type: ignore[union-attr]

    async def test_concurrent_gets_share_one_request(self) -> None:
        inner = SlowStore(MemoryStore({"k": b"v"}), delay=0.05)
        cache = LRUStoreCache(inner, max_size=None)
        results = await asyncio.gather(*(cache.get("k") for _ in range(20)))
        assert results == [b"v"] * 20
        assert inner.gets["k"] == 1
        assert (cache.hits, cache.misses) == (19, 1)

    def test_concurrent_gets_from_two_threads(self) -> None:
        inner = SlowStore(MemoryStore({"k": b"v"}), delay=0.2)
        cache = LRUStoreCache(inner, max_size=None)
        barrier = threading.Barrier(2)

        def run() -> list[bytes | None]:
            barrier.wait()

            async def five() -> list[bytes | None]:
                return await asyncio.gather(*(cache.get("k") for _ in range(5)))

            return asyncio.run(asyncio.wait_for(five(), 5))

        threads_out: list[list[bytes | None]] = []
        workers = [threading.Thread(target=lambda: threads_out.append(run())) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert threads_out == [[b"v"] * 5] * 2
        assert inner.gets["k"] == 1

    async def test_cancelled_fetch_does_not_fail_waiters(self) -> None:
        inner = SlowStore(MemoryStore({"k": b"v"}), delay=0.1)
        cache = LRUStoreCache(inner, max_size=None)
        leader = asyncio.create_task(cache.get("k"))
        await asyncio.sleep(0.01)
        waiter = asyncio.create_task(cache.get("k"))
        await asyncio.sleep(0.01)
        leader.cancel()
        assert await waiter == b"v"
        with pytest.raises(asyncio.CancelledError):
            await leader
        assert await cache.get("k") == b"v"
        assert inner.gets["k"] == 1  # the cancelled request never reached the store
        assert cache.misses == 2

    async def test_write_overtaking_a_fetch_wins(self) -> None:
        inner = SlowStore(MemoryStore({"k": b"old"}), delay=0.1)
        cache = LRUStoreCache(inner, max_size=None, recheck_cached_data="never")
        fetch = asyncio.create_task(cache.get("k"))
        await asyncio.sleep(0.02)
        await cache.set("k", b"new")
        assert await cache.get("k") == b"new"  # not the fetch in flight
        assert await fetch in (b"old", b"new")
        assert await cache.get("k") == b"new"  # the older fetch result was not cached

    async def test_budget_pickle_and_views(self) -> None:
        inner = MemoryStore({"k": b"v"})
        cache = LRUStoreCache(inner, max_size=123, recheck_cached_data="always")
        assert cache.budget_key == inner.spec and budget_for(cache) is budget_for(inner)
        assert cache.url == inner.url and "LRUStoreCache" in repr(cache)
        await cache.get("k")
        clone = pickle.loads(pickle.dumps(cache))
        assert (clone.max_size, clone.recheck_cached_data) == (123, "always")
        assert (clone.hits, clone.misses, clone.current_size) == (0, 0, 0)  # starts empty
        assert await clone.get("k") == b"v"
        view = cache.with_read_only()
        assert await view.get("k") == b"v" and cache.hits == 1  # the view shares the cache
        with pytest.raises(ReadOnlyError):
            await view.set("k", b"w")
        assert LRUStoreCache(inner.with_read_only(), max_size=None).read_only

    @pytest.mark.s3
    async def test_array_over_s3(self, seaweedfs: S3Server, s3_bucket: str) -> None:
        inner = RecordingStore(S3Store(f"{s3_bucket}/cached.zarr", storage_options=seaweedfs.storage_options))
        cache = LRUStoreCache(inner, max_size=2**20)
        try:
            await write_array(cache)
            np.testing.assert_array_equal(await read_array(cache), DATA)
            inner.reset()
            arr = await azarr.open_array(cache, mode="r", path="a")
            np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
            # Reopening revalidated ("open"): metadata and chunks were read once more, then cached.
            requests_first = inner.requests
            np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)
            assert inner.requests == requests_first
            assert cache.hits > 0
        finally:
            await inner.inner.close()  # (RecordingStore does not forward close)


# ====================================================================== SyncFsspecStore, chained URLs
class TestSyncFsspecAndChainedUrls:
    @pytest.mark.s3
    async def test_simplecache_over_s3(self, seaweedfs: S3Server, s3_bucket: str, tmp_path: Path) -> None:
        plain = S3Store(f"{s3_bucket}/x.zarr", storage_options=seaweedfs.storage_options)
        try:
            await write_array(plain)
            options = {"s3": dict(seaweedfs.storage_options), "simplecache": {"cache_storage": str(tmp_path)}}
            url = f"simplecache::s3://{s3_bucket}/x.zarr"
            store = from_url(url, storage_options=options)
            assert isinstance(store, SyncFsspecStore) and store.url == url
            assert not store.is_local
            np.testing.assert_array_equal(await read_array(store), DATA)
            assert len(os.listdir(tmp_path)) >= 10  # metadata and 9 chunks cached locally
            # The local copies now serve reads, even of data changed on the server (simplecache semantics).
            await plain.set("a/0.0", b"garbage")
            np.testing.assert_array_equal(await read_array(store), DATA)
            # Writes go to S3 through the wrapper.
            await store.set("b/.zgroup", b'{"zarr_format": 2}')
            assert await plain.get("b/.zgroup") == b'{"zarr_format": 2}'
            assert "b" in await collect(store.list_dir(""))
            clone = pickle.loads(pickle.dumps(store))
            assert await clone.get("b/.zgroup") == b'{"zarr_format": 2}'
            assert options["s3"] == seaweedfs.storage_options  # options passed through unchanged
        finally:
            await plain.close()

    @pytest.mark.s3
    async def test_errors_are_classified(self, seaweedfs: S3Server) -> None:
        options = {"s3": dict(seaweedfs.storage_options, secret="wrong")}
        store = from_url("simplecache::s3://azarr-nope/x", storage_options=options)
        with pytest.raises(PermissionDeniedError):
            await store.get("k")

    async def test_zip_chain_over_another_filesystem(self) -> None:
        # A zip archive that is not a local file goes through fsspec's (sync) ZipFileSystem.
        fs = fsspec.filesystem("memory")
        name = f"/azarr-{uuid.uuid4().hex}.zip"
        import io

        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("g/.zgroup", b'{"zarr_format": 2}')
            zf.writestr("g/k", b"0123456789")
        fs.pipe_file(name, buffer.getvalue())
        try:
            store = from_url(f"zip::memory://{name}")
            assert isinstance(store, SyncFsspecStore)
            assert await store.get("g/k", ByteRange(2, 5)) == b"234"
            assert await collect(store.list_prefix("")) == ["g/.zgroup", "g/k"]
            assert await collect(store.list_dir("g")) == [".zgroup", "k"]
            group = await azarr.open_group(store, mode="r", path="g")
            assert group.path == "g"
        finally:
            fs.rm_file(name)

    def test_url_forms(self, tmp_path: Path) -> None:
        path = tmp_path / "d.zip"
        for url in (f"zip::{path}", f"zip://{path}", f"zip::file://{path}"):
            store = from_url(url)
            assert isinstance(store, ZipStore) and store.path == path and store.mode == "r"
        with pytest.raises(TypeError, match="storage_options"):
            from_url(f"zip::{path}", storage_options={"mode": "w"})
        with pytest.raises(ValueError, match="no-such-protocol"):
            from_url("no-such-protocol::memory://x")
        memory = from_url(f"simplecache::memory://azarr-{uuid.uuid4().hex}")
        assert isinstance(memory, SyncFsspecStore) and memory.is_local

    def test_constructor_checks(self) -> None:
        with pytest.raises(TypeError, match="fsspec filesystem"):
            SyncFsspecStore(object())
        import s3fs

        async_fs = s3fs.S3FileSystem(anon=True, asynchronous=True, skip_instance_cache=True)
        with pytest.raises(TypeError, match="FsspecStore"):
            SyncFsspecStore(async_fs, "bucket")
        assert FsspecStore  # the async store remains the choice for async filesystems


# ====================================================================== pickling arrays and groups
def _read_pickled(blob: bytes) -> tuple[list[int], dict[str, Any], bool, Any]:
    """Runs in a spawned process: unpickle a node and read through it."""
    node = pickle.loads(blob)

    async def main() -> tuple[list[int], dict[str, Any], bool, Any]:
        try:
            if isinstance(node, azarr.AsyncGroup):
                arr = await node.get("a")
                assert isinstance(arr, azarr.AsyncArray)
            else:
                arr = node
            data = await arr.get_basic_selection()
            return list(data.shape), arr.attrs.asdict(), arr.read_only, data.sum().item()
        finally:
            await node.store.close()

    return asyncio.run(main())


class TestPicklingNodes:
    async def test_pickle_is_configuration(self) -> None:
        store = MemoryStore.named(f"azarr-pickle-{uuid.uuid4().hex}")
        arr = await azarr.array(
            DATA, chunks=(5, 4), store=store, path="a", attributes={"units": "m"}, write_empty_chunks=False
        )
        await arr.resize(14, 10)  # the pickled document is the current one
        state = arr.__getstate__()
        assert set(state) == {
            "store",
            "path",
            "metadata",
            "attributes",
            "read_only",
            "allow_pickle",
            "write_empty_chunks",
            "partial_decompress",
            "cache",  # False or None: a ChunkCache object stays in its process
            "is_view",
            "recheck_metadata",
            "zarr_format",
            "cache_attrs",
        }
        clone = pickle.loads(pickle.dumps(arr))
        assert clone.shape == (14, 10) and clone.attrs["units"] == "m" and not clone.write_empty_chunks
        assert clone._budget is budget_for(clone.store)
        np.testing.assert_array_equal((await clone.get_basic_selection())[:12], DATA)
        assert clone.path == "a" and clone.store.url == store.url  # a named store rejoins its data
        ro = await azarr.open_array(store, mode="r", path="a")
        assert pickle.loads(pickle.dumps(ro)).read_only
        group = await azarr.open_group(store, mode="r+")
        await group.attrs.put({"title": "root"})
        clone_group = pickle.loads(pickle.dumps(group))
        assert clone_group.path == "" and not clone_group.read_only
        assert clone_group.attrs["title"] == "root"
        assert await collect(clone_group.keys()) == ["a"]

    @pytest.mark.s3
    def test_unpickle_in_another_process(self, seaweedfs: S3Server, s3_bucket: str) -> None:
        store = S3Store(f"{s3_bucket}/pickled.zarr", storage_options=seaweedfs.storage_options)

        async def make() -> tuple[azarr.AsyncArray, azarr.AsyncGroup]:
            try:
                root = await azarr.group(store)
                arr = await write_array(store)
                return arr, root
            finally:
                await store.close()

        arr, root = asyncio.run(make())
        ctx = multiprocessing.get_context("spawn")
        t0 = time.monotonic()
        with ProcessPoolExecutor(2, mp_context=ctx) as pool:
            results = list(pool.map(_read_pickled, [pickle.dumps(arr), pickle.dumps(root)]))
        elapsed = time.monotonic() - t0
        expected = ([12, 10], {"units": "m"}, False, int(DATA.sum()))
        assert results == [expected, expected], elapsed
        cached = LRUStoreCache(store, max_size=2**20)
        arr_cached = asyncio.run(azarr.open_array(cached, mode="r", path="a"))
        with ProcessPoolExecutor(1, mp_context=ctx) as pool:
            (result,) = pool.map(_read_pickled, [pickle.dumps(arr_cached)])
        assert result == ([12, 10], {"units": "m"}, True, int(DATA.sum()))

    @pytest.mark.s3
    def test_one_store_and_array_across_asyncio_runs(self, seaweedfs: S3Server, s3_bucket: str) -> None:
        store = S3Store(f"{s3_bucket}/runs.zarr", storage_options=seaweedfs.storage_options)
        arr = asyncio.run(write_array(store))
        np.testing.assert_array_equal(asyncio.run(arr.get_basic_selection()), DATA)
        asyncio.run(arr.set_basic_selection((0, 0), -1))
        reopened = asyncio.run(azarr.open_array(store, mode="r", path="a"))
        assert asyncio.run(reopened.get_basic_selection((0, 0))) == -1

        async def close() -> None:
            await store.close()

        asyncio.run(close())


# ---------------------------------------------------------------------- BlockingIO.call
async def test_blocking_io_call_translates_failures_for_the_store() -> None:
    from azarr.storage._threads import BlockingIO

    io = BlockingIO(1, "azarr-test")
    seen: list[tuple[str, str, str]] = []

    def translate(exc: Exception, op: str, key: str) -> StoreError | None:
        seen.append((type(exc).__name__, op, key))
        return None if isinstance(exc, TypeError) else StoreError(f"{op} {key!r}: {exc}")

    def fail(exc: BaseException) -> None:
        raise exc

    try:
        assert await io.call(translate, "get", "a/0", lambda x: x + 1, 41) == 42
        with pytest.raises(StoreError, match="get 'a/0': boom") as info:
            await io.call(translate, "get", "a/0", fail, OSError("boom"))
        assert isinstance(info.value.__cause__, OSError)
        with pytest.raises(TypeError, match="a bug"):  # not the store's to classify: as it is
            await io.call(translate, "set", "a/1", fail, TypeError("a bug"))
        with pytest.raises(ReadOnlyError):  # azarr errors pass untranslated
            await io.call(translate, "set", "a/2", fail, ReadOnlyError("read-only"))
        assert seen == [("OSError", "get", "a/0"), ("TypeError", "set", "a/1")]
    finally:
        io.shutdown()
