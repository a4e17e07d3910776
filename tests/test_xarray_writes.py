"""``azarr.xarray.to_zarr`` refuses what xarray's engine refuses, before writing anything (issue #34).

Each case here was a silent corruption: the write went through and left a store that
no longer opens, or holds other data than was written. Every one now raises xarray's
error (type and words) and leaves the store as it was, byte for byte. The last test
checks that a write failing halfway stops every other write of the call before
``to_zarr`` raises.
"""

from __future__ import annotations

import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import xarray as xr
from fault_proxy import FaultProxy
from servers import S3Server

import azarr.sync as zs
import azarr.xarray as ax
from azarr.storage import S3Store


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _times(n: int, start: int = 0) -> xr.Dataset:
    return xr.Dataset(
        {"t2m": (("time", "x"), np.arange(start * 3, (start + n) * 3, dtype="f8").reshape(n, 3))},
        coords={"time": np.arange(start, start + n), "x": [10, 20, 30]},
    )


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    path = tmp_path / "ds.zarr"
    ax.to_zarr(_times(4), path, mode="w")
    return path


def _refused(path: Path, exc: type[Exception], match: str, ds: xr.Dataset, **kwargs: object) -> None:
    before = _snapshot(path)
    with pytest.raises(exc, match=match):
        ax.to_zarr(ds, path, **kwargs)  # type: ignore[arg-type]
    assert _snapshot(path) == before, "a refused write changed the store"


def test_append_without_append_dim_and_another_length(stored: Path) -> None:
    # Was: x and t2m grew to 6 rows, the other arrays kept 4: the store no longer opened.
    _refused(stored, ValueError, "different dimension sizes", _times(2, start=4), mode="a")
    xr.testing.assert_identical(xr.open_dataset(stored, engine="azarr").load(), _times(4))


def test_mode_r_plus_creates_no_variable(stored: Path) -> None:
    # Was: mode="r+" created "extra" (r+ writes into existing arrays only).
    extra = _times(4).assign(extra=(("time",), np.ones(4)))
    _refused(stored, ValueError, "non-pre-existing variables", extra, mode="r+")


def test_append_dim_must_be_a_stored_dimension(stored: Path) -> None:
    # Was: append_dim="notvalid" replaced x with the shorter array being "appended".
    message = "does not match any existing dataset dimensions"
    _refused(stored, ValueError, message, _times(2), mode="a", append_dim="notvalid")


@pytest.mark.parametrize(("before", "after"), [(["a", "b"], ["abc"]), ([b"a", b"b"], [b"abc"])])
def test_appending_longer_fixed_width_strings(tmp_path: Path, before: list[str], after: list[str]) -> None:
    # Was: ["a", "b"] + ["abc"] stored "a": the array keeps its <U1 / |S1 dtype and truncates.
    path = tmp_path / "s.zarr"
    ax.to_zarr(xr.Dataset({"s": ("time", np.array(before))}), path, mode="w")
    _refused(
        path,
        ValueError,
        "Mismatched dtypes for variable s",
        xr.Dataset({"s": ("time", np.array(after))}),
        mode="a",
        append_dim="time",
    )


def test_encoding_for_an_existing_variable_on_append(stored: Path) -> None:
    # Was: accepted and ignored (appended values keep the stored encoding).
    _refused(
        stored,
        ValueError,
        "already exists, but encoding was provided",
        _times(2, 4),
        mode="a",
        append_dim="time",
        encoding={"t2m": {"dtype": "f4"}},
    )


def test_unknown_encoding_key(tmp_path: Path) -> None:
    # Was: "chunk" (for "chunks") silently ignored: the array got other chunks than asked.
    path = tmp_path / "new.zarr"
    with pytest.raises(ValueError, match=r"unexpected encoding parameters for zarr backend:  \['chunk'\]"):
        ax.to_zarr(_times(4), path, encoding={"t2m": {"chunk": (2, 3)}})
    assert not path.exists() or not any(p.name == ".zarray" for p in path.rglob("*"))


def test_non_string_variable_name(tmp_path: Path) -> None:
    # Was: written as array "1", which reads back as variable "1" (str), not 1.
    path = tmp_path / "new.zarr"
    with pytest.raises(TypeError, match="must be either a string or None"):
        ax.to_zarr(xr.Dataset({1: ("x", [1.0, 2.0])}), path)
    assert not path.exists()


def test_non_integer_chunks(tmp_path: Path) -> None:
    # Was: (5, 4.5) truncated to (5, 4).
    path = tmp_path / "new.zarr"
    with pytest.raises(TypeError, match="must be an int or a tuple of ints"):
        ax.to_zarr(_times(10), path, encoding={"t2m": {"chunks": (5, 4.5)}})
    assert not path.exists() or not any(p.name == ".zarray" for p in path.rglob("*"))


def _fail_on_third_block(
    block: np.ndarray, block_info: dict[object, dict[str, object]] | None = None
) -> np.ndarray:
    if block_info is not None and block_info[None]["chunk-location"] == (2,):
        raise RuntimeError("upstream computation failed on block 2")
    return block


def _chunk_keys(store: S3Store) -> set[str]:
    return {k for k in zs.run(_list(store)) if "/." not in k and not k.startswith(".")}


async def _list(store: S3Store) -> list[str]:
    return [k async for k in store.list_prefix("")]


@pytest.mark.s3
def test_failed_write_stops_every_other_write_before_raising(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    # Was: to_zarr raised on the dask failure while the in-memory variable's chunk writes went on
    # in the background, landing in the store after the caller saw the error.
    bad = da.map_blocks(_fail_on_third_block, da.arange(40.0, chunks=4), dtype="f8")
    ds = xr.Dataset({"bad": ("n", bad), "big": (("m", "k"), np.random.default_rng(0).random((1600, 16)))})
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    s3_fault_proxy.configure(latency_ms=150)
    with pytest.raises(RuntimeError, match="block 2"):
        ax.to_zarr(
            ds, f"s3://{s3_bucket}/x.zarr", storage_options=options, encoding={"big": {"chunks": (4, 16)}}
        )
    direct = S3Store(f"{s3_bucket}/x.zarr", storage_options=seaweedfs.storage_options)
    written = _chunk_keys(direct)
    forwarded = s3_fault_proxy.counters().forwarded
    time.sleep(1.5)  # ten times the added latency: anything still going would have landed
    assert _chunk_keys(direct) == written
    assert s3_fault_proxy.counters().forwarded == forwarded
    # 400 chunks at 150 ms each take several waves of the store's budget: it did not run to the end.
    assert len([k for k in written if k.startswith("big/")]) < 400
    zs.run(direct.close())
