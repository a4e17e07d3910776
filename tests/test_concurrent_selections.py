"""Concurrent reads of one array, some cancelled part-way, and concurrent writes, against NumPy.

`test_selection.py` checks each selection kind alone. Here several reads of one array run at
once on one event loop, as a service's requests do, through what they share: collapsed reads
(one fetch and decode of a chunk, or a whole shard, for every read waiting for it;
``azarr.scheduler._shared``), and optionally a decoded-chunk cache. The store is a memory
store read like a remote one (the async path) whose every read yields to the loop a number of
times drawn per key, so reads overlap in many orders. Some reads are cancelled after a drawn
number of loop iterations: a cancelled leader's followers must read again, never hang or get
another read's data. Then one write of the whole array through the same handle, and the reads
again: none may see a chunk the write replaced (cached or in flight). And tasks writing
disjoint elements of the same chunks and shards at once (mask and coordinate selections):
none may lose another's elements (per-key serialisation and conditional read-modify-writes).

Arrays are drawn as in `test_selection.py`: Zarr v2, v3 and v3 sharded, edge chunks and
shards, C/F order, compressed or not.
"""

from __future__ import annotations

import asyncio
import math
import zlib
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import azarr
from azarr.scheduler import ChunkCache
from azarr.storage import ByteRange, Generation, MemoryStore
from tests.test_selection import (
    KINDS,
    MEMORY_EXAMPLES,
    Spec,
    assert_same,
    make_array,
    np_get,
    property_settings,
    selections,
    specs,
)

#: A read that does not finish in this many seconds has hung (a follower left waiting).
HANG_SECONDS = 30


class InterleavingStore(MemoryStore):
    """A memory store read like a remote one, whose reads first yield to the event loop
    ``crc32(key) + salt`` modulo ``spread`` times (0 when ``spread`` is 1)."""

    is_local = False  # the async path, collapsed reads and generations, as a remote store
    supports_blocking_io = False

    def __init__(self, salt: int, spread: int) -> None:
        super().__init__()
        self.salt, self.spread = salt, spread

    async def _pause(self, key: str) -> None:
        for _ in range((zlib.crc32(key.encode()) + self.salt) % self.spread):
            await asyncio.sleep(0)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        await self._pause(key)
        return await super()._get(key, byte_range)

    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        await self._pause(key)
        return await super()._get_with_generation(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        await self._pause(key)
        return await super()._get_range_with_generation(key, byte_range)

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        await self._pause(key)
        return await super()._get_if_match(key, byte_range, generation)


Read = tuple[str, Any]
"""A selection kind and a selection of it."""


@st.composite
def cases(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(specs(max_cells=400, max_chunks=60, min_ndim=1))
    reads: list[Read] = []
    for _ in range(draw(st.integers(2, 6), label="reads")):
        kind = draw(st.sampled_from(KINDS), label="kind")
        reads.append((kind, draw(selections(kind, spec), label="selection")))
    return {
        "spec": spec,
        "reads": reads,
        "salt": draw(st.integers(0, 1000), label="salt"),
        "spread": draw(st.sampled_from([1, 2, 5, 13]), label="spread"),
        # None: no decoded-chunk cache; else its size in chunks (small ones evict) and recheck
        "cache": draw(st.one_of(st.none(), st.tuples(st.sampled_from([1, 4, 1000]), st.booleans()))),
        "cancel": draw(st.sets(st.integers(0, 5), max_size=3), label="cancelled reads"),
        "cancel_after": draw(st.integers(0, 20), label="loop iterations before cancelling"),
    }


async def read_concurrently(
    arr: Any, spec: Spec, reads: list[Read], model: np.ndarray, cancel: set[int], after: int
) -> None:
    tasks = [asyncio.ensure_future(getattr(arr, f"get_{kind}_selection")(sel)) for kind, sel in reads]
    for _ in range(after):
        await asyncio.sleep(0)
    for i in cancel:
        if i < len(tasks):
            tasks[i].cancel()
    done = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), HANG_SECONDS)
    for i, ((kind, sel), result) in enumerate(zip(reads, done, strict=True)):
        if isinstance(result, asyncio.CancelledError) and i in cancel:
            continue  # cancelled before it finished; a read that finished first is checked
        if isinstance(result, BaseException):
            raise result
        assert_same(result, np_get(kind, model, sel, spec.chunks), f"read {i}: {kind} {sel!r} of {reads!r}")


