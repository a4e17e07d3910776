"""Selections -> per-chunk projections: pure, synchronous and vectorized.

Each indexer takes ``(selection, shape, chunks)`` and yields `ChunkProjection`
tuples, one per chunk the selection touches (each chunk at most once). The array
layer reads with ``out[p.out_selection] = chunk[p.chunk_selection]`` into an output of
``indexer.shape`` (then reshapes to ``indexer.result_shape``), and writes with
``chunk[p.chunk_selection] = value[p.out_selection]`` from a value broadcast to
``indexer.shape``; chunks with ``p.is_complete_chunk`` need no read-modify-write.

| azarr | selection | zarr-python 2.18 access |
| --- | --- | --- |
| BasicIndexer | ints, slices (any step), ... | ``arr[...]``, get_basic_selection |
| OrthogonalIndexer | + 1-D int / bool arrays | ``arr.oindex[...]`` |
| CoordinateIndexer | broadcast int arrays | ``arr.vindex[...]`` (coordinates) |
| MaskIndexer | bool array of arr's shape | ``arr.vindex[mask]`` |
| BlockIndexer | ints, step-1 slices of blocks | ``arr.blocks[...]`` |

Routing of ``arr[selection]`` as in zarr-python 2.18:

    fields, sel = pop_fields(selection)
    if is_pure_fancy_indexing(sel, ndim):        CoordinateIndexer / MaskIndexer (vindex)
    elif is_pure_orthogonal_indexing(sel, ndim): OrthogonalIndexer
    else:                                        BasicIndexer
"""

from __future__ import annotations

from azarr.indexing._basic import BasicIndexer
from azarr.indexing._block import BlockIndexer
from azarr.indexing._coordinate import CoordinateIndexer, MaskIndexer
from azarr.indexing._errors import (
    BoundsCheckError,
    SelectionError,
    SelectionTypeError,
    SelectionValueError,
    VindexInvalidSelectionError,
)
from azarr.indexing._fields import check_fields, check_no_multi_fields, pop_fields
from azarr.indexing._normalize import (
    ensure_tuple,
    expand_selection,
    is_basic_selection,
    is_bool_array,
    is_coordinate_selection,
    is_integer,
    is_integer_array,
    is_integer_list,
    is_mask_selection,
    is_pure_fancy_indexing,
    is_pure_orthogonal_indexing,
    normalize_integer_selection,
    replace_lists,
)
from azarr.indexing._orthogonal import OrthogonalIndexer
from azarr.indexing._parse import SelectionSyntaxError, parse_selection
from azarr.indexing._projection import ChunkProjection
from azarr.indexing._types import (
    BasicSelection,
    BlockSelection,
    CoordinateSelection,
    Fields,
    MaskSelection,
    OrthogonalSelection,
    Selection,
)

Indexer = BasicIndexer | OrthogonalIndexer | CoordinateIndexer | MaskIndexer | BlockIndexer
"""Any of the indexers (they share ``shape``, ``result_shape``, ``drop_axes``, ``nchunks``, iteration)."""

__all__ = [
    "BasicSelection",
    "BlockSelection",
    "CoordinateSelection",
    "Fields",
    "MaskSelection",
    "OrthogonalSelection",
    "Selection",
    "SelectionSyntaxError",
    "parse_selection",
    "BasicIndexer",
    "BlockIndexer",
    "BoundsCheckError",
    "ChunkProjection",
    "CoordinateIndexer",
    "Indexer",
    "MaskIndexer",
    "OrthogonalIndexer",
    "SelectionError",
    "SelectionTypeError",
    "SelectionValueError",
    "VindexInvalidSelectionError",
    "check_fields",
    "check_no_multi_fields",
    "ensure_tuple",
    "expand_selection",
    "is_basic_selection",
    "is_bool_array",
    "is_coordinate_selection",
    "is_integer",
    "is_integer_array",
    "is_integer_list",
    "is_mask_selection",
    "is_pure_fancy_indexing",
    "is_pure_orthogonal_indexing",
    "normalize_integer_selection",
    "pop_fields",
    "replace_lists",
]
