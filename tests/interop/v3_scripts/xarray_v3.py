"""Run by the Zarr v3 reference interpreter: xarray 2026.9's ``zarr`` engine on zarr-python 3.4.

    python xarray_v3.py DIR   # write DIR/zarr-ds.zarr and DIR/zarr-tree.zarr as Zarr v3, then
                              # read DIR/azarr-ds.zarr and DIR/azarr-tree.zarr (written by azarr)

Prints one JSON object: ``{"read": {label: [differences]}, "documents": {store: {path: zarr.json}}}``.
Never imports azarr: only ``xarray_cases.py`` is shared.
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import xarray_cases as cases

warnings.simplefilter("ignore")


def write(root: Path) -> None:
    store = root / "zarr-ds.zarr"
    cases.dataset().to_zarr(store, mode="w", zarr_format=3, consolidated=True, encoding=cases.ENCODING)
    cases.dataset(range(6, 8)).to_zarr(store, append_dim=cases.APPEND_DIM, zarr_format=3, consolidated=True)
    cases.tree().to_zarr(root / "zarr-tree.zarr", mode="w", zarr_format=3, consolidated=True)


def _attempt(read: Any) -> list[str]:
    try:
        return list(read())
    except Exception:
        return [traceback.format_exc()[-1500:]]


def read(root: Path) -> dict[str, list[str]]:
    """What xarray's zarr engine reads from azarr's stores, against the expected objects
    (``consolidated=True``: azarr's inline consolidated metadata must serve the open)."""

    def dataset() -> list[str]:
        with xr.open_dataset(root / "azarr-ds.zarr", engine="zarr", consolidated=True) as ds:
            return cases.differences(ds.load(), cases.full())

    def tree() -> list[str]:
        with xr.open_datatree(root / "azarr-tree.zarr", engine="zarr", consolidated=True) as dt:
            return cases.tree_differences(dt.load(), cases.tree())

    return {"dataset": _attempt(dataset), "tree": _attempt(tree)}


def both(root: Path) -> dict[str, Any]:
    write(root)
    return {
        "read": read(root),
        "documents": {
            name: cases.array_documents(root / name) for name in ("zarr-ds.zarr", "zarr-tree.zarr")
        },
    }


if __name__ == "__main__":
    print(json.dumps(both(Path(sys.argv[1])), default=str))
