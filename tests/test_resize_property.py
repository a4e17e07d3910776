"""``resize`` and ``append`` against a model of zarr-python's semantics, on every layout.

zarr-python 2 and 3 ``Array.resize`` delete the stored objects (chunks, or shards of a
sharded array) wholly outside the new shape and keep the others as they are, including the
part of one cut by the new edge: growing again shows that part's old values, and fill_value
everywhere else new. A write covering an edge object inside the array writes it whole
(zarr-python 3's rule; ``docs/parity.md``, "Edge chunks written whole"), an append merges
into its edge objects (``docs/consistency.md``). The model below keeps a backing array as large as any shape the test
reaches and applies exactly that rule per stored object; a drawn sequence of resizes,
appends along any axis and whole-array writes must read back equal to it after every step.
Arrays are drawn as in ``test_selection.py`` (Zarr v2, v3 and v3 sharded; edge chunks and
shards; C/F order; with and without ``write_empty_chunks``).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from azarr.storage import MemoryStore
from tests.test_selection import (
    MEMORY_EXAMPLES,
    SIDES,
    Spec,
    assert_same,
    make_array,
    property_settings,
    read_all,
    specs,
)

#: Largest extent a dimension grows to, by rank (twice test_selection's sides, capped so
#: the backing array and the chunk count stay small).
GROW = {n: 2 * side for n, side in SIDES.items()}

#: Room past the largest resize for appends (at most 4 steps of at most 6 rows).
APPEND_ROOM = 4 * 6

Step = tuple[str, Any]
"""("resize", shape), ("append", (axis, length)) or ("write", None)."""


@st.composite
def resize_cases(draw: st.DrawFn) -> tuple[Spec, list[Step]]:
    spec = draw(specs(max_cells=300, max_chunks=60, min_ndim=1, max_ndim=3))
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 4), label="steps")):
        what = draw(st.sampled_from(["resize", "resize", "append", "write"]), label="step")
        if what == "resize":
            shape = tuple(draw(st.integers(0, GROW[spec.ndim]), label=f"dim{d}") for d in range(spec.ndim))
            steps.append(("resize", shape))
        elif what == "append":
            axis = draw(st.integers(0, spec.ndim - 1), label="axis")
            steps.append(("append", (axis, draw(st.integers(0, 6), label="length"))))
        else:
            steps.append(("write", None))
    return spec, steps


class Model:
    """What the array holds: a backing array as large as every shape reached, of which the
    current shape's corner is the array; stored objects dropped by a resize become fill."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self.cells = spec.shards or spec.chunks
        self.fill = np.full((), 0 if spec.fill_value is None else spec.fill_value, dtype=spec.model().dtype)[
            ()
        ]
        self.backing = np.full(
            tuple(GROW[spec.ndim] + APPEND_ROOM for _ in spec.shape), self.fill, dtype=spec.model().dtype
        )
        self.shape = spec.shape
        self.backing[self.corner(self.shape)] = spec.model()

    @staticmethod
    def corner(shape: tuple[int, ...]) -> tuple[slice, ...]:
        return tuple(slice(0, n) for n in shape)

    def resize(self, shape: tuple[int, ...]) -> None:
        """Every stored object of the larger of the two shapes' grids that lies wholly
        outside ``shape`` (starts at or past its end on some axis) is deleted."""
        reach = [max(a, b) for a, b in zip(self.shape, shape, strict=True)]
        grid = [range(-(-n // c)) for n, c in zip(reach, self.cells, strict=True)]
        for coords in itertools.product(*grid):
            starts = [g * c for g, c in zip(coords, self.cells, strict=True)]
            if any(s >= n for s, n in zip(starts, shape, strict=True)):
                self.backing[tuple(slice(s, s + c) for s, c in zip(starts, self.cells, strict=True))] = (
                    self.fill
                )
        self.shape = shape

    def write(self, values: np.ndarray) -> None:
        """A write of the whole array: every stored object it reaches is covered inside the
        array and written whole, without a read (zarr-python 3's rule; zarr-python 2 reads
        edge chunks and keeps what lies past the end): past the end it holds fill_value."""
        reached = tuple(-(-n // c) * c if n else 0 for n, c in zip(self.shape, self.cells, strict=True))
        self.backing[self.corner(reached)] = self.fill
        self.backing[self.corner(self.shape)] = values

    def append(self, axis: int, values: np.ndarray) -> None:
        """An append: its edge chunks (or shards) are merged with what is stored, so what
        lies past the end stays (a concurrent appender's block may be there)."""
        old = self.shape
        self.resize(tuple(n + values.shape[axis] if d == axis else n for d, n in enumerate(old)))
        starts = [old[axis] if d == axis else 0 for d in range(len(old))]
        self.backing[tuple(slice(a, n) for a, n in zip(starts, self.shape, strict=True))] = values

    @property
    def array(self) -> np.ndarray:
        return self.backing[self.corner(self.shape)]


def _values(shape: tuple[int, ...], dtype: np.dtype[Any], seed: int) -> np.ndarray:
    return ((np.arange(math.prod(shape)) * 7 + seed) % 20000 + 500).reshape(shape).astype(dtype)


async def check_steps(spec: Spec, steps: list[Step]) -> None:
    arr = await make_array(spec, MemoryStore(), "a")
    model = Model(spec)
    for i, (what, arg) in enumerate(steps):
        if what == "resize":
            await arr.resize(arg)
            model.resize(arg)
        elif what == "append":
            axis, length = arg
            shape = tuple(length if d == axis else n for d, n in enumerate(model.shape))
            data = _values(shape, model.backing.dtype, i)
            assert await arr.append(data, axis=axis) == tuple(
                n + length if d == axis else n for d, n in enumerate(model.shape)
            )
            model.append(axis, data)
        else:
            data = _values(model.shape, model.backing.dtype, 100 + i)
            await arr.set_basic_selection(..., data)
            model.write(data)
        assert arr.shape == model.shape, f"step {i} {what}({arg!r})"
        assert_same(await read_all(arr), model.array, f"after step {i}: {what}({arg!r}) of {steps!r}")


@property_settings(max(MEMORY_EXAMPLES // 2, 20))
@given(case=resize_cases())
def test_resize_and_append_match_zarr_python_semantics(case: tuple[Spec, list[Step]]) -> None:
    """After every resize, append and write, the array reads as the model says."""
    asyncio.run(check_steps(*case))
