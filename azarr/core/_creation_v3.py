"""Zarr v3 array metadata from creation arguments, as zarr-python 3's ``create_array`` spells them.

``codecs`` gives the whole chain; otherwise it is ``filters`` (array -> array),
``serializer`` (array -> bytes, ``"auto"``: ``bytes``, or ``vlen-utf8``/``vlen-bytes``
for strings) and ``compressors`` (bytes -> bytes, ``"auto"``: Zstd level 0, zarr-python
3's default). zarr-python 2's ``compressor=`` is read as one compressor, and
``order="F"`` as a ``transpose`` reversing the axes (TensorStore's zarr3 layout), so
a call written for v2 creates the v3 array it means. ``shards`` (zarr-python 3's name)
makes ``chunks`` the inner chunks of shards of that shape: the chain becomes the inner
codecs of one ``sharding_indexed`` codec (index ``bytes`` + ``crc32c`` at the end, or
``{"shape": ..., "index_location": "start"}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from azarr.codecs._sharding import SHARDING_CODEC, default_index_codecs
from azarr.codecs._v3 import default_serializer, normalize_v3_codec, normalize_v3_codecs
from azarr.core._normalize import normalize_chunks, normalize_shape
from azarr.metadata import ZARR_JSON, ArrayV3Metadata, ChunkKeyEncoding
from azarr.metadata._v3_dtype import StringKind, default_fill_value

__all__ = ["build_v3_array_metadata", "v3_dtype_of"]

#: zarr-python 3's default compressors for v3 arrays.
DEFAULT_V3_COMPRESSORS: tuple[dict[str, Any], ...] = (
    {"name": "zstd", "configuration": {"level": 0, "checksum": False}},
)


def v3_dtype_of(dtype: Any) -> tuple[np.dtype[Any], StringKind]:
    """The in-memory dtype and variable-length kind of a creation ``dtype`` (``str`` and NumPy's
    ``StringDType``: ``string``; ``bytes``: ``variable_length_bytes``; ``object``: ``string``).

    Raises
    ------
    TypeError
        Not a data type.
    """
    if dtype is str or (isinstance(dtype, str) and dtype in ("str", "string", "T")):
        return np.dtype(object), "string"
    if dtype is bytes or (isinstance(dtype, str) and dtype in ("bytes", "variable_length_bytes")):
        return np.dtype(object), "bytes"
    resolved = np.dtype(dtype)
    if resolved.kind == "T":
        return np.dtype(object), "string"
    if resolved.hasobject:
        return resolved, "string"
    if resolved.fields is not None:
        native = np.dtype([(n, resolved.fields[n][0].newbyteorder("=")) for n in resolved.names or ()])
        return native, None
    return resolved.newbyteorder("=") if resolved.byteorder not in ("|",) else resolved, None


def _chunk_key_encoding(value: Any, separator: str | None) -> ChunkKeyEncoding:
    if value is None:
        return ChunkKeyEncoding("default", separator or "/")  # type: ignore[arg-type]
    if isinstance(value, ChunkKeyEncoding):
        return value
    if isinstance(value, Mapping) and "name" in value and "configuration" not in value:
        value = {"name": value["name"], "configuration": {k: v for k, v in value.items() if k != "name"}}
    return ChunkKeyEncoding.from_json(value, where="chunk_key_encoding")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence):
        return [value]
    return list(value)


#: The configuration zarr-python 3's codec classes default to, for codecs given by name only
#: (``compressors=["zstd", "crc32c"]``); ``blosc``'s ``typesize``/``shuffle`` follow the data type.
_CODEC_DEFAULTS: dict[str, dict[str, Any]] = {
    "zstd": {"level": 0, "checksum": False},
    "gzip": {"level": 5},
    "blosc": {"cname": "zstd", "clevel": 5, "blocksize": 0},
}


def _with_typesize(entry: dict[str, Any], itemsize: int) -> dict[str, Any]:
    """An entry completed as zarr-python 3 completes it: a core codec's default configuration
    under what was given, and a ``blosc`` entry's ``typesize``/``shuffle`` from the data type."""
    name = entry.get("name")
    if name not in _CODEC_DEFAULTS:
        return entry
    config = {**_CODEC_DEFAULTS[str(name)], **dict(entry.get("configuration", {}))}
    if name == "blosc":
        config.setdefault("typesize", itemsize)
        if config.get("shuffle") in (None, -1):
            config["shuffle"] = "bitshuffle" if itemsize == 1 else "shuffle"
    return {"name": name, "configuration": config}


