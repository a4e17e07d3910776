"""Tests for azarr.metadata: the Zarr v2 documents (.zarray, .zgroup, .zattrs, .zmetadata)."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from typing import Any

import numcodecs
import numpy as np
import pytest

from azarr.errors import MetadataError
from azarr.metadata import (
    OBJECT_CODEC_IDS,
    ZARRAY,
    ZATTRS,
    ZGROUP,
    ZMETADATA,
    ArrayMetadata,
    GroupMetadata,
    build_consolidated,
    decode_fill_value,
    decode_json,
    dtype_from_json,
    dtype_to_json,
    encode_fill_value,
    encode_json,
    is_metadata_key,
    normalize_dtype,
    parse_attributes,
    parse_consolidated,
)

KEY = "grp/arr/.zarray"


def base_document(**changes: Any) -> dict[str, Any]:
    """A valid .zarray document as a dict, with some fields changed (None-valued kept)."""
    document: dict[str, Any] = {
        "zarr_format": 2,
        "shape": [100, 50],
        "chunks": [10, 20],
        "dtype": "<f8",
        "compressor": {"id": "zlib", "level": 1},
        "fill_value": "NaN",
        "order": "C",
        "filters": None,
    }
    document.update(changes)
    return document


def raw_bytes(value: Any, dtype: np.dtype[Any]) -> bytes:
    """The bytes NumPy stores for ``value`` in ``dtype`` (bitwise comparison, NaN-safe)."""
    return np.full((), value, dtype=dtype).tobytes()


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def test_encode_json_matches_zarr2_formatting() -> None:
    document = {"b": [1, 2], "a": {"y": None, "x": "é"}}
    expected = json.dumps(document, indent=4, sort_keys=True, ensure_ascii=True, separators=(",", ": "))
    assert encode_json(document) == expected.encode("ascii")
    assert encode_json(document).startswith(b'{\n    "a": {\n        "x": "\\u00e9",')
    assert not encode_json(document).endswith(b"\n")


def test_encode_json_converts_numpy() -> None:
    document = {
        "i": np.int16(-3),
        "u": np.uint64(2**64 - 1),
        "f": np.float32(0.5),
        "b": np.bool_(True),
        "s": np.str_("x"),
        "arr": np.arange(3, dtype="u1"),
        "nested": (np.float64(1.5), [np.int8(1)]),
    }
    decoded = json.loads(encode_json(document))
    assert decoded == {
        "i": -3,
        "u": 2**64 - 1,
        "f": 0.5,
        "b": True,
        "s": "x",
        "arr": [0, 1, 2],
        "nested": [1.5, [1]],
    }


def test_encode_json_never_emits_raw_nan_or_infinity() -> None:
    encoded = encode_json({"a": math.nan, "b": [np.float32("inf"), -math.inf], "c": np.array([np.nan])})
    assert b"NaN," not in encoded.replace(b'"NaN"', b"")
    assert json.loads(encoded) == {"a": "NaN", "b": ["Infinity", "-Infinity"], "c": ["NaN"]}
    # Standard JSON: a strict parser accepts it.
    json.loads(encoded, parse_constant=lambda name: pytest.fail(f"raw {name} emitted"))


def test_encode_json_int_keys_and_errors() -> None:
    assert json.loads(encode_json({1: "a"})) == {"1": "a"}
    with pytest.raises(TypeError):
        encode_json({"a": object()})
    with pytest.raises(TypeError):
        encode_json({"a": b"bytes"})
    with pytest.raises(TypeError):
        encode_json({(1, 2): "tuple key"})


def test_decode_json_valid() -> None:
    assert decode_json(b'{"a": [1, 2.5, null]}', key="k") == {"a": [1, 2.5, None]}
    assert decode_json('{"a": "\\u00e9"}', key="k") == {"a": "é"}
    assert decode_json('{"a": "é"}'.encode(), key="k") == {"a": "é"}
    assert decode_json(memoryview(b"[1]"), key="k") == [1]
    # zarr-python 2 wrote raw NaN into .zattrs; reading it must work.
    assert math.isnan(decode_json(b'{"a": NaN}', key="k")["a"])


@pytest.mark.parametrize("data", [b"{", b'{"a": }', b"", b"\xff\xfe{}", b'{"a": "\xe9"}'])
def test_decode_json_invalid_names_key(data: bytes) -> None:
    with pytest.raises(MetadataError, match=r"'some/key/\.zattrs'"):
        decode_json(data, key="some/key/.zattrs")


# ---------------------------------------------------------------------------------------------
# dtype
# ---------------------------------------------------------------------------------------------

SIMPLE_TYPESTRS = [
    "|b1",
    "|i1",
    "<i2",
    ">i2",
    "<i4",
    ">i4",
    "<i8",
    ">i8",
    "|u1",
    "<u2",
    ">u2",
    "<u4",
    ">u4",
    "<u8",
    ">u8",
    "<f2",
    ">f2",
    "<f4",
    ">f4",
    "<f8",
    ">f8",
    "<c8",
    ">c8",
    "<c16",
    ">c16",
    "<M8[ns]",
    ">M8[ns]",
    "<M8[Y]",
    "<M8[M]",
    "<M8[W]",
    "<M8[D]",
    "<M8[h]",
    "<M8[m]",
    "<M8[s]",
    "<M8[ms]",
    "<M8[us]",
    "<M8[ps]",
    "<M8[fs]",
    "<M8[as]",
    "<M8[10s]",
    "<M8[25ms]",
    "<m8[ns]",
    ">m8[s]",
    "<m8[3D]",
    "|S1",
    "|S12",
    "<U1",
    "<U7",
    ">U7",
    "|V1",
    "|V16",
    "|O",
]


@pytest.mark.parametrize("typestr", SIMPLE_TYPESTRS)
def test_simple_dtype_round_trip(typestr: str) -> None:
    dtype = np.dtype(typestr)
    assert dtype_to_json(dtype) == typestr
    decoded = dtype_from_json(json.loads(encode_json(dtype_to_json(dtype))))
    assert decoded == dtype
    assert decoded.str == typestr


STRUCTURED = [
    # spec examples
    [["r", "|u1"], ["g", "|u1"], ["b", "|u1"]],
    [["x", "<f4"], ["y", "<f4"], ["z", "<f4", [2, 2]]],
    [["foo", "<f4"], ["bar", [["baz", "<f4"], ["qux", "<i4"]]]],
    # zarr-python 2 tests
    [["a", "<i4"], ["b", "|S10"]],
    [["f0", "<i8"], ["f1", "<f8", [10, 10]], ["f2", "|u1", [5, 10, 15]]],
    # nested with subarrays, mixed byte orders, datetimes and strings
    [["name", "<i4"], ["sub", "<f8", [2, 3]], ["nested", [["a", "<i2"], ["b", ">f4", [2]]]]],
    [["t", "<M8[ns]"], ["dt", ">m8[10s]"], ["s", "|S3"], ["u", ">U2"], ["v", "|V5"], ["c", ">c16"]],
    [["outer", [["inner", [["leaf", ">u8", [2]]]]], [3]], ["flag", "|b1"]],
    # padding (a non-packed layout) and a single field
    [["a", "<i4"], ["", "|V4"], ["b", "<f8"], ["", "|V4"]],
    [["only", "<f2"]],
]


@pytest.mark.parametrize("encoded", STRUCTURED, ids=range(len(STRUCTURED)))
def test_structured_dtype_round_trip(encoded: list[Any]) -> None:
    dtype = dtype_from_json(encoded)
    assert dtype.fields is not None
    assert dtype_to_json(dtype) == encoded
    assert dtype_from_json(json.loads(encode_json(dtype_to_json(dtype)))) == dtype


def test_structured_dtype_from_numpy() -> None:
    dtype = np.dtype([("a", "<i4"), ("sub", "<f8", (2, 3)), ("nested", [("x", "<i2"), ("y", ">f4", (2,))])])
    assert dtype_to_json(dtype) == [
        ["a", "<i4"],
        ["sub", "<f8", [2, 3]],
        ["nested", [["x", "<i2"], ["y", ">f4", [2]]]],
    ]
    assert dtype_from_json(dtype_to_json(dtype)) == dtype
    padded = np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"], "offsets": [0, 8], "itemsize": 20})
    assert dtype_from_json(dtype_to_json(padded)) == padded


def test_dtype_from_json_accepts_non_canonical_byte_order() -> None:
    assert dtype_from_json("<i1").str == "|i1"
    assert dtype_from_json("<b1") == np.dtype(bool)
    assert dtype_from_json("<M8[μs]") == np.dtype("<M8[us]")


@pytest.mark.parametrize(
    "value",
    [
        "float64",
        "f8",
        "=f8",
        "<f16",
        "<c32",
        "<i3",
        "<f",
        "<M8",
        "<m8",
        "<M4[s]",
        "<M8[xx]",
        "<f8[s]",
        "|S0",
        "<U0",
        "|V0",
        "|T",
        "",
        42,
        None,
        True,
        {"a": "<i4"},
        [],
        [["a"]],
        [["a", "<i4", [2], "extra"]],
        [[1, "<i4"]],
        [["", "<i4"]],
        [["a", "<i4"], ["a", "<f8"]],
        [["a", "<i4", [-1]]],
        [["a", "<i4", [True]]],
        [["a", "<i4", 3]],
        [["a", "|O"]],
        [["a", 5]],
        [["a", []]],
        ["<i4"],
        [["a", "float32"]],
    ],
)
def test_dtype_from_json_invalid(value: Any) -> None:
    with pytest.raises(MetadataError) as info:
        dtype_from_json(value, key=KEY)
    assert repr(KEY) in str(info.value)
    assert "'dtype" in str(info.value)


@pytest.mark.parametrize(
    "dtype",
    [
        np.dtype("(2,)<f8"),
        np.dtype("M8"),
        np.dtype("S0"),
        np.dtype([(("title", "a"), "<i4")]),
        np.dtype([("a", "<i4"), ("o", "O")]),
        np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i2"], "offsets": [0, 1]}),
        # NumPy 2's variable-width strings have no Zarr v2 encoding
        *([np.dtypes.StringDType()] if hasattr(np.dtypes, "StringDType") else []),
    ],
    ids=["subarray", "generic-datetime", "S0", "title", "object-field", "overlap", "stringdtype"][
        : 6 + hasattr(np.dtypes, "StringDType")
    ],
)
def test_dtype_to_json_unsupported(dtype: np.dtype[Any]) -> None:
    with pytest.raises(MetadataError, match="'dtype'"):
        dtype_to_json(dtype)


# ---------------------------------------------------------------------------------------------
# fill_value
# ---------------------------------------------------------------------------------------------

FILL_CASES: list[tuple[str | list[Any], Any, Any]] = [
    # dtype, value, JSON (zarr-python 2.18 encoding)
    ("<f8", math.nan, "NaN"),
    ("<f8", math.inf, "Infinity"),
    ("<f8", -math.inf, "-Infinity"),
    ("<f4", np.float32("nan"), "NaN"),
    ("<f4", np.float32("inf"), "Infinity"),
    ("<f4", np.float32("-inf"), "-Infinity"),
    ("<f2", np.float16("nan"), "NaN"),
    ("<f2", np.float16("inf"), "Infinity"),
    ("<f2", np.float16("-inf"), "-Infinity"),
    (">f8", -math.inf, "-Infinity"),
    ("<f8", 0, 0.0),
    ("<f8", -0.0, -0.0),
    ("<f8", 1.5, 1.5),
    ("<f8", 1e300, 1e300),
    ("<f4", 0.1, float(np.float32(0.1))),
    ("<f2", 0.1, float(np.float16(0.1))),
    ("<c8", complex(math.nan, -1), ["NaN", -1.0]),
    ("<c16", complex(math.nan, -1), ["NaN", -1.0]),
    ("<c16", complex(math.inf, -math.inf), ["Infinity", "-Infinity"]),
    (">c8", complex(0, math.inf), [0.0, "Infinity"]),
    ("<c16", complex(1.5, 2), [1.5, 2.0]),
    ("<c8", 0, [0.0, 0.0]),
    ("|b1", True, True),
    ("|b1", False, False),
    ("|b1", 0, False),
    ("|i1", -128, -128),
    ("<i8", -(2**63), -(2**63)),
    (">i8", 2**63 - 1, 2**63 - 1),
    ("<u8", 2**64 - 1, 2**64 - 1),
    ("|u1", np.uint8(255), 255),
    ("<i4", 42, 42),
    ("<M8[s]", np.datetime64("NaT"), -9223372036854775808),
    ("<m8[s]", np.timedelta64("NaT"), -9223372036854775808),
    (">M8[ns]", np.datetime64("NaT"), -9223372036854775808),
    ("<M8[D]", np.datetime64("2020-01-01"), 18262),
    ("<M8[10s]", 3, 3),
    ("<m8[ms]", np.timedelta64(1, "s"), 1000),
    ("|S10", b"foo", "Zm9v"),
    ("|S10", 0, ""),
    ("|S3", b"\x00\x01\x02", "AAEC"),
    ("|S5", "ab", "YWI="),
    ("|V4", b"\x01\x02\x03\x04", "AQIDBA=="),
    ("|V4", 0, "AAAAAA=="),
    ("<U5", "héllo", "héllo"),
    ("<U5", "", ""),
    (">U3", 0, ""),
    ([["a", "<i4"], ["b", "|S10"]], 0, "AAAAAAAAAAAAAAAAAAA="),
    ([["a", "<i4"], ["b", "|S10"]], (1, b"xy"), "AQAAAHh5AAAAAAAAAAA="),
    ([["x", ">u2"], ["y", "<f4", [2]]], (258, [1.0, -2.0]), "AQIAAIA/AAAAwA=="),
    ([["n", [["a", "|i1"]]], ["", "|V1"]], 0, "AAA="),
    ("|O", 0, 0),
    ("|O", "", ""),
    ("|O", "text", "text"),
    ("<f8", None, None),
    ("|S4", None, None),
    ([["a", "<i4"]], None, None),
    ("|O", None, None),
]


def _dtype(spec: str | list[Any]) -> np.dtype[Any]:
    return dtype_from_json(spec)


@pytest.mark.parametrize(("spec", "value", "expected"), FILL_CASES)
def test_fill_value_round_trip(spec: str | list[Any], value: Any, expected: Any) -> None:
    dtype = _dtype(spec)
    encoded = encode_fill_value(value, dtype)
    assert encoded == expected or (isinstance(expected, float) and math.isnan(expected))
    if isinstance(expected, float) and expected == 0:
        assert math.copysign(1, encoded) == math.copysign(1, expected)
    # through real JSON, as stored
    decoded = decode_fill_value(json.loads(encode_json({"v": encoded}))["v"], dtype, key=KEY)
    if expected is None:
        assert decoded is None
        return
    # usable with np.full, and bitwise equal to the value encoded
    filled = np.full((2, 3), decoded, dtype=dtype)
    assert filled.dtype == dtype
    if dtype.kind == "O":
        assert decoded == value
        return
    assert encode_fill_value(decoded, dtype) == encoded
    if dtype.fields is not None:
        # np.full leaves padding bytes uninitialized: compare field values
        assert filled.reshape(-1)[0] == decoded
    else:
        assert filled.reshape(-1)[:1].tobytes() == np.full(1, decoded, dtype=dtype).tobytes()


def test_decoded_fill_value_types() -> None:
    assert isinstance(decode_fill_value("NaN", np.dtype("<f4")), np.float32)
    assert isinstance(decode_fill_value(1, np.dtype(">i2")), np.int16)
    assert isinstance(decode_fill_value(True, np.dtype("|b1")), np.bool_)
    assert isinstance(decode_fill_value([1, 2], np.dtype("<c8")), np.complex64)
    assert isinstance(decode_fill_value("Zm9v", np.dtype("|S4")), np.bytes_)
    assert isinstance(decode_fill_value("AAAAAA==", np.dtype([("a", "<i4")])), np.void)
    assert isinstance(decode_fill_value("AAAAAA==", np.dtype("|V4")), np.void)
    assert decode_fill_value("abc", np.dtype("<U3")) == "abc"
    assert np.isnat(decode_fill_value(-9223372036854775808, np.dtype("<M8[ns]")))
    structured = decode_fill_value("AQAAAHh5AAAAAAAAAAA=", np.dtype([("a", "<i4"), ("b", "|S10")]))
    assert structured["a"] == 1
    assert structured["b"] == b"xy"


def test_structured_fill_value_padding_is_zeroed() -> None:
    dtype = dtype_from_json([["a", "<i2"], ["", "|V6"], ["b", "<f8"]])
    # np.empty/np.full leave padding uninitialized; the encoding must not depend on it.
    source = np.empty(4, dtype=dtype)
    source.view(np.uint8)[:] = 0xFF
    source[0] = (1, 2.0)
    encoded = encode_fill_value(source[0], dtype)
    assert base64.standard_b64decode(encoded)[2:8] == bytes(6)
    assert encode_fill_value((1, 2.0), dtype) == encoded


def test_complex_infinite_imaginary_part_is_exact() -> None:
    # zarr-python 2 computes re + 1j * im, which turns (0, inf) into (nan+infj).
    value = decode_fill_value([0.0, "Infinity"], np.dtype("<c16"))
    assert value.real == 0.0
    assert value.imag == math.inf


@pytest.mark.parametrize(
    ("spec", "json_value", "expected"),
    [
        ("<i4", 2.0, 2),
        ("|b1", 1, True),
        ("|b1", 0, False),
        ("<c16", 1.5, complex(1.5, 0)),
        ("<c8", ["NaN", "Infinity"], complex(math.nan, math.inf)),
        ("<M8[s]", "NaT", np.datetime64("NaT", "s")),
        ("<M8[D]", "2020-01-01", np.datetime64("2020-01-01")),
        # zarr-python 2 leniency for S: a non-Base64 string or a number is cast as is
        ("|S5", "foo", b"foo"),
        ("|S5", 0, b"0"),
        ("<U3", 0, "0"),
        ("|O", [1, "a"], [1, "a"]),
        ("|O", {"k": 1}, {"k": 1}),
    ],
)
def test_decode_fill_value_lenient(spec: str, json_value: Any, expected: Any) -> None:
    dtype = _dtype(spec)
    decoded = decode_fill_value(json_value, dtype)
    if dtype.kind in "OU":
        assert decoded == expected
    else:
        assert raw_bytes(decoded, dtype) == raw_bytes(expected, dtype)


@pytest.mark.parametrize(
    ("spec", "json_value"),
    [
        ("<f8", "nan"),
        ("<f8", "inf"),
        ("<f8", "+Infinity"),
        ("<f8", True),
        ("<f8", [1.0]),
        ("<f8", {"a": 1}),
        ("<f4", 1e300),
        ("<f2", 70000),
        ("<c8", [1.0]),
        ("<c8", [1.0, 2.0, 3.0]),
        ("<c8", "NaN"),
        ("<c8", [1e300, 0]),
        ("<c8", ["x", 0]),
        ("|i1", 128),
        ("|i1", -129),
        ("|u1", -1),
        ("<u8", 2**64),
        ("<i4", 1.5),
        ("<i4", "1"),
        ("<i4", True),
        ("<i4", [1]),
        ("|b1", "true"),
        ("|b1", 2),
        ("|b1", 1.0),
        ("<M8[s]", 1.5),
        ("<M8[s]", True),
        ("<M8[s]", "not a date"),
        ("<M8[s]", 2**63),
        ("|S2", "Zm9vYmFy"),
        ("|S2", ["a"]),
        ("|V4", "AAA="),
        ("|V4", "AAAAAAAA"),
        ("|V4", "not base64!"),
        ("|V4", 0),
        ([["a", "<i4"], ["b", "|S10"]], "AAAA"),
        ([["a", "<i4"]], [0]),
        ("<U3", ["a"]),
        ("<U3", True),
    ],
)
def test_decode_fill_value_invalid(spec: str | list[Any], json_value: Any) -> None:
    with pytest.raises(MetadataError) as info:
        decode_fill_value(json_value, _dtype(spec), key=KEY)
    assert repr(KEY) in str(info.value)
    assert "'fill_value'" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ("|u1", 300),
        ("|u1", np.int64(300)),
        ("|u1", -1),
        ("<i2", 2**20),
        ("<f4", 1e300),
        ("<U3", b"abc"),
        ("<U3", 1),
        ("|V4", b"ab"),
        ([["a", "<i4"]], b"abcdefgh"),
        ("|b1", "yes"),
        ("|O", object()),
        ("<M8[s]", "not a date"),
    ],
)
def test_encode_fill_value_invalid(spec: str | list[Any], value: Any) -> None:
    with pytest.raises(MetadataError, match="'fill_value'"):
        encode_fill_value(value, _dtype(spec))


def test_fill_value_structured_with_object_field_unsupported() -> None:
    dtype = np.dtype([("x", "<f8"), ("y", "O")])
    assert encode_fill_value(None, dtype) is None
    assert decode_fill_value(None, dtype) is None
    with pytest.raises(MetadataError):
        encode_fill_value((0.0, None), dtype)
    with pytest.raises(MetadataError):
        decode_fill_value("AAAA", dtype)


# ---------------------------------------------------------------------------------------------
# .zarray: documents exactly as zarr-python 2.18 writes them
# ---------------------------------------------------------------------------------------------

# Written by zarr-python's own test fixture generator (zarr-python repo, fixture/0/3/.zarray):
# an older numcodecs, hence no "blocksize" in the blosc config.
ZARR2_FIXTURE_I1 = b"""{
    "chunks": [
        100
    ],
    "compressor": {
        "clevel": 1,
        "cname": "zstd",
        "id": "blosc",
        "shuffle": 0
    },
    "dtype": "|i1",
    "fill_value": 0,
    "filters": null,
    "order": "F",
    "shape": [
        1111
    ],
    "zarr_format": 2
}"""

# zarr.create((20, 20), chunks=(10, 10), dtype="i4", fill_value=42, compressor=Zlib(level=1))
# (the Zarr v2 spec's own example)
ZARR2_SPEC_EXAMPLE = b"""{
    "chunks": [
        10,
        10
    ],
    "compressor": {
        "id": "zlib",
        "level": 1
    },
    "dtype": "<i4",
    "fill_value": 42,
    "filters": null,
    "order": "C",
    "shape": [
        20,
        20
    ],
    "zarr_format": 2
}"""

# zarr.create((100, 100), chunks=(10, 10), dtype="f8", fill_value=np.nan,
#             dimension_separator="/")  with numcodecs' default Blosc
ZARR2_NESTED_NAN = b"""{
    "chunks": [
        10,
        10
    ],
    "compressor": {
        "blocksize": 0,
        "clevel": 5,
        "cname": "lz4",
        "id": "blosc",
        "shuffle": 1
    },
    "dimension_separator": "/",
    "dtype": "<f8",
    "fill_value": "NaN",
    "filters": null,
    "order": "C",
    "shape": [
        100,
        100
    ],
    "zarr_format": 2
}"""

# zarr-python 2.18 zarr/tests/test_meta.py test_encode_decode_array_2 (structured + delta filter)
ZARR2_STRUCTURED = b"""{
    "chunks": [
        10,
        10
    ],
    "compressor": {
        "blocksize": 0,
        "clevel": 3,
        "cname": "lz4",
        "id": "blosc",
        "shuffle": 2
    },
    "dimension_separator": ".",
    "dtype": [
        [
            "a",
            "<i4"
        ],
        [
            "b",
            "|S10"
        ]
    ],
    "fill_value": "AAAAAAAAAAAAAAAAAAA=",
    "filters": [
        {
            "astype": "<u2",
            "dtype": "|V14",
            "id": "delta"
        }
    ],
    "order": "F",
    "shape": [
        100,
        100
    ],
    "zarr_format": 2
}"""

# test_encode_decode_array_complex (c8): an empty filters list and a NaN real part
ZARR2_COMPLEX = b"""{
    "chunks": [
        10,
        10
    ],
    "compressor": {
        "blocksize": 0,
        "clevel": 3,
        "cname": "lz4",
        "id": "blosc",
        "shuffle": 2
    },
    "dimension_separator": ".",
    "dtype": "<c8",
    "fill_value": [
        "NaN",
        -1.0
    ],
    "filters": [],
    "order": "F",
    "shape": [
        100,
        100
    ],
    "zarr_format": 2
}"""

# test_encode_decode_array_datetime_timedelta: NaT fill value
ZARR2_DATETIME = b"""{
    "chunks": [
        10,
        10
    ],
    "compressor": {
        "blocksize": 0,
        "clevel": 3,
        "cname": "lz4",
        "id": "blosc",
        "shuffle": 2
    },
    "dtype": "<M8[s]",
    "fill_value": -9223372036854775808,
    "filters": [],
    "order": "F",
    "shape": [
        100,
        100
    ],
    "zarr_format": 2
}"""

# test_encode_decode_array_structured: subarray fields
ZARR2_SUBARRAY_FIELDS = b"""{
    "chunks": [
        10
    ],
    "compressor": {
        "id": "zlib",
        "level": 1
    },
    "dtype": [
        [
            "f0",
            "<i8"
        ],
        [
            "f1",
            "<f8",
            [
                10,
                10
            ]
        ],
        [
            "f2",
            "|u1",
            [
                5,
                10,
                15
            ]
        ]
    ],
    "fill_value": null,
    "filters": null,
    "order": "C",
    "shape": [
        100
    ],
    "zarr_format": 2
}"""

# zarr.create(10, dtype=str): object dtype, VLenUTF8 as the first filter, default fill 0
ZARR2_VLEN_UTF8 = b"""{
    "chunks": [
        10
    ],
    "compressor": {
        "blocksize": 0,
        "clevel": 5,
        "cname": "lz4",
        "id": "blosc",
        "shuffle": 1
    },
    "dtype": "|O",
    "fill_value": 0,
    "filters": [
        {
            "id": "vlen-utf8"
        }
    ],
    "order": "C",
    "shape": [
        10
    ],
    "zarr_format": 2
}"""

# test_encode_decode_fill_values_bytes: |S10 with b"foo"
ZARR2_BYTES = b"""{
    "chunks": [
        10
    ],
    "compressor": {
        "id": "zlib",
        "level": 1
    },
    "dtype": "|S10",
    "fill_value": "Zm9v",
    "filters": null,
    "order": "C",
    "shape": [
        100
    ],
    "zarr_format": 2
}"""

# A 0-d array (zarr-python 2 does not compress 0-d arrays)
ZARR2_SCALAR = b"""{
    "chunks": [],
    "compressor": null,
    "dtype": "<f8",
    "fill_value": "NaN",
    "filters": null,
    "order": "C",
    "shape": [],
    "zarr_format": 2
}"""

ZARR2_DOCUMENTS = {
    "fixture-i1": ZARR2_FIXTURE_I1,
    "spec-example": ZARR2_SPEC_EXAMPLE,
    "nested-nan": ZARR2_NESTED_NAN,
    "structured": ZARR2_STRUCTURED,
    "complex": ZARR2_COMPLEX,
    "datetime": ZARR2_DATETIME,
    "subarray-fields": ZARR2_SUBARRAY_FIELDS,
    "vlen-utf8": ZARR2_VLEN_UTF8,
    "bytes": ZARR2_BYTES,
    "scalar": ZARR2_SCALAR,
}


@pytest.mark.parametrize("document", ZARR2_DOCUMENTS.values(), ids=ZARR2_DOCUMENTS.keys())
def test_zarr2_document_round_trip(document: bytes) -> None:
    # encode_json reproduces zarr-python 2's formatting byte for byte ...
    original = json.loads(document)
    assert encode_json(original) == document
    # ... and parsing then re-encoding gives the same document, with
    # dimension_separator made explicit (azarr always writes it).
    metadata = ArrayMetadata.from_json(document, key=KEY)
    expected = {"dimension_separator": ".", **original}
    assert metadata.to_json() == encode_json(expected)
    assert metadata.to_dict() == expected
    if "dimension_separator" in original:
        assert metadata.to_json() == document
    assert ArrayMetadata.from_json(metadata.to_json()) == metadata


def test_zarr2_documents_decoded_values() -> None:
    nested = ArrayMetadata.from_json(ZARR2_NESTED_NAN)
    assert nested.shape == (100, 100)
    assert nested.chunks == (10, 10)
    assert nested.dtype == np.dtype("<f8")
    assert math.isnan(nested.fill_value)
    assert nested.dimension_separator == "/"
    assert nested.chunk_key((3, 7)) == "3/7"
    assert nested.compressor == {"blocksize": 0, "clevel": 5, "cname": "lz4", "id": "blosc", "shuffle": 1}

    fixture = ArrayMetadata.from_json(ZARR2_FIXTURE_I1)
    assert fixture.order == "F"
    assert fixture.dimension_separator == "."
    assert fixture.cdata_shape == (12,)
    assert fixture.fill_value == 0
    assert fixture.filters is None

    structured = ArrayMetadata.from_json(ZARR2_STRUCTURED)
    assert structured.dtype == np.dtype([("a", "<i4"), ("b", "S10")])
    assert structured.fill_value == np.zeros((), dtype=structured.dtype)[()]
    assert structured.filters == ({"astype": "<u2", "dtype": "|V14", "id": "delta"},)

    complex_ = ArrayMetadata.from_json(ZARR2_COMPLEX)
    assert math.isnan(complex_.fill_value.real)
    assert complex_.fill_value.imag == -1
    assert complex_.filters == ()

    assert np.isnat(ArrayMetadata.from_json(ZARR2_DATETIME).fill_value)

    vlen = ArrayMetadata.from_json(ZARR2_VLEN_UTF8)
    assert vlen.dtype == np.dtype(object)
    assert vlen.fill_value == 0

    assert ArrayMetadata.from_json(ZARR2_BYTES).fill_value == b"foo"

    scalar = ArrayMetadata.from_json(ZARR2_SCALAR)
    assert scalar.shape == ()
    assert scalar.chunks == ()
    assert scalar.ndim == 0


def test_zarr2_subarray_fields_dtype() -> None:
    metadata = ArrayMetadata.from_json(ZARR2_SUBARRAY_FIELDS)
    assert metadata.dtype == np.dtype("<i8, (10, 10)<f8, (5, 10, 15)u1")
    assert metadata.fill_value is None


# ---------------------------------------------------------------------------------------------
# .zarray: validation
# ---------------------------------------------------------------------------------------------


def test_unknown_keys_are_ignored() -> None:
    document = base_document(extra={"anything": [1, 2]}, attributes={"x": 1})
    metadata = ArrayMetadata.from_json(encode_json(document), key=KEY)
    assert "extra" not in metadata.to_dict()
    assert metadata == ArrayMetadata.from_json(base_document())


def test_raw_nan_fill_value_is_read() -> None:
    # zarr-python < 2.2 wrote non-finite fill values as raw NaN/Infinity literals;
    # zarr-python 2.18 still reads them, and so does azarr (writing "NaN").
    data = encode_json(base_document()).replace(b'"NaN"', b"NaN")
    metadata = ArrayMetadata.from_json(data)
    assert math.isnan(metadata.fill_value)
    assert metadata.to_dict()["fill_value"] == "NaN"
    data = encode_json(base_document()).replace(b'"NaN"', b"-Infinity")
    assert ArrayMetadata.from_json(data).fill_value == -math.inf


def test_from_json_accepts_mapping_and_str() -> None:
    expected = ArrayMetadata.from_json(encode_json(base_document()))
    assert ArrayMetadata.from_json(base_document()) == expected
    assert ArrayMetadata.from_json(encode_json(base_document()).decode()) == expected


def test_dimension_separator_values() -> None:
    assert ArrayMetadata.from_json(base_document()).dimension_separator == "."
    assert ArrayMetadata.from_json(base_document(dimension_separator=None)).dimension_separator == "."
    assert ArrayMetadata.from_json(base_document(dimension_separator=".")).dimension_separator == "."
    assert ArrayMetadata.from_json(base_document(dimension_separator="/")).dimension_separator == "/"
    assert (
        ArrayMetadata.from_json(base_document(dimension_separator="/")).to_dict()["dimension_separator"]
        == "/"
    )


@pytest.mark.parametrize(
    "data",
    [b"[1, 2]", b'"text"', b"42", b"null", b"true"],
)
def test_document_not_an_object(data: bytes) -> None:
    with pytest.raises(MetadataError, match=r"'grp/arr/\.zarray': must be a JSON object"):
        ArrayMetadata.from_json(data, key=KEY)


@pytest.mark.parametrize("data", [b"{", b'{"zarr_format": 2,}', b"\xff", b""])
def test_document_invalid_json(data: bytes) -> None:
    with pytest.raises(MetadataError, match=r"'grp/arr/\.zarray'"):
        ArrayMetadata.from_json(data, key=KEY)


@pytest.mark.parametrize(
    "missing", ["zarr_format", "shape", "chunks", "dtype", "compressor", "fill_value", "order", "filters"]
)
def test_missing_required_key(missing: str) -> None:
    document = base_document()
    del document[missing]
    with pytest.raises(MetadataError) as info:
        ArrayMetadata.from_json(encode_json(document), key=KEY)
    message = str(info.value)
    assert repr(KEY) in message
    assert repr(missing) in message
    assert "missing" in message


INVALID_FIELDS: list[tuple[str, Any]] = [
    ("zarr_format", 1),
    ("zarr_format", 3),
    ("zarr_format", "2"),
    ("zarr_format", True),
    ("zarr_format", 2.5),
    ("zarr_format", None),
    ("shape", [-1, 50]),
    ("shape", [1.5, 50]),
    ("shape", [10.0, 50]),
    ("shape", [True, 50]),
    ("shape", ["10", 50]),
    ("shape", "100"),
    ("shape", 100),
    ("shape", None),
    ("shape", {"0": 100}),
    ("chunks", [0, 20]),
    ("chunks", [-1, 20]),
    ("chunks", [True, 20]),
    ("chunks", [10.5, 20]),
    ("chunks", [10]),
    ("chunks", [10, 20, 30]),
    ("chunks", None),
    ("chunks", 10),
    ("dtype", "float64"),
    ("dtype", "<f16"),
    ("dtype", "<M8"),
    ("dtype", 8),
    ("dtype", None),
    ("dtype", [["a", "|O"]]),
    ("order", "c"),
    ("order", "K"),
    ("order", None),
    ("order", ["C"]),
    ("dimension_separator", "-"),
    ("dimension_separator", ""),
    ("dimension_separator", 1),
    ("compressor", "zlib"),
    ("compressor", {"level": 1}),
    ("compressor", {"id": 5}),
    ("compressor", {"id": None}),
    ("compressor", {"id": "no-such-codec"}),
    ("compressor", []),
    ("filters", {"id": "zlib"}),
    ("filters", "zlib"),
    ("filters", ["zlib"]),
    ("filters", [{"id": "delta", "dtype": "<f8"}, {"no": "id"}]),
    ("filters", [{"id": "no-such-filter"}]),
    ("fill_value", "abc"),
    ("fill_value", [1.0]),
    ("fill_value", True),
    ("fill_value", "Inf"),
]


@pytest.mark.parametrize(("field", "value"), INVALID_FIELDS)
def test_invalid_field(field: str, value: Any) -> None:
    data = json.dumps(base_document(**{field: value})).encode()
    with pytest.raises(MetadataError) as info:
        ArrayMetadata.from_json(data, key=KEY)
    message = str(info.value)
    assert repr(KEY) in message
    assert repr(field) in message or f"'{field}[" in message


def test_unknown_codec_error_names_id() -> None:
    with pytest.raises(MetadataError, match="no-such-codec") as info:
        ArrayMetadata.from_json(base_document(compressor={"id": "no-such-codec"}), key=KEY)
    assert "'compressor'" in str(info.value)
    with pytest.raises(MetadataError, match=r"'filters\[1\]'.*'nope'"):
        ArrayMetadata.from_json(
            base_document(filters=[{"id": "delta", "dtype": "<f8"}, {"id": "nope"}]), key=KEY
        )


@pytest.mark.parametrize(
    "filters",
    [None, [], [{"id": "zlib", "level": 1}], [{"id": "delta", "dtype": "<f8"}, {"id": "vlen-utf8"}]],
)
def test_object_dtype_requires_object_codec_first(filters: Any) -> None:
    document = base_document(dtype="|O", fill_value=0, filters=filters)
    with pytest.raises(MetadataError, match=r"'grp/arr/\.zarray': 'filters' must start with an object codec"):
        ArrayMetadata.from_json(document, key=KEY)


@pytest.mark.parametrize("codec_id", sorted(OBJECT_CODEC_IDS))
def test_object_dtype_accepts_object_codecs(codec_id: str) -> None:
    config: dict[str, Any] = {"id": codec_id}
    if codec_id == "vlen-array":
        config["dtype"] = "<i4"
    if codec_id == "categorize":
        config.update(labels=["a", "b"], dtype="|O", astype="|u1")
    metadata = ArrayMetadata.from_json(base_document(dtype="|O", fill_value=None, filters=[config]))
    assert metadata.filters is not None
    assert metadata.filters[0]["id"] == codec_id


def test_object_fill_values_kept_as_json() -> None:
    for fill in (0, "", "x", None, [1, 2]):
        document = base_document(dtype="|O", fill_value=fill, filters=[{"id": "vlen-utf8"}])
        metadata = ArrayMetadata.from_json(document)
        assert metadata.fill_value == fill
        assert metadata.to_dict()["fill_value"] == fill


# ---------------------------------------------------------------------------------------------
# ArrayMetadata: construction, replace, chunk grid
# ---------------------------------------------------------------------------------------------


def make(**changes: Any) -> ArrayMetadata:
    fields: dict[str, Any] = {
        "shape": (100, 50),
        "chunks": (10, 20),
        "dtype": np.dtype("<f8"),
        "compressor": {"id": "zlib", "level": 1},
        "filters": None,
        "fill_value": 0,
        "order": "C",
    }
    fields.update(changes)
    return ArrayMetadata(**fields)


def test_constructor_normalizes() -> None:
    metadata = make(shape=[np.int64(100), 50], chunks=[10, np.uint8(20)], filters=[{"id": "zlib"}])
    assert metadata.shape == (100, 50)
    assert type(metadata.shape[0]) is int
    assert metadata.chunks == (10, 20)
    assert metadata.filters == ({"id": "zlib"},)
    assert isinstance(metadata.fill_value, np.float64)
    assert metadata.zarr_format == 2
    assert metadata.dimension_separator == "."
    structured = make(dtype=np.dtype([("a", "<i4"), ("b", "S3")]), fill_value=0)
    assert isinstance(structured.fill_value, np.void)
    assert structured.to_dict()["fill_value"] == "AAAAAAAAAA=="


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"shape": (True, 50)}, "shape"),
        ({"shape": (-1, 50)}, "shape"),
        ({"shape": "ab"}, "shape"),
        ({"chunks": (10,)}, "chunks"),
        ({"chunks": (0, 20)}, "chunks"),
        ({"dtype": "<f8"}, "dtype"),
        ({"dtype": np.dtype("(2,)f8")}, "dtype"),
        ({"dtype": np.dtype("M8")}, "dtype"),
        ({"compressor": {"id": "nope"}}, "compressor"),
        ({"filters": ({"id": "zlib"}, "x")}, "filters[1]"),
        ({"order": "X"}, "order"),
        ({"dimension_separator": "\\"}, "dimension_separator"),
        ({"zarr_format": 3}, "zarr_format"),
        ({"fill_value": "abc"}, "fill_value"),
        ({"dtype": np.dtype("|u1"), "fill_value": 256}, "fill_value"),
        ({"dtype": np.dtype(object), "filters": None}, "filters"),
        ({"compressor": {"id": "zlib", "level": object()}}, "compressor"),
    ],
)
def test_constructor_validates(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(MetadataError) as info:
        make(**changes)
    assert "ArrayMetadata" in str(info.value)
    assert repr(field) in str(info.value)


def test_frozen() -> None:
    metadata = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        metadata.shape = (1, 1)  # type: ignore[misc]


def test_replace_revalidates() -> None:
    metadata = make()
    resized = metadata.replace(shape=(200, 50))
    assert resized.shape == (200, 50)
    assert resized.cdata_shape == (20, 3)
    assert metadata.shape == (100, 50)
    assert metadata.replace(fill_value=np.nan).to_dict()["fill_value"] == "NaN"
    with pytest.raises(MetadataError, match="'shape'"):
        metadata.replace(shape=(10,))  # rank no longer matches chunks
    with pytest.raises(MetadataError, match="'fill_value'"):
        metadata.replace(dtype=np.dtype("|u1"), fill_value=-1)
    with pytest.raises(TypeError):
        metadata.replace(no_such_field=1)


def test_equality() -> None:
    assert make(fill_value=np.nan) == make(fill_value=math.nan)
    assert make(fill_value=np.nan) != make(fill_value=0)
    assert make() != make(order="F")
    assert make() != make(dimension_separator="/")
    assert make(dtype=np.dtype("<i4")) != make(dtype=np.dtype(">i4"))
    assert make() != "not metadata"


@pytest.mark.parametrize(
    ("shape", "chunks", "grid"),
    [
        ((100,), (10,), (10,)),
        ((101,), (10,), (11,)),
        ((99,), (10,), (10,)),
        ((10, 7), (3, 7), (4, 1)),
        ((5,), (10,), (1,)),
        ((0,), (10,), (0,)),
        ((10, 0, 4), (3, 1, 4), (4, 0, 1)),
        ((), (), ()),
        ((1, 1, 1), (1, 1, 1), (1, 1, 1)),
    ],
)
def test_cdata_shape(shape: tuple[int, ...], chunks: tuple[int, ...], grid: tuple[int, ...]) -> None:
    metadata = make(shape=shape, chunks=chunks)
    assert metadata.cdata_shape == grid
    assert metadata.nchunks == math.prod(grid)
    assert metadata.ndim == len(shape)


def test_chunk_key_separators() -> None:
    dotted = make(shape=(100, 50, 7), chunks=(10, 20, 1))
    assert dotted.chunk_key((0, 0, 0)) == "0.0.0"
    assert dotted.chunk_key((9, 2, 6)) == "9.2.6"
    nested = dotted.replace(dimension_separator="/")
    assert nested.chunk_key((9, 2, 6)) == "9/2/6"
    assert make(shape=(5,), chunks=(2,)).chunk_key([2]) == "2"


def test_chunk_key_zero_dimensional() -> None:
    scalar = make(shape=(), chunks=())
    assert scalar.chunk_key(()) == "0"
    assert scalar.chunk_key((0,)) == "0"
    assert scalar.replace(dimension_separator="/").chunk_key(()) == "0"
    assert scalar.nchunks == 1
    with pytest.raises(IndexError):
        scalar.chunk_key((1,))


def test_chunk_key_bad_coordinates() -> None:
    metadata = make()  # grid (10, 3)
    with pytest.raises(ValueError):
        metadata.chunk_key((1,))
    with pytest.raises(IndexError):
        metadata.chunk_key((10, 0))
    with pytest.raises(IndexError):
        metadata.chunk_key((0, -1))
    with pytest.raises(IndexError):
        make(shape=(0,), chunks=(5,)).chunk_key((0,))


def test_to_dict_is_json_ready_and_independent() -> None:
    metadata = make(filters=[{"id": "delta", "dtype": "<f8"}], dtype=np.dtype("<c16"), fill_value=1j)
    document = metadata.to_dict()
    assert json.loads(json.dumps(document)) == document
    document["filters"][0]["dtype"] = "changed"
    document["fill_value"].append("x")
    assert metadata.to_dict()["filters"][0]["dtype"] == "<f8"
    assert metadata.to_dict()["fill_value"] == [0.0, 1.0]


# ---------------------------------------------------------------------------------------------
# normalize_dtype
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dtype", "config"),
    [
        (str, {"id": "vlen-utf8"}),
        ("str", {"id": "vlen-utf8"}),
        (bytes, {"id": "vlen-bytes"}),
        ("bytes", {"id": "vlen-bytes"}),
        ("array:i4", {"id": "vlen-array", "dtype": "<i4"}),
        ("array:<f8", {"id": "vlen-array", "dtype": "<f8"}),
    ],
)
def test_normalize_dtype_shorthands(dtype: Any, config: dict[str, Any]) -> None:
    resolved, filters = normalize_dtype(dtype)
    assert resolved == np.dtype(object)
    assert filters == [config]
    # the result makes valid metadata
    make(dtype=resolved, filters=filters, fill_value=None)


def test_normalize_dtype_explicit_object_codec() -> None:
    assert normalize_dtype(object, numcodecs.VLenUTF8()) == (np.dtype(object), [{"id": "vlen-utf8"}])
    assert normalize_dtype("O", {"id": "json2"}) == (np.dtype(object), [{"id": "json2"}])
    # an explicit codec overrides the shorthand's
    resolved, filters = normalize_dtype(str, numcodecs.JSON())
    assert resolved == np.dtype(object)
    assert filters is not None
    assert filters[0]["id"] == "json2"


def test_normalize_dtype_plain() -> None:
    assert normalize_dtype("<f8") == (np.dtype("<f8"), None)
    assert normalize_dtype(np.float32) == (np.dtype("<f4"), None)
    assert normalize_dtype(">i2") == (np.dtype(">i2"), None)
    assert normalize_dtype("M8[ns]") == (np.dtype("<M8[ns]"), None)
    assert normalize_dtype([("a", "<i4"), ("b", "S3")])[0] == np.dtype([("a", "<i4"), ("b", "S3")])
    # subarray dtypes are returned for the caller to fold into the shape
    assert normalize_dtype("(2,)<f8")[0].shape == (2,)
    with pytest.warns(UserWarning, match="only needed for object arrays"):
        assert normalize_dtype("<f8", numcodecs.VLenUTF8()) == (np.dtype("<f8"), None)


@pytest.mark.parametrize(
    ("dtype", "object_codec", "field"),
    [
        (object, None, "object_codec"),
        ("O", None, "object_codec"),
        (object, numcodecs.Zlib(), "object_codec"),
        (object, {"id": "nope"}, "object_codec"),
        (object, "vlen-utf8", "object_codec"),
        ("array", None, "dtype"),
        ("M8", None, "dtype"),
        ("m8", None, "dtype"),
        ("not-a-dtype", None, "dtype"),
        (np.dtype([("a", "<i4"), ("o", "O")]), numcodecs.Pickle(), "dtype"),
    ],
)
def test_normalize_dtype_invalid(dtype: Any, object_codec: Any, field: str) -> None:
    with pytest.raises(MetadataError, match=re.escape(repr(field))):
        normalize_dtype(dtype, object_codec)


# ---------------------------------------------------------------------------------------------
# .zgroup and .zattrs
# ---------------------------------------------------------------------------------------------


def test_group_metadata() -> None:
    assert GroupMetadata().to_json() == b'{\n    "zarr_format": 2\n}'
    assert GroupMetadata().to_dict() == {"zarr_format": 2}
    assert GroupMetadata.from_json(b'{\n    "zarr_format": 2\n}') == GroupMetadata()
    assert GroupMetadata.from_json({"zarr_format": 2, "extra": 1}) == GroupMetadata()
    assert GroupMetadata.from_json('{"zarr_format": 2}') == GroupMetadata()


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b'{"zarr_format": 1}', "'zarr_format'"),
        (b'{"zarr_format": 3}', "'zarr_format'"),
        (b'{"zarr_format": "2"}', "'zarr_format'"),
        (b'{"zarr_format": true}', "'zarr_format'"),
        (b"{}", "missing"),
        (b"[2]", "JSON object"),
        (b"{", "not valid JSON"),
    ],
)
def test_group_metadata_invalid(data: bytes, match: str) -> None:
    with pytest.raises(MetadataError, match=match) as info:
        GroupMetadata.from_json(data, key="g/.zgroup")
    assert "'g/.zgroup'" in str(info.value)


def test_group_metadata_constructor_validates() -> None:
    with pytest.raises(MetadataError, match="'zarr_format'"):
        GroupMetadata(zarr_format=3)


def test_parse_attributes() -> None:
    assert parse_attributes(b'{"foo": 42, "bar": "apples", "baz": [1, 2, 3, 4]}', key="a/.zattrs") == {
        "foo": 42,
        "bar": "apples",
        "baz": [1, 2, 3, 4],
    }
    assert parse_attributes(b"{}", key="a/.zattrs") == {}
    assert math.isnan(parse_attributes(b'{"_FillValue": NaN}', key="a/.zattrs")["_FillValue"])
    source = {"a": 1}
    parsed = parse_attributes(source, key="a/.zattrs")
    assert parsed == source
    assert parsed is not source


@pytest.mark.parametrize("data", [b"[1]", b'"x"', b"null", b"{", b"\xff"])
def test_parse_attributes_invalid(data: bytes) -> None:
    with pytest.raises(MetadataError, match=r"'a/b/\.zattrs'"):
        parse_attributes(data, key="a/b/.zattrs")


def test_attributes_round_trip_through_encode_json() -> None:
    attrs = {"units": "m/s", "scale": np.float32(0.5), "dims": ("x", "y"), "unicode": "µ"}
    assert parse_attributes(encode_json(attrs), key=ZATTRS) == {
        "units": "m/s",
        "scale": 0.5,
        "dims": ["x", "y"],
        "unicode": "µ",
    }


# ---------------------------------------------------------------------------------------------
# .zmetadata
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (".zarray", True),
        (".zgroup", True),
        (".zattrs", True),
        ("a/.zarray", True),
        ("a/b/c/.zattrs", True),
        (".zmetadata", False),
        ("a/b.zarray", False),
        ("a/.zarray/0", False),
        ("0.0", False),
        ("a/0/0", False),
        ("", False),
    ],
)
def test_is_metadata_key(key: str, expected: bool) -> None:
    assert is_metadata_key(key) is expected


def test_build_consolidated_matches_zarr2() -> None:
    array = ArrayMetadata.from_json(ZARR2_SPEC_EXAMPLE)
    documents: dict[str, Any] = {
        ZGROUP: GroupMetadata().to_json(),
        ZATTRS: b'{"title": "root"}',
        "arr/.zarray": array.to_json(),
        "arr/.zattrs": {"units": "m", "scale": np.float64(2.0)},
        "sub/.zgroup": {"zarr_format": 2},
        "sub/deep/x/.zarray": array.to_dict(),
        "arr/0.0": b"\x00chunk bytes",
        ZMETADATA: b"{}",
    }
    encoded = build_consolidated(documents)
    # zarr-python 2: json_dumps({"zarr_consolidated_format": 1, "metadata": {...}})
    expected_metadata = {
        ".zgroup": {"zarr_format": 2},
        ".zattrs": {"title": "root"},
        "arr/.zarray": array.to_dict(),
        "arr/.zattrs": {"units": "m", "scale": 2.0},
        "sub/.zgroup": {"zarr_format": 2},
        "sub/deep/x/.zarray": array.to_dict(),
    }
    expected = json.dumps(
        {"zarr_consolidated_format": 1, "metadata": expected_metadata},
        indent=4,
        sort_keys=True,
        ensure_ascii=True,
        separators=(",", ": "),
    ).encode("ascii")
    assert encoded == expected
    parsed = parse_consolidated(encoded)
    assert parsed == expected_metadata
    assert ArrayMetadata.from_json(parsed["sub/deep/x/.zarray"]) == array
    assert GroupMetadata.from_json(parsed["sub/.zgroup"]) == GroupMetadata()
    assert parse_attributes(parsed[".zattrs"], key=".zattrs") == {"title": "root"}


def test_build_consolidated_empty_and_literal() -> None:
    assert build_consolidated({}) == b'{\n    "metadata": {},\n    "zarr_consolidated_format": 1\n}'
    assert parse_consolidated(build_consolidated({})) == {}


@pytest.mark.parametrize(
    "documents",
    [{"a/.zarray": b"{"}, {"a/.zattrs": b"[1, 2]"}, {".zgroup": b"\xff"}],
)
def test_build_consolidated_invalid_document(documents: dict[str, bytes]) -> None:
    key = next(iter(documents))
    with pytest.raises(MetadataError, match=re.escape(repr(key))):
        build_consolidated(documents)


def test_parse_consolidated_drops_unknown_entries() -> None:
    data = encode_json(
        {
            "zarr_consolidated_format": 1,
            "metadata": {".zgroup": {"zarr_format": 2}, "a/0.0": {"x": 1}, "notes": {"y": 2}},
            "extra": True,
        }
    )
    assert parse_consolidated(data) == {".zgroup": {"zarr_format": 2}}


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"metadata": {}}, "zarr_consolidated_format"),
        ({"zarr_consolidated_format": 2, "metadata": {}}, "zarr_consolidated_format"),
        ({"zarr_consolidated_format": "1", "metadata": {}}, "zarr_consolidated_format"),
        ({"zarr_consolidated_format": True, "metadata": {}}, "zarr_consolidated_format"),
        ({"zarr_consolidated_format": 1}, "metadata"),
        ({"zarr_consolidated_format": 1, "metadata": []}, "metadata"),
        ({"zarr_consolidated_format": 1, "metadata": {".zgroup": [2]}}, "metadata['.zgroup']"),
        ({"zarr_consolidated_format": 1, "metadata": {"a/.zarray": None}}, "metadata['a/.zarray']"),
    ],
)
def test_parse_consolidated_invalid(document: dict[str, Any], field: str) -> None:
    with pytest.raises(MetadataError) as info:
        parse_consolidated(encode_json(document), key="root/.zmetadata")
    assert "'root/.zmetadata'" in str(info.value)
    assert repr(field) in str(info.value)


@pytest.mark.parametrize("data", [b"[]", b"{", b"42"])
def test_parse_consolidated_not_an_object(data: bytes) -> None:
    with pytest.raises(MetadataError, match=r"'\.zmetadata'"):
        parse_consolidated(data)


def test_constants() -> None:
    assert (ZARRAY, ZGROUP, ZATTRS, ZMETADATA) == (".zarray", ".zgroup", ".zattrs", ".zmetadata")


def test_base64_helper_sanity() -> None:
    # The structured fill value of the zarr-python 2 test: 14 zero bytes.
    assert base64.standard_b64decode("AAAAAAAAAAAAAAAAAAA=") == bytes(14)
