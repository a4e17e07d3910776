"""Creating arrays: ``create`` and the NumPy-style convenience constructors.

Argument names and defaults follow zarr-python 2.18's ``zarr.creation`` so a
call written for zarr-python 2 produces the same ``.zarray`` here.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from azarr.core._creation import build_array_metadata, create_array
from azarr.core._formats import format_argument
from azarr.core._streaming import is_array_source, prepare_source, source_chunks
from azarr.core.array import AsyncArray
from azarr.metadata import ArrayV3Metadata
from azarr.storage import LocalStore, MemoryStore, Store, StoreLike, ZipStore, make_store

__all__ = [
    "array",
    "build_array_metadata",
    "create",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "ones",
    "ones_like",
    "resolve_store",
    "zeros",
    "zeros_like",
]


def resolve_store(
    store: StoreLike | None, storage_options: dict[str, Any] | None, *, read_only: bool = False
) -> Store:
    """The Store for a store-like argument; ``None`` means a new in-memory store (zarr-python 2).

    As in zarr-python 2, a local path ending in ``.zip`` is a `ZipStore` (mode ``"a"``, or
    ``"r"`` read-only) and one ending in ``.n5`` an `N5Store`.

    A Store instance is used as it is, never copied: its request budget and
    connections are shared by everything opened on it. Read-only modes are
    then enforced by the array or group, not by the store.
    """
    if store is None:
        return MemoryStore()
    if isinstance(store, Store):
        return store
    if isinstance(store, (str, os.PathLike)) and not storage_options:
        by_suffix = _store_by_suffix(os.fspath(store), read_only=read_only)
        if by_suffix is not None:
            return by_suffix
    return make_store(store, storage_options=storage_options, read_only=read_only)


def _store_by_suffix(path: str, *, read_only: bool) -> Store | None:
    """zarr-python 2's reading of a local path by its suffix: ``x.zip`` a `ZipStore`, ``x.n5`` an `N5Store`.

    URLs (``s3://``, ``zip::``, ``file://``) go to `make_store` as they are.
    """
    if "://" in path or "::" in path:
        return None
    if path.endswith(".zip"):
        return ZipStore(path, mode="r" if read_only else "a")
    if path.endswith(".n5"):
        from azarr.api.n5 import N5Store

        return N5Store(LocalStore(path, read_only=read_only))
    return None


def with_chunk_store(
    store: Store,
    chunk_store: StoreLike | None,
    storage_options: dict[str, Any] | None,
    *,
    read_only: bool = False,
) -> Store:
    """``store``, or a `SplitStore` of it and ``chunk_store`` when one is given."""
    if chunk_store is None:
        return store
    from azarr.api.chunk_store import SplitStore

    return SplitStore(store, resolve_store(chunk_store, storage_options, read_only=read_only))


async def create(
    shape: int | tuple[int, ...],
    chunks: Any = True,
    dtype: Any = "f8",
    compressor: Any = "default",
    fill_value: Any = 0,
    order: str = "C",
    store: StoreLike | None = None,
    *,
    overwrite: bool = False,
    path: str | None = None,
    filters: Any = None,
    object_codec: Any = None,
    dimension_separator: str | None = None,
    write_empty_chunks: bool | None = None,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
    attributes: dict[str, Any] | None = None,
    chunk_store: StoreLike | None = None,
    zarr_format: int | None = None,
    codecs: Any = None,
    compressors: Any = "auto",
    serializer: Any = "auto",
    chunk_key_encoding: Any = None,
    dimension_names: Any = None,
    shards: Any = None,
    synchronizer: Any = None,
    cache_metadata: bool = True,
    cache_attrs: bool = True,
    read_only: bool = False,
    compression: Any = "default",
    compression_opts: Any = None,
    fillvalue: Any = None,
    shuffle: Any = None,
    zarr_version: int | None = None,
) -> AsyncArray:
    """Create an empty array (writes ``.zarray``, and ``.zgroup`` for missing ancestors).

    Zarr-python 2.18 ``zarr.create``, awaited; with ``zarr_format=3`` zarr-python 3's
    ``create_array``: one ``zarr.json`` (and ``zarr.json`` groups for missing ancestors).

    Parameters
    ----------
    shape : int or tuple of int
        Array shape in elements.
    chunks : int, tuple of int, bool, optional
        Chunk shape in elements. True guesses 128 KiB-64 MiB chunks; False is
        one chunk; ``None``/``-1`` entries mean the full extent.
    dtype : str or numpy.dtype, optional
        Element type (default float64). ``str``/``bytes`` create object arrays
        with VLenUTF8/VLenBytes; ``object`` needs ``object_codec``.
    compressor : numcodecs codec, dict, "default" or None
        Default Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE).
    fill_value : scalar or None
        Value of never-written elements (default 0).
    order : {"C", "F"}
        Memory layout within chunks.
    store : Store, str, os.PathLike or MutableMapping, optional
        Where to create the array; default a new `MemoryStore`.
    overwrite : bool
        Delete whatever exists at ``path`` first.
    path : str, optional
        Node path within the store.
    filters : sequence of numcodecs codecs or dicts, optional
        Applied in order before the compressor.
    object_codec : numcodecs codec, optional
        Codec for object arrays (becomes the first filter).
    dimension_separator : str, optional
        Chunk-key separator, ``"."`` (the default) or ``"/"``.
    write_empty_chunks : bool, optional
        Store chunks that equal ``fill_value`` (default True).
    storage_options : dict, optional
        Passed to fsspec when ``store`` is a URL.
    allow_pickle : bool, optional
        Let pickle-based codecs decode data.
    attributes : dict, optional
        Initial ``.zattrs``.
    chunk_store : Store, str, os.PathLike or MutableMapping, optional
        Keep the chunks here and only the metadata documents in ``store``
        (zarr-python 2 ``chunk_store``; see `SplitStore`).
    zarr_format : {None, 2, 3}, optional
        The format to write; default ``azarr.config`` ``zarr_format`` (2).
    codecs : list, optional
        Zarr v3 only: the whole codec chain, as v3 entries (``{"name": "bytes",
        "configuration": {"endian": "big"}}``), names, or numcodecs codecs. Otherwise
        the chain is ``filters`` (array -> array: numcodecs codecs or v3 entries; ``order="F"``
        adds a ``transpose``), ``serializer`` and ``compressors``.
    compressors : list, codec, None or "auto"
        Zarr v3 only (zarr-python 3's name): the bytes -> bytes codecs, e.g.
        ``[numcodecs.Blosc(), {"name": "crc32c"}]``. ``"auto"`` takes ``compressor``
        (``"default"``: Zstd level 0, zarr-python 3's default).
    serializer : dict or "auto"
        Zarr v3 only: the array -> bytes codec; ``"auto"``: ``bytes`` (little-endian),
        ``vlen-utf8`` for ``str``, ``vlen-bytes`` for ``bytes``.
    chunk_key_encoding : dict or str, optional
        Zarr v3 only: ``{"name": "default", "separator": "/"}`` (the default; keys
        ``c/0/0``) or ``{"name": "v2", "separator": "."}`` (keys ``0.0``).
        ``dimension_separator`` sets the default encoding's separator.
    dimension_names : sequence of str or None, optional
        Zarr v3 only: a name per dimension (xarray reads them as dimensions).
    shards : tuple of int or dict, optional
        Zarr v3 only (zarr-python 3's name): store shards of this shape, each one object
        holding inner chunks of ``chunks`` (which must divide it) with an index
        (``sharding_indexed``: the chain above encodes the inner chunks; index ``bytes`` +
        ``crc32c`` at the end). ``{"shape": ..., "index_location": "start"}`` puts the index
        first. A ``sharding_indexed`` entry in ``codecs`` does the same, ``chunks`` then
        being the shard shape.
    synchronizer : optional
        zarr-python 2's synchronizer, kept on the array (``array.synchronizer``); the
        synchronous facade takes its lock around writes only where the store has no
        conditional writes (see `azarr.sync.ThreadSynchronizer`).
    cache_metadata : bool, default True
        False rereads ``.zarray`` before every operation (``recheck_metadata=True``).
    cache_attrs : bool, default True
        False makes the synchronous facade reread ``.zattrs`` before each read of ``attrs``.
    read_only : bool, default False
        Return the new array read-only (zarr-python 2; ``array.read_only = False`` undoes it).
    compression : str, codec or None, default "default"
        h5py's spelling of the compressor, as zarr-python 2 accepts it: a codec id
        (``"zlib"``), ``None``/``"none"`` for none; ``"default"``: not given. A
        ``compressor`` other than ``"default"`` wins (with a `UserWarning`).
    compression_opts : optional
        The arguments of ``compression`` (``9``, a tuple or a dict).
    fillvalue, shuffle : optional
        h5py's names, as zarr-python 2 accepts them: ``fillvalue`` is ``fill_value``;
        ``shuffle`` (an HDF5 filter flag) is ignored with a `UserWarning`.
    zarr_version : {None, 2, 3}
        zarr-python 2's name of ``zarr_format`` (zarr-python 3 keeps it, deprecated).

    Returns
    -------
    AsyncArray

    Raises
    ------
    ContainsArrayError, ContainsGroupError
        A node exists at ``path`` and ``overwrite`` is False.
    MetadataError, CodecError
        Invalid dtype, fill_value or codec; nothing is written.
    ValueError
        ``zarr_format``/``zarr_version`` is not 2 or 3, or they differ.
    """
    return await create_array(
        with_chunk_store(resolve_store(store, storage_options), chunk_store, storage_options),
        path,
        shape,
        chunks=chunks,
        dtype=dtype,
        compressor=compressor,
        fill_value=fill_value,
        order=order,
        overwrite=overwrite,
        filters=filters,
        object_codec=object_codec,
        dimension_separator=dimension_separator,
        write_empty_chunks=write_empty_chunks,
        allow_pickle=allow_pickle,
        attributes=attributes,
        zarr_format=format_argument(zarr_format, zarr_version),
        **_v3_options(codecs, compressors, serializer, chunk_key_encoding, dimension_names, shards),
        read_only=read_only,
        synchronizer=synchronizer,
        cache_metadata=cache_metadata,
        cache_attrs=cache_attrs,
        compression=compression,
        compression_opts=compression_opts,
        fillvalue=fillvalue,
        shuffle=shuffle,
    )


def _v3_options(
    codecs: Any,
    compressors: Any,
    serializer: Any,
    chunk_key_encoding: Any,
    dimension_names: Any,
    shards: Any = None,
) -> dict[str, Any]:
    """The v3-only creation arguments that were given (v2 arrays refuse any)."""
    given = {
        "codecs": codecs,
        "compressors": compressors,
        "serializer": serializer,
        "chunk_key_encoding": chunk_key_encoding,
        "dimension_names": dimension_names,
        "shards": shards,
    }
    defaults = {"compressors": "auto", "serializer": "auto"}
    return {k: v for k, v in given.items() if v is not defaults.get(k)}


async def zeros(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array of zeros (fill_value 0, nothing stored). Arguments as `create`."""
    return await create(shape, fill_value=0, **kwargs)


async def ones(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array of ones (fill_value 1, nothing stored). Arguments as `create`."""
    return await create(shape, fill_value=1, **kwargs)


async def empty(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array with no fill_value (null in ``.zarray``). Arguments as `create`."""
    return await create(shape, fill_value=None, **kwargs)


async def full(shape: int | tuple[int, ...], fill_value: Any, **kwargs: Any) -> AsyncArray:
    """Create an array whose unwritten elements read as ``fill_value``. Arguments as `create`."""
    return await create(shape, fill_value=fill_value, **kwargs)


async def array(data: Any, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data`` (zarr-python 2 ``zarr.array``).

    Shape and dtype come from ``data`` unless given. Arguments as `create`.

    ``data`` may be a chunked array (an ``AsyncArray``, an h5py dataset, a
    zarr-python 2 array): its chunks are then the default ``chunks`` (as in
    zarr-python 2) and it is copied slab by slab, never read whole, so
    ``await azarr.array(src, chunks=new_chunks, store=...)`` rechunks ``src``.
    """
    read_only = kwargs.pop("read_only", False)  # applies once the data is written
    if is_array_source(data):
        await prepare_source(data)
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = data.dtype
        if kwargs.get("chunks") is None and source_chunks(data) is not None:
            kwargs["chunks"] = source_chunks(data)
        created = await create(tuple(data.shape), **kwargs)
        await created.set_basic_selection(Ellipsis, data)
    else:
        values = np.asanyarray(data)
        if kwargs.get("dtype") is None:
            kwargs["dtype"] = values.dtype
        created = await create(values.shape, **kwargs)
        if values.size:
            await created.set_basic_selection(Ellipsis, values)
    created.read_only = read_only
    return created


def _like_kwargs(a: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Creation arguments copied from ``a`` (an AsyncArray or anything array-like), zarr-python 2 ``_like_args``."""
    result = dict(kwargs)
    if isinstance(a, AsyncArray):
        result.setdefault("shape", a.shape)
        # With a sharded array's codecs (one sharding_indexed entry), ``chunks`` is the shard shape.
        sharded = a.shards is not None and "codecs" not in kwargs
        result.setdefault("chunks", a.shards if sharded else a.chunks)
        result.setdefault("dtype", a.dtype)
        result.setdefault("order", a.order)
        result.setdefault("fill_value", a.fill_value)
        if isinstance(a.metadata, ArrayV3Metadata):
            result.setdefault("zarr_format", 3)
            result.setdefault("codecs", [dict(c) for c in a.metadata.codecs])
        else:
            result.setdefault("compressor", a.metadata.compressor)
            result.setdefault("filters", list(a.metadata.filters) if a.metadata.filters else None)
    else:
        values = np.asanyarray(a)
        result.setdefault("shape", values.shape)
        result.setdefault("dtype", values.dtype)
        chunks = source_chunks(a)
        if chunks is not None:
            result.setdefault("chunks", chunks)
    return result


async def zeros_like(a: Any, **kwargs: Any) -> AsyncArray:
    """Array of zeros shaped like ``a``."""
    kw = _like_kwargs(a, kwargs)
    kw["fill_value"] = 0
    return await create(**kw)


async def ones_like(a: Any, **kwargs: Any) -> AsyncArray:
    """Array of ones shaped like ``a``."""
    kw = _like_kwargs(a, kwargs)
    kw["fill_value"] = 1
    return await create(**kw)


async def empty_like(a: Any, **kwargs: Any) -> AsyncArray:
    """Array with no fill_value shaped like ``a``."""
    kw = _like_kwargs(a, kwargs)
    kw["fill_value"] = None
    return await create(**kw)


async def full_like(a: Any, **kwargs: Any) -> AsyncArray:
    """Array filled with ``fill_value`` (default: ``a``'s) shaped like ``a``.

    Raises
    ------
    TypeError
        ``a`` has no fill value (not an array of azarr's) and none is given (zarr-python 2).
    """
    if (
        "fill_value" not in kwargs
        and not isinstance(a, AsyncArray)
        and getattr(a, "fill_value", None) is None
    ):
        raise TypeError("full_like needs a fill_value: the source array has none")
    like = _like_kwargs(a, kwargs)
    if "fill_value" not in like:
        like["fill_value"] = a.fill_value
    return await create(**like)
