"""Array results as HTTP responses: JSON for small ones, ``.npy`` and raw bytes streamed in slabs.

Streamed responses carry ``Content-Length`` and the headers ``X-Array-Shape``
(``"10,20"``; ``""`` for a 0-d result) and ``X-Array-Dtype`` (NumPy's string, always
little-endian, e.g. ``"<f4"``). The first slab is read before the response
starts, so a bad selection or a failing store still gets its own status; a
failure later cuts the body short, which ``Content-Length`` lets the client see.
While one slab is sent the next is read. Slabs are a quarter of ``max_bytes``:
the slab being sent, the next one being read and the server's copies of unsent
bytes (h11 joins a body chunk into one ``bytes``; the transport buffers what the
socket did not take) stay within ``max_bytes``, whatever the size of the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.service._errors import ResponseTooLargeError, UnsupportedFormatError
from azarr.service._plan import SelectionPlan

if TYPE_CHECKING:
    from starlette.responses import Response

FORMATS = ("json", "npy", "raw")
"""Response formats of `array_response`."""

DEFAULT_MAX_BYTES = 32 * 1024 * 1024
"""Bytes of result a streamed response holds at most (slabs of a quarter of this)."""

DEFAULT_JSON_MAX_BYTES = 8 * 1024 * 1024
"""Largest result (in array bytes) answered as JSON; larger ones get HTTP 413."""


def little_endian(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """``dtype`` with every field in little-endian byte order (the wire order of raw responses)."""
    return dtype.newbyteorder("<") if dtype.byteorder == ">" or dtype.fields else dtype


def array_headers(shape: tuple[int, ...], dtype: np.dtype[Any]) -> dict[str, str]:
    """The ``X-Array-Shape`` and ``X-Array-Dtype`` headers describing a raw or ``.npy`` body."""
    return {"X-Array-Shape": ",".join(str(n) for n in shape), "X-Array-Dtype": little_endian(dtype).str}


def npy_header(shape: tuple[int, ...], dtype: np.dtype[Any]) -> bytes:
    """The ``.npy`` (format 1.0/2.0) header for a C-order array of ``shape`` and ``dtype``."""
    header = {
        "descr": np.lib.format.dtype_to_descr(little_endian(dtype)),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    buf = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buf, header)
    except ValueError:  # header longer than 64 KiB (a huge structured dtype)
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, header)
    return buf.getvalue()


def to_json_data(data: np.ndarray[Any, Any]) -> Any:
    """Nested lists for JSON: NaN and infinities become ``null``, complex ``[re, im]``,
    datetimes ISO strings, bytes Latin-1 strings.

    Raises
    ------
    UnsupportedFormatError
        Structured, object or other dtypes JSON cannot carry.
    """
    kind = data.dtype.kind
    if kind in "biu":
        return data.tolist()
    if kind == "f":
        if np.isfinite(data).all():
            return data.tolist()
        out = data.astype(object)
        out[~np.isfinite(data)] = None
        return out.tolist()
    if kind == "c":
        return to_json_data(np.stack([data.real, data.imag], axis=-1))
    if kind in "Mm":
        return np.datetime_as_string(data).tolist() if kind == "M" else data.astype(str).tolist()
    if kind == "U":
        return data.tolist()
    if kind == "S":
        return np.char.decode(data, "latin-1").tolist()
    raise UnsupportedFormatError(f"dtype {data.dtype} cannot be sent as JSON; ask for format=npy")


def _as_bytes(data: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> memoryview:
    wire = np.ascontiguousarray(data, dtype=dtype)
    return wire.reshape(-1).view(np.uint8).data if wire.size else memoryview(b"")


async def _stream(
    plan: SelectionPlan,
    slabs: Iterator[tuple[Any, ...]],
    first: np.ndarray[Any, Any],
    header: bytes,
    dtype: np.dtype[Any],
) -> AsyncIterator[bytes | memoryview]:
    if header:
        yield header
    current = first
    pending: asyncio.Future[np.ndarray[Any, Any]] | None = None
    try:
        for slab in slabs:
            pending = asyncio.ensure_future(plan.read(slab))  # read the next while this one is sent
            yield _as_bytes(current, dtype)
            current = await pending
            pending = None
        yield _as_bytes(current, dtype)
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


async def array_response(
    plan: SelectionPlan,
    format: str = "npy",
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    json_max_bytes: int = DEFAULT_JSON_MAX_BYTES,
    headers: dict[str, str] | None = None,
) -> Response:
    """Read ``plan`` into a response of ``format``.

    Parameters
    ----------
    plan : SelectionPlan
        The validated selection.
    format : {"npy", "json", "raw"}
        ``json``: ``{"shape", "dtype", "data"}`` built in memory (small results);
        ``npy``: a ``.npy`` file, streamed; ``raw``: the C-order little-endian bytes,
        streamed, shape and dtype in headers.
    max_bytes : int
        Bytes of result held in memory at once by a streamed response.
    json_max_bytes : int
        Largest result (array bytes) answered as JSON.
    headers : dict, optional
        Extra response headers.

    Returns
    -------
    starlette.responses.Response
        ``JSONResponse`` or ``StreamingResponse``.

    Raises
    ------
    UnsupportedFormatError
        Unknown format, or a dtype the format cannot carry (object dtypes).
    ResponseTooLargeError
        JSON asked for a result larger than ``json_max_bytes``.
    """
    from starlette.responses import JSONResponse, StreamingResponse

    if format not in FORMATS:
        raise UnsupportedFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    extra = dict(headers or {})
    if format == "json":
        if plan.nbytes > json_max_bytes:
            raise ResponseTooLargeError(
                f"the selection is {plan.nbytes} bytes, above the JSON limit of {json_max_bytes};"
                " ask for format=npy or format=raw"
            )
        data = await plan.read()
        body = {"shape": list(plan.shape), "dtype": plan.dtype.str, "data": to_json_data(data)}
        return JSONResponse(body, headers=extra)
    if plan.dtype.hasobject:
        raise UnsupportedFormatError(f"dtype {plan.dtype} has Python objects; ask for format=json")
    dtype = little_endian(plan.dtype)
    header = npy_header(plan.shape, dtype) if format == "npy" else b""
    slabs = plan.slabs(max(1, max_bytes // 4))
    first = await plan.read(next(slabs))
    extra.update(array_headers(plan.shape, dtype))
    extra["Content-Length"] = str(len(header) + math.prod(plan.shape) * dtype.itemsize)
    media = "application/x-npy" if format == "npy" else "application/octet-stream"
    return StreamingResponse(_stream(plan, slabs, first, header, dtype), media_type=media, headers=extra)
