"""One table from backend failures to azarr's error tree, for every network driver.

httpx maps httpcore's exceptions to its own in one place
(``map_httpcore_exceptions``); azarr does the same for its stores. The S3
transport, s3fs/gcsfs/fsspec stores and the HTTP store all classify through
`translate_error` (exceptions, including S3/GCS error responses) and
`error_for_status` (a bare HTTP status), so a 503 or a reset means the same
thing -- and is retried the same way by the scheduler -- whatever carried it:

| backend failure | azarr error |
| --- | --- |
| S3 ``NoSuchBucket`` | `StoreUnavailableError` |
| HTTP 401/403, ``AccessDenied``, bad keys | `PermissionDeniedError` |
| HTTP 429/503 ``SlowDown``, throttling codes | `ThrottledError` (retried) |
| HTTP 408/5xx, ``InternalError`` | `TransientStoreError` (retried) |
| HTTP 409 ``ConditionalRequestConflict`` | `TransientStoreError` (retried) |
| HTTP 412, ``PreconditionFailed``, GCS ``conditionNotMet`` | `PreconditionFailedError` |
| TLS certificate not trusted, wrong host | `StoreUnavailableError` (not retried) |
| refused, reset, DNS, server disconnected | `ConnectionFailedError` (retried) |
| read timeouts, bodies cut short | `TransientStoreError` (retried) |
| anything else | `StoreError` |

A missing key is not an error: drivers answer ``None`` for 404 / ``NoSuchKey``
before classifying.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from azarr.errors import (
    ConnectionFailedError,
    PermissionDeniedError,
    PreconditionFailedError,
    StoreError,
    StoreUnavailableError,
    ThrottledError,
    TransientStoreError,
)
from azarr.storage._redact import scrub_exception

__all__ = ["backend_codes", "error_for_status", "is_invalid_range", "is_no_such_bucket", "translate_error"]

# Backend error codes (S3 ``Error.Code``, HTTP status as text) by azarr meaning.
_PERMISSION_CODES = frozenset(
    {
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "InvalidClientTokenId",
        "AuthorizationHeaderMalformed",
        "401",
        "403",
    }
)
_UNAVAILABLE_CODES = frozenset({"NoSuchBucket", "PermanentRedirect"})
# Backend codes meaning "slow down" (retried with backoff) and "try again" (5xx, 408).
_THROTTLED_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "429"}
)
_TRANSIENT_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeout",
        "500",
        "502",
        "503",
        "504",
        "408",
        # S3: two conditional writes of one key overlapped; AWS says retry.
        "ConditionalRequestConflict",
    }
)
# A conditional request's condition did not hold (S3/HTTP 412, GCS conditionNotMet).
_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412", "conditionNotMet"})
# Exception class names meaning the request timed out or the connection broke mid-transfer.
_TRANSIENT_TYPES = frozenset(
    {"ReadTimeoutError", "ServerTimeoutError", "TimeoutError", "ClientPayloadError", "IncompleteReadError"}
)
_INVALID_RANGE_CODES = frozenset({"InvalidRange", "416"})
# Exception class names (anywhere in the MRO) meaning "could not reach the backend":
# botocore, aiohttp and the builtins. Matched by name so no backend must be importable.
_UNREACHABLE_TYPES = frozenset(
    {
        "ConnectionError",  # builtins and botocore.exceptions
        "EndpointConnectionError",
        "ConnectTimeoutError",
        "ProxyConnectionError",
        "ClientConnectionError",  # aiohttp: refused, reset, server disconnected
        "ClientConnectorError",
        "ServerDisconnectedError",
    }
)
# Exception class names (anywhere in the MRO) meaning the server's TLS certificate was
# not accepted: Python's ssl (untrusted issuer, expired, hostname mismatch) and aiohttp's
# wrapper of it. Another attempt meets the same certificate, so these are not retried.
_CERTIFICATE_TYPES = frozenset({"SSLCertVerificationError", "ClientConnectorCertificateError"})
_CERTIFICATE_HINT = (
    "the server's TLS certificate was not accepted; for a private CA pass its bundle as "
    "storage_options={'client_kwargs': {'verify': '/path/to/ca.pem'}} (S3) or "
    "{'ssl': '/path/to/ca.pem'} (HTTP), or set AWS_CA_BUNDLE / SSL_CERT_FILE"
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from (``__cause__``/``__context__``)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def backend_codes(exc: BaseException) -> set[str]:
    """Backend error codes found along the chain (S3 codes, HTTP statuses)."""
    codes: set[str] = set()
    for e in _chain(exc):
        response = getattr(e, "response", None)
        if isinstance(response, Mapping):  # botocore ClientError
            code = response.get("Error", {}).get("Code")
            if code:
                codes.add(str(code))
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status:
                codes.add(str(status))
        status = getattr(e, "status", None)  # aiohttp ClientResponseError
        if isinstance(status, int):
            codes.add(str(status))
        elif isinstance(code := getattr(e, "code", None), int):  # gcsfs HttpError
            # (elif: aiohttp deprecates .code, an alias of .status)
            codes.add(str(code))
    return codes


def _has_type(exc: BaseException, names: frozenset[str]) -> bool:
    """True if an exception along the chain has a class (in its MRO) named in ``names``."""
    return any(cls.__name__ in names for e in _chain(exc) for cls in type(e).__mro__ if cls is not object)


def _unreachable(exc: BaseException) -> bool:
    return _has_type(exc, _UNREACHABLE_TYPES)


def is_no_such_bucket(exc: BaseException) -> bool:
    """True if the failure (or its cause) is S3's ``NoSuchBucket``."""
    return "NoSuchBucket" in backend_codes(exc)