async def check(case: dict[str, Any]) -> None:
    spec: Spec = case["spec"]
    store = InterleavingStore(case["salt"], case["spread"])
    await make_array(spec, store, "a")
    cache = None
    if case["cache"] is not None:
        chunks, recheck = case["cache"]
        nbytes = math.prod(spec.chunks) * spec.stored_dtype.itemsize
        cache = ChunkCache(chunks * nbytes, recheck_cached_data=recheck)
    arr = await azarr.open_array(store, path="a", cache=cache)
    model = spec.model()
    await read_concurrently(arr, spec, case["reads"], model, case["cancel"], case["cancel_after"])
    # Every chunk replaced by one write through this handle: no read may see the old ones.
    model = (np.arange(model.size) % 9000 + 20000).reshape(model.shape).astype(model.dtype)
    await arr.set_basic_selection(..., model)
    await read_concurrently(arr, spec, case["reads"], model, set(), 0)


@property_settings(max(MEMORY_EXAMPLES // 2, 20))
@given(case=cases())
def test_concurrent_and_cancelled_reads_match_numpy(case: dict[str, Any]) -> None:
    """Every read not cancelled returns NumPy's result, before and after a write."""
    asyncio.run(check(case))


@st.composite
def write_cases(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(specs(max_cells=400, max_chunks=60, min_ndim=1))
    writers = draw(st.integers(2, 6), label="writers")
    # Each element goes to one writer or to none: disjoint selections, so every order of the
    # writes gives one result.
    owner = draw(
        st.lists(
            st.integers(-1, writers - 1), min_size=math.prod(spec.shape), max_size=math.prod(spec.shape)
        ),
        label="owners",
    )
    return {
        "spec": spec,
        "owner": np.array(owner, dtype=np.intp).reshape(spec.shape),
        "writers": writers,
        "kinds": [draw(st.sampled_from(["mask", "coordinate"]), label="kind") for _ in range(writers)],
        "salt": draw(st.integers(0, 1000), label="salt"),
        "spread": draw(st.sampled_from([1, 2, 5, 13]), label="spread"),
    }


async def check_writes(case: dict[str, Any]) -> None:
    spec: Spec = case["spec"]
    store = InterleavingStore(case["salt"], case["spread"])
    arr = await make_array(spec, store, "a")
    expected = spec.model()
    owner: np.ndarray = case["owner"]
    writes = []
    for w, kind in enumerate(case["kinds"]):
        mask = owner == w
        value = np.asarray(20 + w).astype(expected.dtype)  # fits every drawn dtype, int8 included
        expected[mask] = value
        if kind == "mask":
            writes.append(arr.set_mask_selection(mask, value))
        else:
            writes.append(arr.set_coordinate_selection(np.nonzero(mask), value))
    await asyncio.wait_for(asyncio.gather(*writes), HANG_SECONDS)
    assert_same(await arr.get_basic_selection(...), expected, f"after {len(writes)} concurrent writes")


@property_settings(max(MEMORY_EXAMPLES // 2, 20))
@given(case=write_cases())
def test_concurrent_disjoint_writes_lose_nothing(case: dict[str, Any]) -> None:
    """Tasks of one process writing disjoint elements of the same chunks (and shards) at
    once: every element holds its writer's value afterwards, the others are unchanged."""
    asyncio.run(check_writes(case))
