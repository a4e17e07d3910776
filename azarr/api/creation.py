"""Creating arrays: ``create`` and the NumPy-style convenience constructors.

Argument names and defaults follow zarr-python 2.18's ``zarr.creation`` so a
call written for zarr-python 2 produces the same ``.zarray`` here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from azarr.core._hierarchy import prepare_node_path
from azarr.core._normalize import (
    normalize_chunks,
    normalize_compressor,
    normalize_fill_value,
    normalize_filters,
    normalize_shape,
)
from azarr.core._paths import node_key, normalize_path
from azarr.core._streaming import is_array_source, prepare_source, source_chunks
from azarr.core.array import AsyncArray
from azarr.errors import ReadOnlyError
from azarr.metadata import ZARRAY, ArrayMetadata, normalize_dtype
from azarr.storage import MemoryStore, Store, StoreLike, make_store


def resolve_store(
    store: StoreLike | None, storage_options: dict[str, Any] | None, *, read_only: bool = False
) -> Store:
    """The Store for a store-like argument; ``None`` means a new in-memory store (zarr-python 2).

    A Store instance is used as it is, never copied: its request budget and
    connections are shared by everything opened on it. Read-only modes are
    then enforced by the array or group, not by the store.
    """
    if store is None:
        return MemoryStore()
    if isinstance(store, Store):
        return store
    return make_store(store, storage_options=storage_options, read_only=read_only)


def with_chunk_store(
    store: Store,
    chunk_store: StoreLike | None,
    storage_options: dict[str, Any] | None,
    *,
    read_only: bool = False,
) -> Store:
    """``store``, or a :class:`~azarr.api.chunk_store.SplitStore` of it and ``chunk_store`` when one is given."""
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
) -> AsyncArray:
    """Create an empty array (writes ``.zarray``, and ``.zgroup`` for missing ancestors).

    Zarr-python 2.18 ``zarr.create``, awaited.

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
        Where to create the array; default a new :class:`~azarr.storage.MemoryStore`.
    overwrite : bool
        Delete whatever exists at ``path`` first.
    path : str, optional
        Node path within the store.
    filters : sequence of numcodecs codecs or dicts, optional
        Applied in order before the compressor.
    object_codec : numcodecs codec, optional
        Codec for object arrays (becomes the first filter).
    dimension_separator : {".", "/"}, optional
        Chunk-key separator (default ".").
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
        (zarr-python 2 ``chunk_store``; see :class:`~azarr.api.chunk_store.SplitStore`).

    Returns
    -------
    AsyncArray

    Raises
    ------
    ContainsArrayError, ContainsGroupError
        A node exists at ``path`` and ``overwrite`` is False.
    MetadataError, CodecError
        Invalid dtype, fill_value or codec; nothing is written.
    """
    the_store = with_chunk_store(resolve_store(store, storage_options), chunk_store, storage_options)
    node_path = normalize_path(path)
    if the_store.read_only:
        raise ReadOnlyError(f"cannot create array {node_path!r}: store {the_store.url} is read-only")
    metadata = build_array_metadata(
        shape,
        chunks=chunks,
        dtype=dtype,
        compressor=compressor,
        fill_value=fill_value,
        order=order,
        filters=filters,
        object_codec=object_codec,
        dimension_separator=dimension_separator,
        key=node_key(node_path, ZARRAY),
    )
    await prepare_node_path(the_store, node_path, overwrite=overwrite)
    await the_store.set(node_key(node_path, ZARRAY), metadata.to_json())
    if getattr(the_store, "rewrites_metadata", False):
        # a translating store (N5Store) stores another document than it was given: use what it reads back
        stored = await the_store.get(node_key(node_path, ZARRAY))
        if stored is not None:
            metadata = ArrayMetadata.from_json(stored, key=node_key(node_path, ZARRAY))
    array = AsyncArray(
        the_store,
        node_path,
        metadata,
        {},
        allow_pickle=allow_pickle,
        write_empty_chunks=write_empty_chunks,
    )
    if attributes:
        await array.attrs.put(attributes)
    return array


def build_array_metadata(
    shape: int | tuple[int, ...],
    *,
    chunks: Any,
    dtype: Any,
    compressor: Any,
    fill_value: Any,
    order: str,
    filters: Any,
    object_codec: Any,
    dimension_separator: str | None,
    key: str = ZARRAY,
) -> ArrayMetadata:
    """Validated metadata from creation arguments (zarr-python 2 ``_init_array_metadata``).

    The document is round-tripped through its JSON form, so what is returned
    is exactly what a later open will read.
    """
    if object_codec is None and filters and _is_plain_object_dtype(dtype):
        # zarr-python 2.18 accepts an object array whose first filter encodes the
        # objects (e.g. Categorize) without object_codec; the metadata check below
        # still requires filters[0] to be an object codec.
        base_dtype, object_filters = np.dtype(object), None
    else:
        base_dtype, object_filters = normalize_dtype(dtype, object_codec)
    # A subarray dtype ("(2,)f8") adds its shape to the array's, as in zarr-python 2.
    full_shape = normalize_shape(shape) + tuple(base_dtype.shape)
    base_dtype = base_dtype.base
    chunk_shape = normalize_chunks(chunks, full_shape, base_dtype.itemsize)
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    filter_configs = list(object_filters or []) + normalize_filters(filters)
    draft = ArrayMetadata(
        shape=full_shape,
        chunks=chunk_shape,
        dtype=base_dtype,
        compressor=normalize_compressor(compressor, full_shape),
        filters=tuple(filter_configs) or None,
        fill_value=normalize_fill_value(fill_value, base_dtype),
        order=order,  # type: ignore[arg-type]
        dimension_separator=dimension_separator or ".",  # type: ignore[arg-type]
    )
    return ArrayMetadata.from_json(draft.to_dict(), key=key)


def _is_plain_object_dtype(dtype: Any) -> bool:
    if dtype in (str, bytes) or isinstance(dtype, str):
        return bool(dtype in ("O", "|O", "object"))
    try:
        return bool(np.dtype(dtype).kind == "O")
    except TypeError:
        return False


async def zeros(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array of zeros (fill_value 0, nothing stored). Arguments as :func:`create`."""
    return await create(shape, fill_value=0, **kwargs)


