"""GCS reads through azarr's bounded body reader (`GCSStore`'s downloads and resources).

gcsfs reads every response whole (``await response.read()``) before looking at
it: an endless chunked body, a ``Content-Encoding`` bomb or a 200 declaring a
1 TiB ``Content-Length`` is read until memory runs out, and a ``206`` is
returned whatever its ``Content-Range`` says. So `GCSStore` keeps gcsfs for
what it does well -- credentials (and their refresh), the endpoint, the aiohttp
session and its options, listings and uploads -- and sends the object download
(``GET {endpoint}/download/storage/v1/b/{bucket}/o/{object}?alt=media``, the
request gcsfs's ``_cat_file`` sends, with its headers and ``userProject``) on
gcsfs's session itself, reading the body with `read_body`: bounded by the
read's `expected_body` bound, error bodies a few KiB, gzip/deflate inflated
incrementally up to the bound. Error statuses become the exceptions gcsfs
raises for them (``gcsfs.retry.validate_response``), so `GCSStore` classifies
them as before; gcsfs's retry rules apply when the store sets ``retries``.

The JSON API's object and bucket resources (``GET .../storage/v1/b/{bucket}/o/{object}``,
what ``getsize``/``exists``/generation checks and the missing-bucket check read) go
the same way (`resource_get`), bounded by `RESOURCE_BYTES`. Listings stay gcsfs's.

The answer's status is interpreted by `GCSStore` (a ``206`` checked against the
``Range`` asked, a ``416`` verified against the object's size).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from azarr.errors import ResponseIntegrityError, StoreError
from azarr.storage._aiohttp import Allocator, ConnectionDropped, no_silent_resend, read_body, unwrap_dropped

__all__ = ["RESOURCE_BYTES", "MediaReply", "gcs_get", "media_get", "resource_get"]

#: Most bytes of a JSON API resource (an object's or bucket's metadata: a few KiB, custom
#: metadata at most 8 KiB on GCS).
RESOURCE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MediaReply:
    """A download's answer: a 2xx or 416 status, its headers, and its body.

    ``received`` is the body when it went into the caller's buffer (``allocate``);
    ``body`` is ``b""`` then.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes
    received: memoryview | None

    @property
    def value(self) -> bytes | memoryview:
        return self.body if self.received is None else self.received


def media_url(fs: Any, bucket: str, name: str) -> str:
    """The download URL of ``bucket/name`` on ``fs``'s endpoint (gcsfs's ``GCSFileSystem.url``)."""
    return f"{fs._location}/download/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}"


async def media_get(
    fs: Any,
    bucket: str,
    name: str,
    *,
    what: str,
    range_header: str | None = None,
    generation: object | None = None,
    allocate: Allocator | None = None,
    partial_limit: int | None = None,
    window: tuple[int, int | None] | None = None,
) -> MediaReply:
    """Download ``bucket/name`` (bytes ``range_header`` of it; that ``generation``) on ``fs``.

    Parameters
    ----------
    fs : gcsfs.GCSFileSystem
        An asynchronous gcsfs filesystem whose session is open.
    what : str
        The request for messages (``"get 'a/0.0' in gs://bucket/x"``).
    range_header : str, optional
        The ``Range`` value (`azarr.storage._ranges.range_header`).
    generation : int or str, optional
        Read that object generation only (GCS ``generation=``; 404 once it is gone).
    allocate : callable, optional
        Where a 200 body of known length goes (`read_body`).
    partial_limit : int, optional
        Most bytes of a 206 body (the range's length).
    window : (int, int or None), optional
        The range ``range_header`` asks, as ``(start, end)``: all of a 200 body (a
        server that ignored ``Range``) that is kept, read no further (`read_body`).

    Returns
    -------
    MediaReply
        Status 200, 206 or 416 (the caller interprets it).

    Raises
    ------
    BodyTooLargeError
        The body is (or declares to be) larger than the read's bound.
    StoreError
        A 1xx/3xx answer (no redirect is followed), or a ``Content-Encoding``
        azarr does not decode.
    ResponseIntegrityError
        A ``Content-Encoding`` on a partial (206) answer.
    Exception
        What gcsfs raises for the error status (``FileNotFoundError`` for 404,
        ``OSError("Forbidden...")`` for 403, ``HttpError`` ...), or the aiohttp /
        OS error of a failed connection (`ConnectionDropped` unwrapped).
    """
    params: dict[str, Any] = {"alt": "media"}
    if generation is not None:
        params["generation"] = str(generation)
    # Accept-Encoding identity: GCS serves an object stored with Content-Encoding gzip
    # decompressed ("decompressive transcoding"), as gcsfs users get it (aiohttp inflated
    # it for them); a server that encodes anyway is inflated by read_body, bounded.
    headers = {"Accept-Encoding": "identity"}
    if range_header is not None:
        headers["Range"] = range_header
    url = media_url(fs, bucket, name)
    # gcsfs's retry rules apply when the store asked for more than one attempt.
    send: Any = getattr(fs, "azarr_get", gcs_get)
    return await send(  # type: ignore[no-any-return]
        fs,
        url,
        params=params,
        headers=headers,
        what=what,
        allocate=allocate,
        partial_limit=partial_limit,
        window=window,
    )