def _shards(value: Any, ndim: int) -> tuple[tuple[int, ...], str]:
    """The shard shape and index location of zarr-python 3's ``shards=``: a shape, or
    ``{"shape": ..., "index_location": "start" | "end"}``.

    Raises
    ------
    ValueError
        Not one positive integer per dimension, or another index location.
    """
    location = "end"
    if isinstance(value, Mapping):
        unknown = set(value) - {"shape", "index_location"}
        if unknown:
            raise ValueError(f"shards= takes 'shape' and 'index_location', got {sorted(unknown)}")
        location = value.get("index_location", "end")
        value = value.get("shape")
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,) * ndim
    if (
        not isinstance(value, Sequence)
        or len(value) != ndim
        or not all(isinstance(v, int | np.integer) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise ValueError(f"shards must be {ndim} positive integers (the shard shape), got {value!r}")
    if location not in ("start", "end"):
        raise ValueError(f"shards index_location must be 'start' or 'end', got {location!r}")
    return tuple(int(v) for v in value), location


def build_v3_array_metadata(
    shape: int | tuple[int, ...],
    *,
    chunks: Any,
    dtype: Any,
    fill_value: Any,
    order: str,
    compressor: Any = "default",
    compressors: Any = "auto",
    filters: Any = None,
    serializer: Any = "auto",
    codecs: Any = None,
    object_codec: Any = None,
    dimension_separator: str | None = None,
    chunk_key_encoding: Any = None,
    dimension_names: Sequence[str | None] | None = None,
    attributes: Mapping[str, Any] | None = None,
    shards: Any = None,
    key: str = ZARR_JSON,
) -> ArrayV3Metadata:
    """Validated v3 metadata from creation arguments (see the module docstring).

    Raises
    ------
    MetadataError
        An invalid combination (unknown codec, wrong kind order, a fill value the type
        cannot hold, a dtype with no v3 spelling); nothing is written.
    TypeError
        A codec that is neither a v3 entry, a name, nor a numcodecs codec.
    ValueError
        ``order`` is not ``"C"``/``"F"``, or bad shape/chunks.
    """
    memory_dtype, string_kind = v3_dtype_of(dtype)
    full_shape = normalize_shape(shape)
    chunk_shape = normalize_chunks(chunks, full_shape, memory_dtype.itemsize)
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    itemsize = memory_dtype.itemsize
    if codecs is not None:
        chain = [_with_typesize(e, itemsize) for e in normalize_v3_codecs(_as_list(codecs))]
    else:
        chain = []
        if order == "F" and len(full_shape) > 1:
            chain.append(
                {"name": "transpose", "configuration": {"order": list(reversed(range(len(full_shape))))}}
            )
        chain.extend(normalize_v3_codecs(_as_list(filters)))
        if serializer == "auto" or serializer is None:
            if object_codec is not None:
                chain.append(normalize_v3_codec(object_codec))
            else:
                chain.append(default_serializer(memory_dtype, "bytes" if string_kind == "bytes" else None))
        else:
            chain.append(normalize_v3_codec(serializer))
        if compressors == "auto":
            if compressor == "default":
                bytes_codecs = [dict(c) for c in DEFAULT_V3_COMPRESSORS]
            elif compressor is None or compressor in ("none", False):
                bytes_codecs = []
            else:
                bytes_codecs = normalize_v3_codecs(_as_list(compressor))
        else:
            bytes_codecs = normalize_v3_codecs(_as_list(compressors))
        chain.extend(_with_typesize(e, itemsize) for e in bytes_codecs)
    grid_shape = chunk_shape
    if shards is not None:
        # zarr-python 3's create_array(chunks=inner, shards=outer): the chain built above
        # encodes the inner chunks, and the array's one codec is sharding_indexed.
        shard_shape, location = _shards(shards, len(full_shape))
        chain = [
            {
                "name": SHARDING_CODEC,
                "configuration": {
                    "chunk_shape": list(chunk_shape),
                    "codecs": chain,
                    "index_codecs": default_index_codecs(),
                    "index_location": location,
                },
            }
        ]
        grid_shape = shard_shape
    fill = default_fill_value(memory_dtype, string_kind) if fill_value is None else fill_value
    if string_kind == "bytes" and isinstance(fill, str):
        fill = fill.encode()
    metadata = ArrayV3Metadata(
        shape=full_shape,
        chunks=grid_shape,
        dtype=memory_dtype,
        codecs=tuple(chain),
        fill_value=fill,
        chunk_key_encoding=_chunk_key_encoding(chunk_key_encoding, dimension_separator),
        string_kind=string_kind,
        dimension_names=None if dimension_names is None else tuple(dimension_names),
        attributes=dict(attributes or {}),
    )
    # Round-tripped through the document, so what is returned is what a later open reads.
    return ArrayV3Metadata.from_json(metadata.to_dict(), key=key)
