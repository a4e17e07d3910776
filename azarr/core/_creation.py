"""Creating arrays in a store: metadata from creation arguments, then ``.zarray`` or ``zarr.json``.

Zarr v2 arrays take zarr-python 2's arguments; Zarr v3 arrays (``zarr_format=3``)
zarr-python 3's as well (``azarr.core._creation_v3``).

The core of `azarr.create` and `azarr.AsyncGroup.create_dataset`
(which both call `create_array`), kept in ``core`` so groups do not reach
up into the api layer.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from azarr.core._creation_v3 import build_v3_array_metadata
from azarr.core._formats import creation_format
from azarr.core._hierarchy import prepare_node_path, write_node_document
from azarr.core._normalize import (
    h5py_compression,
    normalize_chunks,
    normalize_compressor,
    normalize_fill_value,
    normalize_filters,
    normalize_shape,
)
from azarr.core._paths import node_key, normalize_path
from azarr.core.array import AsyncArray
from azarr.errors import ReadOnlyError
from azarr.metadata import ZARR_JSON, ZARRAY, AnyArrayMetadata, ArrayMetadata, encode_json, normalize_dtype
from azarr.scheduler import StoreIO
from azarr.storage import Store


async def create_array(
    store: Store,
    path: str | None,
    shape: int | tuple[int, ...],
    *,
    chunks: Any = True,
    dtype: Any = "f8",
    compressor: Any = "default",
    fill_value: Any = 0,
    order: str = "C",
    overwrite: bool = False,
    filters: Any = None,
    object_codec: Any = None,
    dimension_separator: str | None = None,
    write_empty_chunks: bool | None = None,
    allow_pickle: bool | None = None,
    attributes: dict[str, Any] | None = None,
    read_only: bool = False,
    synchronizer: Any = None,
    cache_metadata: bool = True,
    cache_attrs: bool = True,
    compression: Any = "default",
    compression_opts: Any = None,
    fillvalue: Any = None,
    shuffle: Any = None,
    zarr_format: int | None = None,
    **v3_options: Any,
) -> AsyncArray:
    """Create an empty array at ``path`` of ``store`` (arguments as `azarr.create`).

    Validates everything before the first write (an invalid dtype or codec writes
    nothing), prepares the path (overwrite, parent groups), then writes
    ``.zarray`` and, if given, ``.zattrs`` -- all through the store's managed path.
    With ``zarr_format=3`` it writes one ``zarr.json`` (attributes inside), and takes
    ``v3_options``: ``codecs``, ``compressors``, ``serializer``, ``chunk_key_encoding``,
    ``dimension_names`` (see ``azarr.core._creation_v3``).

    Raises
    ------
    ReadOnlyError
        The store is read-only.
    ContainsArrayError, ContainsGroupError
        A node exists at ``path`` and ``overwrite`` is False.
    MetadataError, CodecError
        Invalid dtype, fill_value or codec; nothing is written.
    """
    if fillvalue is not None:
        fill_value = fillvalue  # h5py's spelling (zarr-python 2 accepts it)
    if shuffle is not None:
        warnings.warn(
            "ignoring keyword argument 'shuffle' (h5py's filter flag; Blosc's shuffle is a compressor option)",
            UserWarning,
            stacklevel=3,
        )
    node_path = normalize_path(path)
    if store.read_only:
        raise ReadOnlyError(f"cannot create array {node_path!r}: store {store.url} is read-only")
    if dimension_separator and store.dimension_separator and dimension_separator != store.dimension_separator:
        raise ValueError(
            f"dimension_separator {dimension_separator!r} conflicts with the separator "
            f"{store.dimension_separator!r} of store {store.url}"
        )
    compressor = h5py_compression(compressor, compression, compression_opts)
    fmt = creation_format(zarr_format)
    arguments: dict[str, Any] = {
        "chunks": chunks,
        "dtype": dtype,
        "compressor": compressor,
        "fill_value": fill_value,
        "order": order,
        "filters": filters,
        "object_codec": object_codec,
        "dimension_separator": dimension_separator,
    }
    metadata: AnyArrayMetadata
    if fmt == 3:
        metadata = await _write_v3_array(
            store, node_path, shape, overwrite=overwrite, attributes=attributes, **arguments, **v3_options
        )
    elif v3_options:
        raise TypeError(f"{sorted(v3_options)} apply to Zarr v3 arrays only; pass zarr_format=3")
    else:
        metadata = await _write_v2_array(store, node_path, shape, overwrite=overwrite, **arguments)
    array = AsyncArray(
        store,
        node_path,
        metadata,
        dict(attributes or {}) if fmt == 3 else {},  # v3: already inside zarr.json
        allow_pickle=allow_pickle,
        write_empty_chunks=write_empty_chunks,
        synchronizer=synchronizer,
        cache_attrs=cache_attrs,
    )
    if attributes and fmt == 2:
        await array.attrs.put(attributes)
    array.read_only = read_only
    return array if cache_metadata else array.set_recheck_metadata(True)


async def _write_v2_array(
    store: Store,
    node_path: str,
    shape: int | tuple[int, ...],
    *,
    overwrite: bool,
    dimension_separator: str | None,
    **arguments: Any,
) -> ArrayMetadata:
    """`create_array`'s ``.zarray``, as zarr-python 2.18 writes it; the metadata as a later open reads it."""
    metadata = build_array_metadata(
        shape,
        dimension_separator=dimension_separator or store.dimension_separator,
        key=node_key(node_path, ZARRAY),
        **arguments,
    )
    document = metadata.to_dict()
    if not (dimension_separator or store.dimension_separator):
        # zarr-python 2.18 states the separator at creation only when one was chosen (by the
        # caller or the store), so the document is byte for byte the one it writes; "." it is.
        del document["dimension_separator"]
    io = StoreIO(store)
    await prepare_node_path(io, node_path, overwrite=overwrite, zarr_format=2)
    await write_node_document(io, node_path, ZARRAY, encode_json(document), overwrite=overwrite)
    if store.rewrites_metadata:
        # A translating store (N5Store) keeps another document than it was given: use what it reads back.
        stored = await io.get(node_key(node_path, ZARRAY))
        if stored is not None:
            metadata = ArrayMetadata.from_json(stored, key=node_key(node_path, ZARRAY))
    return metadata