def is_invalid_range(exc: BaseException) -> bool:
    """True if the failure is a range past the end (``InvalidRange``, HTTP 416)."""
    return bool(backend_codes(exc) & _INVALID_RANGE_CODES)


def translate_error(exc: BaseException, op: str, key: str, where: str) -> StoreError:
    """Map a backend exception to the azarr error tree; the message names ``where`` and ``key``.

    Shared by `FsspecStore` and the lean S3 transport (``_s3_transport``), so
    both classify S3 codes, HTTP statuses and connection failures identically.
    """
    if isinstance(exc, StoreError):
        return exc
    scrub_exception(exc)  # chained under the azarr error by the caller: no credentials in its repr
    what = f"{op} {key!r} in {where}" if key else f"{op} {where}"
    detail = f"{type(exc).__name__}: {exc}"
    codes = backend_codes(exc)
    if "NoSuchBucket" in codes:
        return StoreUnavailableError(f"{what} failed: the bucket does not exist ({detail})")
    if isinstance(exc, PermissionError) or codes & _PERMISSION_CODES:
        return PermissionDeniedError(f"permission denied: {what}: {detail}")
    if codes & _UNAVAILABLE_CODES:
        return StoreUnavailableError(f"{what} failed: backend unreachable ({detail})")
    if codes & _PRECONDITION_CODES:
        return PreconditionFailedError(f"{what}: precondition failed, another writer changed it ({detail})")
    if codes & _THROTTLED_CODES:
        return ThrottledError(f"{what} was throttled by the backend ({detail})")
    if codes & _TRANSIENT_CODES:
        return TransientStoreError(f"{what} failed with a transient error ({detail})")
    if _has_type(exc, _CERTIFICATE_TYPES):
        return StoreUnavailableError(f"{what} failed: {_CERTIFICATE_HINT} ({detail})")
    if _unreachable(exc):
        return ConnectionFailedError(f"{what} failed: backend unreachable ({detail})")
    if _has_type(exc, _TRANSIENT_TYPES):
        return TransientStoreError(f"{what} failed with a transient error ({detail})")
    return StoreError(f"{what} failed: {detail}")


_STATUS_ERRORS: Mapping[int, type[StoreError]] = {
    401: PermissionDeniedError,
    403: PermissionDeniedError,
    408: TransientStoreError,
    412: PreconditionFailedError,
    429: ThrottledError,
}


def error_for_status(status: int, reason: str, op: str, key: str, where: str) -> StoreError:
    """The azarr error for an HTTP error status without a backend error code (the same table).

    Parameters
    ----------
    status : int
        HTTP status (>= 400; 404 is the caller's "missing").
    reason : str
        The status line's reason phrase, for the message.
    op, key, where : str
        Operation, key and store location, named in the message.
    """
    what = f"{op} {key!r} in {where}" if key else f"{op} {where}"
    shown = f"HTTP {status} {reason}".rstrip()
    kind = _STATUS_ERRORS.get(status, TransientStoreError if status >= 500 else StoreError)
    if kind is PermissionDeniedError:
        return kind(f"permission denied: {what}: {shown}")
    if kind is ThrottledError:
        return kind(f"{what} was throttled by the server: {shown}")
    if kind is TransientStoreError:
        return kind(f"{what} failed: server error {shown}")
    if kind is PreconditionFailedError:
        return kind(f"{what}: precondition failed, another writer changed it ({shown})")
    return kind(f"{what} failed: unexpected {shown}")
