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
parameters plus a keyword-only ``timeout`` (a test keeps them in step). So what does I/O
is a method even where zarr-python 2 had a property: ``z.nchunks_initialized()``,
``z.nbytes_stored()``, ``z.info_complete()`` (``z.info`` reads no store and stays a
property). Listing methods (``g.keys()``, ``g.arrays()``) list once and return iterators.
"""

from azarr.sync._api import (
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

__all__ = [
    "Array",
    "Attributes",
    "Group",
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
