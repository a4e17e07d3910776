"""zarr-python 2.18 side of tests/interop/test_n5.py.

``n5_store.py write DIR``  zarr.N5Store writes DIR/theirs.n5 (the scenario below).
``n5_store.py read DIR``   zarr.N5Store reads DIR/ours.n5 (written by azarr) and prints JSON:
                           group attributes, and per array dtype, shape, chunks, attributes, values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numcodecs
import numpy as np
import zarr

ARRAYS = {
    "x": {
        "data": np.arange(35, dtype="<u2").reshape(5, 7),
        "chunks": (2, 3),
        "compressor": numcodecs.GZip(5),
    },
    "sub/y": {"data": np.linspace(0, 1, 10, dtype="<f4"), "chunks": (4,), "compressor": None},
    "b": {
        "data": np.arange(-6, 6, dtype="<i8").reshape(3, 4),
        "chunks": (2, 2),
        "compressor": numcodecs.Blosc("zstd", 3, 1),
    },
}


def write(root: Path) -> None:
    g = zarr.group(store=zarr.N5Store(str(root / "theirs.n5")), overwrite=True)
    g.attrs.update({"title": "n5 container", "n": 2})
    for path, spec in ARRAYS.items():
        z = g.create_dataset(path, data=spec["data"], chunks=spec["chunks"], compressor=spec["compressor"])
        z.attrs["units"] = path


def read(root: Path) -> None:
    g = zarr.open_group(store=zarr.N5Store(str(root / "ours.n5")), mode="r")
    out = {"attrs": dict(g.attrs), "arrays": {}}
    for path in ARRAYS:
        z = g[path]
        out["arrays"][path] = {
            "dtype": z.dtype.str,
            "shape": list(z.shape),
            "chunks": list(z.chunks),
            "attrs": dict(z.attrs),
            "values": z[...].tolist(),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](Path(sys.argv[2]))
