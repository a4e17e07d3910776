"""``azarr.sync.Array``: zarr-python 2's ``zarr.Array``, blocking, over an `AsyncArray`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numcodecs.abc import Codec

from azarr import api
from azarr.core import AsyncArray
from azarr.core._array_ops import RecheckPolicy
from azarr.core._formats import ZarrFormat
from azarr.core._paths import node_key
from azarr.core._reports import InfoReport, array_info_items, typestr
from azarr.indexing import (
    BasicSelection,
    BlockSelection,
    CoordinateSelection,
    MaskSelection,
    OrthogonalSelection,
    Selection,
)
from azarr.metadata import ZARRAY, AnyArrayMetadata
from azarr.scheduler import ChunkCache, ProgressCallback
from azarr.sync._accessors import BlockIndex, OIndex, VIndex
from azarr.sync._loop import iterate, run
from azarr.sync._mirror import Forward, MetadataForward, mirror_method, mirrors, to_async
from azarr.sync._node import SyncNode
from azarr.sync._stores import Store, store_view_types

Fields = str | list[str] | None


class Array(SyncNode):
    """A Zarr array (v2 or v3) with zarr-python 2's synchronous API.

    A thin layer: every method runs the same-named coroutine of the wrapped
    `AsyncArray` on azarr's I/O loop thread (`azarr.sync.run`)
    and blocks until it is done, so requests share the store's one budget with
    every other thread. Get one from `azarr.sync.open_array` and friends,
    ``async_array.to_sync()``, or zarr-python 2's constructor ``Array(store, path=...)``;
    ``array.async_array`` goes back.

    What zarr-python 2 offers as properties are properties here too, including those
    that read the store (`nchunks_initialized`, `nbytes_stored`, `info`); ``z.shape = ...``
    resizes and ``z.fill_value = ...`` rewrites ``.zarray``, as in zarr-python 2.

    Parameters
    ----------
    store : AsyncArray, or Store, str, os.PathLike or MutableMapping
        The array to drive, or (zarr-python 2's constructor) the store of an existing array,
        opened read/write unless ``read_only``.
    path : str, optional
        The array's path within ``store``.
    read_only : bool
        Refuse writes.
    chunk_store : Store, str or MutableMapping, optional
        Where the chunks are, when apart from the metadata.
    synchronizer : optional
        zarr-python 2's synchronizer (`ThreadSynchronizer`, `ProcessSynchronizer`): kept and
        reported (``synchronizer``, ``info``); its lock is held around writes where the store
        has no conditional writes (see `azarr.sync.ThreadSynchronizer`).
    cache_metadata : bool
        False rereads ``.zarray`` before every operation and property read (see
        `azarr.open_array`).
    cache_attrs : bool
        False rereads ``.zattrs`` before every read of `attrs`.
    partial_decompress : bool
        Read only the Blosc blocks a selection needs (see `azarr.open_array`).
    write_empty_chunks : bool
        Store chunks equal to the fill value (default True, as zarr-python 2).
    zarr_version : {None, 2, 3}
        Open only an array of that format (zarr-python 2's name of ``zarr_format``).
    timeout : float, optional
        Default ``timeout`` (seconds) of every call, including ``arr[...]``; None
        waits without limit. A call that times out is cancelled with its requests.

    Raises
    ------
    ArrayNotFoundError
        (a ``ValueError``) no array at ``path``; `ContainsGroupError` when a group is there.

    Examples
    --------
    >>> import azarr.sync as zs
    >>> z = zs.zeros((4, 4), chunks=(2, 2))
    >>> z[0, :] = 1
    >>> z[:2].sum()
    4.0
    """

    _async: AsyncArray

    def __init__(
        self,
        store: Any,
        path: str | None = None,
        read_only: bool = False,
        chunk_store: Any = None,
        synchronizer: Any = None,
        cache_metadata: bool = True,
        cache_attrs: bool = True,
        partial_decompress: bool = False,
        write_empty_chunks: bool = True,
        zarr_version: int | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        super().__init__(timeout)
        if isinstance(store, AsyncArray):
            self._async = store
            return
        opened = api.open_array(
            to_async(store),
            mode="r" if read_only else "r+",
            path=path,
            chunk_store=to_async(chunk_store),
            synchronizer=synchronizer,
            cache_metadata=cache_metadata,
            cache_attrs=cache_attrs,
            partial_decompress=bool(partial_decompress),
            write_empty_chunks=write_empty_chunks,
            zarr_version=zarr_version,
        )
        self._async = run(opened, timeout)
        self._keep_views(store, chunk_store)

    def _write(self, coro: Any, timeout: float | None) -> Any:
        """Run a write, under the synchronizer's lock when the store cannot make writes conditional.

        See `azarr.sync.ThreadSynchronizer`: where the store has generations, azarr's
        read-modify-writes are conditional and need no lock.
        """
        synchronizer = self._async.synchronizer
        if synchronizer is None or self._async.store.supports_conditional_writes:
            return self._run(coro, timeout)
        with synchronizer[node_key(self._async.path, ZARRAY)]:
            return self._run(coro, timeout)

    @property
    def async_array(self) -> AsyncArray:
        """The `AsyncArray` this wraps (same store, budget and metadata)."""
        return self._async

    # ---------------------------------------------------------------- properties (no I/O)
    path: Forward[str] = Forward(AsyncArray, "path")
    name: Forward[str | None] = Forward(AsyncArray, "name")
    basename: Forward[str | None] = Forward(AsyncArray, "basename")
    metadata: MetadataForward[AnyArrayMetadata] = MetadataForward(AsyncArray, "metadata")
    chunks: MetadataForward[tuple[int, ...]] = MetadataForward(AsyncArray, "chunks")
    shards: MetadataForward[tuple[int, ...] | None] = MetadataForward(AsyncArray, "shards")
    dtype: MetadataForward[np.dtype[Any]] = MetadataForward(AsyncArray, "dtype")
    order: MetadataForward[str] = MetadataForward(AsyncArray, "order")
    dimension_separator: MetadataForward[str] = MetadataForward(AsyncArray, "dimension_separator")
    compressor: MetadataForward[Codec | None] = MetadataForward(AsyncArray, "compressor")
    filters: MetadataForward[list[Codec] | None] = MetadataForward(AsyncArray, "filters")
    ndim: MetadataForward[int] = MetadataForward(AsyncArray, "ndim")
    size: MetadataForward[int] = MetadataForward(AsyncArray, "size")
    itemsize: MetadataForward[int] = MetadataForward(AsyncArray, "itemsize")
    nbytes: MetadataForward[int] = MetadataForward(AsyncArray, "nbytes")
    cdata_shape: MetadataForward[tuple[int, ...]] = MetadataForward(AsyncArray, "cdata_shape")
    nchunks: MetadataForward[int] = MetadataForward(AsyncArray, "nchunks")
    compressors: MetadataForward[tuple[Codec, ...]] = MetadataForward(AsyncArray, "compressors")
    codecs: MetadataForward[list[dict[str, Any]]] = MetadataForward(AsyncArray, "codecs")
    dimension_names: MetadataForward[tuple[str | None, ...] | None] = MetadataForward(
        AsyncArray, "dimension_names"
    )
    zarr_format: Forward[int] = Forward(AsyncArray, "zarr_format")
    write_empty_chunks: Forward[bool] = Forward(AsyncArray, "write_empty_chunks")
    partial_decompress: Forward[bool] = Forward(AsyncArray, "partial_decompress")
    chunk_cache: Forward[ChunkCache | None] = Forward(AsyncArray, "chunk_cache")
    synchronizer: Forward[Any] = Forward(AsyncArray, "synchronizer")
    cache_attrs: Forward[bool] = Forward(AsyncArray, "cache_attrs")

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape (elements per dimension); ``z.shape = new_shape`` resizes (zarr-python 2)."""
        self._refresh_if_uncached()
        return self._async.shape

    @shape.setter
    def shape(self, value: int | tuple[int, ...]) -> None:
        self.resize(value)

    @property
    def fill_value(self) -> Any:
        """Value of elements never written; ``z.fill_value = v`` rewrites ``.zarray`` (zarr-python 2)."""
        self._refresh_if_uncached()
        return self._async.fill_value

    @fill_value.setter
    def fill_value(self, value: Any) -> None:
        self._write(self._async.set_fill_value(value), None)

    def _refresh_if_uncached(self) -> None:
        """zarr-python 2's ``cache_metadata=False``: reread ``.zarray`` before answering from it."""
        if self._async._recheck_metadata is True:
            self._run(self._async.refresh(), None)

    def __len__(self) -> int:
        self._refresh_if_uncached()
        return len(self._async)

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name is not None else ""
        return f"<azarr.sync.Array{name} {self.shape} {self.dtype}{' read-only' if self.read_only else ''}>"

    def __eq__(self, other: object) -> bool:
        """Same store, path and read-only flag, and neither is a view (zarr-python 2 ``Array.__eq__``)."""
        if not isinstance(other, Array):
            return NotImplemented
        return (
            self.store == other.store
            and self.read_only == other.read_only
            and self.path == other.path
            and not self.is_view
            and not other.is_view
        )

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by store and path

    # ---------------------------------------------------------------- opening
    @classmethod
    @mirrors(AsyncArray.open)
    def open(
        cls,
        store: Store,
        path: str = "",
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        write_empty_chunks: bool | None = None,
        partial_decompress: bool = False,
        zarr_format: ZarrFormat | None = None,
        cache: ChunkCache | bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
        timeout: float | None = None,
    ) -> Array:
        coro = AsyncArray.open(
            to_async(store),
            path,
            read_only=read_only,
            allow_pickle=allow_pickle,
            write_empty_chunks=write_empty_chunks,
            partial_decompress=partial_decompress,
            zarr_format=zarr_format,
            cache=cache,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )
        return cls._opened(coro, store, timeout)

    # ---------------------------------------------------------------- metadata-level I/O (zarr-python 2 properties)
    @property
    def nchunks_initialized(self) -> int:
        """Number of chunks present in the store (lists the store; zarr-python 2's property)."""
        result: int = self._run(self._async.nchunks_initialized(), None)
        return result

    @property
    def initialized(self) -> int:
        """zarr-python 2's alias of `nchunks_initialized`."""
        return self.nchunks_initialized

    @property
    def nbytes_stored(self) -> int:
        """Bytes stored for this array, chunks and metadata documents (lists the store; zarr-python 2's property)."""
        result: int = self._run(self._async.nbytes_stored(), None)
        return result

    @property
    def info(self) -> InfoReport:
        """zarr-python 2's ``Array.info``: configuration, bytes stored, storage ratio, chunks initialized.

        Lists the store. An `InfoReport`, which a notebook shows as a table.
        """
        return InfoReport(self.info_items())

    @mirrors(AsyncArray.info_items)
    def info_items(self, *, timeout: float | None = None) -> list[tuple[str, str]]:
        stored = self._run(self._async.nbytes_stored(), timeout)
        initialized = self._run(self._async.nchunks_initialized(), timeout)
        store_type, chunk_store_type = store_view_types(self._async.store)
        synchronizer = self._async.synchronizer
        return array_info_items(
            self._async,
            type_name="azarr.sync.Array",
            store_type=store_type,
            chunk_store_type=chunk_store_type,
            synchronizer_type=None if synchronizer is None else typestr(synchronizer),
            stored=stored,
            initialized=initialized,
        )

    @mirrors(AsyncArray.info_complete)
    def info_complete(self, *, timeout: float | None = None) -> InfoReport:
        return InfoReport(self.info_items(timeout=timeout))

    @mirrors(AsyncArray.update_attributes)
    def update_attributes(self, new_attributes: dict[str, Any], *, timeout: float | None = None) -> None:
        self._run(self._async.update_attributes(new_attributes), timeout)

    # ---------------------------------------------------------------- reads
    @mirrors(AsyncArray.get_basic_selection)
    def get_basic_selection(
        self,
        selection: BasicSelection = Ellipsis,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._read(self._async.get_basic_selection, selection, out, fields, progress, timeout)

    @mirrors(AsyncArray.get_orthogonal_selection)
    def get_orthogonal_selection(
        self,
        selection: OrthogonalSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._read(self._async.get_orthogonal_selection, selection, out, fields, progress, timeout)

    @mirrors(AsyncArray.get_coordinate_selection)
    def get_coordinate_selection(
        self,
        selection: CoordinateSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._read(self._async.get_coordinate_selection, selection, out, fields, progress, timeout)

    @mirrors(AsyncArray.get_mask_selection)
    def get_mask_selection(
        self,
        selection: MaskSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._read(self._async.get_mask_selection, selection, out, fields, progress, timeout)

    @mirrors(AsyncArray.get_block_selection)
    def get_block_selection(
        self,
        selection: BlockSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> Any:
        return self._read(self._async.get_block_selection, selection, out, fields, progress, timeout)

    def _read(
        self,
        method: Any,
        selection: Any,
        out: Any,
        fields: Fields,
        progress: ProgressCallback | None,
        timeout: float | None,
    ) -> Any:
        """Run a ``get_*_selection``; an ``out`` that is an array but not NumPy's (a zarr-python 2 or
        azarr array, anything with ``shape`` and item assignment) receives the result by assignment."""
        if (
            out is not None
            and not isinstance(out, np.ndarray)
            and hasattr(out, "shape")
            and hasattr(out, "__setitem__")
        ):
            out[...] = self._run(method(selection, fields=fields, progress=progress), timeout)
            return out
        return self._run(method(selection, out=out, fields=fields, progress=progress), timeout)

    @mirrors(AsyncArray.getitem)
    def getitem(self, selection: Selection, *, timeout: float | None = None) -> Any:
        return self._run(self._async.getitem(selection), timeout)

    def __getitem__(self, selection: Any) -> Any:
        """``z[selection]``: see `getitem` (zarr-python 2 ``Array.__getitem__``)."""
        return self._run(self._async.getitem(selection), None)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        """The whole array as NumPy (``np.asarray(z)``); one read of every chunk."""
        data = np.asarray(self._run(self._async.get_basic_selection(Ellipsis), None))
        return data if dtype is None else data.astype(dtype, copy=False)

    def __iter__(self) -> Iterator[Any]:
        """Iterate over the first axis, reading one row of chunks at a time (zarr-python 2)."""
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        step = self.chunks[0]
        for start in range(0, self.shape[0], step):
            block = self._run(self._async.get_basic_selection(slice(start, start + step)), None)
            yield from block

    # ---------------------------------------------------------------- writes
    @mirrors(AsyncArray.set_basic_selection)
    def set_basic_selection(
        self,
        selection: BasicSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> None:
        self._write(
            self._async.set_basic_selection(selection, to_async(value), fields=fields, progress=progress),
            timeout,
        )

    @mirrors(AsyncArray.set_orthogonal_selection)
    def set_orthogonal_selection(
        self,
        selection: OrthogonalSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> None:
        coro = self._async.set_orthogonal_selection(
            selection, to_async(value), fields=fields, progress=progress
        )
        self._write(coro, timeout)

    @mirrors(AsyncArray.set_coordinate_selection)
    def set_coordinate_selection(
        self,
        selection: CoordinateSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> None:
        coro = self._async.set_coordinate_selection(
            selection, to_async(value), fields=fields, progress=progress
        )
        self._write(coro, timeout)

    @mirrors(AsyncArray.set_mask_selection)
    def set_mask_selection(
        self,
        selection: MaskSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> None:
        self._write(
            self._async.set_mask_selection(selection, to_async(value), fields=fields, progress=progress),
            timeout,
        )

    @mirrors(AsyncArray.set_block_selection)
    def set_block_selection(
        self,
        selection: BlockSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
        timeout: float | None = None,
    ) -> None:
        self._write(
            self._async.set_block_selection(selection, to_async(value), fields=fields, progress=progress),
            timeout,
        )

    @mirrors(AsyncArray.setitem)
    def setitem(self, selection: Selection, value: Any, *, timeout: float | None = None) -> None:
        self._write(self._async.setitem(selection, to_async(value)), timeout)

    def __setitem__(self, selection: Any, value: Any) -> None:
        """``z[selection] = value``: see `setitem` (zarr-python 2 ``Array.__setitem__``)."""
        self._write(self._async.setitem(selection, to_async(value)), None)

    # ---------------------------------------------------------------- shape changes
    @mirrors(AsyncArray.resize)
    def resize(self, *shape: int | tuple[int, ...], timeout: float | None = None) -> None:
        self._write(self._async.resize(*shape), timeout)

    @mirrors(AsyncArray.append)
    def append(self, data: Any, axis: int = 0, *, timeout: float | None = None) -> tuple[int, ...]:
        result: tuple[int, ...] = self._write(self._async.append(data, axis), timeout)
        return result

    # ---------------------------------------------------------------- accessors
    @property
    def oindex(self) -> OIndex:
        """Orthogonal indexing: ``z.oindex[sel]``, ``z.oindex[sel] = value`` (zarr-python 2)."""
        return OIndex(self._async.oindex, self)

    @property
    def vindex(self) -> VIndex:
        """Coordinate/mask indexing: ``z.vindex[sel]``, ``z.vindex[sel] = value`` (zarr-python 2)."""
        return VIndex(self._async.vindex, self)

    @property
    def blocks(self) -> BlockIndex:
        """Block indexing over the chunk grid: ``z.blocks[i]``, ``z.blocks[i] = value`` (zarr-python 2)."""
        return BlockIndex(self._async.blocks, self)

    # ---------------------------------------------------------------- zarr-python 2 extras
    is_view: Forward[bool] = Forward(AsyncArray, "is_view")
    refresh = mirror_method(AsyncArray.refresh)
    digest = mirror_method(AsyncArray.digest)
    hexdigest = mirror_method(AsyncArray.hexdigest)
    set_fill_value = mirror_method(AsyncArray.set_fill_value)

    def set_recheck_metadata(self, policy: RecheckPolicy) -> Array:
        """When ``.zarray`` is reread (see `azarr.AsyncArray.set_recheck_metadata`); returns this array."""
        self._async.set_recheck_metadata(policy)
        return self

    def view(self, **kwargs: Any) -> Array:
        """A view with other metadata (zarr-python 2 ``Array.view``; see `azarr.AsyncArray.view`)."""
        return self._sibling(self._async.view(**kwargs))

    def astype(self, dtype: Any) -> Array:
        """A view decoding to ``dtype`` (zarr-python 2 ``Array.astype``; see `azarr.AsyncArray.astype`)."""
        return self._sibling(self._async.astype(dtype))

    def _sibling(self, array: AsyncArray) -> Array:
        """Another array on this one's store, holding the same store views."""
        other = Array(array, timeout=self.timeout)
        self._share_views(other)
        return other

    def islice(self, start: int | None = None, end: int | None = None) -> Iterator[Any]:
        """Iterate over the first axis from ``start`` to ``end``, a chunk at a time (zarr-python 2 ``islice``)."""
        return iterate(lambda: self._async.islice(start, end))
