"""Opening arrays and groups by mode: ``open_array``, ``open_group``, ``open``, ``group``.

Modes are zarr-python 2's: ``"r"`` read-only, must exist; ``"r+"`` read/write,
must exist; ``"a"`` read/write, create if missing; ``"w"`` create, deleting
what exists; ``"w-"`` (alias ``"x"``) create, fail if something exists.
"""

from __future__ import annotations

from typing import Any

from azarr.api.consolidated_first import consolidated_and_kind, wants_consolidated
from azarr.api.creation import create, resolve_store, with_chunk_store
from azarr.core._array_ops import check_recheck_policy
from azarr.core._formats import ZarrFormat, format_argument
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
from azarr.scheduler import ChunkCache, StoreIO
from azarr.storage import Store, StoreLike

_MODES = ("r", "r+", "a", "w", "w-", "x")
#: What `open` passes on to `open_group` of what it is given (the rest is for arrays).
_GROUP_OPTIONS = ("allow_pickle", "cache_attrs", "synchronizer", "chunk_store", "zarr_format")


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
    cache_metadata: bool = True,
    recheck_metadata: bool | float | str | None = None,
    chunk_store: StoreLike | None = None,
    fill_missing_data_reads: bool = True,
    partial_decompress: bool = False,
    zarr_format: int | None = None,
    synchronizer: Any = None,
    cache_attrs: bool = True,
    zarr_version: int | None = None,
    cache: ChunkCache | bool | None = None,
    **create_kwargs: Any,
) -> AsyncArray:
    """Open an array, creating it if the mode allows (zarr-python 2 ``zarr.open_array``).

    The format of an existing array is found (``.zarray`` or ``zarr.json``); one
    created takes ``zarr_format`` (default ``azarr.config`` ``zarr_format``, 2).

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
        The store or its URL/path (``"s3://bucket/x.zarr"``, ``"data/x.zarr"``).
    mode : {"a", "r", "r+", "w", "w-"}
        See the module docstring. Default ``"a"``.
    path : str, optional
        Array path within the store.
    storage_options : dict, optional
        fsspec options when ``store`` is a URL (``endpoint_url``, ``anon``, ...).
    allow_pickle : bool, optional
        Let pickle-based codecs decode chunks.
    write_empty_chunks : bool, optional
        Store chunks equal to ``fill_value``.
    cache_metadata : bool, default True
        zarr-python 2's switch: False rereads ``.zarray`` before every
        operation (the same as ``recheck_metadata=True``).
    recheck_metadata : str, bool or float, optional
        When to reread ``.zarray`` (TensorStore's ``recheck_cached_metadata``):
        ``"open"`` never after opening (default), True before every operation,
        seconds: when older than that. See `AsyncArray.set_recheck_metadata`.
    chunk_store : Store, str, os.PathLike or MutableMapping, optional
        Where the chunks are, when not beside the metadata in ``store`` (zarr-python 2).
    fill_missing_data_reads : bool, default True
        False makes a read of a chunk that is not stored raise
        `ChunkNotFoundError` instead of returning the fill
        value (TensorStore's zarr2 option; see ``azarr.api.missing_chunks``).
    partial_decompress : bool, default False
        zarr-python 2's option (which its ``open_array`` accepts but does not pass
        on; azarr honours it): a read covering part of a Blosc chunk (no filters,
        C order, chunks of at least 128 KiB) fetches the Blosc header and block
        table, then only the compressed blocks holding the selected elements,
        with byte-range reads through the store's managed path, and decodes only
        those. Everything else is read whole. Same results either way; fewer
        bytes read for small selections of large chunks, at the cost of one or
        two more round trips per chunk (see ``docs/tutorial.md``).
    zarr_format : {None, 2, 3}, optional
        Open only an array of that format; create one of that format.
    synchronizer : optional
        zarr-python 2's synchronizer, kept on the array (see `azarr.create`).
    cache_attrs : bool, default True
        zarr-python 2's option, kept on the array (see `azarr.create`).
    zarr_version : {None, 2, 3}
        zarr-python 2's name of ``zarr_format``.
    cache : ChunkCache, bool or None, optional
        The decoded-chunk cache its reads go through (`azarr.scheduler.ChunkCache`):
        None (default) the process's when ``azarr.config`` ``chunk_cache_bytes`` is
        set, else none; False none; True the process's (it must be configured); or a
        `ChunkCache` of its own, with its own size and ``recheck_cached_data``.
    **create_kwargs
        `azarr.create` arguments (``shape``, ``chunks``, ``dtype``, ...)
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
    fmt = format_argument(zarr_format, zarr_version)
    policy = check_recheck_policy(
        recheck_metadata if recheck_metadata is not None else "open" if cache_metadata else True
    )
    if chunk_store is not None:
        store = with_chunk_store(
            resolve_store(store, storage_options, read_only=mode == "r"),
            chunk_store,
            storage_options,
            read_only=mode == "r",
        )
    if not fill_missing_data_reads:
        from azarr.api.missing_chunks import StrictReadStore

        store = StrictReadStore(resolve_store(store, storage_options, read_only=mode == "r"))
    opened = await _open_array(
        store,
        mode,
        path,
        storage_options,
        {"allow_pickle": allow_pickle, "write_empty_chunks": write_empty_chunks}
        | {"synchronizer": synchronizer, "cache_attrs": cache_attrs},
        create_kwargs,
        partial_decompress,
        fmt,
        cache,
    )
    return opened.set_recheck_metadata(policy)


async def _open_array(
    store: StoreLike | None,
    mode: str,
    path: str | None,
    storage_options: dict[str, Any] | None,
    open_kwargs: dict[str, Any],
    create_kwargs: dict[str, Any],
    partial_decompress: bool = False,
    zarr_format: ZarrFormat | None = None,
    cache: ChunkCache | bool | None = None,
) -> AsyncArray:
    """`open_array` after its options are checked; ``open_kwargs`` go to the array opened or created."""
    mode = _check_mode(mode)
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    if mode in ("r", "r+", "a"):
        # Read .zarray and .zattrs straight away: opening an existing array costs one
        # round trip (checking existence first cost a second one, measured on S3).
        try:
            return await AsyncArray.open(
                the_store,
                node_path,
                read_only=mode == "r",
                partial_decompress=partial_decompress,
                zarr_format=zarr_format,
                cache=cache,
                **open_kwargs,
            )
        except ArrayNotFoundError:
            pass
        if await contains_group(io, node_path):
            raise ContainsGroupError(f"path {node_path!r} in {the_store.url} is a group, not an array")
        if mode != "a":
            raise ArrayNotFoundError(f"no array at path {node_path!r} in {the_store.url}")
    if "shape" not in create_kwargs:
        raise TypeError(f"creating array {node_path!r} in mode {mode!r} needs a shape")
    created = await create(
        store=the_store,
        path=node_path,
        overwrite=mode == "w",
        zarr_format=zarr_format,
        **open_kwargs,
        **create_kwargs,
    )
    if not partial_decompress and cache is None:
        return created
    # zarr-python 2's create() has neither option: the new array, opened with them (no I/O).
    return AsyncArray(
        created.store,
        node_path,
        created.metadata,
        created.attrs.asdict(),
        partial_decompress=partial_decompress,
        cache=cache,
        **open_kwargs,
    )


async def open_group(
    store: StoreLike | None = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
    use_consolidated: bool | None = None,
    chunk_store: StoreLike | None = None,
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    cache_attrs: bool = True,
    synchronizer: Any = None,
    zarr_version: int | None = None,
) -> AsyncGroup:
    """Open a group, creating it if the mode allows (zarr-python 2 ``zarr.open_group``).

    The format of an existing group is found (``.zgroup`` or ``zarr.json``; consolidated
    as ``.zmetadata`` or inline in the root ``zarr.json``); one created takes
    ``zarr_format`` (default ``azarr.config`` ``zarr_format``, 2) and ``attributes``.

    ``use_consolidated`` (zarr-python 3's name, xarray's ``consolidated``): None
    opens through ``.zmetadata`` when there is one and the mode is ``"r"``,
    else walks the hierarchy (xarray's default); True requires it (modes
    ``"r"``/``"r+"``); False never looks (see ``azarr.api.consolidated_first``).
    ``chunk_store`` keeps the chunks of every array below apart from the
    metadata (zarr-python 2; `SplitStore`). ``cache_attrs``, ``synchronizer`` and
    ``zarr_version`` (``zarr_format``) are zarr-python 2's (see `azarr.create`); members opened through the
    group inherit the first two.

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
    options: dict[str, Any] = {
        "allow_pickle": allow_pickle,
        "synchronizer": synchronizer,
        "cache_attrs": cache_attrs,
    }
    split = with_chunk_store(
        resolve_store(store, storage_options, read_only=mode == "r"),
        chunk_store,
        storage_options,
        read_only=mode == "r",
    )
    the_store, io = await open_managed(split, None, read_only=mode == "r")
    node_path = normalize_path(path)
    fmt = format_argument(zarr_format, zarr_version)
    kind_known, kind = False, None
    if wants_consolidated(use_consolidated, mode):
        node, kind, kind_known = await consolidated_and_kind(
            the_store, node_path, mode, required=bool(use_consolidated), allow_pickle=allow_pickle
        )
        if isinstance(node, AsyncArray):
            raise ContainsArrayError(f"path {node_path!r} in {the_store.url} is an array, not a group")
        if node is not None:
            node._synchronizer, node._cache_attrs = synchronizer, cache_attrs
            return node
    if mode in ("r", "r+", "a"):
        if not kind_known:
            kind = await node_kind(io, node_path)
        if kind == "group":
            return await AsyncGroup.open(
                the_store, node_path, read_only=mode == "r", zarr_format=fmt, **options
            )
        if kind == "array":
            raise ContainsArrayError(f"path {node_path!r} in {the_store.url} is an array, not a group")
        if mode != "a":
            raise GroupNotFoundError(f"no group at path {node_path!r} in {the_store.url}")
    try:
        return await AsyncGroup.init(
            the_store, node_path, overwrite=mode == "w", zarr_format=fmt, attributes=attributes, **options
        )
    except ContainsGroupError:
        if mode != "a":
            raise
        # Created by another writer between the check and our conditional create.
        return await AsyncGroup.open(the_store, node_path, read_only=False, **options)


