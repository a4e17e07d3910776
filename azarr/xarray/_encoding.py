"""xarray's Zarr ``encoding`` keys, both ways: what a read reports and what a write accepts.

Reading, a variable's ``encoding`` holds what xarray's ``zarr`` engine reports
(``ZarrStore.open_store_variable``): ``chunks``, ``preferred_chunks``,
``compressors`` (a tuple of numcodecs codecs: a v2 array's compressor, or empty),
``filters`` (a tuple), ``shards`` (the shard shape, or None), and for Zarr format 3 ``serializer``
(the array -> bytes codec as its ``zarr.json`` entry). xarray over zarr-python 3
reports zarr-python's codec objects there; azarr reports numcodecs codecs, which
both formats and every numcodecs-based reader take back.

Writing, the keys xarray 2026.9 accepts (``extract_zarr_variable_encoding``:
``chunks``, ``compressors``, ``filters``, ``serializer``, ``chunk_key_encoding``,
``shards``, ``write_empty_chunks``, ``cache_metadata``, and ``fill_value`` for
format 3) become `azarr.create` arguments; zarr-python 2's single ``compressor``
is accepted too, as azarr's own spelling. Codecs may be numcodecs codecs, their
config dicts, Zarr v3 entries (``{"name": "blosc", "configuration": {...}}``) or
zarr-python 3 codec objects (``zarr.codecs.BloscCodec()``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numcodecs
import numpy as np
from xarray.coding.strings import check_vlen_dtype

from azarr.api.creation import build_array_metadata
from azarr.core import AsyncArray
from azarr.core._creation_v3 import build_v3_array_metadata
from azarr.metadata import ArrayV3Metadata
from azarr.xarray._compat import DIMENSION_KEY

#: azarr's spelling beside xarray's keys (zarr-python 2's, one codec or None).
COMPRESSOR_KEY = "compressor"
_UNSET: Any = object()
#: Zarr v3 array -> bytes codecs (``serializer``); sharding is issue #30.
_SERIALIZERS = frozenset({"bytes", "vlen-utf8", "vlen-bytes"})


def read_encoding(array: AsyncArray, dims: Sequence[str]) -> dict[str, Any]:
    """The ``encoding`` xarray's ``zarr`` engine reports for ``array``."""
    encoding: dict[str, Any] = {
        "chunks": tuple(array.chunks),
        "preferred_chunks": dict(zip(dims, array.chunks, strict=True)),
        "compressors": array.compressors,
        "filters": tuple(array.filters or ()),
        "shards": array.shards,
    }
    metadata = array.metadata
    if isinstance(metadata, ArrayV3Metadata):
        encoding["serializer"] = next(
            (dict(c) for c in metadata.codecs if c.get("name") in _SERIALIZERS), None
        )
    return encoding


def _codec(value: Any, *, role: str, name: Any) -> Any:
    """A numcodecs codec from a codec or its config dict (zarr-python 3 takes both)."""
    if isinstance(value, Mapping):
        try:
            return numcodecs.get_codec(dict(value))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"variable {name!r}: cannot make a codec of {role} {value!r}: {exc}") from exc
    if hasattr(value, "get_config"):
        return value
    raise TypeError(
        f"variable {name!r}: {role} must be a numcodecs codec or its config dict, got {type(value).__name__}"
    )


def _compressor(encoding: dict[str, Any], name: Any) -> Any:
    """``compressors`` (xarray) or ``compressor`` (zarr-python 2) as one codec, None, or "default"."""
    compressors = encoding.pop("compressors", _UNSET)
    compressor = encoding.pop(COMPRESSOR_KEY, _UNSET)
    if compressors is not _UNSET and compressor is not _UNSET:
        raise ValueError(f"variable {name!r}: give encoding 'compressors' or 'compressor', not both")
    if compressors is _UNSET:
        return "default" if compressor is _UNSET or compressor == "auto" else compressor
    if compressors is None or compressors == "auto":
        return None if compressors is None else "default"
    if isinstance(compressors, Mapping) or hasattr(compressors, "get_config"):
        compressors = (compressors,)
    chain = list(compressors)
    if len(chain) > 1:
        raise ValueError(
            f"variable {name!r}: a Zarr format 2 array has one compressor, got compressors={compressors!r}"
        )
    return _codec(chain[0], role="compressor", name=name) if chain else None


def _filters(value: Any, name: Any) -> list[Any] | None:
    if value is None or value == "auto":
        return None
    chain = [value] if isinstance(value, Mapping) or hasattr(value, "get_config") else list(value)
    return [_codec(f, role="filter", name=name) for f in chain] or None


