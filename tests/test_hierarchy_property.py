"""Hierarchy operations against a model, and consolidated metadata and copies against the
hierarchy, Zarr v2 and v3.

A drawn sequence of ``create_group``, ``require_group``, ``create_dataset``, ``delitem`` and
``move`` on paths of up to three levels (so nodes land under arrays, inside what moves, on
what exists) runs on a fresh root group. The model says which succeed (zarr-python 2's
rules: nothing is created under an array, over an existing node, or by moving a node into
itself) and what the hierarchy then holds; after every operation ``members(max_depth=None)``
must list exactly the model's nodes, so a failed operation must leave nothing behind.

A drawn hierarchy (groups and arrays with attributes and data) must list the same nodes,
attributes and data opened plainly, through its consolidated metadata (from the root, and
from a group inside it as zarr-python 2 opens one), and after `copy_store`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import azarr
from azarr.errors import AzarrError, ContainsArrayError, ContainsGroupError
from azarr.storage import MemoryStore
from tests.test_selection import MEMORY_EXAMPLES, property_settings

PATHS = st.lists(st.sampled_from("abc"), min_size=1, max_size=3).map("/".join)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["create_group", "require_group", "create_dataset", "delitem"]), PATHS),
        st.tuples(st.just("move"), PATHS, PATHS),
    ),
    min_size=1,
    max_size=8,
)


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class Model:
    """The hierarchy's nodes by path ("group" or "array"), and which operations succeed."""

    def __init__(self) -> None:
        self.nodes: dict[str, str] = {}

    def _under_array(self, path: str) -> bool:
        return any(self.nodes.get(a) == "array" for a in _ancestors(path))

    def _add(self, path: str, kind: str) -> None:
        for ancestor in _ancestors(path):
            self.nodes.setdefault(ancestor, "group")
        self.nodes[path] = kind

    def apply(self, operation: tuple[str, ...]) -> bool:
        """Whether ``operation`` succeeds; if it does, the nodes after it."""
        name, path = operation[0], operation[1]
        if name in ("create_group", "create_dataset"):
            if path in self.nodes or self._under_array(path):
                return False
            self._add(path, "array" if name == "create_dataset" else "group")
        elif name == "require_group":
            if self.nodes.get(path) == "array" or self._under_array(path):
                return False
            self._add(path, "group")
        elif name == "delitem":
            if path not in self.nodes:
                return False
            self.nodes = {k: v for k, v in self.nodes.items() if k != path and not k.startswith(path + "/")}
        else:
            dest = operation[2]
            inside = dest == path or dest.startswith(path + "/")
            if path not in self.nodes or dest in self.nodes or inside or self._under_array(dest):
                return False
            moved = {k: v for k, v in self.nodes.items() if k == path or k.startswith(path + "/")}
            self.nodes = {k: v for k, v in self.nodes.items() if k not in moved}
            for ancestor in _ancestors(dest):
                self.nodes.setdefault(ancestor, "group")
            self.nodes.update({dest + k[len(path) :]: v for k, v in moved.items()})
        return True


async def _run(root: Any, operation: tuple[str, ...]) -> bool:
    name, path = operation[0], operation[1]
    try:
        if name == "create_dataset":
            await root.create_dataset(path, shape=(2,), chunks=(1,), dtype="i4")
        elif name == "move":
            await root.move(path, operation[2])
        else:
            await getattr(root, name)(path)
    except (AzarrError, KeyError, ValueError):
        return False
    return True


async def check(operations: list[tuple[str, ...]], zarr_format: int) -> None:
    root = await azarr.group(store=MemoryStore(), zarr_format=zarr_format)
    model = Model()
    for i, operation in enumerate(operations):
        expected = model.apply(operation)
        assert await _run(root, operation) == expected, f"step {i} {operation} of {operations}"
        listed = {
            name: "array" if isinstance(node, azarr.AsyncArray) else "group"
            async for name, node in root.members(max_depth=None)
        }
        assert listed == model.nodes, f"after step {i} {operation} of {operations}"


@property_settings(MEMORY_EXAMPLES * 2)
@given(operations=OPERATIONS, zarr_format=st.sampled_from([2, 3]))
def test_hierarchy_operations_match_the_model(operations: list[tuple[str, ...]], zarr_format: int) -> None:
    asyncio.run(check(operations, zarr_format))


async def _listing(group: Any) -> dict[str, Any]:
    """Every node below ``group``: kind, attributes, and an array's shape, chunks and data."""
    nodes: dict[str, Any] = {}
    async for name, node in group.members(max_depth=None):
        if isinstance(node, azarr.AsyncArray):
            data = (await node.getitem(...)).tolist()
            nodes[name] = ("array", node.shape, node.chunks, node.attrs.asdict(), data)
        else:
            nodes[name] = ("group", node.attrs.asdict())
    return nodes


async def check_consolidated(nodes: list[tuple[str, str, dict[str, int]]], zarr_format: int) -> None:
    store = MemoryStore()
    root = await azarr.group(store=store, zarr_format=zarr_format)
    for kind, path, attrs in nodes:
        try:
            if kind == "group":
                node = await root.require_group(path)
            else:
                node = await root.create_dataset(path, shape=(3,), chunks=(2,), dtype="i4")
                await node.set_basic_selection(..., np.arange(3, dtype="i4") + len(path))
        except (ContainsArrayError, ContainsGroupError):
            continue  # a node under an array, or an array over a group
        await node.attrs.update(attrs)
    plain = await _listing(await azarr.open_group(store, mode="r"))
    await azarr.consolidate_metadata(store)
    assert await _listing(await azarr.open_consolidated(store, mode="r")) == plain
    if plain.get("a", ("array",))[0] == "group":
        inside = await _listing(await azarr.open_group(store, path="a", mode="r"))
        assert await _listing(await azarr.open_consolidated(store, path="a", mode="r")) == inside
    copy = MemoryStore()
    await azarr.copy_store(store, copy)
    assert await _listing(await azarr.open_group(copy, mode="r")) == plain


NODES = st.lists(
    st.tuples(
        st.sampled_from(["group", "array"]),
        PATHS,
        st.dictionaries(st.sampled_from("kv"), st.integers(0, 3), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@property_settings(MEMORY_EXAMPLES)
@given(nodes=NODES, zarr_format=st.sampled_from([2, 3]))
def test_consolidated_metadata_and_copies_list_the_hierarchy(
    nodes: list[tuple[str, str, dict[str, int]]], zarr_format: int
) -> None:
    asyncio.run(check_consolidated(nodes, zarr_format))
