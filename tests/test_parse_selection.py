"""The text selection language shared by the command line and services (azarr.indexing.parse_selection)."""

from __future__ import annotations

import numpy as np
import pytest

import azarr
from azarr.indexing import SelectionError, SelectionSyntaxError, parse_selection


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (Ellipsis,)),
        ("  ", (Ellipsis,)),
        ("5", (5,)),
        ("-1", (-1,)),
        ("0:10,::2,5", (slice(0, 10), slice(None, None, 2), 5)),
        (":", (slice(None),)),
        ("1:", (slice(1, None),)),
        ("::-1", (slice(None, None, -1),)),
        ("[1,5,9],:", ([1, 5, 9], slice(None))),
        ("[ 1 , -2 ]", ([1, -2],)),
        ("[true,False,TRUE]", ([True, False, True],)),
        ("...,-1", (Ellipsis, -1)),
        ("[]", ([],)),
    ],
)
def test_parses(text: str, expected: tuple[object, ...]) -> None:
    assert parse_selection(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("1,,2", "item 1 ('') of selection '1,,2' is empty"),
        ("1:2:3:4", "at most three parts"),
        ("a", "'a' is not an integer"),
        ("1.5", "'1.5' is not an integer"),
        ("[1,2", "'[' without a matching ']'"),
        ("1]", "']' without a matching '['"),
        ("[[1]]", "nested brackets"),
        ("[1]2", "text after ']'"),
        ("[1,true]", "mixes integers and Booleans"),
        ("...,...", "more than one '...'"),
        ("9" * 40, "too large"),
    ],
)
def test_errors_name_the_item(text: str, fragment: str) -> None:
    with pytest.raises(SelectionSyntaxError, match=None) as info:
        parse_selection(text)
    assert fragment in str(info.value)
    # Both a ValueError (HTTP 400 / usage error) and azarr's selection error.
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, SelectionError)


def test_overlong_text_is_refused() -> None:
    with pytest.raises(SelectionSyntaxError, match="characters long"):
        parse_selection("1," * 60_000)


async def test_parsed_selections_read_like_numpy() -> None:
    data = np.arange(200).reshape(20, 10)
    arr = await azarr.array(data, chunks=(4, 3))
    for text, numpy_sel in [
        ("0:10,::2", np.s_[0:10, ::2]),
        ("[1,5,9],:", np.ix_([1, 5, 9], np.arange(10))),
        ("...,-1", np.s_[..., -1]),
        ("3,4", np.s_[3, 4]),
        ("", np.s_[...]),
    ]:
        got = await arr.getitem(parse_selection(text))
        np.testing.assert_array_equal(got, data[numpy_sel])