async def open(
    store: StoreLike | None = None,
    mode: str = "a",
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    zarr_version: int | None = None,
    **kwargs: Any,
) -> AsyncArray | AsyncGroup:
    """Open an array or a group, whichever is at ``path`` (zarr-python 2 ``zarr.open``).

    With nothing there, modes ``a``/``w``/``w-`` create an array when
    ``shape`` is given, else a group. ``use_consolidated=`` as for
    `open_group`: in mode ``"r"`` ``.zmetadata`` is used when present.

    Raises
    ------
    FileNotFoundError
        (`GroupNotFoundError`) modes ``r``/``r+`` and nothing at ``path``.
    """
    if zarr_version is not None:
        kwargs["zarr_format"] = format_argument(kwargs.get("zarr_format"), zarr_version)
    mode = _check_mode(mode)
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    use_consolidated = kwargs.pop("use_consolidated", None)
    # array options other than allow_pickle (shape, chunk_store, recheck_metadata...) need the plain open
    kind_known, kind = False, None
    if wants_consolidated(use_consolidated, mode) and set(kwargs) <= {"allow_pickle"}:
        node, kind, kind_known = await consolidated_and_kind(
            the_store,
            node_path,
            mode,
            required=bool(use_consolidated),
            allow_pickle=kwargs.get("allow_pickle"),
        )
        if node is not None:
            return node
    group_kwargs = {k: v for k, v in kwargs.items() if k in _GROUP_OPTIONS}
    if mode in ("r", "r+", "a"):
        if not kind_known:
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
    zarr_format: int | None = None,
    attributes: dict[str, Any] | None = None,
    chunk_store: StoreLike | None = None,
    cache_attrs: bool = True,
    synchronizer: Any = None,
    zarr_version: int | None = None,
) -> AsyncGroup:
    """Create a group, or open it if one exists (zarr-python 2 ``zarr.group``).

    ``zarr_format`` (2 or 3) and ``attributes`` apply to a group created here;
    ``chunk_store``, ``cache_attrs``, ``synchronizer`` and ``zarr_version`` (zarr-python 2's
    name of ``zarr_format``) as for `open_group`.

    Raises
    ------
    ContainsArrayError
        An array is at ``path`` and ``overwrite`` is False.
    """
    split = with_chunk_store(resolve_store(store, storage_options), chunk_store, storage_options)
    the_store, io = await open_managed(split, None, read_only=False)
    node_path = normalize_path(path)
    options: dict[str, Any] = {
        "allow_pickle": allow_pickle,
        "synchronizer": synchronizer,
        "cache_attrs": cache_attrs,
    }
    if not overwrite and await contains_group(io, node_path):
        return await AsyncGroup.open(the_store, node_path, **options)
    return await AsyncGroup.init(
        the_store,
        node_path,
        overwrite=overwrite,
        zarr_format=format_argument(zarr_format, zarr_version),
        attributes=attributes,
        **options,
    )
