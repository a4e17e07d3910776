"""Tests for azarr.indexing: selections -> per-chunk projections.

Property tests emulate chunked storage without a store: the array is split into
full-chunk-shaped blocks (edge blocks padded with junk), the read loop
``out[p.out_selection] = block[p.chunk_selection]`` and the write loop
``block[p.chunk_selection] = value[p.out_selection]`` are run exactly as the array
layer runs them, and the results are compared with NumPy. Writes into chunks
reported complete start from a junk block (no read-modify-write), which checks
``is_complete_chunk``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from azarr.errors import AzarrError
from azarr.indexing import (
    BasicIndexer,
    BlockIndexer,
    BoundsCheckError,
    ChunkProjection,
    CoordinateIndexer,
    MaskIndexer,
    OrthogonalIndexer,
    SelectionError,
    SelectionTypeError,
    SelectionValueError,
    VindexInvalidSelectionError,
    check_fields,
    check_no_multi_fields,
    is_basic_selection,
    is_pure_fancy_indexing,
    is_pure_orthogonal_indexing,
    normalize_integer_selection,
    pop_fields,
)

JUNK = -1  # fills the out-of-bounds part of edge chunks and fresh chunks
UNSET = -2  # fills the output before a read

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------
# chunked-storage emulation


def _grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))


def _region(coords: tuple[int, ...], shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(c * n, min((c + 1) * n, s)) for c, n, s in zip(coords, chunks, shape, strict=True))


def to_blocks(a: np.ndarray, chunks: tuple[int, ...]) -> dict[tuple[int, ...], np.ndarray]:
    blocks = {}
    for coords in np.ndindex(*_grid(a.shape, chunks)):
        region = _region(coords, a.shape, chunks)
        block = np.full(chunks, JUNK, dtype=a.dtype)
        block[tuple(slice(0, r.stop - r.start) for r in region)] = a[region]
        blocks[coords] = block
    return blocks


def from_blocks(
    blocks: dict[tuple[int, ...], np.ndarray], shape: tuple[int, ...], chunks: tuple[int, ...]
) -> np.ndarray:
    a = np.full(shape, UNSET, dtype=np.int64)
    for coords, block in blocks.items():
        region = _region(coords, shape, chunks)
        a[region] = block[tuple(slice(0, r.stop - r.start) for r in region)]
    return a


def read(indexer: Any, blocks: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    out = np.full(indexer.shape, UNSET, dtype=np.int64)
    for p in indexer:
        out[p.out_selection] = blocks[p.chunk_coords][p.chunk_selection]
    return out.reshape(indexer.result_shape)


def write(
    indexer: Any, blocks: dict[tuple[int, ...], np.ndarray], value: np.ndarray, chunks: tuple[int, ...]
) -> None:
    value = np.broadcast_to(value, indexer.result_shape).reshape(indexer.shape)
    for p in indexer:
        if p.is_complete_chunk:
            # a complete write must not depend on the chunk's previous content
            blocks[p.chunk_coords] = np.full(chunks, JUNK, dtype=np.int64)
        blocks[p.chunk_coords][p.chunk_selection] = value[p.out_selection]


def check_projections(indexer: Any, hit: np.ndarray, chunks: tuple[int, ...]) -> None:
    """Each touched chunk appears once, exactly the chunks holding selected elements
    appear, and ``is_complete_chunk`` is right. ``hit`` marks the selected elements."""
    projections = list(indexer)
    assert all(isinstance(p, ChunkProjection) for p in projections)
    coords = [p.chunk_coords for p in projections]
    assert len(coords) == len(set(coords)) == indexer.nchunks == len(indexer)
    expected = {tuple(int(x) for x in row) for row in np.argwhere(hit) // np.asarray(chunks, dtype=np.intp)}
    assert set(coords) == expected
    for p in projections:
        assert p.is_complete_chunk == bool(np.all(hit[_region(p.chunk_coords, hit.shape, chunks)]))
    assert [p.chunk_coords for p in indexer] == coords  # re-iterable, same order


def run_case(
    a: np.ndarray,
    chunks: tuple[int, ...],
    indexer: Any,
    expected: np.ndarray,
    hit: np.ndarray,
    assign: Any,
    data: st.DataObject,
) -> None:
    """Check read, projections and write of one selection against NumPy.

    ``assign(b, value)`` performs NumPy's assignment of ``value`` (shaped like
    ``expected``) into ``b``.
    """
    assert indexer.result_shape == expected.shape
    np.testing.assert_array_equal(read(indexer, to_blocks(a, chunks)), expected)
    check_projections(indexer, hit, chunks)

    value = -1000 - np.arange(int(np.prod(expected.shape)), dtype=np.int64).reshape(expected.shape)
    if data.draw(st.booleans(), label="scalar value") and expected.size:
        value = np.asarray(-7, dtype=np.int64)
    ref = a.copy()
    assign(ref, np.broadcast_to(value, expected.shape))
    blocks = to_blocks(a, chunks)
    write(indexer, blocks, value, chunks)
    np.testing.assert_array_equal(from_blocks(blocks, a.shape, chunks), ref)


# ---------------------------------------------------------------------------
# strategies

MAX_LEN = {0: 1, 1: 40, 2: 12, 3: 7, 4: 5}


@st.composite
def arrays_and_chunks(
    draw: st.DrawFn, min_ndim: int = 0, max_ndim: int = 4
) -> tuple[np.ndarray, tuple[int, ...]]:
    ndim = draw(st.integers(min_ndim, max_ndim), label="ndim")
    shape = tuple(draw(st.integers(0, MAX_LEN[ndim])) for _ in range(ndim))
    chunks = tuple(draw(st.integers(1, s + 2)) for s in shape)
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    return a, chunks


def ints(n: int) -> st.SearchStrategy[int]:
    return st.integers(-n, n - 1)


def slices(n: int, step: bool = True) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-n - 3, n + 3)
    steps = (st.none() | st.integers(-5, 5).filter(bool)) if step else st.none() | st.just(1)
    return st.builds(slice, bound, bound, steps)


def int_arrays(n: int, unique: bool = False) -> st.SearchStrategy[Any]:
    if n == 0:
        return st.just(np.array([], dtype=np.int64))
    values = st.lists(ints(n), max_size=8, unique_by=(lambda i: i % n) if unique else None)
    return values.flatmap(
        lambda v: (
            st.sampled_from([np.array(v, dtype=np.int64), np.array(v, dtype=np.int32), v])
            if v
            else st.just(np.array([], dtype=np.intp))
        )
    )


def bool_arrays(shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    n = int(np.prod(shape))
    return st.lists(st.booleans(), min_size=n, max_size=n).map(
        lambda v: np.array(v, dtype=bool).reshape(shape)
    )


def with_ellipsis(draw: st.DrawFn, items: list[Any]) -> Any:
    """Randomly shorten ``items`` (partial selection) or fold a run into Ellipsis."""
    how = draw(st.sampled_from(["full", "partial", "ellipsis"]))
    if how == "partial":
        items = items[: draw(st.integers(0, len(items)))]
    elif how == "ellipsis":
        i = draw(st.integers(0, len(items)))
        j = draw(st.integers(i, len(items)))
        items = [*items[:i], Ellipsis, *items[j:]]
    if len(items) == 1 and draw(st.booleans()):
        return items[0]
    return tuple(items)


def _full_slices(sel: Any, ndim: int) -> tuple[Any, ...]:
    sel = sel if isinstance(sel, tuple) else (sel,)
    if any(s is Ellipsis for s in sel):
        i = next(k for k, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * (ndim - len(sel) + 1) + sel[i + 1 :]
    return sel + (slice(None),) * (ndim - len(sel))


# ---------------------------------------------------------------------------
# property tests


@SETTINGS
@given(arrays_and_chunks(), st.data())
def test_basic_matches_numpy(ac: tuple[np.ndarray, tuple[int, ...]], data: st.DataObject) -> None:
    a, chunks = ac
    items = [data.draw(slices(n) if n == 0 else st.one_of(ints(n), slices(n))) for n in a.shape]
    sel = with_ellipsis(data.draw, items)
    indexer = BasicIndexer(sel, a.shape, chunks)
    expected = a[sel]
    hit = np.zeros(a.shape, dtype=bool)
    hit[sel] = True
    assert indexer.shape == expected.shape
    full = _full_slices(sel, a.ndim)
    assert indexer.drop_axes == tuple(i for i, s in enumerate(full) if isinstance(s, int))

    def assign(b: np.ndarray, v: np.ndarray) -> None:
        b[sel] = v

    run_case(a, chunks, indexer, expected, hit, assign, data)


def _orth_reference(sel: tuple[Any, ...], shape: tuple[int, ...]) -> tuple[Any, tuple[int, ...]]:
    """np.ix_ equivalent of an orthogonal selection, and the axes dropped by integers."""
    idx = []
    for s, n in zip(sel, shape, strict=True):
        if isinstance(s, int):
            idx.append(np.array([s % n]))
        elif isinstance(s, slice):
            idx.append(np.arange(*s.indices(n)))
        else:
            arr = np.asarray(s)
            idx.append(
                np.flatnonzero(arr) if arr.dtype == bool else np.asarray(arr, dtype=np.intp) % max(n, 1)
            )
    drop = tuple(i for i, s in enumerate(sel) if isinstance(s, int))
    return np.ix_(*idx), drop


@SETTINGS
@given(arrays_and_chunks(), st.data())
def test_orthogonal_matches_numpy(ac: tuple[np.ndarray, tuple[int, ...]], data: st.DataObject) -> None:
    a, chunks = ac
    items = []
    for n in a.shape:
        options = [slices(n), int_arrays(n), bool_arrays((n,))]
        if n:
            options.append(ints(n))
        items.append(data.draw(st.one_of(options)))
    sel = with_ellipsis(data.draw, items)
    indexer = OrthogonalIndexer(sel, a.shape, chunks)
    ix, drop = _orth_reference(_full_slices(sel, a.ndim), a.shape)
    block = a[ix]
    expected = block.reshape(tuple(d for i, d in enumerate(block.shape) if i not in drop))
    hit = np.zeros(a.shape, dtype=bool)
    hit[ix] = True
    assert indexer.shape == expected.shape
    assert indexer.drop_axes == drop

    def assign(b: np.ndarray, v: np.ndarray) -> None:
        b[ix] = v.reshape(block.shape)

    run_case(a, chunks, indexer, expected, hit, assign, data)


@st.composite
def coordinate_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    bshape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    empty = any(n == 0 for n in shape)
    if empty:
        # only empty coordinate arrays are valid on an empty array
        bshape = (*bshape, 0)
    coords: list[Any] = []
    for n in shape:
        if not bshape and draw(st.booleans()):
            coords.append(draw(ints(n)))
            continue
        lead = draw(st.integers(0, len(bshape)))
        ashape = tuple(d if draw(st.booleans()) else 1 for d in bshape[lead:])
        if empty:
            ashape = bshape
        size = int(np.prod(ashape))
        values = draw(st.lists(ints(n), min_size=size, max_size=size)) if n else [0] * size
        arr = np.array(values, dtype=np.int64).reshape(ashape)
        coords.append(arr.tolist() if arr.ndim == 1 and size and draw(st.booleans()) else arr)
    return tuple(coords)


@SETTINGS
@given(arrays_and_chunks(min_ndim=1), st.data())
def test_coordinate_matches_numpy(ac: tuple[np.ndarray, tuple[int, ...]], data: st.DataObject) -> None:
    a, chunks = ac
    sel = data.draw(coordinate_selections(a.shape))
    bshape = np.broadcast_shapes(*(np.shape(s) for s in sel))
    assume(all(n > 0 for n in a.shape) or 0 in bshape)
    indexer = CoordinateIndexer(sel, a.shape, chunks)
    key = tuple(np.asarray(s) for s in sel)
    expected = a[key].reshape(bshape or (1,))  # zarr-python 2: all-scalar coordinates give (1,)
    hit = np.zeros(a.shape, dtype=bool)
    hit[key] = True
    assert indexer.shape == (expected.size,)
    assert indexer.drop_axes == ()

    def assign(b: np.ndarray, v: np.ndarray) -> None:
        b[key] = v.reshape(bshape)

    run_case(a, chunks, indexer, expected, hit, assign, data)


@SETTINGS
@given(arrays_and_chunks(), st.data())
def test_mask_matches_numpy(ac: tuple[np.ndarray, tuple[int, ...]], data: st.DataObject) -> None:
    a, chunks = ac
    mask = data.draw(
        bool_arrays(a.shape) | st.sampled_from([np.ones(a.shape, bool), np.zeros(a.shape, bool)])
    )
    indexer = MaskIndexer(mask, a.shape, chunks)
    expected = a[mask]
    assert indexer.shape == indexer.result_shape == expected.shape

    def assign(b: np.ndarray, v: np.ndarray) -> None:
        b[mask] = v

    run_case(a, chunks, indexer, expected, mask.copy(), assign, data)


@SETTINGS
@given(arrays_and_chunks(), st.data())
def test_block_matches_numpy(ac: tuple[np.ndarray, tuple[int, ...]], data: st.DataObject) -> None:
    a, chunks = ac
    grid = _grid(a.shape, chunks)
    items = [
        data.draw(slices(nb, step=False) if nb == 0 else st.one_of(ints(nb), slices(nb, step=False)))
        for nb in grid
    ]
    sel = with_ellipsis(data.draw, items)
    indexer = BlockIndexer(sel, a.shape, chunks)
    region = []
    for s, nb, c in zip(_full_slices(sel, a.ndim), grid, chunks, strict=True):
        if isinstance(s, int):
            b = s % nb
            region.append(slice(b * c, (b + 1) * c))
        else:
            start, stop, _ = s.indices(nb)
            region.append(slice(start * c, max(start, stop) * c))
    expected = a[tuple(region)]
    hit = np.zeros(a.shape, dtype=bool)
    hit[tuple(region)] = True
    assert indexer.shape == expected.shape
    assert all(p.is_complete_chunk for p in indexer)

    def assign(b: np.ndarray, v: np.ndarray) -> None:
        b[tuple(region)] = v

    run_case(a, chunks, indexer, expected, hit, assign, data)


# ---------------------------------------------------------------------------
# explicit behaviour


def test_projection_layout_basic_int_dims_are_dropped() -> None:
    ix = BasicIndexer((3, slice(None)), (10, 4), (4, 3))
    assert ix.shape == ix.result_shape == (4,)
    assert ix.drop_axes == (0,)
    assert list(ix) == [
        ChunkProjection((0, 0), (3, slice(0, 3, 1)), (slice(0, 3),), False),
        ChunkProjection((0, 1), (3, slice(0, 1, 1)), (slice(3, 4),), False),
    ]


def test_negative_step_slices() -> None:
    a = np.arange(23)
    for step in (-1, -2, -3, -5, -9, -30):
        for start in (None, 22, 10, 0, -1, -30):
            for stop in (None, 0, 5, -23, -30):
                sel = slice(start, stop, step)
                ix = BasicIndexer(sel, (23,), (4,))
                np.testing.assert_array_equal(read(ix, to_blocks(a, (4,))), a[sel])


def test_complete_chunks() -> None:
    # full slices cover every chunk, including the short edge chunk
    assert all(p.is_complete_chunk for p in BasicIndexer(..., (10, 7), (4, 3)))
    assert all(p.is_complete_chunk for p in BasicIndexer(slice(None, None, -1), (10,), (4,)))
    partial = {p.chunk_coords: p.is_complete_chunk for p in BasicIndexer(slice(1, 10), (10,), (4,))}
    assert partial == {(0,): False, (1,): True, (2,): True}
    # an int on a dimension of chunk length 1 covers the chunk
    assert all(p.is_complete_chunk for p in BasicIndexer((2, slice(None)), (5, 6), (1, 6)))
    # duplicates do not make a chunk complete; all distinct indices do
    dup = OrthogonalIndexer(np.array([0, 0, 1, 1]), (8,), (4,))
    assert [p.is_complete_chunk for p in dup] == [False]
    full = OrthogonalIndexer(np.array([3, 2, 1, 0, 0]), (8,), (4,))
    assert [p.is_complete_chunk for p in full] == [True]
    assert [p.is_complete_chunk for p in MaskIndexer(np.ones((3, 3), bool), (3, 3), (2, 2))] == [True] * 4
    coords = CoordinateIndexer((np.array([0, 1, 0, 1, 1]), np.array([0, 0, 1, 1, 1])), (3, 3), (2, 2))
    assert [p.is_complete_chunk for p in coords] == [True]
    dups = CoordinateIndexer((np.array([0, 0, 1, 1]), np.array([0, 1, 0, 0])), (3, 3), (2, 2))
    assert [p.is_complete_chunk for p in dups] == [False]
    # chunks far larger than the array: only the in-bounds part must be covered
    huge = CoordinateIndexer(([1, 0, 0], [0, 0, 0]), (2, 1), (2**40, 2**40))
    assert [p.is_complete_chunk for p in huge] == [True]


def test_zero_dimensional() -> None:
    a = np.array(42)
    for sel in ((), ...):
        ix = BasicIndexer(sel, (), ())
        assert ix.shape == () and ix.nchunks == 1
        assert list(ix) == [ChunkProjection((), (), (), True)]
        assert read(ix, to_blocks(a, ())) == 42
    for sel in (0, slice(None), (0,)):
        with pytest.raises(SelectionError, match="too many indices"):
            BasicIndexer(sel, (), ())
    assert read(MaskIndexer(np.array(True), (), ()), to_blocks(a, ())).tolist() == [42]
    assert MaskIndexer(np.array(False), (), ()).nchunks == 0
    with pytest.raises(VindexInvalidSelectionError):
        CoordinateIndexer((), (), ())


def test_zero_length_dimensions() -> None:
    for ix in (
        BasicIndexer(..., (0, 5), (3, 2)),
        OrthogonalIndexer(([], slice(None)), (0, 5), (3, 2)),
        BlockIndexer(..., (0, 5), (3, 2)),
    ):
        assert ix.shape == (0, 5)
        assert ix.nchunks == 0 and list(ix) == []
    ix = CoordinateIndexer((np.zeros(0, np.intp), np.zeros(0, np.intp)), (0, 5), (3, 2))
    assert ix.shape == (0,) and ix.result_shape == (0,) and list(ix) == []


def test_orthogonal_forms() -> None:
    a = np.arange(6 * 7 * 8).reshape(6, 7, 8)
    blocks = to_blocks(a, (4, 3, 5))
    rows, cols = np.array([5, 0, 3, 3]), np.array([6, -1, 2])
    for sel, ref in [
        ((rows, slice(None), 2), a[rows][:, :, 2]),  # int apart from the array: meshed
        ((1, rows, slice(None)), a[1][rows]),  # int next to the array: native form
        ((slice(None), 1, cols), a[:, 1][:, cols]),
        ((rows, cols, slice(2, 7, 2)), a[np.ix_(rows, cols % 7, np.arange(2, 7, 2))]),  # two arrays
        ((2, slice(None, None, -2), cols), a[2][::-2][:, cols]),
    ]:
        ix = OrthogonalIndexer(sel, a.shape, (4, 3, 5))
        np.testing.assert_array_equal(read(ix, blocks), ref)


def test_orthogonal_native_form_has_no_mesh() -> None:
    # the benchmark shape: scattered rows, all columns -> native (array, slice) selections
    rows = np.array([901, 5, 399, 6])
    ix = OrthogonalIndexer((rows, slice(None)), (1000, 100), (10, 10))
    p = next(iter(ix))
    assert p.chunk_selection[0].ndim == 1 and isinstance(p.chunk_selection[1], slice)
    assert ix.nchunks == 3 * 10


def test_inputs_are_not_modified() -> None:
    # zarr-python 2 wraps negative indices in place
    arr = np.array([-1, -2, 3])
    OrthogonalIndexer(arr, (10,), (3,))
    coords = (np.array([-1, 0]), np.array([-3, -4]))
    CoordinateIndexer(coords, (5, 5), (2, 2))
    assert arr.tolist() == [-1, -2, 3]
    assert coords[0].tolist() == [-1, 0] and coords[1].tolist() == [-3, -4]


def test_unsigned_and_numpy_integer_indices() -> None:
    a = np.arange(20)
    blocks = to_blocks(a, (6,))
    ix = OrthogonalIndexer(np.array([19, 0, 7], dtype=np.uint8), (20,), (6,))
    assert read(ix, blocks).tolist() == [19, 0, 7]
    assert read(BasicIndexer(np.int16(-1), (20,), (6,)), blocks) == 19
    assert read(BasicIndexer(np.array(3), (20,), (6,)), blocks) == 3
    assert read(BlockIndexer(np.int64(-1), (20,), (6,)), blocks).tolist() == [18, 19]


def test_large_chunk_grid_and_big_steps() -> None:
    # a step larger than the chunk walks the selected elements, not every chunk in between
    ix = BasicIndexer(slice(None, None, 10**9), (10**12,), (1,))
    assert ix.shape == (1000,) and ix.nchunks == 1000
    # coordinates on a grid too large to ravel into one intp key
    shape = (2**62, 2**62, 2**62)
    coords = (np.array([5, 2**61, 5]), np.array([0, 1, 0]), np.array([7, 7, 7]))
    ix2 = CoordinateIndexer(coords, shape, (1, 1, 1))
    assert sorted(p.chunk_coords for p in ix2) == [(5, 0, 7), (2**61, 1, 7)]


def test_block_selection_shapes() -> None:
    a = np.arange(20).reshape(4, 5)
    blocks = to_blocks(a, (2, 2))
    assert read(BlockIndexer(-1, a.shape, (2, 2)), blocks).tolist() == a[2:4].tolist()
    assert read(BlockIndexer((1, 2), a.shape, (2, 2)), blocks).tolist() == [[14], [19]]
    assert BlockIndexer(slice(1, 10), a.shape, (2, 2)).shape == (2, 5)  # stop clipped
    assert BlockIndexer(slice(1, 1), a.shape, (2, 2)).shape == (0, 5)
    assert BlockIndexer(slice(5, None), a.shape, (2, 2)).shape == (0, 5)  # zarr-python 2 raises


# ---------------------------------------------------------------------------
# errors


@pytest.mark.parametrize(
    ("make", "exc", "match"),
    [
        (
            lambda: BasicIndexer((0, 10), (4, 5), (2, 2)),
            BoundsCheckError,
            "index 10 is out of bounds for axis 1 with size 5",
        ),
        (
            lambda: BasicIndexer(-5, (4, 5), (2, 2)),
            BoundsCheckError,
            "index -5 is out of bounds for axis 0 with size 4",
        ),
        (lambda: BasicIndexer((0, 0, 0), (4, 5), (2, 2)), SelectionError, "too many indices"),
        (lambda: BasicIndexer((..., 0, ...), (4, 5), (2, 2)), SelectionError, "single ellipsis"),
        (lambda: BasicIndexer(1.5, (4, 5), (2, 2)), SelectionTypeError, "axis 0.*float"),
        (lambda: BasicIndexer((0, None), (4, 5), (2, 2)), SelectionTypeError, "axis 1.*None"),
        (lambda: BasicIndexer(np.array([1]), (4, 5), (2, 2)), SelectionTypeError, "axis 0"),
        (lambda: BasicIndexer(slice(0.5, 2), (4, 5), (2, 2)), SelectionTypeError, "axis 0"),
        (
            lambda: BasicIndexer((0, slice(None, None, 0)), (4, 5), (2, 2)),
            SelectionValueError,
            "axis 1.*zero",
        ),
        (
            lambda: OrthogonalIndexer(([0, 4], 0), (4, 5), (2, 2)),
            BoundsCheckError,
            "index 4 is out of bounds for axis 0",
        ),
        (
            lambda: OrthogonalIndexer((0, [-6]), (4, 5), (2, 2)),
            BoundsCheckError,
            "index -6 .* axis 1 with size 5",
        ),
        (
            lambda: OrthogonalIndexer(np.array([True, False]), (4, 5), (2, 2)),
            SelectionValueError,
            "wrong length for axis 0: expected 4, got 2",
        ),
        (
            lambda: OrthogonalIndexer(np.array([[0]]), (4, 5), (2, 2)),
            SelectionValueError,
            "1-dimensional.*axis 0",
        ),
        (
            lambda: OrthogonalIndexer((0, np.array([1.0])), (4, 5), (2, 2)),
            SelectionTypeError,
            "integer or Boolean.*axis 1",
        ),
        (lambda: OrthogonalIndexer((0, 0, 0), (4, 5), (2, 2)), SelectionError, "too many indices"),
        (lambda: OrthogonalIndexer(("a",), (4, 5), (2, 2)), SelectionTypeError, "axis 0"),
        (
            lambda: CoordinateIndexer(([0, 1],), (4, 5), (2, 2)),
            VindexInvalidSelectionError,
            "one integer array per dimension",
        ),
        (
            lambda: CoordinateIndexer(([0], slice(None)), (4, 5), (2, 2)),
            VindexInvalidSelectionError,
            "coordinate",
        ),
        (lambda: CoordinateIndexer(([0.5], [1]), (4, 5), (2, 2)), VindexInvalidSelectionError, "coordinate"),
        (lambda: CoordinateIndexer(([0, 1, 2], [0, 1]), (4, 5), (2, 2)), SelectionValueError, "broadcast"),
        (
            lambda: CoordinateIndexer(([0, 1], [0, 5]), (4, 5), (2, 2)),
            BoundsCheckError,
            "index 5 is out of bounds for axis 1 with size 5",
        ),
        (
            lambda: MaskIndexer(np.zeros((3, 5), bool), (4, 5), (2, 2)),
            SelectionValueError,
            r"expected \(4, 5\).*got \(3, 5\)",
        ),
        (lambda: MaskIndexer(np.zeros((4, 5), int), (4, 5), (2, 2)), VindexInvalidSelectionError, "Boolean"),
        (
            lambda: MaskIndexer((np.zeros((4, 5), bool), 0), (4, 5), (2, 2)),
            VindexInvalidSelectionError,
            "Boolean",
        ),
        (
            lambda: BlockIndexer(slice(None, None, 2), (4, 5), (2, 2)),
            SelectionError,
            "step 1.*step 2 for axis 0",
        ),
        (
            lambda: BlockIndexer((0, 3), (4, 5), (2, 2)),
            BoundsCheckError,
            "block index 3 is out of bounds for axis 1 with 3 blocks",
        ),
        (lambda: BlockIndexer(-3, (4, 5), (2, 2)), BoundsCheckError, "block index -3"),
        (lambda: BlockIndexer([0], (4, 5), (2, 2)), SelectionTypeError, "axis 0"),
        (lambda: BlockIndexer(0.0, (4, 5), (2, 2)), SelectionTypeError, "axis 0"),
    ],
)
def test_selection_errors(make: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        make()
    # every selection error is an IndexError (zarr-python 2, NumPy) and an AzarrError
    assert isinstance(info.value, IndexError) and isinstance(info.value, AzarrError)


def test_error_classes_catchable_as_builtins() -> None:
    with pytest.raises(TypeError):
        BasicIndexer(1.5, (4,), (2,))
    with pytest.raises(ValueError):
        MaskIndexer(np.zeros(3, bool), (4,), (2,))
    with pytest.raises(ValueError):
        BasicIndexer(slice(None, None, 0), (4,), (2,))


def test_invalid_shape_or_chunks() -> None:
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        BasicIndexer(..., (4, 5), (2,))
    with pytest.raises(ValueError, match="at least 1"):
        BasicIndexer(..., (4,), (0,))
    with pytest.raises(ValueError, match="non-negative"):
        BasicIndexer(..., (-1,), (1,))


def test_normalize_integer_selection() -> None:
    assert normalize_integer_selection(1, 100) == 1
    assert normalize_integer_selection(-1, 100) == 99
    assert normalize_integer_selection(np.int8(-100), 100) == 0
    for bad in (100, -101, 1000):
        with pytest.raises(BoundsCheckError, match="axis 3"):
            normalize_integer_selection(bad, 100, axis=3)
    with pytest.raises(SelectionTypeError):
        normalize_integer_selection(1.0, 100)


# ---------------------------------------------------------------------------
# routing helpers (expected values checked against zarr-python 2.18)

ROUTING = [
    # (selection after pop_fields, ndim, is_pure_fancy_indexing, is_pure_orthogonal_indexing)
    (1, 1, False, False),
    (slice(None), 1, False, False),
    ([1, 2], 1, True, True),
    (np.array([1, 2]), 1, True, True),
    (np.array([True, False]), 1, False, False),
    ([True, False], 1, True, True),
    ([], 1, False, False),
    (([1, 2],), 1, True, True),
    (np.array([[1]]), 1, True, False),
    ((1, 2), 2, False, True),
    (([1, 2], 3), 2, True, True),
    (([1], [2]), 2, True, False),
    (([1, 2], slice(None)), 2, False, True),
    ((np.array([1]), slice(None)), 2, False, True),
    ([1, 2], 2, False, True),
    (np.array([1, 2]), 2, False, True),
    (np.array([[1, 2]]), 2, False, False),
    # zarr 2.18 says (False, False) and then raises; azarr routes it as ([1], slice(None))
    (([1], Ellipsis), 2, False, True),
    ((Ellipsis, np.array([1])), 3, False, True),
    ((Ellipsis, 1), 2, False, False),  # no list: a basic selection, as in 2.18
    ((Ellipsis, Ellipsis, [1]), 3, False, False),
    ((Ellipsis, np.array([True])), 2, False, False),  # Boolean arrays are not int arrays in 2.18
    ((np.array([1]), np.array([1]), slice(None)), 3, False, False),
    ((1, [0], slice(None)), 3, False, True),
    (np.ones((2, 2), bool), 2, False, False),
    ((), 0, False, False),
    ([1], 0, False, False),
    (np.int64(1), 1, False, False),
    (np.array(1), 1, True, False),
]


@pytest.mark.parametrize(("sel", "ndim", "fancy", "orth"), ROUTING)
def test_routing_matches_zarr_2_18(sel: Any, ndim: int, fancy: bool, orth: bool) -> None:
    assert is_pure_fancy_indexing(sel, ndim) is fancy
    assert is_pure_orthogonal_indexing(sel, ndim) is orth


def test_routing_accepts_numpy_integer_scalars() -> None:
    # zarr-python 2.18 accepts only Python ints beside the array here (and then fails)
    assert is_pure_orthogonal_indexing((np.int64(1), [0], slice(None)), 3)


def test_is_basic_selection() -> None:
    assert is_basic_selection((1, slice(None, None, -1), ...))
    assert is_basic_selection(np.int32(3))
    assert not is_basic_selection(([1], slice(None)))
    assert not is_basic_selection((None,))


# ---------------------------------------------------------------------------
# fields

STRUCT = np.dtype([("x", "<i4"), ("y", "<f8"), ("z", "<i2", (2,))])


def test_pop_fields() -> None:
    assert pop_fields("x") == ("x", ())
    assert pop_fields(slice(1)) == (None, slice(1))
    assert pop_fields((slice(1), "x")) == ("x", slice(1))
    assert pop_fields(("x", "y", 0, slice(2))) == (["x", "y"], (0, slice(2)))
    assert pop_fields((0, 1)) == ([], (0, 1))


def test_check_fields() -> None:
    assert check_fields(None, STRUCT) == STRUCT
    assert check_fields([], STRUCT) == STRUCT
    assert check_fields("x", STRUCT) == np.dtype("<i4")
    assert check_fields("z", STRUCT) == np.dtype(("<i2", (2,)))
    assert check_fields(["y", "x"], STRUCT) == np.dtype([("y", "<f8"), ("x", "<i4")])
    with pytest.raises(SelectionError, match="no field 'w'"):
        check_fields(["x", "w"], STRUCT)
    with pytest.raises(SelectionError, match="has no fields"):
        check_fields("x", np.dtype("f8"))
    with pytest.raises(SelectionTypeError):
        check_fields(3, STRUCT)  # type: ignore[arg-type]


def test_check_no_multi_fields() -> None:
    assert check_no_multi_fields(None) is None
    assert check_no_multi_fields("x") == "x"
    assert check_no_multi_fields(["x"]) == "x"
    assert check_no_multi_fields([]) is None
    with pytest.raises(SelectionError, match="multiple fields"):
        check_no_multi_fields(["x", "y"])


def test_field_read_through_projections() -> None:
    # the array layer applies fields to the decoded chunk: chunk[field][chunk_selection]
    a = np.zeros((5, 3), dtype=STRUCT)
    a["x"] = np.arange(15).reshape(5, 3)
    fields, sel = pop_fields((slice(1, 4), "x"))
    ix = BasicIndexer(sel, a.shape, (2, 2))
    out = np.empty(ix.shape, dtype=check_fields(fields, a.dtype))
    for p in ix:
        region = _region(p.chunk_coords, a.shape, (2, 2))
        chunk = np.zeros((2, 2), dtype=STRUCT)
        chunk[tuple(slice(0, r.stop - r.start) for r in region)] = a[region]
        out[p.out_selection] = chunk[fields][p.chunk_selection]
    np.testing.assert_array_equal(out, a["x"][1:4])


def test_duplicate_writes_are_last_wins() -> None:
    a = np.zeros(10, dtype=np.int64)
    ix = OrthogonalIndexer(np.array([7, 2, 7, 2, 9]), a.shape, (3,))
    blocks = to_blocks(a, (3,))
    write(ix, blocks, np.array([1, 2, 3, 4, 5]), (3,))
    ref = a.copy()
    ref[[7, 2, 7, 2, 9]] = [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(from_blocks(blocks, a.shape, (3,)), ref)
    assert ref[[2, 7, 9]].tolist() == [4, 3, 5]
