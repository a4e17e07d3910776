"""SelectionPlan: slabs concatenate to the full result, stay within the budget and cover each chunk once."""

from __future__ import annotations

import math

import numpy as np
import pytest

import azarr
from azarr.errors import RetriesExhaustedError, StoreTimeoutError, ThrottledError
from azarr.indexing import BoundsCheckError, SelectionSyntaxError, parse_selection
from azarr.service import (
    DeadlineExceededError,
    SelectionPlan,
    UnknownDatasetError,
    http_error_for,
    npy_header,
)

SELECTIONS = [
    "",
    "5",
    "-1",
    "3:17",
    "::3",
    "::-1",
    "20:2:-3",
    "[1,5,9,30]",
    "[30,1,5,1]",
    "2:30,4",
    ":,[0,3,5]",
    "...,-1",
    "7,3:9",
    "[1,2,3],[4,5,6]",
    ":,::-2",
]


@pytest.fixture
async def arr() -> azarr.AsyncArray:
    a = await azarr.zeros((37, 11), chunks=(4, 3), dtype="<i4", store=azarr.MemoryStore())
    await a.set_basic_selection(..., np.arange(37 * 11, dtype="<i4").reshape(37, 11))
    return a


@pytest.mark.parametrize("text", SELECTIONS)
@pytest.mark.parametrize("budget", [1, 4, 44, 130, 10_000])
async def test_slabs_concatenate_to_the_result(arr: azarr.AsyncArray, text: str, budget: int) -> None:
    sel = parse_selection(text)
    expected = np.asarray(await arr.getitem(sel))
    plan = SelectionPlan(arr, sel)
    assert plan.shape == expected.shape
    assert plan.nbytes == expected.nbytes
    parts = [await plan.read(s) for s in plan.slabs(budget)]
    for p in parts:
        assert p.nbytes <= max(budget, 4)
    joined = b"".join(p.tobytes() for p in parts)
    assert joined == np.ascontiguousarray(expected).tobytes()


async def test_slabs_are_chunk_aligned(arr: azarr.AsyncArray) -> None:
    plan = SelectionPlan(arr, parse_selection(":"))
    # two chunk rows (4 rows x 11 x 4 bytes each) per slab
    slabs = list(plan.slabs(2 * 4 * 11 * 4))
    assert [s[0] for s in slabs][:3] == [slice(0, 8, 1), slice(8, 16, 1), slice(16, 24, 1)]
    assert math.fsum(1 for _ in slabs) == 5


async def test_bad_selections_fail_before_reading(arr: azarr.AsyncArray) -> None:
    with pytest.raises(BoundsCheckError):
        SelectionPlan(arr, parse_selection("40"))
    with pytest.raises(SelectionSyntaxError):
        parse_selection("1:2:3:4")
    assert http_error_for(BoundsCheckError("x")).status == 400


def test_error_table() -> None:
    throttled = RetriesExhaustedError("gave up on 'a/0.0' after 5 attempts")
    throttled.__cause__ = ThrottledError("503 SlowDown")
    error = http_error_for(throttled, retry_after=2)
    assert (error.status, error.headers) == (503, {"Retry-After": "2"})
    timed = RetriesExhaustedError("gave up")
    timed.__cause__ = StoreTimeoutError("read timeout")
    assert http_error_for(timed).status == 504
    assert http_error_for(DeadlineExceededError("late")).status == 504
    assert http_error_for(UnknownDatasetError("nope")).status == 404
    assert http_error_for(azarr.errors.ArrayNotFoundError("nope")).status == 404
    assert http_error_for(azarr.errors.PermissionDeniedError("403")).status == 502
    assert http_error_for(RuntimeError("secret")).detail == "internal server error"


def test_npy_header_round_trips() -> None:
    import io

    data = np.arange(12, dtype=">f8").reshape(3, 4)
    body = npy_header(data.shape, data.dtype) + data.astype("<f8").tobytes()
    assert np.array_equal(np.load(io.BytesIO(body)), data)
