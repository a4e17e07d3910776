"""``azarr.sync.Array``: zarr-python 2's ``zarr.Array``, blocking, over an `AsyncArray`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from numcodecs.abc import Codec

from azarr.core import AsyncArray
from azarr.core._array_ops import RecheckPolicy
from azarr.core._formats import ZarrFormat
from azarr.indexing import (
    BasicSelection,
    BlockSelection,
    CoordinateSelection,
    MaskSelection,
    OrthogonalSelection,
    Selection,
)
from azarr.metadata import AnyArrayMetadata
from azarr.scheduler import ChunkCache, ProgressCallback
from azarr.storage import Store
from azarr.sync._accessors import BlockIndex, OIndex, VIndex
from azarr.sync._attributes import Attributes
from azarr.sync._loop import iterate, run
from azarr.sync._mirror import Forward, mirror_method, mirrors

Fields = str | list[str] | None


class Array:
    """A Zarr v2 array with zarr-python 2's synchronous API.

    A thin layer: every method runs the same-named coroutine of the wrapped
    `AsyncArray` on azarr's I/O loop thread (`azarr.sync.run`)
    and blocks until it is done, so requests share the store's one budget with
    every other thread. Get one from `azarr.sync.open_array` and friends,
    or ``async_array.to_sync()``; ``array.async_array`` goes back.

    Parameters
    ----------
    async_array : AsyncArray
        The array to drive.
    timeout : float, optional
        Default ``timeout`` (seconds) of every call, including ``arr[...]``; None
        waits without limit. A call that times out is cancelled with its requests.

    Examples
    --------
    >>> import azarr.sync as zs
    >>> z = zs.zeros((4, 4), chunks=(2, 2))
    >>> z[0, :] = 1
    >>> z[:2].sum()
    4.0
    """

    def __init__(self, async_array: AsyncArray, *, timeout: float | None = None) -> None:
        self._async = async_array
        self.timeout = timeout

    def _run(self, coro: Any, timeout: float | None) -> Any:
        return run(coro, self.timeout if timeout is None else timeout)

    @property
    def async_array(self) -> AsyncArray:
        """The `AsyncArray` this wraps (same store, budget and metadata)."""
        return self._async

    # ---------------------------------------------------------------- properties (no I/O)
    store: Forward[Store] = Forward(AsyncArray, "store")
    path: Forward[str] = Forward(AsyncArray, "path")
    name: Forward[str] = Forward(AsyncArray, "name")
    basename: Forward[str] = Forward(AsyncArray, "basename")
    read_only: Forward[bool] = Forward(AsyncArray, "read_only")
    metadata: Forward[AnyArrayMetadata] = Forward(AsyncArray, "metadata")
    shape: Forward[tuple[int, ...]] = Forward(AsyncArray, "shape")
    chunks: Forward[tuple[int, ...]] = Forward(AsyncArray, "chunks")
    shards: Forward[tuple[int, ...] | None] = Forward(AsyncArray, "shards")
    dtype: Forward[np.dtype[Any]] = Forward(AsyncArray, "dtype")
    fill_value: Forward[Any] = Forward(AsyncArray, "fill_value")
    order: Forward[str] = Forward(AsyncArray, "order")
    dimension_separator: Forward[str] = Forward(AsyncArray, "dimension_separator")
    compressor: Forward[Codec | None] = Forward(AsyncArray, "compressor")
    filters: Forward[list[Codec] | None] = Forward(AsyncArray, "filters")
    compressors: Forward[tuple[Codec, ...]] = Forward(AsyncArray, "compressors")
    codecs: Forward[list[dict[str, Any]]] = Forward(AsyncArray, "codecs")
    dimension_names: Forward[tuple[str | None, ...] | None] = Forward(AsyncArray, "dimension_names")
    zarr_format: Forward[int] = Forward(AsyncArray, "zarr_format")
    ndim: Forward[int] = Forward(AsyncArray, "ndim")
    size: Forward[int] = Forward(AsyncArray, "size")
    itemsize: Forward[int] = Forward(AsyncArray, "itemsize")
    nbytes: Forward[int] = Forward(AsyncArray, "nbytes")
    cdata_shape: Forward[tuple[int, ...]] = Forward(AsyncArray, "cdata_shape")
    nchunks: Forward[int] = Forward(AsyncArray, "nchunks")
    write_empty_chunks: Forward[bool] = Forward(AsyncArray, "write_empty_chunks")
    partial_decompress: Forward[bool] = Forward(AsyncArray, "partial_decompress")
    chunk_cache: Forward[ChunkCache | None] = Forward(AsyncArray, "chunk_cache")
    info: Forward[str] = Forward(AsyncArray, "info")

    @property
    def attrs(self) -> Attributes:
        """User attributes (``.zattrs``): a mutable mapping whose changes are written at once."""
        return Attributes(self._async.attrs, self)

    def __len__(self) -> int:
        return len(self._async)

    def __repr__(self) -> str:
        return f"<azarr.sync.Array {self.name!r} {self.shape} {self.dtype}{' read-only' if self.read_only else ''}>"

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
        timeout: float | None = None,
    ) -> Array:
        coro = AsyncArray.open(
            store,
            path,
            read_only=read_only,
            allow_pickle=allow_pickle,
            write_empty_chunks=write_empty_chunks,
            partial_decompress=partial_decompress,
            zarr_format=zarr_format,
            cache=cache,
        )
        return cls(run(coro, timeout), timeout=timeout)

    # ---------------------------------------------------------------- metadata-level I/O
    @mirrors(AsyncArray.info_complete)
    def info_complete(self, *, timeout: float | None = None) -> str:
        result: str = self._run(self._async.info_complete(), timeout)
        return result

    @mirrors(AsyncArray.nchunks_initialized)
    def nchunks_initialized(self, *, timeout: float | None = None) -> int:
        result: int = self._run(self._async.nchunks_initialized(), timeout)
        return result

    @mirrors(AsyncArray.nbytes_stored)
    def nbytes_stored(self, *, timeout: float | None = None) -> int:
        result: int = self._run(self._async.nbytes_stored(), timeout)
        return result

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
        coro = self._async.get_basic_selection(selection, out=out, fields=fields, progress=progress)
        return self._run(coro, timeout)

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
        coro = self._async.get_orthogonal_selection(selection, out=out, fields=fields, progress=progress)
        return self._run(coro, timeout)

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
        coro = self._async.get_coordinate_selection(selection, out=out, fields=fields, progress=progress)
        return self._run(coro, timeout)

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
        coro = self._async.get_mask_selection(selection, out=out, fields=fields, progress=progress)
        return self._run(coro, timeout)

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
        coro = self._async.get_block_selection(selection, out=out, fields=fields, progress=progress)
        return self._run(coro, timeout)

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
        self._run(
            self._async.set_basic_selection(selection, value, fields=fields, progress=progress), timeout
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
        coro = self._async.set_orthogonal_selection(selection, value, fields=fields, progress=progress)
        self._run(coro, timeout)

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
        coro = self._async.set_coordinate_selection(selection, value, fields=fields, progress=progress)
        self._run(coro, timeout)

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
        self._run(self._async.set_mask_selection(selection, value, fields=fields, progress=progress), timeout)

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
        self._run(
            self._async.set_block_selection(selection, value, fields=fields, progress=progress), timeout
        )

    @mirrors(AsyncArray.setitem)
    def setitem(self, selection: Selection, value: Any, *, timeout: float | None = None) -> None:
        self._run(self._async.setitem(selection, value), timeout)

    def __setitem__(self, selection: Any, value: Any) -> None:
        """``z[selection] = value``: see `setitem` (zarr-python 2 ``Array.__setitem__``)."""
        self._run(self._async.setitem(selection, value), None)

    # ---------------------------------------------------------------- shape changes
    @mirrors(AsyncArray.resize)
    def resize(self, *shape: int | tuple[int, ...], timeout: float | None = None) -> None:
        self._run(self._async.resize(*shape), timeout)

    @mirrors(AsyncArray.append)
    def append(self, data: Any, axis: int = 0, *, timeout: float | None = None) -> tuple[int, ...]:
        result: tuple[int, ...] = self._run(self._async.append(data, axis), timeout)
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
        return Array(self._async.view(**kwargs), timeout=self.timeout)

    def astype(self, dtype: Any) -> Array:
        """A view decoding to ``dtype`` (zarr-python 2 ``Array.astype``; see `azarr.AsyncArray.astype`)."""
        return Array(self._async.astype(dtype), timeout=self.timeout)

    def islice(self, start: int | None = None, end: int | None = None) -> Iterator[Any]:
        """Iterate over the first axis from ``start`` to ``end``, a chunk at a time (zarr-python 2 ``islice``)."""
        return iterate(lambda: self._async.islice(start, end))
