"""``azarr.dask``: from_azarr / to_azarr on the threaded scheduler and on a dask.distributed cluster
with two worker processes, against SeaweedFS (bit-exact reads and writes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS, FaultProxy
from servers import S3Server

import azarr.dask as ad
import azarr.sync as zs
from azarr.storage import S3Store


def _bits(a: Any) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def test_default_chunks_are_zarr_chunks_and_tokens_are_deterministic() -> None:
    z = zs.array(np.arange(100.0).reshape(10, 10), chunks=(3, 4))
    x = ad.from_azarr(z)
    assert x.chunks == ((3, 3, 3, 1), (4, 4, 2))
    assert x.dtype == z.dtype and x._meta.shape == (0, 0)
    assert ad.from_azarr(z.async_array).name == x.name
    assert dask.base.tokenize(x) == dask.base.tokenize(ad.from_azarr(z))
    other = zs.array(np.arange(100.0).reshape(10, 10), chunks=(3, 4))  # another store
    assert ad.from_azarr(other).name != x.name
    assert ad.from_azarr(z, chunks=(5, 5)).chunks == ((5, 5), (5, 5))


def test_auto_chunks_are_whole_zarr_chunks() -> None:
    z = zs.zeros((1000, 64), chunks=(70, 64), dtype="f4")
    with dask.config.set({"array.chunk-size": "64KiB"}):
        x = ad.from_azarr(z, chunks="auto")
        along_rows = ad.from_azarr(z, chunks={0: "auto", 1: -1})
    for chunks in (x.chunks, along_rows.chunks):
        assert len(chunks[0]) > 1
        assert all(c % 70 == 0 for c in chunks[0][:-1])  # only the array's end cuts a block short
    assert x.chunks[1] == (64,)


def test_threaded_scheduler_sixteen_threads() -> None:
    data = np.random.default_rng(1).standard_normal((64, 32))
    z = zs.array(data, chunks=(4, 8))
    x = ad.from_azarr(z)
    with dask.config.set(scheduler="threads", num_workers=16):
        assert _bits(x.compute()) == _bits(data)
        target = zs.zeros((64, 32), chunks=(4, 8))
        ad.to_azarr(x * 2, target)
    assert _bits(target[:]) == _bits(data * 2)


def test_to_azarr_creates_aligns_and_writes_regions() -> None:
    z = ad.to_azarr(da.arange(20, chunks=7), None, chunks=(5,), compute=True)
    assert z is None  # da.store with compute=True returns None
    target = zs.zeros((20,), chunks=(5,), dtype="i8")
    ad.to_azarr(da.arange(20, chunks=7), target)  # (7, 7, 6) is rechunked onto the grid of 5
    np.testing.assert_array_equal(target[:], np.arange(20))
    ad.to_azarr(da.full(8, -1, chunks=4), target, region=(slice(3, 11),))
    expected = np.arange(20)
    expected[3:11] = -1
    np.testing.assert_array_equal(target[:], expected)
    with pytest.raises(ValueError, match="Zarr chunk boundaries"):
        ad.to_azarr(da.full(8, -1, chunks=4), target, region=(slice(3, 11),), rechunk=False)
    with pytest.raises(ValueError, match="has shape"):
        ad.to_azarr(da.zeros(3, chunks=3), target, region=(slice(0, 4),))


@pytest.mark.s3
def test_graph_building_does_no_io(seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy) -> None:
    store = S3Store(
        f"{s3_bucket}/d", storage_options=s3_fault_proxy.storage_options(seaweedfs.storage_options)
    )
    zs.array(np.arange(40.0), chunks=(8,), store=store)
    z = zs.open_array(store, mode="r")
    s3_fault_proxy.reset_counters()
    x = ad.from_azarr(z, chunks=(16,))
    total = x.sum()
    assert s3_fault_proxy.counters().received == 0
    assert float(total.compute()) == float(np.arange(40.0).sum())
    assert s3_fault_proxy.counters().received == 5
    zs.run(store.close())


@pytest.fixture(scope="module")
def cluster_client() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


@pytest.mark.s3
def test_distributed_two_worker_processes_bit_exact(
    cluster_client: Any, seaweedfs: S3Server, s3_bucket: str
) -> None:
    options = seaweedfs.storage_options
    data = np.random.default_rng(2).standard_normal((96, 40)).astype("f4")
    data[3, 5] = np.nan
    zs.array(data, chunks=(8, 20), store=f"s3://{s3_bucket}/src.zarr", storage_options=options)
    x = ad.from_azarr(f"s3://{s3_bucket}/src.zarr", storage_options=options, chunks=(16, 40))
    read = cluster_client.compute(x).result()
    assert _bits(read) == _bits(data)
    ran_on = cluster_client.run(lambda: __import__("os").getpid())
    assert len(set(ran_on.values())) == 2

    ad.to_azarr(
        x[::-1] + 1, f"s3://{s3_bucket}/dst.zarr", storage_options=options, chunks=(8, 20), compute=False
    ).compute()
    written = zs.open_array(f"s3://{s3_bucket}/dst.zarr", mode="r", storage_options=options)
    assert written.chunks == (8, 20)
    assert _bits(written[:]) == _bits(data[::-1] + 1)


@pytest.mark.s3
def test_xarray_engine_chunks_on_the_cluster(
    cluster_client: Any, seaweedfs: S3Server, s3_bucket: str
) -> None:
    import xarray as xr

    import azarr.xarray as ax

    ds = xr.Dataset({"v": (("t", "x"), np.random.default_rng(4).standard_normal((40, 6)))})
    url = f"s3://{s3_bucket}/ds.zarr"
    ax.to_zarr(
        ds, url, mode="w", encoding={"v": {"chunks": (10, 6)}}, storage_options=seaweedfs.storage_options
    )
    lazy = xr.open_dataset(url, engine="azarr", chunks={}, storage_options=seaweedfs.storage_options)
    assert lazy.v.data.npartitions == 4
    total = cluster_client.compute(lazy.v.sum()).result()
    assert float(total) == pytest.approx(float(ds.v.sum()))


@pytest.mark.s3
def test_xarray_compute_false_then_region_writes_on_the_cluster(
    cluster_client: Any, seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    """xarray's "initialise, then fill regions in parallel" pipeline: ``to_zarr(compute=False)``
    writes the metadata and coordinates only; ``region="auto"`` writes, computed by the cluster's
    worker processes (each opening the store itself), fill it, writing every Zarr chunk once."""
    import xarray as xr

    import azarr.xarray as ax

    full = xr.Dataset(
        {"v": (("t", "x"), np.random.default_rng(6).standard_normal((40, 6)))}, coords={"t": np.arange(40)}
    )
    url = f"s3://{s3_bucket}/pipeline.zarr"
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    s3_fault_proxy.reset_counters()
    ax.to_zarr(
        full.chunk({"t": 10}),
        url,
        compute=False,
        encoding={"v": {"chunks": (10, 6)}},
        storage_options=options,
    )
    assert np.isnan(zs.open_array(url, path="v", mode="r", storage_options=options)[:]).all()  # no chunk yet
    s3_fault_proxy.reset_counters()
    parts = [
        ax.to_zarr(
            full.isel(t=slice(i, i + 10)).chunk(), url, region="auto", compute=False, storage_options=options
        )
        for i in range(0, 40, 10)
    ]
    assert s3_fault_proxy.counters().methods.get("PUT", 0) == 0  # nothing written before compute
    cluster_client.compute(parts, sync=True)
    assert s3_fault_proxy.counters().methods.get("PUT", 0) == 4  # one per Zarr chunk of v
    back = xr.open_dataset(url, engine="azarr", storage_options=seaweedfs.storage_options).load()
    xr.testing.assert_identical(back, full)


@pytest.mark.s3
def test_distributed_tasks_read_chunks_only(
    cluster_client: Any, seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    """Worker tasks neither reopen the array nor re-read metadata: one GET per Zarr chunk, per compute."""
    url = f"s3://{s3_bucket}/counted.zarr"
    data = np.random.default_rng(5).standard_normal((64, 30)).astype("f4")
    zs.array(data, chunks=(8, 10), store=url, storage_options=seaweedfs.storage_options)
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    x = ad.from_azarr(url, storage_options=options, chunks=(16, 30))  # 4 tasks of 6 Zarr chunks each
    for _ in range(2):
        s3_fault_proxy.reset_counters()
        total = cluster_client.compute(x.sum(dtype="f8")).result()
        assert float(total) == pytest.approx(float(data.sum(dtype="f8")))
        assert s3_fault_proxy.counters().methods == {"GET": 24}


@pytest.mark.s3
def test_distributed_reads_leave_the_worker_pool_while_waiting(
    cluster_client: Any, seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    """One thread per worker, yet more than one read per worker in flight: tasks secede while waiting."""
    url = f"s3://{s3_bucket}/slow.zarr"
    data = np.arange(16 * 4, dtype="f4").reshape(16, 4)
    zs.array(data, chunks=(1, 4), store=url, storage_options=seaweedfs.storage_options)
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)
    peaks = {}
    for secede in (True, False):
        x = ad.from_azarr(url, storage_options=options, secede=secede)
        if secede:  # chunk reads held until 4 are (fault_proxy's "Waves"): only seceded tasks get there
            s3_fault_proxy.configure(wave=4, wave_path=CHUNK_KEYS)
        else:  # reads slow enough that a task not seceding keeps its worker thread busy
            s3_fault_proxy.configure(latency_ms=300)
        s3_fault_proxy.reset_counters()
        assert float(cluster_client.compute(x.sum(dtype="f8")).result()) == float(data.sum(dtype="f8"))
        peaks[secede] = s3_fault_proxy.counters().peak_in_flight
    assert peaks[False] <= 2  # 2 workers x 1 thread
    assert peaks[True] >= 4


def test_block_size_for_the_secede_limit() -> None:
    from azarr.dask._array import _nbytes
    from azarr.dask._secede import MAX_BLOCK_BYTES

    assert _nbytes((slice(0, 10), slice(2, 4)), (100, 100), 4) == 80
    assert _nbytes((slice(90, 200), 3), (100, 100), 8) == 80  # clipped to the shape; an int is one
    assert _nbytes((slice(None), slice(None)), (2048, 1024), 4) == MAX_BLOCK_BYTES
