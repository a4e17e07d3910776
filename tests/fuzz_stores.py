"""Valid template stores and the mutations the fuzzer applies to them (tests/test_fuzz.py).

Each template is a small Zarr v2 or v3 hierarchy (one array per codec x dtype family,
v3 codec chains with ``transpose``, big-endian ``bytes``, ``crc32c`` and two bytes ->
bytes codecs, plus a consolidated group in each format), written by azarr itself into
a MemoryStore and kept as ``{key: bytes}``. A case takes one template and applies one to three
mutations: a JSON-level change to a metadata field (a hostile value, a deleted
key), a byte-level change to a metadata document, or a byte-level change to a
chunk (flipped bytes, a hostile little-endian integer over a size header,
truncation, garbage appended, another template's chunk). `run_case`
opens and reads the result; the only acceptable outcomes are data or an
`azarr.errors.AzarrError`.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import azarr
from azarr.storage import MemoryStore

#: The chunk-size limit the fuzzer runs under (a documented azarr.config
#: setting): the same code paths as the 2 GiB default, at a size that keeps
#: several chunks in flight far below the 256 MiB RSS budget.
FUZZ_MAX_CHUNK_BYTES = int(os.environ.get("AZARR_FUZZ_MAX_CHUNK_BYTES", 16 * 2**20))
#: Most bytes a case's read selection asks for.
READ_BYTES = 1 * 2**20

_BLOSC_LZ4 = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
_BLOSC_ZSTD = {"id": "blosc", "cname": "zstd", "clevel": 3, "shuffle": 2, "blocksize": 0}
_COMPRESSORS: dict[str, Any] = {
    "raw": None,
    "zlib": {"id": "zlib", "level": 1},
    "gzip": {"id": "gzip", "level": 1},
    "bz2": {"id": "bz2", "level": 1},
    "lzma": {"id": "lzma", "preset": 1},
    "zstd": {"id": "zstd", "level": 1},
    "lz4": {"id": "lz4", "acceleration": 1},
    "blosc-lz4": _BLOSC_LZ4,
    "blosc-zstd": _BLOSC_ZSTD,
}


def _templates() -> list[tuple[str, dict[str, Any], Any]]:
    """(name, create kwargs, data) for every template array."""
    ints = np.arange(35, dtype="<i4").reshape(7, 5)
    out: list[tuple[str, dict[str, Any], Any]] = []
    for name, comp in _COMPRESSORS.items():
        out.append((f"i4-{name}", {"dtype": "<i4", "compressor": comp}, ints))
    floats = np.linspace(-3, 3, 35).reshape(7, 5)
    out += [
        (
            "f8-delta-zlib",
            {
                "dtype": "<f8",
                "compressor": _COMPRESSORS["zlib"],
                "filters": [{"id": "delta", "dtype": "<f8"}],
            },
            floats,
        ),
        (
            "f8-fso-zstd",
            {
                "dtype": "<f8",
                "compressor": _COMPRESSORS["zstd"],
                "filters": [
                    {"id": "fixedscaleoffset", "offset": 0, "scale": 10, "dtype": "<f8", "astype": "<i2"}
                ],
            },
            floats,
        ),
        (
            "f4-quantize-bz2",
            {
                "dtype": "<f4",
                "compressor": _COMPRESSORS["bz2"],
                "filters": [{"id": "quantize", "digits": 3, "dtype": "<f4"}],
            },
            floats.astype("<f4"),
        ),
        (
            "u2-astype-lz4",
            {
                "dtype": "<u2",
                "compressor": _COMPRESSORS["lz4"],
                "filters": [{"id": "astype", "encode_dtype": "<u4", "decode_dtype": "<u2"}],
            },
            ints.astype("<u2"),
        ),
        ("c16-blosc", {"dtype": "<c16", "compressor": _BLOSC_ZSTD}, floats + 1j),
        (
            "b1-packbits-zlib",
            {"dtype": "|b1", "compressor": _COMPRESSORS["zlib"], "filters": [{"id": "packbits"}]},
            ints % 3 == 0,
        ),
        ("M8-lzma", {"dtype": "<M8[s]", "compressor": _COMPRESSORS["lzma"]}, ints.astype("<M8[s]")),
        ("U3-raw", {"dtype": "<U3", "compressor": None}, ints.astype("<U3")),
        ("S4-gzip", {"dtype": "|S4", "compressor": _COMPRESSORS["gzip"]}, ints.astype("|S4")),
        (
            "struct-lz4",
            {"dtype": [("a", "<i2"), ("b", "<f4")], "compressor": _COMPRESSORS["lz4"]},
            np.array([[(i, i / 2) for i in range(5)]] * 7, dtype=[("a", "<i2"), ("b", "<f4")]),
        ),
    ]
    strs = np.array([[f"s{i * j}" * (i % 3) for j in range(5)] for i in range(7)], dtype=object)
    out += [
        (
            "O-vlen-utf8-zlib",
            {"dtype": object, "object_codec": "vlen-utf8", "compressor": _COMPRESSORS["zlib"]},
            strs,
        ),
        (
            "O-vlen-bytes-raw",
            {"dtype": object, "filters": [{"id": "vlen-bytes"}], "compressor": None},
            np.vectorize(lambda s: s.encode(), otypes=[object])(strs),
        ),
        (
            "O-vlen-array-zstd",
            {
                "dtype": object,
                "filters": [{"id": "vlen-array", "dtype": "<i4"}],
                "compressor": _COMPRESSORS["zstd"],
            },
            _ragged(),
        ),
        ("O-json2-blosc", {"dtype": object, "filters": [{"id": "json2"}], "compressor": _BLOSC_LZ4}, strs),
        ("O-msgpack2-raw", {"dtype": object, "filters": [{"id": "msgpack2"}], "compressor": None}, strs),
        (
            "O-categorize-zlib",
            {
                "dtype": object,
                "compressor": _COMPRESSORS["zlib"],
                "filters": [{"id": "categorize", "labels": ["", "a", "bb"], "dtype": "|O", "astype": "|u1"}],
            },
            np.array([["a", "bb", "", "a", "a"]] * 7, dtype=object),
        ),
    ]
    return out


def _v3(*codecs: Any) -> list[dict[str, Any]]:
    return [c if isinstance(c, dict) else {"name": c} for c in codecs]


_LE = {"name": "bytes", "configuration": {"endian": "little"}}
_BE = {"name": "bytes", "configuration": {"endian": "big"}}
_ZSTD = {"name": "zstd", "configuration": {"level": 1, "checksum": False}}
_GZIP = {"name": "gzip", "configuration": {"level": 1}}
_BLOSC = {
    "name": "blosc",
    "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 8},
}
_T = {"name": "transpose", "configuration": {"order": [1, 0]}}


def _v3_templates() -> list[tuple[str, dict[str, Any], Any]]:
    """(name, create kwargs, data) of the Zarr v3 template arrays."""
    ints = np.arange(35, dtype="<i4").reshape(7, 5)
    floats = np.linspace(-3, 3, 35).reshape(7, 5)
    strs = np.array([[f"s{i * j}" * (i % 3) for j in range(5)] for i in range(7)], dtype=object)
    return [
        ("v3-i4-zstd", {"dtype": "<i4", "codecs": _v3(_LE, _ZSTD)}, ints),
        (
            "v3-f8-transpose-be-blosc-crc32c",
            {"dtype": "<f8", "codecs": _v3(_T, _BE, _BLOSC, "crc32c")},
            floats,
        ),
        ("v3-i2-gzip-crc32c", {"dtype": "<i2", "codecs": _v3(_LE, _GZIP, "crc32c")}, ints.astype("<i2")),
        ("v3-i8-zstd-gzip", {"dtype": "<i8", "codecs": _v3(_LE, _ZSTD, _GZIP)}, ints.astype("<i8")),
        (
            "v3-u1-raw-v2-keys",
            {"dtype": "|u1", "codecs": _v3("bytes"), "chunk_key_encoding": {"name": "v2"}},
            ints.astype("u1"),
        ),
        (
            "v3-f4-delta-zstd",
            {
                "dtype": "<f4",
                "codecs": _v3({"name": "numcodecs.delta", "configuration": {"dtype": "<f4"}}, _LE, _ZSTD),
            },
            floats.astype("<f4"),
        ),
        ("v3-str-vlen-utf8-zstd", {"dtype": str, "codecs": _v3({"name": "vlen-utf8"}, _ZSTD)}, strs),
        (
            "v3-bytes-vlen-bytes-crc32c",
            {"dtype": bytes, "codecs": _v3({"name": "vlen-bytes"}, "crc32c")},
            np.vectorize(lambda s: s.encode(), otypes=[object])(strs),
        ),
        # Sharded: 2 x 1 shards of 2 x 2 inner chunks (edge shards partial, one inner chunk
        # empty). Index at the end with crc32c; at the start without a checksum, so mutated
        # entries reach the offset/size checks rather than the checksum.
        (
            "v3-sharded-i4-zstd",
            {"dtype": "<i4", "chunks": (2, 3), "shards": (4, 6), "write_empty_chunks": False},
            _holed(ints),
        ),
        (
            "v3-sharded-f8-start-plain",
            {
                "dtype": "<f8",
                "chunks": (4, 6),
                "write_empty_chunks": False,
                "codecs": [
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": [2, 3],
                            "codecs": _v3(_LE, _GZIP),
                            "index_codecs": _v3(_LE),
                            "index_location": "start",
                        },
                    }
                ],
            },
            _holed(floats),
        ),
    ]


def _holed(data: Any) -> Any:
    """``data`` with its first inner chunk (2 x 3) at the fill value 0: an empty index entry."""
    out = data.copy()
    out[:2, :3] = 0
    return out


def _ragged() -> Any:
    arr = np.empty((7, 5), dtype=object)
    for i in range(7):
        for j in range(5):
            arr[i, j] = np.arange(i + j, dtype="<i4")
    return arr


async def _build() -> dict[str, dict[str, bytes]]:
    templates: dict[str, dict[str, bytes]] = {}
    for name, kwargs, data in _templates():
        store = MemoryStore()
        kwargs = dict(kwargs)
        if kwargs.get("object_codec") == "vlen-utf8":
            kwargs.pop("object_codec")
            kwargs["filters"] = [{"id": "vlen-utf8"}]
        arr = await azarr.create((7, 5), chunks=(4, 3), store=store, path="a", fill_value=None, **kwargs)
        await arr.setitem(Ellipsis, data)
        templates[name] = {key: bytes(await store.get(key)) async for key in store.list_prefix("")}
    for name, kwargs, data in _v3_templates():
        store = MemoryStore()
        kwargs = {"chunks": (4, 3), **kwargs}
        arr = await azarr.create((7, 5), store=store, path="a", zarr_format=3, **kwargs)
        await arr.setitem(Ellipsis, data)
        templates[name] = {key: bytes(await store.get(key)) async for key in store.list_prefix("")}
    # A consolidated hierarchy: group g with two arrays and attributes; the same in Zarr v3
    # (consolidated inline in g/zarr.json, attributes inside each zarr.json).
    templates["consolidated"] = await _consolidated({"compressor": _COMPRESSORS["zlib"]})
    v3 = {"zarr_format": 3, "codecs": _v3(_LE, _GZIP, "crc32c"), "dimension_names": ["t"]}
    templates["v3-consolidated"] = await _consolidated(v3)
    return templates


async def _consolidated(encoding: dict[str, Any]) -> dict[str, bytes]:
    """A consolidated group ``g`` with arrays ``x`` and ``y`` (attributes on each), as ``{key: bytes}``."""
    store = MemoryStore()
    fmt = encoding.get("zarr_format")
    await azarr.group(store=store, path="g", zarr_format=fmt, attributes={"title": "t"} if fmt == 3 else None)
    for sub, dtype in (("x", "<i8"), ("y", "<f4")):
        arr = await azarr.create(
            (6,),
            chunks=(4,),
            dtype=dtype,
            store=store,
            path=f"g/{sub}",
            attributes={"units": "m", "scale": [1, 2]},
            **encoding,
        )
        await arr.setitem(Ellipsis, np.arange(6))
    await azarr.consolidate_metadata(store, path="g")
    return {key: bytes(await store.get(key)) async for key in store.list_prefix("")}


_TEMPLATES: dict[str, dict[str, bytes]] | None = None


def templates() -> dict[str, dict[str, bytes]]:
    """Every template store, built once per process."""
    global _TEMPLATES
    if _TEMPLATES is None:
        _TEMPLATES = asyncio.run(_build())
    return _TEMPLATES


# ----------------------------------------------------------------- mutations

_DEEP: Any = 0
for _ in range(300):
    _DEEP = [_DEEP]

HOSTILE_VALUES: list[Any] = [
    0,
    -1,
    1,
    3,
    2**31 - 1,
    2**31,
    2**32,
    2**34,
    2**62,
    2**63,
    2**64,
    10**400,
    10**4000,
    0.5,
    1e308,
    -1e308,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "x",
    "C",
    "F",
    "<i4",
    "|O",
    "|V2000000000",
    "<U2000000000",
    "<M8[ns]",
    ">f8",
    "|b1",
    "NaN",
    "Infinity",
    "AAAA",
    "a" * 5000,
    None,
    True,
    False,
    [],
    {},
    [[]],
    [0],
    [-1],
    [2**34],
    [2**62, 2**62],
    [1e400],
    [None],
    ["a"],
    [1] * 70,
    _DEEP,
    {"id": "zlib"},
    {"id": "pickle"},
    {"id": "no-such"},
    {"id": "blosc", "cname": "lz4"},
    {"id": "zstd", "level": 10**30},
    {"id": "delta", "dtype": "|V99999"},
    [{"id": "vlen-utf8"}],
    [{"id": "json2"}],
    [{"id": "msgpack2"}],
    [{"id": "pickle"}],
    [{"id": "delta", "dtype": "<i4", "astype": "<i8"}],
    [{"id": "packbits"}],
    [["a", "<i4", [2**20, 2**20]]],
    [["a", "<f8"], ["b", "|O"]],
    [["", "|V4"]],
    # Zarr v3 members, codecs and extensions
    "c",
    "/",
    "float128",
    "r0",
    "0x7fc00001",
    "0xZZ",
    {"must_understand": False},
    {"must_understand": True},
    {"must_understand": False, "x": _DEEP},
    {"name": "sharding_indexed", "configuration": {"chunk_shape": [2]}},
    {"name": "transpose", "configuration": {"order": [0, 0]}},
    {"name": "bytes"},
    {"name": "crc32c"},
    {"name": "gzip", "configuration": {"level": 1}},
    {"name": "zstd", "configuration": {"level": 1, "checksum": True}},
    {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 0}},
    {"name": "vlen-utf8"},
    {"name": "numcodecs.pickle"},
    {"name": "regular", "configuration": {"chunk_shape": [2**40, 2**40]}},
    {"name": "v2", "configuration": {"separator": "/"}},
    {"name": "default", "configuration": {"separator": "|"}},
    [{"name": "bytes"}, {"name": "bytes"}],
    [{"name": "gzip", "configuration": {"level": 1}}],
    [{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "crc32c"}, {"name": "crc32c"}],
    [{"name": "x", "must_understand": False}],
]

#: Names a mutation adds to a v3 document or codec object (extension members, typos of members).
NEW_MEMBERS = [
    "my_extension",
    "must_understand",
    "chunk_grid",
    "consolidated_metadata",
    "storage_transformers",
]

_LE_INTS = [0, 1, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, 2**40, 2**62, 2**64 - 1]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a JSON document (dict keys and list indices)."""
    out = [prefix]
    if len(prefix) > 6:
        return out
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list) and len(value) <= 16:
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _get_path(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _set_path(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    elif delete:
        parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return doc


def _dumps(doc: Any) -> bytes:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # so 10**4000 can be written (and must be refused on read)
    try:
        return json.dumps(doc).encode()
    finally:
        sys.set_int_max_str_digits(limit)


def _loads(data: bytes) -> Any:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.loads(data)
    except RecursionError as exc:
        raise ValueError("too deep") from exc
    finally:
        sys.set_int_max_str_digits(limit)


def is_document(key: str) -> bool:
    """A metadata document (``.zarray``, ``.zattrs``, ``.zmetadata``..., or a v3 ``zarr.json``)."""
    name = key.rsplit("/", 1)[-1]
    return name.startswith(".z") or name == "zarr.json"


@st.composite
def mutation(draw: st.DrawFn, files: dict[str, bytes], others: list[bytes]) -> tuple[str, bytes | None]:
    """One mutation of one key: ``(key, new bytes or None to delete)``."""
    key = draw(st.sampled_from(sorted(files)))
    data = files[key]
    is_meta = is_document(key)
    kinds = (
        ["json", "json", "json", "bytes", "delete"] if is_meta else ["bytes", "int", "int", "swap", "delete"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "delete":
        return key, None
    doc: Any = None
    if kind == "json":
        try:
            doc = _loads(data)
        except ValueError:  # an earlier mutation left no JSON: mutate bytes instead
            kind = "bytes"
    if kind == "json":
        path = draw(st.sampled_from(_paths(doc)))
        value = draw(st.one_of(st.sampled_from(HOSTILE_VALUES), st.integers(), st.text(max_size=8)))
        target = _get_path(doc, path)
        if isinstance(target, dict) and draw(st.integers(0, 3)) == 0:
            # A new member: an extension (must_understand or not) or a member where none belongs.
            target[draw(st.sampled_from(NEW_MEMBERS))] = value
            return key, _dumps(doc)
        delete = bool(path) and draw(st.booleans())
        return key, _dumps(_set_path(doc, path, value, delete))
    if kind == "swap":
        return key, draw(st.sampled_from(others))
    buf = bytearray(data)
    if kind == "int" and len(buf) >= 4:
        width = draw(st.sampled_from([4, 8]))
        offset = draw(st.integers(0, max(0, min(len(buf), 32) - width)))
        if draw(st.booleans()):  # near the end instead: a shard's index (and crc32c) is there
            offset = max(0, len(buf) - draw(st.integers(width, 72)))
        value = draw(st.sampled_from(_LE_INTS)) % 2 ** (8 * width)
        buf[offset : offset + width] = value.to_bytes(width, "little")[: len(buf) - offset]
        return key, bytes(buf)
    op = draw(st.sampled_from(["flip", "truncate", "append", "random"]))
    if op == "flip" and buf:
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(buf) - 1))
            buf[i] ^= draw(st.integers(1, 255))
    elif op == "truncate":
        del buf[draw(st.integers(0, len(buf))) :]
    elif op == "append":
        buf += draw(st.binary(min_size=1, max_size=64))
    else:
        buf = bytearray(draw(st.binary(max_size=64)))
    return key, bytes(buf)


@st.composite
def hostile_store(draw: st.DrawFn) -> tuple[str, dict[str, bytes]]:
    """A template name and its mutated ``{key: bytes}``."""
    all_templates = templates()
    name = draw(st.sampled_from(sorted(all_templates)))
    files = dict(all_templates[name])
    others = [v for t in all_templates.values() for k, v in t.items() if not is_document(k)]
    for _ in range(draw(st.integers(1, 3))):
        key, value = draw(mutation(files, others))
        if value is None:
            files.pop(key, None)
        else:
            files[key] = value
        if not files:
            break
    return name, files


def fuzz_settings(examples: int) -> settings:
    """Hypothesis settings of every fuzzer: ``examples`` cases, no deadline or database,
    derandomized (a fixed sequence, as CI needs) unless ``AZARR_FUZZ_RANDOM`` is set."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=os.environ.get("AZARR_FUZZ_RANDOM") is None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


# ------------------------------------------------------------------ running


def _selection(shape: tuple[int, ...], itemsize: int) -> tuple[slice, ...]:
    """A leading corner of the array of at most READ_BYTES (at least one element per dim)."""
    elements = max(1, min(4096, READ_BYTES // max(1, itemsize)))
    per_dim = max(1, int(elements ** (1 / max(1, len(shape)))))
    return tuple(slice(0, per_dim) for _ in shape)


async def _read_array(arr: Any) -> None:
    if math.prod(arr.shape) == 0:
        return
    await arr.getitem(_selection(arr.shape, arr.dtype.itemsize))
    if arr.shards is not None:  # also one inner chunk: its index, then a ranged read
        await arr.getitem(tuple(n - 1 for n in arr.shape))


async def run_case(name: str, files: dict[str, bytes]) -> None:
    """Open and read a (mutated) store the way a user would: raises only AzarrError subclasses."""
    store = MemoryStore()
    for key, value in files.items():
        await store.set(key, value)
    if name in ("consolidated", "v3-consolidated"):
        node = await azarr.open_consolidated(store, mode="r", path="g")
        async for _, arr in node.arrays():  # type: ignore[union-attr]
            await _read_array(arr)
        return
    arr = await azarr.open_array(store, mode="r", path="a")
    await _read_array(arr)
