"""The Zarr v3 interop corpus: cases and their expected contents (NumPy only).

Imported by path both by azarr's tests (Python 3.11) and by the reference scripts in the
zarr-python 3.4 / TensorStore venv (Python 3.12), so both sides build the same data.
Each case is an array: a data type x a codec chain x a chunk key encoding x a C or F
(``transpose``) chunk layout, shaped so that chunks at the edges are partial, and written
everywhere but its last row of chunks, which reads as the fill value.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

#: data type name -> (NumPy dtype or "str"/"bytes", fill value as JSON-able Python, TensorStore reads it)
DTYPES: dict[str, tuple[Any, Any, bool]] = {
    "bool": ("bool", True, True),
    "int8": ("i1", -5, True),
    "int16": ("<i2", 7, True),
    "int32": ("<i4", -1, True),
    "int64": ("<i8", 2**40, True),
    "uint8": ("u1", 255, True),
    "uint16": ("<u2", 3, True),
    "uint32": ("<u4", 0, True),
    "uint64": ("<u8", 2**63, True),
    "float16": ("<f2", 1.5, True),
    "float32": ("<f4", "nan", True),
    "float64": ("<f8", "-inf", True),
    "complex64": ("<c8", [1.0, -2.0], True),
    "complex128": ("<c16", ["nan", "inf"], True),
    "bytes5": ("S5", "ab", False),
    "utf32x3": ("<U3", "xy", False),
    "raw4": ("V4", "raw", False),
    "datetime64s": ("<M8[s]", "NaT", False),
    "timedelta64ms": ("<m8[10ms]", 3, False),
    "struct": ([("a", "<i4"), ("b", "u1")], "struct", False),
    "string": ("str", "", False),
    "vbytes": ("bytes", "", False),
}

_BLOSC = {
    "name": "blosc",
    "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
}
#: chain name -> codecs after the (optional) transpose, ``{itemsize}`` filled in for blosc.
CHAINS: dict[str, list[dict[str, Any]]] = {
    "raw": [{"name": "bytes", "configuration": {"endian": "little"}}],
    "big-blosc-crc": [{"name": "bytes", "configuration": {"endian": "big"}}, _BLOSC, {"name": "crc32c"}],
    "zstd-checksum": [
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "zstd", "configuration": {"level": 3, "checksum": True}},
    ],
    "gzip-crc": [
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "gzip", "configuration": {"level": 5}},
        {"name": "crc32c"},
    ],
}
VLEN_CHAINS: dict[str, list[dict[str, Any]]] = {
    "vlen": [{"name": "VLEN"}],
    "vlen-zstd-crc": [
        {"name": "VLEN"},
        {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
        {"name": "crc32c"},
    ],
}
ENCODINGS = {
    "default": {"name": "default", "configuration": {"separator": "/"}},
    "v2": {"name": "v2", "configuration": {"separator": "."}},
}
SHAPES = {2: ((7, 5), (3, 2)), 1: ((11,), (4,)), 3: ((5, 4, 3), (2, 3, 2))}
#: Data types given the whole product of chains x encodings x layouts x ranks.
FULL = ("int16", "float64")


def numpy_dtype(name: str) -> np.dtype[Any]:
    spec = DTYPES[name][0]
    return np.dtype(object) if spec in ("str", "bytes") else np.dtype(spec)


def fill_value(name: str) -> Any:
    """The fill value as a NumPy scalar (or str/bytes) of the case's dtype."""
    spec, fill, _ = DTYPES[name]
    dtype = numpy_dtype(name)
    if spec == "str":
        return fill
    if spec == "bytes":
        return fill.encode()
    if fill == "raw":
        return np.frombuffer(b"\x01\x02\x03\x04", dtype=dtype)[0]
    if fill == "struct":
        return np.array((9, 8), dtype=dtype)[()]
    if fill == "NaT":
        return np.array("NaT", dtype=dtype)[()]
    if isinstance(fill, list):
        return np.array(complex(float(fill[0]), float(fill[1])), dtype=dtype)[()]
    if isinstance(fill, str) and dtype.kind == "S":
        return np.array(fill.encode(), dtype=dtype)[()]
    if isinstance(fill, str) and dtype.kind == "f":
        return np.array(float(fill), dtype=dtype)[()]
    if dtype.kind in "mM":
        return np.array(fill, dtype="i8").view(dtype)[()]
    return np.array(fill, dtype=dtype)[()]


