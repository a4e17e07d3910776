"""A store on Google Cloud Storage and GCS emulators (fake-gcs-server), via gcsfs."""

from __future__ import annotations

import os

# gcsfs >= 2026.10 replaces ``gcsfs.GCSFileSystem`` by an experimental "zonal /
# hierarchical namespace" filesystem unless this is false *when gcsfs is imported*.
# That class asks the bucket for its layout over gRPC before writes, which hangs
# against emulators and adds a round trip on real GCS. setdefault: a user who opts
# in explicitly keeps their choice. GCSStore uses the plain class either way.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

import asyncio
import functools
import json
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import quote

from azarr.errors import (
    AzarrError,
    PermissionDeniedError,
    PreconditionFailedError,
    ResponseIntegrityError,
    StoreError,
    StoreUnavailableError,
)
from azarr.storage._aiohttp import Allocator
from azarr.storage._base import ByteRange, Generation
from azarr.storage._errors import backend_codes
from azarr.storage._fsspec import FsspecStore
from azarr.storage._gcs_media import gcs_get, media_get, resource_get
from azarr.storage._limits import body_limit
from azarr.storage._options import GCSOptions
from azarr.storage._ranges import (
    check_content_range,
    check_unsatisfiable,
    range_header,
    range_limit,
    unsatisfied_size,
)
from azarr.storage._redact import redact_url
from azarr.storage._spec import StoreSpec

_SCHEMES = ("gs://", "gcs://")


