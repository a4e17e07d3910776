"""azarr's synchronous facade: zarr-python 2's API, blocking, over the async core.

Every call runs the async API's coroutine on one process-wide I/O loop thread
(`run`), so all threads share each store's sessions and request budget, it
works where an event loop already runs (Jupyter, an ``async def``), ``timeout=``
and Ctrl-C cancel the work, and a forked child starts its own loop:

    import azarr.sync as zs
    z = zs.open_array("s3://bucket/x.zarr", mode="r", storage_options={"anon": True})
    block = z[0:10, :]
    g = zs.open_group("s3://bucket/g.zarr")
    print(g.tree())

``Array.async_array`` / ``AsyncArray.to_sync()`` cross between the two worlds.

Every public coroutine of the async classes has a blocking twin here with the same
parameters plus a keyword-only ``timeout`` (a test keeps them in step). Where zarr-python 2
has a property, so does the facade, even when it reads the store: ``z.nchunks_initialized``,
``z.nbytes_stored``, ``z.info`` (zarr 2's report, with bytes stored), ``g.info``; setters write
(``z.shape = ...`` resizes, ``z.fill_value = ...`` rewrites ``.zarray``). Listing methods
(``g.keys()``, ``g.arrays()``) list once and return iterators.

zarr-python 2's store classes are here too, as mappings over azarr's stores (`DirectoryStore`,
`ZipStore`, `MemoryStore`, ...; see ``azarr.sync.storage``), with its synchronizers and the
report types ``info`` and ``tree()`` return. Differences from zarr-python 2 that remain are
listed in ``docs/parity.md``.
"""

from azarr.core._reports import InfoReport, TreeReport
from azarr.errors import CopyError, MetadataError
from azarr.sync._api import (
    LazyLoader,
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
    get_dimension_names,
    getsize,
    group,
    group_dimensions,
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
    set_dimension_names,
    tree,
    zeros,
    zeros_like,
)
from azarr.sync._array import Array
from azarr.sync._attributes import Attributes
from azarr.sync._group import Group
from azarr.sync._loop import SyncError, SyncTimeoutError, get_loop, in_io_thread, iterate, run, shutdown
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
from azarr.sync._synchronizers import ProcessSynchronizer, ThreadSynchronizer

#: zarr-python 2's names of the report classes (``zarr.util.InfoReporter``, ``TreeViewer``).
InfoReporter = InfoReport
TreeViewer = TreeReport
#: zarr-python 2's deprecated name of `MemoryStore`.
DictStore = MemoryStore

__all__ = [
    "Array",
    "Attributes",
    "ConsolidatedMetadataStore",
    "CopyError",
    "DictStore",
    "DirectoryStore",
    "FSStore",
    "Group",
    "InfoReport",
    "InfoReporter",
    "KVStore",
    "LRUStoreCache",
    "LazyLoader",
    "LocalStore",
    "MemoryStore",
    "MetadataError",
    "N5FSStore",
    "N5Store",
    "NestedDirectoryStore",
    "ProcessSynchronizer",
    "Store",
    "TempStore",
    "ThreadSynchronizer",
    "TreeReport",
    "TreeViewer",
    "ZipStore",
    "SyncError",
    "SyncTimeoutError",
    "array",
    "consolidate_metadata",
    "contains_array",
    "contains_group",
    "copy",
    "copy_all",
    "copy_store",
    "create",
    "empty",
    "empty_like",
    "full",
    "full_like",
    "get_dimension_names",
    "get_loop",
    "getsize",
    "group",
    "group_dimensions",
    "in_io_thread",
    "iterate",
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
    "run",
    "save",
    "save_array",
    "save_group",
    "set_dimension_names",
    "shutdown",
    "tree",
    "zeros",
    "zeros_like",
]
