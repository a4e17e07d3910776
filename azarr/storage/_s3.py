"""A store on Amazon S3 and S3-compatible servers (MinIO, SeaweedFS, Ceph, R2).

Per-key requests go through the lean aiohttp transport (``_s3_transport``) by
default; listing, bulk deletes and configurations it does not cover use s3fs.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, ClassVar, Literal

from azarr.errors import AzarrError
from azarr.storage._base import ByteRange, Generation
from azarr.storage._fsspec import FsspecStore
from azarr.storage._options import S3Options
from azarr.storage._redact import redact_url
from azarr.storage._s3_transport import S3Transport
from azarr.storage._spec import StoreSpec

# One DeleteObjects request removes at most 1000 keys (S3 API limit).
_BULK_DELETE = 1000
_BULK_DELETE_CONCURRENCY = 4
# botocore's pool defaults to 10 connections, far below the chunk requests azarr keeps
# in flight (azarr.config max_concurrency, 64).
_DEFAULT_POOL = 64


class S3Store(FsspecStore):
    """A Zarr hierarchy under ``s3://bucket/path`` (zarr-python 2 ``FSStore("s3://...")``).

    Parameters
    ----------
    bucket_and_path : str
        ``"bucket/path/to/data.zarr"`` (an ``s3://`` prefix is accepted). The bucket
        must exist; the path need not.
    storage_options : dict, optional
        `s3fs.S3FileSystem` options exactly as s3fs users pass them, e.g.
        ``{"endpoint_url": "http://127.0.0.1:8333", "key": ..., "secret": ...,
        "anon": False, "client_kwargs": {"region_name": "eu-west-1"},
        "config_kwargs": {"connect_timeout": 2, "retries": {"max_attempts": 3}}}``.
    read_only : bool
        Refuse writes with `ReadOnlyError`.
    transport : {"aiohttp", "s3fs"}
        What carries the per-key requests (``get``, ``set``, ``delete``, ``exists``,
        ``getsize``). ``"aiohttp"`` (default):
        `S3Transport`, aiohttp requests with SigV4
        signatures and botocore's credential chain: far less CPU per request than
        s3fs/aiobotocore, which is the bottleneck on fast networks.
        ``"s3fs"``: everything through s3fs/aiobotocore. Listing and
        ``delete_prefix`` always use s3fs. The store falls back to ``"s3fs"`` by
        itself when ``storage_options`` hold something the lean transport does not
        implement (listed in `transport_fallback`): a ``session``,
        ``s3_additional_kwargs`` (server-side encryption, ACLs, ...),
        ``version_aware=True``, ``client_kwargs`` other than ``region_name``,
        ``endpoint_url``, ``aws_access_key_id``/``aws_secret_access_key``/
        ``aws_session_token``, ``verify``, ``use_ssl``, or ``config_kwargs`` other than
        ``region_name``, ``signature_version`` (``"s3v4"`` or ``UNSIGNED``),
        ``max_pool_connections``, ``connect_timeout``, ``read_timeout``, ``proxies``,
        ``retries``, the checksum options, user-agent options and ``s3``
        ``addressing_style``/``payload_signing_enabled``; any option s3fs hands to
        the botocore session other than ``profile``; access-point ARNs and S3
        Express (``--x-s3``) buckets; ``AWS_USE_FIPS_ENDPOINT`` or
        ``AWS_USE_DUALSTACK_ENDPOINT`` set without an ``endpoint_url``.
        Its speed against s3fs is in ``benchmarks/README.md`` (the cloud benchmark's
        "s3fs transport" row).

    Attributes
    ----------
    transport : str
        The transport in use (``"s3fs"`` after a fallback).
    transport_fallback : tuple of str
        Why ``transport="aiohttp"`` fell back to s3fs (empty otherwise).

    Raises
    ------
    ValueError
        No bucket name, or an unknown ``transport``.

    Notes
    -----
    Defaults azarr adds unless given in ``storage_options``:

    * ``config_kwargs["max_pool_connections"] = 64`` (botocore's default is 10).
    * ``config_kwargs["response_checksum_validation"] = "when_required"``: skip
      botocore's per-response CRC work (20-35 % faster reads with s3fs).
    * ``request_checksum_calculation = "when_required"`` (botocore's option and
      values; its default is ``"when_supported"``): PUT bodies go without a checksum.
      ``config_kwargs={"request_checksum_calculation": "when_supported"}`` (or
      ``AWS_REQUEST_CHECKSUM_CALCULATION=when_supported``) makes every ``PUT`` of
      ``transport="aiohttp"`` carry ``x-amz-checksum-crc32c``, so S3 and SeaweedFS
      refuse a body changed in flight (`StoreError`, ``BadDigest``) instead of storing
      it: 40-100 us of client CPU per MiB, computed for chunks and shards in the codec
      thread that encoded them, and 2-7 % more CPU for SeaweedFS (measured). On s3fs
      (``transport="s3fs"`` or a fallback) the option means what it means to botocore
      (``"when_supported"``: ``aws-chunked`` bodies with a trailing checksum, which
      some S3-compatible servers reject).
    * ``config_kwargs["retries"] = {"mode": "standard", "total_max_attempts": 1}``
      and s3fs's own retries off: azarr's scheduler retries transient errors
      (throttling, 5xx, resets, timeouts) with backoff and counts them; stacked
      retry layers would multiply the attempts. Direct ``store.get`` calls are
      therefore not retried; array I/O is.
    * ``use_listings_cache=False``: s3fs would otherwise cache listings, and list
      results would miss keys written after the first listing.

    Each event loop gets its own ``S3FileSystem`` (see `FsspecStore`); they
    share one botocore model loader, so only the first parses the S3 service model.

    ``list_dir`` checks that each sub-prefix it reports still holds a key (one flat
    listing page, plus a one-key listing per child that page did not reach):
    SeaweedFS keeps reporting "folders" whose objects were all deleted.

    With ``transport="aiohttp"`` the connection pool holds ``max_pool_connections``
    connections per event loop, shared by every ``S3Store`` with the same endpoint
    settings and kept ``connection_linger`` seconds after the last of them closed
    (see `S3Transport`; s3fs's pool for listings is separate), ``PUT``
    bodies are sent as ``UNSIGNED-PAYLOAD`` (see `S3Transport` for signing
    them), and aiohttp's silent re-send after a dropped connection is off, so every
    attempt the scheduler counts is exactly one request.

    Errors: a wrong key/secret or a denied policy raises
    `PermissionDeniedError`; a missing bucket or an endpoint
    that refuses connections raises `StoreUnavailableError`
    (lower the wait through ``config_kwargs={"connect_timeout": ...}``).

    Examples
    --------
    >>> store = S3Store("bucket/data.zarr", storage_options={"anon": True})
    >>> store.url
    's3://bucket/data.zarr'
    """

    # Whole-value reads: without this s3fs sends a HEAD before every GET to decide
    # whether to split large objects into parallel range requests.
    _cat_kwargs: ClassVar[dict[str, Any]] = {"max_concurrency": 1}

    def __init__(
        self,
        bucket_and_path: str,
        *,
        storage_options: S3Options | Mapping[str, Any] | None = None,
        read_only: bool = False,
        transport: Literal["aiohttp", "s3fs"] = "aiohttp",
    ) -> None:
        if transport not in ("aiohttp", "s3fs"):
            raise ValueError(f"S3Store transport must be 'aiohttp' or 's3fs', got {transport!r}")
        self._requested_transport: Literal["aiohttp", "s3fs"] = transport
        path = bucket_and_path
        for scheme in ("s3://", "s3a://"):
            if path.startswith(scheme):
                path = path[len(scheme) :]
        path = path.strip("/")
        if not path or path.split("/", 1)[0] == "":
            raise ValueError(f"S3Store needs 'bucket' or 'bucket/path', got {bucket_and_path!r}")
        options = dict(storage_options or {})
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", _DEFAULT_POOL)
        # azarr's scheduler retries transient errors itself, with backoff, jitter,
        # a deadline and counters (azarr.scheduler.StoreIO). botocore's own retries
        # would multiply with it (measured: 25 requests per GET under 503 SlowDown).
        config.setdefault("retries", {"mode": "standard", "total_max_attempts": 1})
        # Only botocore >= 1.36 has (and needs) it; older ones reject unknown options.
        if "response_checksum_validation" in _botocore_options():
            config.setdefault("response_checksum_validation", "when_required")
        # request_checksum_calculation keeps the caller's value (or none): both transports
        # default to "when_required" (S3Transport's checksum_calculation, `_fs_options`),
        # and the spec keeps saying what the caller said.
        options["config_kwargs"] = config
        options.setdefault("use_listings_cache", False)
        super().__init__(None, path, protocol="s3", storage_options=options, read_only=read_only)
        problems: list[str] = []
        if self._requested_transport == "aiohttp":
            problems = S3Transport.unsupported_options(self.storage_options, self.bucket)
        self.transport: Literal["aiohttp", "s3fs"] = "s3fs" if problems else self._requested_transport
        self.transport_fallback: tuple[str, ...] = tuple(problems)
        self._transport: S3Transport | None = None
        if self.transport == "aiohttp":
            bucket, _, inside = self.path.partition("/")
            self._transport = S3Transport(
                bucket, inside, storage_options=self.storage_options, location=self._where()
            )
            # ETags with If-Match / If-None-Match (s3fs has no conditional PutObject).
            self.supports_conditional_writes = True
            self.wants_body_crc32c = self._transport.request_checksum_calculation == "when_supported"
            self.supports_conditional_reads = True

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create(
            "s3", self.path, self.storage_options, {"transport": self._requested_transport}
        )

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``s3://bucket/path`` (or ``s3a://``); the spec of ``S3Store(url, storage_options=...)``."""
        # Building the store is cheap and I/O-free, and normalizes options exactly as the
        # constructor does, so a URL and a direct construction give equal specs.
        return cls(url, storage_options=storage_options).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> S3Store:
        """``S3Store(spec.root, storage_options=..., transport=...)``."""
        return cls(spec.root, storage_options=spec.storage_options(), **spec.constructor_params())

    def __repr__(self) -> str:
        extra = ", transport='s3fs'" if self._requested_transport == "s3fs" else ""
        return f"{super().__repr__()[:-1]}{extra})"

    @property
    def bucket(self) -> str:
        """The bucket name."""
        return self.path.split("/", 1)[0]

    @property
    def endpoint_url(self) -> str | None:
        """The custom S3 endpoint, if any (``None`` means AWS)."""
        endpoint = self.storage_options.get("endpoint_url")
        if endpoint is None:
            endpoint = (self.storage_options.get("client_kwargs") or {}).get("endpoint_url")
        return str(endpoint) if endpoint is not None else None

    def _where(self) -> str:
        endpoint = self.endpoint_url
        return f"{self.url} (endpoint {redact_url(endpoint)})" if endpoint else self.url

    def _fs_options(self) -> dict[str, Any]:
        """``storage_options`` for s3fs: with ``request_checksum_calculation="when_required"``
        unless the caller chose (in the options or ``AWS_REQUEST_CHECKSUM_CALCULATION``):
        botocore's default sends ``aws-chunked`` bodies with a trailing checksum, which some
        S3-compatible servers reject."""
        options = dict(self.storage_options)
        config = dict(options.get("config_kwargs") or {})
        if (
            "request_checksum_calculation" not in config
            and not os.environ.get("AWS_REQUEST_CHECKSUM_CALCULATION")
            and "request_checksum_calculation" in _botocore_options()
        ):
            config["request_checksum_calculation"] = "when_required"
        options["config_kwargs"] = config
        return options

    def _new_fs(self, loop: asyncio.AbstractEventLoop) -> Any:
        if "session" in self.storage_options:
            return super()._new_fs(loop)
        options = self._fs_options()
        # Each s3fs instance would build its own botocore session and parse the S3
        # service model again (0.1-0.2 s, measured) -- on every new event loop. Give it
        # a fresh session (built from the same extra options s3fs would use) that
        # shares one model loader, so only the first instance pays.
        import botocore.handlers
        from aiobotocore.session import AioSession

        extra = {k: v for k, v in options.items() if k not in _s3fs_parameters()}
        session = AioSession(**extra)
        session.register_component("data_loader", _shared_loader())
        # botocore sends PUT bodies with "Expect: 100-continue", and aiohttp waits for
        # the 100 with no timeout: a stalled server would hang the PUT indefinitely.
        session.unregister("before-call.s3", botocore.handlers.add_expect_header)
        fs = self._fs_cls(
            **options,
            session=session,
            asynchronous=True,
            loop=loop,
            skip_instance_cache=True,
        )
        # s3fs retries SlowDown and broken reads on top of botocore (a class
        # attribute, not a constructor option); the scheduler owns retrying.
        fs.retries = 1
        return fs

    async def close(self) -> None:
        """Close the running loop's s3fs session and release the aiohttp transport's pooled
        connections (closed ``connection_linger`` seconds later unless another store with the
        same settings uses them); the store stays usable."""
        await super().close()
        if self._transport is not None:
            await self._transport.close()

    # ------------------------------------------------------------------ per-key hot path
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if self._transport is None:
            return await super()._get(key, byte_range)
        if byte_range is None:
            return await self._transport.get(key)
        return await self._transport.get(key, byte_range.start, byte_range.end)

    async def _get_into(self, key: str, allocate: Callable[[int], memoryview]) -> bytes | memoryview | None:
        if self._transport is None:
            return await super()._get_into(key, allocate)
        return await self._transport.get_into(key, allocate)

    async def _set(self, key: str, value: bytes) -> None:
        if self._transport is None:
            return await super()._set(key, value)
        await self._transport.put(key, value)

    async def _delete(self, key: str) -> None:
        if self._transport is None:
            return await super()._delete(key)
        await self._transport.delete(key)

    # Conditional primitives: only with the aiohttp transport (see supports_conditional_writes).
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        assert self._transport is not None
        return await self._transport.get_with_etag(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        assert self._transport is not None
        return await self._transport.get_with_etag(key, byte_range.start, byte_range.end)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        assert self._transport is not None
        await self._transport.put_if(key, value, if_match=None if generation is None else str(generation))

    async def _delete_if(self, key: str, generation: Generation) -> None:
        assert self._transport is not None
        await self._transport.delete_if(key, if_match=str(generation))

    def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> Coroutine[Any, Any, bytes | None]:
        # The transport's coroutine itself, not one awaiting it: every inner chunk read of a
        # sharded array whose index is cached comes this way (one coroutine fewer per read).
        assert self._transport is not None
        start, end = (None, None) if byte_range is None else (byte_range.start, byte_range.end)
        return self._transport.get(key, start, end, if_match=str(generation))

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        if self._transport is None:
            return await super()._stat(key)
        return await self._transport.stat(key)

    async def _exists(self, key: str) -> bool:
        if self._transport is None:
            return await super()._exists(key)
        return await self._transport.head(key, op="exists") is not None

    async def _getsize(self, key: str) -> int:
        if self._transport is None:
            return await super()._getsize(key)
        size = await self._transport.head(key, op="getsize")
        if size is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return size

    def _key_prefix(self, prefix: str) -> str:
        """The S3 object-key prefix (inside the bucket) of a normalized store prefix."""
        inside = self.path.partition("/")[2]
        return f"{inside}/{prefix}" if inside else prefix

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        values, dirs = await self._ls_children(prefix)
        if dirs:
            dirs = await self._nonempty(prefix, dirs)
        for child in sorted(values | dirs):
            yield child

    async def _nonempty(self, prefix: str, dirs: set[str]) -> set[str]:
        """The ``dirs`` (children of ``prefix``) that still hold at least one key.

        A delimiter listing should only report prefixes with keys below them, but
        SeaweedFS (a filer-backed server) keeps reporting emptied "folders" forever.
        One flat listing page usually settles every child; only children it did
        not reach cost one small request each. On AWS every child passes.
        """
        fs = await self.filesystem()
        bucket = self.bucket
        key_prefix = self._key_prefix(prefix)
        try:
            page = await fs._call_s3("list_objects_v2", Bucket=bucket, Prefix=key_prefix, MaxKeys=1000)
        except AzarrError:
            raise
        except Exception as exc:
            raise self._translate(exc, "list_dir", prefix) from exc
        seen = {obj["Key"][len(key_prefix) :].split("/", 1)[0] for obj in page.get("Contents", [])}
        found = dirs & seen
        unsure = dirs - seen
        if not unsure or not page.get("IsTruncated"):
            return found
        sem = asyncio.Semaphore(16)

        async def has_keys(child: str) -> bool:
            async with sem:
                try:
                    out = await fs._call_s3(
                        "list_objects_v2", Bucket=bucket, Prefix=f"{key_prefix}{child}/", MaxKeys=1
                    )
                except AzarrError:
                    raise
                except Exception as exc:
                    raise self._translate(exc, "list_dir", prefix) from exc
                return bool(out.get("KeyCount") or out.get("Contents"))

        checks = sorted(unsure)
        results = await asyncio.gather(*(has_keys(c) for c in checks))
        return found | {c for c, ok in zip(checks, results, strict=True) if ok}

    async def _delete_prefix(self, prefix: str) -> None:
        # DeleteObjects: one request per 1000 keys instead of one per key. Not s3fs's
        # _rm(), which would glob-expand keys containing '*?[' and drops per-key errors.
        keys = [self._full(k) async for k in self._list_prefix(prefix)]
        if not keys:
            return
        fs = await self.filesystem()
        bucket = self.bucket
        sem = asyncio.Semaphore(_BULK_DELETE_CONCURRENCY)

        async def batch(paths: list[str]) -> None:
            objects = [{"Key": p[len(bucket) + 1 :]} for p in paths]
            async with sem:
                try:
                    out = await fs._call_s3(
                        "delete_objects", Bucket=bucket, Delete={"Objects": objects, "Quiet": True}
                    )
                except AzarrError:
                    raise
                except Exception as exc:
                    raise self._translate(exc, "delete_prefix", prefix) from exc
                finally:
                    for p in paths:
                        fs.invalidate_cache(p)
            errors = out.get("Errors") or []
            if errors:
                first = errors[0]
                failure = _DeleteObjectsError(
                    first.get("Code", "?"), first.get("Key", "?"), first.get("Message", "")
                )
                raise self._translate(failure, "delete_prefix", prefix) from failure

        await asyncio.gather(*(batch(keys[i : i + _BULK_DELETE]) for i in range(0, len(keys), _BULK_DELETE)))


class _DeleteObjectsError(OSError):
    """A per-key failure inside a DeleteObjects response (shaped like a botocore error)."""

    def __init__(self, code: str, key: str, message: str) -> None:
        super().__init__(f"DeleteObjects could not delete {key!r}: {code}: {message}")
        self.response = {"Error": {"Code": code, "Message": message}}


@functools.cache
def _shared_loader() -> Any:
    """One botocore data loader (it caches parsed service models) for all S3 stores."""
    import botocore.loaders

    return botocore.loaders.create_loader()


@functools.cache
def _s3fs_parameters() -> frozenset[str]:
    """Option names S3FileSystem itself consumes; s3fs hands the rest to AioSession."""
    import s3fs

    names = set(inspect.signature(s3fs.S3FileSystem.__init__).parameters)
    # Taken by fsspec's base class (listing cache), not by the botocore session.
    names |= {"use_listings_cache", "listings_expiry_time", "max_paths"}
    return frozenset(names - {"self", "kwargs"})


@functools.cache
def _botocore_options() -> frozenset[str]:
    """Option names the installed botocore's ``Config`` accepts."""
    import botocore.config

    return frozenset(botocore.config.Config.OPTION_DEFAULTS)