class GCSStore(FsspecStore):
    """A Zarr hierarchy under ``gs://bucket/path`` (zarr-python 2 ``FSStore("gs://...")``).

    Parameters
    ----------
    bucket_and_path : str
        ``"bucket/path/to/data.zarr"`` (a ``gs://`` or ``gcs://`` prefix is accepted).
        The bucket must exist; the path need not.
    storage_options : dict, optional
        `gcsfs.GCSFileSystem` options exactly as gcsfs users pass them, e.g.
        ``{"project": "my-project", "token": "anon"}`` (``token`` also takes
        ``"google_default"``, ``"cloud"``, a service-account JSON path or a
        credentials object), ``{"requester_pays": True}``, or
        ``{"endpoint_url": "http://127.0.0.1:4443", "token": "anon"}`` for an
        emulator. One azarr option is added:

        ``retries`` : int
            Attempts per HTTP request inside gcsfs (``GCSFileSystem.retries``), and
            per download or resource GET the store sends itself (gcsfs's retry rules).
            azarr's default is 1: its scheduler retries array I/O itself, with
            backoff, a deadline and counters, and stacked retry layers multiply.
            gcsfs fixes that number for the class; azarr applies it per store.
    read_only : bool
        Refuse writes with `ReadOnlyError`.

    Raises
    ------
    ValueError
        No bucket name, or ``retries`` is not a positive integer.

    Notes
    -----
    Defaults azarr adds unless given: ``use_listings_cache=False`` (a cached listing
    would miss keys written after it).

    Reads do not go through gcsfs's ``_cat_file``, which buffers whatever a server
    sends: the store sends the object download (``.../download/storage/v1/b/{bucket}/o/
    {object}?alt=media``) and the object/bucket resource GETs itself, on gcsfs's
    session with gcsfs's credentials, ``userProject`` and endpoint, and reads the
    body with azarr's bounded reader (``docs/security.md``): a body larger than the
    read's bound is `BodyTooLargeError`; a ``206`` whose ``Content-Range`` is not the
    range asked, or a ``416`` for bytes the object holds, is `ResponseIntegrityError`
    (retried); a range past the end reads as ``b""``. No redirect is followed.
    gcsfs keeps authentication, listings and uploads.

    Each event loop gets its own ``GCSFileSystem`` and aiohttp session, closed by
    `close` or when that loop shuts down (see `FsspecStore`). Pickling
    keeps only the configuration. ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT`` is set to
    ``false`` (unless already set) when this module is imported, and azarr always
    uses ``gcsfs.core.GCSFileSystem``, never the experimental zonal-bucket class.

    Errors name the store URL (and the endpoint, if not Google's) and the key:

    * HTTP 401/403 (bad or missing credentials, no IAM permission) ->
      `PermissionDeniedError`;
    * a missing bucket, or an endpoint that cannot be reached (after the retries
      above) -> `StoreUnavailableError`;
    * anything else -> `StoreError`.

    A missing key reads as ``None``. GCS answers a missing bucket with the same bare
    404 as a missing object, and gcsfs drops the body that tells them apart; so the
    first time a key reads as missing (or a listing comes back empty, or a write
    fails with 404), the store asks once for the bucket's metadata. A 404 there
    raises `StoreUnavailableError`; 401/403 (anonymous access
    to a public bucket often may read objects but not bucket metadata) counts as
    "the bucket exists". The answer is remembered for the store's lifetime.

    Examples
    --------
    >>> store = GCSStore("bucket/data.zarr", storage_options={"token": "anon"})
    >>> store.url
    'gs://bucket/data.zarr'
    """

    #: Generations are GCS object ``generation`` numbers; conditional writes are
    #: multipart uploads with ``ifGenerationMatch`` (0: only if absent), the upload
    #: path fake-gcs-server honours it on (see docs/consistency.md).
    supports_conditional_writes = True
    #: Ranged reads pinned with ``generation=`` (that exact object version; HTTP
    #: 404 once it was replaced in an unversioned bucket). fake-gcs-server honours
    #: it; it ignores ``ifGenerationMatch`` on reads.
    supports_conditional_reads = True

    def __init__(
        self,
        bucket_and_path: str,
        *,
        storage_options: GCSOptions | Mapping[str, Any] | None = None,
        read_only: bool = False,
    ) -> None:
        path = bucket_and_path
        for scheme in _SCHEMES:
            if path.startswith(scheme):
                path = path[len(scheme) :]
        path = path.strip("/")
        if not path or path.split("/", 1)[0] == "":
            raise ValueError(f"GCSStore needs 'bucket' or 'bucket/path', got {bucket_and_path!r}")
        options = dict(storage_options or {})
        retries = options.get("retries")
        if retries is not None and (not isinstance(retries, int) or isinstance(retries, bool) or retries < 1):
            raise ValueError(f"GCSStore storage option 'retries' must be an int >= 1, got {retries!r}")
        # azarr's scheduler retries transient errors (with counters and a deadline);
        # gcsfs's own 6 attempts would stack on top of it.
        options.setdefault("retries", 1)
        options.setdefault("use_listings_cache", False)
        super().__init__(None, path, protocol="gs", storage_options=options, read_only=read_only)
        # Whether the bucket is known to exist (see the class notes): runtime state,
        # so a pickled copy checks again.
        self._bucket_known = False

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create("gs", self.path, self.storage_options)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``gs://bucket/path`` (or ``gcs://``); the spec of ``GCSStore(url, storage_options=...)``."""
        return cls(url, storage_options=storage_options).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> GCSStore:
        """``GCSStore(spec.root, storage_options=...)``."""
        return cls(spec.root, storage_options=spec.storage_options())

    @property
    def bucket(self) -> str:
        """The bucket name."""
        return self.path.split("/", 1)[0]

    @property
    def endpoint_url(self) -> str | None:
        """The custom endpoint (an emulator), if any (``None`` means Google)."""
        endpoint = self.storage_options.get("endpoint_url")
        return str(endpoint) if endpoint is not None else None

    def _where(self) -> str:
        endpoint = self.endpoint_url
        return f"{self.url} (endpoint {redact_url(endpoint)})" if endpoint else self.url

    # ------------------------------------------------------------------ per-loop filesystems
    def _new_fs(self, loop: asyncio.AbstractEventLoop) -> Any:
        # Not self._fs_cls (fsspec's registry entry): if gcsfs was imported before azarr
        # with the experimental flag on, that is the zonal-bucket subclass.
        return _filesystem_class()(
            **self.storage_options, asynchronous=True, loop=loop, skip_instance_cache=True
        )

    async def _open_session(self, fs: Any) -> None:
        # gcsfs names it _set_session (s3fs and HTTPFileSystem: set_session).
        await fs._set_session()

    # ------------------------------------------------------------------ errors
    def _translate(self, exc: BaseException, op: str, key: str) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        what = f"{op} {key!r} in {self._where()}" if key else f"{op} {self._where()}"
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, FileNotFoundError):
            # Only reached where a missing key is not the answer (writes): the 404
            # is about the bucket.
            return StoreUnavailableError(
                f"{what} failed: the bucket {self.bucket!r} does not exist ({detail})"
            )
        if _forbidden(exc):
            return PermissionDeniedError(f"permission denied: {what}: {detail}")
        return super()._translate(exc, op, key)

    async def _check_bucket(self, op: str, key: str) -> None:
        """Raise StoreUnavailableError if the bucket does not exist (checked once per store)."""
        if self._bucket_known:
            return
        fs = await self.filesystem()
        try:
            what = f"{op} {key!r} in {self._where()}" if key else f"{op} {self._where()}"
            await resource_get(fs, "b/{}", self.bucket, what=what)
        except AzarrError:
            raise
        except FileNotFoundError as exc:
            raise self._translate(exc, op, key) from exc
        except Exception as exc:
            if not _forbidden(exc):
                raise self._translate(exc, op, key) from exc
            # May read objects but not bucket metadata: the bucket exists.
        self._bucket_known = True

    # ------------------------------------------------------------------ primitives
    async def _object_info(self, fs: Any, key: str) -> dict[str, Any]:
        """Object metadata by one GET of the object resource (404: FileNotFoundError).

        Not gcsfs's ``_info``: that races the object GET against a directory listing and
        drops whichever loses, so a throttled or failed listing would vanish unretried
        (and every existence check cost two requests). A key here is an object, never
        a "directory".
        """
        bucket, _, name = self._full(key).partition("/")
        what = f"stat {key!r} in {self._where()}"
        info = await resource_get(fs, "b/{}/o/{}", bucket, name, what=what)
        size = info.get("size", 0)
        if not (isinstance(size, int) or (isinstance(size, str) and size.isdigit())):
            raise StoreError(f"{what}: the object resource states no size ({str(size)[:64]!r})")
        info["size"] = int(size)
        return info

    # ------------------------------------------------------------------ reads
    async def _read(
        self,
        op: str,
        key: str,
        byte_range: ByteRange | None,
        *,
        generation: Generation | None = None,
        allocate: Allocator | None = None,
    ) -> tuple[bytes | memoryview | None, Generation | None]:
        """The value at ``key`` (or ``byte_range`` of it) and its generation; ``(None, None)``
        if missing. With ``generation``: only that object version (gone: `PreconditionFailedError`).

        One download through `media_get`: the body bounded by the read's bound, a ``206``
        checked against the range asked (`check_content_range`), a ``200`` to a ranged
        request cut while it is read (`read_body`), a ``416`` verified against the object's size.
        """
        start, end = (0, None) if byte_range is None else (byte_range.start, byte_range.end)
        ranged = start != 0 or end is not None
        what = f"{op} {key!r} in {self._where()}"
        fs = await self.filesystem()
        bucket, _, name = self._full(key).partition("/")
        try:
            reply = await media_get(
                fs,
                bucket,
                name,
                what=what,
                range_header=range_header(start, end) if ranged else None,
                generation=generation,
                allocate=None if ranged else allocate,
                partial_limit=range_limit(start, end, body_limit()) if ranged else None,
                window=(start, end) if ranged else None,
            )
        except AzarrError:
            raise
        except FileNotFoundError as exc:
            if generation is not None:  # that generation is gone: replaced or deleted
                raise self._precondition_failed(op, key) from exc
            err = self._missing(exc, op, key)
            if err is not None:
                raise err from exc
            await self._check_bucket(op, key)
            return None, None
        except Exception as exc:
            raise self._translate(exc, op, key) from exc
        stated = reply.headers.get("x-goog-generation", "")
        found: Generation | None = int(stated) if stated.isdigit() else None
        if reply.status == 206:
            if not ranged:
                raise ResponseIntegrityError(
                    f"{what}: the server answered 206 Partial Content to a GET without Range"
                )
            content_range = reply.headers.get("Content-Range")
            if not reply.body and _EMPTY_OBJECT.fullmatch((content_range or "").strip()):
                return b"", found  # fake-gcs-server's answer to a suffix of an empty object
            check_content_range(content_range, len(reply.body), start, end, what)
            return reply.body, found
        if reply.status == 200:  # ranged: the server ignored Range; read_body kept the range
            return (reply.body if ranged else reply.value), found
        # 416: b"" if the range starts past the end (or the object is empty), as slicing says.
        if not ranged:
            raise ResponseIntegrityError(
                f"{what}: the server answered 416 Range Not Satisfiable to a GET without Range"
            )
        size = unsatisfied_size(reply.headers.get("Content-Range"))
        if size is None:  # GCS and fake-gcs-server state none: ask for the object's size
            info = await self._stat_after_416(key)
            if info is None:
                return None, None
            size, found = info[0], found if found is not None else info[1]
        check_unsatisfiable(size, start, end, what)
        return b"", found

    async def _stat_after_416(self, key: str) -> tuple[int, Generation | None] | None:
        """`_stat`, sent again once if its connection turns out to be closed.

        fake-gcs-server closes the connection after a 416 without saying so (no
        ``Connection: close``). aiohttp has pooled it already (a 416's empty body ends
        with its headers, and aiohttp releases the connection then), so the next
        request on it, this one, fails: with a disconnect if the server's close came
        first, with a reset if the request did. azarr does not let aiohttp re-send
        silently (`no_silent_resend`), so this one idempotent request is sent again here.
        """
        import aiohttp

        try:
            return await self._stat(key)
        except StoreError as exc:
            # ClientOSError: ECONNRESET (ServerDisconnectedError is not one of its kind).
            if not isinstance(exc.__cause__, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)):
                raise
        return await self._stat(key)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if byte_range is not None and byte_range.is_empty:
            return b"" if await self._exists(key) else None
        value, _ = await self._read("get", key, byte_range)
        return None if value is None else bytes(value)

    async def _get_into(self, key: str, allocate: Allocator) -> bytes | memoryview | None:
        value, _ = await self._read("get", key, None, allocate=allocate)
        return value

    # ------------------------------------------------------------------ conditional primitives
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        value, generation = await self._read("get", key, None)
        return (None if value is None else bytes(value)), generation

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        if byte_range.is_empty:  # the generation alone
            info = await self._stat(key)
            return (None, None) if info is None else (b"", info[1])
        value, generation = await self._read("get", key, byte_range)
        return (None if value is None else bytes(value)), generation

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        # A multipart upload, as gcsfs's simple_upload sends: fake-gcs-server enforces
        # ifGenerationMatch there and ignores it on media and resumable uploads.
        fs = await self.filesystem()
        bucket, _, name = self._full(key).partition("/")
        boundary = "==azarr=="
        head = (
            f"--{boundary}\nContent-Type: application/json; charset=UTF-8\n\n"
            f"{json.dumps({'name': name})}\n--{boundary}\nContent-Type: application/octet-stream\n\n"
        )
        body = head.encode() + value + f"\n--{boundary}--".encode()
        try:
            await fs._call(
                "POST",
                f"{fs._location}/upload/storage/v1/b/{quote(bucket)}/o",
                uploadType="multipart",
                ifGenerationMatch=str(0 if generation is None else generation),
                headers={"Content-Type": f'multipart/related; boundary="{boundary}"'},
                data=body,
                json_out=True,
            )
        except AzarrError:
            raise
        except FileExistsError as exc:  # gcsfs's reading of HTTP 412
            raise self._precondition_failed("set", key) from exc
        except Exception as exc:
            raise self._translate(exc, "set", key) from exc

    async def _delete_if(self, key: str, generation: Generation) -> None:
        fs = await self.filesystem()
        bucket, _, name = self._full(key).partition("/")
        try:
            await fs._call("DELETE", "b/{}/o/{}", bucket, name, ifGenerationMatch=str(generation))
        except AzarrError:
            raise
        except FileExistsError as exc:
            raise self._precondition_failed("delete", key) from exc
        except Exception as exc:
            err = self._missing(exc, "delete", key)
            if err is not None:
                raise err from exc

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        if byte_range is not None and byte_range.is_empty:
            return b""
        value, _ = await self._read("get", key, byte_range, generation=generation)
        return None if value is None else bytes(value)

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        info = await self._info(key, "getsize")
        if info is None:
            await self._check_bucket("getsize", key)
            return None
        generation = info.get("generation")
        return int(info["size"]), (int(generation) if generation else None)

    def _precondition_failed(self, op: str, key: str) -> PreconditionFailedError:
        return PreconditionFailedError(
            f"{op} {key!r} in {self._where()}: precondition failed (HTTP 412), another writer changed it"
        )

    async def _exists(self, key: str) -> bool:
        found = await super()._exists(key)
        if not found:
            await self._check_bucket("exists", key)
        return found

    async def _getsize(self, key: str) -> int:
        try:
            return await super()._getsize(key)
        except FileNotFoundError:
            await self._check_bucket("getsize", key)
            raise

    async def _delete(self, key: str) -> None:
        await super()._delete(key)  # a missing key is fine, a missing bucket is not
        await self._check_bucket("delete", key)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        empty = True
        async for key in super()._list_prefix(prefix):
            empty = False
            yield key
        if empty:
            await self._check_bucket("list", prefix)

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        empty = True
        async for name in super()._list_dir(prefix):
            empty = False
            yield name
        if empty:
            await self._check_bucket("list_dir", prefix)


