"""xarray datasets for the ``engine="azarr"`` interop tests, and a version-independent description of what
an xarray opens.

Run with the reference python (xarray 2024.10 + zarr 2.18)::

    python xarray_cases.py write TARGET      # write the cases with xr.Dataset.to_zarr, then describe them
    python xarray_cases.py describe TARGET   # describe TARGET/cases.json's stores as engine="zarr" opens them

``TARGET/cases.json`` lists ``{"<case>": {"store": "<case>.zarr", "groups": ["", "child", ...],
"consolidated": bool}}``. ``describe`` writes ``TARGET/described/<case>/<group or _root>/desc.json`` and
``values.npz``: dimension names, attributes (numpy types tagged), coordinate names, dtypes and the decoded
values of every variable, so a newer xarray can rebuild the same Dataset (`rebuild`) and compare
with ``xr.testing.assert_identical``, without pickles or netCDF libraries.

The azarr tests import this module for `rebuild` and `describe_dataset` (they have xarray,
not zarr 2).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

ROOT = "_root"


# ---------------------------------------------------------------- description


def encode_value(value: Any) -> Any:
    """An attribute value as JSON, numpy types tagged so `decode_value` restores them exactly."""
    if isinstance(value, np.ndarray):
        return {"__nd__": [encode_value(v) for v in value.tolist()], "dtype": value.dtype.str}
    if isinstance(value, np.generic):
        return {"__np__": encode_value(value.item()), "dtype": value.dtype.str}
    if isinstance(value, list | tuple):
        return {"__seq__": [encode_value(v) for v in value], "tuple": isinstance(value, tuple)}
    if isinstance(value, bytes):
        return {"__bytes__": value.decode("latin-1")}
    if isinstance(value, float) and not math.isfinite(value):
        return {"__float__": repr(value)}
    if isinstance(value, dict):
        return {"__dict__": {k: encode_value(v) for k, v in value.items()}}
    return value


def decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "__nd__" in value:
            return np.array([decode_value(v) for v in value["__nd__"]], dtype=value["dtype"])
        if "__np__" in value:
            return np.dtype(value["dtype"]).type(decode_value(value["__np__"]))
        if "__seq__" in value:
            items = [decode_value(v) for v in value["__seq__"]]
            return tuple(items) if value["tuple"] else items
        if "__bytes__" in value:
            return value["__bytes__"].encode("latin-1")
        if "__float__" in value:
            return float(value["__float__"])
        if "__dict__" in value:
            return {k: decode_value(v) for k, v in value["__dict__"].items()}
    return value


def _values_for_npz(values: np.ndarray) -> tuple[np.ndarray, str | None]:
    """(array npz can hold without pickle, how to restore it)."""
    if values.dtype.kind != "O":
        return values, None
    flat = values.ravel().tolist()
    if all(isinstance(v, str) for v in flat):
        return values.astype("U"), "str"
    if all(isinstance(v, bytes) for v in flat):
        return values.astype("S"), "bytes"
    raise TypeError(f"object array with mixed items {flat[:5]!r}: extend the description format")


def describe_dataset(ds: xr.Dataset, out: Path) -> None:
    """Write ``out/desc.json`` and ``out/values.npz`` for the (loaded) Dataset ``ds``."""
    out.mkdir(parents=True, exist_ok=True)
    ds = ds.load()
    arrays: dict[str, np.ndarray] = {}
    variables = {}
    for i, (name, var) in enumerate(ds.variables.items()):
        values, restore = _values_for_npz(np.asarray(var.values))
        arrays[f"v{i}"] = values
        variables[str(name)] = {
            "key": f"v{i}",
            "dims": list(map(str, var.dims)),
            "attrs": encode_value(dict(var.attrs)),
            "dtype": var.dtype.str,
            "restore": restore,
        }
    desc = {
        "attrs": encode_value(dict(ds.attrs)),
        "coords": sorted(map(str, ds.coords)),
        "variables": variables,
        "xarray": xr.__version__,
    }
    (out / "desc.json").write_text(json.dumps(desc, indent=1))
    np.savez(out / "values.npz", **arrays)


def rebuild(described: Path) -> tuple[xr.Dataset, dict[str, str]]:
    """The Dataset described in ``described`` and each variable's dtype string."""
    desc = json.loads((described / "desc.json").read_text())
    with np.load(described / "values.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    variables = {}
    for name, v in desc["variables"].items():
        values = arrays[v["key"]]
        if v["restore"] == "str" or v["restore"] == "bytes":
            values = np.array(values.tolist(), dtype=object).reshape(values.shape)
        variables[name] = xr.Variable(v["dims"], values, decode_value(v["attrs"]))
    coords = {n: variables.pop(n) for n in desc["coords"]}
    ds = xr.Dataset(variables, coords=coords, attrs=decode_value(desc["attrs"]))
    return ds, {name: v["dtype"] for name, v in desc["variables"].items()}


def described_dir(target: Path, case: str, group: str) -> Path:
    return target / "described" / case / (group.replace("/", "__") or ROOT)


def describe_all(target: Path) -> None:
    cases = json.loads((target / "cases.json").read_text())
    for case, spec in cases.items():
        for group in spec["groups"]:
            ds = xr.open_dataset(
                str(target / spec["store"]),
                engine="zarr",
                group=group or None,
                consolidated=spec["consolidated"],
            )
            describe_dataset(ds, described_dir(target, case, group))


# ---------------------------------------------------------------- cases


def cf_case() -> xr.Dataset:
    rng = np.random.default_rng(15)
    time = np.array(["2000-01-01T00", "2000-01-01T06", "2000-01-01T12", "2000-01-01T18"], dtype="M8[ns]")
    packed = rng.uniform(-10, 10, size=(4, 3)).round(1)
    packed[1, 2] = np.nan
    ds = xr.Dataset(
        {
            "packed": (("time", "x"), packed, {"long_name": "packed with scale/offset", "units": "m"}),
            "flag": (("x",), np.array([True, False, True])),
            "count": (("time",), np.array([1, 2, 3, 4], dtype="i4"), {"valid_min": np.int32(0)}),
            "duration": (("time",), np.array([1, 2, 3, 36], dtype="m8[h]").astype("m8[ns]")),
            "start": ((), np.datetime64("2001-02-03T04:05", "ns")),
            "small": (("x",), np.array([0.5, np.nan, 2.5], dtype="f4"), {"scale": np.float32(0.25)}),
        },
        coords={"time": ("time", time, {"standard_name": "time"}), "x": ("x", np.array([10, 20, 30]))},
        attrs={
            "title": "cf case",
            "history": "written by zarr 2.18",
            "version": 3,
            "ratio": 0.5,
            "list": [1, 2],
        },
    )
    ds["packed"].encoding = {"dtype": "i2", "scale_factor": 0.1, "add_offset": 5.0, "_FillValue": -32768}
    ds["count"].encoding = {"_FillValue": -1}
    ds["time"].encoding = {"units": "hours since 2000-01-01", "calendar": "standard", "dtype": "i8"}
    ds["start"].encoding = {"units": "minutes since 2000-01-01"}
    return ds


def strings_case() -> xr.Dataset:
    return xr.Dataset(
        {
            "name": (
                ("station",),
                np.array(["alpha", "β-beta", "gamma"], dtype=object),
                {"long_name": "name"},
            ),
            "code": (("station",), np.array([b"A1", b"B22", b"C333"])),
            "label": (("station",), np.array(["x", "yy", "zzz"], dtype="U3")),
            "value": (("station",), np.array([1.0, 2.0, 3.0])),
        },
        coords={
            "station": ("station", np.array([10, 20, 30])),
            "lat": ("station", np.array([1.5, 2.5, 3.5]), {"units": "degrees_north"}),
        },
    )


def group_cases() -> dict[str, xr.Dataset]:
    return {
        "": xr.Dataset({"top": (("a",), np.arange(3.0))}, attrs={"level": "root"}),
        "child": xr.Dataset(
            {"mid": (("b", "a"), np.arange(6, dtype="i2").reshape(2, 3), {"units": "1"})},
            coords={"b": [5, 6]},
            attrs={"level": "child"},
        ),
        "child/grand": xr.Dataset({"leaf": (("c",), np.array([np.nan, 1.0]))}, attrs={"level": "grand"}),
    }


def write_cases(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    cases: dict[str, Any] = {}
    cf_case().to_zarr(str(target / "cf.zarr"), mode="w", consolidated=True)
    cases["cf"] = {"store": "cf.zarr", "groups": [""], "consolidated": True}
    strings_case().to_zarr(str(target / "strings.zarr"), mode="w", consolidated=True)
    cases["strings"] = {"store": "strings.zarr", "groups": [""], "consolidated": True}
    for group, ds in group_cases().items():
        ds.to_zarr(
            str(target / "groups.zarr"),
            mode="w" if not group else "a",
            group=group or None,
            consolidated=True,
        )
    cases["groups"] = {"store": "groups.zarr", "groups": list(group_cases()), "consolidated": True}
    from write_corpus import write_xarray  # the interop corpus's dataset, written the same way

    write_xarray(target)
    cases["corpus"] = {"store": "xarray.zarr", "groups": [""], "consolidated": True}
    cf_case().to_zarr(str(target / "unconsolidated.zarr"), mode="w", consolidated=False)
    cases["unconsolidated"] = {"store": "unconsolidated.zarr", "groups": [""], "consolidated": False}
    (target / "cases.json").write_text(json.dumps(cases, indent=1))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("write", "describe"):
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[2])
    if argv[1] == "write":
        write_cases(target)
    describe_all(target)
    print(f"xarray {xr.__version__}: described {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
