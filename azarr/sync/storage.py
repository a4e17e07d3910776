"""zarr-python 2's ``zarr.storage`` for `azarr.sync`: the store classes, the store functions, ``default_compressor``.

``import azarr.sync.storage`` gives what zarr 2 code finds in ``zarr.storage``: the sync store
classes (`DirectoryStore`, `ZipStore`, ...; see ``azarr.sync._stores``), `contains_array`,
`contains_group`, `rename`, `rmdir`, `getsize`, `listdir`, and ``default_compressor``, which reads
and sets `azarr.config`'s ``default_compressor`` process-wide (zarr 2 code assigns it):

    >>> import azarr.sync.storage
    >>> from numcodecs import Zstd
    >>> azarr.sync.storage.default_compressor = Zstd(level=1)
    >>> azarr.sync.storage.default_compressor
    Zstd(level=1)
    >>> azarr.sync.storage.default_compressor = "blosc-lz4"  # azarr's default again
"""

from __future__ import annotations

import sys
import types
from typing import Any

import numcodecs

from azarr import config
from azarr.core._normalize import DEFAULT_COMPRESSOR
from azarr.sync._api import contains_array, contains_group, getsize, rename, rmdir
from azarr.sync._stores import (
    ConsolidatedMetadataStore,
    DirectoryStore,
    FSStore,
    KVStore,
    LocalStore,
    LRUStoreCache,
    MemoryStore,
    N5FSStore,
    N5Store,
    NestedDirectoryStore,
    Store,
    TempStore,
    ZipStore,
)

#: zarr-python 2's deprecated name of `MemoryStore`.
DictStore = MemoryStore

__all__ = [
    "ConsolidatedMetadataStore",
    "DictStore",
    "DirectoryStore",
    "FSStore",
    "KVStore",
    "LRUStoreCache",
    "LocalStore",
    "MemoryStore",
    "N5FSStore",
    "N5Store",
    "NestedDirectoryStore",
    "Store",
    "TempStore",
    "ZipStore",
    "contains_array",
    "contains_group",
    "getsize",
    "listdir",
    "rename",
    "rmdir",
]


def listdir(store: Any, path: str | None = None) -> list[str]:
    """Names directly under ``path`` in ``store`` (a sync or async store), sorted (zarr-python 2 ``zarr.storage.listdir``)."""
    return Store.view_of(store).listdir(path)


class _StorageModule(types.ModuleType):
    """This module, with ``default_compressor`` read from and written to `azarr.config`."""

    @property
    def default_compressor(self) -> Any:
        """The compressor of arrays created without ``compressor=`` (a numcodecs codec, or None)."""
        setting = config.get("default_compressor")
        if setting == "blosc-lz4":
            return numcodecs.get_codec(dict(DEFAULT_COMPRESSOR))
        if isinstance(setting, dict):
            return numcodecs.get_codec(dict(setting))
        return setting

    @default_compressor.setter
    def default_compressor(self, codec: Any) -> None:
        config.set(default_compressor=codec)


sys.modules[__name__].__class__ = _StorageModule
#: ``default_compressor`` is this module's property (`_StorageModule`), not a global.
__all__ += ["default_compressor"]  # noqa: F822
