"""What xarray reads from one Zarr v2 group: variables (lazy), attributes, dimensions.

The layout is the one xarray's ``zarr`` engine reads and writes for Zarr v2
(``xarray/backends/zarr.py``): each array is a variable whose dimension names are
its ``_ARRAY_DIMENSIONS`` attribute; the array's ``fill_value`` is given to xarray
as the ``_FillValue`` attribute, so xarray's own CF machinery masks it (and decodes
``scale_factor``, ``add_offset``, time ``units``...). Nothing here decodes data.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from xarray import Variable
from xarray.backends.common import AbstractDataStore, BackendArray
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing
from xarray.core.utils import FrozenDict

from azarr.core import AsyncArray, AsyncGroup
from azarr.errors import MetadataError
from azarr.sync import run

#: The attribute naming an array's dimensions (xarray's Zarr v2 convention).
DIMENSION_KEY = "_ARRAY_DIMENSIONS"


class AzarrBackendArray(BackendArray):
    """One Zarr array as xarray's lazily indexed backend array.

    Indexing support is ``VECTORIZED`` (azarr reads basic, orthogonal and
    coordinate selections natively). ``__getitem__`` runs on azarr's I/O loop
    (`azarr.sync.run`); ``async_getitem`` awaits on the caller's loop, so
    ``await ds.load_async()`` fetches every variable at once under the store budget.
    """

    __slots__ = ("_array", "dtype", "shape")

    def __init__(self, array: AsyncArray) -> None:
        self._array = array
        self.shape = array.shape
        self.dtype = _variable_dtype(array)

    def _method(self, key: indexing.ExplicitIndexer) -> Any:
        if isinstance(key, indexing.VectorizedIndexer):
            return self._array.get_coordinate_selection
        if isinstance(key, indexing.OuterIndexer):
            return self._array.get_orthogonal_selection
        return self._array.get_basic_selection

    def _as_array(self, value: Any) -> Any:
        return value if isinstance(value, np.ndarray) else np.asarray(value, dtype=self.dtype)

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        method = self._method(key)

        def read(selection: tuple[Any, ...]) -> Any:
            return run(method(selection))

        value = indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.VECTORIZED, read)
        return self._as_array(value)

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        value = await indexing.async_explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.VECTORIZED, self._method(key)
        )
        return self._as_array(value)


def _variable_dtype(array: AsyncArray) -> np.dtype[Any]:
    """Object arrays of UTF-8 strings are xarray's vlen ``str`` dtype (as its zarr engine, GH 7328)."""
    filters = array.filters or []
    if getattr(array.metadata, "string_kind", None) == "string":  # Zarr v3's string type
        return create_vlen_dtype(str)  # type: ignore[no-any-return]
    if array.dtype.kind == "O" and any(getattr(f, "codec_id", None) == "vlen-utf8" for f in filters):
        return create_vlen_dtype(str)  # type: ignore[no-any-return]
    return array.dtype


def array_dimensions(array: AsyncArray) -> list[str]:
    """The dimension names of ``array``: a Zarr v3 array's ``dimension_names`` (as xarray
    writes them there), else its ``_ARRAY_DIMENSIONS`` attribute (Zarr v2).

    Raises
    ------
    MetadataError
        Neither names one dimension per axis (names the array).
    """
    names = array.dimension_names
    if names is not None and all(isinstance(d, str) for d in names):
        return list(names)  # type: ignore[arg-type]
    dims = array.attrs.get(DIMENSION_KEY)
    if not isinstance(dims, list) or len(dims) != array.ndim or not all(isinstance(d, str) for d in dims):
        raise MetadataError(
            f"array {array.name!r} in {array.store.url} has no valid {DIMENSION_KEY!r} attribute "
            f"(got {dims!r} for a {array.ndim}-d array): it was not written by xarray; "
            "open it with azarr.open_array instead"
        )
    return dims


def open_variable(array: AsyncArray) -> Variable:
    """``array`` as a lazy, still CF-encoded xarray Variable (dims, attributes, encoding)."""
    dims = array_dimensions(array)
    attributes = {k: v for k, v in array.attrs.items() if k != DIMENSION_KEY}
    encoding: dict[str, Any] = {
        "chunks": array.chunks,
        "preferred_chunks": dict(zip(dims, array.chunks, strict=True)),
        "filters": array.filters,
    }
    if array.zarr_format == 3:
        encoding["shards"] = array.shards  # xarray's zarr engine: None unless sharded
        # xarray's zarr engine keeps a v3 array's fill value apart from the CF _FillValue
        # (its own attribute; use_zarr_fill_value_as_mask is off for v3).
        encoding["compressors"] = array.compressors
    else:
        if array.fill_value is not None:
            attributes["_FillValue"] = array.fill_value
        encoding["compressor"] = array.compressor
    data = indexing.LazilyIndexedArray(AzarrBackendArray(array))
    return Variable(dims, data, attributes, encoding)


class AzarrDataStore(AbstractDataStore):
    """The arrays directly in one group, as xarray's read-only data store.

    Parameters
    ----------
    group : AsyncGroup
        The group (opened from consolidated metadata when there is some).
    arrays : mapping of str to AsyncArray
        Its arrays by name (listed once by the caller).
    """

    def __init__(self, group: AsyncGroup, arrays: Mapping[str, AsyncArray]) -> None:
        self.group = group
        self.arrays = dict(arrays)

    @classmethod
    def open(cls, group: AsyncGroup) -> AzarrDataStore:
        """List ``group``'s arrays (one listing, documents read concurrently) on the I/O loop."""

        async def arrays() -> dict[str, AsyncArray]:
            return {name: node async for name, node in group.arrays()}

        return cls(group, run(arrays()))

    def get_variables(self) -> FrozenDict[str, Variable]:
        return FrozenDict((name, open_variable(array)) for name, array in self.arrays.items())

    def get_attrs(self) -> FrozenDict[str, Any]:
        return FrozenDict(self.group.attrs.asdict())

    def get_dimensions(self) -> FrozenDict[str, int]:
        """Dimension sizes (raises ValueError when two arrays disagree on one)."""
        sizes: dict[str, int] = {}
        for name, array in self.arrays.items():
            for dim, size in zip(array_dimensions(array), array.shape, strict=True):
                if sizes.setdefault(dim, size) != size:
                    raise ValueError(
                        f"array {name!r} has size {size} on dimension {dim!r}, "
                        f"another array in {self.group.name!r} has {sizes[dim]}"
                    )
        return FrozenDict(sizes)

    def get_encoding(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release: connections belong to the store, shared process-wide."""
