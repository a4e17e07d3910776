"""azarr: an asyncio-native client for Zarr v2 data on cloud object stores.

Layout (each step owned by one package):

    storage    bytes by key: Memory, Local, S3, GCS, Azure, HTTP, Zip, Mapping, LRU cache, kerchunk
               references; one async protocol
    scheduler  one I/O budget per store, retries, timeouts, fan-out, progress, stats
    codecs     bytes <-> chunk arrays through numcodecs, in a bounded thread pool
    metadata   the Zarr v2 JSON documents (.zarray, .zgroup, .zattrs, .zmetadata)
    indexing   selections -> per-chunk projections
    core       AsyncArray / AsyncGroup: the async node API
    api        create / open / consolidate functions (zarr-python 2 names)

Everything a user needs is re-exported here:

    import azarr
    arr = await azarr.open_array("s3://bucket/x.zarr", mode="r", storage_options={"anon": True})
    block = await arr.get_orthogonal_selection((slice(0, 10), [3, 1, 4]))
"""

from azarr import config, errors, scheduler, storage
from azarr.api import (
    ConsolidatedStore,
    CopyResult,
    N5Store,
    SplitStore,
    array,
    consolidate_metadata,
    contains_array,
    contains_group,
    copy,
    copy_all,
    copy_store,
    create,
    empty,
    empty_like,
    full,
    full_like,
    getsize,
    group,
    load,
    ones,
    ones_like,
    open,
    open_array,
    open_consolidated,
    open_group,
    open_like,
    open_zarr2,
    rename,
    rmdir,
    save,
    save_array,
    save_group,
    tree,
    zeros,
    zeros_like,
)
from azarr.core import AsyncArray, AsyncGroup, Attributes
from azarr.storage import (
    AzureBlobStore,
    FsspecStore,
    GCSStore,
    HTTPStore,
    IcechunkStore,
    LocalStore,
    LRUStoreCache,
    MappingStore,
    MemoryStore,
    ReferenceStore,
    S3Store,
    Store,
    ZipStore,
    from_url,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncArray",
    "AsyncGroup",
    "Attributes",
    "AzureBlobStore",
    "ConsolidatedStore",
    "CopyResult",
    "N5Store",
    "SplitStore",
    "FsspecStore",
    "GCSStore",
    "HTTPStore",
    "IcechunkStore",
    "LRUStoreCache",
    "LocalStore",
    "MappingStore",
    "MemoryStore",
    "ReferenceStore",
    "S3Store",
    "Store",
    "ZipStore",
    "__version__",
    "array",
    "config",
    "consolidate_metadata",
    "contains_array",
    "contains_group",
    "copy",
    "copy_all",
    "copy_store",
    "create",
    "empty",
    "empty_like",
    "errors",
    "from_url",
    "full",
    "full_like",
    "getsize",
    "group",
    "load",
    "ones",
    "ones_like",
    "open",
    "open_array",
    "open_consolidated",
    "open_group",
    "open_like",
    "open_zarr2",
    "rename",
    "rmdir",
    "save",
    "save_array",
    "save_group",
    "scheduler",
    "storage",
    "tree",
    "zeros",
    "zeros_like",
]
