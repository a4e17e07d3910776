"""Every selection kind end to end through ``AsyncArray``, against NumPy.

Property tests draw an array (Zarr v2, Zarr v3, or Zarr v3 sharded with 1-3 inner
chunks a side and the index at either end; 0-d to 4-d, zero-length dimensions, edge
chunks and shards, C/F order, compressed or not, either key separator and (v3) either
chunk key encoding, with or without
``write_empty_chunks``, some chunks never written; every fixed-size NumPy kind, and
variable-length strings) and a selection of one
kind (basic, orthogonal, coordinate, mask, block). They check that each way of
reading it -- the explicit ``get_*_selection`` method, the ``oindex`` /
``vindex`` / ``blocks`` accessor, and ``getitem`` where zarr-python 2's
``z[...]`` routes that selection to the same kind -- returns NumPy's result, and
that each way of writing it leaves the array equal to NumPy's after the same
assignment (duplicate indices: last wins).

They run on a MemoryStore with many examples and on the SeaweedFS S3 server
with a few (marked ``s3``). Each test runs its examples on one event loop
(``asyncio.Runner``), so the S3 store opens its session once per test.

The rest pins down ``fields=``, ``out=``, value broadcasting, error messages,
request counts (only touched chunks, each once; only touched shards, at most their index
and one coalesced run each) and the concurrency of a
1,000-chunk coordinate read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
import os
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as npst

import azarr
from azarr.core.array import AsyncArray
from azarr.scheduler import set_budget
from azarr.storage import ByteRange, Generation, MemoryStore, S3Store, Store
from tests.util import RecordingStore, cancel_read_part_way

T = TypeVar("T")

# Examples per property test; AZARR_SELECTION_EXAMPLES scales the MemoryStore runs up for soak
# runs (and the S3 runs with them). The defaults keep this file near 60 s of CI's 25 minutes
# (300 and 50 cost ~96 s on a quiet host, the largest file of the default run).
MEMORY_EXAMPLES = int(os.environ.get("AZARR_SELECTION_EXAMPLES", "200"))
S3_EXAMPLES = max(10, MEMORY_EXAMPLES * 35 // 200)

KINDS = ("basic", "orthogonal", "coordinate", "mask", "block")


def property_settings(examples: int) -> settings:
    """Hypothesis settings of the property tests built on this module's arrays."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,  # nothing written into the work tree
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )


# ---------------------------------------------------------------------------
# backends: one event loop per test, fresh array locations per example


@dataclass
class Backend:
    """Where a property test's arrays live, and the loop its coroutines run on."""

    name: str
    runner: asyncio.Runner
    new_location: Callable[[int], tuple[Store, str]]  # for an array of this Zarr format
    examples: int
    max_cells: int  # cap on elements per drawn array
    max_chunks: int  # cap on chunks per drawn array

    def run(self, coro: Awaitable[T]) -> T:
        return self.runner.run(coro)  # type: ignore[arg-type]

    def settings(self, examples: int | None = None) -> settings:
        return property_settings(examples or self.examples)


@pytest.fixture(params=["memory", pytest.param("s3", marks=pytest.mark.s3)])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    runner = asyncio.Runner()
    counter = itertools.count()
    if request.param == "memory":
        try:
            yield Backend(
                "memory",
                runner,
                lambda zarr_format: (MemoryStore(), "a"),
                MEMORY_EXAMPLES,
                max_cells=600,
                max_chunks=150,
            )
        finally:
            runner.close()
        return
    server = request.getfixturevalue("seaweedfs")
    bucket = server.create_bucket()
    # One prefix per format: a hierarchy holds one format (the v2 arrays' root group is v2).
    stores = {f: S3Store(f"{bucket}/selection-v{f}", storage_options=server.storage_options) for f in (2, 3)}
    try:
        yield Backend(
            "s3",
            runner,
            lambda zarr_format: (stores[zarr_format], f"case-{next(counter)}"),
            S3_EXAMPLES,
            max_cells=300,
            max_chunks=40,
        )
    finally:
        for store in stores.values():
            runner.run(store.close())
        runner.close()


# ---------------------------------------------------------------------------
# arrays


@dataclass(frozen=True)
class Spec:
    """An array to create, and which part of it holds data (the rest stays fill_value)."""

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype[Any]
    order: str
    compressor: Any
    fill_value: Any
    written: Any  # basic selection written with data, or None for nothing
    layout: str = "v2"  # "v2", "v3" or "sharded" (Zarr v3 with sharding_indexed)
    shards: tuple[int, ...] | None = None  # shard shape ("sharded"): a multiple of chunks
    index_location: str = "end"  # of each shard's index ("sharded")
    separator: str = "."  # chunk key separator (v2's dimension_separator, v3's encoding)
    key_encoding: str = "default"  # Zarr v3's chunk key encoding: "default" (c/0/0) or "v2" (0.0)
    write_empty_chunks: bool = True
    vlen: bool = False  # variable-length strings (dtype=str: object elements, VLenUTF8 / vlen-utf8)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def zarr_format(self) -> int:
        return 2 if self.layout == "v2" else 3

    @property
    def stored_dtype(self) -> np.dtype[Any]:
        """The dtype azarr reads back: Zarr v3 data types have no byte order (the ``bytes``
        codec's ``endian`` is the stored one), so v3 arrays read in native order."""
        if self.vlen:
            return np.dtype(object)
        if self.zarr_format == 2:
            return self.dtype
        if self.dtype.names:
            return np.dtype([(n, self.dtype[n].newbyteorder("=")) for n in self.dtype.names])
        return self.dtype.newbyteorder("=")

    def data(self) -> np.ndarray:
        """Distinct, non-fill values for every element."""
        n = math.prod(self.shape)
        dtype = self.stored_dtype
        if dtype.names:
            data = np.zeros(self.shape, dtype=dtype)
            flat = np.arange(1, n + 1).reshape(self.shape)
            data["a"] = flat
            data["b"] = flat * 0.5
            data["c"] = np.stack([flat, -flat], axis=-1) if self.dtype["c"].shape else -flat
            return data
        numbers = (np.arange(1, n + 1) % 30000 + 100).reshape(self.shape)
        return numbers.astype(str).astype(object) if self.vlen else numbers.astype(dtype)

    def model(self) -> np.ndarray:
        """What the array holds after `make_array` (NumPy's copy)."""
        dtype = self.stored_dtype
        if self.vlen:
            model = np.full(self.shape, self.fill_value, dtype=object)
        elif dtype.names or self.fill_value is None:
            model = np.zeros(self.shape, dtype=dtype)  # azarr reads fill_value=None as zeros
        else:
            model = np.full(self.shape, self.fill_value, dtype=dtype)
        if self.written is not None:
            model[self.written] = self.data()[self.written]
        return model


