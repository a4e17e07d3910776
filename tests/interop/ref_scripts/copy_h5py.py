"""zarr-python 2.18 + h5py side of tests/interop/test_copy_nodes.py's HDF5 test.

Usage: copy_h5py.py H5FILE OUT
Copies the HDF5 file into the directory store OUT three ways (copy_all; copy of one dataset with
new chunks and compressor; a dry run into OUT/dry) and prints JSON: counts and log lines per step.
"""

from __future__ import annotations

import json
import sys

import h5py
import numcodecs
import zarr

if __name__ == "__main__":
    results = {}
    with h5py.File(sys.argv[1], "r") as f:
        for key, run in [
            ("all", lambda log: zarr.copy_all(f, zarr.open_group(sys.argv[2], mode="a"), log=log)),
            (
                "one",
                lambda log: zarr.copy(
                    f["grp/y"],
                    zarr.open_group(sys.argv[2], mode="a"),
                    name="y2",
                    log=log,
                    chunks=(3,),
                    compressor=numcodecs.Zlib(level=1),
                ),
            ),
            (
                "dry",
                lambda log: zarr.copy_all(
                    f, zarr.open_group(sys.argv[2] + "/dry", mode="a"), dry_run=True, log=log
                ),
            ),
        ]:
            lines: list[str] = []
            counts = run(lines.append)
            results[key] = {"counts": list(counts), "log": lines}
    print(json.dumps(results))
