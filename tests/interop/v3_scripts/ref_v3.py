"""Run by the Zarr v3 reference interpreter (zarr-python 3.4, TensorStore, xarray; Python 3.12).

    python ref_v3.py write DIR   # the corpus of v3_cases.py, by zarr-python (DIR/zarr) and TensorStore (DIR/ts);
                                 # a group hierarchy (DIR/zarr-group); an xarray dataset (DIR/xr.zarr + its values)
    python ref_v3.py read DIR    # read what azarr wrote (DIR/azarr, DIR/azarr-group) with both, and
                                 # validate every zarr.json with zarr-metadata
    python ref_v3.py both DIR    # write, then read, in one interpreter
    python ref_v3.py shards DIR  # the sharded corpus of shard_cases.py: written by both (DIR/zarr-shards,
                                 # DIR/ts-shards), and what azarr wrote (DIR/azarr-shards) read by both

Each prints one JSON object (``both``: ``{"write": ..., "read": ...}``).

Never imports azarr: only the data of ``v3_cases.py`` is shared.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr
from zarr.storage import LocalStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
import shard_cases
import v3_cases as cases

warnings.simplefilter("ignore")


def _split(codecs: list[dict[str, Any]]) -> tuple[list[Any], Any, list[Any]]:
    names = [c["name"] for c in codecs]
    serializer_at = next(i for i, n in enumerate(names) if n in ("bytes", "vlen-utf8", "vlen-bytes"))
    return codecs[:serializer_at], codecs[serializer_at], codecs[serializer_at + 1 :]


def _zarr_dtype(name: str) -> Any:
    spec = cases.DTYPES[name][0]
    return (
        {"str": str, "bytes": "bytes"}.get(spec, cases.numpy_dtype(name))
        if isinstance(spec, str)
        else cases.numpy_dtype(name)
    )


def write(root: Path) -> dict[str, Any]:
    report: dict[str, str] = {}
    for case in cases.cases():
        shape, chunks = tuple(case["shape"]), tuple(case["chunks"])
        region = cases.written(shape, chunks)
        data = cases.values(case["dtype"], shape)
        filters, serializer, compressors = _split(case["codecs"])
        path = root / "zarr" / case["name"]
        array = zarr.create_array(
            store=LocalStore(path),
            shape=shape,
            chunks=chunks,
            dtype=_zarr_dtype(case["dtype"]),
            fill_value=cases.fill_value(case["dtype"]),
            filters=filters or None,
            serializer=serializer,
            compressors=compressors or None,
            chunk_key_encoding=case["encoding"]
            | {"separator": case["encoding"]["configuration"]["separator"]},
            zarr_format=3,
            config={"write_empty_chunks": True},
        )
        array[region] = data[region]
        if not case["ts"]:
            continue
        metadata = json.loads((path / "zarr.json").read_text())
        spec = cases.tensorstore_spec(metadata, str(root / "ts" / case["name"]))
        try:
            store = ts.open(spec).result()
            store[region].write(data[region]).result()
        except Exception as exc:  # reported: the test says which case TensorStore refused
            report[case["name"]] = f"{type(exc).__name__}: {exc}"
    # A hierarchy with attributes at every level, consolidated as zarr-python 3 does.
    group = zarr.open_group(
        LocalStore(root / "zarr-group"), mode="w", zarr_format=3, attributes={"title": "corpus", "n": [1, 2]}
    )
    sub = group.create_group("sub", attributes={"level": 1})
    x = sub.create_array(
        "x", shape=(4, 3), chunks=(2, 2), dtype="<f4", attributes={"units": "m"}, dimension_names=["y", "x"]
    )
    x[:] = np.arange(12, dtype="<f4").reshape(4, 3)
    group.create_array("flag", shape=(5,), dtype="bool", fill_value=True)
    zarr.consolidate_metadata(LocalStore(root / "zarr-group"))
    _write_xarray(root)
    return {"ts_refused": report}


def _write_xarray(root: Path) -> None:
    import pandas as pd
    import xarray as xr

    time = pd.date_range("2020-01-01", periods=6, freq="D")
    ds = xr.Dataset(
        {
            "t2m": (
                ("time", "lat", "lon"),
                np.arange(6 * 4 * 5, dtype="f4").reshape(6, 4, 5),
                {"units": "K"},
            ),
            "mask": (("lat", "lon"), np.eye(4, 5, dtype=bool)),
            "name": (("lat",), np.array(["a", "bb", "ccc", ""], dtype=object)),
        },
        coords={"time": time, "lat": np.linspace(-30, 30, 4), "lon": np.arange(5) * 1.5},
        attrs={"source": "interop"},
    )
    ds["t2m"][0, 0, 0] = np.nan
    ds.to_zarr(root / "xr.zarr", mode="w", zarr_format=3, consolidated=True)
    opened = xr.open_dataset(root / "xr.zarr", engine="zarr").load()
    textual = {k for k, v in opened.variables.items() if v.dtype.kind in "OT"}
    arrays = {f"var/{k}": v.values for k, v in opened.variables.items() if k not in textual}
    strings = {k: [str(x) for x in opened[k].values.ravel()] for k in textual}
    np.savez(root / "xr-expected.npz", **arrays)
    meta = {
        "dims": {k: list(v.dims) for k, v in opened.variables.items()},
        "attrs": {k: {a: str(b) for a, b in v.attrs.items()} for k, v in opened.variables.items()},
        "global": {a: str(b) for a, b in opened.attrs.items()},
        "coords": sorted(opened.coords),
        "data_vars": sorted(opened.data_vars),
        "strings": strings,
        "dtypes": {k: str(v.dtype) for k, v in opened.variables.items()},
    }
    (root / "xr-expected.json").write_text(json.dumps(meta))


def _check(label: str, read: Any, case: dict[str, Any], results: dict[str, str]) -> None:
    try:
        got = read()
        ok = cases.same(got, cases.expected(case))
        results[label] = "ok" if ok else f"differs: {np.asarray(got).ravel()[:6]!r}"
    except Exception as exc:
        results[label] = f"{type(exc).__name__}: {exc}"


def _read_with_both(path: Path, case: dict[str, Any], results: dict[str, str]) -> None:
    """The array azarr wrote at ``path``, read by zarr-python and (where the case says it
    can) TensorStore, each checked against the case's values."""
    _check(
        f"zarr:{case['name']}",
        lambda: zarr.open_array(LocalStore(path, read_only=True), mode="r")[...],
        case,
        results,
    )
    if case["ts"]:
        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}, "open": True}
        _check(f"ts:{case['name']}", lambda: ts.open(spec).result().read().result(), case, results)