SIDES = {0: 1, 1: 40, 2: 14, 3: 7, 4: 5}
#: The formats each array is drawn in: every selection kind reaches the v2 pipeline, the v3
#: one (transpose + bytes + compressors) and the sharded one (inner chunks grouped by
#: shard: whole-shard reads, coalesced runs, partial-shard read-modify-writes, edge shards).
LAYOUTS = ("v2", "v3", "sharded")
#: Every fixed-size NumPy kind both formats store, some big-endian.
PLAIN_DTYPES = [
    np.dtype(t) for t in ("<i4", ">f8", "<u2", "|b1", "|i1", "<u8", "<f2", ">c8", "<c16", "<M8[s]", ">m8[ms]")
]
STRUCTURED = np.dtype([("a", "<i4"), ("b", ">f8"), ("c", "<i2", (2,))])
#: Zarr v3's ``struct`` data type has no subarray fields.
STRUCTURED_V3 = np.dtype([("a", "<i4"), ("b", ">f8"), ("c", "<i2")])


@st.composite
def specs(
    draw: st.DrawFn,
    *,
    max_cells: int,
    max_chunks: int,
    min_ndim: int = 0,
    max_ndim: int = 4,
    structured: bool = False,
    layouts: tuple[str, ...] = LAYOUTS,
    dtypes: list[np.dtype[Any]] = PLAIN_DTYPES,
) -> Spec:
    layout = draw(st.sampled_from(layouts), label="layout")
    ndim = draw(st.integers(min_ndim, max_ndim), label="ndim")
    side = SIDES[ndim]
    shape = tuple(draw(st.lists(st.integers(0, side), min_size=ndim, max_size=ndim), label="shape"))
    if math.prod(shape) > max_cells:
        shape = tuple(min(s, max(1, int(max_cells ** (1 / ndim)))) for s in shape)
    # chunks up to two longer than the dimension: edge chunks and chunks past the end
    chunks = tuple(draw(st.integers(1, max(s, 1) + 2), label=f"chunk{i}") for i, s in enumerate(shape))
    while math.prod(-(-s // c) for s, c in zip(shape, chunks, strict=True)) > max_chunks:
        i = max(range(ndim), key=lambda d: -(-shape[d] // chunks[d]))
        chunks = (*chunks[:i], chunks[i] * 2, *chunks[i + 1 :])
    if structured:
        dtype = STRUCTURED if layout == "v2" else STRUCTURED_V3
    else:
        dtype = draw(st.sampled_from(dtypes), label="dtype")
    if structured:
        fill_value = None
    else:
        choices: list[Any] = [0, 7, None] + ([-1] if dtype.kind not in "ub" else [])
        fill_value = draw(st.sampled_from(choices), label="fill_value")
    written = draw(
        st.one_of(
            st.just(Ellipsis),
            st.none(),
            npst.basic_indices(shape, allow_ellipsis=True, allow_newaxis=False),
        ),
        label="written",
    )
    shards = None
    if layout == "sharded":
        # 1-3 inner chunks a side: shards holding one inner chunk, several, and (with edge
        # chunks) shards reaching past the array's end.
        shards = tuple(c * draw(st.integers(1, 3), label=f"shard{i}") for i, c in enumerate(chunks))
    return Spec(
        shape=shape,
        chunks=chunks,
        dtype=dtype,
        order=draw(st.sampled_from("CF"), label="order"),
        compressor=draw(st.sampled_from([None, "default", numcodecs.Zlib(level=1)]), label="compressor"),
        fill_value=fill_value,
        written=written,
        layout=layout,
        shards=shards,
        index_location=draw(st.sampled_from(["end", "start"]), label="index_location"),
        separator=draw(st.sampled_from("./"), label="separator"),
        key_encoding=draw(st.sampled_from(["default", "v2"]), label="chunk key encoding"),
        write_empty_chunks=draw(st.booleans(), label="write_empty_chunks"),
    )


async def make_array(spec: Spec, store: Store, path: str) -> AsyncArray:
    v3: dict[str, Any] = {}
    if spec.zarr_format == 3:
        v3["zarr_format"] = 3
        v3["chunk_key_encoding"] = {"name": spec.key_encoding, "separator": spec.separator}
    if spec.shards is not None:
        v3["shards"] = {"shape": spec.shards, "index_location": spec.index_location}
    arr = await azarr.create(
        spec.shape,
        chunks=spec.chunks,
        dtype=str if spec.vlen else spec.dtype,
        order=spec.order,
        compressor=spec.compressor,
        fill_value=spec.fill_value,
        store=store,
        path=path,
        overwrite=True,
        dimension_separator=spec.separator,
        write_empty_chunks=spec.write_empty_chunks,
        **v3,
    )
    if spec.written is not None:
        await arr.set_basic_selection(spec.written, spec.data()[spec.written])
    return arr


async def read_all(arr: AsyncArray) -> np.ndarray:
    return np.asarray(await arr.get_basic_selection(...))


def assert_same(got: Any, expected: Any, what: str) -> None:
    if np.asarray(expected).dtype == object:  # vlen strings: elements (a scalar is a str)
        got_o, exp_o = np.asarray(got, dtype=object), np.asarray(expected, dtype=object)
        assert got_o.shape == exp_o.shape, f"{what}: shape {got_o.shape} != NumPy's {exp_o.shape}"
        assert got_o.tolist() == exp_o.tolist(), f"{what}: {got_o!r} != NumPy's {exp_o!r}"
        return
    got_a, exp_a = np.asarray(got), np.asarray(expected)
    assert got_a.shape == exp_a.shape, f"{what}: shape {got_a.shape} != NumPy's {exp_a.shape}"
    if exp_a.dtype.names:
        # NumPy's multi-field views keep the parent's offsets; azarr returns packed fields
        assert got_a.dtype.names == exp_a.dtype.names, what
        for name in exp_a.dtype.names:
            assert got_a.dtype[name] == exp_a.dtype[name], f"{what}: field {name}"
    elif exp_a.ndim:
        assert got_a.dtype == exp_a.dtype, f"{what}: dtype {got_a.dtype} != NumPy's {exp_a.dtype}"
    else:  # NumPy scalars are always native-endian
        assert got_a.dtype.newbyteorder("=") == exp_a.dtype.newbyteorder("="), what
    if exp_a.dtype.names:
        for name in exp_a.dtype.names:
            np.testing.assert_array_equal(got_a[name], exp_a[name], err_msg=f"{what}: field {name}")
    else:
        np.testing.assert_array_equal(got_a, exp_a, err_msg=what)


# ---------------------------------------------------------------------------
# selections of each kind, and NumPy's meaning of them


def _slices(n: int) -> st.SearchStrategy[slice]:
    bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
    step = st.one_of(st.none(), st.integers(-6, 6).filter(bool), st.integers(-(n + 3), n + 3).filter(bool))
    return st.builds(slice, bound, bound, step)


def _ints(n: int) -> st.SearchStrategy[int]:
    return st.integers(-n, n - 1)


def _index_arrays(n: int, max_size: int = 8) -> st.SearchStrategy[Any]:
    """1-D integer indices: negative, unsorted, duplicated, empty; as arrays or lists."""
    if n == 0:
        return st.sampled_from([np.array([], dtype=np.intp), []])
    elements = st.lists(_ints(n), min_size=0, max_size=max_size)
    return st.one_of(
        elements.map(lambda v: np.array(v, dtype=np.int64)),
        elements.filter(bool),  # a list (non-empty: zarr-python 2 routes only those as int lists)
        st.lists(st.integers(0, n - 1), unique=True, max_size=max_size).map(
            lambda v: np.array(sorted(v), dtype=np.uint32)
        ),
    )


def _bool_arrays(n: int) -> st.SearchStrategy[np.ndarray]:
    return npst.arrays(np.bool_, (n,))


@st.composite
def basic_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    if draw(st.booleans(), label="hypothesis basic_indices"):
        return draw(npst.basic_indices(shape, allow_ellipsis=True, allow_newaxis=False))
    items: list[Any] = []
    for n in shape:
        choices = [_slices(n)] + ([_ints(n)] if n else [])
        items.append(draw(st.one_of(*choices)))
    return _shorten(draw, items)


def _shorten(draw: st.DrawFn, items: list[Any]) -> Any:
    """Sometimes drop trailing full slices or fold them into an Ellipsis; 1 item may go bare."""
    trailing = 0
    while trailing < len(items) and _is_full(items[len(items) - 1 - trailing]):
        trailing += 1
    how = draw(st.sampled_from(["tuple", "drop", "ellipsis"]), label="shape of selection")
    if trailing and how == "drop":
        items = items[: len(items) - trailing]
    elif trailing and how == "ellipsis":
        items = [*items[: len(items) - trailing], Ellipsis]
    if len(items) == 1 and draw(st.booleans(), label="bare item"):
        return items[0]
    return tuple(items)


def _is_full(s: Any) -> bool:
    return isinstance(s, slice) and s == slice(None)


@st.composite
def orthogonal_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    items: list[Any] = []
    for n in shape:
        choices: list[st.SearchStrategy[Any]] = [_slices(n), _index_arrays(n), _bool_arrays(n)]
        if n:
            choices.append(_ints(n))
        items.append(draw(st.one_of(*choices)))
    return _shorten(draw, items)


@st.composite
def coordinate_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Any:
    ndim = len(shape)
    if 0 in shape:
        return tuple(np.array([], dtype=np.intp) for _ in shape)
    bshapes = draw(
        npst.mutually_broadcastable_shapes(num_shapes=ndim, min_dims=0, max_dims=3, max_side=4),
        label="coordinate shapes",
    )
    items: list[Any] = []
    for n, s in zip(shape, bshapes.input_shapes, strict=True):
        values = draw(npst.arrays(np.int64, s, elements=_ints(n)))
        if values.ndim == 0 and draw(st.booleans(), label="scalar as int"):
            items.append(int(values))
        elif values.ndim == 1 and values.size and draw(st.booleans(), label="as list"):
            items.append(values.tolist())
        else:
            items.append(values)
    if ndim == 1 and draw(st.booleans(), label="bare"):
        return items[0]
    return tuple(items)


@st.composite
def mask_selections(draw: st.DrawFn, shape: tuple[int, ...]) -> np.ndarray:
    return draw(npst.arrays(np.bool_, shape))


@st.composite
def block_selections(draw: st.DrawFn, shape: tuple[int, ...], chunks: tuple[int, ...]) -> Any:
    items: list[Any] = []
    for n, c in zip(shape, chunks, strict=True):
        nb = -(-n // c)
        bound = st.one_of(st.none(), st.integers(-nb - 1, nb + 1))
        choices = [st.builds(slice, bound, bound, st.sampled_from([None, 1]))]
        if nb:
            choices.append(st.integers(-nb, nb - 1))
        items.append(draw(st.one_of(*choices)))
    return _shorten(draw, items)


def selections(kind: str, spec: Spec) -> st.SearchStrategy[Any]:
    if kind == "basic":
        return basic_selections(spec.shape)
    if kind == "orthogonal":
        return orthogonal_selections(spec.shape)
    if kind == "coordinate":
        return coordinate_selections(spec.shape)
    if kind == "mask":
        return mask_selections(spec.shape)
    return block_selections(spec.shape, spec.chunks)


def _expand(sel: Any, ndim: int) -> tuple[Any, ...]:
    sel = sel if isinstance(sel, tuple) else (sel,)
    if any(s is Ellipsis for s in sel):
        i = next(i for i, s in enumerate(sel) if s is Ellipsis)
        sel = sel[:i] + (slice(None),) * (ndim - len(sel) + 1) + sel[i + 1 :]
    return sel + (slice(None),) * (ndim - len(sel))


def _ortho_ix(sel: Any, shape: tuple[int, ...]) -> tuple[tuple[Any, ...], tuple[int, ...], tuple[int, ...]]:
    """NumPy's ``ix_`` form of an orthogonal selection, its int-indexed axes and its result shape."""
    idx, drop = [], []
    for axis, (s, n) in enumerate(zip(_expand(sel, len(shape)), shape, strict=True)):
        if isinstance(s, slice):
            idx.append(np.arange(n)[s])
        elif isinstance(s, (int, np.integer)):
            idx.append(np.array([s]))
            drop.append(axis)
        else:
            a = np.asarray(s)
            idx.append(np.flatnonzero(a) if a.dtype == bool else a.astype(np.intp))
    rshape = tuple(len(ix) for axis, ix in enumerate(idx) if axis not in drop)
    return (np.ix_(*idx) if idx else ()), tuple(drop), rshape


def _block_slices(sel: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for s, n, c in zip(_expand(sel, len(shape)), shape, chunks, strict=True):
        nb = -(-n // c)
        if isinstance(s, slice):
            start, stop, _ = s.indices(nb)
            out.append(slice(start * c, max(start, stop) * c))
        else:
            b = s % nb
            out.append(slice(b * c, (b + 1) * c))
    return tuple(out)


def _coords(sel: Any) -> tuple[np.ndarray, ...]:
    sel = sel if isinstance(sel, tuple) else (sel,)
    return tuple(np.asarray(s) for s in sel)


def np_result_shape(kind: str, a: np.ndarray, sel: Any, chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Shape azarr's result (and a written value) has for this selection."""
    return np.shape(np_get(kind, a, sel, chunks))


def np_get(kind: str, a: np.ndarray, sel: Any, chunks: tuple[int, ...]) -> Any:
    """NumPy's result of selection ``sel`` of ``kind`` (zarr-python 2's shape conventions).

    ``a`` may have trailing dimensions beyond ``len(chunks)`` (a subarray field):
    the selection applies to the leading ones.
    """
    nd = len(chunks)
    shape, trailing = a.shape[:nd], a.shape[nd:]
    if kind == "basic":
        return a[_expand(sel, nd)] if trailing else a[sel]  # an Ellipsis must not reach the field's dims
    if kind == "orthogonal":
        ix, _, rshape = _ortho_ix(sel, shape)
        return np.asarray(a[ix], dtype=a.dtype).reshape(rshape + trailing)  # (an object element: a str)
    if kind == "coordinate":
        r = np.asarray(a[_coords(sel)], dtype=a.dtype)
        if r.ndim == len(trailing):  # zarr-python 2: all-scalar coordinates give (1,)
            r = np.asarray(r, dtype=a.dtype).reshape((1, *trailing))
        return r
    if kind == "mask":
        return a[sel]
    return np.asarray(a[_block_slices(sel, shape, chunks)], dtype=a.dtype)


def np_set(kind: str, a: np.ndarray, sel: Any, value: Any, chunks: tuple[int, ...]) -> None:
    """NumPy's assignment ``a[sel] = value`` for a selection of ``kind`` (in place)."""
    if a.dtype.names:  # a multi-field view: field by field (assigning it whole clobbers the padding)
        v = np.asarray(value, dtype=np.dtype([(n, a.dtype[n]) for n in a.dtype.names]))
        for name in a.dtype.names:
            np_set(kind, a[name], sel, v[name], chunks)
        return
    nd = len(chunks)
    rshape = np_result_shape(kind, a, sel, chunks)
    v = np.broadcast_to(np.asarray(value, dtype=a.dtype), rshape)
    if kind == "basic":
        a[_expand(sel, nd)] = v
    elif kind == "orthogonal":
        ix, drop, _ = _ortho_ix(sel, a.shape[:nd])
        a[ix] = np.expand_dims(v, drop) if drop else v
    elif kind == "coordinate":
        coords = _coords(sel)
        a[coords] = v.reshape(np.broadcast_shapes(*(c.shape for c in coords)) + a.shape[nd:])
    elif kind == "mask":
        a[sel] = v
    else:
        a[_block_slices(sel, a.shape[:nd], chunks)] = v


def expects_scalar(kind: str, sel: Any, result: Any) -> bool | None:
    """Whether zarr-python 2 returns a NumPy scalar here (None: not checked).

    Basic and orthogonal reads of a single element return a scalar (as
    ``z[i, j]`` does), except the 0-d ``z[...]``, which returns a 0-d array.
    """
    if np.ndim(result):
        return False
    if kind == "basic":
        return not (sel is Ellipsis or sel == (Ellipsis,))
    if kind == "orthogonal":
        return True
    return None


@st.composite
def values_for(draw: st.DrawFn, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    """A value to write into a selection of ``shape``: scalar, full array, broadcastable array or list."""
    how = draw(st.sampled_from(["scalar", "array", "broadcast", "list"]), label="value")
    if how == "scalar":
        return draw(st.sampled_from([5, np.asarray(6, dtype=dtype)[()], np.asarray(8, dtype=dtype)]))
    if how == "broadcast" and shape:
        lead = draw(st.integers(0, len(shape)), label="dims dropped")
        shape = tuple(1 if draw(st.booleans()) else s for s in shape[lead:])
    full = (np.arange(math.prod(shape)) % 20000 + 40000).reshape(shape).astype(dtype)
    return full.tolist() if how == "list" and full.size else full


# ---------------------------------------------------------------------------
# routes: every way the API reaches each kind


ACCESSORS = {"orthogonal": "oindex", "coordinate": "vindex", "mask": "vindex", "block": "blocks"}


def _named(sel: Any, fields: Any) -> Any:
    """The selection with field names appended, as ``z[..., "name"]`` spells it."""
    if fields is None:
        return sel
    names = [fields] if isinstance(fields, str) else list(fields)
    if len(names) == 1 and not isinstance(fields, str):
        return None  # z[..., "b"] means fields="b": a one-field list has no spelling there
    return (*(sel if isinstance(sel, tuple) else (sel,)), *names)


def _getitem_reaches(kind: str, sel: Any, ndim: int) -> bool:
    if kind == "basic":
        return True
    if kind == "orthogonal":
        return routes_as_orthogonal(sel, ndim)
    if kind == "coordinate":
        return routes_as_fancy(sel, ndim)
    return False


def get_routes(
    arr: AsyncArray, kind: str, sel: Any, fields: Any = None
) -> dict[str, Callable[[], Awaitable[Any]]]:
    """Every read of ``sel`` as a ``kind`` selection: method, accessor, and getitem where it routes there."""
    method = getattr(arr, f"get_{kind}_selection")
    named = _named(sel, fields)
    routes: dict[str, Callable[[], Awaitable[Any]]] = {
        f"get_{kind}_selection": lambda: method(sel, fields=fields)
    }
    if named is None:
        return routes
    if kind in ACCESSORS:
        accessor = getattr(arr, ACCESSORS[kind])
        routes[ACCESSORS[kind]] = lambda: accessor[named]
    if _getitem_reaches(kind, sel, arr.ndim):
        routes["getitem"] = lambda: arr.getitem(named)
    return routes


def set_routes(
    arr: AsyncArray, kind: str, sel: Any, value: Any, fields: Any = None
) -> dict[str, Callable[[], Awaitable[None]]]:
    """Every write of ``value`` into ``sel``, as `get_routes`."""
    method = getattr(arr, f"set_{kind}_selection")
    named = _named(sel, fields)
    routes: dict[str, Callable[[], Awaitable[None]]] = {
        f"set_{kind}_selection": lambda: method(sel, value, fields=fields)
    }
    if named is None:
        return routes
    if kind in ACCESSORS:
        accessor = getattr(arr, ACCESSORS[kind])
        routes[f"{ACCESSORS[kind]}.set"] = lambda: accessor.set(named, value)
    if _getitem_reaches(kind, sel, arr.ndim):
        routes["setitem"] = lambda: arr.setitem(named, value)
    return routes


def _int_iterable(s: Any) -> bool:
    if isinstance(s, list):
        return bool(s) and isinstance(s[0], int)
    return isinstance(s, np.ndarray) and s.ndim >= 1 and s.dtype.kind in "ui"


def routes_as_orthogonal(sel: Any, ndim: int) -> bool:
    """zarr-python 2's ``z[sel]`` is an orthogonal selection (or a vindex one with the same result).

    A tuple of one item per dimension, ints, slices and at most one integer
    list/array (1-D), no Boolean arrays; or a bare 1-D integer list/array. A
    single array among ints gives the same result either way.
    """
    if ndim == 0:
        return False
    if not isinstance(sel, tuple):
        return _int_iterable(sel) and np.ndim(sel) == 1
    return (
        len(sel) == ndim
        and sum(_int_iterable(s) for s in sel) <= 1
        and all(_int_iterable(s) or isinstance(s, (int, slice)) for s in sel)
    )


def routes_as_fancy(sel: Any, ndim: int) -> bool:
    """zarr-python 2's ``z[sel]`` is a coordinate selection: ints and int arrays, at least one array."""
    if ndim == 1 and _int_iterable(sel):
        return True
    return (
        isinstance(sel, tuple)
        and len(sel) == ndim
        and all(isinstance(s, int) or _int_iterable(s) for s in sel)
        and any(_int_iterable(s) for s in sel)
    )


# ---------------------------------------------------------------------------
# the property tests


async def check_kind(backend: Backend, kind: str, spec: Spec, sel: Any, value: Any) -> None:
    store, path = backend.new_location(spec.zarr_format)
    arr = await make_array(spec, store, path)
    model = spec.model()
    assert_same(await read_all(arr), model, "initial state")
    expected = np_get(kind, model, sel, spec.chunks)
    scalar = expects_scalar(kind, sel, expected)
    for route, call in get_routes(arr, kind, sel).items():
        got = await call()
        assert_same(got, expected, f"{route}({sel!r})")
        if scalar is not None:
            # An object element is itself (a str), as zarr-python 2 returns it.
            element = isinstance(got, np.generic | str)
            assert element == scalar, f"{route}({sel!r}) returned {type(got)}"
    expected_model = model.copy()
    np_set(kind, expected_model, sel, value, spec.chunks)
    for route, call in set_routes(arr, kind, sel, value).items():
        await call()
        assert_same(await read_all(arr), expected_model, f"after {route}({sel!r}, ...)")
        await arr.set_basic_selection(..., model)  # back to the initial contents for the next route


@st.composite
def kind_cases(draw: st.DrawFn, kind: str, backend: Backend, vlen: bool = False) -> tuple[Spec, Any, Any]:
    min_ndim = 1 if kind == "coordinate" else 0
    spec = draw(specs(max_cells=backend.max_cells, max_chunks=backend.max_chunks, min_ndim=min_ndim))
    if vlen:  # strings: a fill value of "" or "x" (None would read back None, and write as "")
        spec = dataclasses.replace(spec, vlen=True, fill_value=draw(st.sampled_from(["", "x"]), label="fill"))
    sel = draw(selections(kind, spec), label="selection")
    shape = np_result_shape(kind, spec.model(), sel, spec.chunks)
    if vlen:
        values = (np.arange(math.prod(shape)) % 7).reshape(shape).astype(str).astype(object)
        value = draw(st.sampled_from(["ab", "", np.str_("zé"), np.array("0-d", dtype=object), values]))
    else:
        value = draw(values_for(shape, spec.dtype))
    return spec, sel, value


@pytest.mark.parametrize("kind", KINDS)
def test_vlen_strings_match_numpy(kind: str) -> None:
    """As `test_selection_matches_numpy`, on arrays of variable-length strings (object
    elements: VLenUTF8 in v2, vlen-utf8 in v3), on a MemoryStore."""
    backend = Backend("memory", asyncio.Runner(), lambda zarr_format: (MemoryStore(), "a"), 0, 300, 60)

    @backend.settings(max(MEMORY_EXAMPLES // 2, 20))
    @given(case=kind_cases(kind, backend, vlen=True))
    def run(case: tuple[Spec, Any, Any]) -> None:
        backend.run(check_kind(backend, kind, *case))

    try:
        run()
    finally:
        backend.runner.close()


@pytest.mark.parametrize("kind", KINDS)
def test_selection_matches_numpy(backend: Backend, kind: str) -> None:
    """get == NumPy's result and set == NumPy's assignment, through every route."""

    @backend.settings()
    @given(case=kind_cases(kind, backend))
    def run(case: tuple[Spec, Any, Any]) -> None:
        backend.run(check_kind(backend, kind, *case))

    run()


# ---------------------------------------------------------------------------
# fields= on structured dtypes, for every kind

FIELDS: list[Any] = ["a", "b", "c", ["c", "a"], ["b"]]


def _structured_value(draw: st.DrawFn, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    if draw(st.booleans(), label="tuple scalar"):
        return tuple(
            np.full(dtype[n].shape, 3 + i, dtype=dtype[n].base).tolist() if dtype[n].shape else 3 + i
            for i, n in enumerate(dtype.names)
        )
    value = np.zeros(shape, dtype=dtype)
    for i, name in enumerate(dtype.names):
        flat = np.arange(math.prod(shape)).reshape(shape) + 50 * (i + 1)
        value[name] = flat[..., None] if dtype[name].shape else flat
    return value


@st.composite
def field_cases(draw: st.DrawFn, kind: str, backend: Backend) -> tuple[Spec, Any, Any, Any]:
    spec = draw(
        specs(
            max_cells=backend.max_cells,
            max_chunks=backend.max_chunks,
            min_ndim=1 if kind == "coordinate" else 0,
            max_ndim=3,
            structured=True,
        )
    )
    sel = draw(selections(kind, spec), label="selection")
    fields = draw(st.sampled_from(FIELDS), label="fields")
    view = spec.model()[fields]
    shape = np_result_shape(kind, view, sel, spec.chunks)
    if isinstance(fields, list):
        packed = np.dtype([(n, spec.dtype[n]) for n in fields])
        value = _structured_value(draw, np_result_shape(kind, spec.model(), sel, spec.chunks), packed)
    else:
        value = draw(values_for(shape, view.dtype))
    return spec, sel, fields, value


async def check_fields(backend: Backend, kind: str, spec: Spec, sel: Any, fields: Any, value: Any) -> None:
    store, path = backend.new_location(spec.zarr_format)
    arr = await make_array(spec, store, path)
    model = spec.model()
    expected = np_get(kind, model[fields], sel, spec.chunks)
    scalar = expects_scalar(kind, sel, expected)
    for route, call in get_routes(arr, kind, sel, fields).items():
        got = await call()
        assert_same(got, expected, f"{route}({sel!r}, fields={fields!r})")
        if scalar is not None:
            assert isinstance(got, np.generic) == scalar, f"{route}({sel!r}) returned {type(got)}"
    expected_model = model.copy()
    np_set(kind, expected_model[fields], sel, value, spec.chunks)
    for route, call in set_routes(arr, kind, sel, value, fields).items():
        await call()
        assert_same(await read_all(arr), expected_model, f"after {route}({sel!r}, ..., fields={fields!r})")
        await arr.set_basic_selection(..., model)


@pytest.mark.parametrize("kind", KINDS)
def test_fields_match_numpy(backend: Backend, kind: str) -> None:
    """``fields=`` and field names inside the selection read and write like NumPy's field views."""

    @backend.settings(max(backend.examples // 2, 5))
    @given(case=field_cases(kind, backend))
    def run(case: tuple[Spec, Any, Any, Any]) -> None:
        backend.run(check_fields(backend, kind, *case))

    run()


# ---------------------------------------------------------------------------
# request counting: only touched chunks, each exactly once


def chunk_keys(kind: str, spec: Spec, sel: Any, path: str) -> tuple[set[str], set[str]]:
    """Keys of the stored objects (chunks, or shards of a sharded array) holding selected
    elements, and of those whose every element inside the array the selection covers."""
    cells = spec.shards or spec.chunks
    grid = tuple(-(-n // c) for n, c in zip(spec.shape, cells, strict=True))
    ids = np.zeros(spec.shape, dtype=np.intp)
    for axis, (n, c) in enumerate(zip(spec.shape, cells, strict=True)):
        along = (np.arange(n) // c).reshape([-1 if i == axis else 1 for i in range(spec.ndim)])
        ids = ids * grid[axis] + along
    touched = {int(i) for i in np.unique(np.asarray(np_get(kind, ids, sel, spec.chunks)))}
    hit = np.zeros(spec.shape, dtype=bool)
    np_set(kind, hit, sel, True, spec.chunks)
    nchunks = math.prod(grid)
    covered = np.bincount(ids[hit], minlength=nchunks) == np.bincount(ids.ravel(), minlength=nchunks)

    def key(i: int) -> str:
        coords = [str(int(c)) for c in (np.unravel_index(i, grid) if grid else ())]
        if spec.zarr_format == 2 or spec.key_encoding == "v2":
            return f"{path}/" + (spec.separator.join(coords) or "0")
        return f"{path}/" + spec.separator.join(["c", *coords])  # v3's default chunk key encoding

    return {key(i) for i in touched}, {key(i) for i in touched if covered[i]}


async def check_requests(spec: Spec, kind: str, sel: Any, value: Any) -> None:
    store = RecordingStore(MemoryStore())
    arr = await make_array(spec, store, "x")
    touched, complete = chunk_keys(kind, spec, sel, "x")
    once = dict.fromkeys

    store.reset()
    await getattr(arr, f"get_{kind}_selection")(sel)
    if spec.shards is None:
        assert dict(store.gets) == once(touched, 1), f"read of {sel!r}"
        assert store.requests == len(touched)
    else:  # a shard: whole in one GET, or its index then its inner chunks in one coalesced run
        assert set(store.gets) == touched, f"read of {sel!r}"
        assert max(store.gets.values(), default=0) <= 2, f"read of {sel!r}: {dict(store.gets)}"
        assert store.requests == sum(store.gets.values())

    store.reset()
    await getattr(arr, f"set_{kind}_selection")(sel, value)
    assert dict(store.sets) == once(touched, 1), f"write of {sel!r}"
    if spec.shards is None:
        assert dict(store.gets) == once(touched - complete, 1), f"read-modify-write of {sel!r}"
    else:
        assert set(store.gets) == touched - complete, f"read-modify-write of {sel!r}"
        assert max(store.gets.values(), default=0) <= 2, f"read-modify-write of {sel!r}: {dict(store.gets)}"
    assert not store.deletes and not store.lists


@st.composite
def request_cases(draw: st.DrawFn) -> tuple[Spec, str, Any, Any]:
    kind = draw(st.sampled_from(KINDS), label="kind")
    spec = draw(specs(max_cells=600, max_chunks=150, min_ndim=1 if kind == "coordinate" else 0))
    # Every touched chunk stored (with write_empty_chunks=False a chunk left all fill is deleted).
    spec = dataclasses.replace(spec, write_empty_chunks=True)
    sel = draw(selections(kind, spec), label="selection")
    shape = np_result_shape(kind, spec.model(), sel, spec.chunks)
    return spec, kind, sel, draw(values_for(shape, spec.dtype))


@property_settings(MEMORY_EXAMPLES * 2)
@given(case=request_cases())
def test_only_touched_chunks_are_requested_once(case: tuple[Spec, str, Any, Any]) -> None:
    """Reads fetch exactly the chunks (shards) holding selected elements; writes read only
    partly covered ones."""
    asyncio.run(check_requests(*case))


# ---------------------------------------------------------------------------
# concurrency: a coordinate selection over 1,000 chunks


class SlowStore(RecordingStore):
    """A remote-like store: every get and set takes ``delay`` seconds; tracks peak requests in flight."""

    is_local = False

    def __init__(self, inner: Store, delay: float) -> None:
        super().__init__(inner)
        self.is_local = False
        self.delay = delay
        self.in_flight = 0
        self.peak = 0

    async def _slow(self, call: Awaitable[T]) -> T:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            return await call
        finally:
            self.in_flight -= 1

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self._slow(super()._get(key, byte_range))

    async def _set(self, key: str, value: bytes) -> None:
        await self._slow(super()._set(key, value))

    # Partial chunks are conditional read-modify-writes on stores that support them.
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        return await self._slow(super()._get_with_generation(key))

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        await self._slow(super()._set_if(key, value, generation))


async def test_coordinate_selection_over_1000_chunks_runs_concurrently() -> None:
    delay = 0.02
    data = np.arange(1000 * 100, dtype="f8").reshape(1000, 100)
    inner = MemoryStore()
    await azarr.array(data, chunks=(10, 10), compressor=None, store=inner)  # 100 x 10 = 1,000 chunks
    rng = np.random.default_rng(0)
    rows = np.repeat(np.arange(100) * 10, 10) + rng.integers(0, 10, 1000)
    cols = np.tile(np.arange(10) * 10, 100) + rng.integers(0, 10, 1000)
    order = rng.permutation(1000)  # unsorted points: one per chunk, in random order
    rows, cols = rows[order], cols[order]

    slow = SlowStore(inner, delay)
    set_budget(slow, max_requests=64)  # the default remote budget, so the test does not depend on config
    arr = await azarr.open_array(slow, mode="r+")
    slow.reset()
    got = await arr.vindex[rows, cols]
    np.testing.assert_array_equal(got, data[rows, cols])
    assert len(slow.gets) == 1000 and set(slow.gets.values()) == {1}
    # Concurrency is measured as the peak in flight, not as a wall-clock bound a loaded host breaks.
    assert slow.peak >= 32, f"only {slow.peak} reads in flight"

    # The write path (read-modify-write of each chunk) fans out the same way.
    slow.reset()
    slow.peak = 0
    await arr.vindex.set((rows, cols), -1.0)
    assert len(slow.gets) == len(slow.sets) == 1000
    assert slow.peak >= 32
    expected = data.copy()
    expected[rows, cols] = -1.0
    np.testing.assert_array_equal(await arr.get_basic_selection(...), expected)


# ---------------------------------------------------------------------------
# out=, value broadcasting and shape errors, fixed cases on a (10, 6) array with (3, 4) chunks

DATA = np.arange(60, dtype="<i4").reshape(10, 6)
SELECTIONS: dict[str, Any] = {
    "basic": (slice(1, 9, 2), slice(None, None, -1)),
    "orthogonal": ([7, 1, 1], np.array([True, False, True, True, False, True])),
    "coordinate": (np.array([[0, 9], [3, 3]]), np.array([[5, 0], [1, 1]])),
    "mask": DATA % 3 == 0,
    "block": (slice(1, 3), 1),
}


async def fixed_array(store: Store | None = None, **kwargs: Any) -> AsyncArray:
    return await azarr.array(DATA, chunks=(3, 4), store=store or MemoryStore(), **kwargs)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("order", ["C", "F"])
async def test_out_receives_the_result(kind: str, order: str) -> None:
    arr = await fixed_array(order=order)
    sel = SELECTIONS[kind]
    expected = np_get(kind, DATA, sel, arr.chunks)
    out = np.full(expected.shape, -1, dtype=DATA.dtype)
    result = await getattr(arr, f"get_{kind}_selection")(sel, out=out)
    assert result is out
    np.testing.assert_array_equal(out, expected)
    if kind != "coordinate":  # a strided view works too (coordinate reads need a C-contiguous out)
        big = np.full(tuple(2 * n for n in expected.shape), -1, dtype=DATA.dtype)
        view = big[(slice(None, None, 2),) * expected.ndim]
        assert await getattr(arr, f"get_{kind}_selection")(sel, out=view) is view
        np.testing.assert_array_equal(view, expected)


async def test_out_for_scalars_fields_and_non_contiguous_coordinates() -> None:
    arr = await fixed_array()
    out0 = np.empty((), dtype=DATA.dtype)
    assert await arr.get_basic_selection((2, 3), out=out0) is out0 and out0[()] == DATA[2, 3]
    dt = np.dtype([("a", "<i4"), ("c", "<i2", (2,))])
    structured = np.zeros((4, 5), dtype=dt)
    structured["a"] = np.arange(20).reshape(4, 5)
    structured["c"] = np.arange(40).reshape(4, 5, 2)
    sarr = await azarr.array(structured, chunks=(3, 2), store=MemoryStore(), fill_value=None)
    out_a = np.empty(3, dtype="<i4")
    assert await sarr.get_orthogonal_selection((1, [4, 0, 2]), out=out_a, fields="a") is out_a
    np.testing.assert_array_equal(out_a, structured["a"][1, [4, 0, 2]])
    out_c = np.empty((2, 2, 2), dtype="<i2")
    rows, cols = np.array([[0, 3], [2, 1]]), np.array([[4, 0], [1, 1]])
    assert await sarr.vindex.get((rows, cols, "c")) is not None
    assert await sarr.get_coordinate_selection((rows, cols), out=out_c, fields="c") is out_c
    np.testing.assert_array_equal(out_c, structured["c"][rows, cols])
    with pytest.raises(ValueError, match=r"dtype int32.*dtype int16"):
        await sarr.get_coordinate_selection((rows, cols), out=np.empty((2, 2, 2), "<i4"), fields="c")
    f_out = np.empty((2, 2), dtype=DATA.dtype, order="F")
    with pytest.raises(ValueError, match="C-contiguous"):
        await arr.get_coordinate_selection(SELECTIONS["coordinate"], out=f_out)


@pytest.mark.parametrize("kind", KINDS)
async def test_wrong_out_is_a_clear_error(kind: str) -> None:
    arr = await fixed_array()
    sel = SELECTIONS[kind]
    get = getattr(arr, f"get_{kind}_selection")
    shape = np_result_shape(kind, DATA, sel, arr.chunks)
    wrong_shape = (*shape[:-1], shape[-1] + 1)
    with pytest.raises(ValueError, match=rf"{_re(wrong_shape)}.*{_re(shape)}"):
        await get(sel, out=np.empty(wrong_shape, dtype=DATA.dtype))
    with pytest.raises(ValueError, match=r"dtype float64.*dtype int32"):
        await get(sel, out=np.empty(shape, dtype="f8"))
    with pytest.raises(TypeError, match=r"numpy\.ndarray"):
        await get(sel, out=np.empty(shape).tolist())
    frozen = np.empty(shape, dtype=DATA.dtype)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        await get(sel, out=frozen)


def _re(shape: tuple[int, ...]) -> str:
    return re.escape(str(shape))


@pytest.mark.parametrize("kind", KINDS)
async def test_scalar_values_broadcast_and_mismatched_values_name_both_shapes(kind: str) -> None:
    store = RecordingStore(MemoryStore())
    arr = await fixed_array(store)
    sel = SELECTIONS[kind]
    put = getattr(arr, f"set_{kind}_selection")
    expected = DATA.copy()
    np_set(kind, expected, sel, -5, arr.chunks)
    await put(sel, -5)
    np.testing.assert_array_equal(await arr.get_basic_selection(...), expected)

    shape = np_result_shape(kind, DATA, sel, arr.chunks)
    bad = (shape[0] + 1, *shape[1:])
    store.reset()
    with pytest.raises(ValueError, match=rf"{_re(bad)}.*{_re(shape)}"):
        await put(sel, np.zeros(bad, dtype=DATA.dtype))
    assert store.requests == 0  # rejected before any chunk was touched


# ---------------------------------------------------------------------------
# invalid selections: IndexError / TypeError naming the dimension

ERRORS: list[tuple[str, Callable[[AsyncArray], Awaitable[Any]], type[Exception], str]] = [
    # out of bounds
    ("basic int", lambda a: a.get_basic_selection(10), IndexError, "axis 0"),
    ("basic negative", lambda a: a.get_basic_selection((0, -7)), IndexError, "axis 1"),
    ("basic set", lambda a: a.set_basic_selection((0, 6), 1), IndexError, "axis 1"),
    ("getitem", lambda a: a.getitem((0, 6)), IndexError, "axis 1"),
    ("oindex array", lambda a: a.oindex[[0, 10], :], IndexError, "axis 0"),
    ("oindex negative", lambda a: a.oindex[:, [-7]], IndexError, "axis 1"),
    ("oindex set", lambda a: a.oindex.set((slice(None), [6]), 1), IndexError, "axis 1"),
    ("vindex", lambda a: a.vindex[[0, 1], [0, 6]], IndexError, "axis 1"),
    ("vindex set", lambda a: a.vindex.set(([10], [0]), 1), IndexError, "axis 0"),
    ("blocks", lambda a: a.blocks[4], IndexError, "axis 0"),
    ("blocks negative", lambda a: a.blocks[0, -3], IndexError, "axis 1"),
    ("blocks set", lambda a: a.blocks.set((0, 2), 1), IndexError, "axis 1"),
    # wrong rank
    ("basic rank", lambda a: a.get_basic_selection((0, 0, 0)), IndexError, "2-dimensional.*3"),
    ("getitem rank", lambda a: a.getitem((0, slice(None), 0)), IndexError, "2-dimensional.*3"),
    ("oindex rank", lambda a: a.oindex[0, 0, [0]], IndexError, "2-dimensional.*3"),
    ("vindex rank", lambda a: a.vindex[[0], [0], [0]], IndexError, "2-dimensional"),
    ("blocks rank", lambda a: a.blocks[0, 0, 0], IndexError, "2-dimensional.*3"),
    # float indices
    ("basic float", lambda a: a.get_basic_selection(1.5), TypeError, "axis 0"),
    ("basic float axis 1", lambda a: a.get_basic_selection((0, 1.5)), TypeError, "axis 1"),
    ("float slice", lambda a: a.get_basic_selection((slice(None), slice(0, 2.5))), TypeError, "axis 1"),
    ("getitem float", lambda a: a.getitem(1.5), TypeError, "axis 0"),
    ("set float", lambda a: a.set_basic_selection((1.0, 0), 1), TypeError, "axis 0"),
    ("oindex float array", lambda a: a.oindex[:, np.array([1.0])], TypeError, "axis 1"),
    ("oindex float list", lambda a: a.oindex[[1.0, 2.0]], TypeError, "axis 0"),
    ("blocks float", lambda a: a.blocks[1.5], TypeError, "axis 0"),
    ("vindex float", lambda a: a.vindex[np.array([1.0]), np.array([1])], IndexError, "integer array"),
    # Boolean masks of the wrong shape
    ("vindex mask", lambda a: a.vindex[np.ones((9, 6), bool)], IndexError, r"\(10, 6\).*\(9, 6\)"),
    ("mask 1-d", lambda a: a.get_mask_selection(np.ones(10, bool)), IndexError, r"\(10, 6\).*\(10,\)"),
    ("mask set", lambda a: a.vindex.set(np.ones((10, 7), bool), 1), IndexError, r"\(10, 7\)"),
    ("oindex bool", lambda a: a.oindex[np.ones(9, bool)], IndexError, "axis 0.*10.*9"),
    ("oindex bool axis 1", lambda a: a.oindex[:, np.ones(7, bool)], IndexError, "axis 1.*6.*7"),
    # zarr-python 2 does not route Boolean arrays through z[...]: it needs vindex / oindex
    ("getitem mask", lambda a: a.getitem(np.ones((10, 6), bool)), IndexError, "axis 0"),
]


@pytest.mark.parametrize(("name", "call", "exc", "match"), ERRORS, ids=[e[0] for e in ERRORS])
async def test_invalid_selections_raise_clear_errors(
    name: str, call: Callable[[AsyncArray], Awaitable[Any]], exc: type[Exception], match: str
) -> None:
    store = RecordingStore(MemoryStore())
    arr = await fixed_array(store)
    store.reset()
    with pytest.raises(exc, match=match):
        await call(arr)
    assert store.requests == 0  # rejected before any I/O


# ---------------------------------------------------------------------------
# codec batching: errors and cancellation across many chunks


async def test_a_corrupt_chunk_among_many_fails_the_read_naming_its_key() -> None:
    store = MemoryStore()
    arr = await azarr.array(np.arange(2000.0).reshape(200, 10), chunks=(2, 5), store=store)  # 200 chunks
    store.data["57.1"] = b"not a blosc frame"
    with pytest.raises(azarr.errors.CodecError, match=r"57\.1"):
        await arr.get_basic_selection(...)
    with pytest.raises(azarr.errors.CodecError, match=r"57\.1"):
        await arr.vindex[np.arange(200), np.full(200, 7)]
    np.testing.assert_array_equal(
        await arr.get_basic_selection(slice(0, 100)), np.arange(1000.0).reshape(100, 10)
    )


async def test_cancelled_read_leaves_out_untouched_once_cancelled() -> None:
    """No codec thread writes into ``out`` after the cancelled read returns."""
    import time

    arr = await azarr.array(np.ones((400, 10)), chunks=(1, 10), store=MemoryStore())  # 400 chunks
    decode = arr._pipeline._decode_into

    def slow_decode(*args: Any) -> None:
        time.sleep(0.001)  # in the codec thread
        decode(*args)

    arr._pipeline._decode_into = slow_decode  # type: ignore[method-assign]
    out = np.zeros((400, 10))
    await cancel_read_part_way(arr.get_basic_selection(..., out=out), out, np.ones((400, 10)), after=0.05)


async def test_a_failing_encode_among_many_fails_the_write_naming_its_key() -> None:
    arr = await azarr.create(300, chunks=3, dtype=str, store=MemoryStore())
    values = np.array([f"v{i}" for i in range(300)], dtype=object)
    values[151] = 12345  # vlen-utf8 cannot encode an int
    with pytest.raises(azarr.errors.CodecError, match=r"\b50\b"):
        await arr.set_basic_selection(..., values)


@pytest.mark.parametrize("batched", [False, True], ids=["async-path", "batched-jobs"])
async def test_cancelled_write_stops_storing_chunks_once_cancelled(batched: bool) -> None:
    """On the per-chunk async path (a wrapped store) and in batched codec-pool jobs (a
    bare memory store): once the cancelled write returns, no chunk is stored."""
    import time

    from azarr.scheduler import stats_for

    store = MemoryStore() if batched else RecordingStore(MemoryStore())
    arr = await azarr.zeros((400, 10), chunks=(1, 10), store=store)  # 400 chunks
    # The merge step both paths share (the async path's _update_chunk and the batched
    # jobs call it before encoding).
    update = arr._pipeline._updated_chunk

    def slow_update(*args: Any) -> np.ndarray[Any, Any] | None:
        time.sleep(0.001)  # in the codec thread
        return update(*args)

    arr._pipeline._updated_chunk = slow_update  # type: ignore[method-assign]
    stats = stats_for(store)
    stats.reset()
    task = asyncio.ensure_future(arr.set_basic_selection(..., 1.0))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    written = stats.requests
    assert 0 < written < 400
    await asyncio.sleep(0.1)
    assert stats.requests == written


async def test_codec_queue_of_a_read_is_bounded_in_bytes() -> None:
    """Fetched chunks waiting for a codec thread stay under the byte bound (slow decoding)."""
    import time

    from azarr.codecs import CodecBatcher

    batcher = CodecBatcher(max_outstanding=1000, max_outstanding_bytes=300)
    seen: list[int] = []
    done: list[int] = []
    for i in range(20):
        await batcher.submit(lambda i=i: (time.sleep(0.002), done.append(i)), (), 100)
        seen.append(batcher._outstanding_bytes)
    await batcher.drain()
    assert sorted(done) == list(range(20))
    assert max(seen) <= 300
