"""One Zarr group as xarray's data store: variables (lazy), attributes, dimensions; and writes.

The layout is the one xarray's ``zarr`` engine reads and writes
(``xarray/backends/zarr.py``): each array is a variable whose dimension names are
its ``_ARRAY_DIMENSIONS`` attribute (or NCZarr's ``dimrefs``) in Zarr format 2, its
``dimension_names`` in format 3. In format 2 the array's ``fill_value`` is given to
xarray as the ``_FillValue`` attribute (``use_zarr_fill_value_as_mask``, xarray's
default for format 2); in format 3 it is ``encoding["fill_value"]`` and only a
``_FillValue`` attribute masks. xarray's own CF machinery then masks and decodes
``scale_factor``, time ``units``... Nothing here decodes data.

`AzarrDataStore` is also what ``azarr.xarray.to_zarr`` writes through, as xarray
writes through its ``ZarrStore``: ``store()`` (called by xarray's ``dump_to_store``)
checks and encodes every variable and records what to create, resize and write
(``azarr.xarray._plan``); `commit` then writes the metadata concurrently.
Everything the store knows about existing arrays was read when it was opened, so
planning does no I/O and a rejected write writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np
from xarray import Variable
from xarray.backends.common import AbstractWritableDataStore, BackendArray
from xarray.coding.strings import create_vlen_dtype
from xarray.core import indexing
from xarray.core.utils import FrozenDict

from azarr.api.dimensions import get_dimension_names
from azarr.core import AsyncArray, AsyncGroup
from azarr.errors import MetadataError
from azarr.sync import run
from azarr.xarray._compat import DIMENSION_KEY, FillValueCoder, encode_zarr_attr_value, encode_zarr_variable
from azarr.xarray._encoding import read_encoding


class AzarrBackendArray(BackendArray):
    """One Zarr array as xarray's lazily indexed backend array.

    Indexing support is ``VECTORIZED`` (azarr reads basic, orthogonal and
    coordinate selections natively). ``__getitem__`` runs on azarr's I/O loop
    (`azarr.sync.run`); ``async_getitem`` awaits on the caller's loop, so
    ``await ds.load_async()`` fetches every variable at once under the store budget.
    Non-native byte orders are swapped here (the dtype reported is native), so
    xarray wraps nothing without an async path around this array.
    """

    __slots__ = ("_array", "_prefetched", "dtype", "shape")

    def __init__(self, array: AsyncArray) -> None:
        self._array = array
        self.shape = array.shape
        self.dtype = _variable_dtype(array)
        #: The whole array, read ahead by `prefetch` (dimension coordinates, which
        #: xarray loads at open for its indexes); handed out once.
        self._prefetched: np.ndarray[Any, Any] | None = None

    async def prefetch(self) -> None:
        """Read the whole array now, for the first full read xarray makes."""
        self._prefetched = self._as_array(await self._array.get_basic_selection(Ellipsis))

    def _take_prefetched(self, key: indexing.ExplicitIndexer) -> Any:
        if self._prefetched is None or not isinstance(key, indexing.BasicIndexer):
            return None
        if any(k != slice(None) for k in key.tuple):
            return None
        value, self._prefetched = self._prefetched, None
        return value

    def _method(self, key: indexing.ExplicitIndexer) -> Any:
        if isinstance(key, indexing.VectorizedIndexer):
            return self._array.get_coordinate_selection
        if isinstance(key, indexing.OuterIndexer):
            return self._array.get_orthogonal_selection
        return self._array.get_basic_selection

    def _as_array(self, value: Any) -> Any:
        value = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=self.dtype)
        if value.dtype != self.dtype and value.dtype.kind != "O":
            value = value.astype(self.dtype)  # byte order swapped to native
        return value

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        prefetched = self._take_prefetched(key)
        if prefetched is not None:
            return prefetched
        method = self._method(key)

        def read(selection: tuple[Any, ...]) -> Any:
            return run(method(selection))

        value = indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.VECTORIZED, read)
        return self._as_array(value)

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> Any:
        prefetched = self._take_prefetched(key)
        if prefetched is not None:
            return prefetched
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
    if not array.dtype.isnative:
        return array.dtype.newbyteorder("=")
    return array.dtype


def _hidden(name: str, zarr_format: int) -> bool:
    """Attributes xarray's engine hides: for Zarr v2 dimension names and NCZarr's ``_nc*`` keys
    (a v3 array's dimension names are metadata; its attributes are shown as they are)."""
    return zarr_format == 2 and (name == DIMENSION_KEY or name.lower().startswith("_nc"))


async def array_dimensions(array: AsyncArray, *, try_nczarr: bool = True) -> tuple[str, ...]:
    """The dimension names of ``array``: a Zarr v3 array's ``dimension_names``; for Zarr v2
    ``_ARRAY_DIMENSIONS``, else NCZarr's ``dimrefs``.

    Raises
    ------
    MetadataError
        Neither names one dimension per axis (the message names the array).
    """
    try:
        dims = await get_dimension_names(array, try_nczarr=try_nczarr)
    except MetadataError as exc:
        raise MetadataError(f"array {array.name!r} in {array.store.url}: {exc}") from exc
    if dims is None and array.zarr_format == 3:
        raise MetadataError(
            f"array {array.name!r} in {array.store.url} has no dimension_names (Zarr v3): it was not "
            "written by xarray; open it with azarr.open_array instead"
        )
    if dims is None:
        raise MetadataError(
            f"array {array.name!r} in {array.store.url} has no valid {DIMENSION_KEY!r} attribute "
            f"(got {array.attrs.get(DIMENSION_KEY)!r} for a {array.ndim}-d array): it was not written by "
            "xarray; open it with azarr.open_array instead"
        )
    return dims


def open_variable(
    array: AsyncArray,
    dims: tuple[str, ...],
    *,
    use_zarr_fill_value_as_mask: bool | None = None,
    backend: AzarrBackendArray | None = None,
) -> Variable:
    """``array`` as a lazy, still CF-encoded xarray Variable (dims, attributes, encoding)."""
    attributes = {k: v for k, v in array.attrs.items() if not _hidden(k, array.zarr_format)}
    encoding = read_encoding(array, dims)
    if use_zarr_fill_value_as_mask is None:
        use_zarr_fill_value_as_mask = array.zarr_format == 2
    if use_zarr_fill_value_as_mask:
        if array.fill_value is not None:
            attributes["_FillValue"] = array.fill_value
    else:
        if array.zarr_format == 3:
            # Kept so a round trip writes the same fill_value (xarray GH 10269).
            encoding["fill_value"] = array.fill_value
        if "_FillValue" in attributes:
            attributes["_FillValue"] = FillValueCoder.decode(attributes["_FillValue"], array.dtype)
    data = indexing.LazilyIndexedArray(backend or AzarrBackendArray(array))
    return Variable(dims, data, attributes, encoding)


class AzarrDataStore(AbstractWritableDataStore):
    """The arrays directly in one group, as xarray's data store (read, and written by ``to_zarr``).

    Open one with `open` (from an open group) or `open_group` (from a store);
    ``xr.open_dataset(engine="azarr")`` and ``azarr.xarray.to_zarr`` do.

    Parameters
    ----------
    group : AsyncGroup
        The group (opened from consolidated metadata when there is some).
    arrays : mapping of str to AsyncArray
        Its arrays by name.
    dims : mapping of str to tuple of str
        Each array's dimension names.
    mode : {"r", "r+", "a", "a-", "w", "w-"}
        As xarray's ``ZarrStore``: what writes may do.
    use_zarr_fill_value_as_mask : bool, optional
        The arrays' ``fill_value`` is the variables' ``_FillValue`` (default for Zarr format 2).
    **write_options
        ``consolidate_on_close``, ``append_dim``, ``write_region``, ``safe_chunks``,
        ``align_chunks``, ``write_empty`` as xarray's ``ZarrStore`` takes them.
    """

    def __init__(
        self,
        group: AsyncGroup,
        arrays: Mapping[str, AsyncArray],
        dims: Mapping[str, tuple[str, ...]],
        *,
        mode: str = "r",
        use_zarr_fill_value_as_mask: bool | None = None,
        consolidate_on_close: bool = False,
        append_dim: Any = None,
        write_region: Any = None,
        safe_chunks: bool = True,
        align_chunks: bool = False,
        write_empty: bool | None = None,
    ) -> None:
        from azarr.xarray._plan import GroupPlan

        self.group = group
        self.arrays = dict(arrays)
        self.dims = dict(dims)
        self.mode = mode
        self.zarr_format = group.zarr_format
        # xarray's default: the Zarr fill_value masks in format 2, not in format 3.
        self.use_zarr_fill_value_as_mask = (
            self.zarr_format == 2 if use_zarr_fill_value_as_mask is None else use_zarr_fill_value_as_mask
        )
        self.consolidate_on_close = consolidate_on_close
        self.append_dim = append_dim
        self.write_region = write_region
        # Aligning rechunks onto the Zarr grid, so there is nothing left to refuse (as xarray).
        self.safe_chunks = safe_chunks and not align_chunks
        self.align_chunks = align_chunks
        self.write_empty = write_empty
        self.plan = GroupPlan()
        self._backend_arrays: dict[str, AzarrBackendArray] = {}
        #: Arrays this store created (with the ``write_empty_chunks`` they were asked for).
        self.created_now: set[str] = set()

    def write_options(self) -> dict[str, Any]:
        """What `open_async` takes to open another group of the same write (a DataTree's nodes)."""
        return {
            "mode": self.mode,
            "consolidate_on_close": self.consolidate_on_close,
            "append_dim": self.append_dim,
            "write_region": self.write_region,
            "safe_chunks": self.safe_chunks,
            "align_chunks": self.align_chunks,
            "write_empty": self.write_empty,
            "use_zarr_fill_value_as_mask": self.use_zarr_fill_value_as_mask,
        }

    # ---------------------------------------------------------------- opening
    @classmethod
    async def open_async(cls, group: AsyncGroup, **options: Any) -> AzarrDataStore:
        """List ``group``'s arrays and their dimension names (one concurrent wave).

        In mode ``"w"`` the group was just replaced: nothing to list.
        """
        if options.get("mode") == "w":
            return cls(group, {}, {}, **options)
        arrays = {name: node async for name, node in group.arrays()}
        try_nczarr = options.get("mode", "r") == "r"
        names = list(arrays)
        dims = await asyncio.gather(*(array_dimensions(arrays[n], try_nczarr=try_nczarr) for n in names))
        return cls(group, arrays, dict(zip(names, dims, strict=True)), **options)

    @classmethod
    def open(cls, group: AsyncGroup, **options: Any) -> AzarrDataStore:
        """`open_async` from sync code (on azarr's I/O loop)."""
        return run(cls.open_async(group, **options))

    @classmethod
    def open_group(
        cls, store: Any, mode: str = "r", group: str | None = None, **options: Any
    ) -> AzarrDataStore:
        """Open the group at ``group`` of ``store`` for reading (``"r"``) or writing (xarray's modes).

        The counterpart of xarray's ``ZarrStore.open_group``; ``consolidated=`` and
        ``storage_options=`` are accepted as there.
        """
        from azarr.xarray._target import open_target

        return run(open_target(store, mode=mode, group=group, **options))

    # ---------------------------------------------------------------- reading
    def open_store_variable(self, name: str) -> Variable:
        return open_variable(
            self.arrays[name],
            self.dims[name],
            use_zarr_fill_value_as_mask=self.use_zarr_fill_value_as_mask,
            backend=self._backend_arrays.pop(name, None),
        )

    def get_variables(self) -> FrozenDict[str, Variable]:
        return FrozenDict((name, self.open_store_variable(name)) for name in self.arrays)

    def get_attrs(self) -> FrozenDict[str, Any]:
        return FrozenDict((k, v) for k, v in self.group.attrs.items() if not k.lower().startswith("_nc"))

    def get_dimensions(self) -> FrozenDict[str, int]:
        """Dimension sizes (raises ValueError, as xarray, when two arrays disagree on one)."""
        sizes: dict[str, int] = {}
        for name, array in self.arrays.items():
            for dim, size in zip(self.dims[name], array.shape, strict=True):
                if dim in sizes and sizes[dim] != size:
                    raise ValueError(
                        f"found conflicting lengths for dimension {dim} ({size} != {sizes[dim]}) "
                        f"in group {self.group.name!r} of {self.group.store.url}"
                    )
                sizes[dim] = size
        return FrozenDict(sizes)

    def get_encoding(self) -> dict[str, Any]:
        return {}

    async def prefetch_indexes(self) -> None:
        """Read every dimension coordinate now, concurrently (xarray loads them at open for its indexes)."""
        wanted = [name for name, dims in self.dims.items() if dims == (name,)]
        for name in wanted:
            self._backend_arrays[name] = AzarrBackendArray(self.arrays[name])
        await asyncio.gather(*(self._backend_arrays[name].prefetch() for name in wanted))

    # ---------------------------------------------------------------- writing
    def encode_variable(self, variable: Variable, name: Any = None) -> Variable:
        return encode_zarr_variable(variable, name=name, zarr_format=self.zarr_format)

    def encode_attribute(self, a: Any) -> Any:
        return encode_zarr_attr_value(a)

    def set_dimensions(self, variables: Any, unlimited_dims: Any = None) -> None:
        if unlimited_dims is not None:
            raise NotImplementedError("Zarr backend doesn't know how to handle unlimited dimensions")

    def set_attributes(self, attributes: Any) -> None:
        self.plan.attrs = dict(attributes)

    def store(
        self,
        variables: Any,
        attributes: Any,
        check_encoding_set: Any = frozenset(),
        writer: Any = None,
        unlimited_dims: Any = None,
    ) -> None:
        """Check and encode ``variables`` and record what to write (xarray's ``ZarrStore.store``).

        With azarr's writer (``azarr.xarray.to_zarr``) nothing is written here: the
        caller commits the metadata and then the data. With any other writer
        (``Dataset.dump_to_store``), the metadata is committed now and the writer
        receives arrays it can assign to.
        """
        from azarr.xarray._plan import plan_store

        plan_store(self, variables, attributes, check_encoding_set, writer, unlimited_dims)

    def sync(self) -> None:
        """Nothing buffered: writes happen when ``to_zarr`` runs them."""

    def close(self) -> None:
        """Nothing to release: connections belong to the store, shared process-wide."""
