"""Arrays as write values (azarr.core._streaming): rechunking copies streamed slab by slab."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import azarr
from azarr.core._streaming import plan_slabs, region_of
from azarr.scheduler import Progress, set_budget, stats_for
from azarr.storage import Store


class CountingSource:
    """A chunked source (shape, dtype, __getitem__) that records every read's size."""

    def __init__(self, data: np.ndarray[Any, Any]) -> None:
        self._data = data
        self.shape = data.shape
        self.dtype = data.dtype
        self.reads: list[int] = []

    def __getitem__(self, selection: Any) -> np.ndarray[Any, Any]:
        out = self._data[selection]
        self.reads.append(out.nbytes)
        return out


def test_region_of() -> None:
    assert region_of(Ellipsis, (4, 5)) == ((0, 4), (0, 5))
    assert region_of((slice(1, 3),), (4, 5)) == ((1, 3), (0, 5))
    assert region_of((Ellipsis, slice(-2, None)), (4, 5)) == ((0, 4), (3, 5))
    assert region_of((slice(None, None, 2),), (4,)) is None
    assert region_of((1, slice(None)), (4, 5)) is None


def test_plan_slabs_cover_the_region_once_on_the_chunk_grid() -> None:
    region = ((3, 23), (5, 55))
    slabs = list(plan_slabs(region, (4, 6), 8, target=4 * 6 * 8 * 3))
    covered = np.zeros((30, 60), dtype=int)
    for slab in slabs:
        covered[slab] += 1
        for s, c in zip(slab, (4, 6), strict=True):
            # a slab starts on a chunk boundary unless it is the region's start
            assert s.start % c == 0 or s.start in (3, 5)
        assert (slab[0].stop - slab[0].start) * (slab[1].stop - slab[1].start) * 8 <= 4 * 6 * 8 * 3
    assert covered[3:23, 5:55].min() == 1 and covered.sum() == 20 * 50


@pytest.mark.parametrize(
    "store_factory", ["memory", "local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True
)
async def test_rechunk_async_array_never_reads_it_whole(store_factory: Any) -> None:
    src_store: Store = store_factory()
    dst_store: Store = store_factory()
    data = np.random.default_rng(0).standard_normal((120, 90))
    src = await azarr.array(data, chunks=(7, 11), store=src_store)
    set_budget(dst_store, max_bytes=16 * 1024)  # slabs of 2 KiB: 1/8 of the budget
    reads: list[tuple[int, ...]] = []
    original = src.get_basic_selection

    async def spy(selection: Any, **kwargs: Any) -> Any:
        out = await original(selection, **kwargs)
        reads.append(out.shape)
        return out

    src.get_basic_selection = spy  # type: ignore[method-assign]
    stats_for(dst_store).reset()
    reports: list[Progress] = []
    dst = await azarr.create((120, 90), chunks=(8, 16), store=dst_store)
    await dst.set_basic_selection(..., src, progress=reports.append)
    # every destination chunk was written whole: no chunk read back
    assert stats_for(dst_store).bytes_read == 0
    assert np.array_equal(await dst.getitem(...), data)
    assert len(reads) > 10 and max(int(np.prod(r)) * 8 for r in reads) <= 16 * 1024 // 8
    assert reports[-1].done == reports[-1].total == dst.nchunks


async def test_array_of_a_source_takes_its_chunks_and_rechunks_on_request() -> None:
    data = np.arange(600, dtype="i4").reshape(20, 30)
    src = await azarr.array(data, chunks=(3, 7))
    same = await azarr.array(src)
    assert same.chunks == (3, 7) and same.dtype == np.dtype("i4")
    other = await azarr.array(src, chunks=(10, 10), dtype="f8")
    assert other.chunks == (10, 10) and other.dtype == np.dtype("f8")
    assert np.array_equal(await other.getitem(...), data)


async def test_h5py_dataset_source(tmp_path: Path) -> None:
    data = np.random.default_rng(1).integers(0, 1000, size=(50, 40)).astype("u2")
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f.create_dataset("x", data=data, chunks=(10, 8))
    with h5py.File(tmp_path / "x.h5", "r") as f:
        z = await azarr.array(f["x"], store=str(tmp_path / "x.zarr"))
        assert z.chunks == (10, 8) and z.dtype == np.dtype("u2")
    assert np.array_equal(await z.getitem(...), data)


async def test_region_write_and_bounded_reads() -> None:
    data = np.arange(20 * 50, dtype="f8").reshape(20, 50)
    source = CountingSource(data)
    z = await azarr.zeros((30, 60), chunks=(4, 4))
    set_budget(z.store, max_bytes=4 * 4 * 8 * 8)
    await z.set_basic_selection((slice(3, 23), slice(5, 55)), source)
    out = await z.getitem(...)
    assert np.array_equal(out[3:23, 5:55], data)
    assert out.sum() == data.sum()
    assert max(source.reads) <= 4 * 4 * 8 * 2 and sum(source.reads) == data.nbytes


async def test_non_region_selections_and_shape_errors() -> None:
    src = await azarr.array(np.arange(10.0), chunks=(3,))
    z = await azarr.zeros((20,), chunks=(4,))
    await z.set_orthogonal_selection((np.arange(0, 20, 2),), src)  # read whole, then written
    assert np.array_equal((await z.getitem(...))[::2], np.arange(10.0))
    await z.set_basic_selection(slice(1, None, 2), src)  # a stride: the general path
    assert np.array_equal((await z.getitem(...))[1::2], np.arange(10.0))
    with pytest.raises(
        ValueError, match=r"source of shape \(10,\) does not match the selection of shape \(5,\)"
    ):
        await z.set_basic_selection(slice(0, 5), src)
    ro = await azarr.open_array(z.store, mode="r")
    with pytest.raises(azarr.errors.ReadOnlyError):
        await ro.set_basic_selection(slice(0, 10), src)


async def test_chunks_large_against_the_budget_do_not_deadlock() -> None:
    data = np.arange(4 * 8192, dtype="f8")
    src = await azarr.array(data, chunks=(8192,))  # 64 KiB chunks
    dst = await azarr.create(data.shape, chunks=(8192,), dtype="f8")
    set_budget(dst.store, max_bytes=100 * 1024)  # two slabs and a chunk do not fit: no slab reservation
    await asyncio.wait_for(dst.set_basic_selection(..., src), timeout=60)
    assert np.array_equal(await dst.getitem(...), data)
