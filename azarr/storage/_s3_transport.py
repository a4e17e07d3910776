"""A lean S3 client for the per-key hot path: aiohttp requests with SigV4 signatures.

s3fs reaches S3 through aiobotocore, whose generic machinery (request
serialization from the service model, event hooks, response parsing) costs more
CPU per request than moving a 1 MiB body: on loopback SeaweedFS, s3fs
``_cat_file`` reaches 30-50 % of what raw aiohttp GETs do (``TESTING-NOTES.md``).
`S3Transport` sends the four requests a Zarr store needs per key
(``GET``/``PUT``/``DELETE``/``HEAD`` of one object) itself:

* credentials, region and endpoint come from botocore, from the same places it
  looks (explicit options, a profile, the default credential chain), resolved once;
* the SigV4 signature is computed by `sign_v4`, a few lines that produce
  exactly what botocore's `botocore.auth.S3SigV4Auth` does for these
  requests (tested byte for byte) at a third of its cost, reusing each day's
  derived signing key;
* error responses are classified exactly like s3fs errors
  (`azarr.storage._fsspec.translate_error`), so the scheduler retries the
  same things whichever transport is in use.

Listing, bulk deletes and anything this module does not understand stay on s3fs
(`azarr.storage.S3Store` decides, see `S3Transport.unsupported_options`).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import os
import re
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from urllib.parse import quote, urlsplit
from xml.sax.saxutils import unescape

from azarr.errors import PermissionDeniedError, ResponseIntegrityError, StoreError
from azarr.storage._aiohttp import (
    Allocator,
    ConnectionDropped,
    SharedSessions,
    body_size,
    new_session,
    read_body,
    request_body,
    unwrap_dropped,
)
from azarr.storage._body_checksum import body_crc32c, known_crc32c
from azarr.storage._errors import translate_error
from azarr.storage._limits import body_limit
from azarr.storage._ranges import (
    check_content_range,
    check_unsatisfiable,
    range_header,
    range_limit,
    unsatisfied_size,
)
from azarr.storage._redact import redact_url, remember_options

if TYPE_CHECKING:
    import aiohttp
    import yarl
    from multidict import CIMultiDictProxy

UNSIGNED_PAYLOAD: Final = "UNSIGNED-PAYLOAD"
"""``x-amz-content-sha256`` value for a body the signature does not cover (S3 SigV4)."""
_EMPTY_SHA256: Final = hashlib.sha256(b"").hexdigest()

# s3fs's own defaults (S3FileSystem.connect_timeout / read_timeout), so switching
# transports does not change how long a dead endpoint takes to fail.
_CONNECT_TIMEOUT = 5.0
_READ_TIMEOUT = 15.0
_DEFAULT_POOL = 64
# Idle keep-alive connections are dropped client-side after this long (aiohttp's
# default), below the idle timeouts of S3 and common S3-compatible servers, so we
# rarely send on a connection the server is closing. (A request that hits one fails
# once and the scheduler retries it: see azarr.storage._aiohttp.no_silent_resend.)
_KEEPALIVE_TIMEOUT = 15.0
# Bodies larger than this are SHA-256 hashed in a worker thread (hashlib releases the
# GIL), when payload signing is on: ~0.7 ms per MiB would otherwise stall the loop.
_HASH_IN_THREAD = 256 * 1024
_AWS_DOMAIN = "amazonaws.com"
_DEFAULT_REGION = "us-east-1"

# storage_options (s3fs's constructor options) this transport implements.
_OPTIONS = frozenset(
    {
        "anon",
        "key",
        "secret",
        "token",
        "username",  # s3fs alias of key
        "password",  # s3fs alias of secret
        "profile",  # botocore session profile (s3fs passes it to AioSession)
        "endpoint_url",
        "use_ssl",
        "client_kwargs",
        "config_kwargs",
        "requester_pays",
    }
)
# s3fs options that shape only s3fs's own machinery (file objects, multipart uploads,
# listing and instance caches, region discovery): single-object requests ignore them.
_IGNORED_OPTIONS = frozenset(
    {
        "default_block_size",
        "default_fill_cache",
        "default_cache_type",
        "cache_regions",
        "max_concurrency",
        "fixed_upload_size",
        "local_expiry_check",
        "use_listings_cache",
        "listings_expiry_time",
        "max_paths",
        "skip_instance_cache",
        "asynchronous",
        "loop",
    }
)
# Options accepted when falsy (their default), needing s3fs otherwise.
_FALSY_OK_OPTIONS = frozenset({"session", "s3_additional_kwargs", "version_aware"})
_CLIENT_KWARGS = frozenset(
    {
        "region_name",
        "endpoint_url",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "verify",
        "use_ssl",
    }
)
_CONFIG_KWARGS = frozenset(
    {
        "region_name",
        "signature_version",
        "max_pool_connections",
        "connect_timeout",
        "read_timeout",
        "proxies",
        # Never retried here (azarr's scheduler retries); responses are not checksummed
        # (GETs need none), request bodies are (``x-amz-checksum-crc32c``, see
        # request_checksum_calculation).
        "retries",
        "response_checksum_validation",
        "request_checksum_calculation",
        # Client-side only.
        "user_agent",
        "user_agent_extra",
        "user_agent_appid",
        "parameter_validation",
        "tcp_keepalive",
        "s3",
    }
)
_S3_CONFIG = frozenset({"addressing_style", "payload_signing_enabled"})
# botocore's request_checksum_calculation values (botocore >= 1.36, its default the first).
CHECKSUM_CALCULATIONS: Final = ("when_supported", "when_required")
# azarr's default (botocore's is "when_supported"): on SeaweedFS sharing the client's two
# cores the checksum cost 2-8 % of a 0 ms write's wall time, mostly the server's verifying
# (benchmarks/README.md, "Writes at 0 ms"), over the 2 % asked for a default. One line to flip.
DEFAULT_CHECKSUM_CALCULATION: Final = "when_required"
_SIGNATURE_VERSIONS = frozenset({"s3v4", "v4"})

_XML_CODE = re.compile(rb"<Code>([^<]{1,256})</Code>")
_XML_MESSAGE = re.compile(rb"<Message>([^<]{0,2048})</Message>")
_XML_SIZE = re.compile(rb"<ActualObjectSize>\s*(\d{1,20})\s*</ActualObjectSize>")
_BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_IPV4 = re.compile(r"\d+\.\d+\.\d+\.\d+")
# AWS region names ("us-east-1", "eu-central-2", "us-gov-west-1", "cn-north-1", "ap-southeast-4").
_REGION = re.compile(r"[a-z]{2}(-[a-z]{2,12}){1,3}-\d{1,2}")


# ---------------------------------------------------------------------- errors
class S3ResponseError(Exception):
    """An S3 error response: HTTP status plus the ``<Code>``/``<Message>`` of its XML body.

    Shaped like botocore's ``ClientError`` (``.response["Error"]["Code"]``,
    ``.response["ResponseMetadata"]["HTTPStatusCode"]``, ``.status``) so the shared
    classifier (`azarr.storage._fsspec.translate_error`) reads it as it
    reads s3fs errors. Raised internally, always chained under an azarr error.

    Attributes
    ----------
    status : int
        HTTP status.
    error_code : str
        S3 error code (``"NoSuchKey"``, ``"SlowDown"``, ...); ``""`` when the
        response had no XML body (``HEAD``).
    request : str
        ``"METHOD url"`` of the failed request (no credentials).
    """

    def __init__(self, status: int, error_code: str, message: str, request: str) -> None:
        detail = f"{error_code}: {message}" if error_code else message or "no error body"
        super().__init__(f"HTTP {status} {detail} ({request})")
        self.status = status
        self.error_code = error_code
        self.request = request
        self.response: dict[str, Any] = {
            "Error": {"Code": error_code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


# ---------------------------------------------------------------------- signing
def sign_v4(
    method: str,
    path: str,
    headers: dict[str, str],
    *,
    payload_hash: str,
    access_key: str,
    secret_key: str,
    token: str | None,
    region: str,
    amz_date: str,
    keys: _SigningKeys | None = None,
) -> dict[str, str]:
    """Add AWS Signature Version 4 headers (service ``s3``) to ``headers``.

    The same signature botocore's `botocore.auth.S3SigV4Auth` computes for a
    request without query string, with less work: botocore builds an ``AWSRequest``
    and ``HTTPHeaders`` and derives the signing key every time, ~60 us per request
    here (~25 us with the key cached), against ~6 us for this function -- a
    noticeable share of the ~200 us of client CPU a 64 KiB GET costs.
    ``tests/test_s3_transport.py`` checks the output against botocore's byte for
    byte.

    Parameters
    ----------
    method : str
        HTTP method.
    path : str
        The URI-encoded path exactly as sent; S3 signs it as is (encoded once, not
        normalized).
    headers : dict
        Lower-case names; every header here is signed. Must include ``host``.
    payload_hash : str
        ``x-amz-content-sha256``: hex SHA-256 of the body or ``UNSIGNED-PAYLOAD``.
    access_key, secret_key, token : str
        Credentials (``token`` for temporary ones, else ``None``).
    region : str
        Signing region.
    amz_date : str
        Request time, ``YYYYMMDDTHHMMSSZ`` (UTC).
    keys : _SigningKeys, optional
        Cache of derived signing keys (they depend only on secret, day and region).

    Returns
    -------
    dict
        ``headers`` with ``x-amz-date``, ``x-amz-content-sha256``,
        ``x-amz-security-token`` (with a token) and ``authorization`` added.
    """
    headers["x-amz-date"] = amz_date
    headers["x-amz-content-sha256"] = payload_hash
    if token:
        headers["x-amz-security-token"] = token
    names = sorted(headers)
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in names)
    signed = ";".join(names)
    canonical_request = f"{method}\n{path}\n\n{canonical_headers}\n{signed}\n{payload_hash}"
    date = amz_date[:8]
    scope = f"{date}/{region}/s3/aws4_request"
    digest = _SHA256.copy()
    digest.update(canonical_request.encode())
    string_to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{digest.hexdigest()}"
    mac = (keys or _SigningKeys()).mac(secret_key, date, region)
    mac.update(string_to_sign.encode())
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, SignedHeaders={signed}, Signature={mac.hexdigest()}"
    )
    return headers


# Copied per use: with OpenSSL 3, hashlib looks the algorithm up on every construction, so
# a copy of a prepared hash is cheaper than a new one (measured: SHA-256 2.4 against 4.4 us,
# HMAC-SHA256 7.5 against 9.2 us; benchmarks/README.md, "Per-request loop CPU").
_SHA256 = hashlib.sha256()


class _SigningKeys:
    """SigV4 signing keys by (secret, date, region); thread-safe, keeps the latest few.

    Each is kept as a keyed HMAC-SHA256 ready to copy (`mac`): a signature then costs
    one copy and one update instead of a new HMAC with its key set-up.
    """

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str, str], hmac.HMAC] = {}
        self._lock = threading.Lock()

    def _entry(self, secret: str, date: str, region: str) -> hmac.HMAC:
        ident = (secret, date, region)
        entry = self._keys.get(ident)
        if entry is None:
            entry = hmac.new(derive_signing_key(secret, date, region), digestmod=hashlib.sha256)
            with self._lock:
                if len(self._keys) >= 8:  # a new day or rotated credentials: drop old keys
                    self._keys.clear()
                self._keys[ident] = entry
        return entry

    def mac(self, secret: str, date: str, region: str) -> hmac.HMAC:
        """A new HMAC-SHA256 keyed with the signing key, to ``update`` with a string to sign."""
        return self._entry(secret, date, region).copy()


def derive_signing_key(secret: str, date: str, region: str, service: str = "s3") -> bytes:
    """The SigV4 signing key for ``date`` (``YYYYMMDD``), ``region`` and ``service``.

    AWS Signature Version 4, "Derive a signing key":
    ``HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")``.
    """
    k = hmac.new(f"AWS4{secret}".encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


_now: tuple[int, str] = (-1, "")  # the last second formatted, and its x-amz-date


def _amz_date() -> str:
    """The current UTC time as ``x-amz-date`` (``YYYYMMDDTHHMMSSZ``), formatted once per second."""
    global _now
    second = int(time.time())
    cached = _now  # one read of one tuple: threads never see a second with another's text
    if cached[0] == second:
        return cached[1]
    text = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
    _now = (second, text)
    return text


# ---------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class _Resolved:
    """What requests need, resolved once per transport (credentials may refresh themselves)."""

    credentials: Any  # botocore Credentials / RefreshableCredentials; None = unsigned
    region: str
    origin: str  # "https://bucket.s3.eu-west-1.amazonaws.com", "http://127.0.0.1:8333"
    host: str  # Host header (port only when not the scheme's default)
    path_prefix: str  # encoded, "/bucket/" (path style) or "/" (virtual-hosted)
    proxy: str | None
    aws: bool  # the endpoint is AWS's own (derived from the region)


@dataclass(frozen=True)
class _SessionSettings:
    """The connection settings of an S3 session (hashable: the key transports share it by)."""

    limit: int
    connect_timeout: float | None
    read_timeout: float | None
    tls: bool | str  # False: no verification; True: default trust; str: a CA bundle path

    def new_session(self) -> aiohttp.ClientSession:
        return new_session(
            limit=self.limit,
            keepalive_timeout=_KEEPALIVE_TIMEOUT,
            ssl=self.tls,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            # Stored bytes, as botocore returns them: S3 never compresses on the fly,
            # and an object stored with Content-Encoding must not be decoded here.
            auto_decompress=False,
            skip_auto_headers=("Accept-Encoding", "Content-Type"),
        )


class _Reply(NamedTuple):
    status: int
    headers: CIMultiDictProxy[str]
    body: bytes
    request: str  # "METHOD url", for messages
    received: memoryview | None = None  # a 200 body read into an allocator's buffer (body is then b"")
    size: int | None = None  # a 200 body's size, measured and not kept (``size_only``; body is b"")


def _option(options: Mapping[str, Any], name: str) -> Any:
    """``name`` from ``client_kwargs``, falling back to the top-level option (s3fs precedence)."""
    client = options.get("client_kwargs") or {}
    value = client.get(name)
    return options.get(name) if value is None else value


def _dns_compatible(bucket: str, *, https: bool) -> bool:
    """True if the bucket can be a host name label (virtual-hosted addressing).

    botocore's rule: 3-63 lower-case letters, digits, ``-`` and ``.``; no ``..``,
    not an IP address; and no dots over https (a dotted name breaks the wildcard
    TLS certificate ``*.s3.<region>.amazonaws.com``).
    """
    if not _BUCKET_NAME.fullmatch(bucket) or ".." in bucket or _IPV4.fullmatch(bucket):
        return False
    return not (https and "." in bucket)


class S3Transport:
    """GET/PUT/DELETE/HEAD of single S3 objects over aiohttp, signed with SigV4.

    The per-key hot path of `S3Store` (``transport="aiohttp"``).
    Keys are relative to ``prefix`` inside ``bucket``.

    Parameters
    ----------
    bucket : str
        Bucket name.
    prefix : str
        Key prefix inside the bucket (``"path/data.zarr"``, no slashes at the ends);
        ``key`` arguments are relative to it.
    storage_options : dict, optional
        `s3fs.S3FileSystem` options, read exactly as s3fs reads them. Supported:

        * credentials: ``key``/``secret``/``token`` (or ``username``/``password``, or
          ``client_kwargs`` ``aws_access_key_id``/``aws_secret_access_key``/
          ``aws_session_token``), ``profile``, else botocore's default credential
          chain (environment, shared files, SSO, container and instance roles);
          ``anon=True`` (or ``config_kwargs={"signature_version": botocore.UNSIGNED}``)
          sends unsigned requests. Refreshable credentials refresh when botocore says
          they should (in a worker thread).
        * ``endpoint_url`` (top level or in ``client_kwargs``): requests go to
          ``{endpoint_url}/{bucket}/{key}`` (path-style). Without one, botocore's
          configured endpoint (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the
          profile's ``endpoint_url``) or AWS's virtual-hosted
          ``https://{bucket}.s3.{region}.amazonaws.com/{key}`` (path-style for names
          that cannot be host names). ``config_kwargs={"s3": {"addressing_style":
          "path" | "virtual"}}`` overrides the choice.
        * region: ``client_kwargs``/``config_kwargs`` ``region_name``, ``AWS_REGION``,
          botocore's configured region (``AWS_DEFAULT_REGION``, the profile), else
          ``us-east-1``. When AWS answers that the bucket lives elsewhere
          (``x-amz-bucket-region`` on a 301, 307 or 400), the transport switches region and
          sends the request once more, like botocore's redirector.
        * ``config_kwargs``: ``max_pool_connections`` (default 64),
          ``connect_timeout``/``read_timeout`` (seconds, s3fs's defaults 5/15),
          ``proxies``, ``s3.payload_signing_enabled``, ``request_checksum_calculation``
          (see Notes); ``retries`` and ``response_checksum_validation`` are accepted and
          have no effect.
        * ``requester_pays=True``: sends ``x-amz-request-payer: requester``.
        * ``use_ssl=False`` (AWS endpoints over http), ``client_kwargs["verify"]``
          (``False`` or a CA bundle path; ``AWS_CA_BUNDLE`` is honoured too).

    location : str, optional
        How errors name the store; default ``"s3://bucket/prefix"`` plus the
        endpoint when one is given.

    Raises
    ------
    ValueError
        An option this transport does not implement (see
        `unsupported_options`), or no bucket.

    Notes
    -----
    * **Payload hash.** ``PUT`` bodies are sent with ``x-amz-content-sha256:
      UNSIGNED-PAYLOAD`` (S3 SigV4's "unsigned payload" option): the signature covers
      the request, not the body. Over https TLS protects the body; over plain http
      nothing protects reads either. ``config_kwargs={"s3":
      {"payload_signing_enabled": True}}`` (botocore's own switch) signs bodies with
      a SHA-256 computed in a worker thread.
    * **Body checksum.** With ``config_kwargs={"request_checksum_calculation":
      "when_supported"}`` (or ``AWS_REQUEST_CHECKSUM_CALCULATION=when_supported``;
      botocore's option, values and default since 1.36) every ``PUT`` carries
      ``x-amz-checksum-crc32c`` (the body's CRC-32C, base64 of its 4 big-endian bytes;
      the ``crc32c`` package, SSE 4.2 / ARMv8 instructions, 40-100 us per MiB): S3 and
      SeaweedFS verify it and refuse a body changed on its way with ``400 BadDigest``
      (a `StoreError`; nothing is stored), which TCP's 16-bit checksum and an unsigned
      payload would let through on plain http. azarr's default is
      ``"when_required"`` (no checksum: ``PutObject`` requires none), as before:
      measured on SeaweedFS, verifying cost the server 2-7 % more CPU per write.
      Servers that ignore the header (moto, older MinIO) store the body as sent.
    * **No retries here.** Every call sends exactly one request (plus at most one
      after a region redirect); until the bucket is known to exist, an existence
      check is a ``GET`` of ``Range: bytes=0-0`` instead of a ``HEAD``, whose 404
      could not tell a missing key from a missing bucket. aiohttp's silent re-send of
      idempotent requests after a dropped connection is disabled with a client
      middleware (aiohttp >= 3.12); `azarr.scheduler` retries and counts.
    * **Errors** are azarr errors naming the location, the key and (through the
      chained `S3ResponseError`) the request URL: 403/``AccessDenied``/
      ``SignatureDoesNotMatch`` -> `PermissionDeniedError`;
      ``NoSuchBucket`` -> `StoreUnavailableError`;
      ``SlowDown``/429 -> `ThrottledError`; 5xx, 408,
      ``RequestTimeout``, a body cut short -> `TransientStoreError`;
      refused, reset, disconnected, timed out ->
      `ConnectionFailedError`; anything else ->
      `StoreError`. Missing keys are ``None``.
    * **Connections.** One `aiohttp.ClientSession` with a
      ``TCPConnector(limit=max_pool_connections)`` per event loop, created on first
      use in that loop and shared by every transport with the same connection
      settings (pool size, timeouts, TLS verification; any bucket or prefix), as
      s3fs's cached filesystem instances share one client. `close` releases
      it; it closes ``connection_linger`` seconds after the last transport released
      it (`azarr.config`, default 15; a new store in the meantime reuses the
      warm connections), or when the loop shuts down (``asyncio.run``). Responses are
      returned as stored (no ``Accept-Encoding``, no automatic decompression), like
      botocore. Pickling keeps only the configuration.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        storage_options: Mapping[str, Any] | None = None,
        location: str | None = None,
    ) -> None:
        if not bucket or "/" in bucket:
            raise ValueError(f"S3Transport needs a bucket name, got {bucket!r}")
        options = dict(storage_options or {})
        problems = self.unsupported_options(options)
        if problems:
            raise ValueError(f"S3Transport does not implement {'; '.join(problems)}")
        config = dict(options.get("config_kwargs") or {})
        s3_config = dict(config.get("s3") or {})
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        key = options.get("key") or options.get("username")
        secret = options.get("secret") or options.get("password")
        client = options.get("client_kwargs") or {}
        self._key: str | None = key or client.get("aws_access_key_id")
        self._secret: str | None = secret or client.get("aws_secret_access_key")
        self._token: str | None = options.get("token") or client.get("aws_session_token")
        self._profile: str | None = options.get("profile")
        self.anon = bool(options.get("anon")) or _is_unsigned(config.get("signature_version"))
        self.endpoint_url: str | None = _option(options, "endpoint_url")
        self._region: str | None = client.get("region_name") or config.get("region_name")
        use_ssl = _option(options, "use_ssl")
        self._use_ssl = True if use_ssl is None else bool(use_ssl)
        self._verify: Any = client.get("verify")
        self._proxies: dict[str, str] | None = config.get("proxies")
        self._addressing: str = s3_config.get("addressing_style") or "auto"
        self._sign_payload: bool | None = s3_config.get("payload_signing_enabled")
        self.request_checksum_calculation = checksum_calculation(config)
        self._put_checksum = self.request_checksum_calculation == "when_supported"
        self.requester_pays = bool(options.get("requester_pays"))
        self.max_pool_connections = int(config.get("max_pool_connections") or _DEFAULT_POOL)
        self.connect_timeout = _seconds(config.get("connect_timeout", _CONNECT_TIMEOUT))
        self.read_timeout = _seconds(config.get("read_timeout", _READ_TIMEOUT))
        if location is None:
            location = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
            if self.endpoint_url:
                location += f" (endpoint {redact_url(self.endpoint_url)})"
        self.location = location
        remember_options(options)
        self._key_prefix = quote(f"{self.prefix}/", safe="/") if self.prefix else ""
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._sessions: SharedSessions | None = None  # chosen on first use (needs the endpoint's scheme)
        self._resolve_lock = threading.Lock()
        self._resolved: _Resolved | None = None
        self._keys = _SigningKeys()
        # Set once any response proved the bucket exists (a HEAD 404 is then a missing key).
        self._bucket_seen = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_sessions", "_resolve_lock", "_resolved", "_keys", "_bucket_seen"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return f"S3Transport({self.location!r})"

    # ------------------------------------------------------------------ options
    @staticmethod
    def unsupported_options(storage_options: Mapping[str, Any], bucket: str | None = None) -> list[str]:
        """Why this transport cannot serve ``storage_options`` (empty if it can).

        Parameters
        ----------
        storage_options : dict
            s3fs options.
        bucket : str, optional
            Also check the bucket name: access-point ARNs and S3 Express One Zone
            directory buckets (``--x-s3``) need botocore's endpoint rules and auth.

        Returns
        -------
        list of str
            One human-readable entry per unsupported option, e.g.
            ``"storage_options['session']"`` or ``"config_kwargs['proxies_config']"``.
        """
        problems: list[str] = []
        if bucket is not None and (bucket.startswith("arn:") or bucket.endswith("--x-s3")):
            problems.append(f"bucket {bucket!r} (an access point or S3 Express bucket)")
        if not _option(storage_options, "endpoint_url"):
            # botocore reads these from the environment to pick other AWS endpoints.
            for variable in ("AWS_USE_FIPS_ENDPOINT", "AWS_USE_DUALSTACK_ENDPOINT"):
                if os.environ.get(variable, "").lower() == "true":
                    problems.append(f"environment {variable}=true")
        for name, value in storage_options.items():
            if name in _OPTIONS or name in _IGNORED_OPTIONS:
                continue
            if name in _FALSY_OK_OPTIONS and not value:
                continue
            problems.append(f"storage_options[{name!r}]")
        client = storage_options.get("client_kwargs") or {}
        problems += [f"client_kwargs[{k!r}]" for k in client if k not in _CLIENT_KWARGS]
        config = storage_options.get("config_kwargs") or {}
        problems += [f"config_kwargs[{k!r}]" for k in config if k not in _CONFIG_KWARGS]
        version = config.get("signature_version")
        if version is not None and not _is_unsigned(version) and version not in _SIGNATURE_VERSIONS:
            problems.append(f"config_kwargs['signature_version']={version!r}")
        s3_config = config.get("s3") or {}
        problems += [f"config_kwargs['s3'][{k!r}]" for k in s3_config if k not in _S3_CONFIG]
        if s3_config.get("addressing_style") not in (None, "auto", "path", "virtual"):
            problems.append(f"config_kwargs['s3']['addressing_style']={s3_config['addressing_style']!r}")
        return problems

    # ------------------------------------------------------------------ resolution
    async def _environment(self) -> _Resolved:
        """Credentials, region and endpoint (resolved on first use, in a worker thread).

        botocore's credential chain may read files or call a metadata endpoint; none
        of that may block the event loop.
        """
        resolved = self._resolved
        if resolved is None:
            resolved = await asyncio.to_thread(self._resolve)
        return resolved

    def _resolve(self) -> _Resolved:
        with self._resolve_lock:
            if self._resolved is not None:
                return self._resolved
            try:
                resolved = self._resolve_now()
            except StoreError:
                raise
            except Exception as exc:  # a bad profile, an unreadable config file, ...
                raise StoreError(
                    f"cannot set up S3 requests for {self.location}: {type(exc).__name__}: {exc}"
                ) from exc
            self._resolved = resolved
            return resolved

    def _resolve_now(self) -> _Resolved:
        session: Any = None

        def botocore_session() -> Any:
            nonlocal session
            if session is None:
                import botocore.session

                session = botocore.session.Session(profile=self._profile)
            return session

        credentials: Any = None
        if not self.anon:
            if self._key and self._secret:
                from botocore.credentials import Credentials

                credentials = Credentials(self._key, self._secret, self._token)
            else:
                credentials = botocore_session().get_credentials()
            if credentials is None:
                raise PermissionDeniedError(
                    f"no AWS credentials for {self.location}: botocore's credential chain found none; "
                    "pass key and secret, a profile, or anon=True for public data"
                )
        region = self._region or os.environ.get("AWS_REGION")
        if not region:
            region = botocore_session().get_config_variable("region") or _DEFAULT_REGION
        endpoint = self.endpoint_url
        if not endpoint and (self._profile or _configured_endpoints_possible()):
            endpoint = _configured_endpoint(botocore_session())
        return self._addresses(credentials, region, endpoint)

    def _addresses(self, credentials: Any, region: str, endpoint: str | None) -> _Resolved:
        """Where requests go for ``region`` and ``endpoint`` (None: AWS)."""
        bucket = quote(self.bucket, safe="")
        if endpoint:
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise StoreError(f"S3 endpoint_url must be an http(s) URL with a host, got {endpoint!r}")
            scheme, netloc, base_path, aws = parts.scheme, parts.netloc, parts.path.rstrip("/"), False
            virtual = self._addressing == "virtual"
        else:
            scheme = "https" if self._use_ssl else "http"
            netloc, base_path, aws = f"s3.{region}.{_AWS_DOMAIN}", "", True
            virtual = self._addressing == "virtual" or (
                self._addressing == "auto" and _dns_compatible(self.bucket, https=scheme == "https")
            )
        host = _host_header(scheme, netloc)
        if virtual:
            host = f"{bucket}.{host}"
            path_prefix = f"{base_path}/"
        else:
            path_prefix = f"{base_path}/{bucket}/"
        proxy = self._proxy_for(scheme, host.rsplit(":", 1)[0] if not host.endswith("]") else host)
        return _Resolved(credentials, region, f"{scheme}://{host}", host, path_prefix, proxy, aws)

    def _proxy_for(self, scheme: str, hostname: str) -> str | None:
        """The proxy botocore would use: ``config_kwargs["proxies"]``, else the environment's."""
        if self._proxies is not None:
            return self._proxies.get(scheme)
        proxy = urllib.request.getproxies().get(scheme)
        if proxy and urllib.request.proxy_bypass(hostname):
            return None
        return proxy

    def _redirected(self, resolved: _Resolved, region: str) -> _Resolved:
        """``resolved`` for the bucket's real region (AWS told us, ``x-amz-bucket-region``)."""
        with self._resolve_lock:
            current = self._resolved or resolved
            if current.region == region:
                return current
            if current.aws:
                updated = self._addresses(current.credentials, region, None)
            else:
                updated = replace(current, region=region)
            self._resolved = updated
            return updated

    # ------------------------------------------------------------------ sessions
    def _session_settings(self, resolved: _Resolved) -> _SessionSettings:
        """Everything the aiohttp session depends on: transports with equal settings share one."""
        verify = self._verify
        if verify is False:
            tls: bool | str = False
        elif resolved.origin.startswith("http://"):
            # Plain HTTP (a local or private endpoint): no TLS, so no CA bundle to load
            # (building a context from one costs ~20 ms, on the first request's path).
            tls = True
        else:
            cafile = verify if isinstance(verify, str) else os.environ.get("AWS_CA_BUNDLE")
            tls = cafile or True
        return _SessionSettings(self.max_pool_connections, self.connect_timeout, self.read_timeout, tls)

    async def session(self) -> aiohttp.ClientSession:
        """The aiohttp session serving the running event loop (created on first use).

        Shared with every transport of equal settings (`SharedSessions`):
        connections outlive the store that opened them.
        """
        sessions = self._sessions
        if sessions is None:
            settings = self._session_settings(await self._environment())
            sessions = self._sessions = SharedSessions.for_settings(settings, settings.new_session)
        return await sessions.get(self)

    async def close(self) -> None:
        """Release the running loop's connections: they close once no other transport with
        the same settings uses them, after ``connection_linger`` seconds (`azarr.config`).
        The transport stays usable."""
        if self._sessions is not None:
            await self._sessions.release(self)

    def open_sessions(self) -> int:
        """Sessions currently open for this transport's settings (one per event loop)."""
        return 0 if self._sessions is None else self._sessions.open_count()

    # ------------------------------------------------------------------ requests
    def _payload_hash(self, data: bytes | memoryview | None) -> str | None:
        """``x-amz-content-sha256`` for ``data``; None if it is to be hashed in a worker thread
        (a large body with payload signing on: ~0.7 ms per MiB would stall the loop)."""
        if not data:
            return _EMPTY_SHA256
        if not self._sign_payload:
            return UNSIGNED_PAYLOAD
        if len(data) > _HASH_IN_THREAD:
            return None
        return _sha256_hex(data)

    def _signed_headers(
        self,
        resolved: _Resolved,
        frozen: Any,
        method: str,
        path: str,
        headers: dict[str, str],
        payload_hash: str,
    ) -> dict[str, str]:
        """``headers`` plus ``host`` and, with ``frozen`` credentials, the SigV4 headers for
        ``method path``."""
        headers["host"] = resolved.host
        if self.requester_pays:
            headers["x-amz-request-payer"] = "requester"
        if frozen is None:
            return headers
        return sign_v4(
            method,
            path,
            headers,
            payload_hash=payload_hash,
            access_key=frozen.access_key,
            secret_key=frozen.secret_key,
            token=frozen.token,
            region=resolved.region,
            amz_date=_amz_date(),
            keys=self._keys,
        )

    async def _request(
        self,
        op: str,
        key: str,
        method: str,
        headers: dict[str, str],
        data: bytes | memoryview | None = None,
        allocate: Allocator | None = None,
        partial_limit: int | None = None,
        size_only: bool = False,
        window: tuple[int, int | None] | None = None,
    ) -> _Reply:
        """Send one request for ``key``; transport failures become azarr errors.

        Follows one region redirect (``x-amz-bucket-region``, a valid region name),
        re-signing for it. ``allocate``: where a 200 response's body goes;
        ``partial_limit``: the most bytes a 206 body may hold (`read_body`);
        ``size_only``: a 200 body is measured, not kept (`body_size`; the reply's ``size``);
        ``window``: the range asked, all of a 200 body that is kept (`read_body`).
        """
        aiohttp, URL = _aiohttp_and_url()
        # First: the session's TLS set-up depends on it. (Each step awaits only when it must:
        # an await costs a coroutine per request.)
        resolved = self._resolved or await self._environment()
        # The loop's session without a coroutine once it exists.
        session = SharedSessions.claim_from(self._sessions, self) or await self.session()
        payload_hash = self._payload_hash(data)
        if payload_hash is None:
            payload_hash = await asyncio.to_thread(_sha256_hex, data)
        if method == "PUT" and self._put_checksum:
            headers = {**headers, "x-amz-checksum-crc32c": crc32c_header(data)}
        quoted = quote(key, safe="/")
        for _ in range(2):
            path = resolved.path_prefix + self._key_prefix + quoted
            credentials, frozen = resolved.credentials, None  # None: anonymous
            try:
                if credentials is not None:
                    refresh_needed = getattr(credentials, "refresh_needed", None)
                    if refresh_needed is not None and refresh_needed():
                        # A refresh may call STS, SSO or a metadata endpoint: not on the loop.
                        frozen = await asyncio.to_thread(credentials.get_frozen_credentials)
                    else:
                        frozen = credentials.get_frozen_credentials()
            except Exception as exc:  # refreshing credentials failed (STS, SSO, metadata endpoint)
                raise translate_error(exc, op, key, self.location) from exc
            sent = self._signed_headers(resolved, frozen, method, path, dict(headers), payload_hash)
            # encoded=True: the path is sent exactly as signed (SigV4 for S3 signs the
            # URI-encoded path once; yarl must not re-quote or normalize it).
            address = resolved.origin + path
            url = URL(address, encoded=True)
            try:
                async with session.request(
                    method,
                    url,
                    headers=sent,
                    data=request_body(data),
                    allow_redirects=False,
                    proxy=resolved.proxy,
                ) as resp:
                    what = f"{op} {key!r} in {self.location}"
                    if size_only and resp.status == 200:
                        size = await body_size(resp, what=what)
                        reply = _Reply(resp.status, resp.headers, b"", f"{method} {address}", size=size)
                    else:
                        # Read error bodies too (small): an unread body closes the connection
                        # instead of returning it to the pool, and 404s are routine in Zarr.
                        body, received = await read_body(
                            resp, allocate, what=what, partial_limit=partial_limit, window=window
                        )
                        reply = _Reply(resp.status, resp.headers, body, f"{method} {address}", received)
            except (ConnectionDropped, aiohttp.ClientError, OSError, ValueError) as exc:
                # ValueError: aiohttp's InvalidURL and friends; TimeoutError is an OSError.
                cause = unwrap_dropped(exc)
                raise translate_error(cause, op, key, self.location) from cause
            region = reply.headers.get("x-amz-bucket-region")
            if region and region != resolved.region and reply.status in (301, 307, 400):
                if not _REGION.fullmatch(region):
                    # It becomes part of the request host (and of the signature scope).
                    raise StoreError(
                        f"{op} {key!r} in {self.location}: the server named the bucket's region "
                        f"{region[:64]!r}, which is not an AWS region name"
                    )
                resolved = self._redirected(resolved, region)
                continue
            break
        if (
            reply.status < 300
            or reply.status == 416
            or (reply.status == 404 and _error_code(reply) == "NoSuchKey")
        ):
            self._bucket_seen = True
        return reply

    def _error(self, reply: _Reply, op: str, key: str, *, code: str | None = None) -> StoreError:
        """The azarr error for an S3 error response (classified like s3fs errors)."""
        error_code = _error_code(reply) if code is None else code
        exc = S3ResponseError(reply.status, error_code, _error_message(reply), reply.request)
        err = translate_error(exc, op, key, self.location)
        err.__cause__ = exc
        return err

    # ------------------------------------------------------------------ operations
    async def get(
        self, key: str, start: int | None = None, end: int | None = None, *, if_match: str | None = None
    ) -> bytes | None:
        """Read the object at ``key``, or bytes ``[start, end)`` of it.

        Parameters
        ----------
        key : str
            Object key relative to ``prefix`` (UTF-8, any characters; URL-quoted here).
        start : int, optional
            First byte (default 0). Negative with ``end=None``: the last ``-start``
            bytes (``Range: bytes=-N``).
        end : int, optional
            One past the last byte; ``None`` reads to the end.

        Returns
        -------
        bytes or None
            The bytes, with Python slicing semantics for ranges past the end (``b""``
            from a 416); ``None`` if the key does not exist.

        Raises
        ------
        StoreError
            See the class notes; a missing bucket is
            `StoreUnavailableError`.
        PreconditionFailedError
            ``if_match`` (an ETag) was given and the object is another version now.
        ValueError
            A negative ``start`` with an ``end``.
        """
        begin = start or 0
        if begin < 0 and end is not None:
            raise ValueError(f"a suffix range (start={start}) takes no end, got end={end}")
        if end is not None and end <= begin:
            return b"" if await self.head(key) is not None else None
        headers: dict[str, str] = {} if if_match is None else {"if-match": if_match}
        if begin != 0 or end is not None:
            headers["range"] = range_header(begin, end)
        limit = range_limit(begin, end, body_limit())
        window = (begin, end) if "range" in headers else None
        reply = await self._request("get", key, "GET", headers, partial_limit=limit, window=window)
        status = reply.status
        what = f"get {key!r} in {self.location}"
        if status == 206:
            if "range" not in headers:
                raise ResponseIntegrityError(
                    f"{what}: the server answered 206 Partial Content to a GET without Range"
                )
            check_content_range(reply.headers.get("Content-Range"), len(reply.body), begin, end, what)
            return reply.body
        if status == 200:  # ranged: the server ignored Range; read_body kept only the range
            return reply.body
        if status == 416:
            # b"" (Python slicing) only if the object's size says the range starts at or past
            # its end (or the object is empty): stated by SeaweedFS (Content-Range) and AWS
            # (ActualObjectSize), else asked for.
            size = _unsatisfied_size(reply)
            if size is None:
                size = await self.head(key, op="get")
                if size is None:
                    return None
            check_unsatisfiable(size, begin, end, what)
            return b""
        if status == 404 and _error_code(reply) != "NoSuchBucket":
            return None
        raise self._error(reply, "get", key, code="412" if status == 412 else None)

    async def get_into(self, key: str, allocate: Allocator) -> bytes | memoryview | None:
        """The whole object at ``key``, its body received into ``allocate(size)``; None if missing.

        Raises as `get` does.
        """
        reply = await self._request("get", key, "GET", {}, allocate=allocate)
        if reply.status == 200:
            return reply.body if reply.received is None else reply.received
        if reply.status == 206:
            raise ResponseIntegrityError(
                f"get {key!r} in {self.location}: the server answered 206 Partial Content to a GET without Range"
            )
        if reply.status == 404 and _error_code(reply) != "NoSuchBucket":
            return None
        raise self._error(reply, "get", key)

    async def get_with_etag(
        self, key: str, start: int | None = None, end: int | None = None
    ) -> tuple[bytes | None, str | None]:
        """The object at ``key`` (or bytes ``[start, end)`` of it, ``start`` negative for a
        suffix, checked and bounded as `get`) and its ``ETag`` (its generation: a ranged
        reply carries the whole object's); ``(None, None)`` if missing."""
        begin = start or 0
        if begin < 0 and end is not None:
            raise ValueError(f"a suffix range (start={start}) takes no end, got end={end}")
        if end is not None and end <= begin:
            info = await self.stat(key)
            return (None, None) if info is None else (b"", info[1])
        headers: dict[str, str] = {}
        if begin != 0 or end is not None:
            headers["range"] = range_header(begin, end)
        limit = range_limit(begin, end, body_limit()) if headers else None
        window = (begin, end) if headers else None
        reply = await self._request("get", key, "GET", headers, partial_limit=limit, window=window)
        status, etag = reply.status, reply.headers.get("ETag")
        what = f"get {key!r} in {self.location}"
        if status == 206:
            if not headers:
                raise ResponseIntegrityError(
                    f"{what}: the server answered 206 Partial Content to a GET without Range"
                )
            check_content_range(reply.headers.get("Content-Range"), len(reply.body), begin, end, what)
            return reply.body, etag
        if status == 200:
            # Ranged: the server ignored Range, and read_body kept only the range.
            return reply.body, etag
        if status == 416:  # b"" if the range starts at or past the end of the object
            info = await self.stat(key)
            if info is None:
                return None, None
            check_unsatisfiable(info[0], begin, end, what)
            return b"", info[1]
        if status == 404 and _error_code(reply) != "NoSuchBucket":
            return None, None
        raise self._error(reply, "get", key)

    async def put_if(self, key: str, data: bytes, *, if_match: str | None) -> str | None:
        """``PutObject`` only if the object is still ``if_match`` (an ETag), or, with
        ``if_match=None``, only if it does not exist (``If-None-Match: *``).

        Returns
        -------
        str or None
            The new object's ETag.

        Raises
        ------
        PreconditionFailedError
            HTTP 412: the object changed (or, for a create, exists). SeaweedFS also
            answers 412 for ``If-Match`` on a missing key, where AWS answers 404.
        TransientStoreError
            HTTP 409 ``ConditionalRequestConflict`` (another conditional write of the
            key was in progress): retried by the scheduler with the same condition.
        """
        headers = {"if-none-match": "*"} if if_match is None else {"if-match": if_match}
        reply = await self._request("set", key, "PUT", headers, data)
        if 200 <= reply.status < 300:
            return reply.headers.get("ETag")
        if reply.status == 404 and if_match is not None and _error_code(reply) == "NoSuchKey":
            raise self._error(reply, "set", key, code="412")
        raise self._error(reply, "set", key, code=_condition_code(reply))

    async def delete_if(self, key: str, *, if_match: str) -> None:
        """``DeleteObject`` only if the object is still ``if_match``; a missing key is fine.

        Raises
        ------
        PreconditionFailedError
            The object is another version now.
        """
        reply = await self._request("delete", key, "DELETE", {"if-match": if_match})
        if 200 <= reply.status < 300:
            return
        if reply.status == 404 and _error_code(reply) != "NoSuchBucket":
            return
        if reply.status == 412 and await self.head(key, op="delete") is None:
            return  # SeaweedFS answers 412 for If-Match on a key that is gone: nothing to delete
        raise self._error(reply, "delete", key, code=_condition_code(reply))

    async def stat(self, key: str) -> tuple[int, str | None] | None:
        """``(size, ETag)`` of the object at ``key`` from a ``HEAD``; None if missing."""
        reply = await self._request("getsize", key, "HEAD", {})
        if reply.status == 200:
            length = reply.headers.get("Content-Length")
            if length is not None and length.isdigit():
                return int(length), reply.headers.get("ETag")
            raise StoreError(f"getsize {key!r} in {self.location}: HEAD answered without a Content-Length")
        if reply.status == 404:
            return None
        raise self._error(reply, "getsize", key, code="PermanentRedirect" if reply.status == 301 else None)

    async def put(self, key: str, data: bytes | bytearray | memoryview) -> None:
        """Store ``data`` at ``key`` (one ``PutObject``; S3 replaces objects atomically).

        Raises
        ------
        StoreError
            See the class notes.
        """
        body = data if isinstance(data, bytes | memoryview) else memoryview(data)
        reply = await self._request("set", key, "PUT", {}, body)
        if not 200 <= reply.status < 300:
            raise self._error(reply, "set", key)

    async def delete(self, key: str) -> None:
        """Delete ``key``; a missing key is not an error (S3 semantics).

        Raises
        ------
        StoreError
            See the class notes; a missing bucket is
            `StoreUnavailableError`.
        """
        reply = await self._request("delete", key, "DELETE", {})
        if 200 <= reply.status < 300:
            return
        if reply.status == 404 and _error_code(reply) != "NoSuchBucket":
            return
        raise self._error(reply, "delete", key)

    async def head(self, key: str, *, op: str = "exists") -> int | None:
        """Size of the object at ``key`` in bytes; ``None`` if it does not exist.

        A ``HEAD`` response has no body, so its 404 cannot say whether the key or
        the bucket is missing. Until some response has shown that the bucket
        exists, the question goes as one ``GET`` of ``Range: bytes=0-0`` instead,
        whose answer says both (and the size, in ``Content-Range``): one round
        trip, where a ``HEAD`` and then a probe took two on every new store's
        first missing key (``create`` checks for ``.zarray`` and ``.zgroup``).

        Raises
        ------
        StoreError
            See the class notes; a missing bucket is
            `StoreUnavailableError`.
        """
        if not self._bucket_seen:
            # A server that ignores the range answers 200 with the whole value: its size is
            # all this needs, measured without keeping the body (which may never end).
            probe = await self._request(
                op, key, "GET", {"range": "bytes=0-0"}, partial_limit=1, size_only=True
            )
            if probe.status == 206:
                what = f"{op} {key!r} in {self.location}"
                check_content_range(probe.headers.get("Content-Range"), len(probe.body), 0, 1, what)
            if probe.status in (200, 206, 416):
                return _size_from_probe(probe)
            if probe.status == 404 and _error_code(probe) != "NoSuchBucket":
                return None
            raise self._error(probe, op, key)
        reply = await self._request(op, key, "HEAD", {})
        if reply.status == 200:
            length = reply.headers.get("Content-Length")
            if length is not None and length.isdigit():
                return int(length)
            raise StoreError(f"{op} {key!r} in {self.location}: HEAD answered without a Content-Length")
        if reply.status == 404:
            return None
        code = "PermanentRedirect" if reply.status == 301 else None
        raise self._error(reply, op, key, code=code)


def checksum_calculation(config: Mapping[str, Any]) -> str:
    """botocore's ``request_checksum_calculation`` for ``config`` (its ``config_kwargs``):
    the option, else ``AWS_REQUEST_CHECKSUM_CALCULATION``, else azarr's default
    ``"when_required"`` (`DEFAULT_CHECKSUM_CALCULATION`; botocore's is ``"when_supported"``).

    Raises
    ------
    ValueError
        A value other than ``"when_supported"`` / ``"when_required"`` (any case).
    """
    value = config.get("request_checksum_calculation")
    if value is None:
        value = os.environ.get("AWS_REQUEST_CHECKSUM_CALCULATION") or DEFAULT_CHECKSUM_CALCULATION
    choice = str(value).lower()
    if choice not in CHECKSUM_CALCULATIONS:
        raise ValueError(
            f"request_checksum_calculation must be one of {CHECKSUM_CALCULATIONS}, got {value!r}"
        )
    return choice


def crc32c_header(data: bytes | memoryview | None) -> str:
    """``x-amz-checksum-crc32c`` of a body: base64 of its CRC-32C's 4 big-endian bytes (the
    write pipeline's, computed in its codec thread, else computed here)."""
    crc = known_crc32c(data)
    if crc is None:
        crc = body_crc32c(data)
    return base64.b64encode(crc.to_bytes(4, "big")).decode("ascii")


def _sha256_hex(data: bytes | memoryview | None) -> str:
    return hashlib.sha256(data or b"").hexdigest()


@functools.cache
def _aiohttp_and_url() -> tuple[Any, type[yarl.URL]]:
    """aiohttp and yarl's ``URL``, imported on first use (not when azarr is imported)."""
    import aiohttp
    from yarl import URL

    return aiohttp, URL


def _condition_code(reply: _Reply) -> str | None:
    """The error code of a conditional request's failure: 412 bodies are not always XML."""
    if reply.status == 412:
        return "412"
    return None


def _size_from_probe(reply: _Reply) -> int:
    """Object size from the answer to ``Range: bytes=0-0`` (416: an empty object)."""
    if reply.status == 200:
        return len(reply.body) if reply.size is None else reply.size
    if reply.status == 416:  # an empty object, unless the answer states another size
        return _unsatisfied_size(reply) or 0
    total = reply.headers.get("Content-Range", "").rpartition("/")[2]
    return int(total) if total.isdigit() else len(reply.body)


def _unsatisfied_size(reply: _Reply) -> int | None:
    """The object size a 416 answer states (``Content-Range: bytes */N``, S3's ``ActualObjectSize``)."""
    size = unsatisfied_size(reply.headers.get("Content-Range"))
    if size is None:
        match = _XML_SIZE.search(reply.body[:4096])
        size = int(match[1]) if match else None
    return size


def _error_code(reply: _Reply) -> str:
    match = _XML_CODE.search(reply.body[:4096])
    return match[1].decode("utf-8", "replace").strip() if match else ""


def _error_message(reply: _Reply) -> str:
    match = _XML_MESSAGE.search(reply.body[:8192])
    return unescape(match[1].decode("utf-8", "replace").strip()) if match else ""


def _seconds(value: Any) -> float | None:
    """A timeout option in seconds; ``None`` (botocore: no timeout) stays ``None``."""
    return None if value is None else float(value)


def _is_unsigned(signature_version: Any) -> bool:
    """True for ``botocore.UNSIGNED`` (s3fs's ``anon=True`` sets exactly that)."""
    if signature_version is None:
        return False
    from botocore import UNSIGNED

    return signature_version is UNSIGNED


def _host_header(scheme: str, netloc: str) -> str:
    """``netloc`` without credentials and without the scheme's default port (as aiohttp sends it)."""
    netloc = netloc.rpartition("@")[2].lower()
    default = ":443" if scheme == "https" else ":80"
    if netloc.endswith(default):
        netloc = netloc[: -len(default)]
    return netloc


def _configured_endpoints_possible() -> bool:
    """Whether botocore might find a configured endpoint (skip the lookup when it cannot)."""
    if os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"):
        return True
    config_file = os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config")
    return os.path.exists(config_file)


def _configured_endpoint(session: Any) -> str | None:
    """botocore's configured endpoint for S3 (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, config)."""
    from botocore.configprovider import ConfiguredEndpointProvider

    if session.get_config_variable("ignore_configured_endpoint_urls"):
        return None
    provider = ConfiguredEndpointProvider(
        full_config=session.full_config, scoped_config=session.get_scoped_config(), client_name="s3"
    )
    endpoint = provider.provide()
    return str(endpoint) if endpoint else None
