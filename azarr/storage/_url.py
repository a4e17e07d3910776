"""Turning URLs, paths and mappings into stores."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any, TypeAlias

from azarr.storage._base import Store
from azarr.storage._mapping import MappingStore, is_mapping_like
from azarr.storage._memory import MemoryStore
from azarr.storage._spec import StoreSpec, open_store

StoreLike: TypeAlias = Store | StoreSpec | str | os.PathLike[str] | MutableMapping[str, bytes]
"""What ``open``/``create`` accept as ``store``: a Store or StoreSpec, a URL or path, or a mapping of str -> bytes."""

LOCAL_SCHEMES = ("file", "local")


def split_scheme(url: str) -> tuple[str | None, str]:
    """``("s3", "bucket/x")`` for ``"s3://bucket/x"``; ``(None, url)`` for plain paths."""
    scheme, sep, rest = url.partition("://")
    # A one-letter "scheme" is a Windows drive (C://...), and "x:" without "//" is a path.
    if not sep or len(scheme) < 2 or not scheme.replace("+", "").replace("-", "").isalnum():
        return None, url
    return scheme.lower(), rest


def reject_options(kind: str, url: str, options: Mapping[str, Any] | None, allowed: frozenset[str]) -> None:
    """Refuse ``storage_options`` a driver does not take, naming them and the URL.

    Raises
    ------
    TypeError
        Options outside ``allowed``.
    """
    extra = sorted(set(options or {}) - allowed)
    if extra:
        raise TypeError(
            f"storage_options {extra} do not apply to {kind} {url!r}; "
            "they are for fsspec filesystems such as s3://"
        )


def from_url(
    url_or_path: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    read_only: bool = False,
) -> Store:
    """Open the store a URL or local path points to (zarr-python 3 ``make_store_path``).

    The URL is resolved to a `StoreSpec` by the driver
    registered for its scheme (`register_store`, or the
    ``azarr.stores`` entry points), and the live store of that spec is returned:
    the same object for every open of one spec while any is in use, so opens
    share connections, budget and counters.

    Parameters
    ----------
    url_or_path : str or os.PathLike
        * a local path, or ``file://`` / ``local://`` URL -> `LocalStore`;
        * ``memory://<name>`` -> `MemoryStore` shared by every open of that name;
        * ``s3://bucket/path`` (or ``s3a://``) -> `S3Store`;
        * ``gs://bucket/path`` (or ``gcs://``) -> `GCSStore`;
        * ``http://`` / ``https://`` -> `HTTPStore` (read-only; ``read_only`` is ignored);
        * ``zip::path/to/data.zip`` or ``zip://path/to/data.zip`` -> `ZipStore`
          in mode ``"r"`` (always read-only: to write, create a ``ZipStore`` and close it);
        * a scheme registered by a third-party driver;
        * any other fsspec protocol with an async implementation (``az://``, ``abfs://``,
          ...) -> `FsspecStore`;
        * a chained fsspec URL (``simplecache::s3://bucket/x.zarr``,
          ``zip::s3://bucket/data.zip``) -> built by `fsspec.core.url_to_fs`:
          `FsspecStore` if the outermost filesystem is async, else
          `SyncFsspecStore` (the caching wrappers are synchronous).
    storage_options : dict, optional
        Filesystem options for fsspec/s3fs URLs (``endpoint_url``, ``key``, ``anon``, ...),
        exactly as fsspec takes them; for a chained URL, keyed by protocol:
        ``{"s3": {"anon": True}, "simplecache": {"cache_storage": "/tmp/c"}}``.
        For local paths only ``auto_mkdir`` is accepted; none for memory and zip URLs.
    read_only : bool
        Open the store read-only.

    Returns
    -------
    Store

    Raises
    ------
    TypeError
        ``storage_options`` given for a local, memory or zip store, or the URL's
        (unchained) fsspec filesystem is synchronous-only.
    ValueError
        Unknown protocol.
    """
    url = os.fspath(url_or_path)
    if not isinstance(url, str):
        raise TypeError(f"store URL must be str or os.PathLike[str], got {type(url).__name__}")
    return open_store(StoreSpec.from_url(url, storage_options=storage_options), read_only=read_only)


class ChainedURLDriver:
    """The ``fsspec-chain`` driver: chained fsspec URLs such as ``simplecache::s3://bucket/x``."""

    def spec_from_url(self, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``zip::local.zip`` is the native ZipStore; any other chain is kept whole for fsspec."""
        first, _, target = url.partition("::")
        if first in ("zip", "zip://") and "::" not in target:
            target_scheme, target_path = split_scheme(target)
            if target_scheme is None or target_scheme in LOCAL_SCHEMES:
                from azarr.storage._zip import ZipStore

                reject_options("zip URL", url, storage_options, frozenset())
                return ZipStore.spec_from_url(f"zip://{target_path}", None)
        import fsspec

        try:
            # fsspec would read an unknown wrapper name ("cache::s3://...") as a local path.
            for link in url.split("::")[:-1]:
                fsspec.get_filesystem_class(link.partition("://")[0])
        except (ValueError, ImportError) as exc:
            raise ValueError(f"cannot open {url!r}: {exc}") from exc
        return StoreSpec.create("fsspec-chain", url, storage_options)

    def from_spec(self, spec: StoreSpec) -> Store:
        """The filesystem of the chain (`fsspec.core.url_to_fs`), async or not."""
        import fsspec.core
        from fsspec.asyn import AsyncFileSystem

        from azarr.storage._fsspec import FsspecStore
        from azarr.storage._fsspec_sync import SyncFsspecStore

        try:
            fs, path = fsspec.core.url_to_fs(spec.root, **spec.storage_options())
        except (ValueError, ImportError) as exc:
            raise ValueError(f"cannot open {spec.root!r}: {exc}") from exc
        if isinstance(fs, AsyncFileSystem):
            return FsspecStore(fs, path)
        return SyncFsspecStore(fs, path, url=spec.root)

    def __repr__(self) -> str:
        return "ChainedURLDriver()"


def make_store(
    store_like: StoreLike,
    *,
    storage_options: Mapping[str, Any] | None = None,
    read_only: bool = False,
) -> Store:
    """Coerce what users pass as ``store=`` into a `Store`.

    Parameters
    ----------
    store_like : Store, StoreSpec, str, os.PathLike or MutableMapping[str, bytes]
        A Store is returned as is (a read-only view of it if ``read_only`` and it is
        writable); a StoreSpec opens its live store (`open_store`); a str or path goes through `from_url`;
        a decoded kerchunk reference set (``{"version": 1, "refs": ...}``, or version 0 with
        string metadata documents) opens a `ReferenceStore` (``storage_options``: its
        ``remote_protocol``, ``remote_options``, ``allowed_targets``); a ``dict`` is wrapped in a
        `MemoryStore` sharing it, an ``fsspec`` mapper becomes the store of its file system, and any other ``MutableMapping`` (``dbm``,
        zarr-python 2 stores, ...) in a `MappingStore`, which calls it from a
        worker thread.
    storage_options : dict, optional
        Passed to `from_url`; an error with a Store or a mapping.
    read_only : bool
        Open read-only.

    Returns
    -------
    Store

    Raises
    ------
    TypeError
        Anything else, or ``storage_options`` with a Store or a mapping.
    """
    if isinstance(store_like, Store):
        reject_options("a Store instance", repr(store_like), storage_options, frozenset())
        if read_only and not store_like.read_only:
            return store_like.with_read_only(True)
        return store_like
    if isinstance(store_like, StoreSpec):
        reject_options("a StoreSpec", repr(store_like), storage_options, frozenset())
        return open_store(store_like, read_only=read_only)
    if isinstance(store_like, str | os.PathLike):
        return from_url(store_like, storage_options=storage_options, read_only=read_only)
    if isinstance(store_like, dict):
        # A decoded kerchunk reference set is a dict (json.load's); other mappings (dbm files,
        # zarr-python 2 stores) are not probed: the probe reads their metadata keys.
        from azarr.storage._reference import ReferenceStore, is_reference_mapping

        if is_reference_mapping(store_like):
            return ReferenceStore(store_like, **dict(storage_options or {}))
    mapper = _fsspec_mapper(store_like)
    if mapper is not None:
        reject_options("an fsspec mapper", repr(store_like), storage_options, frozenset())
        return mapper_store(mapper, read_only=read_only)
    if is_mapping_like(store_like):
        reject_options("a mapping", type(store_like).__name__, storage_options, frozenset())
        if isinstance(store_like, dict):
            return MemoryStore(store_like, read_only=read_only)
        return MappingStore(store_like, read_only=read_only)
    raise TypeError(
        f"cannot use {type(store_like).__name__} as a store: give a Store, a URL or path, "
        "or a MutableMapping of str -> bytes"
    )


def _fsspec_mapper(value: Any) -> Any:
    """``value`` if it is an ``fsspec.FSMap`` (``fsspec.get_mapper(...)``), else None."""
    if type(value).__name__ != "FSMap":
        return None
    from fsspec.mapping import FSMap

    return value if isinstance(value, FSMap) else None


def mapper_store(mapper: Any, *, read_only: bool = False) -> Store:
    """The store of an fsspec mapper's file system and root: its `FsspecStore` (async file
    systems) or `SyncFsspecStore`, not a `MappingStore` calling the mapper key by key.
    ``store.map`` keeps the mapper (zarr-python 2's ``FSStore.map``)."""
    from azarr.storage._fsspec import FsspecStore
    from azarr.storage._fsspec_sync import SyncFsspecStore

    store: FsspecStore | SyncFsspecStore
    if getattr(mapper.fs, "async_impl", False):
        store = FsspecStore(mapper.fs, mapper.root, read_only=read_only)
    else:
        store = SyncFsspecStore(mapper.fs, mapper.root, read_only=read_only)
    store.map = mapper
    return store
