"""Groups, open modes and consolidated metadata on every store kind."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

import azarr
import azarr.sync
from azarr.errors import (
    ArrayNotFoundError,
    ConsolidatedMetadataNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    NodeNotFoundError,
    ReadOnlyError,
)
from azarr.scheduler import set_budget
from azarr.storage import MemoryStore, Store
from tests.util import RecordingStore


def reopen(store: Store) -> Store:
    return pickle.loads(pickle.dumps(store))


async def test_hierarchy_ancestors_members_and_tree(store: Store) -> None:
    root = await azarr.group(store)
    await root.attrs.update(title="root")
    await root.create_group("foo")
    bar = await root.create_group("bar")
    await bar.create_group("baz")
    quux = await bar.require_group("quux")
    await quux.zeros("baz", shape=(100,), chunks=10)
    # A deep array creates its ancestors as groups, as the spec requires.
    await root.create_dataset("x/y/z", shape=(2, 3), dtype="i2")
    assert await store.exists("x/.zgroup") and await store.exists("x/y/.zgroup")

    fresh = await azarr.open_group(reopen(store), mode="r")
    assert fresh.attrs["title"] == "root"
    assert [k async for k in fresh.group_keys()] == ["bar", "foo", "x"]
    assert [k async for k in fresh.array_keys()] == []
    assert [k async for k in (await fresh.get("bar/quux")).array_keys()] == ["baz"]  # type: ignore[union-attr]
    node = await fresh.get("bar/quux/baz")
    assert isinstance(node, azarr.AsyncArray) and node.shape == (100,) and node.read_only
    assert await fresh.contains("x/y/z") and not await fresh.contains("nope")
    with pytest.raises(NodeNotFoundError, match="nope"):
        await fresh.get("nope")
    members = [(name, type(n).__name__) async for name, n in fresh.members()]
    assert members == [("bar", "AsyncGroup"), ("foo", "AsyncGroup"), ("x", "AsyncGroup")]
    assert await fresh.tree() == "\n".join(
        [
            "/",
            " ├── bar",
            " │   ├── baz",
            " │   └── quux",
            " │       └── baz (100,) float64",
            " ├── foo",
            " └── x",
            "     └── y",
            "         └── z (2, 3) int16",
        ]
    )
    assert await fresh.tree(level=0) == "/"
    assert await fresh.tree(level=1) == "\n".join(["/", " ├── bar", " ├── foo", " └── x"])
    assert await fresh.tree(level=2) == "\n".join(
        ["/", " ├── bar", " │   ├── baz", " │   └── quux", " ├── foo", " └── x", "     └── y"]
    )
    with pytest.raises(ReadOnlyError):
        await fresh.create_group("new")


async def test_require_dataset_and_creation_errors(store: Store) -> None:
    root = await azarr.group(store)
    a = await root.require_dataset("a", shape=(4,), dtype="f4")
    again = await root.require_dataset("a", shape=(4,), dtype="f4")
    assert again.path == a.path == "a"
    with pytest.raises(TypeError, match="shape"):
        await root.require_dataset("a", shape=(5,), dtype="f4")
    with pytest.raises(TypeError, match="dtype"):
        await root.require_dataset("a", shape=(4,), dtype="f8", exact=True)
    with pytest.raises(ContainsArrayError):
        await root.create_dataset("a", shape=(4,))
    with pytest.raises(ContainsArrayError):
        await root.require_group("a")
    with pytest.raises(ContainsArrayError, match="ancestor 'a'"):
        await root.create_group("a/inside")
    await root.create_group("g")
    with pytest.raises(ContainsGroupError):
        await root.create_group("g")
    replaced = await root.create_dataset("g", shape=(2,), overwrite=True)
    assert replaced.shape == (2,)
    filled = await root.full("f", fill_value=2.5, shape=(3,))
    np.testing.assert_array_equal(await filled.get_basic_selection(), [2.5] * 3)
    arr = await root.array("d", np.arange(5))
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.arange(5))


async def test_open_modes(store: Store) -> None:
    with pytest.raises(ArrayNotFoundError):
        await azarr.open_array(store, mode="r")
    with pytest.raises(GroupNotFoundError):
        await azarr.open_group(store, mode="r+")
    with pytest.raises(TypeError, match="shape"):
        await azarr.open_array(store, mode="a")
    arr = await azarr.open_array(store, mode="a", shape=(5,), chunks=2, dtype="i4", path="arr")
    await arr.set_basic_selection(..., np.arange(5))
    with pytest.raises(ContainsArrayError):
        await azarr.open_array(store, mode="w-", shape=(5,), path="arr")
    opened = await azarr.open(store, mode="r", path="arr")
    assert isinstance(opened, azarr.AsyncArray)
    np.testing.assert_array_equal(await opened.get_basic_selection(), np.arange(5))
    with pytest.raises(ContainsArrayError):
        await azarr.open_group(store, mode="a", path="arr")
    assert isinstance(await azarr.open(store, mode="r"), azarr.AsyncGroup)  # implicit root group
    with pytest.raises(ContainsGroupError):
        await azarr.open_array(store, mode="r")
    overwritten = await azarr.open_array(store, mode="w", shape=(2,), dtype="u1", path="arr")
    np.testing.assert_array_equal(await overwritten.get_basic_selection(), [0, 0])
    assert await overwritten.nchunks_initialized() == 0  # old chunks are gone
    with pytest.raises(FileNotFoundError):
        await azarr.open(store, mode="r", path="missing")
    assert isinstance(await azarr.open(store, mode="a", path="new/group"), azarr.AsyncGroup)
    with pytest.raises(ValueError, match="mode"):
        await azarr.open(store, mode="rw")


async def test_urls_and_paths_open_the_right_store(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "data.zarr"
    arr = await azarr.zeros((3,), store=str(target), path="a", dtype="u2")
    await arr.set_basic_selection(..., 7)
    assert (target / "a" / ".zarray").exists() and (target / ".zgroup").exists()
    again = await azarr.open_array(f"file://{target}", mode="r", path="a")
    np.testing.assert_array_equal(await again.get_basic_selection(), [7, 7, 7])
    mapping: dict[str, bytes] = {}
    await azarr.zeros(2, store=mapping)
    assert ".zarray" in mapping


async def test_consolidated_open_uses_one_read(store: Store) -> None:
    root = await azarr.group(store)
    await root.attrs.update(title="c")
    for i in range(5):
        g = await root.create_group(f"g{i}")
        arr = await g.array("data", np.arange(10) * i, chunks=4)
        await arr.attrs.update(index=i)
    consolidated = await azarr.consolidate_metadata(store)
    assert isinstance(consolidated, azarr.AsyncGroup)
    document = json.loads(await store.get(".zmetadata") or b"")
    assert document["zarr_consolidated_format"] == 1
    assert document["metadata"]["g3/data/.zattrs"] == {"index": 3}
    assert ".zgroup" in document["metadata"] and ".zattrs" in document["metadata"]

    recording = RecordingStore(reopen(store))
    opened = await azarr.open_consolidated(recording, mode="r")
    # One round trip: .zmetadata and a v3 root's zarr.json (inline consolidated) read together.
    one_read = {".zmetadata": 1, "zarr.json": 1}
    assert dict(recording.gets) == one_read
    assert isinstance(opened, azarr.AsyncGroup)
    assert [k async for k in opened.group_keys()] == [f"g{i}" for i in range(5)]
    arr = await opened.get("g4/data")
    assert isinstance(arr, azarr.AsyncArray) and arr.attrs["index"] == 4
    assert dict(recording.gets) == one_read and recording.lists == 0  # structure came from .zmetadata
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.arange(10) * 4)
    with pytest.raises(ReadOnlyError):
        await arr.attrs.update(x=1)
    with pytest.raises(ReadOnlyError):
        await arr.set_basic_selection(0, 1)
    writable = await azarr.open_consolidated(reopen(store), mode="r+")
    data_arr = await writable.get("g1/data")  # type: ignore[union-attr]
    await data_arr.set_basic_selection(0, 99)  # chunk data stays writable in r+
    with pytest.raises(ReadOnlyError, match="consolidated"):
        await writable.create_group("new")  # type: ignore[union-attr]
    with pytest.raises(ConsolidatedMetadataNotFoundError):
        await azarr.open_consolidated(MemoryStore())


@pytest.mark.parametrize("zarr_format", [2, 3])
async def test_open_consolidated_with_a_path_inside_the_root_s_hierarchy(zarr_format: int) -> None:
    # zarr-python 2 reads .zmetadata at the store's root and opens `path` from it; this raised
    # ConsolidatedMetadataNotFoundError (only "a/.zmetadata" was looked for).
    store = MemoryStore()
    root = await azarr.group(store, zarr_format=zarr_format)
    sub = await root.create_group("a/b")
    await sub.attrs.update(k=1)
    arr = await sub.array("x", np.arange(4), chunks=2)
    await azarr.consolidate_metadata(store)
    recording = RecordingStore(store)
    group = await azarr.open_consolidated(recording, path="a", mode="r")
    assert isinstance(group, azarr.AsyncGroup) and [k async for k in group.group_keys()] == ["b"]
    assert (await group.get("b")).attrs["k"] == 1
    array = await azarr.open_consolidated(store, path="a/b/x", mode="r")
    assert isinstance(array, azarr.AsyncArray)
    np.testing.assert_array_equal(await array.getitem(...), await arr.getitem(...))
    with pytest.raises(ConsolidatedMetadataNotFoundError):
        await azarr.open_consolidated(store, path="a/nothing", mode="r")  # not in the root's listing
    sync_group = azarr.sync.open_consolidated(store, path="a", mode="r")
    assert list(sync_group.group_keys()) == ["b"]


async def test_consolidated_nodes_use_decoded_documents_and_own_their_attributes() -> None:
    """Nodes opened from ``.zmetadata`` take its decoded documents (no JSON round trip), yet
    what a caller does to one node's attributes never reaches the overlay or another node."""
    store = MemoryStore()
    root = await azarr.group(store)
    arr = await root.create_dataset("x", shape=(6,), chunks=(4,), dtype="<i2", fill_value=3)
    await arr.attrs.update(nested={"k": [1, 2]})
    await azarr.consolidate_metadata(store)
    opened = await azarr.open_consolidated(store)
    overlay = opened.store
    assert overlay.get_document("x/.zarray")["fill_value"] == 3  # type: ignore[attr-defined]
    first = await opened.get("x")
    assert isinstance(first, azarr.AsyncArray)
    assert first.metadata == arr.metadata and first.fill_value == 3
    first.attrs["nested"]["k"].append(99)  # a caller mutating what it was given
    second = await opened.get("x")
    assert second.attrs["nested"] == {"k": [1, 2]}  # type: ignore[union-attr]
    np.testing.assert_array_equal(await second.get_basic_selection(), [3] * 6)  # type: ignore[union-attr]