def _dimension_separator(value: Any, name: Any) -> str | None:
    """The v2 ``dimension_separator`` from a ``chunk_key_encoding`` (dict or zarr-python object)."""
    if value is None:
        return None
    spec = value.to_dict() if hasattr(value, "to_dict") else value
    if not isinstance(spec, Mapping) or spec.get("name") != "v2":
        raise ValueError(
            f"variable {name!r}: a Zarr format 2 array takes chunk_key_encoding "
            f"{{'name': 'v2', 'configuration': {{'separator': '.' or '/'}}}}, got {value!r}"
        )
    separator = (spec.get("configuration") or {}).get("separator", ".")
    if separator not in (".", "/"):
        raise ValueError(f"variable {name!r}: chunk key separator must be '.' or '/', got {separator!r}")
    return str(separator)


def _v3_codecs(value: Any, *, role: str) -> Any:
    """A v3 codec list from ``encoding``: None or ``()`` is none, ``"auto"`` azarr's default,
    one codec or a sequence of codecs (any spelling `normalize_v3_codec` takes)."""
    if value is None:
        return []
    if isinstance(value, str):
        return value if value == "auto" else [value]
    if isinstance(value, Mapping) or hasattr(value, "get_config") or hasattr(value, "to_dict"):
        return [value]
    if not isinstance(value, Sequence):
        raise TypeError(f"{role} must be a codec or a sequence of codecs, got {type(value).__name__}")
    return list(value)


def _v3_arguments(enc: dict[str, Any], name: Any) -> dict[str, Any]:
    """``enc``'s codec keys as `azarr.create` arguments for a Zarr format 3 array (consumed).

    Raises
    ------
    ValueError
        Both ``compressors`` and ``compressor``, or ``shards="auto"`` (give the shard shape).
    """
    compressors = enc.pop("compressors", _UNSET)
    compressor = enc.pop(COMPRESSOR_KEY, _UNSET)
    if compressors is not _UNSET and compressor is not _UNSET:
        raise ValueError(f"variable {name!r}: give encoding 'compressors' or 'compressor', not both")
    if compressors is _UNSET:
        compressors = "auto" if compressor is _UNSET else compressor
    shards = enc.pop("shards", None)
    if isinstance(shards, str):
        raise ValueError(f"variable {name!r}: encoding shards={shards!r}: give the shard shape (a tuple)")
    serializer = enc.pop("serializer", "auto")
    chunk_key_encoding = enc.pop("chunk_key_encoding", None)
    if hasattr(chunk_key_encoding, "to_dict"):  # a zarr-python 3 ChunkKeyEncoding
        chunk_key_encoding = chunk_key_encoding.to_dict()
    return {
        "compressors": _v3_codecs(compressors, role="compressors"),
        "filters": _v3_codecs(enc.pop("filters", None), role="filters") or None,
        "serializer": "auto" if serializer is None else serializer,
        "chunk_key_encoding": chunk_key_encoding,
        "shards": shards,
    }


def _codec_name(codec: Any) -> Any:
    """A codec's name in any spelling (numcodecs ``codec_id``, config ``id``, v3 ``name``)."""
    if hasattr(codec, "to_dict") and not hasattr(codec, "get_config"):
        codec = codec.to_dict()
    if isinstance(codec, Mapping):
        return codec.get("name", codec.get("id"))
    return getattr(codec, "codec_id", None)


def _says_nothing_in_v2(serializer: Any) -> bool:
    """A v3 serializer a v2 array has without saying it: little-endian ``bytes`` (a v2 dtype
    carries its byte order), ``vlen-utf8``/``vlen-bytes`` (its object codec). It comes with
    the encoding of a Zarr v3 variable written as v2, which xarray's own engine refuses."""
    entry = serializer.to_dict() if hasattr(serializer, "to_dict") else serializer
    if not isinstance(entry, Mapping):
        return False
    config = entry.get("configuration") or {}
    if _codec_name(entry) == "bytes":
        return config.get("endian", "little") in ("little", None)
    return _codec_name(entry) in ("vlen-utf8", "vlen-bytes") and not config


def _v2_arguments(enc: dict[str, Any], name: Any) -> dict[str, Any]:
    """``enc``'s codec keys as `azarr.create` arguments for a Zarr format 2 array (consumed).

    Raises
    ------
    ValueError
        Two compressors, a ``serializer`` or ``shards`` (Zarr format 3 only), a
        non-v2 ``chunk_key_encoding``.
    """
    kwargs: dict[str, Any] = {"compressor": _compressor(enc, name)}
    kwargs["filters"] = _filters(enc.pop("filters", None), name)
    serializer = enc.pop("serializer", None)
    if serializer not in (None, "auto") and not _says_nothing_in_v2(serializer):
        raise ValueError(
            f"variable {name!r}: encoding 'serializer' is for Zarr format 3 arrays, got {serializer!r}"
        )
    if enc.pop("shards", None) is not None:
        raise ValueError(f"variable {name!r}: sharding ('shards') needs Zarr format 3")
    separator = _dimension_separator(enc.pop("chunk_key_encoding", None), name)
    if separator is not None:
        kwargs["dimension_separator"] = separator
    return kwargs


