"""``engine="azarr"`` and ``azarr.xarray.to_zarr`` on their own (the reference comparisons are in
tests/interop/test_xarray_engine.py): registration, errors, S3 round trips, concurrent load_async."""

from __future__ import annotations

import asyncio
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from fault_proxy import CHUNK_KEYS, FaultProxy
from servers import S3Server

import azarr.sync as zs
import azarr.xarray as ax
from azarr.errors import AzarrError, MetadataError
from azarr.storage import S3Store


def _dataset(n_vars: int = 3, n: int = 6) -> xr.Dataset:
    rng = np.random.default_rng(3)
    data = {f"v{i}": (("t", "x"), rng.standard_normal((n, 4)), {"units": "K"}) for i in range(n_vars)}
    return xr.Dataset(data, coords={"t": np.arange(n), "x": [1.0, 2.0, 3.0, 4.0]}, attrs={"title": "t"})


def test_engine_is_registered() -> None:
    assert "azarr" in xr.backends.list_engines()
    assert ax.AzarrBackendEntrypoint().guess_can_open("s3://b/x.zarr")


def test_roundtrip_local_with_dask_variables(tmp_path: Path) -> None:
    ds = _dataset().chunk({"t": 2})
    ax.to_zarr(ds, tmp_path / "a.zarr", mode="w")
    back = xr.open_dataset(tmp_path / "a.zarr", engine="azarr", chunks={})
    assert back.v0.data.chunksize == (2, 4)  # Zarr chunks came from the dask chunks
    xr.testing.assert_identical(back.compute(), ds.compute())
    with pytest.raises(Exception, match=r"exist|contains"):
        ax.to_zarr(ds, tmp_path / "a.zarr", mode="w-")


def test_array_without_dimension_names_is_a_clear_error(tmp_path: Path) -> None:
    g = zs.open_group(str(tmp_path / "plain.zarr"), mode="w")
    g.zeros("z", shape=(3,))
    with pytest.raises(MetadataError, match=r"_ARRAY_DIMENSIONS"):
        xr.open_dataset(tmp_path / "plain.zarr", engine="azarr")