async def ones(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array of ones (fill_value 1, nothing stored). Arguments as :func:`create`."""
    return await create(shape, fill_value=1, **kwargs)


async def empty(shape: int | tuple[int, ...], **kwargs: Any) -> AsyncArray:
    """Create an array with no fill_value (null in ``.zarray``). Arguments as :func:`create`."""
    return await create(shape, fill_value=None, **kwargs)


async def full(shape: int | tuple[int, ...], fill_value: Any, **kwargs: Any) -> AsyncArray:
    """Create an array whose unwritten elements read as ``fill_value``. Arguments as :func:`create`."""
    return await create(shape, fill_value=fill_value, **kwargs)


async def array(data: Any, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data`` (zarr-python 2 ``zarr.array``).

    Shape and dtype come from ``data`` unless given. Arguments as :func:`create`.

    ``data`` may be a chunked array (an ``AsyncArray``, an h5py dataset, a
    zarr-python 2 array): its chunks are then the default ``chunks`` (as in
    zarr-python 2) and it is copied slab by slab, never read whole, so
    ``await azarr.array(src, chunks=new_chunks, store=...)`` rechunks ``src``.
    """
    if is_array_source(data):
        await prepare_source(data)
        kwargs.setdefault("dtype", data.dtype)
        if kwargs.get("chunks") is None and source_chunks(data) is not None:
            kwargs["chunks"] = source_chunks(data)
        created = await create(tuple(data.shape), **kwargs)
        await created.set_basic_selection(Ellipsis, data)
        return created
    values = np.asanyarray(data)
    kwargs.setdefault("dtype", values.dtype)
    created = await create(values.shape, **kwargs)
    if values.size:
        await created.set_basic_selection(Ellipsis, values)
    return created


def _like_kwargs(a: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Creation arguments copied from ``a`` (an AsyncArray or anything array-like), zarr-python 2 ``_like_args``."""
    result = dict(kwargs)
    if isinstance(a, AsyncArray):
        result.setdefault("shape", a.shape)
        result.setdefault("chunks", a.chunks)
        result.setdefault("dtype", a.dtype)
        result.setdefault("compressor", a.metadata.compressor)
        result.setdefault("order", a.order)
        result.setdefault("filters", list(a.metadata.filters) if a.metadata.filters else None)
        result.setdefault("fill_value", a.fill_value)
    else:
        values = np.asanyarray(a)
        result.setdefault("shape", values.shape)
        result.setdefault("dtype", values.dtype)
        chunks = getattr(a, "chunks", None)
        if isinstance(chunks, tuple) and all(isinstance(c, int) for c in chunks):
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
    """Array filled with ``fill_value`` (default: ``a``'s) shaped like ``a``."""
    return await create(**_like_kwargs(a, kwargs))
