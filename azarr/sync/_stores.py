"""Stores in synchronous code: zarr-python 2's store interface, a ``MutableMapping`` of keys to bytes.

zarr-python 2 code treats a store as a mapping (``store["a/.zarray"]``, ``del store[k]``,
``len(store)``, ``for k in store``, ``store.close()``, ``with store:``), and zarr 2's store
classes (``DirectoryStore``, ``ZipStore``, ``KVStore``, ...) are such mappings. Each class here
is that interface over one of azarr's async stores (`azarr.storage`), running every operation
through the store's managed path (`azarr.scheduler.StoreIO`: budget, retries, timeouts) on the
I/O loop thread, as `azarr.sync.Array` runs its array's coroutines:

    >>> import azarr.sync as zs
    >>> store = zs.MemoryStore()
    >>> z = zs.zeros(4, chunks=2, store=store)
    >>> sorted(store)
    ['.zarray']
    >>> z.store is store
    True

Passing a sync store to an ``azarr.sync`` function hands its async store to the async API;
``store.async_store`` gives it to async code. Nodes opened on a store give that same object
back as ``node.store`` for as long as the caller holds it (zarr 2 code compares stores with
``is``); otherwise a new view of the same async store.
"""

from __future__ import annotations

import inspect
import os
import weakref
import zipfile
from collections.abc import AsyncIterator, Iterator, MutableMapping
from types import TracebackType
from typing import Any, ClassVar

from numcodecs.compat import ensure_bytes

from azarr import api, storage
from azarr.api.consolidated import load_consolidated
from azarr.api.creation import resolve_store
from azarr.core._reports import typestr
from azarr.errors import ReadOnlyError
from azarr.scheduler import StoreIO
from azarr.sync._loop import run

#: The sync view last made of each live async store (by id; the view holds the store alive).
_VIEWS: weakref.WeakValueDictionary[int, Store] = weakref.WeakValueDictionary()


