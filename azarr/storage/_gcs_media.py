"""GCS object downloads through azarr's bounded body reader (`GCSStore`'s reads).

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

__all__ = ["MediaReply", "media_get"]


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
    from gcsfs.retry import validate_response

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
    await fs._set_session()
    session = fs.session
    try:
        async with session.request(
            "GET",
            url,
            params=fs._get_params(params),  # adds userProject for requester-pays buckets
            headers=fs._get_headers(headers),  # User-Agent and the credentials (refreshed)
            timeout=fs.requests_timeout,
            allow_redirects=False,
            auto_decompress=False,  # read_body inflates, bounded
            middlewares=(no_silent_resend,),
        ) as resp:
            status = resp.status
            encoding = resp.headers.get("Content-Encoding", "").strip().lower()
            if status == 206 and encoding not in ("", "identity"):
                resp.close()
                raise ResponseIntegrityError(
                    f"{what}: the server answered a byte range with Content-Encoding {encoding!r}"
                )
            body, received = await read_body(
                resp, allocate, what=what, partial_limit=partial_limit, decode=True
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