async def test_members_max_depth_walks_the_subtree_with_sibling_groups_in_parallel() -> None:
    """zarr-python 3 ``members(max_depth=...)``: relative paths, sorted; sibling subtrees overlap."""

    class ListingStore(MemoryStore):
        in_flight = peak = 0

        async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
            ListingStore.in_flight += 1
            ListingStore.peak = max(ListingStore.peak, ListingStore.in_flight)
            await asyncio.sleep(0.01)
            ListingStore.in_flight -= 1
            async for name in super()._list_dir(prefix):
                yield name

    store = ListingStore()
    root = await azarr.group(store)
    for g in ("g0", "g1", "g2"):
        sub = await root.create_group(g)
        await sub.zeros("a", shape=(2,), chunks=2)
        await (await sub.create_group("deep")).zeros("b", shape=(3,), chunks=3)
    opened = await azarr.open_group(store, mode="r")

    direct = [name async for name, _ in opened.members()]
    assert direct == ["g0", "g1", "g2"]
    one_level = [name async for name, _ in opened.members(max_depth=1)]
    assert one_level == ["g0", "g0/a", "g0/deep", "g1", "g1/a", "g1/deep", "g2", "g2/a", "g2/deep"]
    ListingStore.peak = 0
    everything = {name: node async for name, node in opened.members(max_depth=None)}
    assert sorted(everything) == sorted([*one_level, "g0/deep/b", "g1/deep/b", "g2/deep/b"])
    b = everything["g1/deep/b"]
    assert isinstance(b, azarr.AsyncArray) and b.shape == (3,) and b.path == "g1/deep/b"
    assert ListingStore.peak >= 3  # the three groups were listed at the same time
    with pytest.raises(ValueError, match="max_depth"):
        [_ async for _ in opened.members(max_depth=-1)]


