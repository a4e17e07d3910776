"""The store conformance suite: behaviour every `Store` must have.

Like zarr-python 3's ``zarr.testing.store.StoreTests``: a driver's test module
subclasses `StoreTests` and says how to make a fresh, empty store; it
then runs every test here (keys, byte ranges, listings, deletes, concurrency,
read-only views, several event loops and threads, pickling, specs):

    import pytest
    from azarr.testing.store import StoreTests
    from mypackage import MyKVStore

    class TestMyKVStore(StoreTests):
        @pytest.fixture
        def make_store(self, tmp_path):
            return lambda: MyKVStore(tmp_path / "kv")

        def reopen(self, store, *, read_only):
            return MyKVStore(store.root, read_only=read_only)

Needs pytest and pytest-asyncio (``asyncio_mode = "auto"``), as azarr's own tests do.
"""

from __future__ import annotations

import asyncio
import gc
import pickle
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import pytest

from azarr.errors import (
    ConsistencyUnsupportedError,
    InvalidKeyError,
    PreconditionFailedError,
    ReadOnlyError,
    TransientStoreError,
)
from azarr.scheduler import budget_for, stats_for
from azarr.storage import ByteRange, Store, StoreSpec, validate_key

__all__ = [
    "KEYS",
    "LISTING_KEYS",
    "RANGES",
    "UNSAFE_KEYS",
    "VALUE",
    "ReadOnlyStoreTests",
    "StoreTests",
    "check_listing",
    "check_missing_key",
    "collect",
]

UNSAFE_KEYS = ["../x", "/abs", "a/../b", "a\\b", "a//b", ".", "..", "", "a/./b", "a/", "x\x00y"]
KEYS = ["a", ".zarray", "g/.zattrs", "g/arr/0.0", "g/arr/0/0", "données/ü/0", "with space/k", "star*?[x]"]
VALUE = b"0123456789"
RANGES = [
    (0, 3),
    (2, 5),
    (5, None),
    (0, None),
    (-3, None),
    (-10, None),
    (-30, None),
    (8, 100),
    (9, 10),
    (10, None),
    (10, 20),
    (20, 30),
    (0, 0),
    (4, 4),
    (12, 12),
]


#: The keys `check_listing` expects a store to hold.
LISTING_KEYS = [".zgroup", "a/.zarray", "a/0.0", "a/0.1", "a/sub/.zgroup", "ab/.zarray", "ab/0"]


async def check_listing(store: Store) -> None:
    """Check ``list_prefix``/``list_dir`` of a store holding exactly `LISTING_KEYS`.

    Prefixes are paths (``"a"`` does not list ``"ab/..."``), a trailing slash is
    optional, values are not directories, and directory-like names are not values.
    """
    assert await collect(store.list_prefix("")) == sorted(LISTING_KEYS)
    expected_a = ["a/.zarray", "a/0.0", "a/0.1", "a/sub/.zgroup"]
    assert await collect(store.list_prefix("a")) == expected_a
    assert await collect(store.list_prefix("a/")) == expected_a
    assert await collect(store.list_prefix("a/sub")) == ["a/sub/.zgroup"]
    assert await collect(store.list_prefix("zzz")) == []
    assert await collect(store.list_dir("")) == [".zgroup", "a", "ab"]
    assert await collect(store.list_dir("a")) == [".zarray", "0.0", "0.1", "sub"]
    assert await collect(store.list_dir("a/")) == [".zarray", "0.0", "0.1", "sub"]
    assert await collect(store.list_dir("a/sub")) == [".zgroup"]
    assert await collect(store.list_dir("a/.zarray")) == []  # a value, not a directory
    assert await collect(store.list_dir("missing")) == []
    assert not await store.exists("a")
    assert await store.get("a") is None
    with pytest.raises(FileNotFoundError):
        await store.getsize("a")


async def check_missing_key(store: Store) -> None:
    """Check that a key the store does not hold reads as missing everywhere: ``get`` (whole or
    any byte range) gives None, ``exists`` False, ``getsize`` raises FileNotFoundError."""
    assert await store.get("nope") is None
    assert await store.get("no/such/deep/key") is None
    assert await store.get("nope", ByteRange(0, 4)) is None
    assert await store.get("nope", ByteRange(-4)) is None
    assert await store.get("nope", ByteRange(3, 3)) is None
    assert not await store.exists("nope")
    with pytest.raises(FileNotFoundError):
        await store.getsize("nope")


