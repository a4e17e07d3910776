"""Zarr v3 through azarr's own paths: metadata, data types, codec chains, arrays and groups.

Interop with zarr-python 3.4 and TensorStore is in ``tests/interop/test_v3_*.py``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.codecs import ChunkCodec
from azarr.codecs._v3 import parse_v3_codecs
from azarr.errors import (
    ArrayNotFoundError,
    CodecError,
    ContainsArrayError,
    MetadataError,
    ReadOnlyError,
)
from azarr.metadata import ArrayV3Metadata, GroupV3Metadata
from azarr.storage import MemoryStore


def _doc(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [10, 6],
        "data_type": "float64",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 4]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
    }
    document.update(changes)
    return document


# ------------------------------------------------------------------ metadata


def test_array_document_round_trips_with_its_extensions() -> None:
    document = _doc(
        attributes={"a": [1, 2]},
        dimension_names=["y", None],
        storage_transformers=[],
        my_extension={"must_understand": False, "x": 1},
    )
    metadata = ArrayV3Metadata.from_json(document, key="a/zarr.json")
    assert metadata.shape == (10, 6) and metadata.chunks == (4, 4) and metadata.cdata_shape == (3, 2)
    assert metadata.dimension_names == ("y", None) and metadata.attributes == {"a": [1, 2]}
    again = json.loads(metadata.to_json())
    assert again == document  # every member, the extension too
    assert ArrayV3Metadata.from_json(metadata.to_json()) == metadata


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"zarr_format": 2}, "zarr_format"),
        ({"node_type": "group"}, "node_type"),
        ({"data_type": "float128"}, "float128"),
        ({"chunk_grid": {"name": "rectilinear", "configuration": {}}}, "rectilinear"),
        ({"chunk_key_encoding": {"name": "fancy"}}, "fancy"),
        ({"storage_transformers": [{"name": "t"}]}, "storage_transformers"),
        ({"unknown_member": {"must_understand": True}}, "unknown_member"),
        ({"unknown_member": 3}, "unknown_member"),
        ({"codecs": [{"name": "sharding_indexed", "configuration": {}}]}, "sharding_indexed"),
        ({"codecs": [{"name": "bytes"}]}, "endian"),
        ({"codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "nope"}]}, "nope"),
        ({"fill_value": None}, "fill_value"),
        ({"fill_value": "abc"}, "fill_value"),
        ({"shape": [2**70, 1]}, "shape"),
        # Found by the fuzzer (2026-11-27): a TypeError before the codecs were checked.
        ({"codecs": 0}, "codecs"),
        ({"codecs": "bytes"}, "codecs"),
        (
            {
                "codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": []}},
                ]
            },
            "shuffle",
        ),
    ],
)
def test_invalid_documents_get_a_metadata_error_naming_the_problem(
    change: dict[str, Any], names: str
) -> None:
    with pytest.raises(MetadataError, match=names) as info:
        ArrayV3Metadata.from_json(_doc(**change), key="x/zarr.json")
    assert "x/zarr.json" in str(info.value)


FILL_CASES = [
    ("float32", "NaN", lambda v: np.isnan(v)),
    ("float64", "-Infinity", lambda v: v == -np.inf),
    ("float32", "0x7fc00001", lambda v: np.float32(v).view("u4") == 0x7FC00001),
    ("float16", "0x3c00", lambda v: v == 1.0),
    ("complex128", ["Infinity", "NaN"], lambda v: v.real == np.inf and np.isnan(v.imag)),
    ("int64", -(2**63), lambda v: v == -(2**63)),
    ("uint64", 2**64 - 1, lambda v: v == 2**64 - 1),
    ("bool", True, lambda v: v is np.True_),
    ("r16", [1, 2], lambda v: bytes(v.tobytes()) == b"\x01\x02"),
    (
        {"name": "raw_bytes", "configuration": {"length_bytes": 2}},
        "AQI=",
        lambda v: v.tobytes() == b"\x01\x02",
    ),
    ({"name": "null_terminated_bytes", "configuration": {"length_bytes": 4}}, "YWI=", lambda v: v == b"ab"),
    ({"name": "fixed_length_utf32", "configuration": {"length_bytes": 8}}, "xy", lambda v: v == "xy"),
    ({"name": "numpy.datetime64", "configuration": {"unit": "s", "scale_factor": 1}}, -(2**63), np.isnat),
    (
        {"name": "numpy.timedelta64", "configuration": {"unit": "ms", "scale_factor": 10}},
        5,
        lambda v: v == np.timedelta64(50, "ms"),
    ),
    ("string", "hi", lambda v: v == "hi"),
    ("variable_length_bytes", "eHk=", lambda v: v == b"xy"),
    (
        {
            "name": "struct",
            "configuration": {
                "fields": [{"name": "a", "data_type": "int32"}, {"name": "b", "data_type": "uint8"}]
            },
        },
        {"a": 1, "b": 2},
        lambda v: v["a"] == 1 and v["b"] == 2,
    ),
    ({"name": "structured", "configuration": {"fields": [["a", "int16"]]}}, "AQA=", lambda v: v["a"] == 1),
]


@pytest.mark.parametrize(("data_type", "fill", "check"), FILL_CASES)
def test_fill_values_in_every_encoding(data_type: Any, fill: Any, check: Any) -> None:
    codecs: list[Any] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if data_type == "string":
        codecs = [{"name": "vlen-utf8"}]
    elif data_type == "variable_length_bytes":
        codecs = [{"name": "vlen-bytes"}]
    metadata = ArrayV3Metadata.from_json(
        _doc(
            shape=[3],
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2]}},
            data_type=data_type,
            fill_value=fill,
            codecs=codecs,
        )
    )
    assert check(metadata.fill_value)
    again = ArrayV3Metadata.from_json(metadata.to_json())
    assert check(again.fill_value)


def test_group_document_with_inline_consolidated_metadata() -> None:
    document = {
        "attributes": {"r": 1},
        "zarr_format": 3,
        "consolidated_metadata": {"kind": "inline", "must_understand": False, "metadata": {"a": _doc()}},
        "node_type": "group",
    }
    group = GroupV3Metadata.from_json(document)
    assert group.attributes == {"r": 1} and set(group.consolidated or {}) == {"a"}
    assert json.loads(group.to_json()) == document
    with pytest.raises(MetadataError, match="other"):
        GroupV3Metadata.from_json({**document, "other": True})


# ------------------------------------------------------------------ codec chains


def _round_trip(dtype: Any, chunks: tuple[int, ...], codecs: list[Any], data: np.ndarray[Any, Any]) -> bytes:
    _, chain = parse_v3_codecs(codecs, dtype=np.dtype(dtype), ndim=len(chunks), where="'k'")
    codec = ChunkCodec.from_chain(dtype, chunks, chain)
    encoded = codec.encode(data, key="k")
    # What a chunk's response body may hold (a longer body is refused as hostile).
    assert len(encoded) <= codec.stored_bound
    assert np.array_equal(codec.decode(encoded, key="k"), data)
    out = np.empty(chunks, dtype=dtype, order=codec.order)
    codec.decode(encoded, key="k", out=out)
    assert np.array_equal(out, data)
    return encoded


@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize(
    "transpose", [None, [1, 0, 2], [2, 1, 0], [0, 1, 2]], ids=["none", "perm", "F", "identity"]
)
@pytest.mark.parametrize(
    "compressors",
    [
        [],
        [
            {
                "name": "blosc",
                "configuration": {
                    "cname": "zstd",
                    "clevel": 3,
                    "shuffle": "bitshuffle",
                    "typesize": 4,
                    "blocksize": 0,
                },
            }
        ],
        [{"name": "zstd", "configuration": {"level": 1, "checksum": True}}, {"name": "crc32c"}],
        [{"name": "gzip", "configuration": {"level": 1}}, {"name": "crc32c"}],
        [{"name": "crc32c"}],
    ],
    ids=["raw", "blosc", "zstd+crc32c", "gzip+crc32c", "crc32c"],
)
def test_codec_chains_round_trip(endian: str, transpose: list[int] | None, compressors: list[Any]) -> None:
    codecs: list[Any] = (
        [] if transpose is None else [{"name": "transpose", "configuration": {"order": transpose}}]
    )
    codecs += [{"name": "bytes", "configuration": {"endian": endian}}, *compressors]
    data = np.arange(60, dtype="<f4").reshape(3, 4, 5)
    encoded = _round_trip("<f4", (3, 4, 5), codecs, data)
    if not compressors:  # the stored bytes are the layout the chain says
        layout = data if transpose is None else data.transpose(transpose)
        assert encoded == np.ascontiguousarray(layout).astype(">f4" if endian == "big" else "<f4").tobytes()


def test_crc32c_mismatch_is_a_codec_error_naming_the_chunk() -> None:
    _, chain = parse_v3_codecs(["bytes", "crc32c"], dtype=np.dtype("u1"), ndim=1, where="'k'")
    codec = ChunkCodec.from_chain("u1", (4,), chain)
    encoded = bytearray(codec.encode(np.arange(4, dtype="u1"), key="a/c/0"))
    encoded[0] ^= 1
    with pytest.raises(CodecError, match=r"a/c/0.*crc32c"):
        codec.decode(bytes(encoded), key="a/c/0")


def test_vlen_and_numcodecs_codecs() -> None:
    strings = np.array(["a", "", "ccc"], dtype=object)
    _round_trip(object, (3,), [{"name": "vlen-utf8", "configuration": {}}, {"name": "crc32c"}], strings)
    _round_trip(object, (2,), [{"name": "vlen-bytes"}], np.array([b"x", b"yz"], dtype=object))
    floats = np.linspace(0, 1, 8)
    _round_trip(
        "<f8",
        (8,),
        [
            {"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}},
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "numcodecs.zlib", "configuration": {"level": 1}},
        ],
        floats,
    )


@pytest.mark.parametrize(
    ("codecs", "problem"),
    [
        (
            [{"name": "crc32c"}, {"name": "bytes", "configuration": {"endian": "little"}}],
            "before the array -> bytes",
        ),
        (
            [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "bytes", "configuration": {"endian": "little"}},
            ],
            "second",
        ),
        ([{"name": "transpose", "configuration": {"order": [0, 0]}}, "bytes"], "permutation"),
        ([{"name": "vlen-utf8"}], "variable-length"),
        ([{"name": "blosc", "configuration": {"cname": "lz5", "clevel": 1}}], "before the array"),
        ([{"name": "numcodecs.nope"}], "numcodecs"),
    ],
)
def test_invalid_codec_chains_are_refused(codecs: list[Any], problem: str) -> None:
    with pytest.raises(MetadataError, match=problem):
        parse_v3_codecs(codecs, dtype=np.dtype("<i4"), ndim=2, where="'k'")


# ------------------------------------------------------------------ arrays and groups


async def test_create_write_read_resize_append_attrs() -> None:
    store = MemoryStore()
    array = await azarr.create(
        (10, 7),
        chunks=(4, 3),
        dtype="<i4",
        store=store,
        path="g/a",
        zarr_format=3,
        compressors=[
            {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle"}},
            {"name": "crc32c"},
        ],
        order="F",
        dimension_names=["x", "y"],
        attributes={"units": "m"},
        fill_value=-1,
    )
    assert array.zarr_format == 3 and array.order == "F"
    data = np.arange(70, dtype="<i4").reshape(10, 7)
    await array.set_basic_selection(Ellipsis, data)
    await array.set_orthogonal_selection(([1, 3], slice(None)), 0)
    data[[1, 3], :] = 0
    await array.vindex.set(([0, 9], [0, 6]), 5)
    data[[0, 9], [0, 6]] = 5
    assert sorted(k for k in store._data if k.startswith("g/a/")) == sorted(  # type: ignore[attr-defined]
        ["g/a/zarr.json"] + [f"g/a/c/{i}/{j}" for i in range(3) for j in range(3)]
    )
    assert "g/zarr.json" in store._data and json.loads(store._data["g/zarr.json"])["node_type"] == "group"  # type: ignore[attr-defined]
    opened = await azarr.open_array(store, path="g/a", mode="r+")
    assert isinstance(opened.metadata, ArrayV3Metadata)
    np.testing.assert_array_equal(await opened.get_basic_selection(), data)
    np.testing.assert_array_equal(await opened.oindex[[1, 2], [0, 6]], data[np.ix_([1, 2], [0, 6])])
    np.testing.assert_array_equal(await opened.blocks[1], data[4:8])
    assert opened.attrs["units"] == "m" and opened.dimension_names == ("x", "y")
    await opened.attrs.update({"more": 2})
    await opened.resize(12, 7)
    assert await opened.append(np.full((2, 7), 3, dtype="<i4")) == (14, 7)
    again = await azarr.open_array(store, path="g/a", mode="r")
    assert again.shape == (14, 7) and dict(again.attrs) == {"units": "m", "more": 2}
    full = await again.get_basic_selection()
    np.testing.assert_array_equal(full[:10], data)
    assert (full[10:12] == -1).all() and (full[12:] == 3).all()
    await opened.resize(4, 7)
    assert sorted(k for k in store._data if k.startswith("g/a/c/")) == [f"g/a/c/0/{j}" for j in range(3)]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "encoding", [{"name": "v2", "separator": "."}, {"name": "default", "separator": "."}, "v2"]
)
async def test_chunk_key_encodings(encoding: Any) -> None:
    store = MemoryStore()
    array = await azarr.create(
        (4, 4), chunks=(2, 2), dtype="u1", store=store, zarr_format=3, chunk_key_encoding=encoding
    )
    await array.set_basic_selection(Ellipsis, 1)
    keys = sorted(k for k in store._data if k != "zarr.json")  # type: ignore[attr-defined]
    name = encoding if isinstance(encoding, str) else encoding["name"]
    assert keys == (
        [f"{i}.{j}" for i in range(2) for j in range(2)]
        if name == "v2"
        else [f"c.{i}.{j}" for i in range(2) for j in range(2)]
    )
    assert await array.nchunks_initialized() == 4


async def test_zero_dimensional_and_string_arrays() -> None:
    store = MemoryStore()
    scalar = await azarr.create((), dtype="f8", store=store, path="s", zarr_format=3)
    await scalar.set_basic_selection((), 2.5)
    assert "s/c" in store._data and await scalar.get_basic_selection() == 2.5  # type: ignore[attr-defined]
    strings = await azarr.array(
        np.array(["a", "bb", "ccc"], dtype=object), store=store, path="t", zarr_format=3, chunks=2
    )
    assert json.loads(store._data["t/zarr.json"])["data_type"] == "string"  # type: ignore[attr-defined]
    assert list(await strings.get_basic_selection()) == ["a", "bb", "ccc"]


async def test_groups_and_mixed_hierarchies() -> None:
    store = MemoryStore()
    root = await azarr.group(store, zarr_format=3, attributes={"title": "t"})
    sub = await root.create_group("sub")
    await sub.zeros("x", shape=(3,), dtype="i2")
    assert sub.zarr_format == 3 and (await sub.get("x")).zarr_format == 3
    assert [name async for name, _ in root.members(max_depth=None)] == ["sub", "sub/x"]
    reopened = await azarr.open_group(store, mode="r")
    assert reopened.zarr_format == 3 and dict(reopened.attrs) == {"title": "t"}
    with pytest.raises(MetadataError, match="Zarr v2 node"):
        await azarr.zeros(3, store=store, path="sub/v2", zarr_format=2)
    with pytest.raises(ContainsArrayError):
        await azarr.zeros(3, store=store, path="sub/x/y", zarr_format=3)
    v2_store = MemoryStore()
    await azarr.group(v2_store)
    with pytest.raises(MetadataError, match="Zarr v3 node"):
        await azarr.zeros(3, store=v2_store, path="a", zarr_format=3)


async def test_consolidated_v3_round_trip() -> None:
    store = MemoryStore()
    root = await azarr.group(store, zarr_format=3, attributes={"r": 1})
    await root.zeros("a/b", shape=(4,), dtype="f4")
    consolidated = await azarr.consolidate_metadata(store)
    document = json.loads(store._data["zarr.json"])  # type: ignore[attr-defined]
    assert set(document["consolidated_metadata"]["metadata"]) == {"a", "a/b"}
    assert document["attributes"] == {"r": 1}
    assert isinstance(consolidated, azarr.AsyncGroup)
    opened = await azarr.open_consolidated(store)
    array = await opened.get("a/b")
    assert array.shape == (4,)
    with pytest.raises(ReadOnlyError):
        await opened.attrs.update({"x": 1})
    plain = await azarr.open_group(store, mode="r")  # consolidated first when read-only
    assert (await plain.get("a/b")).zarr_format == 3


async def test_open_finds_the_format_and_zarr_format_restricts_it() -> None:
    store = MemoryStore()
    await azarr.zeros(3, store=store, zarr_format=3)
    assert (await azarr.open(store, mode="r")).zarr_format == 3
    with pytest.raises(ArrayNotFoundError):
        await azarr.open_array(store, mode="r", zarr_format=2)
    v2_store = MemoryStore()
    await azarr.zeros(3, store=v2_store)
    assert (await azarr.open(v2_store, mode="r")).zarr_format == 2
    with azarr.config.set(zarr_format=3):
        assert (await azarr.zeros(3, store=MemoryStore())).zarr_format == 3


async def test_chunks_over_the_size_limit_are_refused_at_open() -> None:
    store = MemoryStore()
    document = _doc(chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2**20, 2**20]}})
    await store.set("zarr.json", json.dumps(document).encode())
    with pytest.raises(MetadataError, match="max_chunk_bytes"):
        await azarr.open_array(store, mode="r")


async def test_v2_creation_refuses_v3_options() -> None:
    with pytest.raises(TypeError, match="zarr_format=3"):
        await azarr.zeros(3, dimension_names=["x"])