class Store(MutableMapping[str, bytes]):
    """zarr-python 2's store interface over an azarr store, blocking.

    A ``MutableMapping[str, bytes]``: ``store[key]`` reads (`KeyError` when missing),
    ``store[key] = value`` writes any bytes-like value, ``del store[key]`` deletes,
    ``key in store``, ``len(store)`` and iteration list the store. Plus zarr-python 2's
    store methods `listdir`, `rmdir`, `getsize`, `rename` and `close` (also on leaving
    ``with store:``). Other attributes are the async store's; its coroutine methods
    are run to completion (``store.flush()``).

    Parameters
    ----------
    store : azarr.storage.Store
        The async store to drive.
    timeout : float, optional
        Seconds each call may take (None: no limit); on expiry the call is cancelled
        and `azarr.sync.SyncTimeoutError` raised.
    """

    #: The async store class this view class stands for (`view_of` picks the closest).
    _async_class: ClassVar[type[storage.Store] | None] = None

    def __init__(self, store: storage.Store, *, timeout: float | None = None) -> None:
        self._adopt(store, timeout)

    def _adopt(self, store: storage.Store, timeout: float | None) -> None:
        self._store = store
        self._io = StoreIO(store)
        self.timeout = timeout
        _VIEWS[id(store)] = self

    @classmethod
    def view_of(cls, store: storage.Store | Store, timeout: float | None = None) -> Store:
        """The sync view of async ``store``: the one in use if there is one, else a new one.

        The new view's class is the one made for ``store``'s class (a `DirectoryStore`
        for a `azarr.LocalStore`, ...), `Store` for others.
        """
        if isinstance(store, Store):
            return store
        view = _VIEWS.get(id(store))
        if view is not None and view._store is store:
            return view
        view_cls = _view_class(type(store))
        view = view_cls.__new__(view_cls)
        view._adopt(store, timeout)
        return view

    @property
    def async_store(self) -> storage.Store:
        """The azarr store this drives (for the async API)."""
        return self._store

    @property
    def read_only(self) -> bool:
        """True if writes are refused."""
        return self._store.read_only

    @property
    def url(self) -> str:
        """The store's URL."""
        return self._store.url

    def _run(self, coro: Any) -> Any:
        return run(coro, self.timeout)

    def __repr__(self) -> str:
        return f"<azarr.sync.{type(self).__name__} {self._store.url}>"

    def __eq__(self, other: object) -> bool:
        """Same store, as zarr-python 2 compares stores: memory stores by their contents, others by spec (same path or URL)."""
        if not isinstance(other, Store):
            return NotImplemented
        mine, theirs = self._store, other._store
        if mine is theirs:
            return True
        if isinstance(mine, storage.MemoryStore) and isinstance(theirs, storage.MemoryStore):
            return mine.data == theirs.data
        return mine.spec == theirs.spec

    __hash__ = None  # type: ignore[assignment]  # a mutable mapping, as zarr-python 2's stores

    # ---------------------------------------------------------------- the mapping
    def __getitem__(self, key: str) -> bytes:
        value = self._run(self._io.get(key))
        if value is None:
            raise KeyError(key)
        return bytes(value)

    def __setitem__(self, key: str, value: Any) -> None:
        if self.read_only:  # refused before the value is looked at, as zarr-python 2's stores do
            raise ReadOnlyError(f"cannot write {key!r}: store {self.url} is read-only")
        self._run(self._io.set(key, ensure_bytes(value)))

    def __delitem__(self, key: str) -> None:
        if not self._run(self._io.exists(key)):
            raise KeyError(key)
        self._run(self._io.delete(key))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self._run(self._io.exists(key)))

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:  # type: ignore[override]
        """Every key in the store, listed once."""
        keys: list[str] = self._run(self._io.list_prefix(""))
        return keys

    def clear(self) -> None:
        """Delete every key (one prefix delete, not one call per key)."""
        self._run(self._io.delete_prefix(""))

    # ---------------------------------------------------------------- zarr-python 2 store methods
    def listdir(self, path: str | None = None) -> list[str]:
        """Names directly under ``path`` (zarr-python 2 ``Store.listdir``), sorted."""
        names: list[str] = self._run(self._io.list_dir(_prefix(path)))
        return sorted(names)

    def rmdir(self, path: str | None = None) -> None:
        """Delete every key under ``path`` (zarr-python 2 ``Store.rmdir``; ``None``: everything)."""
        self._run(api.rmdir(self._store, path))

    def getsize(self, path: str | None = None) -> int:
        """Bytes stored at ``path`` (zarr-python 2 ``Store.getsize``; see `azarr.getsize`)."""
        size: int = self._run(api.getsize(self._store, path))
        return size

    def rename(self, src_path: str, dst_path: str) -> None:
        """Move every key under ``src_path`` to ``dst_path`` (zarr-python 2 ``Store.rename``)."""
        self._run(api.rename(self._store, src_path, dst_path))

    def close(self) -> None:
        """Close the store (a `ZipStore` writes its directory; sessions are released)."""
        self._run(self._store.close())

    def __enter__(self) -> Store:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        """The async store's attribute; its coroutine methods run to completion, async iterators as lists."""
        if name.startswith("__") or name in ("_store", "_io", "timeout"):
            raise AttributeError(name)
        value = getattr(self._store, name)
        if inspect.iscoroutinefunction(value):
            return lambda *args, **kwargs: self._run(value(*args, **kwargs))
        if inspect.isasyncgenfunction(value):
            return lambda *args, **kwargs: self._run(_collect(value(*args, **kwargs)))
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        return (Store.view_of, (self._store, self.timeout))


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def _prefix(path: str | None) -> str:
    return (path or "").strip("/")


class KVStore(Store):
    """A store over a mapping you give (zarr-python 2 ``KVStore``).

    A ``dict`` is used as it is (`azarr.MemoryStore` over it), any other mapping
    (``dbm``, a zarr-python 2 store, an object with the mapping methods) through
    `azarr.MappingStore`.
    """

    _async_class: ClassVar[type[storage.Store] | None] = storage.MappingStore

    def __init__(self, mutablemapping: MutableMapping[str, Any], *, timeout: float | None = None) -> None:
        super().__init__(storage.make_store(mutablemapping), timeout=timeout)


