"""Stores: where a Zarr hierarchy's keys and bytes live.

Every store implements the async `Store` protocol (``get``/``set``/``delete``/
``exists``/``getsize``/``list_prefix``/``list_dir``/``close``) with the same key rules
and error types, so everything above this package is storage-agnostic.

| Store | Backed by | zarr-python 2 equivalent |
| --- | --- | --- |
| `MemoryStore` | a ``dict`` | ``MemoryStore`` / ``KVStore`` |
| `LocalStore` | a directory, atomic writes | ``DirectoryStore`` |
| `S3Store` | aiohttp + SigV4; s3fs for listings | ``FSStore("s3://...")`` |
| `GCSStore` | gcsfs (GCS, fake-gcs-server) | ``FSStore("gs://...")`` |
| `HTTPStore` | aiohttp, read-only | ``FSStore("https://...")`` |
| `AzureBlobStore` | Azure SDK aio client (Azurite) | ``ABSStore`` |
| `ReferenceStore` | kerchunk references, read-only | ``FSStore("reference://...")`` |
| `IcechunkStore` | an Icechunk snapshot, read-only | icechunk's ``IcechunkStore`` (zarr 3) |
| `FsspecStore` | any fsspec ``AsyncFileSystem`` | ``FSStore`` |
| `SyncFsspecStore` | a synchronous fsspec filesystem | ``FSStore("simplecache::s3://...")`` |
| `ZipStore` | one zip file, write-once | ``ZipStore`` |
| `MappingStore` | any ``MutableMapping`` (dbm, ...) | ``DBMStore``, ``LMDBStore``, ``KVStore`` |
| `LRUStoreCache` | an in-memory LRU over a store | ``LRUStoreCache`` |

`from_url` and `make_store` turn URLs, paths and mappings into stores:
a URL resolves to a `StoreSpec` (frozen configuration: what pickles, and
what budgets and counters are kept under) through the driver registered for its
scheme (`register_store`, or the ``azarr.stores`` entry-point group), and
`open_store` gives the live store of a spec.
"""

from azarr.storage._azure import AzureBlobStore
from azarr.storage._base import ByteRange, Generation, Store, validate_key
from azarr.storage._cache import LRUStoreCache
from azarr.storage._fsspec import FsspecStore
from azarr.storage._fsspec_sync import SyncFsspecStore
from azarr.storage._gcs import GCSStore
from azarr.storage._http import HTTPStore
from azarr.storage._icechunk import IcechunkStore
from azarr.storage._local import LocalStore
from azarr.storage._mapping import MappingStore
from azarr.storage._memory import MemoryStore
from azarr.storage._nested import NestedDirectoryStore
from azarr.storage._options import GCSOptions, HTTPOptions, S3Options
from azarr.storage._reference import ReferenceStore
from azarr.storage._registry import (
    ENTRY_POINT_GROUP,
    StoreDriver,
    driver_for,
    register_store,
    registered_schemes,
)
from azarr.storage._s3 import S3Store
from azarr.storage._spec import StoreSpec, open_store
from azarr.storage._temp import TempStore
from azarr.storage._url import StoreLike, from_url, make_store
from azarr.storage._wrapper import WrapperStore
from azarr.storage._zip import UnsafeMemberWarning, ZipStore

__all__ = [
    "ENTRY_POINT_GROUP",
    "ByteRange",
    "Generation",
    "StoreDriver",
    "StoreSpec",
    "WrapperStore",
    "driver_for",
    "open_store",
    "register_store",
    "registered_schemes",
    "AzureBlobStore",
    "FsspecStore",
    "GCSOptions",
    "HTTPOptions",
    "S3Options",
    "GCSStore",
    "HTTPStore",
    "IcechunkStore",
    "LRUStoreCache",
    "LocalStore",
    "NestedDirectoryStore",
    "TempStore",
    "MappingStore",
    "MemoryStore",
    "ReferenceStore",
    "S3Store",
    "Store",
    "StoreLike",
    "SyncFsspecStore",
    "UnsafeMemberWarning",
    "ZipStore",
    "from_url",
    "make_store",
    "validate_key",
]
