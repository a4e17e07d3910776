"""Drawn xarray Datasets round-trip through azarr's engine, Zarr v2 and v3 (sharded or not).

A Dataset of 1-3 dimensions of 0-9 elements holds 1-3 variables over leading dimensions, each
of a kind xarray encodes its own way (float32, float64 with NaN, int16, uint64, bool,
datetime64, timedelta64, variable-length and fixed-length strings), with attributes, and
sometimes a datetime index on ``x``. ``azarr.xarray.to_zarr`` writes it (drawn chunks; v3
variables of fixed-size types also in shards of two chunks a side; consolidated or not) and
``xr.open_dataset(engine="azarr")`` must give it back identical (`xr.testing.assert_identical`:
values, dtypes, dimensions, coordinates and attributes). Fidelity against xarray's own
``engine="zarr"`` is the xarray suite and ``tests/interop/test_xarray_v3_interop.py``.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from hypothesis import given
from hypothesis import strategies as st

import azarr.xarray as ax
from tests.test_selection import MEMORY_EXAMPLES, property_settings

KINDS = [
    "float32",
    "float64 with NaN",
    "int16",
    "uint64",
    "bool",
    "datetime",
    "timedelta",
    "str",
    "fixed str",
]


def _values(kind: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    base = np.arange(int(np.prod(shape))).reshape(shape)
    values: dict[str, Any] = {
        "float32": lambda: base.astype("f4") / 3,
        "float64 with NaN": lambda: np.where(base % 3 == 0, np.nan, base * 0.5),
        "int16": lambda: base.astype("i2") - 3,
        "uint64": lambda: base.astype("u8") * 2**40,
        "bool": lambda: base % 2 == 0,
        "datetime": lambda: np.datetime64("2020-01-01") + base.astype("m8[h]"),
        "timedelta": lambda: base.astype("m8[s]"),
        "str": lambda: base.astype(str).astype(object),
        "fixed str": lambda: base.astype("U3"),
    }
    result: np.ndarray[Any, Any] = values[kind]()
    return result


@st.composite
def datasets(draw: st.DrawFn) -> xr.Dataset:
    dims = ["x", "y", "z"][: draw(st.integers(1, 3), label="dimensions")]
    sizes = {d: draw(st.integers(0, 9), label=f"size of {d}") for d in dims}
    dataset = xr.Dataset(attrs={"title": "drawn"})
    for i in range(draw(st.integers(1, 3), label="variables")):
        kind = draw(st.sampled_from(KINDS), label="kind")
        over = dims[: draw(st.integers(1, len(dims)), label="leading dimensions")]
        dataset[f"v{i}"] = (over, _values(kind, tuple(sizes[d] for d in over)), {"long_name": kind, "n": i})
    if sizes["x"] and draw(st.booleans(), label="datetime index"):
        dataset = dataset.assign_coords(x=pd.date_range("2000-01-01", periods=sizes["x"]))
    return dataset


def check(
    tmp: Path, dataset: xr.Dataset, zarr_format: int, sharded: bool, chunk: int, consolidated: bool
) -> None:
    encoding: dict[str, dict[str, Any]] = {}
    for name, variable in dataset.data_vars.items():
        chunks = tuple(max(1, min(chunk, n)) for n in variable.shape)
        encoding[str(name)] = {"chunks": chunks}
        if zarr_format == 3 and sharded and variable.dtype != object:
            encoding[str(name)]["shards"] = tuple(2 * c for c in chunks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xarray's notes on consolidated metadata and v3
        ax.to_zarr(
            dataset, tmp, mode="w", zarr_format=zarr_format, encoding=encoding, consolidated=consolidated
        )
        with xr.open_dataset(tmp, engine="azarr") as back:
            xr.testing.assert_identical(back.load(), dataset)


@property_settings(max(MEMORY_EXAMPLES // 4, 20))
@given(
    dataset=datasets(),
    zarr_format=st.sampled_from([2, 3]),
    sharded=st.booleans(),
    chunk=st.integers(1, 4),
    consolidated=st.booleans(),
)
def test_drawn_datasets_round_trip(
    tmp_path_factory: pytest.TempPathFactory,
    dataset: xr.Dataset,
    zarr_format: int,
    sharded: bool,
    chunk: int,
    consolidated: bool,
) -> None:
    check(tmp_path_factory.mktemp("ds") / "d.zarr", dataset, zarr_format, sharded, chunk, consolidated)
