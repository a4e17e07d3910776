"""Hierarchy operations against a model, Zarr v2 and v3.

A drawn sequence of ``create_group``, ``require_group``, ``create_dataset``, ``delitem`` and
``move`` on paths of up to three levels (so nodes land under arrays, inside what moves, on
what exists) runs on a fresh root group. The model says which succeed (zarr-python 2's
rules: nothing is created under an array, over an existing node, or by moving a node into
itself) and what the hierarchy then holds; after every operation ``members(max_depth=None)``
must list exactly the model's nodes, so a failed operation must leave nothing behind.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import azarr
from azarr.errors import AzarrError
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
