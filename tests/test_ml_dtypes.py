"""TensorStore's extra zarr2 types (ml_dtypes): dtype and fill value encoding, arrays round-trip.

The interop proof against TensorStore itself is tests/interop/test_tensorstore_dtypes.py.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import azarr
from azarr.errors import MetadataError
from azarr.metadata import ArrayMetadata, decode_fill_value, dtype_from_json, dtype_to_json, encode_fill_value

NAMES = [
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e4m3b11fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "int4",
]


@pytest.mark.parametrize("name", NAMES)
def test_dtype_by_bare_name(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    assert dtype_to_json(dtype) == name
    assert dtype_from_json(name) == dtype


def test_structured_fields_keep_ml_types() -> None:
    dtype = np.dtype([("a", ml_dtypes.bfloat16), ("b", "<i2", (2,)), ("c", [("x", ml_dtypes.int4)])])
    encoded = dtype_to_json(dtype)
    assert encoded == [["a", "bfloat16"], ["b", "<i2", [2]], ["c", [["x", "int4"]]]]
    assert dtype_from_json(encoded) == dtype


@pytest.mark.parametrize("text", ["<bfloat16", "uint4", "float8_e4m3", "BFLOAT16"])
def test_names_tensorstore_refuses_are_refused(text: str) -> None:
    with pytest.raises(MetadataError, match="dtype"):
        dtype_from_json(text)


@pytest.mark.parametrize(
    ("name", "value", "json_value"),
    [
        ("bfloat16", 1.5, 1.5),
        ("bfloat16", float("nan"), "NaN"),
        ("bfloat16", "-Infinity", "-Infinity"),
        ("float8_e5m2", float("inf"), "Infinity"),
        ("float8_e4m3fn", 0.5, 0.5),
        ("int4", -3, -3),
        ("int4", 7, 7),
    ],
)
def test_fill_values(name: str, value: object, json_value: object) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    assert encode_fill_value(value, dtype) == json_value
    decoded = decode_fill_value(json_value, dtype)
    assert decoded.dtype == dtype
    assert encode_fill_value(decoded, dtype) == json_value


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("float8_e4m3fn", "Infinity", "cannot be represented"),  # no infinities in the fn types
        ("float8_e4m3fn", 1e6, "cannot be represented"),
        ("bfloat16", "nan", "only strings allowed"),
        ("bfloat16", True, "number"),
        ("int4", 8, "out of range"),
        ("int4", 1.5, "integer"),
    ],
)
def test_bad_fill_values_name_the_problem(name: str, value: object, problem: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    with pytest.raises(MetadataError, match=problem):
        decode_fill_value(value, dtype)


def test_int4_fill_is_sign_extended_like_tensorstore() -> None:
    fill = decode_fill_value(-3, np.dtype(ml_dtypes.int4))
    assert np.array(fill).tobytes() == b"\xfd"


def test_zarray_document_round_trip() -> None:
    meta = ArrayMetadata.from_json(
        json.dumps(
            {
                "zarr_format": 2,
                "shape": [4],
                "chunks": [2],
                "dtype": "bfloat16",
                "compressor": None,
                "fill_value": "NaN",
                "filters": None,
                "order": "C",
            }
        ).encode()
    )
    assert meta.dtype == np.dtype(ml_dtypes.bfloat16)
    assert json.loads(meta.to_json())["dtype"] == "bfloat16"
    assert json.loads(meta.to_json())["fill_value"] == "NaN"


@pytest.mark.parametrize("name", NAMES)
async def test_array_round_trip_in_memory(name: str) -> None:
    dtype = np.dtype(getattr(ml_dtypes, name))
    data = np.arange(-4, 6).astype(np.float32).astype(dtype).reshape(2, 5)
    arr = await azarr.array(data, chunks=(1, 3))
    assert arr.dtype == dtype
    out = await arr.getitem(...)
    assert out.tobytes() == data.tobytes()
    part = await arr.getitem((slice(None), slice(1, 4)))
    assert part.tobytes() == data[:, 1:4].tobytes()
