"""Top-level functions: create, open and consolidate arrays and groups."""

from azarr.api.chunk_store import SplitStore
from azarr.api.consolidated import ConsolidatedStore, consolidate_metadata, open_consolidated
from azarr.api.convenience import load, open_like, save, save_array, save_group, tree
from azarr.api.copy import CopyResult, copy_store
from azarr.api.copy_nodes import copy, copy_all
from azarr.api.creation import (
    array,
    create,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from azarr.api.dimensions import get_dimension_names, group_dimensions, set_dimension_names
from azarr.api.n5 import N5Store
from azarr.api.opening import group, open, open_array, open_group
from azarr.api.storage_ops import contains_array, contains_group, getsize, rename, rmdir
from azarr.api.tensorstore_open import open_zarr2

__all__ = [
    "ConsolidatedStore",
    "CopyResult",
    "N5Store",
    "SplitStore",
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
    "getsize",
    "group",
    "group_dimensions",
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
    "set_dimension_names",
    "tree",
    "zeros",
    "zeros_like",
]
