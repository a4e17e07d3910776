"""An array's codec chain in words, the same for both formats (``info``, the CLI)."""

from __future__ import annotations

from typing import Any

from azarr.codecs._v3 import numcodecs_to_v3, v3_endian_of
from azarr.metadata import AnyArrayMetadata, ArrayV3Metadata

__all__ = ["codec_entries", "describe_codec"]


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
    """``name(key=value, ...)`` of a v3 codec entry."""
    if isinstance(entry, str):
        return entry
    config = entry.get("configuration") or {}
    args = ", ".join(f"{k}={v!r}" for k, v in config.items())
    return f"{entry.get('name')}({args})"
