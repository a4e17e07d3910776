"""A store on Azure Blob Storage (and Azurite), through the Azure SDK's aio client.

``azure-storage-blob``'s ``aio.ContainerClient`` rather than adlfs: azarr needs the
ETag of every read (its generations) and ``If-Match`` / ``If-None-Match`` on uploads,
deletes and ranged reads (its conditional writes and pinned reads), which the SDK
exposes per call (``etag=``, ``match_condition=``) and fsspec's interface does not.
adlfs is built on the same client. The SDK's own retry loop is switched off: azarr's
scheduler retries (one retry layer, counted and under a deadline).

The SDK reads a download's body whole, and fetches the rest of a blob in further
ranges up to the size the first answer's ``Content-Range`` states. Every download
therefore carries a response hook (`_BoundedDownload`) that looks at each answer
before its body is read: a success must state a ``Content-Length`` within the
read's bound and a ``Content-Range`` that is the range asked (its total within the
bound for reads to the end), an error body is read up to a few KiB; bodies come
as stored (``decompress=False``: no ``Content-Encoding`` inflated).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from azarr.errors import (
    AzarrError,
    ConnectionFailedError,
    PreconditionFailedError,
    ResponseIntegrityError,
    StoreError,
    StoreUnavailableError,
    TransientStoreError,
)
from azarr.storage._aiohttp import _read_capped, _too_large
from azarr.storage._base import ByteRange, Generation, Store
from azarr.storage._errors import error_for_status
from azarr.storage._limits import ERROR_BODY_BYTES, body_limit
from azarr.storage._loops import PerLoop
from azarr.storage._ranges import check_content_range, check_unsatisfiable, content_range_total, range_limit
from azarr.storage._spec import StoreSpec
from azarr.storage._url import split_scheme

if TYPE_CHECKING:
    from azure.storage.blob.aio import ContainerClient

__all__ = ["AzureBlobStore"]

_SCHEMES = ("az", "abfs", "abfss", "azure")
_OPTIONS = frozenset(
    {
        "account_name",
        "account_key",
        "sas_token",
        "connection_string",
        "anon",
        "account_url",
        "account_host",
        "credential",
        "max_connections",
    }
)
# One GET per object up to this size (the SDK splits larger ones into parallel chunks
# pinned to the first response's ETag); azarr splits large chunks itself first.
_SINGLE_GET = 64 * 2**20
_SINGLE_PUT = 256 * 2**20


def _parse_connection_string(text: str) -> dict[str, str]:
    parts = {}
    for item in text.split(";"):
        name, sep, value = item.partition("=")
        if sep:
            parts[name.strip()] = value.strip()
    return parts


class AzureBlobStore(Store):
    """A Zarr hierarchy under ``az://container/path`` (zarr-python 2 ``ABSStore``).

    Parameters
    ----------
    container_and_path : str
        ``"container/path/to/data.zarr"`` (an ``az://``, ``abfs://`` or ``abfss://``
        prefix is accepted, and ``container@account.dfs.core.windows.net/path`` names
        the account too). The container must exist; the path need not.
    storage_options : dict, optional
        adlfs's option names: ``account_name``; one of ``account_key``, ``sas_token``,
        ``connection_string``, ``credential`` (an ``azure.identity`` credential or any
        the SDK takes) or ``anon=True`` (public containers); ``account_url`` (the blob
        endpoint, e.g. ``http://127.0.0.1:10000/devstoreaccount1`` for Azurite; default
        ``https://<account_name>.blob.core.windows.net``, or ``account_host`` for another
        host); ``max_connections`` (connection pool size, default 64). Without options
        the ``AZURE_STORAGE_CONNECTION_STRING``, or ``AZURE_STORAGE_ACCOUNT_NAME`` with
        ``AZURE_STORAGE_ACCOUNT_KEY`` / ``AZURE_STORAGE_SAS_TOKEN``, environment
        variables are used, as adlfs does.
    read_only : bool
        Refuse writes with `ReadOnlyError`.

    Raises
    ------
    ValueError
        No container, or no account to connect to.
    TypeError
        ``storage_options`` this store does not take.

    Notes
    -----
    Generations are ETags; conditional writes are uploads with ``If-Match`` (or
    ``If-None-Match: *`` for creates) and deletes with ``If-Match``; ranged reads can
    be pinned to an ETag. Azure answers a 412 (``ConditionNotMet``) or, for a create
    over an existing blob, a 409 (``BlobAlreadyExists``): both are
    `PreconditionFailedError`. Errors name the store URL and key, never a
    key or token: messages are built from the HTTP status and Azure's error code.
    Each event loop gets its own client (aiohttp session), closed by `close` or when
    the loop shuts down.

    Reads are bounded and checked (``docs/security.md``): an answer larger than the
    read's bound is `BodyTooLargeError` before its body is read; a ``206`` that is
    not the range asked, or a ``416`` for bytes the blob holds, is
    `ResponseIntegrityError` (retried). Values come as stored: a blob uploaded with
    a ``Content-Encoding`` is not inflated (as `S3Store`; adlfs inflates it). No
    redirect is followed.
    """

    supports_conditional_writes = True
    supports_conditional_reads = True

    def __init__(
        self,
        container_and_path: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:
        super().__init__(read_only=read_only)
        options = dict(storage_options or {})
        unknown = sorted(set(options) - _OPTIONS)
        if unknown:
            raise TypeError(
                f"storage_options {unknown} do not apply to Azure Blob Storage (known: {sorted(_OPTIONS)})"
            )
        scheme, rest = split_scheme(container_and_path)
        if scheme is not None and scheme not in _SCHEMES:
            raise ValueError(f"not an Azure Blob URL: {container_and_path!r}")
        container, _, path = rest.strip("/").partition("/")
        if "@" in container:
            container, _, host = container.partition("@")
            options.setdefault("account_name", host.split(".", 1)[0])
        if not container:
            raise ValueError(f"no container in {container_and_path!r}")
        self.container = container
        self.prefix = path.strip("/")
        self._options = options
        self._account_url, self._credential, self._connection_string = self._connection(options)
        limit = int(options.get("max_connections", 64))
        self._clients: PerLoop[ContainerClient] = PerLoop(
            lambda _loop: self._new_client(limit), AzureBlobStore._close_client
        )

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        return f"az://{self.container}/{self.prefix}".rstrip("/")

    @property
    def endpoint(self) -> str:
        """The blob service endpoint (no credentials)."""
        return self._account_url

    def _make_spec(self) -> StoreSpec:
        root = f"{self.container}/{self.prefix}".rstrip("/")
        return StoreSpec.create("az", root, self._options)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``az://container/path`` (``abfs://``, ``abfss://``) -> the store's spec."""
        return cls(url, storage_options=storage_options).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> AzureBlobStore:
        """``AzureBlobStore(spec.root, storage_options=...)``."""
        return cls(spec.root, storage_options=spec.storage_options())

    # ------------------------------------------------------------------ connection
    @staticmethod
    def _connection(options: Mapping[str, Any]) -> tuple[str, Any, str | None]:
        """(account URL, credential, connection string) from options or the environment."""
        connection_string = options.get("connection_string")
        if not connection_string and not options:
            connection_string = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if connection_string:
            parts = _parse_connection_string(connection_string)
            endpoint = parts.get("BlobEndpoint") or (
                f"{parts.get('DefaultEndpointsProtocol', 'https')}://{parts.get('AccountName', '')}.blob."
                f"{parts.get('EndpointSuffix', 'core.windows.net')}"
            )
            return endpoint.rstrip("/"), None, connection_string
        account = options.get("account_name") or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
        url = options.get("account_url")
        if not url:
            if not account:
                raise ValueError(
                    "Azure Blob Storage needs an account: give storage_options account_name "
                    "(or account_url, connection_string) or set AZURE_STORAGE_CONNECTION_STRING"
                )
            host = options.get("account_host") or f"{account}.blob.core.windows.net"
            url = f"https://{host}"
        if options.get("anon"):
            return url.rstrip("/"), None, None
        credential = options.get("credential")
        if credential is None and options.get("account_key"):
            credential = {
                "account_name": account or _account_from_url(url),
                "account_key": options["account_key"],
            }
        if credential is None and options.get("sas_token"):
            credential = str(options["sas_token"]).lstrip("?")
        if credential is None and not options:
            key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY")
            sas = os.environ.get("AZURE_STORAGE_SAS_TOKEN")
            if key:
                credential = {"account_name": account, "account_key": key}
            elif sas:
                credential = sas.lstrip("?")
        return url.rstrip("/"), credential, None

    def _new_client(self, limit: int) -> ContainerClient:
        import aiohttp
        from azure.core.pipeline.transport import AioHttpTransport
        from azure.storage.blob.aio import ContainerClient

        transport = AioHttpTransport(
            session=aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit)), session_owner=True
        )
        settings: dict[str, Any] = {
            "retry_total": 0,  # azarr's scheduler retries
            # Blob storage does not redirect; a redirect could lead to a metadata address.
            "permit_redirects": False,
            "max_single_get_size": _SINGLE_GET,
            "max_chunk_get_size": _SINGLE_GET,
            "max_single_put_size": _SINGLE_PUT,
            "transport": transport,
        }
        if self._connection_string:
            return ContainerClient.from_connection_string(self._connection_string, self.container, **settings)
        return ContainerClient(self._account_url, self.container, credential=self._credential, **settings)

    @staticmethod
    async def _close_client(client: ContainerClient) -> None:
        await client.close()

    async def _client(self) -> ContainerClient:
        client, _ = await self._clients.get()
        return client

    async def close(self) -> None:
        await self._clients.close()

    def _path(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    # ------------------------------------------------------------------ errors
    def _error(self, exc: BaseException, op: str, key: str) -> StoreError:
        """The azarr error for an SDK exception; the message holds no URL (a SAS token may be in it)."""
        from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError

        what = f"{op} {key!r} in {self.url}" if key else f"{op} {self.url}"
        if isinstance(exc, AzarrError):  # raised by a response hook (_BoundedDownload)
            return exc if isinstance(exc, StoreError) else StoreError(f"{what} failed: {exc}")
        if isinstance(exc, HttpResponseError) and exc.status_code is not None:
            status, code = exc.status_code, _code(exc)
            if code == "ContainerNotFound":
                return StoreUnavailableError(
                    f"{what} failed: the container does not exist (HTTP {status} {code})"
                )
            if code in ("ConditionNotMet", "BlobAlreadyExists"):
                status = 412  # a create over an existing blob is Azure's 409
            elif code == "ServerBusy":
                status = 429  # Azure's "slow down" is a 503 with this code
            return error_for_status(status, code, op, key, self.url)  # the shared status table
        if isinstance(exc, ValueError) and "Content-Range" in str(exc):
            # azure-storage-blob's own check of a download's answer, for what `_BoundedDownload`
            # lets through: the SDK's ranged first request of a whole-blob download answered
            # whole or with a malformed Content-Range. Retried, as every answer holding other
            # bytes than asked for (`azarr.storage._ranges`).
            return ResponseIntegrityError(f"{what}: the server sent other bytes than asked for: {exc}")
        if isinstance(exc, ServiceRequestError):
            return ConnectionFailedError(f"{what} failed: {self.endpoint} unreachable ({type(exc).__name__})")
        if isinstance(exc, ServiceResponseError | HttpResponseError | asyncio.TimeoutError | ConnectionError):
            # A response cut short (IncompleteReadError, a reset mid-body): worth retrying.
            return TransientStoreError(f"{what} failed with a transient error ({type(exc).__name__})")
        return StoreError(f"{what} failed: {type(exc).__name__}")

    @staticmethod
    def _missing(exc: BaseException) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        return isinstance(exc, ResourceNotFoundError) and _code(exc) != "ContainerNotFound"

    @staticmethod
    def _invalid_range(exc: BaseException) -> bool:
        from azure.core.exceptions import HttpResponseError

        return isinstance(exc, HttpResponseError) and exc.status_code == 416

    # ------------------------------------------------------------------ reads
    async def _download(
        self, key: str, byte_range: ByteRange | None, etag: str | None = None
    ) -> tuple[bytes, str | None, int] | None:
        """(bytes, ETag, object size) of ``key`` or a range of it; None if missing."""
        from azure.core import MatchConditions

        client = (await self._client()).get_blob_client(self._path(key))
        conditions: dict[str, Any] = {}
        if etag is not None:
            conditions = {"etag": etag, "match_condition": MatchConditions.IfNotModified}
        offset: int | None = None
        length: int | None = None
        known_size: int | None = None  # the size a suffix's offset is computed from
        if byte_range is not None:
            if byte_range.is_suffix:
                props = await client.get_blob_properties(**conditions)
                size = known_size = int(props.size)
                # The answer must state this size (_BoundedDownload), else the offset is wrong;
                # an empty blob is asked too: its 416 is checked like any other.
                offset = max(0, size + byte_range.start)
                etag = etag or props.etag
                if props.etag:  # the range of the version whose size was asked
                    conditions = {"etag": props.etag, "match_condition": MatchConditions.IfNotModified}
            else:
                offset = byte_range.start
                if byte_range.end is not None:
                    length = byte_range.end - byte_range.start
                    if length == 0:
                        props = await client.get_blob_properties(**conditions)
                        return b"", props.etag, int(props.size)
        bounded = _BoundedDownload(f"get {key!r} in {self.url}", offset or 0, length, known_size)
        try:
            stream = await client.download_blob(
                offset=offset, length=length, raw_response_hook=bounded, decompress=False, **conditions
            )
        except Exception as exc:
            if offset is not None and self._invalid_range(exc):
                # b"" only if the blob's size says the range starts at or past its end.
                props = await client.get_blob_properties(**conditions)
                if known_size is not None and int(props.size) != known_size:
                    raise ResponseIntegrityError(
                        f"{bounded.what}: the blob's properties stated {known_size} bytes, then {props.size}"
                    ) from exc
                check_unsatisfiable(int(props.size), offset, None, bounded.what)
                return b"", props.etag, int(props.size)
            raise
        data = await stream.readall()
        return bytes(data), stream.properties.etag, int(stream.properties.size)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        try:
            result = await self._download(key, byte_range)
        except Exception as exc:
            if self._missing(exc):
                return None
            raise self._error(exc, "get", key) from exc
        return None if result is None else result[0]

    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        try:
            result = await self._download(key, None)
        except Exception as exc:
            if self._missing(exc):
                return None, None
            raise self._error(exc, "get", key) from exc
        if result is None:
            return None, None
        return result[0], result[1]

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        try:
            result = await self._download(key, byte_range)
        except Exception as exc:
            if self._missing(exc):
                return None, None
            raise self._error(exc, "get", key) from exc
        return (None, None) if result is None else (result[0], result[1])

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        try:
            result = await self._download(key, byte_range, etag=str(generation))
        except Exception as exc:
            if self._missing(exc):
                raise PreconditionFailedError(f"get {key!r} in {self.url}: the object was deleted") from exc
            raise self._error(exc, "get", key) from exc
        return None if result is None else result[0]

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        client = (await self._client()).get_blob_client(self._path(key))
        try:
            props = await client.get_blob_properties()
        except Exception as exc:
            if self._missing(exc):
                return None
            raise self._error(exc, "stat", key) from exc
        return int(props.size), props.etag

    async def _getsize(self, key: str) -> int:
        info = await self._stat(key)
        if info is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return info[0]

    async def _exists(self, key: str) -> bool:
        return await self._stat(key) is not None

    # ------------------------------------------------------------------ writes
    async def _upload(self, key: str, value: bytes, **conditions: Any) -> None:
        client = (await self._client()).get_blob_client(self._path(key))
        try:
            await client.upload_blob(
                value, overwrite=conditions.pop("overwrite", True), length=len(value), **conditions
            )
        except Exception as exc:
            raise self._error(exc, "set", key) from exc

    async def _set(self, key: str, value: bytes) -> None:
        await self._upload(key, value)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        from azure.core import MatchConditions

        if generation is None:
            await self._upload(key, value, overwrite=False)  # If-None-Match: *
        else:
            await self._upload(
                key, value, etag=str(generation), match_condition=MatchConditions.IfNotModified
            )

    async def _delete(self, key: str) -> None:
        await self._remove(key)

    async def _delete_if(self, key: str, generation: Generation) -> None:
        from azure.core import MatchConditions

        try:
            await self._remove(key, etag=str(generation), match_condition=MatchConditions.IfNotModified)
        except PreconditionFailedError:
            if await self._stat(key) is None:
                return  # Azure answers If-Match on a missing blob with 412: nothing to delete
            raise

    async def _remove(self, key: str, **conditions: Any) -> None:
        client = (await self._client()).get_blob_client(self._path(key))
        try:
            await client.delete_blob(**conditions)
        except Exception as exc:
            if self._missing(exc):
                return
            raise self._error(exc, "delete", key) from exc

    async def _delete_prefix(self, prefix: str) -> None:
        keys = [k async for k in self._list_prefix(prefix)]
        container = await self._client()
        for start in range(0, len(keys), 256):  # Azure's batch limit
            batch = [self._path(k) for k in keys[start : start + 256]]
            try:
                await asyncio.gather(*(container.get_blob_client(b).delete_blob() for b in batch))
            except Exception as exc:
                if not self._missing(exc):
                    raise self._error(exc, "delete_prefix", prefix) from exc

    # ------------------------------------------------------------------ listings
    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        container = await self._client()
        base = f"{self.prefix}/" if self.prefix else ""
        try:
            async for blob in container.list_blobs(name_starts_with=base + prefix):
                yield blob.name[len(base) :]
        except Exception as exc:
            raise self._error(exc, "list", prefix) from exc

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        container = await self._client()
        base = f"{self.prefix}/" if self.prefix else ""
        start = base + prefix
        try:
            async for item in container.walk_blobs(name_starts_with=start, delimiter="/"):
                name = item.name[len(start) :].rstrip("/")
                if name:
                    yield name
        except Exception as exc:
            raise self._error(exc, "list", prefix) from exc


class _BoundedDownload:
    """A download's ``raw_response_hook``: each answer checked before the SDK reads its body.

    azure-core calls it with every response of the download (the first ranged GET
    and the SDK's follow-up ranges), body unread (the SDK streams downloads).
    Success: ``Content-Length`` must be stated (Azure always does; aiohttp then
    never reads past it) and within the read's bound; ``Content-Range`` must be the
    range asked (``x-ms-range``, `check_content_range` with ``Content-Length`` as
    the body's length); a read to the end of the blob must not state a total past
    the bound, since the SDK would fetch up to it. Errors: the body the SDK reads
    for its exception stops at `ERROR_BODY_BYTES`.
    """

    __slots__ = ("length", "limit", "size", "start", "what")

    def __init__(self, what: str, start: int, length: int | None, size: int | None = None) -> None:
        self.what = what
        self.start = start
        self.length = length
        self.size = size  # the blob's size the range was computed from (a suffix read)
        end = None if length is None else start + length
        self.limit = range_limit(start, end, body_limit())

    def __call__(self, pipeline_response: Any) -> None:
        response = pipeline_response.http_response
        internal = getattr(response, "internal_response", None)  # the aiohttp.ClientResponse
        try:
            self._check(pipeline_response, response, internal)
        except AzarrError:
            # The SDK does not close an answer its hook refused: its connection would stay
            # checked out until the garbage collector found it ("Unclosed connection").
            # Closed, not released: the body (perhaps endless) is not read to its end.
            if internal is not None:
                internal.close()
            raise

    def _check(self, pipeline_response: Any, response: Any, internal: Any) -> None:
        status = int(response.status_code)
        headers = response.headers
        if not 200 <= status < 300:
            if internal is not None:
                _cap_error_body(internal)
            return
        if status == 200 and (self.start > 0 or self.length is not None):
            # A range answered whole: a server that ignored it (Azure never does).
            # azure-storage-blob would refuse it too, by a ValueError about Content-Range.
            raise ResponseIntegrityError(
                f"{self.what}: the server sent other bytes than asked for (the whole value, "
                f"HTTP 200, for the range starting at byte {self.start})"
            )
        declared = headers.get("Content-Length", "")
        length = int(declared) if declared.isdigit() else None
        if length is not None and length > self.limit:
            raise _too_large(self.what, self.limit, declared=length)
        content_range = headers.get("Content-Range")
        total = content_range_total(content_range)
        if self.length is None and total is not None and total - self.start > self.limit:
            raise _too_large(self.what, self.limit, declared=total - self.start)
        if self.size is not None and total is not None and total != self.size:
            raise ResponseIntegrityError(
                f"{self.what}: the blob's properties state {self.size} bytes, its download {total}"
            )
        # A body of no stated length (chunked) must hold what its Content-Range states.
        stated = length if length is not None else _span(content_range)
        asked = pipeline_response.http_request.headers.get("x-ms-range", "")
        first, _, last = asked.removeprefix("bytes=").partition("-")
        if status == 206 and first.isdigit():
            if length == 0 and total is not None and total <= int(first):
                return  # Azurite's answer to a range past the end ("bytes 10-9/10"): empty
            end = int(last) + 1 if last.isdigit() else None
            check_content_range(content_range, -1 if stated is None else stated, int(first), end, self.what)
        if internal is not None and length is None:  # aiohttp bounds a stated length itself
            internal.content = _CappedContent(internal.content, self.limit, self.what, stated)


def _span(content_range: str | None) -> int | None:
    """Bytes a ``Content-Range: bytes first-last/total`` covers (None if unparsable)."""
    first, _, rest = (content_range or "").strip().removeprefix("bytes").strip().partition("-")
    last = rest.partition("/")[0]
    return int(last) - int(first) + 1 if first.isdigit() and last.isdigit() else None


class _CappedContent:
    """An aiohttp ``StreamReader`` of a body of no stated length (chunked) whose ``read``
    raises `BodyTooLargeError` past ``limit`` bytes, and `ResponseIntegrityError` if it
    ends other than at ``exact`` bytes (its ``Content-Range``). azure-core reads a
    download with ``content.read(block_size)``."""

    __slots__ = ("_exact", "_inner", "_limit", "_read", "_what")

    def __init__(self, inner: Any, limit: int, what: str, exact: int | None) -> None:
        self._inner = inner
        self._limit = limit
        self._what = what
        self._exact = exact
        self._read = 0

    async def read(self, n: int = -1) -> bytes:
        room = self._limit + 1 - self._read
        block: bytes = await self._inner.read(room if n < 0 else max(1, min(n, room)))
        self._read += len(block)
        if self._read > self._limit:
            raise _too_large(self._what, self._limit, received=self._limit)
        if not block and self._exact is not None and self._read != self._exact:
            raise ResponseIntegrityError(
                f"{self._what}: the body ended after {self._read} of the {self._exact} bytes "
                "its Content-Range states"
            )
        return block

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _cap_error_body(internal: Any) -> None:
    """Make ``internal.read()`` (how azure-core loads an error body) stop at `ERROR_BODY_BYTES`."""

    async def read() -> bytes:
        return await _read_capped(internal, ERROR_BODY_BYTES, truncate=True) or b""

    internal.read = read


def _code(exc: BaseException) -> str:
    """Azure's error code of an SDK exception (``"ConditionNotMet"``), or ``""``."""
    code = getattr(exc, "error_code", None) or ""
    return str(getattr(code, "value", code))


def _account_from_url(url: str) -> str:
    """The account of an endpoint URL: the first host label, or Azurite's path segment."""
    _, rest = split_scheme(url)
    host, _, path = rest.partition("/")
    if path:
        return path.split("/", 1)[0]  # http://127.0.0.1:10000/devstoreaccount1
    return host.split(".", 1)[0]
