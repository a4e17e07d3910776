"""Zarr metadata documents, both formats side by side.

Zarr v2: ``.zarray``, ``.zgroup``, ``.zattrs`` and ``.zmetadata``, encoded as
zarr-python 2.18 writes them byte for byte (``json.dumps(indent=4, sort_keys=True)``).
Zarr v3: ``zarr.json`` of arrays and groups (with inline consolidated metadata),
encoded as zarr-python 3 writes them (``json.dumps(indent=2)``). `ArrayMetadata`
and `ArrayV3Metadata` describe an array the same way (shape, chunks, dtype,
fill value, chunk keys, a `CodecChain`), so nothing above this package asks which
format it reads. Pure functions and frozen dataclasses, no I/O.
"""

from __future__ import annotations

from azarr.metadata._array import REQUIRED_ARRAY_KEYS, ArrayMetadata
from azarr.metadata._codecs import OBJECT_CODEC_IDS, is_known_codec
from azarr.metadata._consolidated import CONSOLIDATED_FORMAT, build_consolidated, parse_consolidated
from azarr.metadata._dtype import dtype_from_json, dtype_to_json, normalize_dtype
from azarr.metadata._fill_value import decode_fill_value, encode_fill_value
from azarr.metadata._group import GroupMetadata, parse_attributes
from azarr.metadata._json import decode_json, encode_json
from azarr.metadata._keys import (
    ZARR_JSON,
    ZARRAY,
    ZATTRS,
    ZGROUP,
    ZMETADATA,
    is_metadata_key,
    is_v2_metadata_key,
)
from azarr.metadata._ml_dtypes import ML_DTYPE_KINDS, ml_dtype, ml_dtype_name
from azarr.metadata._v3_array import ArrayV3Metadata, ChunkKeyEncoding, encode_v3_json
from azarr.metadata._v3_dtype import v3_dtype_from_json, v3_dtype_to_json
from azarr.metadata._v3_group import GroupV3Metadata, parse_v3_consolidated, v3_node_type

#: Either format's array metadata: what arrays, pipelines and integrations use.
AnyArrayMetadata = ArrayMetadata | ArrayV3Metadata

__all__ = [
    "AnyArrayMetadata",
    "ArrayV3Metadata",
    "ChunkKeyEncoding",
    "GroupV3Metadata",
    "ZARR_JSON",
    "encode_v3_json",
    "is_v2_metadata_key",
    "parse_v3_consolidated",
    "v3_dtype_from_json",
    "v3_dtype_to_json",
    "v3_node_type",
    "CONSOLIDATED_FORMAT",
    "OBJECT_CODEC_IDS",
    "REQUIRED_ARRAY_KEYS",
    "ZARRAY",
    "ZATTRS",
    "ZGROUP",
    "ZMETADATA",
    "ArrayMetadata",
    "GroupMetadata",
    "build_consolidated",
    "ML_DTYPE_KINDS",
    "decode_fill_value",
    "decode_json",
    "dtype_from_json",
    "dtype_to_json",
    "encode_fill_value",
    "ml_dtype",
    "ml_dtype_name",
    "encode_json",
    "is_known_codec",
    "is_metadata_key",
    "normalize_dtype",
    "parse_attributes",
    "parse_consolidated",
]
