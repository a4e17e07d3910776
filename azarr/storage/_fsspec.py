"""A store over any fsspec ``AsyncFileSystem`` (S3, GCS, Azure, HTTP, ...)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from azarr.errors import AzarrError, StoreError
from azarr.storage._base import ByteRange, Store
from azarr.storage._errors import is_invalid_range, is_no_such_bucket, translate_error
from azarr.storage._loops import PerLoop
from azarr.storage._redact import redact_url, remember_options
from azarr.storage._spec import StoreSpec

# Concurrent single-key deletes for backends without a bulk delete.
_DELETE_CONCURRENCY = 32
_HTTP_PROTOCOLS = frozenset({"http", "https"})


class FsspecStore(Store):
    """A store over an fsspec asynchronous filesystem (zarr-python 2 ``FSStore``, zarr 3 ``FsspecStore``).

    Parameters
    ----------
    fs : fsspec.asyn.AsyncFileSystem, optional
        A filesystem to copy the class and options from. The store makes its own
        instances from them -- one per running event loop, so it works from any
        number of ``asyncio.run`` calls and threads -- and never uses or closes
        ``fs`` itself. Omit it to build from ``protocol`` and ``storage_options``.
    path : str
        Root of the hierarchy inside the filesystem (``"bucket/data.zarr"``); a
        protocol prefix (``"s3://"``) is stripped.
    read_only : bool
        Refuse writes with `ReadOnlyError`.
    storage_options : dict, optional
        Filesystem constructor options (override those taken from ``fs``).
    protocol : str, optional
        fsspec protocol when ``fs`` is omitted; defaults to the one in ``path``.

    Raises
    ------
    TypeError
        The filesystem is synchronous-only (not an ``AsyncFileSystem``).
    ValueError
        Neither ``fs`` nor a protocol was given.

    Notes
    -----
    Backend errors become azarr errors naming the store URL and key, chained to
    the original (``raise ... from``): ``PermissionError``/HTTP 403/``AccessDenied`` ->
    `PermissionDeniedError`; connection refused, unreachable
    host, missing bucket -> `StoreUnavailableError`; anything
    else -> `StoreError`. A missing key reads as ``None``.

    Call ``await store.close()`` (or use ``async with store``) to release the
    connections of the running loop; sessions left open are closed when their
    loop is shut down by ``asyncio.run``. Pickling keeps only the configuration.
    """

    # Extra keyword arguments for ``fs._cat_file`` (S3Store skips s3fs's size probe).
    _cat_kwargs: ClassVar[dict[str, Any]] = {}

    #: The fsspec mapper this store was made from (`azarr.storage.make_store` of an
    #: ``FSMap``), kept as zarr-python 2's ``FSStore.map``; None otherwise.
    map: Any = None

    def __init__(
        self,
        fs: Any = None,
        path: str = "",
        *,
        read_only: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        protocol: str | None = None,
        fs_class: type[Any] | None = None,
        fs_args: tuple[Any, ...] = (),
    ) -> None:
        import fsspec
        from fsspec.asyn import AsyncFileSystem

        super().__init__(read_only=read_only)
        options: dict[str, Any] = {}
        args: tuple[Any, ...] = tuple(fs_args)
        if fs is None and fs_class is not None:
            # Reopened from a spec: the filesystem class and arguments it recorded.
            if protocol is None:
                raise ValueError("FsspecStore(fs_class=...) needs the protocol too")
            cls: type[Any] = fs_class
        elif fs is not None:
            if not isinstance(fs, AsyncFileSystem):
                raise TypeError(
                    f"FsspecStore needs an fsspec AsyncFileSystem, got {type(fs).__module__}."
                    f"{type(fs).__qualname__}, which is synchronous-only"
                )
            cls = type(fs)
            options.update(getattr(fs, "storage_options", {}) or {})
            args = tuple(getattr(fs, "storage_args", ()) or ())
            if protocol is None:
                protocol = cls.protocol if isinstance(cls.protocol, str) else cls.protocol[0]
        else:
            if protocol is None:
                protocol, _ = fsspec.core.split_protocol(path)
            if protocol is None:
                raise ValueError(
                    f"FsspecStore({path!r}): give a filesystem, a protocol, or a path with one ('s3://...')"
                )
            cls = fsspec.get_filesystem_class(protocol)
            if not issubclass(cls, AsyncFileSystem):
                raise TypeError(
                    f"fsspec filesystem {protocol!r} ({cls.__module__}.{cls.__qualname__}) is "
                    "synchronous-only; azarr needs an fsspec AsyncFileSystem"
                )
            if path:
                # Options some filesystems read from the URL itself (as fsspec.url_to_fs does).
                options.update(cls._get_kwargs_from_urls(path))
        options.update(storage_options or {})
        for managed in ("asynchronous", "loop", "skip_instance_cache"):
            options.pop(managed, None)
        self.protocol: str = protocol
        self._fs_cls = cls
        self._fs_args = args
        self.storage_options: dict[str, Any] = options
        remember_options(options, path)
        stripped = cls._strip_protocol(path) if path else ""
        self.path: str = stripped.rstrip("/") if isinstance(stripped, str) else ""
        if protocol in _HTTP_PROTOCOLS:
            # fsspec's HTTP filesystem cannot write or delete.
            self.supports_writes = False
            self.supports_deletes = False
        self._loops: PerLoop[Any] = PerLoop(self._new_fs, type(self)._close_fs)

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        if "://" in self.path:  # HTTP paths keep their scheme
            return self.path
        return f"{self.protocol}://{self.path}"

    def _where(self) -> str:
        """Store location for error messages (subclasses add e.g. the endpoint)."""
        return redact_url(self.url)

    def _full(self, key: str) -> str:
        return f"{self.path}/{key}" if self.path else key

    # ------------------------------------------------------------------ spec
    def _make_spec(self) -> StoreSpec:
        import fsspec

        params: dict[str, Any] = {"protocol": self.protocol}
        if self._fs_cls is not fsspec.get_filesystem_class(self.protocol) or self._fs_args:
            params["fs_class"] = self._fs_cls
            params["fs_args"] = self._fs_args
        return StoreSpec.create("fsspec", self.path, self.storage_options, params)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """Any protocol fsspec implements asynchronously (``az://``, ``abfs://``, ...).

        Raises
        ------
        ValueError
            fsspec does not know the protocol.
        TypeError
            Its filesystem is synchronous-only.
        """
        import fsspec
        from fsspec.asyn import AsyncFileSystem

        protocol, _ = fsspec.core.split_protocol(url)
        if protocol is None:
            raise ValueError(f"cannot open {url!r}: no protocol")
        try:
            fs_cls = fsspec.get_filesystem_class(protocol)
        except (ValueError, ImportError) as exc:
            raise ValueError(f"cannot open {url!r}: {exc}") from exc
        if not issubclass(fs_cls, AsyncFileSystem):
            raise TypeError(
                f"fsspec filesystem {protocol!r} ({fs_cls.__module__}.{fs_cls.__qualname__}) is "
                "synchronous-only; azarr needs an fsspec AsyncFileSystem"
            )
        options = dict(fs_cls._get_kwargs_from_urls(url))
        options.update(storage_options or {})
        stripped = fs_cls._strip_protocol(url)
        root = stripped.rstrip("/") if isinstance(stripped, str) else ""
        return StoreSpec.create("fsspec", root, options, {"protocol": protocol})

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> FsspecStore:
        """``FsspecStore(None, spec.root, protocol=..., storage_options=...)``."""
        return cls(None, spec.root, storage_options=spec.storage_options(), **spec.constructor_params())

    # ------------------------------------------------------------------ per-loop filesystems
    def _fs_options(self) -> dict[str, Any]:
        """The keyword options the filesystem is made with: `storage_options`, plus any
        default a subclass adds for the backend alone (kept out of the store's spec)."""
        return self.storage_options

    def _new_fs(self, loop: asyncio.AbstractEventLoop) -> Any:
        return self._fs_cls(
            *self._fs_args,
            **self._fs_options(),
            asynchronous=True,
            loop=loop,
            skip_instance_cache=True,
        )

    async def _open_session(self, fs: Any) -> None:
        """Create the connection pool now rather than on the first request."""
        set_session = getattr(fs, "set_session", None)
        if set_session is not None:
            await set_session()

    @classmethod
    async def _close_fs(cls, fs: Any) -> None:
        """Close the connections of ``fs``; idempotent, duck-typed over backends."""
        # s3fs keeps the aiobotocore client context in _s3creator (a ClientCreatorContext,
        # or an S3BucketRegionCache with cache_regions=True); exiting it closes the
        # aiohttp session, and both exits are idempotent.
        creator = getattr(fs, "_s3creator", None)
        if creator is not None:
            await creator.__aexit__(None, None, None)
        elif getattr(fs, "_s3", None) is not None:
            await fs._s3.close()
        # aiohttp-based filesystems (HTTP, gcsfs, adlfs, ...) hold a ClientSession.
        session = getattr(fs, "_session", None)
        if session is not None and hasattr(session, "close") and not getattr(session, "closed", True):
            result = session.close()
            if asyncio.iscoroutine(result):
                await result

    async def filesystem(self) -> Any:
        """The filesystem instance serving the running event loop (created on first use).

        For advanced use (e.g. backend features azarr does not wrap); the store owns it.
        """
        fs, created = await self._loops.get()
        if created:
            try:
                await self._open_session(fs)
            except Exception as exc:
                raise self._translate(exc, "connect to", "") from exc
        return fs

    async def close(self) -> None:
        """Close the connections of the running loop; the store stays usable.

        Sessions of other loops are closed by those loops (or when they shut down).
        """
        await self._loops.close()

    # ------------------------------------------------------------------ errors
    def _translate(self, exc: BaseException, op: str, key: str) -> StoreError:
        """Map a backend exception to the azarr error tree, naming URL and key."""
        return translate_error(exc, op, key, self._where())

    def _missing(self, exc: BaseException, op: str, key: str) -> StoreError | None:
        """``None`` if ``exc`` means "no such key"; else the error to raise."""
        if isinstance(exc, FileNotFoundError) and not is_no_such_bucket(exc):
            return None
        return self._translate(exc, op, key)

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if byte_range is not None and byte_range.is_empty:
            return b"" if await self._exists(key) else None
        start: int | None = None
        end: int | None = None
        if byte_range is not None:
            start = byte_range.start or None
            end = byte_range.end
        fs = await self.filesystem()
        try:
            data = await fs._cat_file(self._full(key), start=start, end=end, **self._cat_kwargs)
        except AzarrError:
            raise
        except Exception as exc:
            if is_invalid_range(exc):
                # HTTP 416: the value exists but the range starts at/after its end
                # (or the value is empty). Python slicing gives b"", and so do we.
                return b""
            err = self._missing(exc, "get", key)
            if err is None:
                return None
            raise err from exc
        return bytes(data)

    async def _set(self, key: str, value: bytes) -> None:
        fs = await self.filesystem()
        path = self._full(key)
        try:
            await fs._pipe_file(path, value)
        except AzarrError:
            raise
        except Exception as exc:
            raise self._translate(exc, "set", key) from exc
        finally:
            fs.invalidate_cache(path)

    async def _delete(self, key: str) -> None:
        fs = await self.filesystem()
        path = self._full(key)
        try:
            await fs._rm_file(path)
        except AzarrError:
            raise
        except Exception as exc:
            err = self._missing(exc, "delete", key)
            if err is not None:
                raise err from exc
        finally:
            fs.invalidate_cache(path)

    async def _info(self, key: str, op: str) -> dict[str, Any] | None:
        """Metadata of the value at ``key``; ``None`` if there is none (or it is a "directory")."""
        fs = await self.filesystem()
        try:
            info: dict[str, Any] = await self._object_info(fs, key)
        except AzarrError:
            raise
        except Exception as exc:
            err = self._missing(exc, op, key)
            if err is None:
                return None
            raise err from exc
        if info.get("type", "file") != "file":
            return None
        return info

    async def _object_info(self, fs: Any, key: str) -> dict[str, Any]:
        """The filesystem's metadata of ``key`` (raises its own errors; drivers may override)."""
        info: dict[str, Any] = await fs._info(self._full(key))
        return info

    async def _exists(self, key: str) -> bool:
        return (await self._info(key, "exists")) is not None

    async def _getsize(self, key: str) -> int:
        info = await self._info(key, "getsize")
        if info is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return int(info["size"])

    def _relative(self, name: str, base: str) -> str | None:
        """``name`` relative to ``base`` (``""`` or ``"x/"``), if it is a key below it."""
        if not name.startswith(base) or name.endswith("/"):
            return None
        rel = name[len(base) :]
        return rel or None

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        fs = await self.filesystem()
        target = self._full(prefix.rstrip("/")) if prefix else self.path
        root = f"{self.path}/" if self.path else ""
        fs.invalidate_cache(target)
        try:
            names = await fs._find(target, withdirs=False)
        except AzarrError:
            raise
        except Exception as exc:
            err = self._missing(exc, "list", prefix)
            if err is not None:
                raise err from exc
            names = []
        keys = []
        for name in names:
            rel = self._relative(name, root)
            if rel is not None and rel.startswith(prefix):
                keys.append(rel)
        for key in sorted(keys):
            yield key

    async def _ls_children(self, prefix: str) -> tuple[set[str], set[str]]:
        """Names directly under ``prefix``: (values, "directories"), from one listing call."""
        fs = await self.filesystem()
        target = self._full(prefix.rstrip("/")) if prefix else self.path
        base = f"{target}/" if target else ""
        fs.invalidate_cache(target)
        try:
            entries = await fs._ls(target, detail=True)
        except AzarrError:
            raise
        except Exception as exc:
            err = self._missing(exc, "list_dir", prefix)
            if err is not None:
                raise err from exc
            entries = []
        values: set[str] = set()
        dirs: set[str] = set()
        for entry in entries:
            name = entry["name"] if isinstance(entry, Mapping) else str(entry)
            rel = self._relative(name.rstrip("/"), base)
            if rel is None or "/" in rel:
                continue
            is_dir = isinstance(entry, Mapping) and entry.get("type") == "directory"
            (dirs if is_dir else values).add(rel)
        return values, dirs

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        values, dirs = await self._ls_children(prefix)
        for child in sorted(values | dirs):
            yield child

    async def _delete_prefix(self, prefix: str) -> None:
        keys = [k async for k in self._list_prefix(prefix)]
        sem = asyncio.Semaphore(_DELETE_CONCURRENCY)

        async def one(key: str) -> None:
            async with sem:
                await self._delete(key)

        await asyncio.gather(*(one(k) for k in keys))
