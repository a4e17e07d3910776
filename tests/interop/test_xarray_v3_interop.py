"""Zarr v3 through xarray, both ways: ``azarr.xarray.to_zarr(zarr_format=3)`` and ``engine="azarr"``
against xarray 2026.9's own ``zarr`` engine on zarr-python 3.4 (the v3 reference venv).

The same dataset (every encoding xarray's engine treats differently in Zarr v3, written, then
appended to) and DataTree (``v3_scripts/xarray_cases.py``) are written by azarr here and by
xarray + zarr-python 3.4 in the reference interpreter, which then reads azarr's stores with
``consolidated=True`` (through azarr's inline consolidated metadata). Each side must read the
other's bit for bit, and both must write the same ``zarr.json`` for every array: data type,
shape, chunks, fill value, codecs, ``dimension_names`` and attributes (they are identical, key for key).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.util import load_module

from .conftest import built_or_fail
from .refenv_v3 import ensure_v3_reference_python

xr = pytest.importorskip("xarray")
ax = pytest.importorskip("azarr.xarray")

pytestmark = pytest.mark.interop

SCRIPTS = Path(__file__).resolve().parent / "v3_scripts"


CASES = load_module(SCRIPTS / "xarray_cases.py", "azarr_xarray_v3_cases")


@pytest.fixture(scope="module")
def exchange(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """azarr writes its stores, then one reference process writes its own and reads azarr's."""
    python = built_or_fail(pytestconfig, ensure_v3_reference_python, "Zarr v3 reference environment")
    root = tmp_path_factory.mktemp("xarray-v3")
    store = root / "azarr-ds.zarr"
    ax.to_zarr(CASES.dataset(), store, mode="w", zarr_format=3, encoding=CASES.ENCODING)
    ax.to_zarr(CASES.dataset(range(6, 8)), store, append_dim=CASES.APPEND_DIM)
    ax.to_zarr(CASES.tree(), root / "azarr-tree.zarr", mode="w", zarr_format=3)
    proc = subprocess.run(
        [str(python), str(SCRIPTS / "xarray_v3.py"), str(root)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, **json.loads(proc.stdout.strip().splitlines()[-1])}


def test_xarray_zarr_engine_reads_what_azarr_wrote(exchange: dict[str, Any]) -> None:
    assert exchange["read"] == {"dataset": [], "tree": []}


def test_azarr_engine_reads_what_xarray_wrote(exchange: dict[str, Any]) -> None:
    root = exchange["root"]
    with xr.open_dataset(root / "zarr-ds.zarr", engine="azarr", consolidated=True) as ds:
        assert CASES.differences(ds.load(), CASES.full()) == []
    with xr.open_datatree(root / "zarr-tree.zarr", engine="azarr", consolidated=True) as dt:
        assert CASES.tree_differences(dt.load(), CASES.tree()) == []


@pytest.mark.parametrize("name", ["ds", "tree"])
def test_both_write_the_same_array_metadata(exchange: dict[str, Any], name: str) -> None:
    ours = CASES.array_documents(exchange["root"] / f"azarr-{name}.zarr")
    theirs = exchange["documents"][f"zarr-{name}.zarr"]
    assert sorted(ours) == sorted(theirs)
    for path in theirs:
        assert ours[path] == theirs[path], path