async def collect(it: AsyncIterator[str]) -> list[str]:
    return sorted([x async for x in it])


class StoreTests:
    """Behaviour every `Store` must have. Subclasses provide ``make_store``."""

    # Subclasses may lower this for slow backends.
    concurrency: ClassVar[int] = 200
    # False where unpickling makes an independent copy (an unnamed MemoryStore).
    pickle_keeps_url: ClassVar[bool] = True
    # False where the backend ignores conditions on deletes (fake-gcs-server).
    conditional_deletes_enforced: ClassVar[bool] = True
    # False where the backend checks a condition and writes non-atomically (moto).
    conditional_writes_atomic: ClassVar[bool] = True

    @pytest.fixture
    def make_store(self) -> Callable[[], Store]:  # pragma: no cover - always overridden
        raise NotImplementedError

    @pytest.fixture
    def store(self, make_store: Callable[[], Store]) -> Store:
        return make_store()

    def reopen(self, store: Store, *, read_only: bool) -> Store:
        """A new instance over the same data (not a copy of ``store``)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ basics
    def test_repr_and_url(self, store: Store) -> None:
        assert store.url in repr(store)
        assert "://" in store.url
        assert not store.read_only

    @pytest.mark.parametrize("key", KEYS)
    async def test_set_get_roundtrip(self, store: Store, key: str) -> None:
        assert await store.get(key) is None
        await store.set(key, VALUE)
        assert await store.get(key) == VALUE
        assert await store.exists(key)
        assert await store.getsize(key) == len(VALUE)
        assert await collect(store.list_prefix("")) == [key]

    async def test_get_missing(self, store: Store) -> None:
        await check_missing_key(store)

    @pytest.mark.parametrize("value", [VALUE, b"", bytes(range(256)) * 300], ids=["small", "empty", "76800b"])
    async def test_get_into(self, store: Store, value: bytes) -> None:
        """``get_into`` returns what ``get`` does: in the allocated buffer, or as bytes."""
        await store.set("k", value)
        sizes: list[int] = []

        def allocate(nbytes: int) -> memoryview:
            sizes.append(nbytes)
            return memoryview(bytearray(nbytes))

        got = await store.get_into("k", allocate)
        assert got is not None and bytes(got) == value
        assert sizes in ([], [len(value)])
        assert await store.get_into("missing", allocate) is None
        with pytest.raises(InvalidKeyError):
            await store.get_into("../k", allocate)

    async def test_overwrite(self, store: Store) -> None:
        await store.set("k", b"first value, longer")
        await store.set("k", b"second")
        assert await store.get("k") == b"second"
        assert await store.getsize("k") == 6

    async def test_empty_value(self, store: Store) -> None:
        await store.set("empty", b"")
        assert await store.get("empty") == b""
        assert await store.exists("empty")
        assert await store.getsize("empty") == 0
        assert await store.get("empty", ByteRange(0, 5)) == b""
        assert await store.get("empty", ByteRange(-5)) == b""
        assert await store.get("empty", ByteRange(2)) == b""
        assert await collect(store.list_prefix("")) == ["empty"]

    async def test_accepts_bytes_like(self, store: Store) -> None:
        await store.set("ba", bytearray(b"xyz"))
        await store.set("mv", memoryview(b"abcdef")[1:4])
        assert await store.get("ba") == b"xyz"
        assert await store.get("mv") == b"bcd"
        assert type(await store.get("ba")) is bytes

    @pytest.mark.parametrize(("start", "end"), RANGES)
    async def test_byte_ranges(self, store: Store, start: int, end: int | None) -> None:
        await store.set("r/k", VALUE)
        rng = ByteRange(start, end)
        assert await store.get("r/k", rng) == rng.apply(VALUE) == VALUE[start:end]

    def test_byte_range_validation(self) -> None:
        with pytest.raises(ValueError):
            ByteRange(5, 2)
        with pytest.raises(ValueError):
            ByteRange(-2, 5)

    # ------------------------------------------------------------------ keys
    @pytest.mark.parametrize("key", UNSAFE_KEYS)
    async def test_unsafe_keys_rejected(self, store: Store, key: str) -> None:
        with pytest.raises(InvalidKeyError) as info:
            await store.set(key, b"x")
        assert isinstance(info.value, ValueError)
        for op in (store.get, store.exists, store.getsize, store.delete):
            with pytest.raises(InvalidKeyError):
                await op(key)
        assert await collect(store.list_prefix("")) == []

    # A leading "/" on a prefix is tolerated ("/" means the root), unlike on keys.
    @pytest.mark.parametrize("prefix", ["../x", "a/../b", "a\\b", "a//b", "a/./b"])
    async def test_unsafe_prefixes_rejected(self, store: Store, prefix: str) -> None:
        with pytest.raises(InvalidKeyError):
            await collect(store.list_prefix(prefix))
        with pytest.raises(InvalidKeyError):
            await collect(store.list_dir(prefix))
        with pytest.raises(InvalidKeyError):
            await store.delete_prefix(prefix)

    def test_validate_key(self) -> None:
        assert validate_key("a/b/0.0") == "a/b/0.0"
        assert validate_key("", allow_empty=True) == ""

    # ------------------------------------------------------------------ delete
    async def test_delete(self, store: Store) -> None:
        await store.set("d/k", b"1")
        await store.set("d/j", b"2")
        await store.delete("d/k")
        assert await store.get("d/k") is None
        assert not await store.exists("d/k")
        assert await store.get("d/j") == b"2"
        await store.delete("d/k")  # deleting a missing key is fine
        await store.delete("never/was")
        assert await collect(store.list_prefix("")) == ["d/j"]
        await store.delete("d/j")
        assert await collect(store.list_prefix("")) == []
        assert await collect(store.list_dir("")) == []

    async def test_delete_prefix(self, store: Store) -> None:
        # (No value at "a" itself: a directory store cannot hold both "a" and "a/0".)
        keys = ["a/0", "a/b/0", "a/b/c/1", "ab/0", "ab.json", "b/0", "a*?[/x"]
        for k in keys:
            await store.set(k, k.encode())
        await store.delete_prefix("a")
        assert await collect(store.list_prefix("")) == ["a*?[/x", "ab.json", "ab/0", "b/0"]
        await store.delete_prefix("a*?[")
        assert await collect(store.list_prefix("")) == ["ab.json", "ab/0", "b/0"]
        await store.delete_prefix("nothing/here")
        await store.delete_prefix("b/")
        assert await collect(store.list_dir("")) == ["ab", "ab.json"]
        await store.delete_prefix("")
        assert await collect(store.list_prefix("")) == []
        assert await collect(store.list_dir("")) == []
        assert await store.get("ab.json") is None

    # ------------------------------------------------------------------ listing
    async def test_list_prefix_and_dir(self, store: Store) -> None:
        for k in LISTING_KEYS:
            await store.set(k, b"x")
        await check_listing(store)

    async def test_listing_is_fresh_after_writes(self, store: Store) -> None:
        assert await collect(store.list_dir("g")) == []
        await store.set("g/0", b"x")
        assert await collect(store.list_dir("g")) == ["0"]
        assert await collect(store.list_prefix("g")) == ["g/0"]
        await store.set("g/1", b"x")
        assert await collect(store.list_dir("g")) == ["0", "1"]
        assert await collect(store.list_prefix("g")) == ["g/0", "g/1"]
        await store.delete("g/0")
        assert await collect(store.list_dir("g")) == ["1"]
        assert await collect(store.list_prefix("")) == ["g/1"]

    async def test_empty_store_lists_nothing(self, store: Store) -> None:
        assert await collect(store.list_prefix("")) == []
        assert await collect(store.list_dir("")) == []

    # ------------------------------------------------------------------ volume
    async def test_large_value(self, store: Store) -> None:
        value = random.Random(0).randbytes(16 * 2**20 + 12345)
        await store.set("big/0", value)
        assert await store.get("big/0") == value
        assert await store.getsize("big/0") == len(value)
        mid = 8 * 2**20
        assert await store.get("big/0", ByteRange(mid, mid + 1000)) == value[mid : mid + 1000]
        assert await store.get("big/0", ByteRange(-777)) == value[-777:]

    async def test_concurrent_sets(self, store: Store) -> None:
        n = self.concurrency
        items = {f"c/{i // 20}/{i}": f"value {i}".encode() * (i % 7 + 1) for i in range(n)}
        await asyncio.gather(*(store.set(k, v) for k, v in items.items()))
        got = await asyncio.gather(*(store.get(k) for k in items))
        assert dict(zip(items, got, strict=True)) == items
        assert await collect(store.list_prefix("c")) == sorted(items)
        assert len(await collect(store.list_dir("c"))) == (n + 19) // 20

    async def test_concurrent_overwrites_of_one_key(self, store: Store) -> None:
        values = [bytes([i]) * (1000 + i) for i in range(50)]
        transient = 0

        async def set_as_the_scheduler_would(value: bytes) -> None:
            # A store may answer a write with TransientStoreError (S3's "500 InternalError":
            # moto 5.2 gives one now and then when PUTs of one key race, as it disposes of
            # the replaced object's buffer); azarr's scheduler retries those, so this test
            # does too -- a few times, and no more than a few writes in all.
            nonlocal transient
            for attempt in range(3):
                try:
                    await store.set("same", value)
                    return
                except TransientStoreError:
                    transient += 1
                    if attempt == 2:
                        raise

        await asyncio.gather(*(set_as_the_scheduler_would(v) for v in values))
        assert transient <= 5, f"{transient} of {len(values)} writes failed transiently"
        assert await store.get("same") in values
        assert await collect(store.list_prefix("")) == ["same"]

    # ------------------------------------------------------------------ generations
    # Stores declaring supports_conditional_writes must honour conditions atomically
    # (docs/consistency.md); the others must refuse them with a clear error.
    async def test_conditional_create(self, store: Store) -> None:
        if not store.supports_conditional_writes:
            with pytest.raises(ConsistencyUnsupportedError, match="conditional"):
                await store.set("new", b"x", if_not_exists=True)
            assert await store.get_with_generation("missing") == (None, None)
            return
        await store.set("new", b"first", if_not_exists=True)
        with pytest.raises(PreconditionFailedError):
            await store.set("new", b"second", if_not_exists=True)
        assert await store.get("new") == b"first"
        with pytest.raises(ValueError):
            await store.set("new", b"x", if_not_exists=True, if_generation_match=object())

    async def test_conditional_update(self, store: Store) -> None:
        if not store.supports_conditional_writes:
            pytest.skip("no conditional writes")
        assert await store.get_with_generation("k") == (None, None)
        await store.set("k", b"v1")
        value, first = await store.get_with_generation("k")
        assert value == b"v1" and first is not None
        await store.set("k", b"v2", if_generation_match=first)
        value, second = await store.get_with_generation("k")
        assert value == b"v2" and second is not None
        with pytest.raises(PreconditionFailedError):
            await store.set("k", b"stale", if_generation_match=first)  # another writer's v2 stays
        assert await store.get("k") == b"v2"
        # (Rewriting the same bytes may keep the generation: S3 ETags are content
        # hashes. A match then still means "unchanged", which is all a merge needs.)
        await store.set("k", b"v3")
        with pytest.raises(PreconditionFailedError):
            await store.set("k", b"v4", if_generation_match=second)
        if self.conditional_deletes_enforced:
            with pytest.raises(PreconditionFailedError):
                await store.delete("k", if_generation_match=second)
            assert await store.exists("k")
        _, current = await store.get_with_generation("k")
        await store.delete("k", if_generation_match=current)
        assert await store.get("k") is None
        await store.delete("k", if_generation_match=current)  # missing: nothing to do

    async def test_range_reads_pinned_to_a_generation(self, store: Store) -> None:
        if not store.supports_conditional_reads:
            with pytest.raises(ConsistencyUnsupportedError):
                await store.get("k", ByteRange(0, 2), if_generation_match="any")
            return
        await store.set("k", VALUE)
        info = await store.stat("k")
        assert info is not None and info[0] == len(VALUE) and info[1] is not None
        assert await store.get("k", ByteRange(2, 5), if_generation_match=info[1]) == VALUE[2:5]
        await store.set("k", VALUE[::-1])
        with pytest.raises(PreconditionFailedError):
            await store.get("k", ByteRange(2, 5), if_generation_match=info[1])
        assert await store.stat("missing") is None

    async def test_range_read_with_generation(self, store: Store) -> None:
        """A ranged read reports the whole object's generation: later ranges pin to it (how a
        shard's index and its inner chunks are read as one version)."""
        await store.set("k", VALUE)
        part, generation = await store.get_with_generation("k", ByteRange(2, 5))
        assert part == VALUE[2:5]
        tail, _ = await store.get_with_generation("k", ByteRange(-3))
        assert tail == VALUE[-3:]
        assert await store.get_with_generation("missing", ByteRange(0, 2)) == (None, None)
        if not store.supports_conditional_reads:
            return
        assert generation is not None
        assert await store.get("k", ByteRange(0, 2), if_generation_match=generation) == VALUE[:2]
        await store.set("k", VALUE[::-1])
        with pytest.raises(PreconditionFailedError):
            await store.get("k", ByteRange(0, 2), if_generation_match=generation)

    async def test_conditional_read_modify_writes_lose_nothing(self, store: Store) -> None:
        """Tasks increment one counter by read-modify-write: every increment survives."""
        if not store.supports_conditional_writes or not self.conditional_writes_atomic:
            pytest.skip("no atomic conditional writes")
        tasks, conflicts = 12, 0

        async def increment() -> None:
            nonlocal conflicts
            while True:
                value, generation = await store.get_with_generation("counter")
                new = str(int(value or b"0") + 1).encode()
                try:
                    if value is None:
                        await store.set("counter", new, if_not_exists=True)
                    else:
                        await store.set("counter", new, if_generation_match=generation)
                    return
                except PreconditionFailedError:
                    conflicts += 1

        await asyncio.gather(*(increment() for _ in range(tasks)))
        assert await store.get("counter") == str(tasks).encode()

    # ------------------------------------------------------------------ modes
    async def test_read_only(self, store: Store) -> None:
        await store.set("k", b"v")
        for ro in (self.reopen(store, read_only=True), store.with_read_only()):
            assert ro.read_only
            assert await ro.get("k") == b"v"
            assert await collect(ro.list_prefix("")) == ["k"]
            with pytest.raises(ReadOnlyError) as info:
                await ro.set("k", b"w")
            assert isinstance(info.value, PermissionError)
            assert ro.url in str(info.value)
            with pytest.raises(ReadOnlyError):
                await ro.set("new", b"w")
            with pytest.raises(ReadOnlyError):
                await ro.delete("k")
            with pytest.raises(ReadOnlyError):
                await ro.delete_prefix("")
            await ro.close()
        assert await store.get("k") == b"v"
        assert not store.read_only
        assert await collect(store.list_prefix("")) == ["k"]

    async def test_close_and_reuse(self, store: Store) -> None:
        await store.set("k", b"v")
        await store.close()
        assert await store.get("k") == b"v"
        await store.set("k2", b"w")
        await store.close()
        await store.close()  # idempotent
        async with store as s:
            assert s is store
            assert await s.get("k2") == b"w"
        assert await store.get("k") == b"v"

    def test_used_from_two_event_loops(self, store: Store) -> None:
        async def write() -> None:
            await store.set("loop/k", b"v1")

        async def read_and_close() -> bytes | None:
            try:
                return await store.get("loop/k")
            finally:
                await store.close()

        asyncio.run(write())  # no close(): the loop's shutdown must clean up
        assert asyncio.run(read_and_close()) == b"v1"
        assert asyncio.run(read_and_close()) == b"v1"
        gc.collect()

    def test_used_from_two_threads_at_once(self, store: Store) -> None:
        async def work(tag: int) -> list[bytes | None]:
            try:
                await asyncio.gather(*(store.set(f"t{tag}/{i}", bytes([tag, i])) for i in range(20)))
                return await asyncio.gather(*(store.get(f"t{tag}/{i}") for i in range(20)))
            finally:
                await store.close()

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda tag: asyncio.run(work(tag)), [1, 2]))
        assert results == [[bytes([tag, i]) for i in range(20)] for tag in (1, 2)]

    async def test_blocking_access_matches_the_coroutines(self, store: Store) -> None:
        """Stores declaring ``supports_blocking_io`` (the chunk pipeline then calls their
        blocking twins from codec threads) must answer them exactly like the coroutines,
        from several threads at once."""
        if not store.supports_blocking_io:
            with pytest.raises(NotImplementedError):
                store.get_blocking("a")
            return
        await store.set("a/0", b"async")
        assert store.get_blocking("a/0") == b"async"
        assert store.get_blocking("a/missing") is None

        def write_and_read(tag: int) -> list[bytes | None]:
            for i in range(20):
                store.set_blocking(f"b{tag}/{i}", bytes([tag, i]))
            return [store.get_blocking(f"b{tag}/{i}") for i in range(20)]

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(write_and_read, [1, 2]))
        assert results == [[bytes([tag, i]) for i in range(20)] for tag in (1, 2)]
        assert await store.get("b2/7") == bytes([2, 7])
        store.delete_blocking("b2/7")
        store.delete_blocking("b2/7")  # deleting a missing key is not an error
        assert await store.get("b2/7") is None
        for key in UNSAFE_KEYS:
            with pytest.raises(InvalidKeyError):
                store.get_blocking(key)

    async def test_pickle_roundtrip(self, store: Store) -> None:
        await store.set("p/k", b"pickled")
        clone = pickle.loads(pickle.dumps(store))
        assert type(clone) is type(store)
        if self.pickle_keeps_url:
            assert clone.url == store.url
        assert clone.read_only == store.read_only
        assert await clone.get("p/k") == b"pickled"
        await clone.close()

    # ------------------------------------------------------------------ specs
    def test_spec_identifies_the_store(self, store: Store) -> None:
        spec = store.spec
        assert isinstance(spec, StoreSpec)
        assert hash(spec) == hash(pickle.loads(pickle.dumps(spec)))
        assert pickle.loads(pickle.dumps(spec)) == spec
        assert store.with_read_only().spec == spec  # a read-only view is the same store
        assert budget_for(store.with_read_only()) is budget_for(store)
        assert stats_for(store.with_read_only()) is stats_for(store)

    async def test_pickled_copy_shares_budget_and_counters(self, store: Store) -> None:
        if not self.pickle_keeps_url:
            pytest.skip("unpickling makes an independent store")
        clone = pickle.loads(pickle.dumps(store))
        assert clone.spec == store.spec
        assert budget_for(clone) is budget_for(store)
        assert stats_for(clone) is stats_for(store)
        await clone.close()


