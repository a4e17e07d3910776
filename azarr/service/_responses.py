"""Array results as HTTP responses: JSON for small ones, ``.npy`` and raw bytes streamed in slabs.

Streamed responses carry ``Content-Length`` and the headers ``X-Array-Shape``
(``"10,20"``; ``""`` for a 0-d result) and ``X-Array-Dtype`` (NumPy's string, always
little-endian, e.g. ``"<f4"``). The first slab is read before the response
starts, so a bad selection or a failing store still gets its own status; a
failure later cuts the body short, which ``Content-Length`` lets the client see.
While one slab is sent the next is read. Slabs are a quarter of ``max_bytes``
(and at most a sixteenth of the shared budget): the slab being sent and the next
one being read stay within ``max_bytes``, whatever the size of the result.

Every body byte is reserved in one `ResponseLimits` budget shared by all
responses, from before it is produced until the server has accepted it, and is
handed to the server in small pieces under a send timeout (`azarr.service._limits`):
memory stays bounded however many clients ask, and whether or not they read.
JSON is encoded a block at a time, so a large JSON answer never holds the event
loop (``json.dumps`` of millions of numbers takes seconds, all under the GIL).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import io
import json
import math
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.service._errors import ResponseTooLargeError, UnsupportedFormatError
from azarr.service._limits import ResponseLimits, default_limits
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


@functools.cache
def _bounded_body() -> Callable[..., Response]:
    """`_BoundedBody`, made on first use: Starlette is imported only by a service."""
    from starlette.responses import StreamingResponse

    class _BoundedBody(StreamingResponse):
        """A response whose body parts are sent through `ResponseLimits.send_body`
        (pieces, a send timeout) while their producer holds budget reservations."""

        def __init__(
            self,
            parts: AsyncGenerator[bytes | memoryview, None],
            limits: ResponseLimits,
            *,
            headers: dict[str, str],
            media_type: str,
            what: str,
        ) -> None:
            super().__init__(parts, headers=headers, media_type=media_type)
            self._parts, self._limits, self._what = parts, limits, what

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            try:
                start = {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
                await send(start)
                await self._limits.send_body(send, self._parts, what=self._what)
            finally:
                await self._parts.aclose()  # releases what the producer still holds

    return _BoundedBody


class _Held:
    """A reservation entered by hand (it outlives the block that took it: read ahead, handed on)."""

    def __init__(self, limits: ResponseLimits, nbytes: int, small: bool) -> None:
        self._reservation = limits.reserve(nbytes, small=small)
        self._held = False

    async def take(self) -> _Held:
        await self._reservation.__aenter__()
        self._held = True
        return self

    async def release(self) -> None:
        if self._held:
            self._held = False
            await self._reservation.__aexit__(None, None, None)


async def _read_held(plan: SelectionPlan, slab: Any, held: _Held) -> tuple[np.ndarray[Any, Any], _Held]:
    """Reserve, then read one slab; the reservation goes with the result (released on failure)."""
    await held.take()
    try:
        return await plan.read(slab), held
    except BaseException:
        await held.release()
        raise


async def _slab_parts(
    plan: SelectionPlan,
    slabs: Iterator[tuple[Any, ...]],
    first: tuple[np.ndarray[Any, Any], _Held],
    header: bytes,
    dtype: np.dtype[Any],
    reserve: Callable[[], _Held],
) -> AsyncGenerator[bytes | memoryview, None]:
    """``header``, then every slab's bytes; the next slab is read while one is sent, and each
    slab's reservation is released once the sender asks for what follows it."""
    if header:
        yield header
    # Every reference to a slab goes with its reservation (a slab kept alive by a name in
    # this frame would be memory the budget no longer counts).
    current: np.ndarray[Any, Any] | None
    current, held = first
    del first
    pending: asyncio.Future[tuple[np.ndarray[Any, Any], _Held]] | None = None
    try:
        for slab in slabs:
            pending = asyncio.ensure_future(_read_held(plan, slab, reserve()))
            yield _as_bytes(current, dtype)
            current = None
            await held.release()  # resumed: every piece of it was accepted by the server
            current, held = await pending
            pending = None
        yield _as_bytes(current, dtype)
        current = None
    finally:
        await held.release()
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                _, extra = await pending
                await extra.release()  # it finished reading before the cancel reached it


#: Bytes of array data encoded to JSON per piece of text (the encoding holds the GIL:
#: small pieces keep the event loop answering), and a bound on the text of one piece
#: relative to them (reserved with the data).
_JSON_BLOCK = 16 * 1024
_JSON_TEXT_FACTOR = 8


