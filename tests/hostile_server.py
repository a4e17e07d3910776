"""A hostile HTTP / S3 / GCS server for the transport tests, run as a subprocess on loopback.

``python tests/hostile_server.py --port P`` answers every request from a *case*
encoded in the URL path, so one server serves every test and fuzz case with no
state: the first path segment that starts with ``c-`` is ``c-`` + URL-safe
base64 of a JSON object, and the rest of the path is the key. HTTPStore roots
look like ``http://127.0.0.1:P/c-XXXX``, S3Store roots like ``bucket/c-XXXX``
(path-style requests ``/bucket/c-XXXX/key``; signatures are not checked),
AzureBlobStore roots like ``container/c-XXXX`` (``account_url`` the server's URL plus an
account segment; ``x-ms-range`` read as ``Range``), GCSStore roots like ``bucket/c-XXXX`` (object downloads
``/download/storage/v1/b/bucket/o/c-XXXX%2Fkey?alt=media`` are answered as any
GET; the JSON API's object and bucket resources, ``/storage/v1/b/...``, are
answered honestly: an object's ``size`` is ``head_length`` or the value's).

The value of a key is `truth` (key, ``size``): deterministic bytes, so a test
knows what an honest answer holds. Case fields (all optional):

``size``        bytes of every value (default 64)
``files``       ``{key: base64}``: these keys are served honestly with these bytes
``hostile``     key suffixes the behaviour below applies to (default: every key);
                other keys are answered honestly (404 when neither in files nor hostile)
``status``      status of the answer (default 200; 206 for honoured ranges)
``body``        ``exact`` | ``endless`` (64 KiB blocks forever) | ``long`` (the value
                then 1 MiB more) | ``short`` (half, then the connection is closed) |
                ``trickle`` (one byte per ``interval`` s, forever) | ``bomb`` (gzip of
                ``bomb_mib`` MiB of zeros with ``Content-Encoding: gzip``) | ``gzip``
                (the value, gzip-encoded, honestly labelled) | ``empty``
``length``      ``true`` (default) | ``none`` (chunked) | ``huge`` (``Content-Length:
                1099511627776``) | ``small`` (declares half)
``range``       answer to a ``Range`` request: ``honour`` (default) | ``ignore`` (200,
                whole) | ``shift`` (206, one byte later, honest Content-Range) |
                ``short`` (206, half of it, honest Content-Range) | ``missing`` (206,
                no Content-Range) | ``lie`` (206, Content-Range of the request, bytes
                from elsewhere) | ``total`` (206, a Content-Range total of 10**15)
``head_length`` ``Content-Length`` a ``HEAD`` declares (default: the value's size)
``redirect``    ``Location`` of a 302 answer
``headers``     extra response headers
``interval``    seconds between trickled bytes (default 1.0)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import gzip
import hashlib
import json
import zlib
from typing import Any

from aiohttp import web

BLOCK = 64 * 1024
HUGE = 1 << 40


def encode_case(case: dict[str, Any]) -> str:
    """The path segment of ``case`` (``c-`` + URL-safe base64 JSON, no padding)."""
    raw = json.dumps(case, separators=(",", ":"), sort_keys=True).encode()
    return "c-" + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_case(segment: str) -> dict[str, Any]:
    raw = segment[2:]
    case: dict[str, Any] = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)))
    return case


def truth(key: str, size: int) -> bytes:
    """The honest value of ``key``: ``size`` bytes repeating its SHA-256."""
    seed = hashlib.sha256(key.encode()).digest()
    return (seed * (size // len(seed) + 1))[:size]


def _split(path: str) -> tuple[dict[str, Any], str] | None:
    parts = path.lstrip("/").split("/")
    for i, part in enumerate(parts):
        if part.startswith("c-"):
            return decode_case(part), "/".join(parts[i + 1 :])
    return None


def _parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``[first, last]`` of ``bytes=a-b`` / ``bytes=a-`` / ``bytes=-n`` within ``size``."""
    spec = header.strip().removeprefix("bytes=")
    a, _, b = spec.partition("-")
    if not a:
        n = int(b)
        return (max(0, size - n), size - 1) if size else None
    first = int(a)
    last = min(int(b), size - 1) if b else size - 1
    return (first, last) if first < size else None


async def handle(request: web.Request) -> web.StreamResponse:
    if request.path.startswith("/storage/v1/b/"):
        return _gcs_resource(request)
    found = _split(request.path)
    if found is None:
        return web.Response(status=404, text="no case")
    case, key = found
    size = int(case.get("size", 64))
    files = case.get("files", {})
    hostile = case.get("hostile")
    if key in files:
        return _honest(request, base64.b64decode(files[key]))
    if hostile is not None and not any(key.endswith(s) for s in hostile):
        return web.Response(status=404, body=_xml_error("NoSuchKey"), content_type="application/xml")
    value = truth(key, size)
    headers = dict(case.get("headers", {}))
    if "redirect" in case:
        return web.Response(status=302, headers={"Location": case["redirect"], **headers})
    if request.method == "HEAD":
        length = case.get("head_length", len(value))
        response = web.StreamResponse(status=case.get("status", 200), headers=headers)
        response.headers["Content-Length"] = str(length)
        await response.prepare(request)
        return response
    status = int(case.get("status", 200))
    rng = _range_of(request)
    if rng and status == 200:
        status, value, headers = _ranged(case, rng, value, headers)
        if status == 416:
            return web.Response(status=416, headers={"Content-Range": f"bytes */{size}"})
    if status >= 400 and case.get("body", "exact") == "exact":
        code = "NoSuchKey" if status == 404 else "InternalError"
        return web.Response(status=status, body=_xml_error(code), headers=headers)
    return await _send_body(request, case, status, value, headers)