async def _write_v3_array(
    store: Store,
    node_path: str,
    shape: int | tuple[int, ...],
    *,
    overwrite: bool,
    attributes: dict[str, Any] | None,
    **arguments: Any,
) -> AnyArrayMetadata:
    """`create_array`'s ``zarr.json`` for ``zarr_format=3`` (attributes inside)."""
    metadata: AnyArrayMetadata = build_v3_array_metadata(
        shape, attributes=attributes, key=node_key(node_path, ZARR_JSON), **arguments
    )
    io = StoreIO(store)
    await prepare_node_path(io, node_path, overwrite=overwrite, zarr_format=3)
    await write_node_document(io, node_path, ZARR_JSON, metadata.to_json(), overwrite=overwrite, kind="array")
    return metadata


async def create_array_from_data(store: Store, path: str | None, data: Any, **kwargs: Any) -> AsyncArray:
    """Create an array holding ``data`` (zarr-python 2 ``zarr.array``); shape and dtype from ``data`` unless given."""
    values = np.asanyarray(data)
    if kwargs.get("dtype") is None:
        kwargs["dtype"] = values.dtype
    read_only = kwargs.pop("read_only", False)  # applies once the data is written
    created = await create_array(store, path, kwargs.pop("shape", values.shape), **kwargs)
    if values.size:
        await created.set_basic_selection(Ellipsis, values)
    created.read_only = read_only
    return created


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
    if dtype is None:
        dtype = "f8"  # zarr-python 2's default
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
    # From the JSON bytes, as a later open reads them (nested codec settings in key order too).
    return ArrayMetadata.from_json(draft.to_json(), key=key)


def _is_plain_object_dtype(dtype: Any) -> bool:
    if dtype in (str, bytes) or isinstance(dtype, str):
        return bool(dtype in ("O", "|O", "object"))
    try:
        return bool(np.dtype(dtype).kind == "O")
    except TypeError:
        return False