def _json_text(data: np.ndarray[Any, Any]) -> Iterator[str]:
    """``json.dumps(to_json_data(data))`` in pieces of about `_JSON_BLOCK` bytes of ``data``."""
    if data.ndim == 0 or data.nbytes <= _JSON_BLOCK:
        yield json.dumps(to_json_data(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return
    yield "["
    row = data.nbytes // len(data) if len(data) else 0
    if data.ndim > 1 and row > _JSON_BLOCK:
        for i in range(len(data)):
            if i:
                yield ","
            yield from _json_text(data[i])
    else:
        step = max(1, _JSON_BLOCK // max(1, row))
        for start in range(0, len(data), step):
            text = json.dumps(
                to_json_data(data[start : start + step]),
                ensure_ascii=False,
                allow_nan=False,
                separators=(",", ":"),
            )
            yield ("," if start else "") + text[1:-1]
    yield "]"


async def _json_parts(
    plan: SelectionPlan, data: np.ndarray[Any, Any], held: _Held
) -> AsyncGenerator[bytes, None]:
    """The JSON document, encoded a piece at a time (``held`` covers the data and one piece of
    text: a response never waits for the budget while it holds some of it)."""
    try:
        head = {"shape": list(plan.shape), "dtype": plan.dtype.str}
        yield json.dumps(head, separators=(",", ":"))[:-1].encode() + b',"data":'
        # ``data`` of a single element comes 1-d from `SelectionPlan.read`: the value, not [value].
        for text in _json_text(data.reshape(plan.shape)):
            yield text.encode()
        yield b"}"
    finally:
        await held.release()


async def array_response(
    plan: SelectionPlan,
    format: str = "npy",
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    json_max_bytes: int = DEFAULT_JSON_MAX_BYTES,
    headers: dict[str, str] | None = None,
    limits: ResponseLimits | None = None,
) -> Response:
    """Read ``plan`` into a response of ``format``, within ``limits``.

    Parameters
    ----------
    plan : SelectionPlan
        The validated selection.
    format : {"npy", "json", "raw"}
        ``json``: ``{"shape", "dtype", "data"}``, encoded and sent a piece at a time
        (small results; no ``Content-Length``); ``npy``: a ``.npy`` file, streamed;
        ``raw``: the C-order little-endian bytes, streamed, shape and dtype in headers.
    max_bytes : int
        Bytes of result one streamed response holds at most (slabs of a quarter of
        this, and at most `ResponseLimits.slab_bytes`).
    json_max_bytes : int
        Largest result (array bytes) answered as JSON.
    headers : dict, optional
        Extra response headers.
    limits : ResponseLimits, optional
        The byte budget shared by every response in flight and the send timeout
        (default: the process-wide `default_limits`). Every byte of a body is
        reserved there from before it is produced until the server accepted it.

    Returns
    -------
    starlette.responses.Response
        A streaming response.

    Raises
    ------
    UnsupportedFormatError
        Unknown format, or a dtype the format cannot carry (object dtypes).
    ResponseTooLargeError
        JSON asked for a result larger than ``json_max_bytes``.
    """
    if format not in FORMATS:
        raise UnsupportedFormatError(f"unknown format {format!r}; expected one of {', '.join(FORMATS)}")
    limits = limits or default_limits()
    extra = dict(headers or {})
    small = plan.nbytes <= limits.small_bytes
    if format == "json":
        if plan.nbytes > json_max_bytes:
            raise ResponseTooLargeError(
                f"the selection is {plan.nbytes} bytes, above the JSON limit of {json_max_bytes};"
                " ask for format=npy or format=raw"
            )
        to_json_data(np.zeros(1, plan.dtype))  # refuses dtypes JSON cannot carry, before any read
        nbytes = plan.nbytes + _JSON_BLOCK * _JSON_TEXT_FACTOR
        data, held = await _read_held(plan, None, _Held(limits, nbytes, nbytes <= limits.small_bytes))
        return _bounded_body()(
            _json_parts(plan, data, held),
            limits,
            headers=extra,
            media_type="application/json",
            what=f"JSON response of {plan.nbytes} array bytes",
        )
    if plan.dtype.hasobject:
        raise UnsupportedFormatError(f"dtype {plan.dtype} has Python objects; ask for format=json")
    dtype = little_endian(plan.dtype)
    header = npy_header(plan.shape, dtype) if format == "npy" else b""
    slab_bytes = max(1, min(max_bytes // 4, limits.slab_bytes))
    # A slab of another byte order is copied once more when it is sent (_as_bytes).
    copies = 1 if dtype == plan.dtype else 2

    def reserve() -> _Held:
        return _Held(limits, min(slab_bytes, plan.nbytes) * copies, small)

    slabs = plan.slabs(slab_bytes)
    first = await _read_held(plan, next(slabs), reserve())
    extra.update(array_headers(plan.shape, dtype))
    extra["Content-Length"] = str(len(header) + math.prod(plan.shape) * dtype.itemsize)
    media = "application/x-npy" if format == "npy" else "application/octet-stream"
    return _bounded_body()(
        _slab_parts(plan, slabs, first, header, dtype, reserve),
        limits,
        headers=extra,
        media_type=media,
        what=f"{format} response of {plan.nbytes} bytes",
    )
