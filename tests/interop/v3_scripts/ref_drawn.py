"""Run by the Zarr v3 reference interpreter: the drawn-array interop check of test_v3_drawn.py.

    python ref_drawn.py DIR

``DIR/cases.json`` lists arrays drawn by the test (shape, chunks, shards, data type, fill
value, compressor, chunk key encoding, ``write_empty_chunks``, what was written: a box of
slices, or a Boolean mask ``DIR/mask/<i>.npy``), with ``DIR/data/<i>.npy`` (the values
written) and ``DIR/expected/<i>.npy`` (the whole array after the write). This script

* reads what azarr wrote (``DIR/azarr/<i>``) with zarr-python 3.4 and TensorStore's zarr3
  driver and compares with the expected array, bit for bit;
* writes every case with zarr-python 3.4 (``DIR/zarr/<i>``) and, from the metadata that
  wrote, with TensorStore (``DIR/ts/<i>``) for azarr to read.

Prints one JSON object: ``{"read": {"<i>/zarr": "ok" | why, "<i>/ts": ...}, "refused":
{"<i>": why, "<i>/ts": why}}`` (cases zarr-python 3.4 or TensorStore cannot write).

Never imports azarr.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import GzipCodec, ZstdCodec

sys.path.insert(0, str(Path(__file__).resolve().parent))
import v3_cases

warnings.simplefilter("ignore")


def _same(got: np.ndarray, expected: np.ndarray) -> str:
    if got.shape != expected.shape:
        return f"shape {got.shape} != {expected.shape}"
    if expected.dtype.names:
        wrong = [n for n in expected.dtype.names if not np.array_equal(got[n], expected[n])]
        return f"fields {wrong} differ" if wrong else "ok"
    if not np.array_equal(got, expected):
        at = np.argwhere(got != expected)[:3].tolist()
        return f"values differ at {at}: {got[tuple(np.array(at).T)].tolist()} != {expected[tuple(np.array(at).T)].tolist()}"
    return "ok"


def _tensorstore_has(dtype: np.dtype) -> bool:
    """TensorStore's zarr3 driver has no structured, datetime64 or timedelta64 data type."""
    return not dtype.names and dtype.kind not in "Mm"


def _read(root: Path, case: dict[str, Any], results: dict[str, str]) -> None:
    name = str(case["i"])
    path = root / "azarr" / name
    expected = np.load(root / "expected" / f"{name}.npy")
    try:
        results[f"{name}/zarr"] = _same(np.asarray(zarr.open_array(str(path), mode="r")[...]), expected)
    except Exception as exc:
        results[f"{name}/zarr"] = f"{type(exc).__name__}: {exc}"
    if not _tensorstore_has(expected.dtype):
        return
    try:
        store = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}).result()
        results[f"{name}/ts"] = _same(np.asarray(store.read().result()), expected)
    except Exception as exc:
        results[f"{name}/ts"] = f"{type(exc).__name__}: {exc}"


def _write(root: Path, case: dict[str, Any], refused: dict[str, str]) -> None:
    name = str(case["i"])
    compressors = {None: None, "default": [ZstdCodec(level=0)], "gzip": [GzipCodec(level=1)]}[
        case["compressor"]
    ]
    extra: dict[str, Any] = {}
    if case["shards"] is not None:
        extra["shards"] = tuple(case["shards"])
    try:
        array = zarr.create_array(
            str(root / "zarr" / name),
            shape=tuple(case["shape"]),
            chunks=tuple(case["chunks"]),
            dtype=np.dtype(case["dtype"]),
            fill_value=case["fill_value"],
            compressors=compressors,
            chunk_key_encoding={"name": case["key_encoding"], "separator": case["separator"]},
            config={"write_empty_chunks": case["write_empty_chunks"], "order": case["order"]},
            **extra,
        )
        written = case["written"]  # None, "box" (slices) or "mask" (any other basic selection)
        if written == "box":
            array[tuple(slice(*s) for s in case["box"])] = np.load(root / "data" / f"{name}.npy")
        elif written == "mask":
            mask = np.load(root / "mask" / f"{name}.npy")
            array.vindex[mask] = np.load(root / "data" / f"{name}.npy")
    except Exception as exc:
        refused[name] = f"{type(exc).__name__}: {exc}"
        return
    _write_ts(root, case, refused)


def _write_ts(root: Path, case: dict[str, Any], refused: dict[str, str]) -> None:
    """The same case written by TensorStore (``DIR/ts/<i>``), with the metadata zarr-python
    wrote for it (not for the data types TensorStore lacks, nor a 0-d chunk grid)."""
    name = str(case["i"])
    metadata = json.loads((root / "zarr" / name / "zarr.json").read_text())
    if not _tensorstore_has(np.dtype(case["dtype"])) or not case["shape"]:
        return
    spec = v3_cases.tensorstore_spec(metadata, str(root / "ts" / name))
    try:
        store = ts.open(spec).result()
        if case["written"] == "box":
            region = tuple(slice(*s) for s in case["box"])
            store[region].write(np.load(root / "data" / f"{name}.npy")).result()
        elif case["written"] == "mask":
            where = np.nonzero(np.load(root / "mask" / f"{name}.npy"))
            store.vindex[where].write(np.load(root / "data" / f"{name}.npy")).result()
    except Exception as exc:
        refused[f"{name}/ts"] = f"{type(exc).__name__}: {exc}"


def main(root: Path) -> dict[str, Any]:
    results: dict[str, str] = {}
    refused: dict[str, str] = {}
    for case in json.loads((root / "cases.json").read_text()):
        _read(root, case, results)
        _write(root, case, refused)
    return {"read": results, "refused": refused}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
