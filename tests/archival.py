"""Archival files for the reference-store tests, and references to them made from h5py's own
chunk index (no kerchunk needed: the default run checks azarr against HDF5's byte layout;
``tests/interop/test_references_interop.py`` checks kerchunk's and VirtualiZarr's sets).

`write_hdf5` writes a NetCDF4-like HDF5 file (chunked + gzip + shuffle, chunked uncompressed,
contiguous, a scalar); `hdf5_references` lists every dataset's chunks with
``DatasetID.get_chunk_info`` into a kerchunk version 1 reference set.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np

#: Variables of `write_hdf5`: name -> (shape, chunks or None for contiguous, dtype, gzip).
VARIABLES: dict[str, tuple[tuple[int, ...], tuple[int, ...] | None, str, bool]] = {
    "temperature": ((40, 30, 50), (8, 10, 25), "<f4", True),
    "counts": ((1000,), (64,), "<i8", False),
    "mask": ((17, 19), None, "|u1", False),
    "level": ((12,), None, "<f8", False),
}


def write_hdf5(path: Path, *, seed: int = 0) -> dict[str, np.ndarray[Any, Any]]:
    """Write the `VARIABLES` to ``path``; returns what h5py reads back for each."""
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for name, (shape, chunks, dtype, gzip) in VARIABLES.items():
            if np.dtype(dtype).kind == "f":
                data = rng.standard_normal(shape).astype(dtype)
            else:
                data = rng.integers(0, 200, size=shape).astype(dtype)
            f.create_dataset(
                name,
                data=data,
                chunks=chunks,
                compression="gzip" if gzip else None,
                shuffle=gzip,
                fillvalue=0,
            )
            f[name].attrs["_ARRAY_DIMENSIONS_"] = "unused"
    with h5py.File(path, "r") as f:
        return {name: f[name][()] for name in VARIABLES}


def hdf5_references(path: Path, url: str) -> dict[str, Any]:
    """A kerchunk version 1 reference set for `write_hdf5`'s file at ``url``."""
    refs: dict[str, Any] = {".zgroup": json.dumps({"zarr_format": 2}), ".zattrs": json.dumps({"title": "t"})}
    with h5py.File(path, "r") as f:
        for name, (shape, chunks, dtype, gzip) in VARIABLES.items():
            dset = f[name]
            zarray = {
                "zarr_format": 2,
                "shape": list(shape),
                "chunks": list(chunks or shape),
                "dtype": dtype,
                "compressor": {"id": "zlib", "level": 4} if gzip else None,
                "filters": [{"id": "shuffle", "elementsize": np.dtype(dtype).itemsize}] if gzip else None,
                "fill_value": 0,
                "order": "C",
            }
            refs[f"{name}/.zarray"] = json.dumps(zarray)
            dims = [f"{name}_d{i}" for i in range(len(shape))]
            refs[f"{name}/.zattrs"] = json.dumps({"_ARRAY_DIMENSIONS": dims})
            if chunks is None:
                key = f"{name}/" + ".".join("0" for _ in shape)
                refs[key] = ["{{u}}", dset.id.get_offset(), dset.id.get_storage_size()]
                continue
            for i in range(dset.id.get_num_chunks()):
                info = dset.id.get_chunk_info(i)
                coords = [o // c for o, c in zip(info.chunk_offset, chunks, strict=True)]
                refs[f"{name}/" + ".".join(map(str, coords))] = ["{{u}}", info.byte_offset, info.size]
    refs["level/.zattrs"] = (
        "base64:" + base64.b64encode(json.dumps({"_ARRAY_DIMENSIONS": ["level"]}).encode()).decode()
    )
    return {"version": 1, "templates": {"u": url}, "refs": refs}


def write_parquet_references(refs: dict[str, Any], out: Path, *, record_size: int) -> None:
    """Write a version 1 set (templates expanded) in fsspec's ``LazyReferenceMapper`` layout:
    ``.zmetadata`` + ``<array>/refs.<i>.parq`` (columns path, offset, size, raw), written
    here with pyarrow (fsspec's own writer needs kerchunk; the interop tests use it)."""
    import math

    import pyarrow as pa
    import pyarrow.parquet as pq

    templates, entries = refs.get("templates", {}), refs["refs"]
    metadata: dict[str, Any] = {}
    arrays: dict[str, dict[str, Any]] = {}
    for key, value in entries.items():
        if key.rpartition("/")[2] in (".zarray", ".zgroup", ".zattrs"):
            if value.startswith("base64:"):
                value = base64.b64decode(value[7:]).decode()
            metadata[key] = json.loads(value)
            if key.endswith("/.zarray"):
                arrays[key[: -len("/.zarray")]] = metadata[key]
    out.mkdir(parents=True)
    (out / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": record_size}))
    for name, zarray in arrays.items():
        grid = [math.ceil(s / c) for s, c in zip(zarray["shape"], zarray["chunks"], strict=True)] or [1]
        total = math.prod(grid)
        (out / name).mkdir()
        for number in range(math.ceil(total / record_size)):
            rows: dict[str, list[Any]] = {"path": [], "offset": [], "size": [], "raw": []}
            for flat in range(number * record_size, min(total, (number + 1) * record_size)):
                coords = np.unravel_index(flat, grid)
                entry = entries.get(f"{name}/" + ".".join(str(int(c)) for c in coords))
                url = (
                    None if not isinstance(entry, list) else entry[0].replace("{{u}}", templates.get("u", ""))
                )
                rows["path"].append(url)
                rows["offset"].append(entry[1] if isinstance(entry, list) and len(entry) == 3 else 0)
                rows["size"].append(entry[2] if isinstance(entry, list) and len(entry) == 3 else 0)
                rows["raw"].append(entry.encode() if isinstance(entry, str) else None)
            table = pa.table(
                {
                    "path": pa.array(rows["path"], pa.string()),
                    "offset": pa.array(rows["offset"], pa.int64()),
                    "size": pa.array(rows["size"], pa.int64()),
                    "raw": pa.array(rows["raw"], pa.binary()),
                }
            )
            pq.write_table(table, out / name / f"refs.{number}.parq")