class ReadOnlyStoreTests:
    """What a store serving data written out of band (HTTP) must do: the read side of StoreTests.

    Subclasses provide ``populate``: ``populate({key: value}) -> Store`` writes the
    values where the store will read them (a fresh root each call) and returns it.
    """

    @pytest.fixture
    def populate(self) -> Callable[[dict[str, bytes]], Store]:  # pragma: no cover - always overridden
        raise NotImplementedError

    @staticmethod
    def write_tree(root: Path, data: dict[str, bytes]) -> None:
        root.mkdir(parents=True, exist_ok=True)
        for key, value in data.items():
            path = root.joinpath(*key.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(value)

    def test_repr_and_url(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({})
        assert store.url in repr(store)
        assert "://" in store.url
        assert store.read_only

    @pytest.mark.parametrize("key", KEYS)
    async def test_get(self, populate: Callable[[dict[str, bytes]], Store], key: str) -> None:
        store = populate({key: VALUE})
        assert await store.get(key) == VALUE
        assert type(await store.get(key)) is bytes
        assert await store.exists(key)
        assert await store.getsize(key) == len(VALUE)
        assert await collect(store.list_prefix("")) == [key]

    async def test_get_missing(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"k": b"v"})
        await check_missing_key(store)

    async def test_empty_value(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"empty": b""})
        assert await store.get("empty") == b""
        assert await store.exists("empty")
        assert await store.getsize("empty") == 0
        assert await store.get("empty", ByteRange(0, 5)) == b""
        assert await store.get("empty", ByteRange(-5)) == b""
        assert await store.get("empty", ByteRange(2)) == b""
        assert await store.get("empty", ByteRange(0, 0)) == b""
        assert await collect(store.list_prefix("")) == ["empty"]

    @pytest.mark.parametrize(("start", "end"), RANGES)
    async def test_byte_ranges(
        self, populate: Callable[[dict[str, bytes]], Store], start: int, end: int | None
    ) -> None:
        store = populate({"r/k": VALUE})
        rng = ByteRange(start, end)
        assert await store.get("r/k", rng) == rng.apply(VALUE) == VALUE[start:end]

    @pytest.mark.parametrize("key", UNSAFE_KEYS)
    async def test_unsafe_keys_rejected(
        self, populate: Callable[[dict[str, bytes]], Store], key: str
    ) -> None:
        store = populate({"k": b"v"})
        for op in (store.get, store.exists, store.getsize):
            with pytest.raises(InvalidKeyError) as info:
                await op(key)
            assert isinstance(info.value, ValueError)

    @pytest.mark.parametrize("prefix", ["../x", "a/../b", "a\\b", "a//b", "a/./b"])
    async def test_unsafe_prefixes_rejected(
        self, populate: Callable[[dict[str, bytes]], Store], prefix: str
    ) -> None:
        store = populate({"k": b"v"})
        with pytest.raises(InvalidKeyError):
            await collect(store.list_prefix(prefix))
        with pytest.raises(InvalidKeyError):
            await collect(store.list_dir(prefix))

    async def test_writes_refused(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"k": b"v"})
        refused: list[Callable[[], Awaitable[None]]] = [
            lambda: store.set("k", b"w"),
            lambda: store.set("new", b"w"),
            lambda: store.delete("k"),
            lambda: store.delete_prefix(""),
        ]
        for op in refused:
            with pytest.raises(ReadOnlyError) as info:
                await op()
            assert isinstance(info.value, PermissionError)
            assert store.url in str(info.value)
        assert not store.supports_writes or store.read_only
        assert await store.get("k") == b"v"

    async def test_list_prefix_and_dir(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate(dict.fromkeys(LISTING_KEYS, b"x"))
        assert store.supports_listing
        await check_listing(store)

    async def test_unicode_keys_listed(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        keys = ["données/ü/0", "with space/k", "star*?[x]", "100%/k", "x#y", "日本/語"]
        store = populate({k: k.encode() for k in keys})
        assert await collect(store.list_prefix("")) == sorted(keys)
        assert await collect(store.list_dir("données")) == ["ü"]
        for k in keys:
            assert await store.get(k) == k.encode()

    async def test_empty_store_lists_nothing(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({})
        assert await collect(store.list_prefix("")) == []
        assert await collect(store.list_dir("")) == []

    async def test_large_value(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        value = random.Random(0).randbytes(16 * 2**20 + 12345)
        store = populate({"big/0": value})
        assert await store.get("big/0") == value
        assert await store.getsize("big/0") == len(value)
        mid = 8 * 2**20
        assert await store.get("big/0", ByteRange(mid, mid + 1000)) == value[mid : mid + 1000]
        assert await store.get("big/0", ByteRange(-777)) == value[-777:]

    async def test_concurrent_gets(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        items = {f"c/{i // 20}/{i}": f"value {i}".encode() * (i % 7 + 1) for i in range(200)}
        store = populate(items)
        got = await asyncio.gather(*(store.get(k) for k in items))
        assert dict(zip(items, got, strict=True)) == items
        missing = await asyncio.gather(*(store.get(f"c/missing/{i}") for i in range(50)))
        assert missing == [None] * 50

    async def test_close_and_reuse(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"k": b"v"})
        assert await store.get("k") == b"v"
        await store.close()
        assert await store.get("k") == b"v"
        await store.close()
        await store.close()  # idempotent
        async with store as s:
            assert await s.get("k") == b"v"
        assert await store.get("k") == b"v"
        await store.close()

    def test_used_from_two_event_loops(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"loop/k": b"v1"})

        async def read(close: bool) -> bytes | None:
            try:
                return await store.get("loop/k")
            finally:
                if close:
                    await store.close()

        assert asyncio.run(read(close=False)) == b"v1"  # the loop's shutdown must clean up
        assert asyncio.run(read(close=True)) == b"v1"
        gc.collect()

    def test_used_from_two_threads_at_once(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({f"t/{i}": bytes([i]) for i in range(20)})

        async def work() -> list[bytes | None]:
            try:
                return await asyncio.gather(*(store.get(f"t/{i}") for i in range(20)))
            finally:
                await store.close()

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda _: asyncio.run(work()), [1, 2]))
        assert results == [[bytes([i]) for i in range(20)]] * 2

    async def test_pickle_roundtrip(self, populate: Callable[[dict[str, bytes]], Store]) -> None:
        store = populate({"p/k": b"pickled"})
        assert await store.get("p/k") == b"pickled"
        clone = pickle.loads(pickle.dumps(store))
        assert type(clone) is type(store)
        assert clone.url == store.url
        assert await clone.get("p/k") == b"pickled"
        await clone.close()
        await store.close()
