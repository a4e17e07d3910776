"""An array's codec chain in words, the same for both formats (``info``, the CLI), and as
creation arguments of either format (``copy``, the ``*_like`` functions)."""

from __future__ import annotations

from typing import Any

from azarr.codecs._v3 import numcodecs_to_v3, v3_endian_of
from azarr.metadata import AnyArrayMetadata, ArrayV3Metadata

__all__ = ["codec_entries", "describe_codec", "encoding_arguments"]


def codec_entries(metadata: AnyArrayMetadata) -> list[dict[str, Any]]:
    """The codec chain as Zarr v3 entries: a v3 array's ``codecs``; for a v2 array its
    ``order`` (``"F"``: a ``transpose``), ``filters``, its memory (``bytes``) and ``compressor``."""
    if isinstance(metadata, ArrayV3Metadata):
        return [dict(c) for c in metadata.codecs]
    entries: list[dict[str, Any]] = []
    if metadata.order == "F" and metadata.ndim > 1:
        entries.append(
            {"name": "transpose", "configuration": {"order": list(reversed(range(metadata.ndim)))}}
        )
    filters = list(metadata.filters or ())
    if metadata.dtype.hasobject and filters:
        entries.append(numcodecs_to_v3(filters.pop(0)))
    else:
        serializer: dict[str, Any] = {"name": "bytes"}
        if metadata.dtype.newbyteorder("<") != metadata.dtype.newbyteorder(">"):
            serializer["configuration"] = {"endian": v3_endian_of(metadata.dtype)}
        entries = [*entries, *(numcodecs_to_v3(f) for f in filters), serializer]
        filters = []
    entries.extend(numcodecs_to_v3(f) for f in filters)
    if metadata.compressor is not None:
        entries.append(numcodecs_to_v3(metadata.compressor))
    return entries


def describe_codec(entry: Any) -> str:
    """``name(key=value, ...)`` of a v3 codec entry (the codec lists of ``sharding_indexed``
    described alike: ``codecs=[bytes(endian='little'), zstd(level=0)]``)."""
    if isinstance(entry, str):
        return entry
    config = entry.get("configuration") or {}

    def value(v: Any) -> str:
        if isinstance(v, list) and v and all(isinstance(c, dict) and "name" in c for c in v):
            return "[" + ", ".join(describe_codec(c) for c in v) + "]"
        return repr(v)

    args = ", ".join(f"{k}={value(v)}" for k, v in config.items())
    return f"{entry.get('name')}({args})"


def encoding_arguments(
    metadata: AnyArrayMetadata, zarr_format: int, *, compressor: bool = True
) -> dict[str, Any]:
    """Creation arguments (`azarr.create`'s) that store chunks as ``metadata``'s are stored,
    in ``zarr_format``.

    To Zarr v3: the codec list (`codec_entries`: a v2 array's ``order``, ``filters`` and
    ``compressor`` spelled as v3 codecs), and a v3 array's chunk key encoding and dimension
    names; for a sharded array also ``shards``, its shard shape (with the codec list, which
    is the one ``sharding_indexed`` codec, it is the ``chunks`` to create with; without it,
    ``shards=`` beside the inner ``chunks``). A sharded array copied to Zarr v2 gets its
    inner chunks as chunks. To Zarr v2: ``compressor``, ``filters`` and ``order`` (a v3 chain's layout, its
    array -> array numcodecs codecs, its object codec first, its bytes -> bytes codec). The
    v3 ``bytes`` codec's byte order is not kept in v2 (values are written in the dtype's own).
    ``compressor=False`` leaves the v2 ``compressor`` out (the caller gives its own).

    Raises
    ------
    ValueError
        A v3 chain a ``.zarray`` cannot say: a ``transpose`` that neither keeps nor reverses
        the axes, or (with ``compressor``) more than one bytes -> bytes codec (``zstd`` then
        ``crc32c``); the message names the codecs and says to pass ``compressor=`` instead.
    """
    if zarr_format == 3:
        arguments: dict[str, Any] = {"codecs": codec_entries(metadata)}
        if metadata.sharding is not None:
            # The one sharding_indexed codec: ``chunks`` is then the shard shape, and ``shards``
            # says so for callers that build their own inner chain instead of these codecs.
            arguments["shards"] = metadata.chunks
        if isinstance(metadata, ArrayV3Metadata):
            arguments["chunk_key_encoding"] = metadata.chunk_key_encoding.to_json()
            if metadata.dimension_names is not None:
                arguments["dimension_names"] = list(metadata.dimension_names)
        return arguments
    if not isinstance(metadata, ArrayV3Metadata):
        arguments = {
            "compressor": metadata.compressor,
            "filters": list(metadata.filters) if metadata.filters else None,
            "order": metadata.order,
        }
    else:
        chain = metadata.chain
        if chain.permutation is not None or (compressor and len(chain.compressors) > 1):
            names = [describe_codec(c) for c in metadata.codecs]
            raise ValueError(
                f"the codecs {names} cannot be stored in a Zarr v2 array (one compressor, C or F "
                "order); pass compressor= (and filters=) for the Zarr v2 array"
            )
        serializers = [f for f in chain.filters if f["id"] in ("vlen-utf8", "vlen-bytes")]
        others = [f for f in chain.filters if f["id"] not in ("vlen-utf8", "vlen-bytes")]
        filters = [*serializers, *others]  # a v2 object codec is the first filter
        arguments = {
            "compressor": dict(chain.compressors[0]) if chain.compressors else None,
            "filters": [dict(f) for f in filters] or None,
            "order": chain.order,
        }
    if not compressor:
        del arguments["compressor"]
    return arguments