async def test_walking_a_hierarchy_costs_round_trips_per_level_not_per_member() -> None:
    """200 arrays behind a 30 ms store: each level is one concurrent wave of reads."""

    class SlowStore(RecordingStore):
        in_flight = peak = 0

        async def _get(self, key: str, byte_range: Any) -> bytes | None:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                await asyncio.sleep(0.03)
            finally:
                self.in_flight -= 1
            return await super()._get(key, byte_range)

        async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
            await asyncio.sleep(0.03)
            async for name in super()._list_dir(prefix):
                yield name

    inner = MemoryStore()
    root = await azarr.group(inner)
    for g in ("a", "b"):
        sub = await root.create_group(g)
        for i in range(100):
            await sub.zeros(f"x{i:03d}", shape=(2,), chunks=2)
    slow = SlowStore(inner)
    set_budget(slow, max_requests=64)  # a remote store's budget, whatever the config says
    opened = await azarr.open_group(slow, mode="r")
    slow.reset()
    text = await opened.tree()
    assert text.count("(2,) float64") == 200
    # One by one this is 400+ sequential requests; in waves, each level's members are read at
    # once (the peak in flight, not a wall-clock bound, so a loaded host cannot fail it).
    assert slow.peak >= 32, f"only {slow.peak} reads in flight"
    array_reads = [k for k in slow.gets if "/x" in k]
    assert len(array_reads) == 400 and all(n == 1 for n in slow.gets.values())  # .zarray + .zattrs, once each


async def test_opening_an_array_is_one_round_trip() -> None:
    inner = MemoryStore()
    await azarr.zeros(4, store=inner, path="a/b")
    recording = RecordingStore(inner)
    await azarr.open_array(recording, mode="r", path="a/b")
    # Read together (either format's documents), no existence checks.
    assert dict(recording.gets) == {"a/b/.zarray": 1, "a/b/.zattrs": 1, "a/b/zarr.json": 1}