def _gcs_resource(request: web.Request) -> web.Response:
    """The GCS JSON API's bucket resource (any bucket exists) or object resource."""
    bucket, _, rest = request.path.removeprefix("/storage/v1/b/").partition("/o/")
    if not rest:
        return web.json_response({"kind": "storage#bucket", "name": bucket.rstrip("/")})
    found = _split(rest)
    if found is None:
        return web.json_response({"error": {"code": 404, "message": "no case"}}, status=404)
    case, key = found
    hostile = case.get("hostile")
    if key in case.get("files", {}):
        size = len(base64.b64decode(case["files"][key]))
    elif hostile is None or any(key.endswith(s) for s in hostile):
        size = int(case.get("head_length", case.get("size", 64)))
    else:
        return web.json_response({"error": {"code": 404, "message": "No such object"}}, status=404)
    resource = {
        "kind": "storage#object",
        "bucket": bucket,
        "name": rest,
        "size": str(size),
        "generation": "7",
    }
    return web.json_response(resource)


def _xml_error(code: str) -> bytes:
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>m</Message></Error>".encode()


def _range_of(request: web.Request) -> str | None:
    """The request's ``Range`` (Azure's SDK sends ``x-ms-range``)."""
    return request.headers.get("Range") or request.headers.get("x-ms-range")


def _honest(request: web.Request, value: bytes) -> web.StreamResponse:
    rng = _range_of(request)
    if rng and request.method == "GET":
        span = _parse_range(rng, len(value))
        if span is None:
            return web.Response(status=416, headers={"Content-Range": f"bytes */{len(value)}"})
        first, last = span
        return web.Response(
            status=206,
            body=value[first : last + 1],
            headers={"Content-Range": f"bytes {first}-{last}/{len(value)}"},
        )
    return web.Response(body=value, headers={"ETag": '"honest"'})


def _ranged(
    case: dict[str, Any], rng: str, value: bytes, headers: dict[str, str]
) -> tuple[int, bytes, dict[str, str]]:
    mode = case.get("range", "honour")
    size = len(value)
    if mode == "ignore":
        return 200, value, headers
    span = _parse_range(rng, size)
    if span is None:
        return 416, b"", headers
    first, last = span
    if mode == "shift" and last + 1 < size:
        first, last = first + 1, last + 1
    elif mode == "short" and last > first:
        last = first + (last - first) // 2
    body = value[first : last + 1]
    if mode == "lie":
        body = truth("elsewhere", size)[first : last + 1]
    headers = dict(headers)
    if mode == "total":
        headers["Content-Range"] = f"bytes {first}-{last}/{10**15}"
    elif mode != "missing":
        headers["Content-Range"] = f"bytes {first}-{last}/{size}"
    return 206, body, headers


async def _send_body(
    request: web.Request, case: dict[str, Any], status: int, value: bytes, headers: dict[str, str]
) -> web.StreamResponse:
    kind = case.get("body", "exact")
    length_mode = case.get("length", "true")
    if kind == "bomb":
        value = _bomb(int(case.get("bomb_mib", 256)))
        headers["Content-Encoding"] = "gzip"
    elif kind == "gzip":
        value = gzip.compress(value)
        headers["Content-Encoding"] = "gzip"
    elif kind == "empty":
        value = b""
    response = web.StreamResponse(status=status, headers=headers)
    if length_mode == "true" and kind not in ("endless", "trickle", "long"):
        response.content_length = len(value)
    elif length_mode == "huge":
        response.content_length = HUGE
    elif length_mode == "small":
        response.content_length = len(value) // 2
    else:
        response.enable_chunked_encoding()
    await response.prepare(request)
    try:
        if kind == "endless":
            block = (value or b"x") * (BLOCK // max(1, len(value) or 1) + 1)
            while True:
                await response.write(block[:BLOCK])
        elif kind == "trickle":
            interval = float(case.get("interval", 1.0))
            for byte in (value or b"x") * 1000:
                await response.write(bytes([byte]))
                await asyncio.sleep(interval)
        elif kind == "short":
            await response.write(value[: len(value) // 2])
            if request.transport is not None:
                request.transport.close()
            return response
        elif kind == "long":
            await response.write(value)
            for _ in range(16):
                await response.write(b"\1" * BLOCK)
        else:
            await response.write(value)
        await response.write_eof()
    except (ConnectionResetError, ConnectionError, RuntimeError):
        pass  # the client hung up, as it should on a hostile body
    return response


@functools.cache
def _bomb(mib: int) -> bytes:
    """gzip of ``mib`` MiB of zeros (about 1/1000 of that), made once per size."""
    inflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\0" * 2**20
    return b"".join([*(inflater.compress(zeros) for _ in range(mib)), inflater.flush()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    web.run_app(app, host="127.0.0.1", port=args.port, access_log=None, print=None, shutdown_timeout=0.5)


if __name__ == "__main__":
    main()
