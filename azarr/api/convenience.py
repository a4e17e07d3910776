"""NumPy in, NumPy out: ``save``/``load``/``save_array``/``save_group``, ``open_like`` and ``tree``.

The async counterparts of zarr-python 2's ``zarr.convenience`` functions of
the same names, with the same arguments and naming rules (positional arrays
of ``save_group`` are stored as ``arr_0``, ``arr_1``... as NumPy's
``savez`` names them).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from azarr.api.creation import _like_kwargs, array, resolve_store
from azarr.api.opening import open, open_array, open_group
from azarr.core._formats import format_argument
from azarr.core._reports import TreeReport, tree_report
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.storage import StoreLike


async def save_array(
    store: StoreLike,
    arr: Any,
    *,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_version: int | None = None,
    **kwargs: Any,
) -> AsyncArray:
    """Store ``arr`` as an array at ``path``, replacing what is there (zarr-python 2 ``save_array``).

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
    arr : array-like
        NumPy data, or a chunked source (AsyncArray, h5py dataset: streamed).
    zarr_format : {None, 2, 3}, optional
        The format written (zarr-python 3's keyword); default ``azarr.config`` ``zarr_format`` (2).
    path : str, optional
    zarr_version : {None, 2, 3}
        zarr-python 2's name of ``zarr_format``.
    **kwargs
        Creation arguments as `azarr.create` (``chunks=``, ``compressor=``...).

    Returns
    -------
    AsyncArray
        The new array (zarr-python 2 returns nothing).
    """
    return await array(
        arr,
        store=resolve_store(store, storage_options),
        path=path,
        overwrite=True,
        zarr_format=format_argument(zarr_format, zarr_version),
        **kwargs,
    )


async def save_group(
    store: StoreLike,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_version: int | None = None,
    **kwargs: Any,
) -> AsyncGroup:
    """Store several arrays in a new group at ``path`` (zarr-python 2 ``save_group``).

    Positional arrays are named ``arr_0``, ``arr_1``...; keyword arrays keep
    their keyword. Whatever was at ``path`` is replaced. ``zarr_format`` (2 or 3,
    zarr-python 3's keyword; default ``azarr.config`` ``zarr_format``) is the group's
    and its arrays' format; ``zarr_version`` is zarr-python 2's name for it, not an array
    to save.

    Raises
    ------
    ValueError
        No array given.
    """
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    the_store = resolve_store(store, storage_options)
    group = await open_group(
        the_store, mode="w", path=path, zarr_format=format_argument(zarr_format, zarr_version)
    )
    named = {f"arr_{i}": value for i, value in enumerate(args)} | kwargs
    for name, value in named.items():
        await group.create_dataset(name, data=value, overwrite=True)
    return group


async def save(
    store: StoreLike,
    *args: Any,
    zarr_format: int | None = None,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_version: int | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """One array with `save_array`, several with `save_group` (zarr-python 2 ``save``;
    ``zarr_format`` as zarr-python 3's).

    Raises
    ------
    ValueError
        No array given.
    """
    if not args and not kwargs:
        raise ValueError("at least one array must be provided")
    options: dict[str, Any] = {
        "path": path,
        "storage_options": storage_options,
        "zarr_format": format_argument(zarr_format, zarr_version),
    }
    if len(args) == 1 and not kwargs:
        return await save_array(store, args[0], **options)
    return await save_group(store, *args, **options, **kwargs)


async def load(
    store: StoreLike,
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_version: int | None = None,
) -> np.ndarray[Any, Any] | dict[str, np.ndarray[Any, Any]]:
    """Read what `save` stored: an array's values, or a group's arrays by name (zarr-python 2 ``load``).

    zarr-python 2 returns a ``LazyLoader`` for a group, reading each array
    when indexed; with coroutines the reads happen here, so this returns a
    plain dict of the group's direct member arrays (sub-groups are left out).

    Raises
    ------
    GroupNotFoundError
        Nothing at ``path``.
    """
    node = await open(store, mode="r", path=path, storage_options=storage_options, zarr_version=zarr_version)
    if isinstance(node, AsyncArray):
        values: np.ndarray[Any, Any] = np.asarray(await node.getitem(...))
        return values
    return {name: np.asarray(await member.getitem(...)) async for name, member in node.arrays()}


async def open_like(a: Any, path: StoreLike, **kwargs: Any) -> AsyncArray:
    """Open or create an array at ``path`` shaped like ``a`` (zarr-python 2 ``open_like``).

    Shape, chunks, dtype, compressor, order, filters and fill value are taken
    from ``a`` (an AsyncArray, or anything array-like) unless given; ``mode``
    and other arguments are as `azarr.open_array`.
    """
    like = _like_kwargs(a, kwargs)
    if isinstance(a, AsyncArray):
        like.setdefault("fill_value", a.fill_value)
    return await open_array(path, **like)


async def tree(grp: Any, expand: bool = False, level: int | None = None) -> TreeReport:
    """The tree of ``grp``'s hierarchy (zarr-python 2 ``zarr.tree``; ``expand`` is for widgets and ignored).

    ``grp`` is an `AsyncGroup` or, as zarr-python 2 takes it, an h5py group or file (read in a
    worker thread: h5py blocks).

    Raises
    ------
    TypeError
        ``grp`` is neither.
    """
    if isinstance(grp, AsyncGroup):
        return await grp.tree(expand, level)
    if type(grp).__module__.startswith("h5py") and hasattr(grp, "visititems"):
        return await asyncio.to_thread(_h5py_tree, grp, level)
    raise TypeError(f"tree needs a group (an azarr.AsyncGroup or an h5py group), got {type(grp).__name__}")


def _h5py_tree(group: Any, level: int | None) -> TreeReport:
    def members(node: Any, depth: int | None) -> list[Any]:
        if depth is not None and depth <= 0:
            return []
        entries = []
        for name in sorted(node):
            child = node[name]
            below = [] if hasattr(child, "shape") else members(child, None if depth is None else depth - 1)
            entries.append((name, child, below))
        return entries

    root = group.name.rsplit("/", 1)[-1] or "/"
    return tree_report(root, members(group, level))
