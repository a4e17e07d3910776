"""Zarr v2 metadata documents: ``.zarray``, ``.zgroup``, ``.zattrs`` and ``.zmetadata``.

Pure functions and frozen dataclasses, no I/O: the array and group layers read
the bytes and hand them here. Encoding matches zarr-python 2.18 byte for byte
(``json.dumps(indent=4, sort_keys=True)``), so documents are interchangeable.
"""

from __future__ import annotations

from azarr.metadata._array import REQUIRED_ARRAY_KEYS, ArrayMetadata
from azarr.metadata._codecs import OBJECT_CODEC_IDS, is_known_codec
from azarr.metadata._consolidated import CONSOLIDATED_FORMAT, build_consolidated, parse_consolidated
from azarr.metadata._dtype import dtype_from_json, dtype_to_json, normalize_dtype
from azarr.metadata._fill_value import decode_fill_value, encode_fill_value
from azarr.metadata._group import GroupMetadata, parse_attributes
from azarr.metadata._json import decode_json, encode_json
from azarr.metadata._keys import ZARRAY, ZATTRS, ZGROUP, ZMETADATA, is_metadata_key
from azarr.metadata._ml_dtypes import ML_DTYPE_KINDS, ml_dtype, ml_dtype_name

__all__ = [
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
