"""A store over a synchronous fsspec filesystem (caching wrappers, archives, ...), in threads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from azarr.errors import StoreError
from azarr.storage._base import ByteRange, Store
from azarr.storage._errors import is_no_such_bucket
from azarr.storage._fsspec import FsspecStore
from azarr.storage._spec import StoreSpec
from azarr.storage._threads import BlockingIO

# fsspec filesystems are thread-safe (dask calls them from many threads) and mostly
# wait on the network, so several calls may overlap.
_DEFAULT_WORKERS = 8
_REQUESTS_PER_WORKER = 2
_LOCAL_PROTOCOLS = frozenset({"file", "local", "memory"})
# A "directory" key: reading it finds no value (as for any other missing key).
_NOT_A_VALUE = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


def _protocols(fs: Any) -> tuple[str, ...]:
    proto = getattr(type(fs), "protocol", ())
    return (proto,) if isinstance(proto, str) else tuple(proto)


def _innermost(fs: Any) -> Any:
    """The filesystem at the end of a chain (``simplecache::s3://`` -> the S3 filesystem)."""
    seen = 0
    while getattr(fs, "fs", None) is not None and seen < 16:
        fs = fs.fs
        seen += 1
    return fs


class SyncFsspecStore(Store):
    """A store over a synchronous fsspec filesystem, whose calls run in a small thread pool.

    `FsspecStore` drives async filesystems on the event loop; this class is
    for those that only have a blocking API, such as fsspec's caching wrappers
    (``simplecache::s3://...``, ``filecache::``, ``blockcache::``), which are
    synchronous even over an async target, and archive or custom filesystems.
    `from_url` picks it for such (chained) URLs; zarr-python 2
    ``FSStore`` runs the same calls on the calling thread.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem
        The filesystem (not one created with ``asynchronous=True``).
    path : str
        Root of the hierarchy in ``fs`` (protocol optional, stripped).
    read_only : bool
        Refuse writes with `ReadOnlyError`.
    max_workers : int, optional
        Threads calling the filesystem (default 8).
    url : str, optional
        How to show the store in messages (default: built from the protocol and path).

    Raises
    ------
    TypeError
        ``fs`` is not an fsspec filesystem, or is an async one in asynchronous mode
        (use `FsspecStore`).

    Notes
    -----
    * Calls used: ``cat_file`` (with ``start``/``end`` for byte ranges),
      ``pipe_file``, ``rm_file``, ``info``, ``find`` and ``ls``. Listings first
      invalidate the filesystem's listings cache, so they see new keys.
    * ``list_dir`` reports what ``fs.ls`` reports: on a local filesystem, directories
      emptied by deletes are still listed (``LocalStore`` removes them).
    * Caching wrappers cache what they read and nothing else: ``simplecache`` keeps
      serving a value after it was overwritten or deleted by someone else (that is
      its purpose), and its listings come from the target.
    * Errors are classified as `FsspecStore` does (missing key -> ``None``,
      403 -> `PermissionDeniedError`, missing bucket or refused
      connection -> `StoreUnavailableError`, transient errors
      retried by the scheduler).
    * Pickling pickles the filesystem, which fsspec does as its configuration
      (class and ``storage_options``), so the copy reconnects in another process.
    * The request budget defaults to ``2 * max_workers`` requests in flight.

    Examples
    --------
    >>> from azarr.storage import from_url
    >>> store = from_url(
    ...     "simplecache::s3://bucket/data.zarr",
    ...     storage_options={"s3": {"anon": True}, "simplecache": {"cache_storage": "/tmp/zc"}},
    ... )
    >>> type(store).__name__
    'SyncFsspecStore'
    """

    #: The fsspec mapper this store was made from (`azarr.storage.make_store` of an
    #: ``FSMap``), kept as zarr-python 2's ``FSStore.map``; None otherwise.
    map: Any = None

    def __init__(
        self,
        fs: Any,
        path: str = "",
        *,
        read_only: bool = False,
        max_workers: int | None = None,
        url: str | None = None,
    ) -> None:
        from fsspec import AbstractFileSystem

        if not isinstance(fs, AbstractFileSystem):
            raise TypeError(f"SyncFsspecStore needs an fsspec filesystem, got {type(fs).__name__}")
        if getattr(fs, "asynchronous", False):
            raise TypeError(
                f"{type(fs).__qualname__} was created with asynchronous=True; use FsspecStore for it"
            )
        super().__init__(read_only=read_only)
        self.fs = fs
        stripped = fs._strip_protocol(path) if path else ""
        self.path: str = stripped.rstrip("/") if isinstance(stripped, str) else ""
        self._url = url
        workers = _DEFAULT_WORKERS if max_workers is None else int(max_workers)
        self._io = BlockingIO(workers, "azarr-fsspec")
        #: Requests in flight at most (read by `azarr.scheduler.budget_for`).
        self.max_requests = _REQUESTS_PER_WORKER * workers
        self.is_local = bool(set(_protocols(_innermost(fs))) & _LOCAL_PROTOCOLS)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = False,
        max_workers: int | None = None,
    ) -> SyncFsspecStore:
        """Build the filesystem of ``url`` with `fsspec.core.url_to_fs` and wrap it.

        ``storage_options`` are passed as fsspec users pass them; for a chained URL,
        per protocol: ``{"s3": {...}, "simplecache": {"cache_storage": ...}}``.
        """
        import fsspec.core

        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        return cls(fs, path, read_only=read_only, max_workers=max_workers, url=url)

    @property
    def url(self) -> str:
        if self._url is not None:
            return self._url
        protocols = _protocols(self.fs)
        return f"{protocols[0] if protocols else 'fsspec'}://{self.path}"

    @property
    def max_workers(self) -> int:
        """Threads calling the filesystem."""
        return self._io.max_workers

    def _make_spec(self) -> StoreSpec:
        # fsspec filesystems are hashable and pickle as their configuration.
        return StoreSpec.create(
            "fsspec-sync",
            self.path,
            params={"fs": self.fs, "max_workers": self.max_workers, "url": self._url},
        )

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> SyncFsspecStore:
        """``SyncFsspecStore(fs, spec.root, ...)`` with the filesystem the spec holds."""
        params = spec.constructor_params()
        return cls(params.pop("fs"), spec.root, **params)

    def _where(self) -> str:
        return self.url

    def _full(self, key: str) -> str:
        return f"{self.path}/{key}" if self.path else key

    # ------------------------------------------------------------------ errors
    def _translate(self, exc: BaseException, op: str, key: str) -> StoreError:
        # The same classification as the async stores (it only needs _where()).
        return FsspecStore._translate(cast(FsspecStore, self), exc, op, key)

    @staticmethod
    def _is_missing(exc: BaseException) -> bool:
        return isinstance(exc, _NOT_A_VALUE) and not is_no_such_bucket(exc)

    # ------------------------------------------------------------------ sync bodies (worker threads)
    def _read(self, path: str, start: int | None, end: int | None) -> bytes | None:
        try:
            return bytes(self.fs.cat_file(path, start=start, end=end))
        except Exception as exc:
            if self._is_missing(exc):
                return None
            raise

    def _info(self, path: str) -> dict[str, Any] | None:
        try:
            info: dict[str, Any] = self.fs.info(path)
        except Exception as exc:
            if self._is_missing(exc):
                return None
            raise
        return info if info.get("type", "file") == "file" else None

    def _remove(self, path: str) -> None:
        try:
            self.fs.rm_file(path)
        except Exception as exc:
            if not self._is_missing(exc):
                raise
        finally:
            self.fs.invalidate_cache(path)

    def _write(self, path: str, value: bytes) -> None:
        try:
            try:
                self.fs.pipe_file(path, value)
            except FileNotFoundError:
                # A file system without auto_mkdir (a local one by default): make the parent
                # directories and write again, as fsspec's own FSMap does.
                self.fs.mkdirs(self.fs._parent(path), exist_ok=True)
                self.fs.pipe_file(path, value)
        finally:
            self.fs.invalidate_cache(path)

    def _relative(self, name: str, base: str) -> str | None:
        if not base and name.startswith("/"):
            name = name.lstrip("/")  # e.g. the memory filesystem roots every name at "/"
        if not name.startswith(base) or name.endswith("/"):
            return None
        return name[len(base) :] or None

    def _find(self, prefix: str) -> list[str]:
        target = self._full(prefix.rstrip("/")) if prefix else self.path
        self.fs.invalidate_cache(target)
        try:
            names = self.fs.find(target, withdirs=False)
        except Exception as exc:
            if self._is_missing(exc):
                return []
            raise
        root = f"{self.path}/" if self.path else ""
        keys = []
        for name in names:
            rel = self._relative(name, root)
            if rel is not None and rel.startswith(prefix):
                keys.append(rel)
        keys.sort()
        return keys

    def _ls(self, prefix: str) -> list[str]:
        target = self._full(prefix.rstrip("/")) if prefix else self.path
        base = f"{target}/" if target else ""
        self.fs.invalidate_cache(target)
        try:
            entries = self.fs.ls(target, detail=True)
        except Exception as exc:
            if self._is_missing(exc):
                return []
            raise
        children = set()
        for entry in entries:
            name = entry["name"] if isinstance(entry, Mapping) else str(entry)
            rel = self._relative(name.rstrip("/"), base)
            if rel is not None and "/" not in rel:
                children.add(rel)
        return sorted(children)

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if byte_range is not None and byte_range.is_empty:
            return b"" if await self._exists(key) else None
        start = end = None
        if byte_range is not None:
            start, end = byte_range.start or None, byte_range.end
        return await self._io.call(self._translate, "get", key, self._read, self._full(key), start, end)

    async def _set(self, key: str, value: bytes) -> None:
        await self._io.call(self._translate, "set", key, self._write, self._full(key), value)

    async def _delete(self, key: str) -> None:
        await self._io.call(self._translate, "delete", key, self._remove, self._full(key))

    async def _exists(self, key: str) -> bool:
        return (await self._io.call(self._translate, "exists", key, self._info, self._full(key))) is not None

    async def _getsize(self, key: str) -> int:
        info = await self._io.call(self._translate, "getsize", key, self._info, self._full(key))
        if info is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return int(info["size"])

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._io.call(self._translate, "list", prefix, self._find, prefix):
            yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        for name in await self._io.call(self._translate, "list_dir", prefix, self._ls, prefix):
            yield name

    async def _delete_prefix(self, prefix: str) -> None:
        keys = await self._io.call(self._translate, "delete_prefix", prefix, self._find, prefix)
        # One rm_file per key, spread over the workers (not fs.rm, which glob-expands
        # keys containing '*?[').
        await asyncio.gather(*(self._delete(k) for k in keys))