#: fake-gcs-server's ``Content-Range`` for a suffix of an empty object (``bytes 0--1/0``).
_EMPTY_OBJECT = re.compile(r"bytes\s+\S*/0")


def _forbidden(exc: BaseException) -> bool:
    """gcsfs raises a plain ``OSError("Forbidden: ...")`` for 403 and ``HttpError`` (code 401) for 401."""
    if isinstance(exc, PermissionError) or backend_codes(exc) & {"401", "403"}:
        return True
    return type(exc) is OSError and str(exc).startswith("Forbidden")


@functools.cache
def _filesystem_class() -> type[Any]:
    """``gcsfs.core.GCSFileSystem`` with a per-instance ``retries`` option (built on first use).

    gcsfs applies ``retries`` when the class is defined (``@retry_request(retries=6)``
    on ``_request``), so it cannot be changed per instance. This subclass re-applies
    gcsfs's own ``retry_request`` to the undecorated method with the instance's count:
    the retry rules (which errors, the backoff) stay gcsfs's.
    """
    from gcsfs.core import GCSFileSystem
    from gcsfs.retry import retry_request

    undecorated = getattr(GCSFileSystem._request, "__wrapped__", None)

    class AzarrGCSFileSystem(GCSFileSystem):  # type: ignore[misc]
        def __init__(self, *args: Any, retries: int | None = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._azarr_request: Any = None
            if retries is not None and undecorated is not None:
                self._azarr_request = retry_request(retries=retries)(undecorated)
            # GCSStore's own GETs (downloads, resources), under the same retry rules and count.
            self.azarr_get: Any = (
                retry_request(retries=retries)(gcs_get) if retries is not None and retries > 1 else gcs_get
            )

        async def _request(self, *args: Any, **kwargs: Any) -> Any:
            if self._azarr_request is None:  # gcsfs's default, or a gcsfs without __wrapped__
                return await super()._request(*args, **kwargs)
            return await self._azarr_request(self, *args, **kwargs)

    AzarrGCSFileSystem.__module__ = __name__
    return AzarrGCSFileSystem
