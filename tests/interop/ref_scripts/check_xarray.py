"""Open a dataset written by azarr with xarray 2024.10 + zarr 2.18 (run with the reference python).

Usage: ``python check_xarray.py STORE_DIR EXPECTATIONS_JSON``

EXPECTATIONS_JSON::

    {"attrs": {...},                      # dataset attributes, compared exactly
     "coords": ["time", ...],             # names xarray must treat as coordinates
     "variables": {name: {"dims": [...], "attrs": {...},   # attrs: a subset of the decoded attrs
                          "values": "file.npy",            # CF-decoded values (path relative to the JSON)
                          "rtol": 0.0}}}                   # 0 means exact (NaN equal to NaN)

``xr.open_zarr(STORE_DIR, consolidated=True)`` must succeed, decode CF conventions (scale_factor,
_FillValue, time units) and match. Prints a report; exits 1 on any mismatch.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr


def check(store_dir: Path, expectations: dict[str, Any], base: Path) -> list[str]:
    problems: list[str] = []
    ds = xr.open_zarr(str(store_dir), consolidated=True)
    if dict(ds.attrs) != expectations["attrs"]:
        problems.append(f"dataset attrs {dict(ds.attrs)} != expected {expectations['attrs']}")
    if set(ds.coords) != set(expectations["coords"]):
        problems.append(f"coords {sorted(ds.coords)} != expected {sorted(expectations['coords'])}")
    if set(ds.variables) != set(expectations["variables"]):
        problems.append(f"variables {sorted(ds.variables)} != expected {sorted(expectations['variables'])}")
    for name, want in expectations["variables"].items():
        if name not in ds.variables:
            continue
        var = ds.variables[name]
        if list(var.dims) != want["dims"]:
            problems.append(f"{name}: dims {list(var.dims)} != expected {want['dims']}")
        missing = {k: v for k, v in want["attrs"].items() if var.attrs.get(k) != v}
        if missing:
            problems.append(f"{name}: attrs {dict(var.attrs)} lack or differ on {missing}")
        expected = np.load(base / want["values"])
        values = var.values
        if values.dtype.kind != expected.dtype.kind or values.shape != expected.shape:
            problems.append(
                f"{name}: {values.dtype}{values.shape} != expected {expected.dtype}{expected.shape}"
            )
            continue
        try:
            if want.get("rtol", 0.0):
                np.testing.assert_allclose(values, expected, rtol=want["rtol"], equal_nan=True)
            else:
                np.testing.assert_array_equal(values, expected)
        except AssertionError as exc:
            problems.append(f"{name}: decoded values differ: {exc}")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    store_dir, expectations_file = Path(argv[1]), Path(argv[2])
    expectations = json.loads(expectations_file.read_text())
    try:
        problems = check(store_dir, expectations, expectations_file.parent)
    except Exception as exc:
        problems = [f"xarray could not open/decode the dataset: {exc!r}\n{traceback.format_exc()}"]
    print(f"xarray {xr.__version__}: {store_dir}")
    for p in problems:
        print("  FAIL " + p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
