"""save/load, open_like, tree, storage path operations, and AsyncGroup's zarr-python 2 extras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import ContainsArrayError, ContainsGroupError, NodeNotFoundError, ReadOnlyError
from azarr.storage import Store


@pytest.mark.parametrize(
    "store_factory", ["memory", "local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)
async def test_save_and_load(store_factory: Any) -> None:
    store: Store = store_factory()
    a, b = np.arange(10), np.linspace(0, 1, 6).reshape(2, 3)
    saved = await azarr.save(store, a, path="one")
    assert isinstance(saved, azarr.AsyncArray)
    assert np.array_equal(await azarr.load(store, path="one"), a)
    group = await azarr.save(store, a, b, extra=np.ones(3), path="many")
    assert isinstance(group, azarr.AsyncGroup)
    loaded = await azarr.load(store, path="many")
    assert isinstance(loaded, dict) and sorted(loaded) == ["arr_0", "arr_1", "extra"]
    assert np.array_equal(loaded["arr_1"], b)
    # saving again replaces what was there
    await azarr.save_array(store, np.zeros(2), path="one")
    assert np.array_equal(await azarr.load(store, path="one"), np.zeros(2))
    with pytest.raises(ValueError, match="at least one array"):
        await azarr.save(store)
    with pytest.raises(ValueError, match="at least one array"):
        await azarr.save_group(store)


async def test_open_like_and_tree(tmp_path: Path) -> None:
    src = await azarr.create((10, 4), chunks=(5, 2), dtype="i2", fill_value=3)
    like = await azarr.open_like(src, str(tmp_path / "like.zarr"), mode="w")
    assert (like.shape, like.chunks, like.dtype, like.fill_value) == ((10, 4), (5, 2), np.dtype("i2"), 3)
    g = await azarr.group()
    await (await g.create_group("bar")).zeros("baz", shape=(100,), chunks=(10,))
    await g.create_group("foo")
    assert await azarr.tree(g) == "/\n ├── bar\n │   └── baz (100,) float64\n └── foo"


async def test_storage_path_operations(tmp_path: Path) -> None:
    root = str(tmp_path / "s.zarr")
    g = await azarr.open_group(root, mode="w")
    arr = await g.create_dataset("x/a", data=np.arange(20, dtype="u1"), chunks=(10,), compressor=None)
    assert await azarr.contains_array(root, "x/a") and not await azarr.contains_group(root, "x/a")
    assert await azarr.contains_group(root, "x") and await azarr.contains_group(root)
    stored = sum(p.stat().st_size for p in (tmp_path / "s.zarr" / "x" / "a").iterdir())
    assert await azarr.getsize(root, "x/a") == stored  # chunks + .zarray (+ .zattrs)
    assert await azarr.getsize(root, "x/a/0") == 10
    await azarr.rename(root, "x", "y")
    assert not await azarr.contains_group(root, "x")
    moved = await azarr.open_array(root, path="y/a", mode="r")
    assert np.array_equal(await moved.getitem(...), np.arange(20, dtype="u1"))
    with pytest.raises(NodeNotFoundError):
        await azarr.rename(root, "nothing", "z")
    with pytest.raises(ValueError, match="inside it"):
        await azarr.rename(root, "y", "y/z")
    await azarr.rmdir(root, "y")
    assert not await azarr.contains_array(root, "y/a")
    assert arr.path == "x/a"


async def _tree() -> azarr.AsyncGroup:
    g = await azarr.group()
    await g.create_group("a-x")
    a = await g.create_group("a")
    await a.zeros("b", shape=(2,))
    await g.zeros("c", shape=(3,))
    return g


async def test_visit_order_and_early_stop() -> None:
    g = await _tree()
    seen: list[str] = []
    assert await g.visit(seen.append) is None
    assert seen == ["a", "a/b", "a-x", "c"]  # pre-order, names sorted (zarr-python 2)
    items: list[tuple[str, str]] = []
    await g.visititems(lambda path, node: items.append((path, type(node).__name__)))
    assert items == [("a", "AsyncGroup"), ("a/b", "AsyncArray"), ("a-x", "AsyncGroup"), ("c", "AsyncArray")]
    calls: list[str] = []

    async def find_array(node: Any) -> Any:
        calls.append(node.name)
        return node.name if isinstance(node, azarr.AsyncArray) else None

    assert await g.visitvalues(find_array) == "/a/b"
    assert calls == ["/a", "/a/b"]
    assert await g.visitkeys(lambda p: p if p.endswith("x") else None) == "a-x"


async def test_group_extras() -> None:
    g = await _tree()
    assert await g.nmembers() == 3
    info = await g.info_complete()
    assert "No. members : 3" in info and "Arrays      : c" in info and "Groups      : a, a-x" in info
    assert "Name" in g.info and "No. members" not in g.info
    made = await g.create_groups("p", "q/r")
    assert [x.name for x in made] == ["/p", "/q/r"]
    again = await g.require_groups("p", "s")
    assert [x.name for x in again] == ["/p", "/s"]
    z = await g.full_like("f", np.arange(4, dtype="i4"), fill_value=9)
    assert z.shape == (4,) and z.dtype == np.dtype("i4") and np.array_equal(await z.getitem(...), [9] * 4)
    assert (await g.ones_like("o", np.zeros((2, 2)))).fill_value == 1
    assert (await g.zeros_like("zz", np.zeros(2))).fill_value == 0
    assert (await g.empty_like("e", np.zeros(2))).fill_value is None
    await g.move("a", "moved/here")
    assert not await g.contains("a") and await g.contains("moved/here/b")
    with pytest.raises(NodeNotFoundError):
        await g.move("a", "b")
    with pytest.raises(ContainsArrayError):
        await g.move("p", "c")
    with pytest.raises(ContainsGroupError):
        await g.move("p", "s")
    # Into its own subtree: refused before anything is written (it created "p/x" first)
    before = sorted([k async for k in g.store.list_prefix("")])
    with pytest.raises(ValueError, match="inside it"):
        await g.move("p", "p/x/p")
    assert sorted([k async for k in g.store.list_prefix("")]) == before
    ro = await azarr.open_group(g.store, mode="r")
    with pytest.raises(ReadOnlyError):
        await ro.move("p", "t")


@pytest.mark.parametrize("zarr_format", [2, 3])
async def test_move_keeps_the_hierarchy_s_format(zarr_format: int) -> None:
    # Zarr v3: the destination's new parent groups were made as v2 documents, which the v3
    # root refused (a MetadataError for every move to a new parent).
    g = await azarr.group(store=azarr.MemoryStore(), zarr_format=zarr_format)
    z = await g.create_dataset("a/x", shape=(3,), chunks=(2,), dtype="i4")
    await z.set_basic_selection(..., np.arange(3, dtype="i4"))
    await g.move("a", "p/q/a")
    moved = await azarr.open_array(g.store, path="p/q/a/x", mode="r")
    assert moved.zarr_format == zarr_format and (await moved.getitem(...)).tolist() == [0, 1, 2]
    assert (await azarr.open_group(g.store, path="p", mode="r")).zarr_format == zarr_format
    assert not await g.contains("a")


async def test_group_async_context_manager(tmp_path: Path) -> None:
    async with await azarr.open_group(str(tmp_path / "g.zarr"), mode="w") as g:
        await g.zeros("a", shape=(2,))
    assert await azarr.contains_array(str(tmp_path / "g.zarr"), "a")


async def test_group_delitem() -> None:
    g = await _tree()
    await g.delitem("a")
    assert not await g.contains("a") and not await g.contains("a/b") and await g.contains("a-x")
    with pytest.raises(NodeNotFoundError):
        await g.delitem("a")
