"""The xarray objects both sides of the Zarr v3 xarray exchange write, and how they compare.

Imported by ``test_xarray_v3_interop.py`` (azarr's side) and by ``xarray_v3.py`` in the Zarr
v3 reference interpreter (xarray 2026.9 + zarr-python 3.4); it imports neither azarr nor
zarr, only xarray, NumPy and pandas, so both build the very same objects.

The dataset covers what xarray's Zarr engine encodes differently in Zarr format 3: float
data whose missing values become the array's NaN fill value, an integer variable with
``_FillValue``/``scale_factor``/``add_offset`` (CF packing), booleans, datetimes and
timedeltas (``units`` attributes), variable-length and fixed-width strings, bytes, a 0-d
variable, several chunks with a partial edge chunk, and an append along ``time``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

#: Encodings both writers are given: several chunks per array, and CF packing.
ENCODING: dict[str, dict[str, Any]] = {
    "t2m": {"chunks": (2, 3, 4)},
    "packed": {"dtype": "int16", "scale_factor": 0.5, "add_offset": 10.0, "_FillValue": -999},
}
APPEND_DIM = "time"


def dataset(steps: range = range(6)) -> xr.Dataset:
    """The dataset at time steps ``steps`` (deterministic)."""
    n, lat, lon = len(steps), 5, 7
    start = steps.start
    rng = np.random.default_rng(34 + start)
    t2m = rng.standard_normal((n, lat, lon)).astype("f4")
    t2m[t2m > 1.5] = np.nan
    packed = np.round(rng.uniform(-20, 40, (n, lat)) * 2) / 2 + 0.0  # no -0.0: packing keeps no sign of zero
    packed[0, 0] = np.nan
    return xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"}),
            "packed": (("time", "lat"), packed, {"units": "degC"}),
            "flag": (("time", "lat"), rng.integers(0, 2, (n, lat)).astype(bool)),
            "lead": (("time",), pd.to_timedelta(np.arange(start, start + n) * 3, unit="h").to_numpy()),
            "station": (("lat",), np.array(["north", "n", "equator", "s", ""], dtype=object)),
            "code": (("lon",), np.array(["a", "bb", "ccc", "dddd", "e", "f", "gg"])),
            "raw": (("lon",), np.array([b"x", b"yy", b"", b"z", b"w", b"v", b"uu"])),
            "scalar": ((), np.float64(273.15), {"units": "K"}),
        },
        coords={
            # Nanoseconds, what xarray decodes times to whatever pandas makes by default.
            "time": (
                pd.date_range("2020-01-01", periods=n, freq="6h") + pd.Timedelta(hours=6 * start)
            ).as_unit("ns"),
            "lat": np.linspace(-40.0, 40.0, lat),
            "lon": np.arange(lon, dtype="i4") * 15,
        },
        attrs={"title": "xarray v3 exchange", "history": ["made", "kept"], "version": 3},
    )


def full() -> xr.Dataset:
    """What a store holds after the write and the append."""
    return xr.concat([dataset(range(6)), dataset(range(6, 8))], dim=APPEND_DIM, data_vars="minimal")


def tree() -> xr.DataTree:
    """A small hierarchy: a root with a coordinate, children inheriting it, a grandchild."""
    base = dataset()
    return xr.DataTree.from_dict(
        {
            "/": xr.Dataset(coords={"time": base.time}, attrs={"kind": "tree"}),
            "/surface": base[["t2m", "flag"]].drop_vars("time"),
            "/surface/stations": base[["station", "packed"]].drop_vars("time"),
            "/meta": xr.Dataset({"code": base.code}, attrs={"note": "no time"}),
        }
    )


def _plain(values: np.ndarray) -> np.ndarray:
    """Strings as Python str objects (zarr-python 3 hands xarray NumPy's StringDType)."""
    if values.dtype.kind == "T":
        return values.astype(object)
    return values


def differences(actual: xr.Dataset, expected: xr.Dataset) -> list[str]:
    """Where ``actual`` differs from ``expected``: names, dims, attributes, dtypes, and values
    bit for bit (NaN payloads included); empty when identical."""
    found = []
    if set(actual.variables) != set(expected.variables):
        return [f"variables {sorted(actual.variables)} != {sorted(expected.variables)}"]
    if dict(actual.attrs) != dict(expected.attrs):
        found.append(f"attrs {actual.attrs} != {expected.attrs}")
    if set(actual.coords) != set(expected.coords):
        found.append(f"coords {sorted(actual.coords)} != {sorted(expected.coords)}")
    for name, want in expected.variables.items():
        got = actual.variables[name]
        if got.dims != want.dims or dict(got.attrs) != dict(want.attrs):
            found.append(f"{name}: {got.dims} {got.attrs} != {want.dims} {want.attrs}")
            continue
        a, b = _plain(np.asarray(got.values)), _plain(np.asarray(want.values))
        if a.dtype != b.dtype:
            found.append(f"{name}: dtype {a.dtype} != {b.dtype}")
        elif a.dtype.kind == "O":
            if a.tolist() != b.tolist():
                found.append(f"{name}: {a.tolist()} != {b.tolist()}")
        elif a.tobytes() != b.tobytes():
            found.append(f"{name}: values differ bit for bit: {a.ravel()[:5]} != {b.ravel()[:5]}")
    return found


def tree_differences(actual: xr.DataTree, expected: xr.DataTree) -> list[str]:
    """`differences` node by node (each node with its inherited coordinates)."""
    got = {node.path: node for node in actual.subtree}
    want = {node.path: node for node in expected.subtree}
    if set(got) != set(want):
        return [f"nodes {sorted(got)} != {sorted(want)}"]
    return [
        f"{path}: {d}"
        for path in sorted(want)
        for d in differences(got[path].to_dataset(), want[path].to_dataset())
    ]


def array_documents(store: Path) -> dict[str, dict[str, Any]]:
    """Every array's ``zarr.json`` below ``store``, by path."""
    found = {}
    for document in sorted(store.rglob("zarr.json")):
        meta = json.loads(document.read_text())
        if meta.get("node_type") == "array":
            found[str(document.parent.relative_to(store))] = meta
    return found
