"""``engine="azarr"`` against xarray 2024.10 + zarr 2.18 (the reference venv), both directions.

Reading: every dataset the reference writes (ref_scripts/xarray_cases.py: CF packing, times,
timedeltas, ``_FillValue``, strings, non-dimension coordinates, groups, unconsolidated, and the
interop corpus's dataset) opens with ``engine="azarr"`` ``xr.testing.assert_identical`` to what the
reference's ``engine="zarr"`` opened, with the same dtypes. The reference result crosses over as a
JSON + npz description (no pickles, no netCDF library).

Writing: those datasets, written back by ``azarr.xarray.to_zarr``, open in the reference identical
to the reference-written originals, and their ``.zarray`` / ``.zattrs`` documents match the
reference's (the known differences are normalised and named in `_normalise`).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

import azarr.xarray as ax

from .conftest import RunRef
from .ref_scripts import xarray_cases as xc

pytestmark = pytest.mark.interop

#: (case, group) pairs written by xarray_cases.py
CASES = [
    ("cf", ""),
    ("strings", ""),
    ("groups", ""),
    ("groups", "child"),
    ("groups", "child/grand"),
    ("corpus", ""),
    ("unconsolidated", ""),
]
#: xarray >= 2025 no longer decodes CF timedeltas by default; the reference (2024.10) does.
DECODE = {"decode_timedelta": True}


@dataclass(frozen=True)
class Cases:
    root: Path
    spec: dict[str, Any]

    def store(self, case: str) -> Path:
        return self.root / self.spec[case]["store"]

    def open_azarr(self, case: str, group: str) -> xr.Dataset:
        return xr.open_dataset(
            self.store(case),
            engine="azarr",
            group=group or None,
            consolidated=self.spec[case]["consolidated"],
            **DECODE,
        )

    def reference(self, case: str, group: str) -> tuple[xr.Dataset, dict[str, str]]:
        return xc.rebuild(xc.described_dir(self.root, case, group))


@pytest.fixture(scope="session")
def xarray_cases(run_ref_script: RunRef, tmp_path_factory: pytest.TempPathFactory) -> Cases:
    """The cases written and described by the reference (once per session)."""
    target = tmp_path_factory.mktemp("xarray-cases")
    result = run_ref_script("xarray_cases.py", "write", target)
    if result.returncode != 0:
        pytest.fail(f"xarray_cases.py write failed:\n{result.report}", pytrace=False)
    return Cases(target, json.loads((target / "cases.json").read_text()))


def _assert_same(ours: xr.Dataset, reference: xr.Dataset, dtypes: dict[str, str]) -> None:
    xr.testing.assert_identical(ours, reference)
    differing = {n: (ours[n].dtype.str, d) for n, d in dtypes.items() if ours[n].dtype.str != d}
    assert not differing, f"dtypes differ (ours, reference): {differing}"


@pytest.mark.parametrize(("case", "group"), CASES, ids=[f"{c}/{g}" for c, g in CASES])
def test_open_dataset_identical_to_reference(xarray_cases: Cases, case: str, group: str) -> None:
    reference, dtypes = xarray_cases.reference(case, group)
    _assert_same(xarray_cases.open_azarr(case, group).load(), reference, dtypes)


def test_lazy_indexing_matches_eager(xarray_cases: Cases) -> None:
    ds = xarray_cases.open_azarr("corpus", "")
    full = ds.load()
    lazy = xarray_cases.open_azarr("corpus", "")
    picked = lazy.temperature.isel(time=[0, 3], lat=slice(1, 4), lon=[7, 0, 2]).values  # outer
    np.testing.assert_array_equal(
        picked, full.temperature.isel(time=[0, 3], lat=slice(1, 4), lon=[7, 0, 2]).values
    )
    pts = xr.DataArray([0, 2, 4], dims="p")
    np.testing.assert_array_equal(
        lazy.temperature.isel(lat=pts, lon=pts).values, full.temperature.isel(lat=pts, lon=pts).values
    )  # vectorized


async def test_load_async_identical(xarray_cases: Cases) -> None:
    # "flag" is a CF bool as xarray 2024.10 writes it (int8, dtype: "bool"): xarray 2026.9's decoding
    # wrapper for it has no async path; the engine gives it one (issue #27).
    reference, dtypes = xarray_cases.reference("cf", "")
    ds = await xarray_cases.open_azarr("cf", "").load_async()
    _assert_same(ds, reference, dtypes)


def test_chunks_give_dask_arrays_on_zarr_chunks(xarray_cases: Cases) -> None:
    ds = xr.open_dataset(xarray_cases.store("corpus"), engine="azarr", chunks={})
    assert ds.temperature.data.chunksize == (2, 3, 4)
    reference, _ = xarray_cases.reference("corpus", "")
    xr.testing.assert_identical(ds.compute(), reference)


def test_open_datatree(xarray_cases: Cases) -> None:
    tree = xr.open_datatree(xarray_cases.store("groups"), engine="azarr", **DECODE)
    for group in ("", "child", "child/grand"):
        reference, _ = xarray_cases.reference("groups", group)
        node = tree[group] if group else tree
        xr.testing.assert_identical(node.to_dataset(inherit=False).load(), reference)


# ---------------------------------------------------------------- writing


@pytest.fixture(scope="session")
def azarr_written(
    xarray_cases: Cases, run_ref_script: RunRef, tmp_path_factory: pytest.TempPathFactory
) -> Cases:
    """Every case read with engine="azarr" and written back with azarr.xarray.to_zarr, then described
    by the reference."""
    target = tmp_path_factory.mktemp("xarray-azarr-written")
    for case, spec in xarray_cases.spec.items():
        for group in spec["groups"]:
            ds = xarray_cases.open_azarr(case, group)
            ax.to_zarr(
                ds,
                target / spec["store"],
                mode="w" if not group else "a",
                group=group or None,
                consolidated=spec["consolidated"],
            )
    (target / "cases.json").write_text(json.dumps(xarray_cases.spec))
    result = run_ref_script("xarray_cases.py", "describe", target)
    if result.returncode != 0:
        pytest.fail(f"the reference could not open what azarr wrote:\n{result.report}", pytrace=False)
    return Cases(target, xarray_cases.spec)


def _without_timedelta_dtype(ds: xr.Dataset) -> xr.Dataset:
    """xarray 2024.10 shows the ``dtype`` attribute xarray >= 2025 writes on CF timedeltas (what
    lets it decode them by default) as an attribute; it reads xarray 2026.9's own output alike."""
    ds = ds.copy()
    for var in ds.variables.values():
        if str(var.attrs.get("dtype", "")).startswith("timedelta64"):
            var.attrs = {k: v for k, v in var.attrs.items() if k != "dtype"}
    return ds