@pytest.mark.s3
async def test_load_async_fetches_every_variable_in_one_wave(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    ds = _dataset(n_vars=12)
    url = f"s3://{s3_bucket}/ds.zarr"
    await ax.to_zarr_async(ds, url, mode="w", storage_options=seaweedfs.storage_options)
    store = S3Store(
        f"{s3_bucket}/ds.zarr", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    lazy = xr.open_dataset(store, engine="azarr")
    # 12 data variables, one chunk each: all in flight together, not one round trip per variable
    # (the proxy holds the chunk reads until 12 are held: see fault_proxy's "Waves").
    s3_fault_proxy.configure(wave=12, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    loaded = await lazy.load_async()
    xr.testing.assert_identical(loaded, ds)
    counters = s3_fault_proxy.counters()
    assert counters.peak_in_flight >= 12 and counters.waves == 1
    await store.close()


@pytest.mark.s3
def test_sync_load_fetches_every_variable_in_one_wave(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    ds = _dataset(n_vars=12)
    ax.to_zarr(ds, f"s3://{s3_bucket}/ds.zarr", mode="w", storage_options=seaweedfs.storage_options)
    store = S3Store(
        f"{s3_bucket}/ds.zarr", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    lazy = xr.open_dataset(store, engine="azarr")
    s3_fault_proxy.configure(wave=12, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    xr.testing.assert_identical(ax.load(lazy), ds)
    assert s3_fault_proxy.counters().peak_in_flight >= 12
    zs.run(store.close())


def _legacy_bools(url: str, storage_options: dict[str, object], values: np.ndarray) -> None:
    """A bool variable the way xarray < 2025 wrote it: int8 with the attribute ``dtype: "bool"``."""
    group = zs.open_group(url, mode="a", storage_options=storage_options)
    flags = group.create_dataset("flag", data=values.astype("i1"), chunks=values.shape, fill_value=None)
    flags.attrs.update({"dtype": "bool", "_ARRAY_DIMENSIONS": ["t", "x"]})
    zs.consolidate_metadata(url, storage_options=storage_options)


@pytest.mark.s3
async def test_load_async_reads_legacy_cf_bools_in_the_same_wave(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    """xarray 2026.9 decodes CF bools with a wrapper that has no async path (an empty
    NotImplementedError from load_async); the engine swaps it for one that has (issue #27)."""
    ds = _dataset(n_vars=4)
    url = f"s3://{s3_bucket}/ds.zarr"
    await ax.to_zarr_async(ds, url, mode="w", storage_options=seaweedfs.storage_options)
    flags = ds.v0.values > 0
    await asyncio.to_thread(_legacy_bools, url, seaweedfs.storage_options, flags)
    store = S3Store(
        f"{s3_bucket}/ds.zarr", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    lazy = xr.open_dataset(store, engine="azarr")
    assert lazy.flag.dtype == bool and "dtype" not in lazy.flag.attrs
    s3_fault_proxy.configure(wave=5, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    loaded = await lazy.load_async()
    xr.testing.assert_identical(loaded, ds.assign(flag=(("t", "x"), flags)))
    assert isinstance(loaded.flag.variable._data, np.ndarray) and loaded.flag.dtype == bool
    assert s3_fault_proxy.counters().peak_in_flight >= 5  # 4 floats + the bools at once
    await store.close()


@pytest.mark.s3
def test_sync_load_reads_every_kind_in_one_wave(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    """ax.load: native and legacy bools with the rest in one wave, dask-backed variables after it."""
    ds = _dataset(n_vars=4)
    ds["native"] = (("t", "x"), ds.v2.values > 0)
    ds["chunked"] = (("t", "x"), ds.v1.values * 2)
    url = f"s3://{s3_bucket}/ds.zarr"
    ax.to_zarr(ds, url, mode="w", storage_options=seaweedfs.storage_options)
    flags = ds.v0.values > 0
    _legacy_bools(url, seaweedfs.storage_options, flags)
    store = S3Store(
        f"{s3_bucket}/ds.zarr", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    lazy = xr.open_dataset(store, engine="azarr")
    lazy["chunked"] = lazy.chunked.chunk({"t": 3})  # dask-backed: computed after the wave
    s3_fault_proxy.configure(wave=6, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    loaded = ax.load(lazy)
    xr.testing.assert_identical(loaded, ds.assign(flag=(("t", "x"), flags)))
    assert loaded.native.dtype == bool and loaded.flag.dtype == bool
    assert s3_fault_proxy.counters().peak_in_flight >= 6  # 4 floats + both bools at once
    zs.run(store.close())


def test_sync_load_error_names_the_chunk(tmp_path: Path) -> None:
    ax.to_zarr(_dataset(n_vars=3), tmp_path / "a.zarr", mode="w")
    (tmp_path / "a.zarr" / "v1" / "0.0").write_bytes(b"not a blosc frame")
    lazy = xr.open_dataset(tmp_path / "a.zarr", engine="azarr")
    with pytest.raises(AzarrError, match=r"v1/0\.0"):
        ax.load(lazy)


def test_append_dim_grows_arrays_encoded_as_stored(tmp_path: Path) -> None:
    ds = _dataset(n=6)
    ds["when"] = ("t", np.array("2020-01-01", dtype="M8[ns]") + np.arange(6).astype("m8[D]"))
    ds["when"].encoding = {"units": "days since 2020-01-01"}
    ax.to_zarr(ds, tmp_path / "a.zarr", mode="w")
    more = _dataset(n=10).isel(t=slice(6, 10))
    more["when"] = ("t", np.array("2020-01-07", dtype="M8[ns]") + np.arange(4).astype("m8[D]"))
    ax.to_zarr(more, tmp_path / "a.zarr", mode="a", append_dim="t")
    back = xr.open_dataset(tmp_path / "a.zarr", engine="azarr").load()
    xr.testing.assert_identical(back.drop_vars("when"), xr.concat([ds, more], dim="t").drop_vars("when"))
    np.testing.assert_array_equal(
        back.when.values, np.array("2020-01-01", dtype="M8[ns]") + np.arange(10).astype("m8[D]")
    )
    assert (
        zs.open_array(str(tmp_path / "a.zarr"), path="when", mode="r").attrs["units"]
        == "days since 2020-01-01"
    )


def _tree(n_groups: int) -> xr.DataTree:
    rng = np.random.default_rng(7)
    nodes = {
        f"/site{i:02d}": xr.Dataset({"v": ("x", rng.standard_normal(4))}, coords={"x": np.arange(4) + i})
        for i in range(n_groups)
    }
    return xr.DataTree.from_dict({"/": xr.Dataset(attrs={"title": "t"}), **nodes})


@pytest.mark.s3
@pytest.mark.parametrize("consolidated", [True, False])
def test_open_datatree_reads_every_group_in_one_wave(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy, consolidated: bool
) -> None:
    """Groups (and the dimension coordinates xarray loads at open) are read concurrently under the
    store's budget, not group after group: with .zmetadata, one document read, then every group's
    coordinate in one wave."""
    tree = _tree(12)
    url = f"s3://{s3_bucket}/tree.zarr"
    ax.to_zarr(tree, url, consolidated=consolidated, storage_options=seaweedfs.storage_options)
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    # The 12 coordinates' chunks are held until all 12 are (fault_proxy's "Waves").
    s3_fault_proxy.configure(wave=12, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    with pytest.warns(RuntimeWarning, match="consolidated") if not consolidated else nullcontext():
        opened = xr.open_datatree(url, engine="azarr", storage_options=options)
    counters = s3_fault_proxy.counters()
    assert counters.peak_in_flight >= 12
    if consolidated:
        # .zmetadata and the root's zarr.json together (either format may be there), then the
        # 12 coordinates together.
        assert counters.methods == {"GET": 14}
    xr.testing.assert_identical(opened.load(), tree)


@pytest.mark.s3
def test_tree_write_is_one_wave_per_level_and_computes_shared_dask_parents_once(
    seaweedfs: S3Server, s3_bucket: str
) -> None:
    calls = []

    def expensive(block: np.ndarray) -> np.ndarray:
        calls.append(block.shape)
        return block + 1

    import dask.array as da

    base = da.map_blocks(expensive, da.zeros(6, chunks=3), dtype="f8")
    tree = xr.DataTree.from_dict({f"/g{i}/sub": xr.Dataset({"d": ("x", base * i)}) for i in range(5)})
    ax.to_zarr(tree, f"s3://{s3_bucket}/t.zarr", storage_options=seaweedfs.storage_options)
    assert [c for c in calls if c != (0,)] == [(3,), (3,)]  # its two blocks, not ten ((0,): dask's meta)
    back = xr.open_datatree(
        f"s3://{s3_bucket}/t.zarr", engine="azarr", storage_options=seaweedfs.storage_options
    )
    np.testing.assert_array_equal(back["g3/sub"].d.values, np.full(6, 3.0))
