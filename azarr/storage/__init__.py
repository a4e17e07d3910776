"""Stores: where a Zarr hierarchy's keys and bytes live.

Every store implements the async :class:`Store` protocol (``get``/``set``/``delete``/
``exists``/``getsize``/``list_prefix``/``list_dir``/``close``) with the same key rules
and error types, so everything above this package is storage-agnostic.

==================  =====================================  ================================
Store               Backed by                              zarr-python 2 equivalent
==================  =====================================  ================================
:class:`MemoryStore`  a ``dict``                           ``MemoryStore`` / ``KVStore``
:class:`LocalStore`   a directory, atomic writes           ``DirectoryStore``
:class:`S3Store`      s3fs (AWS, MinIO, SeaweedFS, ...)    ``FSStore("s3://...")``
:class:`FsspecStore`  any fsspec ``AsyncFileSystem``       ``FSStore``
==================  =====================================  ================================

:func:`from_url` and :func:`make_store` turn URLs, paths and mappings into stores.
"""

from azarr.storage._base import ByteRange, Store, validate_key
from azarr.storage._fsspec import FsspecStore
from azarr.storage._local import LocalStore
from azarr.storage._memory import MemoryStore
from azarr.storage._s3 import S3Store
from azarr.storage._url import StoreLike, from_url, make_store

__all__ = [
    "ByteRange",
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "S3Store",
    "Store",
    "StoreLike",
    "from_url",
    "make_store",
    "validate_key",
]