@pytest.mark.parametrize(("case", "group"), CASES, ids=[f"{c}/{g}" for c, g in CASES])
def test_written_by_azarr_opens_identical_in_reference(
    xarray_cases: Cases, azarr_written: Cases, case: str, group: str
) -> None:
    theirs, their_dtypes = azarr_written.reference(case, group)
    reference, dtypes = xarray_cases.reference(case, group)
    _assert_same(_without_timedelta_dtype(theirs), reference, dtypes)
    assert their_dtypes == dtypes


def _documents(store: Path) -> Iterator[tuple[str, Any]]:
    for path in sorted(store.rglob(".z*")):
        if path.name in (".zarray", ".zattrs", ".zgroup"):
            yield str(path.relative_to(store)), json.loads(path.read_text())


def _normalise(key: str, doc: dict[str, Any]) -> dict[str, Any]:
    """Known differences, all of them xarray 2026.9's engine writing otherwise than 2024.10's
    (azarr writes what 2026.9 writes): the default ``dimension_separator`` is named; CF time
    units have no zero clock (``"days since 2024-01-01"``); bools are stored as ``|b1``, not
    ``int8`` with the attribute ``dtype: "bool"``; CF timedeltas carry ``dtype: "timedelta64[ns]"``.
    Both sides are brought to one form (bools as int8, no timedelta dtype attribute)."""
    doc = dict(doc)
    if key.endswith(".zarray"):
        doc.setdefault("dimension_separator", ".")
        if doc.get("dtype") == "|b1":
            doc["dtype"] = "|i1"
    if key.endswith(".zattrs"):
        if isinstance(doc.get("units"), str) and " since " in doc["units"]:
            doc["units"] = doc["units"].removesuffix(" 00:00:00")
        if doc.get("dtype") == "bool" or str(doc.get("dtype", "")).startswith("timedelta64"):
            del doc["dtype"]
    return doc


@pytest.mark.parametrize("case", ["cf", "strings", "groups", "corpus", "unconsolidated"])
def test_written_layout_matches_reference(xarray_cases: Cases, azarr_written: Cases, case: str) -> None:
    ours = dict(_documents(azarr_written.store(case)))
    theirs = dict(_documents(xarray_cases.store(case)))
    assert sorted(ours) == sorted(theirs)
    for key, doc in theirs.items():
        assert _normalise(key, ours[key]) == _normalise(key, doc), key
    consolidated = (azarr_written.store(case) / ".zmetadata").is_file()
    assert consolidated == xarray_cases.spec[case]["consolidated"]


def test_region_write(xarray_cases: Cases, tmp_path: Path) -> None:
    ds = xarray_cases.open_azarr("cf", "").load()
    target = tmp_path / "region.zarr"
    shutil.copytree(xarray_cases.store("cf"), target)
    update = ds.isel(time=slice(1, 3))[["packed", "count", "duration"]].copy(deep=True)
    update["packed"][:] = 7.5
    update["count"][:] = 9
    ax.to_zarr(update.drop_vars(["time", "x"]), target, mode="r+", region={"time": slice(1, 3)})
    back = xr.open_dataset(target, engine="azarr", **DECODE).load()
    expected = ds.copy(deep=True)
    expected["packed"][1:3] = 7.5
    expected["count"][1:3] = 9
    xr.testing.assert_identical(back, expected)
