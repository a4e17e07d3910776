"""Run by the zarr-python 2.18 reference interpreter: the drawn-array check of test_drawn.py.

    python drawn_v2.py DIR

The Zarr v2 counterpart of ``v3_scripts/ref_drawn.py`` (same ``DIR`` layout: ``cases.json``,
``data/``, ``mask/``, ``expected/``): reads what azarr wrote (``DIR/azarr/<i>``) with
zarr-python 2.18 and compares with the expected array, bit for bit; writes every case with
zarr-python 2.18 (``DIR/zarr/<i>``) for azarr to read. With ``"fill_value": null`` zarr-python
2 reads chunks never written uninitialised (``np.empty``), so there only the values written
are compared.

Prints one JSON object: ``{"read": {"<i>": "ok" | why}, "refused": {"<i>": why}}``.
Never imports azarr.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr


def _written_mask(root: Path, case: dict[str, Any]) -> np.ndarray:
    shape = tuple(case["shape"])
    if case["written"] == "mask":
        return np.load(root / "mask" / f"{case['i']}.npy")
    mask = np.zeros(shape, dtype=bool)
    if case["written"] == "box":
        mask[tuple(slice(*s) for s in case["box"])] = True
    return mask


def _read(root: Path, case: dict[str, Any]) -> str:
    name = str(case["i"])
    expected = np.load(root / "expected" / f"{name}.npy")
    try:
        got = zarr.open_array(str(root / "azarr" / name), mode="r")[...]
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    if got.shape != expected.shape:
        return f"shape {got.shape} != {expected.shape}"
    if case["fill_value"] is None:
        mask = _written_mask(root, case)
        got, expected = got[mask], expected[mask]
    if not np.array_equal(got, expected):
        return f"values differ: {got.ravel()[:6].tolist()} != {expected.ravel()[:6].tolist()}"
    return "ok"


def _write(root: Path, case: dict[str, Any]) -> str | None:
    name = str(case["i"])
    compressor = {None: None, "default": "default", "zlib": numcodecs.Zlib(level=1)}[case["compressor"]]
    try:
        array = zarr.create(
            tuple(case["shape"]),
            chunks=tuple(case["chunks"]) or True,
            dtype=case["dtype"],
            order=case["order"],
            fill_value=case["fill_value"],
            compressor=compressor,
            store=zarr.DirectoryStore(str(root / "zarr" / name), dimension_separator=case["separator"]),
            write_empty_chunks=case["write_empty_chunks"],
        )
        if case["written"] == "box":
            array[tuple(slice(*s) for s in case["box"])] = np.load(root / "data" / f"{name}.npy")
        elif case["written"] == "mask":
            array.vindex[np.load(root / "mask" / f"{name}.npy")] = np.load(root / "data" / f"{name}.npy")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main(root: Path) -> dict[str, Any]:
    read: dict[str, str] = {}
    refused: dict[str, str] = {}
    for case in json.loads((root / "cases.json").read_text()):
        read[str(case["i"])] = _read(root, case)
        why = _write(root, case)
        if why is not None:
            refused[str(case["i"])] = why
    return {"read": read, "refused": refused}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
