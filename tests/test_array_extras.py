"""AsyncArray's zarr-python 2 extras: view, astype, islice / async iteration, set_fill_value,
refresh and the metadata recheck policy (another writer's resize seen or not)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import ArrayNotFoundError, ReadOnlyError
from azarr.scheduler import stats_for
from azarr.storage import Store


async def test_view_overrides_only_in_memory() -> None:
    z = await azarr.array(np.arange(12, dtype="<i4"), chunks=(4,), fill_value=0)
    v = z.view(dtype="<u4", fill_value=5)
    assert v.is_view and not z.is_view
    assert v.dtype == np.dtype("<u4") and v.fill_value == 5
    assert np.array_equal(await v.getitem(...), np.arange(12, dtype="<u4"))
    assert json.loads(await z.store.get(".zarray") or b"{}")["dtype"] == "<i4"
    # a shorter shape reads a prefix of the same chunks
    short = z.view(shape=(6,))
    assert np.array_equal(await short.getitem(...), np.arange(6))
    # data writes through the view reach the shared chunks; metadata writes are refused
    await short.set_basic_selection(slice(0, 2), np.array([100, 101]))
    assert np.array_equal((await z.getitem(...))[:2], [100, 101])
    with pytest.raises(ReadOnlyError, match="view"):
        await short.resize(20)
    with pytest.raises(ReadOnlyError, match="view"):
        await short.set_fill_value(3)
    ro = z.view(read_only=True)
    with pytest.raises(ReadOnlyError):
        await ro.set_basic_selection(0, 1)


async def test_pickled_view_stays_a_view_and_pickles_keep_the_recheck_policy() -> None:
    """Dask ships arrays by pickle: a view must keep its in-memory overrides (not reread
    .zarray) and an array its metadata recheck policy."""
    import pickle

    from azarr.storage import MemoryStore

    store = MemoryStore()
    z = await azarr.array(np.arange(12, dtype="<i4"), chunks=(4,), fill_value=0, store=store)
    v = pickle.loads(pickle.dumps(z.view(dtype="<u4", fill_value=5)))
    assert v.is_view and v.dtype == np.dtype("<u4") and v.fill_value == 5
    with pytest.raises(ReadOnlyError, match="view"):
        await v.resize(20)
    timed = await azarr.open_array(store, mode="r", recheck_metadata=3600)
    assert pickle.loads(pickle.dumps(timed))._recheck_metadata == 3600
    assert not pickle.loads(pickle.dumps(z)).is_view


async def test_view_with_a_bool_dtype_reinterprets_bytes() -> None:
    z = await azarr.array(np.array([0, 1, 1, 0, 1], dtype="u1"), chunks=(2,))
    v = z.view(dtype=bool)
    assert np.array_equal(await v.getitem(...), [False, True, True, False, True])


async def test_astype_converts_while_decoding() -> None:
    data = np.linspace(0, 10, 40).reshape(4, 10)
    z = await azarr.array(data, chunks=(2, 5))
    i = z.astype("<i4")
    assert i.dtype == np.dtype("<i4") and i.read_only
    assert i.metadata.filters is not None and i.metadata.filters[0]["id"] == "astype"
    assert np.array_equal(await i.getitem(...), data.astype("<i4"))
    assert np.array_equal(await i.get_basic_selection((1, slice(2, 7))), data[1, 2:7].astype("<i4"))
    with pytest.raises(ReadOnlyError):
        await i.set_basic_selection(0, 1)


async def test_islice_and_async_iteration() -> None:
    data = np.arange(30).reshape(10, 3)
    z = await azarr.array(data, chunks=(4, 2))
    stats_for(z.store).reset()
    rows = [row async for row in z.islice(3, 9)]
    assert np.array_equal(np.stack(rows), data[3:9])
    # one read per chunk row touched (rows 0-3, 4-7, 8-11), each covering 2 chunks
    assert stats_for(z.store).requests == 3 * 2
    assert np.array_equal(np.stack([r async for r in z]), data)
    assert [r async for r in z.islice(20)] == []
    assert len([r async for r in z.islice(end=100)]) == 10
    with pytest.raises(ValueError, match="start must be a nonnegative integer"):
        [r async for r in z.islice(-1)]
    zero_d = await azarr.array(np.float64(3))
    with pytest.raises(TypeError, match="zero-dimensional"):
        [r async for r in zero_d]


async def test_islice_stops_early_without_leaking_the_prefetch() -> None:
    z = await azarr.array(np.arange(100), chunks=(10,))
    async with contextlib.aclosing(z.islice()) as rows:
        async for row in rows:
            if row == 12:
                break
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert all(t.done() for t in others), others


async def test_set_fill_value_writes_zarray(tmp_path: Path) -> None:
    z = await azarr.create((10,), chunks=(5,), dtype="f4", fill_value=0, store=str(tmp_path / "a.zarr"))
    await z.set_basic_selection(slice(0, 5), 1.0)
    await z.set_fill_value(float("nan"))
    assert json.loads((tmp_path / "a.zarr" / ".zarray").read_text())["fill_value"] == "NaN"
    out = await (await azarr.open_array(str(tmp_path / "a.zarr"), mode="r")).getitem(...)
    assert np.array_equal(out[:5], np.ones(5)) and np.isnan(out[5:]).all()
    with pytest.raises(ValueError):
        await z.set_fill_value("not a number")
    ro = await azarr.open_array(str(tmp_path / "a.zarr"), mode="r")
    with pytest.raises(ReadOnlyError):
        await ro.set_fill_value(1)


@pytest.mark.parametrize("store_factory", ["local", pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
async def test_another_writers_resize_is_seen_per_policy(store_factory: Any) -> None:
    store: Store = store_factory()
    writer = await azarr.create((4,), chunks=(2,), dtype="i2", store=store)
    cached = await azarr.open_array(store, mode="r")
    fresh = await azarr.open_array(store, mode="r", cache_metadata=False)
    timed = await azarr.open_array(store, mode="r", recheck_metadata=3600)
    await writer.resize(8)
    await writer.set_basic_selection(slice(4, 8), np.array([5, 6, 7, 8], dtype="i2"))
    await writer.attrs.update({"v": 2})
    assert (await cached.getitem(...)).shape == (4,) and cached.shape == (4,)
    assert np.array_equal(await fresh.getitem(...), [0, 0, 0, 0, 5, 6, 7, 8])
    assert fresh.shape == (8,) and dict(fresh.attrs) == {"v": 2}
    assert (await timed.getitem(...)).shape == (4,)  # not an hour old yet
    timed.set_recheck_metadata(0.0)
    assert (await timed.getitem(...)).shape == (8,)
    await cached.refresh()
    assert cached.shape == (8,)
    # one recheck per operation, not one per nested call (getitem -> get_basic_selection)
    stats_for(store).reset()
    await fresh.getitem(slice(0, 2))
    assert stats_for(store).requests == 2 + 1  # .zarray and .zattrs, then the chunk
    await azarr.rmdir(store)
    with pytest.raises(ArrayNotFoundError):
        await fresh.getitem(...)
    with pytest.raises(ValueError, match="recheck_metadata"):
        await azarr.open_array(store, mode="a", shape=(2,), recheck_metadata="always")


async def test_chunk_store_keeps_chunks_apart(tmp_path: Path) -> None:
    meta, chunks = tmp_path / "meta.zarr", tmp_path / "chunks.zarr"
    z = await azarr.create((10,), chunks=(5,), dtype="i4", store=str(meta), chunk_store=str(chunks))
    await z.set_basic_selection(..., np.arange(10, dtype="i4"))
    await z.attrs.update({"a": 1})
    assert (
        sorted(p.name for p in meta.iterdir())
        == [".zarray", ".zattrs", ".zgroup"][: len(list(meta.iterdir()))]
    )
    assert sorted(p.name for p in chunks.iterdir()) == ["0", "1"]
    again = await azarr.open_array(str(meta), mode="r", chunk_store=str(chunks))
    assert np.array_equal(await again.getitem(...), np.arange(10)) and dict(again.attrs) == {"a": 1}
    assert await again.nchunks_initialized() == 2
    # without the chunk store the chunks are missing: fill values
    alone = await azarr.open_array(str(meta), mode="r")
    assert np.array_equal(await alone.getitem(...), np.zeros(10))
    await azarr.create((4,), store=str(meta), chunk_store=str(chunks), overwrite=True)
    assert sorted(p.name for p in chunks.iterdir()) == []


async def test_a_streamed_sources_own_policy_applies(tmp_path: Path) -> None:
    root = str(tmp_path / "src.zarr")
    writer = await azarr.create((4,), chunks=(2,), dtype="i2", store=root)
    src = await azarr.open_array(root, mode="r", cache_metadata=False)
    await writer.resize(6)
    await writer.set_basic_selection(slice(0, 6), np.arange(6, dtype="i2"))
    dst = await azarr.zeros((6,), chunks=(3,), dtype="i2")
    await dst.set_basic_selection(..., src)  # src rereads its metadata: shape (6,)
    assert np.array_equal(await dst.getitem(...), np.arange(6))


async def test_group_chunk_store(tmp_path: Path) -> None:
    meta, chunks = tmp_path / "meta.zarr", tmp_path / "chunks.zarr"
    g = await azarr.open_group(str(meta), mode="w", chunk_store=str(chunks))
    z = await g.create_dataset("a/b", data=np.arange(4), chunks=(2,))
    assert sorted(p.name for p in (chunks / "a" / "b").iterdir()) == ["0", "1"]
    assert sorted(p.name for p in (meta / "a" / "b").iterdir()) == [".zarray"]
    again = await azarr.open_group(str(meta), mode="r", chunk_store=str(chunks))
    assert np.array_equal(await (await again.get("a/b")).getitem(...), np.arange(4)) and z.path == "a/b"
