"""zarr-python 2.18 side of tests/interop/test_copy_nodes.py: run the copy scenario, dump the outcome.

Usage: copy_nodes.py SRC OUT
SRC is a directory store written by azarr (the source hierarchy). Every step of ``scenario`` copies
from it into directory stores under OUT; the script prints one JSON object: per step the returned
counts (or the error class name) and the log lines.
"""

from __future__ import annotations

import json
import sys

import numcodecs
import zarr


def scenario(src: zarr.Group, out: str) -> dict:
    results = {}

    def step(key: str, fn, dest_name: str, make, **kwargs):
        lines: list[str] = []
        dest = zarr.open_group(f"{out}/{dest_name}", mode="a")
        try:
            counts = list(fn(*make(src, dest), log=lines.append, **kwargs))
        except Exception as exc:
            counts = type(exc).__name__
        results[key] = {"counts": counts, "log": lines}

    step("array", zarr.copy, "d1", lambda s, d: (s["a"], d))
    step("tree", zarr.copy, "d1", lambda s, d: (s, d), name="tree")
    step("tree_again_raise", zarr.copy, "d1", lambda s, d: (s, d), name="tree")
    step("tree_skip", zarr.copy, "d1", lambda s, d: (s, d), name="tree", if_exists="skip")
    step("tree_replace", zarr.copy, "d1", lambda s, d: (s, d), name="tree", if_exists="replace")
    step(
        "tree_skip_initialized",
        zarr.copy,
        "d1",
        lambda s, d: (s, d),
        name="tree",
        if_exists="skip_initialized",
    )
    step("shallow", zarr.copy, "d1", lambda s, d: (s, d), name="shallow", shallow=True)
    step(
        "recoded",
        zarr.copy,
        "d1",
        lambda s, d: (s["sub"], d),
        name="recoded",
        without_attrs=True,
        compressor=numcodecs.Zlib(level=1),
    )
    step("dry", zarr.copy, "d2", lambda s, d: (s, d), name="dry", dry_run=True)
    step("all", zarr.copy_all, "d3", lambda s, d: (s, d))
    return results


if __name__ == "__main__":
    source = zarr.open_group(sys.argv[1], mode="r")
    print(json.dumps(scenario(source, sys.argv[2])))
