"""Selections written as text: ``"0:10,::2,5"``, ``"[1,5,9],:"``, ``"...,-1"``.

The one parser behind every place a selection arrives as a string (the ``azarr``
command line's ``--sel``, query parameters of a service built with
`azarr.service`), so both accept exactly the same language, NumPy's own
subscript syntax without the brackets:

| text | item | NumPy / zarr-python |
| --- | --- | --- |
| ``5``, ``-1`` | an integer index | ``z[5]`` |
| ``2:10:2``, ``:`` | a slice; any part may be left out | ``z[2:10:2]`` |
| ``[1,5,9]`` | a 1-D list of integer indices | ``z[[1, 5, 9]]`` |
| ``[true,false]`` | a 1-D Boolean list (``true``/``false``) | ``z[[True, False]]`` |
| ``...`` | Ellipsis (at most once) | ``z[..., 0]`` |

Items are separated by commas outside brackets; spaces are ignored; an empty
string means the whole array. The result is a tuple to pass to
`azarr.AsyncArray.getitem`, which routes it as zarr-python 2's
``z[selection]`` does (lists mixed with slices -> orthogonal selection; lists
only -> coordinate selection). Bounds are checked later, against the array.
"""

from __future__ import annotations

import re
from types import EllipsisType
from typing import TypeAlias

from azarr.indexing._errors import SelectionValueError

__all__ = ["MAX_SELECTION_TEXT", "SelectionSyntaxError", "TextSelectionItem", "parse_selection"]

#: Longest selection text accepted, in characters: a service parses what clients send.
MAX_SELECTION_TEXT = 100_000

TextSelectionItem: TypeAlias = int | slice | list[int] | list[bool] | EllipsisType
"""One item of a parsed selection."""

_INT = re.compile(r"[+-]?\d+\Z")
_BOOLS = {"true": True, "false": False}


class SelectionSyntaxError(SelectionValueError):
    """A selection string does not parse; the message quotes the text and names the item.

    A `ValueError` and an `IndexError` (via
    `SelectionError`): a service maps it to HTTP 400, the
    command line to exit status 2.
    """


def parse_selection(text: str) -> tuple[TextSelectionItem, ...]:
    """Parse a selection written as text into a tuple of selection items.

    Parameters
    ----------
    text : str
        Comma-separated items (see the module table), e.g. ``"0:10,::2,5"``,
        ``"[1,5,9],:"`` or ``"...,-1"``; ``""`` selects everything.

    Returns
    -------
    tuple
        ints, slices, lists of ints or bools and at most one ``Ellipsis``;
        ``(Ellipsis,)`` for ``""``.

    Raises
    ------
    SelectionSyntaxError
        Unbalanced or nested brackets, an empty item, a slice with more than
        three parts, a token that is not an integer, a list mixing integers and
        Booleans, two ellipses, or text longer than `MAX_SELECTION_TEXT`
        characters. The message quotes the offending item and its position.

    Examples
    --------
    >>> parse_selection("0:10,::2,5")
    (slice(0, 10, None), slice(None, None, 2), 5)
    >>> parse_selection("[1,5,9],:")
    ([1, 5, 9], slice(None, None, None))
    """
    if not isinstance(text, str):
        raise SelectionSyntaxError(f"a selection string must be str, got {type(text).__name__}")
    if len(text) > MAX_SELECTION_TEXT:
        raise SelectionSyntaxError(
            f"selection text is {len(text)} characters long; at most {MAX_SELECTION_TEXT} are accepted"
        )
    compact = "".join(text.split())
    if not compact:
        return (Ellipsis,)
    items = [_parse_item(raw, i, text) for i, raw in enumerate(_split_items(compact, text))]
    if sum(item is Ellipsis for item in items) > 1:
        raise SelectionSyntaxError(f"selection {text!r} has more than one '...'")
    return tuple(items)


def _split_items(compact: str, text: str) -> list[str]:
    """Split at commas outside brackets, checking the brackets balance and do not nest."""
    items: list[str] = []
    depth = 0
    start = 0
    for pos, char in enumerate(compact):
        if char == "[":
            if depth:
                raise SelectionSyntaxError(f"selection {text!r}: nested brackets are not supported")
            depth = 1
        elif char == "]":
            if not depth:
                raise SelectionSyntaxError(f"selection {text!r}: ']' without a matching '['")
            depth = 0
        elif char == "," and not depth:
            items.append(compact[start:pos])
            start = pos + 1
    if depth:
        raise SelectionSyntaxError(f"selection {text!r}: '[' without a matching ']'")
    items.append(compact[start:])
    return items


def _parse_item(raw: str, position: int, text: str) -> TextSelectionItem:
    where = f"item {position} ({raw!r}) of selection {text!r}"
    if raw == "":
        raise SelectionSyntaxError(f"{where} is empty")
    if raw == "...":
        return Ellipsis
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise SelectionSyntaxError(f"{where}: text after ']'")
        return _parse_list(raw[1:-1], where)
    if ":" in raw:
        parts = raw.split(":")
        if len(parts) > 3:
            raise SelectionSyntaxError(f"{where}: a slice has at most three parts (start:stop:step)")
        start, stop, step = (_optional_int(p, where) for p in [*parts, ""][:3])
        return slice(start, stop, step)
    return _int(raw, where)


def _parse_list(body: str, where: str) -> list[int] | list[bool]:
    if body == "":
        return []
    tokens = body.split(",")
    if all(t.lower() in _BOOLS for t in tokens):
        return [_BOOLS[t.lower()] for t in tokens]
    if any(t.lower() in _BOOLS for t in tokens):
        raise SelectionSyntaxError(f"{where}: a list mixes integers and Booleans")
    return [_int(t, where) for t in tokens]


def _optional_int(token: str, where: str) -> int | None:
    return None if token == "" else _int(token, where)


def _int(token: str, where: str) -> int:
    if not _INT.match(token):
        raise SelectionSyntaxError(f"{where}: {token!r} is not an integer")
    if len(token.lstrip("+-")) > 30:  # beyond any array extent; also keeps int() cheap
        raise SelectionSyntaxError(f"{where}: {token!r} is too large to be an index")
    return int(token)
