"""A read-only store over plain HTTP(S): static file servers, CDNs, public buckets.

Built on aiohttp directly rather than fsspec's ``HTTPFileSystem``: azarr needs the
status of every response (404 = missing key, 403 = denied, 416 = past the end),
exact ``Range`` handling (fsspec silently accepts a server that ignores ``Range``)
and one connection pool per event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
from collections.abc import AsyncIterator, Mapping
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, unquote, urljoin, urlsplit

from azarr.errors import InvalidKeyError, ResponseIntegrityError, StoreError
from azarr.storage._aiohttp import (
    Allocator,
    ConnectionDropped,
    SharedSessions,
    new_session,
    read_body,
    unwrap_dropped,
)
from azarr.storage._base import ByteRange, Store, validate_key
from azarr.storage._errors import error_for_status, translate_error
from azarr.storage._limits import body_limit
from azarr.storage._options import HTTPOptions
from azarr.storage._ranges import (
    check_content_range,
    check_unsatisfiable,
    range_header,
    range_limit,
    unsatisfied_size,
)
from azarr.storage._redact import redact_text, remember_options
from azarr.storage._redirects import REDIRECT_STATUSES, RedirectPolicy, RedirectRefusedError, shown
from azarr.storage._spec import StoreSpec

if TYPE_CHECKING:
    import aiohttp
    from multidict import CIMultiDictProxy
    from yarl import URL

_OPTIONS = frozenset(
    {
        "headers",
        "client_kwargs",
        "timeout",
        "max_connections",
        "listings",
        "allow_cross_origin_redirects",
        "ssl",
    }
)
# ClientSession arguments the store manages itself (one pool per event loop, status handling).
_MANAGED_CLIENT_KWARGS = frozenset({"connector", "connector_owner", "loop", "raise_for_status"})
# Directory indexes fetched at once while walking a tree for list_prefix.
_LIST_CONCURRENCY = 16
# Deeper than any Zarr hierarchy: a server following a symlink loop would list forever.
_MAX_LIST_DEPTH = 256
# Whole values may come compressed (read_body inflates gzip/deflate, bounded); nothing else
# is asked for, so a Brotli or Zstandard answer is the server's fault.
_WHOLE_VALUE = {"Accept-Encoding": "gzip, deflate"}


class _Reply(NamedTuple):
    status: int
    reason: str
    headers: CIMultiDictProxy[str]
    body: bytes
    url: URL  # after redirects
    received: memoryview | None = None  # a 200 body read into an allocator's buffer (body is then b"")


def _new_http_session(
    limit: int, timeout: float | None, tls: Any, kwargs: dict[str, Any]
) -> aiohttp.ClientSession:
    kwargs = dict(kwargs)
    # Bodies are inflated by read_body, bounded (an aiohttp-decoded gzip bomb is not).
    kwargs["auto_decompress"] = False
    # Without a timeout option, aiohttp's own defaults (300 s per request) apply.
    if timeout is None:
        import aiohttp

        kwargs.setdefault("timeout", aiohttp.ClientTimeout())
    return new_session(limit=limit, connect_timeout=timeout, read_timeout=timeout, ssl=tls, **kwargs)


class HTTPStore(Store):
    """A Zarr hierarchy published under an ``http://`` or ``https://`` URL (read-only).

    zarr-python 2 reads such URLs through ``FSStore`` on fsspec's ``HTTPFileSystem``;
    this store talks to the server itself with aiohttp.

    Parameters
    ----------
    url : str
        URL of the hierarchy's root, e.g. ``"https://example.org/data/x.zarr"``. Keys
        are appended as URL-quoted paths (``"données/0.0"`` ->
        ``".../donn%C3%A9es/0.0"``). Credentials in the URL (``https://user:pw@...``)
        are sent as basic auth and never shown in messages.
    storage_options : dict, optional
        ``headers`` : dict
            Sent with every request (e.g. ``{"Authorization": "Bearer ..."}``).
        ``client_kwargs`` : dict
            Passed to `aiohttp.ClientSession` (``auth``, ``trust_env``,
            ``timeout`` as an `aiohttp.ClientTimeout`, ...). ``connector``,
            ``loop`` and ``raise_for_status`` are managed by the store.
        ``timeout`` : float
            Seconds allowed to connect, and between two received pieces of a
            response (a large download that keeps receiving data does not time
            out). Default: aiohttp's (300 s per request, 30 s to connect).
        ``max_connections`` : int
            Size of each event loop's keep-alive pool (default: the
            ``max_concurrency`` setting, 64).
        ``listings`` : bool
            ``False`` never requests directory listings (``supports_listing`` is
            then False and listing yields nothing). Default True.
        ``ssl`` : bool, str or ssl.SSLContext
            How to verify an ``https://`` server's certificate (fsspec's
            ``HTTPFileSystem`` passes the same ``ssl`` to aiohttp): ``True``
            (default) against the system's trust store; a path to a PEM CA bundle
            (a private CA); an `ssl.SSLContext` as given (it does not pickle:
            give a path to a store sent to other processes); ``False`` not at all.
        ``allow_cross_origin_redirects`` : bool
            Follow redirects to another scheme, host or port (default False:
            such redirects raise `RedirectRefusedError`).
            ``headers`` and credentials are never sent to the other origin, and
            https -> http or link-local/metadata targets are refused regardless
            (see ``docs/security.md``).

    Raises
    ------
    ValueError
        Not an http(s) URL, no host, or a query string/fragment (keys are appended
        to the path, so a query would end up in the wrong place).
    TypeError
        An unknown storage option, or a managed ``client_kwargs`` entry.

    Notes
    -----
    * Reads are ``GET`` requests; byte ranges are sent as ``Range: bytes=a-b`` or
      ``bytes=-n`` (suffix), with ``Accept-Encoding: identity`` so the range applies
      to the stored bytes. A ``206`` must carry a ``Content-Range`` that matches the
      request (else `StoreError`); a server that ignores
      ``Range`` and answers ``200`` gets the range sliced locally; ``416`` means a
      range past the end and reads as ``b""`` (Python slicing, like every store).
    * ``exists`` and ``getsize`` use ``HEAD`` (``Content-Length``); a server that
      refuses ``HEAD`` (405/501) gets a ``GET`` instead.
    * A URL that redirects to itself plus ``/`` (nginx, Apache, ``http.server``) is a
      directory, not a value: it reads as missing.
    * Listing parses HTML directory indexes (nginx ``autoindex``, Apache
      ``mod_autoindex``, ``python -m http.server``, aiohttp ``show_index``) the way
      fsspec's ``HTTPFileSystem._ls_real`` does: every ``<a href>`` that resolves to
      a path directly below the directory is an entry, a directory when the link or
      its text ends in ``/``; parent links and query links (sort columns) are
      skipped. ``list_prefix`` walks the tree. Without indexes (object stores, CDNs)
      listing yields nothing: if the root itself has none (404, 403, 405, or not
      HTML), ``supports_listing`` becomes False for this store and later listings
      send no request. Open such data with consolidated metadata
      (``azarr.open_consolidated``), which needs no listing.
    * Errors name the store URL and the key, and the HTTP status: 404 -> missing
      (``None``); 401/403 -> `PermissionDeniedError`; 429 ->
      `ThrottledError`; 5xx and 408 ->
      `TransientStoreError`; other statuses ->
      `StoreError`; connection refused, DNS failure, reset or
      timeout -> `ConnectionFailedError` (a
      `StoreUnavailableError`); a body cut short ->
      `TransientStoreError`. The store itself does not retry:
      azarr's scheduler retries the transient ones (aiohttp itself retries an
      idempotent request once when a kept-alive connection turns out to be closed).
    * One `aiohttp.ClientSession` and ``TCPConnector`` per event loop, created
      on first use there and closed by `close` or when that loop shuts down
      (``asyncio.run``); the store can be used from any number of loops and threads.
      Pickling keeps only the configuration.

    Examples
    --------
    >>> store = HTTPStore("https://example.org/data.zarr/")
    >>> store.url
    'https://example.org/data.zarr'
    >>> store.supports_writes
    False
    """

    supports_writes = False
    supports_deletes = False

    def __init__(self, url: str, *, storage_options: HTTPOptions | Mapping[str, Any] | None = None) -> None:
        super().__init__(read_only=True)
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"HTTPStore needs an http:// or https:// URL with a host, got {redact_text(url)!r}"
            )
        if parts.query or parts.fragment:
            raise ValueError(
                f"HTTPStore URL {redact_text(url)!r} has a query string or fragment; give the root URL "
                "of the hierarchy"
            )
        options = dict(storage_options or {})
        remember_options(options, url)
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(f"unknown HTTPStore storage_options {unknown}; valid: {sorted(_OPTIONS)}")
        managed = sorted(set(options.get("client_kwargs") or {}) & _MANAGED_CLIENT_KWARGS)
        if managed:
            raise TypeError(f"HTTPStore manages client_kwargs {managed} itself (one pool per event loop)")
        timeout = options.get("timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ValueError(f"HTTPStore timeout must be a positive number of seconds, got {timeout!r}")
        import ssl

        tls = options.get("ssl", True)
        if not isinstance(tls, bool | str | ssl.SSLContext):
            raise ValueError(
                f"HTTPStore ssl must be a bool, a CA bundle path or an ssl.SSLContext, got {tls!r}"
            )
        limit = options.get("max_connections")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"HTTPStore max_connections must be an int >= 1, got {limit!r}")
        self.storage_options: dict[str, Any] = options
        self._redirects = RedirectPolicy(allow_cross_origin=bool(options.get("allow_cross_origin_redirects")))
        # The root as given (requests use it, credentials included) and as shown.
        self._root = url.rstrip("/")
        netloc = parts.hostname + (f":{parts.port}" if parts.port is not None else "")
        if ":" in parts.hostname:  # IPv6 literal
            netloc = f"[{parts.hostname}]" + (f":{parts.port}" if parts.port is not None else "")
        self._display = parts._replace(netloc=netloc).geturl().rstrip("/")
        self._sessions: SharedSessions | None = None  # chosen on first use (settings read then)
        self.supports_listing = bool(self.storage_options.get("listings", True))

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        return self._display

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create("http", self._root, self.storage_options)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``http://`` / ``https://`` roots; the spec of ``HTTPStore(url, storage_options=...)``."""
        return cls(url, storage_options=storage_options).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> HTTPStore:
        """``HTTPStore(spec.root, storage_options=...)``."""
        return cls(spec.root, storage_options=spec.storage_options())

    def _key_url(self, key: str, *, directory: bool = False) -> URL:
        """Absolute URL of ``key`` (or of the directory ``key``, with a trailing slash)."""
        from yarl import URL

        # safe="/": keep the separators, quote everything else that is not unreserved
        # ('?', '#', '%', spaces, UTF-8 bytes of non-ASCII characters).
        path = quote(key, safe="/")
        if directory and path and not path.endswith("/"):
            path += "/"
        return URL(f"{self._root_encoded}/{path}", encoded=True)

    @functools.cached_property
    def _root_encoded(self) -> str:
        """The root URL with what the user left unquoted quoted (yarl keeps %-escapes)."""
        from yarl import URL

        return str(URL(self._root))

    # ------------------------------------------------------------------ sessions
    def _shared_sessions(self) -> SharedSessions:
        """The sessions of every HTTPStore with the same connection options (pool size,
        timeout, ``ssl``, ``client_kwargs``); a store whose ``client_kwargs`` cannot be
        compared (unhashable values) gets its own."""
        from azarr import config

        kwargs = dict(self.storage_options.get("client_kwargs") or {})
        timeout = self.storage_options.get("timeout")
        limit = self.storage_options.get("max_connections") or int(config.get("max_concurrency"))
        tls = self.storage_options.get("ssl", True)
        make = functools.partial(_new_http_session, limit, timeout, tls, kwargs)
        try:
            key = ("http", limit, timeout, tls, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:
            return SharedSessions(make)
        return SharedSessions.for_settings(key, make)

    async def session(self) -> aiohttp.ClientSession:
        """The aiohttp session serving the running event loop (created on first use).

        Shared with every HTTPStore of the same connection options, as the S3
        transport's is (`SharedSessions`). For
        advanced use (requests azarr does not make).
        """
        if self._sessions is None:
            self._sessions = self._shared_sessions()
        return await self._sessions.get(self)

    async def close(self) -> None:
        """Release the running loop's connections: they close once no other HTTPStore with
        the same options uses them, after ``connection_linger`` seconds (`azarr.config`).
        The store stays usable."""
        if self._sessions is not None:
            await self._sessions.release(self)

    # ------------------------------------------------------------------ requests
    async def _send(
        self,
        op: str,
        key: str,
        method: str,
        url: URL,
        headers: Mapping[str, str],
        allocate: Allocator | None = None,
        *,
        partial_limit: int | None = None,
        decode: bool = False,
        window: tuple[int, int | None] | None = None,
    ) -> _Reply:
        """One request; transport failures become azarr errors naming URL and key.
        ``allocate``: where a 200 response's body goes; ``limit``: the most bytes it may
        hold when partial; ``decode``: inflate a gzip/deflate ``Content-Encoding``; ``window``: the
        range asked, all of a 200 body that is kept (`read_body`)."""
        import aiohttp

        # The loop's session without a coroutine once it exists.
        session = SharedSessions.claim_from(self._sessions, self) or await self.session()
        all_headers = {**(self.storage_options.get("headers") or {}), **headers}
        try:
            # Redirects are followed here, one checked hop at a time (_redirects.py).
            for hops in itertools.count(1):
                async with session.request(method, url, headers=all_headers, allow_redirects=False) as resp:
                    location = resp.headers.get("Location") if resp.status in REDIRECT_STATUSES else None
                    if location is None:
                        # Read even error bodies (small): an unread body closes the connection
                        # instead of returning it to the keep-alive pool, and missing chunks
                        # (404) are routine in Zarr.
                        body, received = await read_body(
                            resp,
                            allocate,
                            what=f"{op} {key!r} in {self.url}",
                            partial_limit=partial_limit,
                            decode=decode,
                            window=window,
                        )
                        return _Reply(resp.status, resp.reason or "", resp.headers, body, resp.url, received)
                    target = self._redirect_target(url, location, op, key)
                try:
                    cross = await self._redirects.check(url, target, hops=hops)
                except RedirectRefusedError as exc:
                    raise RedirectRefusedError(f"{op} {key!r} in {self.url}: {exc}") from None
                if cross:
                    if session.auth is not None or session.headers:
                        # aiohttp adds a session's own auth/headers to every request.
                        raise RedirectRefusedError(
                            f"{op} {key!r} in {self.url}: redirect to {shown(target)} refused: the "
                            "session's client_kwargs auth/headers would be sent to another origin"
                        )
                    all_headers = dict(headers)  # the user's headers stay with their origin
                elif url.user is not None and target.user is None:
                    target = target.with_user(url.user).with_password(url.password)  # same origin
                url = target
            raise AssertionError("unreachable")  # pragma: no cover
        except (ConnectionDropped, aiohttp.ClientError, TimeoutError) as exc:
            # One table for every network driver: refused/reset/disconnected -> retried as
            # ConnectionFailedError, a body cut short or a read timeout -> transient, the
            # rest (invalid URL, ...) -> StoreError.
            cause = unwrap_dropped(exc)
            raise translate_error(cause, op, key, self.url) from cause

    def _redirect_target(self, current: URL, location: str, op: str, key: str) -> URL:
        from yarl import URL

        try:
            return current.join(URL(location))
        except (ValueError, TypeError) as exc:
            raise StoreError(f"{op} {key!r} in {self.url}: invalid redirect Location") from exc

    def _status_error(self, reply: _Reply, op: str, key: str) -> StoreError:
        return error_for_status(reply.status, reply.reason, op, key, self.url)

    @staticmethod
    def _is_directory(requested: URL, reply: _Reply) -> bool:
        """The server redirected ``.../name`` to ``.../name/``: a directory, not a value."""
        return reply.url.path.endswith("/") and not requested.path.endswith("/")

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if byte_range is not None and byte_range.is_empty:
            return b"" if await self._exists(key) else None
        if byte_range is not None and byte_range.start == 0 and byte_range.end is None:
            byte_range = None  # the whole value: no Range header
        headers = dict(_WHOLE_VALUE)
        limit: int | None = None  # of a 206 answer: the range's length
        if byte_range is not None:
            headers["Range"] = _range_header(byte_range)
            # A range of the stored bytes, not of a compressed transfer encoding.
            headers["Accept-Encoding"] = "identity"
            limit = range_limit(byte_range.start, byte_range.end, body_limit())
        url = self._key_url(key)
        # decode: a server ignoring Range sends the whole value with 200, perhaps compressed
        # although identity was asked for; it is inflated (bounded) and only the range kept.
        window = None if byte_range is None else (byte_range.start, byte_range.end)
        reply = await self._send(
            "get", key, "GET", url, headers, partial_limit=limit, decode=True, window=window
        )
        if reply.status == 404:
            return None
        if reply.status == 416 and byte_range is not None:
            # b"" (Python slicing) only if the value's size says the range starts at or past
            # its end (or the value is empty): the size the answer states, else asked for.
            size = unsatisfied_size(reply.headers.get("Content-Range"))
            if size is None:
                try:
                    size = await self._getsize(key)
                except FileNotFoundError:
                    return None
            check_unsatisfiable(size, byte_range.start, byte_range.end, f"get {key!r} in {self.url}")
            return b""
        if reply.status not in (200, 206):
            raise self._status_error(reply, "get", key)
        if byte_range is None:
            return self._whole_value(url, reply, key)
        if self._is_directory(url, reply):
            return None
        if reply.status == 200:
            # The server ignores Range (e.g. python -m http.server): read_body kept the range.
            return reply.body
        encoding = reply.headers.get("Content-Encoding", "identity").strip().lower()
        what = f"get {key!r} in {self.url}"
        if encoding != "identity":
            raise ResponseIntegrityError(
                f"{what}: the server answered a byte range with Content-Encoding {encoding!r} "
                "although the request asked for identity"
            )
        check_content_range(
            reply.headers.get("Content-Range"), len(reply.body), byte_range.start, byte_range.end, what
        )
        return reply.body

    async def _get_into(self, key: str, allocate: Allocator) -> bytes | memoryview | None:
        url = self._key_url(key)
        reply = await self._send("get", key, "GET", url, dict(_WHOLE_VALUE), allocate, decode=True)
        if reply.status == 404:
            return None
        if reply.status not in (200, 206):
            raise self._status_error(reply, "get", key)
        value = self._whole_value(url, reply, key)
        return value if value is None or reply.received is None else reply.received

    def _whole_value(self, requested: URL, reply: _Reply, key: str) -> bytes | None:
        """The body of a 200/206 answer to a GET without Range: None for a directory."""
        if self._is_directory(requested, reply):
            return None
        if reply.status == 206:
            raise ResponseIntegrityError(
                f"get {key!r} in {self.url}: the server answered 206 Partial Content to a request without Range"
            )
        return reply.body

    async def _head(self, op: str, key: str) -> tuple[URL, _Reply] | None:
        """HEAD ``key``; ``None`` if the server does not allow HEAD (405/501)."""
        url = self._key_url(key)
        reply = await self._send(op, key, "HEAD", url, {"Accept-Encoding": "identity"})
        if reply.status in (405, 501):
            return None
        return url, reply

    async def _exists(self, key: str) -> bool:
        head = await self._head("exists", key)
        if head is None:
            # One byte is enough to know (416: an empty value).
            url = self._key_url(key)
            reply = await self._send(
                "exists", key, "GET", url, {"Range": "bytes=0-0", "Accept-Encoding": "identity"}
            )
            if reply.status == 416:
                return True
        else:
            url, reply = head
        if reply.status == 404:
            return False
        if reply.status not in (200, 206):
            raise self._status_error(reply, "exists", key)
        return not self._is_directory(url, reply)

    async def _getsize(self, key: str) -> int:
        head = await self._head("getsize", key)
        if head is not None:
            url, reply = head
            if reply.status == 404 or (reply.status == 200 and self._is_directory(url, reply)):
                raise FileNotFoundError(f"{key!r} not found in {self.url}")
            if reply.status != 200:
                raise self._status_error(reply, "getsize", key)
            length = reply.headers.get("Content-Length")
            if length is not None and length.isdigit():
                return int(length)
        # No HEAD, or no Content-Length (chunked): fetch the value.
        value = await self._get(key, None)
        if value is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return len(value)

    async def _set(self, key: str, value: bytes) -> None:  # pragma: no cover - set() refuses first
        raise StoreError(f"cannot write {key!r}: HTTP store {self.url} is read-only")

    async def _delete(self, key: str) -> None:  # pragma: no cover - delete() refuses first
        raise StoreError(f"cannot delete {key!r}: HTTP store {self.url} is read-only")

    # ------------------------------------------------------------------ listing
    async def _index(self, prefix: str) -> tuple[set[str], set[str]] | None:
        """(values, directories) directly under ``prefix`` from the server's HTML index.

        ``None`` when there is no index there (missing directory, listings disabled,
        forbidden, or not HTML). ``prefix`` is normalized (``""`` or ``"a/"``).
        """
        if not self.supports_listing:
            return None
        url = self._key_url(prefix, directory=True)
        reply = await self._send("list", prefix, "GET", url, dict(_WHOLE_VALUE), decode=True)
        content_type = reply.headers.get("Content-Type", "")
        mimetype = content_type.partition(";")[0].strip().lower()
        if reply.status == 401:
            raise self._status_error(reply, "list", prefix)
        if reply.status == 200 and mimetype in ("text/html", "application/xhtml+xml", ""):
            charset = _charset(content_type) or "utf-8"
            try:
                text = reply.body.decode(charset, errors="replace")
            except LookupError:  # unknown charset name
                text = reply.body.decode("utf-8", errors="replace")
            return parse_index(text, str(reply.url))
        if reply.status in (404, 403, 405, 501) or reply.status == 200:
            if not prefix:
                # The root of a hierarchy exists; no index there means none anywhere.
                self.supports_listing = False
            return None
        raise self._status_error(reply, "list", prefix)

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        index = await self._index(prefix)
        if index is not None:
            values, dirs = index
            for name in sorted(values | dirs):
                yield name

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        sem = asyncio.Semaphore(_LIST_CONCURRENCY)

        async def index(p: str) -> tuple[set[str], set[str]] | None:
            async with sem:
                return await self._index(p)

        keys: list[str] = []
        level = [prefix]
        depth = 0
        while level:
            depth += 1
            if depth > _MAX_LIST_DEPTH:
                raise StoreError(
                    f"list {prefix!r} in {self.url}: directories nest deeper than {_MAX_LIST_DEPTH} "
                    f"levels (a symlink loop on the server?), e.g. {level[0]!r}"
                )
            results = await asyncio.gather(*(index(p) for p in level))
            below: list[str] = []
            for p, result in zip(level, results, strict=True):
                if result is not None:
                    values, dirs = result
                    keys += [p + v for v in values]
                    below += [f"{p}{d}/" for d in sorted(dirs)]
            level = below
        for key in sorted(keys):
            yield key


def _range_header(byte_range: ByteRange) -> str:
    """The HTTP ``Range`` value for a byte range (``bytes=a-b`` is inclusive)."""
    return range_header(byte_range.start, byte_range.end)


def _charset(content_type: str) -> str | None:
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip('"') or None
    return None


class _LinkParser(HTMLParser):
    """Collects ``(href, link text)`` of every ``<a>``, and a ``<base href>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str]] = []
        self.base: str | None = None
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._close_link()
            self._href = dict(attrs).get("href")
            self._text = []
        elif tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._close_link()

    def _close_link(self) -> None:
        if self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
        self._href = None
        self._text = []

    def close(self) -> None:
        super().close()
        self._close_link()


def parse_index(html: str, page_url: str) -> tuple[set[str], set[str]]:
    """Entries of an HTML directory index: (value names, directory names).

    Follows fsspec ``HTTPFileSystem._ls_real``'s conventions: each ``<a href>`` is
    resolved against the page URL (or ``<base href>``); it is an entry when it
    names a path directly below the page's directory on the same host. A trailing
    ``/`` on the link, or on its text (aiohttp's ``show_index`` links directories
    without one), marks a directory. Parent links, links elsewhere, links with a
    query (sort columns), and names that are not valid key segments are skipped.

    Parameters
    ----------
    html : str
        The page.
    page_url : str
        The URL of the listed directory (after redirects); a missing trailing ``/``
        is assumed.

    Returns
    -------
    tuple of (set of str, set of str)
        Decoded names (``"ü"``, not ``"%C3%BC"``), without slashes.
    """
    parser = _LinkParser()
    with contextlib.suppress(Exception):  # malformed HTML: keep what was parsed
        parser.feed(html)
        parser.close()
    page = urlsplit(page_url)
    if not page.path.endswith("/"):  # the page lists a directory, whatever its URL says
        page = page._replace(path=page.path + "/")
    page_url = page.geturl()
    base = urljoin(page_url, parser.base) if parser.base else page_url
    directory = unquote(page.path)
    values: set[str] = set()
    dirs: set[str] = set()
    for href, text in parser.links:
        target = urlsplit(urljoin(base, href.strip()))
        if target.query or target.netloc.lower() != page.netloc.lower():
            continue
        path = unquote(target.path)
        if not path.startswith(directory):
            continue
        rel = path[len(directory) :]
        is_dir = rel.endswith("/") or text.endswith("/")
        name = rel.rstrip("/")
        if not name or "/" in name:
            continue
        try:
            validate_key(name)
        except InvalidKeyError:
            continue
        (dirs if is_dir else values).add(name)
    return values, dirs
