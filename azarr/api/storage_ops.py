"""Hierarchy operations on a store by path: ``contains_array``, ``contains_group``, ``rename``, ``getsize``, ``rmdir``.

The async counterparts of zarr-python 2's ``zarr.storage`` functions of the
same names. They take a `Store` or anything
`azarr.storage.from_url` accepts, and node paths (``"a/b"``).
"""

from __future__ import annotations

from typing import Any

from azarr.api.copy import copy_store
from azarr.api.creation import resolve_store
from azarr.core import _hierarchy
from azarr.core._paths import node_key, normalize_path
from azarr.errors import NodeNotFoundError
from azarr.scheduler import StoreIO
from azarr.storage import StoreLike


async def contains_array(
    store: StoreLike, path: str | None = None, *, storage_options: dict[str, Any] | None = None
) -> bool:
    """True if an array (``.zarray``) is at ``path`` (zarr-python 2 ``contains_array``)."""
    return await _hierarchy.contains_array(
        StoreIO(resolve_store(store, storage_options)), normalize_path(path)
    )


async def contains_group(
    store: StoreLike, path: str | None = None, *, storage_options: dict[str, Any] | None = None
) -> bool:
    """True if a group (``.zgroup``) is at ``path`` (zarr-python 2 ``contains_group``)."""
    return await _hierarchy.contains_group(
        StoreIO(resolve_store(store, storage_options)), normalize_path(path)
    )


async def rmdir(
    store: StoreLike, path: str | None = None, *, storage_options: dict[str, Any] | None = None
) -> None:
    """Delete every key under ``path`` (``None``/``""``: the whole store), zarr-python 2 ``rmdir``.

    Raises
    ------
    ReadOnlyError
        The store is read-only.
    """
    await StoreIO(resolve_store(store, storage_options)).delete_prefix(normalize_path(path))


async def rename(
    store: StoreLike, src_path: str, dst_path: str, *, storage_options: dict[str, Any] | None = None
) -> None:
    """Move every key under ``src_path`` to ``dst_path`` (zarr-python 2 ``rename``).

    Object stores have no rename: the keys are copied as stored bytes (through
    the budgeted, retried path of `copy_store`), then the source
    keys are deleted, so an interrupted rename leaves the source complete.

    Raises
    ------
    ValueError
        ``dst_path`` is ``src_path`` or lies inside it, or ``src_path`` is the root.
    KeyExistsError
        A key exists under ``dst_path`` already (nothing is copied).
    NodeNotFoundError
        Nothing is stored under ``src_path``.
    """
    the_store = resolve_store(store, storage_options)
    src, dst = normalize_path(src_path), normalize_path(dst_path)
    if not src:
        raise ValueError("cannot rename the root of a store")
    if dst == src or dst.startswith(src + "/"):
        raise ValueError(f"cannot rename {src!r} to {dst!r}, which is inside it")
    result = await copy_store(the_store, the_store, source_path=src, dest_path=dst, if_exists="raise")
    if result.n_copied == 0:
        raise NodeNotFoundError(f"nothing stored under {src!r} in {the_store.url}")
    await StoreIO(the_store).delete_prefix(src)


async def getsize(
    store: StoreLike, path: str | None = None, *, storage_options: dict[str, Any] | None = None
) -> int:
    """Bytes stored at ``path`` (zarr-python 2 ``getsize``).

    A key's size if ``path`` is a key; otherwise the sizes of the keys directly
    under ``path`` added up (not recursive: for an array that is its chunks and
    metadata documents, for a group only its own documents), as zarr-python 2's
    ``DirectoryStore.getsize`` and mapping fallback count.
    """
    io = StoreIO(resolve_store(store, storage_options))
    norm = normalize_path(path)
    if norm and await io.exists(norm):
        return await io.getsize(norm)
    total = 0
    for name in await io.list_dir(norm):
        key = node_key(norm, name)
        if await io.exists(key):
            total += await io.getsize(key)
    return total
