"""One table from azarr errors to HTTP statuses, and the handlers that apply it.

The statuses follow what a client of a data service can act on:

| error | status | why |
| --- | --- | --- |
| ``SelectionError`` (bad text, out of bounds, ...), ``InvalidKeyError`` (a path with ``..``, ...) | 400 | the client's request is wrong |
| ``UnknownDatasetError``, ``ArrayNotFoundError``, ``GroupNotFoundError``, ``NodeNotFoundError`` | 404 | no such dataset / node |
| ``ResponseTooLargeError`` | 413 | ask for a streamed format |
| ``ThrottledError``, ``RetriesExhaustedError`` caused by throttling | 503 | the bucket keeps throttling; ``Retry-After`` tells when to come back |
| ``DeadlineExceededError``, ``StoreTimeoutError``, ``TimeoutError``, retries exhausted by timeouts | 504 | the upstream was too slow |
| other ``StoreError`` (denied, unreachable, 5xx) | 502 | the upstream failed |
| ``MetadataError``, ``CodecError``, other errors | 500 | stored data is unreadable |
"""

from __future__ import annotations

import dataclasses
import logging
import re
from typing import TYPE_CHECKING, Any

from azarr.errors import (
    ArrayNotFoundError,
    AzarrError,
    GroupNotFoundError,
    InvalidKeyError,
    NodeNotFoundError,
    RetriesExhaustedError,
    StoreError,
    ThrottledError,
)
from azarr.indexing import SelectionError

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

logger = logging.getLogger("azarr.service")

DEFAULT_RETRY_AFTER = 1.0
"""Seconds sent in ``Retry-After`` with a 503 when the upstream did not say."""


class ServiceError(AzarrError):
    """Base of the errors raised by `azarr.service` itself."""


class UnknownDatasetError(ServiceError, LookupError):
    """No dataset of that name is registered with `Datasets` (HTTP 404)."""


class DeadlineExceededError(ServiceError, TimeoutError):
    """A request ran past its deadline and was cancelled (HTTP 504)."""


class ResponseTooLargeError(ServiceError, ValueError):
    """A response format that is built in memory (JSON, PNG) would exceed its size limit (HTTP 413)."""


class UnsupportedFormatError(ServiceError, ValueError):
    """The data cannot be encoded in the requested format, e.g. object dtype as raw bytes (HTTP 400)."""


@dataclasses.dataclass(frozen=True)
class HTTPError:
    """What to answer for an exception: status code, extra headers and a JSON-ready detail."""

    status: int
    detail: str
    headers: dict[str, str] = dataclasses.field(default_factory=dict)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'\")]+")


def public_detail(exc: BaseException) -> str:
    """``str(exc)`` fit for a client: credentials redacted, URLs shown as ``<store>``."""
    from azarr.storage._redact import redact_text

    return _URL.sub("<store>", redact_text(str(exc))) or type(exc).__name__


def _logged(exc: BaseException) -> str:
    from azarr.storage._redact import redact_text

    return redact_text(str(exc)) or type(exc).__name__


def http_error_for(exc: BaseException, *, retry_after: float = DEFAULT_RETRY_AFTER) -> HTTPError:
    """The HTTP answer for ``exc`` (see the module table).

    Parameters
    ----------
    exc : BaseException
        Any exception a handler raised.
    retry_after : float
        Seconds for the ``Retry-After`` header of a 503.

    Returns
    -------
    HTTPError
        Status, detail (the exception's message, redacted, with every URL -- the
        store's, its endpoint's -- replaced by ``<store>``: a client learns which key
        failed and why, not where the service keeps its data) and headers.
    """
    detail = public_detail(exc)
    if isinstance(exc, SelectionError | UnsupportedFormatError | InvalidKeyError):
        return HTTPError(400, detail)
    if isinstance(exc, UnknownDatasetError | ArrayNotFoundError | GroupNotFoundError | NodeNotFoundError):
        return HTTPError(404, detail)
    if isinstance(exc, ResponseTooLargeError):
        return HTTPError(413, detail)
    chain = _chain(exc)
    if isinstance(exc, ThrottledError | RetriesExhaustedError) and any(
        isinstance(e, ThrottledError) for e in chain
    ):
        return HTTPError(503, detail, {"Retry-After": f"{max(0, round(retry_after))}"})
    if any(isinstance(e, TimeoutError) for e in chain):
        return HTTPError(504, detail)
    if isinstance(exc, StoreError):
        return HTTPError(502, detail)
    return HTTPError(500, detail if isinstance(exc, AzarrError) else "internal server error")


def install_error_handlers(app: Starlette, *, retry_after: float = DEFAULT_RETRY_AFTER) -> None:
    """Answer azarr errors and timeouts raised by ``app``'s handlers with `http_error_for`.

    Parameters
    ----------
    app : starlette.applications.Starlette
        A Starlette or FastAPI application.
    retry_after : float
        Seconds for ``Retry-After`` on 503 responses.

    Notes
    -----
    Responses are JSON ``{"detail": message}``, FastAPI's shape for ``HTTPException``.
    """
    from starlette.responses import JSONResponse

    async def handle(request: Request, exc: Exception) -> Response:
        error = http_error_for(exc, retry_after=retry_after)
        if error.status >= 500:
            # The operator's log keeps the store's location (credentials still redacted).
            logger.warning("%s %s -> %d: %s", request.method, request.url.path, error.status, _logged(exc))
        return JSONResponse({"detail": error.detail}, status_code=error.status, headers=error.headers)

    handlers: dict[Any, Any] = {AzarrError: handle, TimeoutError: handle}
    for exc_type, handler in handlers.items():
        app.add_exception_handler(exc_type, handler)