def read(root: Path) -> dict[str, str]:
    from zarr_metadata.model import ZarrV3ArrayMetadata, ZarrV3GroupMetadata

    results: dict[str, str] = {}
    for case in cases.cases():
        path = root / "azarr" / case["name"]
        _read_with_both(path, case, results)
        try:
            ZarrV3ArrayMetadata.from_json(json.loads((path / "zarr.json").read_text()))
            results[f"zarr-metadata:{case['name']}"] = "ok"
        except Exception as exc:
            results[f"zarr-metadata:{case['name']}"] = f"{type(exc).__name__}: {exc}"[:500]
    try:
        group = zarr.open_consolidated(str(root / "azarr-group"), mode="r", zarr_format=3)
        sub = group["sub"]
        x = sub["x"]
        ok = (
            dict(group.attrs) == {"title": "corpus", "n": [1, 2]}
            and dict(sub.attrs) == {"level": 1}
            and dict(x.attrs) == {"units": "m"}
            and tuple(x.metadata.dimension_names) == ("y", "x")
            and np.array_equal(x[:], np.arange(12, dtype="<f4").reshape(4, 3))
            and bool(np.all(group["flag"][:]))
            and sorted(group.metadata.consolidated_metadata.flattened_metadata) == ["flag", "sub", "sub/x"]
        )
        results["group"] = "ok" if ok else "differs"
        ZarrV3GroupMetadata.from_json(json.loads((root / "azarr-group" / "zarr.json").read_text()))
        results["zarr-metadata:group"] = "ok"
    except Exception:
        results["group"] = traceback.format_exc()[-800:]
    return results


def shards(root: Path) -> dict[str, Any]:
    """Write the sharded corpus with zarr-python 3.4 and TensorStore, and read azarr's with both."""
    refused: dict[str, str] = {}
    for case in shard_cases.cases():
        shape = tuple(case["shape"])
        region = shard_cases.written(case)
        data = cases.values(case["dtype"], shape)
        array = zarr.create_array(
            store=LocalStore(root / "zarr-shards" / case["name"]),
            shape=shape,
            chunks=tuple(case["shards"]),
            dtype=_zarr_dtype(case["dtype"]),
            fill_value=cases.fill_value(case["dtype"]),
            serializer=case["codecs"][0],
            compressors=None,
            filters=None,
            zarr_format=3,
            config={"write_empty_chunks": False},
        )
        array[region] = data[region]
        if not case["ts"]:
            continue
        metadata = json.loads((root / "zarr-shards" / case["name"] / "zarr.json").read_text())
        spec = cases.tensorstore_spec(metadata, str(root / "ts-shards" / case["name"]))
        try:
            ts.open(spec).result()[region].write(data[region]).result()
        except Exception as exc:
            refused[case["name"]] = f"{type(exc).__name__}: {exc}"
    results: dict[str, str] = {}
    for case in shard_cases.cases():
        path = root / "azarr-shards" / case["name"]
        _read_with_both(path, case, results)
    return {"ts_refused": refused, "read": results}


def both(root: Path) -> dict[str, Any]:
    """``write`` then ``read`` in one interpreter (one start-up and import of zarr/TensorStore)."""
    return {"write": write(root), "read": read(root)}


if __name__ == "__main__":
    commands = {"write": write, "read": read, "both": both, "shards": shards}
    print(json.dumps(commands[sys.argv[1]](Path(sys.argv[2]))))
