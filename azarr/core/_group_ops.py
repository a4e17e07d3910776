"""The logic behind ``AsyncGroup``'s zarr-python 2 extras: visiting, ``info`` and ``move``."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from azarr.core._formats import node_kind_and_format
from azarr.core._hierarchy import node_kind, require_parent_groups
from azarr.core._paths import join_path
from azarr.errors import ContainsArrayError, ContainsGroupError, PathNotFoundError
from azarr.scheduler import StoreIO

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray
    from azarr.core.group import AsyncGroup

Visitor = Callable[..., Any]


async def visit_nodes(group: AsyncGroup, func: Visitor, *, with_path: bool, with_node: bool) -> Any:
    """Call ``func`` on every node below ``group``, depth first, members sorted by name.

    zarr-python 2 ``Group.visitvalues``/``visit``/``visititems``: the order is
    pre-order (a group, then its members, then its next sibling), and the first
    value other than None that ``func`` returns stops the walk and is returned.
    ``func`` may be a plain function or a coroutine function. The tree is opened
    level by level in concurrent waves before the first call (one walk, as
    `AsyncGroup.members` does), so an early stop saves calls, not requests.
    """
    from azarr.core.group import _flatten

    for path, node in _flatten(await group._subtree(None)):
        args: tuple[Any, ...] = ()
        if with_path:
            args += (path,)
        if with_node:
            args += (node,)
        result = func(*args)
        if inspect.isawaitable(result):
            result = await result
        if result is not None:
            return result
    return None


async def move_node(group: AsyncGroup, source: str, dest: str) -> None:
    """Move the node at ``source`` to ``dest``, both relative to ``group`` (zarr-python 2 ``Group.move``).

    Raises
    ------
    PathNotFoundError
        Nothing at ``source`` (a ``KeyError`` and, as in zarr-python 2, a ``ValueError``).
    ContainsArrayError, ContainsGroupError
        A node exists at ``dest``.
    ValueError
        ``dest`` lies inside ``source``.
    """
    from azarr.api.storage_ops import rename

    store = group.store
    io = StoreIO(store)
    src, dst = join_path(group.path, source), join_path(group.path, dest)
    if dst == src or dst.startswith(src + "/"):  # before anything is written (the parents of dst)
        raise ValueError(f"cannot move {source!r} to {dest!r}, which is inside it (group {group.name!r})")
    found, zarr_format = await node_kind_and_format(io, src)
    if found is None:
        raise PathNotFoundError(f"the source, {source!r}, does not exist in group {group.name!r}")
    kind = await node_kind(io, dst)
    if kind == "array":
        raise ContainsArrayError(f"the dest, {dest!r}, already exists in group {group.name!r} (an array)")
    if kind == "group":
        raise ContainsGroupError(f"the dest, {dest!r}, already exists in group {group.name!r} (a group)")
    # The destination's missing parents in the moved node's format (a hierarchy holds one).
    await require_parent_groups(io, dst, overwrite=False, zarr_format=zarr_format or 2)
    await rename(store, src, dst)


async def like_array(group: AsyncGroup, kind: str, name: str, data: Any, **kwargs: Any) -> AsyncArray:
    """``group.zeros_like(name, data)`` & co: `azarr.zeros_like` & co with the group's store and path."""
    from azarr.api import creation

    group._check_writable()
    make = getattr(creation, f"{kind}_like")
    kwargs.setdefault("allow_pickle", group._allow_pickle)
    array: AsyncArray = await make(data, store=group.store, path=join_path(group.path, name), **kwargs)
    return array
