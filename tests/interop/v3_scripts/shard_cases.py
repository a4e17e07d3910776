"""The sharded Zarr v3 interop corpus (``sharding_indexed``): cases and expected contents (NumPy only).

Imported by path by azarr's tests and by ``ref_v3.py`` in the zarr-python 3.4 / TensorStore
venv, like ``v3_cases.py`` (whose values, fill values and equality it reuses). Each case is an
array whose one codec is ``sharding_indexed``: an inner chain x an index layout (``start`` /
``end``, with or without ``crc32c``, little- or big-endian) x a rank, shaped so that the
shards at the edges are partial (and the inner chunks at the edges too), and written
everywhere but its last row of inner chunks: the shards of that row hold empty inner chunks
(index entries 2^64-1) beside stored ones.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import v3_cases

_LE = {"name": "bytes", "configuration": {"endian": "little"}}
_BE = {"name": "bytes", "configuration": {"endian": "big"}}
_ZSTD = {"name": "zstd", "configuration": {"level": 0, "checksum": False}}

#: inner chain name -> codecs (``TRANSPOSE`` becomes a transpose reversing the axes, the F layout).
INNER_CHAINS: dict[str, list[dict[str, Any]]] = {
    "raw": [_LE],
    "zstd": [_LE, _ZSTD],
    "big-blosc-crc": [
        _BE,
        {
            "name": "blosc",
            "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
        },
        {"name": "crc32c"},
    ],
    "gzip-crc": [_BE, {"name": "gzip", "configuration": {"level": 5}}, {"name": "crc32c"}],
    "F-zstd": [{"name": "TRANSPOSE"}, _LE, _ZSTD],
}
#: index layout name -> (index_codecs, index_location)
INDEXES: dict[str, tuple[list[dict[str, Any]], str]] = {
    "end": ([_LE, {"name": "crc32c"}], "end"),
    "start": ([_LE, {"name": "crc32c"}], "start"),
    "end-big-plain": ([_BE], "end"),
    "start-plain": ([_LE], "start"),
}
#: rank -> (shape, shard shape, inner chunk shape)
SHAPES: dict[int, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    1: ((37,), (12,), (3,)),
    2: ((23, 17), (8, 6), (4, 3)),
    3: ((9, 7, 5), (4, 4, 2), (2, 2, 1)),
}
#: data types with the full product of chains x indexes at rank 2; the others get a few.
FULL = ("int16", "float64")
OTHERS = ("uint8", "complex64", "bool", "string")


def cases() -> list[dict[str, Any]]:
    """Every case: ``name, dtype, shape, shards, chunks, codecs, ts``."""
    out: list[dict[str, Any]] = []
    combos: list[tuple[str, str, str, int]] = []
    for dtype in FULL:
        combos += [(dtype, chain, index, 2) for chain in INNER_CHAINS for index in INDEXES]
        combos += [
            (dtype, chain, list(INDEXES)[i % 4], rank)
            for rank in (1, 3)
            for i, chain in enumerate(INNER_CHAINS)
        ]
    combos += [(dtype, "zstd", list(INDEXES)[i % 4], 2) for i, dtype in enumerate(OTHERS)]
    for dtype_name, chain, index, rank in combos:
        if chain == "F-zstd" and rank == 1:
            continue
        shape, shards, inner = SHAPES[rank]
        dtype = v3_cases.numpy_dtype(dtype_name)
        spec = v3_cases.DTYPES[dtype_name][0]
        codecs: list[dict[str, Any]] = []
        for entry in INNER_CHAINS[chain]:
            if entry["name"] == "TRANSPOSE":
                entry = {"name": "transpose", "configuration": {"order": list(reversed(range(rank)))}}
            elif spec == "str" and entry["name"] == "bytes":
                entry = {"name": "vlen-utf8", "configuration": {}}
            elif entry["name"] == "blosc":
                entry = {
                    "name": "blosc",
                    "configuration": {**entry["configuration"], "typesize": dtype.itemsize},
                }
            elif entry["name"] == "bytes" and dtype.newbyteorder("<") == dtype.newbyteorder(">"):
                entry = {"name": "bytes"}  # single-byte types: no endian
            codecs.append(entry)
        index_codecs, location = INDEXES[index]
        sharding = {
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": list(inner),
                "codecs": codecs,
                "index_codecs": index_codecs,
                "index_location": location,
            },
        }
        out.append(
            {
                "name": f"{dtype_name}-{chain}-{index}-{rank}d",
                "dtype": dtype_name,
                "shape": list(shape),
                "shards": list(shards),
                "chunks": list(inner),
                "codecs": [sharding],
                "ts": bool(v3_cases.DTYPES[dtype_name][2]),
            }
        )
    return out


def expected(case: dict[str, Any]) -> Any:
    """What a reader of the case must get (the last row of inner chunks reads as the fill value)."""
    return v3_cases.expected(case)


def written(case: dict[str, Any]) -> tuple[slice, ...]:
    """The region writers fill."""
    return v3_cases.written(tuple(case["shape"]), tuple(case["chunks"]))