async def resource_get(fs: Any, path: str, *args: str, what: str) -> dict[str, Any]:
    """The JSON resource at ``path`` (gcsfs's form: ``"b/{}/o/{}"`` and its ``args``), bounded.

    Raises
    ------
    BodyTooLargeError
        The resource is larger than `RESOURCE_BYTES`.
    StoreError
        Not a JSON object, or an answer other than 200.
    Exception
        gcsfs's exception for an error status (as `media_get`).
    """
    import json

    send: Any = getattr(fs, "azarr_get", gcs_get)
    reply: MediaReply = await send(
        fs, fs._format_path(path, args), params={}, headers={}, what=what, limit=RESOURCE_BYTES
    )
    try:
        resource = json.loads(reply.body) if reply.status == 200 else None
    except ValueError:
        resource = None
    if not isinstance(resource, dict):
        raise StoreError(f"{what}: the server answered HTTP {reply.status} without a JSON object")
    return resource


async def gcs_get(
    fs: Any,
    url: str,
    *,
    params: Mapping[str, str],
    headers: Mapping[str, str],
    what: str,
    allocate: Allocator | None = None,
    limit: int | None = None,
    partial_limit: int | None = None,
    window: tuple[int, int | None] | None = None,
) -> MediaReply:
    """One GET of ``url`` on ``fs``'s session with its credentials; the body read by `read_body`
    (``limit``, default the read's bound). Raises as `media_get`."""
    from gcsfs.retry import validate_response

    await fs._set_session()
    session = fs.session
    # gcsfs's requests_timeout (seconds) if set; else the session's timeouts (gcsfs would
    # pass None, which disables aiohttp's timeouts for the request).
    timeout = {} if fs.requests_timeout is None else {"timeout": fs.requests_timeout}
    try:
        async with session.request(
            "GET",
            url,
            params=fs._get_params(dict(params)),  # adds userProject for requester-pays buckets
            headers=fs._get_headers(dict(headers)),  # User-Agent and the credentials (refreshed)
            allow_redirects=False,
            auto_decompress=False,  # read_body inflates, bounded
            middlewares=(no_silent_resend,),
            **timeout,
        ) as resp:
            status = resp.status
            encoding = resp.headers.get("Content-Encoding", "").strip().lower()
            if status == 206 and encoding not in ("", "identity"):
                resp.close()
                raise ResponseIntegrityError(
                    f"{what}: the server answered a byte range with Content-Encoding {encoding!r}"
                )
            body, received = await read_body(
                resp,
                allocate,
                what=what,
                limit=limit,
                partial_limit=partial_limit,
                decode=True,
                window=window,
            )
            reply_headers = resp.headers
    except ConnectionDropped as exc:
        cause = unwrap_dropped(exc)
        raise cause from None
    if status >= 400 and status != 416:
        validate_response(status, body, url)  # raises gcsfs's exception for the status
    if status not in (200, 206, 416):
        raise StoreError(f"{what}: the server answered HTTP {status}, not the object")
    return MediaReply(status, reply_headers, body, received)