def create_kwargs(
    name: Any,
    *,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    fill_value: Any,
    dims: Sequence[str],
    attrs: dict[str, Any],
    encoding: dict[str, Any],
    write_empty: bool | None,
    overwrite: bool,
    zarr_format: int = 2,
) -> dict[str, Any]:
    """`azarr.AsyncGroup.create_dataset` arguments for one encoded variable.

    ``encoding`` is what ``extract_zarr_variable_encoding`` left (valid keys only,
    ``chunks`` resolved); it is consumed. Everything is validated here, before the
    first write, with `build_array_metadata` / `build_v3_array_metadata` (a bad
    codec or dtype writes nothing). The dimension names go where xarray puts them:
    ``_ARRAY_DIMENSIONS`` in the attributes (format 2), ``dimension_names`` (format 3).

    Raises
    ------
    ValueError
        A codec key the format does not take (see `_v2_arguments`), ``write_empty_chunks``
        given differently in ``encoding`` and as a parameter (xarray's message), or
        invalid metadata.
    """
    enc = dict(encoding)
    kwargs: dict[str, Any] = {
        "shape": shape,
        "dtype": dtype,
        "fill_value": fill_value,
        "overwrite": overwrite,
        "zarr_format": zarr_format,
    }
    chunks = enc.pop("chunks", "auto")
    kwargs["chunks"] = True if chunks == "auto" or chunks is None else tuple(chunks)
    kwargs.update(_v3_arguments(enc, name) if zarr_format == 3 else _v2_arguments(enc, name))
    enc.pop("cache_metadata", None)  # zarr-python's metadata cache; azarr arrays hold theirs
    chosen = enc.pop("write_empty_chunks", None)
    if write_empty is not None and chosen is not None and chosen != write_empty:
        raise ValueError(
            'Differing "write_empty_chunks" values in encoding and parameters: '
            f"encoding has {chosen!r} for {name!r}, write_empty_chunks={write_empty!r}"
        )
    # xarray's default: skip chunks that are all fill_value (zarr-python 3's default).
    kwargs["write_empty_chunks"] = bool(write_empty if write_empty is not None else chosen)
    if enc:
        raise ValueError(f"unexpected encoding parameters for zarr backend: {sorted(enc)!r}")
    if zarr_format == 3:
        if check_vlen_dtype(dtype) is str or dtype.kind == "O":
            kwargs["dtype"] = str  # Zarr v3's "string" type, vlen-utf8 (as xarray asks zarr-python)
            # A v2 variable's encoding lists its object codec as a filter: v3's serializer says it.
            kept = [f for f in kwargs["filters"] or [] if _codec_name(f) not in ("vlen-utf8", "vlen-bytes")]
            kwargs["filters"] = kept or None
        kwargs["attributes"] = dict(attrs)
        kwargs["dimension_names"] = list(dims) or None  # a 0-d array gets none (as zarr-python writes it)
        v3 = {k: kwargs[k] for k in ("compressors", "filters", "serializer", "chunk_key_encoding", "shards")}
        build_v3_array_metadata(
            shape,
            chunks=kwargs["chunks"],
            dtype=kwargs["dtype"],
            fill_value=fill_value,
            order="C",
            dimension_names=kwargs["dimension_names"],
            attributes=kwargs["attributes"],
            key=f"{name}/zarr.json",
            **v3,
        )
        return kwargs
    filters = kwargs["filters"]
    if check_vlen_dtype(dtype) is str or dtype.kind == "O":
        # UTF-8 strings as zarr-python stores dtype=str in Zarr format 2: an object array whose
        # first filter is the VLenUTF8 object codec (azarr puts object_codec first).
        kwargs["dtype"] = object
        kwargs["object_codec"] = numcodecs.VLenUTF8()
        filters = [f for f in filters or [] if getattr(f, "codec_id", None) != "vlen-utf8"] or None
    kwargs["filters"] = filters
    kwargs["attributes"] = {**attrs, DIMENSION_KEY: list(dims)}
    build_array_metadata(
        shape,
        chunks=kwargs["chunks"],
        dtype=kwargs["dtype"],
        compressor=kwargs["compressor"],
        fill_value=fill_value,
        order="C",
        filters=filters,
        object_codec=kwargs.get("object_codec"),
        dimension_separator=kwargs.get("dimension_separator"),
        key=f"{name}/.zarray",
    )
    return kwargs


def created_dimensions(kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """The dimension names `create_kwargs` gave an array (``dimension_names`` or ``_ARRAY_DIMENSIONS``)."""
    if kwargs.get("zarr_format") == 3:
        return tuple(kwargs.get("dimension_names") or ())
    return tuple(kwargs["attributes"][DIMENSION_KEY])
