"""Turning URLs, paths and mappings into stores."""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import Any, TypeAlias

from azarr.storage._base import Store
from azarr.storage._fsspec import FsspecStore
from azarr.storage._fsspec_sync import SyncFsspecStore
from azarr.storage._gcs import GCSStore
from azarr.storage._http import HTTPStore
from azarr.storage._local import LocalStore
from azarr.storage._mapping import MappingStore
from azarr.storage._memory import MemoryStore
from azarr.storage._s3 import S3Store
from azarr.storage._zip import ZipStore

StoreLike: TypeAlias = Store | str | os.PathLike[str] | MutableMapping[str, bytes]
"""What ``open``/``create`` accept as ``store``: a Store, a URL or path, or a mapping of str -> bytes."""

_LOCAL_SCHEMES = ("file", "local")
_S3_SCHEMES = ("s3", "s3a")
_GCS_SCHEMES = ("gs", "gcs")
_HTTP_SCHEMES = ("http", "https")
# Options LocalStore understands, as fsspec's local filesystem spells them.
_LOCAL_OPTIONS = frozenset({"auto_mkdir"})


def _scheme(url: str) -> tuple[str | None, str]:
    """``("s3", "bucket/x")`` for ``"s3://bucket/x"``; ``(None, url)`` for plain paths."""
    scheme, sep, rest = url.partition("://")
    # A one-letter "scheme" is a Windows drive (C://...), and "x:" without "//" is a path.
    if not sep or len(scheme) < 2 or not scheme.replace("+", "").replace("-", "").isalnum():
        return None, url
    return scheme.lower(), rest


def _reject_options(kind: str, url: str, options: Mapping[str, Any] | None, allowed: frozenset[str]) -> None:
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

    Parameters
    ----------
    url_or_path : str or os.PathLike
        * a local path, or ``file://`` / ``local://`` URL -> :class:`LocalStore`;
        * ``memory://<name>`` -> :class:`MemoryStore` shared by every open of that name;
        * ``s3://bucket/path`` (or ``s3a://``) -> :class:`S3Store`;
        * ``gs://bucket/path`` (or ``gcs://``) -> :class:`GCSStore`;
        * ``http://`` / ``https://`` -> :class:`HTTPStore` (read-only; ``read_only`` is ignored);
        * ``zip::path/to/data.zip`` or ``zip://path/to/data.zip`` -> :class:`ZipStore`
          in mode ``"r"`` (always read-only: to write, create a ``ZipStore`` and close it);
        * any other fsspec protocol with an async implementation (``az://``, ``abfs://``,
          ...) -> :class:`FsspecStore`;
        * a chained fsspec URL (``simplecache::s3://bucket/x.zarr``,
          ``zip::s3://bucket/data.zip``) -> built by :func:`fsspec.core.url_to_fs`:
          :class:`FsspecStore` if the outermost filesystem is async, else
          :class:`SyncFsspecStore` (the caching wrappers are synchronous).
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
    if "::" in url:
        return _from_chained(url, storage_options, read_only)
    scheme, rest = _scheme(url)
    if scheme is None or scheme in _LOCAL_SCHEMES:
        _reject_options("local path", url, storage_options, _LOCAL_OPTIONS)
        path = rest
        if scheme is not None and path.startswith("localhost/"):
            path = path[len("localhost") :]
        return LocalStore(path, read_only=read_only, **dict(storage_options or {}))
    if scheme == "memory":
        _reject_options("memory URL", url, storage_options, frozenset())
        return MemoryStore.named(rest.strip("/"), read_only=read_only)
    if scheme in _S3_SCHEMES:
        return S3Store(rest, storage_options=storage_options, read_only=read_only)
    if scheme in _GCS_SCHEMES:
        return GCSStore(rest, storage_options=storage_options, read_only=read_only)
    if scheme in _HTTP_SCHEMES:
        return HTTPStore(url, storage_options=storage_options)
    if scheme == "zip":
        _reject_options("zip URL", url, storage_options, frozenset())
        return ZipStore(rest, mode="r")
    import fsspec

    try:
        fsspec.get_filesystem_class(scheme)
    except (ValueError, ImportError) as exc:
        raise ValueError(f"cannot open {url!r}: {exc}") from exc
    # FsspecStore checks the class is async and builds its own per-loop instances, so
    # no synchronous instance (with fsspec's background IO thread) is ever created here.
    return FsspecStore(None, url, protocol=scheme, storage_options=storage_options, read_only=read_only)


def _from_chained(url: str, storage_options: Mapping[str, Any] | None, read_only: bool) -> Store:
    """The store of a chained URL such as ``simplecache::s3://bucket/x`` or ``zip::data.zip``."""
    first, _, target = url.partition("::")
    if first in ("zip", "zip://") and "::" not in target:
        # fsspec spelling of "the archive itself": a local zip file gets the native ZipStore.
        target_scheme, target_path = _scheme(target)
        if target_scheme is None or target_scheme in _LOCAL_SCHEMES:
            _reject_options("zip URL", url, storage_options, frozenset())
            return ZipStore(target_path, mode="r")
    import fsspec
    import fsspec.core
    from fsspec.asyn import AsyncFileSystem

    try:
        # fsspec would read an unknown wrapper name ("cache::s3://...") as a local path.
        for link in url.split("::")[:-1]:
            fsspec.get_filesystem_class(link.partition("://")[0])
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
    except (ValueError, ImportError) as exc:
        raise ValueError(f"cannot open {url!r}: {exc}") from exc
    if isinstance(fs, AsyncFileSystem):
        return FsspecStore(fs, path, read_only=read_only)
    return SyncFsspecStore(fs, path, read_only=read_only, url=url)


def make_store(
    store_like: StoreLike,
    *,
    storage_options: Mapping[str, Any] | None = None,
    read_only: bool = False,
) -> Store:
    """Coerce what users pass as ``store=`` into a :class:`Store`.

    Parameters
    ----------
    store_like : Store, str, os.PathLike or MutableMapping[str, bytes]
        A Store is returned as is (a read-only view of it if ``read_only`` and it is
        writable); a str or path goes through :func:`from_url`; a ``dict`` is wrapped in a
        :class:`MemoryStore` sharing it, and any other ``MutableMapping`` (``dbm``,
        zarr-python 2 stores, ...) in a :class:`MappingStore`, which calls it from a
        worker thread.
    storage_options : dict, optional
        Passed to :func:`from_url`; an error with a Store or a mapping.
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
        _reject_options("a Store instance", repr(store_like), storage_options, frozenset())
        if read_only and not store_like.read_only:
            return store_like.with_read_only(True)
        return store_like
    if isinstance(store_like, str | os.PathLike):
        return from_url(store_like, storage_options=storage_options, read_only=read_only)
    if isinstance(store_like, MutableMapping):
        _reject_options("a mapping", type(store_like).__name__, storage_options, frozenset())
        if isinstance(store_like, dict):
            return MemoryStore(store_like, read_only=read_only)
        return MappingStore(store_like, read_only=read_only)
    raise TypeError(
        f"cannot use {type(store_like).__name__} as a store: give a Store, a URL or path, "
        "or a MutableMapping of str -> bytes"
    )
