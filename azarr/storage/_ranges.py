"""HTTP byte ranges, asked and verified: one rule for `HTTPStore` and the S3 transport.

A ``206 Partial Content`` answer is data only if it is exactly what was asked
for (RFC 9110 section 14.4): its ``Content-Range`` starts at the requested
first byte, ends at the requested last byte (or at the value's end, for a range
running past it), and the body holds exactly ``last - first + 1`` bytes. A
cache or proxy in between, or a broken server, can answer otherwise; azarr
then raises `ResponseIntegrityError` (retried), never returns the bytes.

A ``416 Range Not Satisfiable`` answer reads as ``b""`` (Python slicing past the
end, `ByteRange.apply`) only when the value's size says so: the range starts at
or past the end, or the value is empty (RFC 9110 section 14.1.1: a suffix range
of a non-empty value is always satisfiable). `check_unsatisfiable` checks that
against the size the answer states (``Content-Range: bytes */N``) or, where it
states none, the size the store looks up.
"""

from __future__ import annotations

import re

from azarr.errors import ResponseIntegrityError

__all__ = [
    "check_content_range",
    "check_unsatisfiable",
    "content_range_total",
    "range_header",
    "range_limit",
    "unsatisfied_size",
]

_CONTENT_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+|\*)")
_UNSATISFIED = re.compile(r"bytes\s+\*/(\d+)")


def range_header(start: int, end: int | None) -> str:
    """The ``Range`` value for bytes ``[start, end)``; ``start < 0`` is the last ``-start`` bytes."""
    if start < 0:
        return f"bytes={start}"  # "bytes=-N"
    if end is None:
        return f"bytes={start}-"
    return f"bytes={start}-{end - 1}"


def range_limit(start: int, end: int | None, default: int) -> int:
    """The most bytes an answer to the range can hold (``default`` for an open-ended one)."""
    if start < 0:
        return min(-start, default)
    if end is None:
        return default
    return min(max(0, end - start), default)


def content_range_total(header: str | None) -> int | None:
    """The total size a ``Content-Range`` header states (None if absent, ``*`` or malformed)."""
    match = _CONTENT_RANGE.fullmatch((header or "").strip())
    return int(match[3]) if match and match[3] != "*" else None


def check_content_range(header: str | None, received: int, start: int, end: int | None, what: str) -> None:
    """Raise unless a 206 answer of ``received`` bytes is exactly the range ``[start, end)``.

    Parameters
    ----------
    header : str or None
        The answer's ``Content-Range``.
    received : int
        Bytes in the answer's body.
    start, end : int
        The requested range (``start < 0``: the last ``-start`` bytes; ``end`` None:
        to the end).
    what : str
        The request for the message (``"get 'a/0.0' in s3://b/x"``).

    Raises
    ------
    ResponseIntegrityError
        Missing or malformed ``Content-Range``, another start, an end short of what
        the value holds or past what was asked, a total that contradicts the range,
        or a body length that differs from the stated range.
    """
    match = _CONTENT_RANGE.fullmatch((header or "").strip())
    asked = range_header(start, end)
    problem = None
    if match is None:
        problem = f"missing or unparsable Content-Range {header!r}"
    else:
        first, last = int(match[1]), int(match[2])
        total = None if match[3] == "*" else int(match[3])
        if last < first or last - first + 1 != received:
            problem = f"Content-Range {header!r} does not match the {received} bytes received"
        elif total is not None and last >= total:
            problem = f"Content-Range {header!r} ends past the total it states"
        elif start < 0:
            if received > -start or (total is not None and last != total - 1):
                problem = f"Content-Range {header!r} is not the last {-start} bytes"
            elif total is not None and received != min(-start, total):
                problem = f"Content-Range {header!r} stops short of the last {-start} bytes"
        elif first != start or (end is not None and last >= end):
            problem = f"Content-Range {header!r} is not the requested {asked!r}"
        elif total is not None and last != min(end if end is not None else total, total) - 1:
            problem = f"Content-Range {header!r} stops short of {asked!r}"
    if problem is not None:
        raise ResponseIntegrityError(
            f"{what}: the server sent other bytes than asked for ({asked}): {problem}"
        )


def unsatisfied_size(header: str | None) -> int | None:
    """The size a 416 answer's ``Content-Range: bytes */N`` states (None if absent or malformed)."""
    match = _UNSATISFIED.fullmatch((header or "").strip())
    return int(match[1]) if match else None


def check_unsatisfiable(size: int, start: int, end: int | None, what: str) -> None:
    """Raise unless a 416 answer to the range ``[start, end)`` fits a value of ``size`` bytes.

    Parameters
    ----------
    size : int
        The value's size (bytes): from the answer's ``Content-Range: bytes */N``
        (`unsatisfied_size`), or looked up by the store.
    start, end : int
        The requested range (``start < 0``: the last ``-start`` bytes).
    what : str
        The request for the message.

    Raises
    ------
    ResponseIntegrityError
        The value holds bytes of the range: "not satisfiable" is a lie (or the
        value changed in between; a retry asks again).
    """
    if (start >= 0 and start < size) or (start < 0 and size > 0):
        raise ResponseIntegrityError(
            f"{what}: the server answered 416 Range Not Satisfiable to {range_header(start, end)!r}, "
            f"but the value holds {size} bytes"
        )