def cases() -> list[dict[str, Any]]:
    """Every case: ``name, dtype, shape, chunks, codecs, encoding, layout, ts``."""
    out: list[dict[str, Any]] = []
    for d_index, (dtype_name, (spec, _, ts)) in enumerate(DTYPES.items()):
        variable = spec in ("str", "bytes")
        chains = VLEN_CHAINS if variable else CHAINS
        combos: list[tuple[str, str, str, int]]
        if dtype_name in FULL:
            combos = list(itertools.product(chains, ENCODINGS, ("C", "F"), (1, 2, 3)))
        else:
            combos = [
                (chain, list(ENCODINGS)[(d_index + i) % 2], ("C", "F")[(d_index + i // 2) % 2], 2)
                for i, chain in enumerate(chains)
            ]
        for chain, encoding, layout, rank in combos:
            if layout == "F" and rank == 1:
                continue
            shape, chunks = SHAPES[rank]
            dtype = numpy_dtype(dtype_name)
            codecs = []
            if layout == "F":
                codecs.append({"name": "transpose", "configuration": {"order": list(reversed(range(rank)))}})
            for entry in chains[chain]:
                entry = dict(entry)
                if entry["name"] == "VLEN":
                    entry = {"name": "vlen-utf8" if spec == "str" else "vlen-bytes", "configuration": {}}
                elif entry["name"] == "blosc":
                    entry = {
                        "name": "blosc",
                        "configuration": {**entry["configuration"], "typesize": dtype.itemsize},
                    }
                elif entry["name"] == "bytes" and dtype.newbyteorder("<") == dtype.newbyteorder(">"):
                    entry = {"name": "bytes"}  # single-byte types: no endian
                codecs.append(entry)
            out.append(
                {
                    "name": f"{dtype_name}-{chain}-{encoding}-{layout}-{rank}d",
                    "dtype": dtype_name,
                    "shape": list(shape),
                    "chunks": list(chunks),
                    "codecs": codecs,
                    "encoding": ENCODINGS[encoding],
                    "layout": layout,
                    "ts": ts,
                }
            )
    return out


def values(name: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """Deterministic contents of every element (before the unwritten part is filled)."""
    dtype = numpy_dtype(name)
    n = int(np.prod(shape))
    i = np.arange(n)
    spec = DTYPES[name][0]
    if spec == "str":
        flat = np.array(["é" * (k % 4) + str(k) for k in range(n)], dtype=object)
    elif spec == "bytes":
        flat = np.array([bytes(range(k % 7)) + b"%d" % k for k in range(n)], dtype=object)
    elif dtype.kind == "b":
        flat = (i % 3 == 0).astype(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        span = min(int(info.max) - int(info.min), 2**62)
        flat = np.array([int(info.min) + (k * 977 * 1_000_003) % span for k in range(n)]).astype(dtype)
    elif dtype.kind == "f":
        flat = (i * 0.75 - 3).astype(dtype)
        flat[1::7] = np.inf
        flat[2::9] = np.nan
    elif dtype.kind == "c":
        flat = (i * 0.5 + 1j * (n - i)).astype(dtype)
    elif dtype.kind == "S":
        flat = np.array([b"s%d" % k for k in range(n)], dtype=dtype)
    elif dtype.kind == "U":
        flat = np.array([f"ü{k % 100}" for k in range(n)], dtype=dtype)
    elif dtype.kind == "V":
        flat = np.frombuffer(bytes((k * 13) % 256 for k in range(n * dtype.itemsize)), dtype=dtype).copy()
    elif dtype.kind in "mM":
        flat = (i * 86400 - 5).astype("i8").view(dtype)
    else:  # struct
        flat = np.zeros(n, dtype=dtype)
        flat["a"] = i * -3
        flat["b"] = i % 200
    return flat.reshape(shape)


def written(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    """The region a writer fills: everything but the last row of chunks along axis 0."""
    last_row = (shape[0] - 1) // chunks[0] * chunks[0]
    return (slice(0, last_row), *(slice(None) for _ in shape[1:]))


def expected(case: dict[str, Any]) -> np.ndarray[Any, Any]:
    """What a reader of the case must get."""
    shape, chunks = tuple(case["shape"]), tuple(case["chunks"])
    data = values(case["dtype"], shape)
    out = np.empty(shape, dtype=data.dtype)
    out[...] = fill_value(case["dtype"]) if data.dtype != object else None
    if data.dtype == object:
        out.fill(fill_value(case["dtype"]))
    region = written(shape, chunks)
    out[region] = data[region]
    return out


def same(a: Any, b: np.ndarray[Any, Any]) -> bool:
    """Bit-exact equality (objects by value, everything else by its bytes in one byte order)."""
    a = np.asarray(a)
    if b.dtype == object or a.dtype == object or a.dtype.kind == "T":
        return a.shape == b.shape and [x for x in a.ravel().tolist()] == [x for x in b.ravel().tolist()]
    if a.shape != b.shape:
        return False
    if a.dtype.fields is not None or b.dtype.fields is not None:
        return a.astype(b.dtype).tobytes() == b.tobytes()
    return a.astype(b.dtype.newbyteorder("<")).tobytes() == b.astype(b.dtype.newbyteorder("<")).tobytes()


def tensorstore_spec(zarr_json: dict[str, Any], path: str) -> dict[str, Any]:
    """A TensorStore ``zarr3`` spec creating, at local ``path``, the array whose metadata
    zarr-python wrote as ``zarr_json`` (so both references write the same array)."""
    members = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {k: zarr_json[k] for k in members},
        "create": True,
    }
