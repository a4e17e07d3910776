"""AsyncArray end to end on every store kind (memory, local directory, S3 on SeaweedFS)."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import ReadOnlyError
from azarr.scheduler import set_budget
from azarr.storage import MemoryStore, Store
from tests.util import RecordingStore


def reopen(store: Store) -> Store:
    """A new store object for the same location (stores pickle as configuration)."""
    return pickle.loads(pickle.dumps(store))


DTYPES = [
    "|b1",
    "|i1",
    "<i2",
    ">i4",
    "<u8",
    "<f2",
    "<f4",
    ">f8",
    "<c8",
    "<c16",
    "<M8[ns]",
    "<m8[s]",
    "|S5",
    "<U3",
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("order", ["C", "F"])
async def test_round_trip_dtypes(store: Store, dtype: str, order: str) -> None:
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    raw = rng.integers(0, 255, size=(13, 7, dt.itemsize), dtype="u1")
    data = raw.view(dt).reshape(13, 7) if dt.kind not in "bMm" else None
    if dt.kind == "b":
        data = rng.integers(0, 2, size=(13, 7)).astype(bool)
    elif dt.kind in "Mm":
        data = rng.integers(-(10**12), 10**12, size=(13, 7)).astype(dt)
    elif dt.kind == "U":
        data = np.array([[f"{i % 97:x}{j}" for j in range(7)] for i in range(13)], dtype=dt)
    elif dt.kind in "fc":
        data = rng.standard_normal((13, 7)).astype(dt)
    assert data is not None
    arr = await azarr.create((13, 7), chunks=(5, 3), dtype=dtype, order=order, store=store, path="a")
    await arr.set_basic_selection(..., data)
    back = await (await azarr.open_array(reopen(store), mode="r", path="a")).get_basic_selection()
    assert back.dtype == dt
    assert back.tobytes() == data.astype(dt).tobytes()


async def test_missing_chunks_read_as_fill_value(store: Store) -> None:
    arr = await azarr.full((10, 10), fill_value=-7, chunks=(4, 4), dtype="i4", store=store)
    await arr.set_basic_selection((slice(0, 4), slice(0, 4)), 1)
    data = await arr.get_basic_selection()
    expected = np.full((10, 10), -7, dtype="i4")
    expected[:4, :4] = 1
    np.testing.assert_array_equal(data, expected)
    assert await arr.nchunks_initialized() == 1


async def test_nan_fill_value_and_no_fill_value(store: Store) -> None:
    arr = await azarr.full(5, fill_value=np.nan, chunks=2, dtype="f8", store=store, path="nan")
    assert np.isnan(await arr.get_basic_selection()).all()
    reopened = await azarr.open_array(reopen(store), path="nan")
    assert np.isnan(reopened.fill_value)
    empty = await azarr.empty(5, chunks=2, dtype="i2", store=store, path="none")
    assert empty.fill_value is None
    np.testing.assert_array_equal(await empty.get_basic_selection(), np.zeros(5, "i2"))


@pytest.mark.parametrize("separator", [".", "/"])
async def test_dimension_separator_keys(store: Store, separator: str) -> None:
    arr = await azarr.zeros(
        (4, 4), chunks=(2, 2), dtype="u1", store=store, path="g/x", dimension_separator=separator
    )
    await arr.set_basic_selection(..., np.arange(16, dtype="u1").reshape(4, 4))
    keys = sorted([k async for k in store.list_prefix("g/x") if not k.rsplit("/", 1)[-1].startswith(".")])
    assert keys == [f"g/x/{i}{separator}{j}" for i in range(2) for j in range(2)]
    reopened = await azarr.open_array(reopen(store), path="g/x")
    assert reopened.dimension_separator == separator
    np.testing.assert_array_equal(await reopened.get_basic_selection(), np.arange(16).reshape(4, 4))


BASIC_SELECTIONS: list[Any] = [
    Ellipsis,
    5,
    -1,
    (slice(None), 3),
    (slice(2, 17, 3), slice(None, None, -2)),
    (slice(None, None, -1), Ellipsis),
    (Ellipsis, slice(-4, None)),
    (slice(8, 2, -2), -3),
    (3, 4),
    slice(100, 200),
    (slice(0, 0), slice(None)),
]


@pytest.mark.parametrize("selection", BASIC_SELECTIONS, ids=repr)
async def test_basic_selection_matches_numpy(selection: Any) -> None:
    data = np.arange(20 * 9, dtype="i8").reshape(20, 9)
    arr = await azarr.array(data, chunks=(6, 4), store=MemoryStore())
    np.testing.assert_array_equal(await arr.get_basic_selection(selection), data[selection])
    expected = data.copy()
    expected[selection] = -1
    await arr.set_basic_selection(selection, -1)
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


ONE_CHUNK_SELECTIONS = [
    (7, 5),  # an element
    (slice(6, 12), slice(4, 8)),  # a whole interior chunk
    (slice(18, 20), slice(8, 9)),  # the whole (partial) corner chunk
    (slice(7, 10), slice(5, 7)),  # a window
    (slice(11, 5, -2), 6),  # reversed, an int axis dropped
]


@pytest.mark.parametrize("selection", ONE_CHUNK_SELECTIONS, ids=repr)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("compressor", [None, numcodecs.Blosc()], ids=["raw", "blosc"])
async def test_reads_within_one_chunk_are_new_writable_arrays(
    selection: Any, order: str, compressor: Any
) -> None:
    # One-chunk reads allocate their result in the codec thread (AsyncArray._read_one_chunk):
    # same values, order and ownership as any other read, stored chunk or missing one.
    data = np.arange(20 * 9, dtype="i8").reshape(20, 9)
    store = MemoryStore()
    arr = await azarr.array(data, chunks=(6, 4), order=order, compressor=compressor, store=store)
    first = await arr.get_basic_selection(selection)
    second = await arr.get_basic_selection(selection)
    np.testing.assert_array_equal(first, data[selection])
    if isinstance(first, np.ndarray) and first.ndim == 2:
        assert first.flags.writeable and first.flags.owndata
        assert first.flags.c_contiguous if order == "C" else first.flags.f_contiguous
        first[...] = -1  # not a view of the stored bytes or of another read's result
        np.testing.assert_array_equal(second, data[selection])
    np.testing.assert_array_equal(await arr.get_orthogonal_selection(selection), data[selection])
    chunk = [
        int(np.arange(n)[s].flat[0]) // c for s, n, c in zip(selection, data.shape, arr.chunks, strict=True)
    ]
    await store.delete(".".join(map(str, chunk)))
    filled = await arr.get_basic_selection(selection)
    np.testing.assert_array_equal(filled, np.zeros_like(data)[selection])


async def test_int_selection_returns_scalar_and_zero_d_arrays(store: Store) -> None:
    arr = await azarr.array(np.arange(10.0), chunks=3, store=store, path="v")
    value = await arr.get_basic_selection(4)
    assert isinstance(value, np.float64) and value == 4.0
    zd = await azarr.create((), dtype="i4", store=store, path="scalar", fill_value=3)
    assert zd.compressor is None  # zarr-python 2 never compresses 0-d arrays
    assert await zd.get_basic_selection(()) == 3
    await zd.set_basic_selection((), 42)
    whole = await zd.get_basic_selection(...)
    assert isinstance(whole, np.ndarray) and whole.shape == () and whole[()] == 42
    assert await store.exists("scalar/0")


async def test_partial_write_reads_modify_writes_and_full_chunks_skip_reads() -> None:
    store = RecordingStore(MemoryStore())
    arr = await azarr.zeros((8, 8), chunks=(4, 4), dtype="i4", store=store)
    store.reset()
    await arr.set_basic_selection((slice(0, 4), slice(0, 8)), 1)  # two whole chunks: no reads
    assert sum(store.gets.values()) == 0
    assert set(store.sets) == {"0.0", "0.1"}
    store.reset()
    await arr.set_basic_selection((slice(2, 6), slice(2, 6)), 5)  # touches 4 chunks partially
    assert set(store.gets) == {"0.0", "0.1", "1.0", "1.1"}
    expected = np.zeros((8, 8), "i4")
    expected[:4] = 1
    expected[2:6, 2:6] = 5
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


async def test_reads_fetch_only_touched_chunks_once() -> None:
    store = RecordingStore(MemoryStore())
    arr = await azarr.array(np.arange(100), chunks=10, store=store)
    store.reset()
    await arr.get_basic_selection(slice(15, 42))
    assert dict(store.gets) == {"1": 1, "2": 1, "3": 1, "4": 1}


async def test_chunk_reads_run_concurrently() -> None:
    """Slow store: 40 chunk reads of 50 ms each must overlap, not run one after another."""

    class SlowStore(RecordingStore):
        in_flight = 0
        peak = 0

        async def _get(self, key: str, byte_range: Any) -> bytes | None:
            type(self).in_flight += 1
            type(self).peak = max(type(self).peak, type(self).in_flight)
            try:
                await asyncio.sleep(0.05)
                return await super()._get(key, byte_range)
            finally:
                type(self).in_flight -= 1

    inner = MemoryStore()
    await azarr.array(np.arange(400), chunks=10, store=inner)
    slow = SlowStore(inner)
    set_budget(slow, max_requests=64)  # a remote store's budget, not cores x 4
    arr = await azarr.open_array(slow, mode="r")
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.arange(400))
    assert SlowStore.peak > 10
    assert loop.time() - t0 < 40 * 0.05 / 4


async def test_concurrency_is_bounded_by_the_store_budget() -> None:
    class Tracking(RecordingStore):
        in_flight = 0
        peak = 0

        async def _get(self, key: str, byte_range: Any) -> bytes | None:
            Tracking.in_flight += 1
            Tracking.peak = max(Tracking.peak, Tracking.in_flight)
            try:
                await asyncio.sleep(0.005)
                return await super()._get(key, byte_range)
            finally:
                Tracking.in_flight -= 1

    inner = MemoryStore()
    await azarr.array(np.arange(1000), chunks=5, store=inner, path="a")
    await azarr.array(np.arange(1000), chunks=5, store=inner, path="b")
    tracked = Tracking(inner)
    set_budget(tracked, max_requests=7)
    a = await azarr.open_array(tracked, path="a", mode="r")
    b = await azarr.open_array(tracked, path="b", mode="r")
    await asyncio.gather(a.get_basic_selection(), b.get_basic_selection(), a.get_basic_selection())
    assert Tracking.peak == 7  # one budget shared by both arrays and all three calls


async def test_write_empty_chunks_false_deletes_fill_chunks(store: Store) -> None:
    arr = await azarr.zeros(20, chunks=5, dtype="f4", store=store, path="drop", write_empty_chunks=False)
    await arr.set_basic_selection(..., np.arange(20, dtype="f4"))
    assert await arr.nchunks_initialized() == 4
    await arr.set_basic_selection(slice(5, 10), 0)
    assert await arr.nchunks_initialized() == 3
    keep = await azarr.zeros(20, chunks=5, dtype="f4", store=store, path="keep")
    await keep.set_basic_selection(..., 0)
    assert await keep.nchunks_initialized() == 4  # write_empty_chunks=True, as zarr-python 2


async def test_resize_drops_chunks_outside_and_append_grows(store: Store) -> None:
    arr = await azarr.array(np.arange(100).reshape(10, 10), chunks=(3, 3), store=store)
    assert await arr.nchunks_initialized() == 16
    await arr.resize(5, 5)
    assert arr.shape == (5, 5)
    assert await arr.nchunks_initialized() == 4
    reopened = await azarr.open_array(reopen(store))
    assert reopened.shape == (5, 5)
    np.testing.assert_array_equal(
        await reopened.get_basic_selection(), np.arange(100).reshape(10, 10)[:5, :5]
    )
    new_shape = await reopened.append(np.full((5, 2), -1), axis=1)
    assert new_shape == (5, 7)
    data = await reopened.get_basic_selection()
    np.testing.assert_array_equal(data[:, 5:], -1)
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        await reopened.append(np.zeros((3, 3)), axis=1)


async def test_attributes_persist(store: Store) -> None:
    arr = await azarr.zeros(3, store=store, path="x")
    await arr.attrs.update({"units": "m", "scale": 0.5})
    await arr.attrs.set("nested", {"a": [1, 2]})
    await arr.attrs.delete("scale")
    reopened = await azarr.open_array(reopen(store), path="x", mode="r")
    assert reopened.attrs.asdict() == {"units": "m", "nested": {"a": [1, 2]}}
    with pytest.raises(ReadOnlyError):
        await reopened.attrs.update(more=1)
    with pytest.raises(TypeError):
        await arr.attrs.update(bad=object())
    assert (await azarr.open_array(reopen(store), path="x")).attrs["units"] == "m"


async def test_read_only_array_refuses_writes(store: Store) -> None:
    await azarr.zeros(3, store=store)
    ro = await azarr.open_array(reopen(store), mode="r")
    with pytest.raises(ReadOnlyError, match="read-only"):
        await ro.set_basic_selection(0, 1)
    with pytest.raises(ReadOnlyError):
        await ro.resize(5)


@pytest.mark.parametrize(
    "compressor",
    [
        None,
        numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
        numcodecs.Zstd(level=1),
        numcodecs.Zlib(level=1),
        numcodecs.GZip(level=1),
        numcodecs.BZ2(level=1),
        numcodecs.LZMA(preset=1),
        numcodecs.LZ4(),
    ],
    ids=lambda c: type(c).__name__,
)
async def test_compressors_and_filters(store: Store, compressor: Any) -> None:
    data = np.linspace(0, 100, 1000).reshape(40, 25)
    filters = [numcodecs.Delta(dtype="f8"), numcodecs.Shuffle(elementsize=8)]
    arr = await azarr.array(data, chunks=(16, 10), compressor=compressor, filters=filters, store=store)
    reopened = await azarr.open_array(reopen(store), mode="r")
    assert reopened.compressor == compressor
    assert reopened.filters == filters
    np.testing.assert_array_equal(await reopened.get_basic_selection(), data)
    assert arr.nchunks == 9


async def test_object_arrays(store: Store) -> None:
    words = np.array(["α", "beta", "", "gamma delta"], dtype=object)
    s = await azarr.array(words, chunks=3, dtype=str, store=store, path="s")
    assert s.dtype == object and s.filters == [numcodecs.VLenUTF8()]
    b = await azarr.array(np.array([b"x", b"", b"\x00yz"], dtype=object), dtype=bytes, store=store, path="b")
    ragged = np.empty(3, dtype=object)
    ragged[:] = [np.array([1, 2], "i4"), np.array([], "i4"), np.array([3], "i4")]
    v = await azarr.array(ragged, dtype=object, object_codec=numcodecs.VLenArray("i4"), store=store, path="v")
    j = await azarr.create(2, dtype=object, object_codec=numcodecs.JSON(), store=store, path="j")
    await j.set_basic_selection(..., np.array([{"a": 1}, [1, "x"]], dtype=object))
    fresh = reopen(store)
    np.testing.assert_array_equal(
        await (await azarr.open_array(fresh, path="s")).get_basic_selection(), words
    )
    assert list(await (await azarr.open_array(fresh, path="b")).get_basic_selection()) == [
        b"x",
        b"",
        b"\x00yz",
    ]
    got = await (await azarr.open_array(fresh, path="v")).get_basic_selection()
    assert [list(x) for x in got] == [[1, 2], [], [3]]
    assert list(await (await azarr.open_array(fresh, path="j")).get_basic_selection()) == [{"a": 1}, [1, "x"]]
    await s.set_basic_selection(1, "replaced")
    assert await s.get_basic_selection(1) == "replaced"
    assert s.nbytes and b.shape == (3,) and v.shape == (3,)


@pytest.mark.parametrize("zarr_format", [2, 3])
async def test_object_elements_are_never_nested_arrays(zarr_format: int) -> None:
    # One element of an object array (an integer selection, a 0-d array) read where no chunk
    # is stored came back as a 0-d array holding the fill value, and a 0-d object array written
    # as a value was kept as the element (no codec encodes it): both as zarr-python 2 does now.
    words = await azarr.create((2, 2), chunks=(1, 1), dtype=str, fill_value="x", zarr_format=zarr_format)
    assert await words.getitem((0, 0)) == "x" and await words.get_orthogonal_selection((1, 1)) == "x"
    assert (await words.getitem(0)).tolist() == ["x", "x"]
    scalar = await azarr.create((), dtype=str, fill_value="x", zarr_format=zarr_format)
    assert (await scalar.getitem(...)).tolist() == "x"
    for value in ("ab", np.array("ab", dtype=object), np.array("ab")):
        await scalar.setitem((), value)
        assert (await scalar.getitem(...)).tolist() == "ab"
        await words.setitem((1, 0), value)
        assert await words.getitem((1, 0)) == "ab"
    if zarr_format == 2:  # a list fill value: v2's JSON object codec
        listed = await azarr.create(
            2, chunks=1, dtype=object, object_codec=numcodecs.JSON(), fill_value=[1, 2]
        )
        assert await listed.getitem(0) == [1, 2]


async def test_structured_dtype_and_fields(store: Store) -> None:
    dt = np.dtype([("a", "<i4"), ("b", "<f8", (2,)), ("c", [("x", "u1"), ("y", "S3")])])
    data = np.zeros(7, dtype=dt)
    data["a"] = np.arange(7)
    data["b"] = np.arange(14).reshape(7, 2)
    data["c"]["y"] = b"hey"
    arr = await azarr.array(data, chunks=3, store=store, fill_value=None)
    back = await (await azarr.open_array(reopen(store))).get_basic_selection()
    assert back.dtype == dt and back.tobytes() == data.tobytes()
    np.testing.assert_array_equal(await arr.get_basic_selection(slice(2, 5), fields="a"), [2, 3, 4])
    await arr.set_basic_selection(slice(0, 2), 9, fields="a")
    np.testing.assert_array_equal(await arr.get_basic_selection(fields="a"), [9, 9, 2, 3, 4, 5, 6])
    np.testing.assert_array_equal((await arr.getitem("b"))[3], [6, 7])


async def test_info_and_properties() -> None:
    arr = await azarr.zeros((100, 100), chunks=(10, 30), dtype="i2", store=MemoryStore(), path="g/z")
    assert (arr.nchunks, arr.cdata_shape, arr.nbytes, arr.name, arr.basename) == (
        40,
        (10, 4),
        20000,
        "/g/z",
        "z",
    )
    assert "Chunk shape : (10, 30)" in arr.info  # labels aligned on the longest present, as zarr-python 2
    await arr.set_basic_selection(slice(0, 10), 1)
    text = await arr.info_complete()
    assert "Chunks initialized : 4/40" in text
    assert await arr.nbytes_stored() > 0


async def test_out_parameter_decodes_into_callers_array() -> None:
    data = np.arange(64, dtype="f4").reshape(8, 8)
    arr = await azarr.array(data, chunks=(8, 8), store=MemoryStore())
    out = np.empty((8, 8), dtype="f4")
    result = await arr.get_basic_selection(..., out=out)
    assert result is out
    np.testing.assert_array_equal(out, data)
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        await arr.get_basic_selection(..., out=np.empty((4, 4), "f4"))


async def test_value_shape_mismatch_names_both_shapes() -> None:
    arr = await azarr.zeros((6, 6), chunks=3, store=MemoryStore())
    with pytest.raises(ValueError, match=r"\(4,\).*\(2, 6\)"):
        await arr.set_basic_selection(slice(0, 2), np.zeros(4))