class MemoryStore(KVStore):
    """Keys in memory (zarr-python 2 ``MemoryStore``; `azarr.MemoryStore`).

    Parameters
    ----------
    data : MutableMapping, optional
        The dict to keep the keys in (default a new one).
    dimension_separator : {".", "/"}, optional
        Chunk-key separator of arrays created here without one (zarr-python 2).
    read_only : bool
        Refuse writes.
    """

    _async_class = storage.MemoryStore

    def __init__(
        self,
        data: MutableMapping[str, bytes] | None = None,
        *,
        dimension_separator: str | None = None,
        read_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        memory = storage.MemoryStore(data, read_only=read_only)
        Store.__init__(self, _separated(memory, dimension_separator), timeout=timeout)


class DirectoryStore(Store):
    """Keys as files under a directory (zarr-python 2 ``DirectoryStore``; `azarr.LocalStore`).

    Parameters
    ----------
    path : str or os.PathLike
        The directory (created on the first write).
    normalize_keys : bool
        zarr-python 2's switch to lower-case keys: only False is supported.
    dimension_separator : {".", "/"}, optional
        Chunk-key separator of arrays created here without one (zarr-python 2).
    read_only : bool
        Refuse writes.

    Raises
    ------
    ValueError
        ``normalize_keys=True``.
    """

    _async_class: ClassVar[type[storage.Store] | None] = storage.LocalStore
    _local_class: ClassVar[type[storage.LocalStore]] = storage.LocalStore

    def __init__(
        self,
        path: str | os.PathLike[str],
        normalize_keys: bool = False,
        dimension_separator: str | None = None,
        *,
        read_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        _refuse_normalize_keys(normalize_keys)
        local = self._local_class(path, read_only=read_only)
        super().__init__(_separated(local, dimension_separator), timeout=timeout)

    @property
    def path(self) -> str:
        """The directory, absolute (zarr-python 2 ``DirectoryStore.path``)."""
        return os.fspath(self._store.root)  # type: ignore[attr-defined]


#: azarr's name for `DirectoryStore`.
LocalStore = DirectoryStore


class NestedDirectoryStore(DirectoryStore):
    """A directory store keeping ``0.0`` chunk keys as ``0/0`` files (zarr-python 2 ``NestedDirectoryStore``).

    Arrays created here default to ``dimension_separator="/"``, as in zarr-python 2.18.
    """

    _async_class = storage.NestedDirectoryStore
    _local_class = storage.NestedDirectoryStore

    def __init__(
        self,
        path: str | os.PathLike[str],
        normalize_keys: bool = False,
        dimension_separator: str | None = "/",
        *,
        read_only: bool = False,
        timeout: float | None = None,
    ) -> None:
        super().__init__(path, normalize_keys, dimension_separator, read_only=read_only, timeout=timeout)


class TempStore(DirectoryStore):
    """A directory store in a new temporary directory, removed on `close` (zarr-python 2 ``TempStore``)."""

    _async_class = storage.TempStore

    def __init__(
        self,
        suffix: str = "",
        prefix: str = "azarr-",
        dir: str | None = None,
        normalize_keys: bool = False,
        dimension_separator: str | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        _refuse_normalize_keys(normalize_keys)
        temp = storage.TempStore(suffix, prefix, dir)
        Store.__init__(self, _separated(temp, dimension_separator), timeout=timeout)


class ZipStore(Store):
    """A hierarchy in one zip file (zarr-python 2 ``ZipStore``; `azarr.ZipStore`).

    As in zarr-python 2 the default mode is ``"a"`` (read, and add keys to an existing
    archive or create it); call `close` (or leave ``with store:``) after writing, which
    writes the archive's directory.

    Parameters
    ----------
    path : str or os.PathLike
        The archive file.
    compression : int
        ``zipfile.ZIP_STORED`` (default) or another `zipfile` method.
    allowZip64 : bool
        Allow archives over 4 GiB.
    mode : {"a", "r", "w", "x"}
        As `zipfile.ZipFile`.
    dimension_separator : {".", "/"}, optional
        Chunk-key separator of arrays created here without one (zarr-python 2).
    """

    _async_class = storage.ZipStore

    def __init__(
        self,
        path: str | os.PathLike[str],
        compression: int = zipfile.ZIP_STORED,
        allowZip64: bool = True,
        mode: str = "a",
        dimension_separator: str | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        zip_store = storage.ZipStore(path, mode=mode, compression=compression, allowZip64=allowZip64)  # type: ignore[arg-type]
        super().__init__(_separated(zip_store, dimension_separator), timeout=timeout)

    @property
    def path(self) -> str:
        """The archive file, absolute."""
        return os.fspath(self._store.path)  # type: ignore[attr-defined]

    def flush(self) -> None:
        """Write the archive's directory and keep the store writable (zarr-python 2 ``ZipStore.flush``)."""
        self._run(self._store.flush())  # type: ignore[attr-defined]


class LRUStoreCache(Store):
    """An in-memory LRU cache in front of a store (zarr-python 2 ``LRUStoreCache``; `azarr.LRUStoreCache`).

    Parameters
    ----------
    store : Store, str or MutableMapping
        The store to cache.
    max_size : int, optional
        Bytes of values to keep (None: no limit).
    """

    _async_class = storage.LRUStoreCache

    def __init__(self, store: Any, max_size: int | None, *, timeout: float | None = None) -> None:
        cache = storage.LRUStoreCache(_async_store(store), max_size=max_size)
        super().__init__(cache, timeout=timeout)

    def invalidate(self) -> None:
        """Drop every cached value and listing."""
        self._store.invalidate()  # type: ignore[attr-defined]


class N5Store(Store):
    """An N5 container (zarr-python 2 ``N5Store``; `azarr.N5Store`).

    Parameters
    ----------
    store : str, os.PathLike or Store
        A directory path (as zarr-python 2's ``N5Store(path)``) or any store.
    normalize_keys : bool
        zarr-python 2's switch to lower-case keys: only False is supported.
    """

    _async_class = api.N5Store

    def __init__(self, store: Any, normalize_keys: bool = False, *, timeout: float | None = None) -> None:
        _refuse_normalize_keys(normalize_keys)
        super().__init__(api.N5Store(_async_store(store)), timeout=timeout)


#: zarr-python 2's name for an N5 container on an fsspec file system (any store here).
N5FSStore = N5Store


class FSStore(Store):
    """A store for a URL (zarr-python 2 ``FSStore``): azarr's native driver for its scheme, else fsspec.

    Parameters
    ----------
    url : str
        ``s3://``, ``gs://``, ``https://``, a local path, or any fsspec URL.
    normalize_keys : bool
        zarr-python 2's switch to lower-case keys: only False is supported.
    key_separator, dimension_separator : {".", "/"}, optional
        Chunk-key separator of arrays created here without one (zarr-python 2's two names).
    mode : str
        ``"r"`` opens read-only; anything else read-write (zarr-python 2's default ``"w"``).
    fs : fsspec.AbstractFileSystem, optional
        A file system to use for ``url`` (a path in it) instead of one made from the URL.
    check, create, exceptions, missing_exceptions
        zarr-python 2's options of the ``FSMap`` it builds, accepted and unused: azarr
        creates directories as it writes and classifies backend errors itself.
    **storage_options
        Options of the store's driver (``anon``, ``endpoint_url``, ...).
    """

    _async_class = None

    def __init__(
        self,
        url: str,
        normalize_keys: bool = False,
        key_separator: str | None = None,
        mode: str = "w",
        exceptions: Any = None,
        dimension_separator: str | None = None,
        fs: Any = None,
        check: bool = False,
        create: bool = False,
        missing_exceptions: Any = None,
        *,
        timeout: float | None = None,
        **storage_options: Any,
    ) -> None:
        _refuse_normalize_keys(normalize_keys)
        del exceptions, check, create, missing_exceptions  # see the docstring
        read_only = mode == "r"
        if fs is not None:
            fs_store = storage.FsspecStore if getattr(fs, "async_impl", False) else storage.SyncFsspecStore
            store: storage.Store = fs_store(fs, url, read_only=read_only)
        else:
            store = storage.from_url(url, storage_options=storage_options or None, read_only=read_only)
        super().__init__(_separated(store, key_separator or dimension_separator), timeout=timeout)


class ConsolidatedMetadataStore(Store):
    """A store answering metadata from ``.zmetadata`` (zarr-python 2 ``ConsolidatedMetadataStore``).

    Read-only for metadata, as zarr-python 2's; see `azarr.ConsolidatedStore`.

    Raises
    ------
    ValueError
        ``store`` is a path (give a store, as zarr-python 2 requires).
    ConsolidatedMetadataNotFoundError
        No ``metadata_key`` document in the store.
    """

    _async_class = api.ConsolidatedStore

    def __init__(self, store: Any, metadata_key: str = ".zmetadata", *, timeout: float | None = None) -> None:
        if isinstance(store, (str, os.PathLike)):
            raise ValueError(f"ConsolidatedMetadataStore wraps a store, not a path: got {store!r}")
        # zarr-python 2's class reads .zmetadata only (one request; no v3 zarr.json beside it).
        consolidated = run(
            load_consolidated(_async_store(store), metadata_key=metadata_key, zarr_format=2), timeout
        )
        super().__init__(consolidated, timeout=timeout)


def _separated(store: storage.Store, dimension_separator: str | None) -> storage.Store:
    """``store`` with the default chunk-key separator of arrays created in it, when one is given."""
    if dimension_separator is not None:
        if dimension_separator not in (".", "/"):
            raise ValueError(f"dimension_separator must be '.' or '/', got {dimension_separator!r}")
        store.dimension_separator = dimension_separator
    return store


def _refuse_normalize_keys(normalize_keys: bool) -> None:
    if normalize_keys:
        raise ValueError("normalize_keys=True (lower-casing every key) is not supported by azarr's stores")


def _async_store(store: Any) -> storage.Store:
    """The azarr store of a store argument (a sync view, a path or URL, a mapping, a store)."""
    if isinstance(store, Store):
        return store.async_store
    return resolve_store(store, None)


def store_view(store: storage.Store, timeout: float | None = None) -> Any:
    """What a node shows as its ``store``: the metadata store (the first of a ``chunk_store=`` split).

    A mapping the caller gave as the store (a zarr-python 2 store class, a ``dbm`` file...)
    is given back itself, as zarr-python 2 gives back a store object it was given; a
    ``dict`` became a `MemoryStore` (zarr-python 2: a ``KVStore``); other stores show as their
    sync view.
    """
    if isinstance(store, api.SplitStore):
        store = store.meta
    view = _VIEWS.get(id(store))
    if view is not None and view._store is store:
        return view
    if isinstance(store, storage.MappingStore):
        return store.mapping
    return Store.view_of(store, timeout)


def chunk_store_view(store: storage.Store, timeout: float | None = None) -> Any:
    """What a node shows as its ``chunk_store``: the chunk store of a split, else `store_view`."""
    if isinstance(store, api.SplitStore):
        return store_view(store.chunks, timeout)
    return store_view(store, timeout)


def store_view_types(store: storage.Store) -> tuple[str, str | None]:
    """``info``'s ``Store type`` and ``Chunk store type`` (None without a separate chunk store)."""
    meta = typestr(_view_class(type(store.meta if isinstance(store, api.SplitStore) else store)))
    if isinstance(store, api.SplitStore):
        return meta, typestr(_view_class(type(store.chunks)))
    return meta, None


_VIEW_CLASSES: tuple[type[Store], ...] = (
    TempStore,
    NestedDirectoryStore,
    DirectoryStore,
    ZipStore,
    LRUStoreCache,
    N5Store,
    ConsolidatedMetadataStore,
    MemoryStore,
    KVStore,
)


def _view_class(store_cls: type[storage.Store]) -> type[Store]:
    for view_cls in _VIEW_CLASSES:
        if view_cls._async_class is not None and issubclass(store_cls, view_cls._async_class):
            return view_cls
    if issubclass(
        store_cls,
        (storage.S3Store, storage.GCSStore, storage.HTTPStore, storage.FsspecStore, storage.SyncFsspecStore),
    ):
        return FSStore
    return Store
