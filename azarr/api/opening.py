"""Opening arrays and groups by mode: ``open_array``, ``open_group``, ``open``, ``group``.

Modes are zarr-python 2's: ``"r"`` read-only, must exist; ``"r+"`` read/write,
must exist; ``"a"`` read/write, create if missing; ``"w"`` create, deleting
what exists; ``"w-"`` (alias ``"x"``) create, fail if something exists.
"""

from __future__ import annotations

from typing import Any

from azarr.api.creation import create, resolve_store
from azarr.core._hierarchy import contains_group, node_kind
from azarr.core._paths import normalize_path
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import (
    ArrayNotFoundError,
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
)
from azarr.scheduler import StoreIO
from azarr.storage import Store, StoreLike

_MODES = ("r", "r+", "a", "w", "w-", "x")


async def open_managed(
    store: StoreLike | None, storage_options: dict[str, Any] | None, *, read_only: bool
) -> tuple[Store, StoreIO]:
    """The store of a store-like argument and its managed path, revalidated for this open.

    A caching store (``LRUStoreCache``, policy ``"open"``) re-fetches what it cached
    before an open, so each open sees what other writers changed.
    """
    the_store = resolve_store(store, storage_options, read_only=read_only)
    io = StoreIO(the_store)
    await io.revalidate()
    return the_store, io


def _check_mode(mode: str) -> str:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    return "w-" if mode == "x" else mode


async def open_array(
    store: StoreLike | None = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
    write_empty_chunks: bool | None = None,
    **create_kwargs: Any,
) -> AsyncArray:
    """Open an array, creating it if the mode allows (zarr-python 2 ``zarr.open_array``).

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
        The store or its URL/path (``"s3://bucket/x.zarr"``, ``"data/x.zarr"``).
    mode : {"r", "r+", "a", "w", "w-"}
        See the module docstring. Default ``"a"``.
    path : str, optional
        Array path within the store.
    storage_options : dict, optional
        fsspec options when ``store`` is a URL (``endpoint_url``, ``anon``, ...).
    allow_pickle : bool, optional
        Let pickle-based codecs decode chunks.
    write_empty_chunks : bool, optional
        Store chunks equal to ``fill_value``.
    **create_kwargs
        :func:`azarr.create` arguments (``shape``, ``chunks``, ``dtype``, ...)
        used when the array is created.

    Raises
    ------
    ArrayNotFoundError
        Modes ``r``/``r+`` and no array at ``path``.
    ContainsGroupError
        A group is at ``path``.
    ContainsArrayError
        Mode ``w-`` and an array exists.
    TypeError
        The array must be created but no ``shape`` was given.
    """
    mode = _check_mode(mode)
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    open_kwargs: dict[str, Any] = {"allow_pickle": allow_pickle, "write_empty_chunks": write_empty_chunks}
    if mode in ("r", "r+", "a"):
        # Read .zarray and .zattrs straight away: opening an existing array costs one
        # round trip (checking existence first cost a second one, measured on S3).
        try:
            return await AsyncArray.open(the_store, node_path, read_only=mode == "r", **open_kwargs)
        except ArrayNotFoundError:
            pass
        if await contains_group(io, node_path):
            raise ContainsGroupError(f"path {node_path!r} in {the_store.url} is a group, not an array")
        if mode != "a":
            raise ArrayNotFoundError(f"no array at path {node_path!r} in {the_store.url}")
    if "shape" not in create_kwargs:
        raise TypeError(f"creating array {node_path!r} in mode {mode!r} needs a shape")
    return await create(
        store=the_store, path=node_path, overwrite=mode == "w", **open_kwargs, **create_kwargs
    )


async def open_group(
    store: StoreLike | None = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
) -> AsyncGroup:
    """Open a group, creating it if the mode allows (zarr-python 2 ``zarr.open_group``).

    Raises
    ------
    GroupNotFoundError
        Modes ``r``/``r+`` and no group at ``path``.
    ContainsArrayError
        An array is at ``path``.
    ContainsGroupError
        Mode ``w-`` and a group exists.
    """
    mode = _check_mode(mode)
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    if mode in ("r", "r+", "a"):
        kind = await node_kind(io, node_path)
        if kind == "group":
            return await AsyncGroup.open(
                the_store, node_path, read_only=mode == "r", allow_pickle=allow_pickle
            )
        if kind == "array":
            raise ContainsArrayError(f"path {node_path!r} in {the_store.url} is an array, not a group")
        if mode != "a":
            raise GroupNotFoundError(f"no group at path {node_path!r} in {the_store.url}")
    try:
        return await AsyncGroup.init(the_store, node_path, overwrite=mode == "w", allow_pickle=allow_pickle)
    except ContainsGroupError:
        if mode != "a":
            raise
        # Created by another writer between the check and our conditional create.
        return await AsyncGroup.open(the_store, node_path, read_only=False, allow_pickle=allow_pickle)


async def open(
    store: StoreLike | None = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open an array or a group, whichever is at ``path`` (zarr-python 2 ``zarr.open``).

    With nothing there, modes ``a``/``w``/``w-`` create an array when
    ``shape`` is given, else a group.

    Raises
    ------
    FileNotFoundError
        (:class:`~azarr.errors.GroupNotFoundError`) modes ``r``/``r+`` and nothing at ``path``.
    """
    mode = _check_mode(mode)
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    group_kwargs = {k: v for k, v in kwargs.items() if k == "allow_pickle"}
    if mode in ("r", "r+", "a"):
        kind = await node_kind(io, node_path)
        if kind == "array":
            return await open_array(the_store, mode, path=node_path, **kwargs)
        if kind == "group":
            return await open_group(the_store, mode, path=node_path, **group_kwargs)
        if mode != "a":
            raise GroupNotFoundError(f"nothing (no array or group) at path {node_path!r} in {the_store.url}")
    if "shape" in kwargs:
        return await open_array(the_store, mode, path=node_path, **kwargs)
    return await open_group(the_store, mode, path=node_path, **group_kwargs)


async def group(
    store: StoreLike | None = None,
    *,
    overwrite: bool = False,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
) -> AsyncGroup:
    """Create a group, or open it if one exists (zarr-python 2 ``zarr.group``).

    Raises
    ------
    ContainsArrayError
        An array is at ``path`` and ``overwrite`` is False.
    """
    the_store, io = await open_managed(store, storage_options, read_only=False)
    node_path = normalize_path(path)
    if not overwrite and await contains_group(io, node_path):
        return await AsyncGroup.open(the_store, node_path, allow_pickle=allow_pickle)
    return await AsyncGroup.init(the_store, node_path, overwrite=overwrite, allow_pickle=allow_pickle)
