"""``AsyncArray``: a Zarr array (v2 or v3) read and written with coroutines.

Data flow of a read: the selection becomes an indexer (``azarr.indexing``),
which yields one projection per touched chunk; the array allocates the output
and hands the projections to its `ChunkPipeline`, which
fetches every chunk through the store's managed path (``azarr.scheduler``) and
decodes and scatters it in the codec pool (``azarr.codecs``). Writes hand the
value array to the same pipeline, which reads a chunk first only when the
selection covers part of it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec

from azarr import config, telemetry
from azarr.codecs import ChunkCodec
from azarr.core._array_ops import (
    RecheckPolicy,
    astype_filters,
    check_recheck_policy,
    iterate_rows,
    rechecks_metadata,
    refresh_array,
    view_metadata,
    write_fill_value,
)
from azarr.core._formats import Document, NodeDocuments, ZarrFormat, metadata_key, read_node
from azarr.core._node import Node
from azarr.core._paths import basename, node_key, normalize_path
from azarr.core._reports import InfoReport, array_info_items
from azarr.core._shape_change import change_shape
from azarr.core._streaming import is_array_source, read_source, region_of, stream_into
from azarr.errors import ArrayNotFoundError, ReadOnlyError
from azarr.indexing import (
    BasicIndexer,
    BasicSelection,
    BlockIndexer,
    BlockSelection,
    CoordinateIndexer,
    CoordinateSelection,
    Fields,
    MaskIndexer,
    MaskSelection,
    OrthogonalIndexer,
    OrthogonalSelection,
    Selection,
    check_fields,
    is_pure_fancy_indexing,
    is_pure_orthogonal_indexing,
    pop_fields,
)
from azarr.metadata import ZARRAY, ZATTRS, AnyArrayMetadata, ArrayMetadata, ArrayV3Metadata, parse_attributes
from azarr.pipeline import ChunkPipeline
from azarr.pipeline._pages import empty as empty_result
from azarr.pipeline._shards import ShardedChunks
from azarr.scheduler import ChunkCache, ProgressCallback, StoreIO, bounded_map
from azarr.storage import Store

if TYPE_CHECKING:
    from azarr.core.accessors import BlockIndex, OIndex, VIndex
    from azarr.sync import Array


class AsyncArray(Node):
    """A Zarr array (v2 or v3) whose I/O methods are coroutines.

    Open or create one with `azarr.open_array` / `azarr.create`
    rather than calling the constructor. Reads and writes mirror zarr-python
    2's ``zarr.Array`` (``get_basic_selection``, ``oindex``, ``resize``, ...),
    awaited.

    Parameters
    ----------
    store : Store
        Where the array lives.
    path : str
        Node path within the store (``""`` for the root).
    metadata : ArrayMetadata or ArrayV3Metadata
        The parsed ``.zarray`` or ``zarr.json`` document: it sets the format.
    attributes : dict
        The node's attributes (``.zattrs``, or ``zarr.json``'s ``attributes``; ``{}`` if none).
    read_only : bool
        Refuse writes with `ReadOnlyError`.
    allow_pickle : bool, optional
        Let pickle-based codecs decode chunks (default: ``azarr.config`` ``allow_pickle``).
    write_empty_chunks : bool, optional
        Store chunks that are entirely ``fill_value`` (default True, as zarr-python 2);
        when False such chunks are deleted instead.
    partial_decompress : bool, default False
        zarr-python 2's ``Array(partial_decompress=...)``: for Blosc chunks (no
        filters, C order) a read covering part of a chunk fetches and decodes
        only the Blosc blocks holding the selected elements, with byte-range
        reads. Other chunks are read whole; results are the same either way.
    cache : ChunkCache, bool or None
        The decoded-chunk cache reads go through (`azarr.scheduler.ChunkCache`): None
        (default) the process's, if ``azarr.config`` ``chunk_cache_bytes`` is set; False
        none; True the process's (it must be configured); or a cache of its own. Like
        TensorStore's ``cache_pool`` context resource and ``recheck_cached_data``.
    synchronizer, cache_attrs
        zarr-python 2's options, kept for the synchronous facade (see `azarr.sync.Array`).
    """

    _kind = "array"

    def __init__(
        self,
        store: Store,
        path: str,
        metadata: AnyArrayMetadata,
        attributes: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        write_empty_chunks: bool | None = None,
        partial_decompress: bool = False,
        cache: ChunkCache | bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> None:
        super().__init__(
            store,
            path,
            attributes,
            read_only=read_only,
            allow_pickle=allow_pickle,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
            zarr_format=metadata.zarr_format,
        )
        self._metadata = metadata
        self._write_empty_chunks = (
            config.get("write_empty_chunks") if write_empty_chunks is None else write_empty_chunks
        )
        self._partial_decompress = bool(partial_decompress)
        self._cache = cache
        self._opened_at = time.monotonic()
        self._codec = self._make_codec(metadata)
        self._budget = self._io.budget
        self._key_prefix = node_key(self._path, metadata.chunk_key_prefix)
        self._pipeline = self._make_pipeline()

    def _make_pipeline(self) -> ChunkPipeline:
        """The one hand-off from selections to chunks (fetch/decode/scatter, merge/encode/store);
        rebuilt whenever the metadata it depends on (codec, fill_value) changes."""
        metadata = self._metadata
        sharding = metadata.sharding
        return ChunkPipeline(
            self._io,
            self._codec,
            self._chunk_key,
            metadata.fill_value,
            write_empty_chunks=bool(self._write_empty_chunks),
            shape=lambda: self._metadata.shape,
            partial_decompress=self._partial_decompress,
            # A sharded array's pipeline cuts selections into inner chunks and reaches them
            # through its shards (`chunk_key` then names shards): azarr.pipeline._shards.
            shards=None
            if sharding is None
            else ShardedChunks(
                self._io, sharding, metadata.chunks, lambda: self._metadata.shape, self._codec.stored_bound
            ),
            cache=self._cache,
            opened_at=self._opened_at,
        )

    def _make_codec(self, metadata: AnyArrayMetadata) -> ChunkCodec:
        # Either format's codecs as one chain (azarr.codecs._chain): the pipeline runs both alike.
        return ChunkCodec.from_chain(
            metadata.dtype,
            metadata.inner_chunks,
            metadata.chain,
            allow_pickle=self._allow_pickle,
            source=self._metadata_key,
        )

    @property
    def _metadata_key(self) -> str:
        """Store key of the metadata document (``.zarray`` or ``zarr.json``)."""
        return metadata_key(self._path, 3 if self._zarr_format == 3 else 2)

    # ---------------------------------------------------------------- opening
    @classmethod
    async def open(
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
    ) -> AsyncArray:
        """Open the array at ``path``, Zarr v2 or v3 (``.zarray``, ``.zattrs`` and ``zarr.json``
        are read concurrently: one round trip).

        ``zarr_format`` (2 or 3) looks for that format only.

        Raises
        ------
        ArrayNotFoundError
            No array at ``path`` (in ``zarr_format``, if given).
        MetadataError
            A document is invalid (the message names the key).
        """
        path = normalize_path(path)
        found = await read_node(StoreIO(store), path, zarr_format=zarr_format)
        if found is None or found.kind != "array":
            what = "a group" if found is not None else "no .zarray or zarr.json"
            raise ArrayNotFoundError(f"no array at path {path!r} in {store.url} ({what} there)")
        return cls.from_node(
            store,
            path,
            found,
            read_only=read_only,
            allow_pickle=allow_pickle,
            write_empty_chunks=write_empty_chunks,
            partial_decompress=partial_decompress,
            cache=cache,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    @classmethod
    def from_node(
        cls,
        store: Store,
        path: str,
        found: NodeDocuments,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        write_empty_chunks: bool | None = None,
        partial_decompress: bool = False,
        cache: ChunkCache | bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncArray:
        """The array at normalized ``path`` from its documents as `read_node` found them (either format).

        Raises
        ------
        MetadataError
            A document is invalid (the message names its key).
        """
        if found.zarr_format == 2:
            return cls.from_documents(
                store,
                path,
                found.metadata,
                found.attributes,
                read_only=read_only,
                allow_pickle=allow_pickle,
                write_empty_chunks=write_empty_chunks,
                partial_decompress=partial_decompress,
                cache=cache,
                synchronizer=synchronizer,
                cache_attrs=cache_attrs,
            )
        metadata = found.array_metadata(path)
        return cls(
            store,
            path,
            metadata,
            dict(metadata.attributes),  # type: ignore[union-attr]
            read_only=read_only,
            allow_pickle=allow_pickle,
            write_empty_chunks=write_empty_chunks,
            partial_decompress=partial_decompress,
            cache=cache,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    @classmethod
    def from_documents(
        cls,
        store: Store,
        path: str,
        zarray: Document,
        zattrs: Document | None,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        write_empty_chunks: bool | None = None,
        partial_decompress: bool = False,
        cache: ChunkCache | bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncArray:
        """The array at normalized ``path`` from its already-read ``.zarray`` and ``.zattrs`` documents (bytes, or decoded).

        Raises
        ------
        MetadataError
            A document is invalid (the message names its key).
        """
        metadata = ArrayMetadata.from_json(zarray, key=node_key(path, ZARRAY))
        attrs_key = node_key(path, ZATTRS)
        attributes = {} if zattrs is None else parse_attributes(zattrs, key=attrs_key)
        return cls(
            store,
            path,
            metadata,
            attributes,
            read_only=read_only,
            allow_pickle=allow_pickle,
            write_empty_chunks=write_empty_chunks,
            partial_decompress=partial_decompress,
            cache=cache,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    # ---------------------------------------------------------------- properties
    @property
    def name(self) -> str | None:  # type: ignore[override]
        """Absolute name, e.g. ``"/group/array"``; None for an array at the store's root (zarr-python 2)."""
        return "/" + self._path if self._path else None

    @property
    def basename(self) -> str | None:  # type: ignore[override]
        """Last segment of the name; None for an array at the store's root (zarr-python 2)."""
        return basename(self._path) if self._path else None

    @property
    def metadata(self) -> AnyArrayMetadata:
        """The parsed ``.zarray`` (`ArrayMetadata`) or ``zarr.json`` (`ArrayV3Metadata`) document."""
        return self._metadata

    @property
    def shape(self) -> tuple[int, ...]:
        """Array shape (elements per dimension)."""
        return self._metadata.shape

    @property
    def chunks(self) -> tuple[int, ...]:
        """Chunk shape (elements per dimension): of the inner chunks of a sharded array, the
        unit selections are cut into (zarr-python 3's ``Array.chunks``)."""
        return self._metadata.inner_chunks

    @property
    def shards(self) -> tuple[int, ...] | None:
        """Shard shape (elements per dimension) of a sharded Zarr v3 array, the unit stored as
        one object; None otherwise (zarr-python 3's ``Array.shards``)."""
        return self._metadata.shards

    @property
    def dtype(self) -> np.dtype[Any]:
        """NumPy dtype of the elements."""
        return self._metadata.dtype

    @property
    def fill_value(self) -> Any:
        """Value of elements in chunks never written (decoded from ``.zarray``)."""
        return self._metadata.fill_value

    @property
    def order(self) -> str:
        """Memory layout within each chunk: ``"C"`` or ``"F"``."""
        return self._metadata.order

    @property
    def dimension_separator(self) -> str:
        """Separator of chunk-key indices: ``"."`` (``0.0``) or ``"/"`` (``0/0``)."""
        return self._metadata.dimension_separator

    @property
    def compressor(self) -> Codec | None:
        """The compressor as a numcodecs codec, or None (zarr-python 2 ``Array.compressor``).

        Raises
        ------
        TypeError
            A Zarr v3 array: it has ``compressors`` (zarr-python 3 raises so too).
        """
        if isinstance(self._metadata, ArrayV3Metadata):
            raise TypeError("`compressor` is not available for Zarr format 3 arrays; use `compressors`")
        config_ = self._metadata.compressor
        return None if config_ is None else numcodecs.get_codec(dict(config_))

    @property
    def filters(self) -> list[Codec] | None:
        """The filters as numcodecs codecs in encoding order, or None.

        For a Zarr v3 array: its array -> array codecs that are numcodecs codecs, or None.
        """
        if isinstance(self._metadata, ArrayV3Metadata):
            serializers = ("vlen-utf8", "vlen-bytes")
            configs = tuple(c for c in self._metadata.chain.filters if c["id"] not in serializers)
        else:
            configs = self._metadata.filters or ()
        return None if not configs else [numcodecs.get_codec(dict(c)) for c in configs]

    @property
    def compressors(self) -> tuple[Codec, ...]:
        """The bytes -> bytes codecs as numcodecs codecs, in encoding order (zarr-python 3
        ``Array.compressors``; for a v2 array its compressor, if any)."""
        return tuple(numcodecs.get_codec(dict(c)) for c in self._metadata.chain.compressors)

    @property
    def codecs(self) -> list[dict[str, Any]]:
        """The codec chain as Zarr v3 codec entries (``zarr.json`` ``codecs``; for a v2 array, its
        ``order``, ``filters`` and ``compressor`` written the v3 way)."""
        from azarr.core._array_info import codec_entries

        return codec_entries(self._metadata)

    @property
    def dimension_names(self) -> tuple[str | None, ...] | None:
        """A Zarr v3 array's ``dimension_names`` (None when absent, and for v2 arrays)."""
        return getattr(self._metadata, "dimension_names", None)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the uncompressed data (``size * itemsize``; object arrays count pointers)."""
        return self.size * self.itemsize

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Chunks per dimension (the chunk grid's shape; inner chunks of a sharded array, as in
        zarr-python 3); ``(1,)`` for a 0-d array, as in zarr-python 2."""
        if self._metadata.sharding is None:
            return self._metadata.cdata_shape or (1,)
        return tuple(-(-s // c) for s, c in zip(self.shape, self.chunks, strict=True)) or (1,)

    @property
    def nchunks(self) -> int:
        """Number of chunks in the grid (inner chunks of a sharded array)."""
        if self._metadata.sharding is None:
            return self._metadata.nchunks
        return math.prod(self.cdata_shape)

    @property
    def chunk_cache(self) -> ChunkCache | None:
        """The decoded-chunk cache reads go through now (the ``cache`` it was opened with,
        or the process's), or None."""
        return self._pipeline.chunk_cache()

    @property
    def partial_decompress(self) -> bool:
        """Whether reads of part of a Blosc chunk fetch and decode only the blocks they need."""
        return self._partial_decompress

    @property
    def write_empty_chunks(self) -> bool:
        """Whether chunks equal to ``fill_value`` are stored (True) or deleted (False)."""
        return bool(self._write_empty_chunks)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name is not None else ""
        return f"<azarr.AsyncArray{name} {self.shape} {self.dtype}{' read-only' if self.read_only else ''}>"

    @property
    def info(self) -> InfoReport:
        """A report of the array's configuration (no I/O; `info_complete` adds what is stored).

        An `InfoReport`: a ``str`` whose ``repr`` is the report and which a notebook shows as
        a table (zarr-python 2's ``InfoReporter``).
        """
        return InfoReport(array_info_items(self, type_name="azarr.AsyncArray"))

    async def info_items(self) -> list[tuple[str, str]]:
        """zarr-python 2's ``Array.info_items()``: the `info_complete` rows as ``(label, value)`` pairs."""
        stored, initialized = await asyncio.gather(self.nbytes_stored(), self.nchunks_initialized())
        return array_info_items(self, type_name="azarr.AsyncArray", stored=stored, initialized=initialized)

    async def info_complete(self) -> InfoReport:
        """`info` plus bytes stored, storage ratio and chunks initialized, as zarr-python 2's ``Array.info`` (lists the store)."""
        return InfoReport(await self.info_items())

    # ---------------------------------------------------------------- chunk bookkeeping
    def _chunk_key(self, coords: tuple[int, ...]) -> str:
        if coords:  # the hot path: once per chunk of every read and write
            return self._key_prefix + self._metadata.dimension_separator.join(map(str, coords))
        return node_key(self._path, self._metadata.chunk_key(coords))

    async def _stored_chunk_coords(self) -> AsyncIterator[tuple[tuple[int, ...], str]]:
        """Yield (grid coords, key) of every chunk present in the store (by listing).

        A 0-d array's one chunk has coordinates ``(0,)`` (its key ``"0"``, or ``"c"`` in v3).
        """
        prefix = node_key(self._path, "")
        for key in await self._io.list_prefix(self._path):
            name = key[len(prefix) :]
            if name.startswith(".") or "/." in name:
                continue
            coords = self._metadata.chunk_coords(name)
            if coords is not None:
                yield coords or (0,), key

    @rechecks_metadata
    async def nchunks_initialized(self) -> int:
        """Number of chunks present in the store (zarr-python 2 ``nchunks_initialized``); for a
        sharded array, the inner chunks of the shards present (zarr-python 3: each counted at
        the shard's full size)."""
        grid = self._metadata.cdata_shape if self.ndim else (1,)
        count = 0
        async for coords, _ in self._stored_chunk_coords():
            if all(c < n for c, n in zip(coords, grid, strict=True)):
                count += 1
        shards = self.shards
        if shards is not None:
            count *= math.prod(s // c for s, c in zip(shards, self.chunks, strict=True))
        return count

    async def nbytes_stored(self) -> int:
        """Bytes stored for this array: chunks and metadata documents (zarr-python 2 ``nbytes_stored``)."""
        keys = await self._io.list_prefix(self._path)
        sizes = await bounded_map(self._io.getsize, keys, self._budget.max_requests)
        return sum(sizes)

    # ---------------------------------------------------------------- reads
    @rechecks_metadata
    async def get_basic_selection(
        self,
        selection: BasicSelection = Ellipsis,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Read a basic selection: ints, slices (any step) and Ellipsis.

        Zarr-python 2 ``Array.get_basic_selection``. Integer-indexed dimensions
        are dropped from the result, as in NumPy.

        Parameters
        ----------
        selection : int, slice, Ellipsis or tuple of them
        out : numpy.ndarray, optional
            Array of the result's shape and dtype to decode into; returned.
        fields : str or list of str, optional
            Fields of a structured dtype to read.

        Returns
        -------
        numpy.ndarray or scalar
            A NumPy scalar when every dimension is indexed by an int.

        Raises
        ------
        IndexError
            Out-of-bounds index or too many indices (names the dimension).
        CodecError
            A chunk failed to decode (names the chunk key).
        """
        indexer = BasicIndexer(selection, self.shape, self.chunks)
        result = await self._get_selection(indexer, out=out, fields=fields, progress=progress)
        if result.shape == () and out is None and not _is_ellipsis(selection):
            return result[()]
        return result

    @rechecks_metadata
    async def get_orthogonal_selection(
        self,
        selection: OrthogonalSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Read an outer (orthogonal) selection: per dimension an int, slice, int array or bool array.

        Zarr-python 2 ``Array.get_orthogonal_selection`` / ``oindex``: the
        result is the cross product of the per-dimension selections, like
        ``numpy.ix_``. When every dimension is indexed by an int the result is
        a NumPy scalar, as in zarr-python 2 (so ``getitem((i, j))``, which is
        routed here, returns a scalar like ``z[i, j]``).
        """
        indexer = OrthogonalIndexer(selection, self.shape, self.chunks)
        result = await self._get_selection(indexer, out=out, fields=fields, progress=progress)
        if result.shape == () and out is None:
            return result[()]
        return result

    @rechecks_metadata
    async def get_coordinate_selection(
        self,
        selection: CoordinateSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Read points given by one int array per dimension, broadcast together.

        Zarr-python 2 ``Array.get_coordinate_selection`` / ``vindex``; the
        result has the broadcast shape of the index arrays.
        """
        indexer = CoordinateIndexer(selection, self.shape, self.chunks)
        return await self._get_selection(indexer, out=out, fields=fields, progress=progress)

    @rechecks_metadata
    async def get_mask_selection(
        self,
        selection: MaskSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Read the elements where a bool array of the array's shape is True (1-d result)."""
        indexer = MaskIndexer(selection, self.shape, self.chunks)
        return await self._get_selection(indexer, out=out, fields=fields, progress=progress)

    @rechecks_metadata
    async def get_block_selection(
        self,
        selection: BlockSelection,
        *,
        out: Any = None,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> Any:
        """Read whole chunks by chunk-grid index (ints and step-1 slices), zarr-python 2 ``blocks``."""
        indexer = BlockIndexer(selection, self.shape, self.chunks)
        return await self._get_selection(indexer, out=out, fields=fields, progress=progress)

    @rechecks_metadata
    async def getitem(self, selection: Selection) -> Any:
        """``z[selection]`` of zarr-python 2, awaited.

        Routes as zarr-python 2's ``Array.__getitem__``: pure fancy indexing
        (int/bool arrays) goes to `get_coordinate_selection` (or mask),
        selections mixing arrays with ints/slices to
        `get_orthogonal_selection`, the rest to `get_basic_selection`.
        Field names in the selection select structured fields.
        """
        fields, pure = pop_fields(selection)
        if is_pure_fancy_indexing(pure, self.ndim):
            return await self.vindex.get(selection)
        if is_pure_orthogonal_indexing(pure, self.ndim):
            return await self.get_orthogonal_selection(pure, fields=fields)
        return await self.get_basic_selection(pure, fields=fields)

    async def _get_selection(
        self, indexer: Any, *, out: Any, fields: Fields, progress: ProgressCallback | None = None
    ) -> np.ndarray[Any, Any]:
        fields = fields or None  # pop_fields yields [] when a tuple selection names no field
        out_dtype = check_fields(fields, self.dtype)
        # A subarray field (e.g. ("c", "<i2", (2,))) reads as its base dtype with trailing dims.
        sub: tuple[int, ...] = out_dtype.shape
        if sub:
            out_dtype = out_dtype.base
        out_shape: tuple[int, ...] = tuple(indexer.shape) + sub
        result_shape: tuple[int, ...] = tuple(indexer.result_shape) + sub
        with telemetry.operation("read", self, indexer.nchunks, result_shape):
            return await self._read_into(indexer, out, fields, progress, out_dtype, out_shape, result_shape)

    async def _read_into(
        self,
        indexer: Any,
        out: Any,
        fields: Fields,
        progress: ProgressCallback | None,
        out_dtype: np.dtype[Any],
        out_shape: tuple[int, ...],
        result_shape: tuple[int, ...],
    ) -> np.ndarray[Any, Any]:
        if out is None and indexer.nchunks == 1 and out_shape == result_shape:
            return await self._pipeline.read_one(
                next(iter(indexer)), result_shape, out_dtype, fields=fields, progress=progress
            )
        if out is None:
            # A coordinate selection fills a 1-D view of an N-d result: that view exists only
            # for a C-ordered result (an F-ordered one would reshape to a copy, and the data
            # decoded into the copy would be lost).
            order = self.order if out_shape == result_shape else "C"
            result: np.ndarray[Any, Any] = empty_result(result_shape, out_dtype, order)
        else:
            result = _check_out(out, result_shape, out_dtype)
        target = result if out_shape == result_shape else result.reshape(out_shape)
        if out is not None and target.size and not np.shares_memory(target, result):
            raise ValueError(
                f"out array of shape {result.shape} cannot be viewed as {out_shape}; pass a C-contiguous array"
            )
        await self._pipeline.read(indexer, indexer.nchunks, target, fields=fields, progress=progress)
        return result

    # ---------------------------------------------------------------- writes
    @rechecks_metadata
    async def set_basic_selection(
        self,
        selection: BasicSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Write ``value`` into a basic selection (zarr-python 2 ``Array.set_basic_selection``).

        ``value`` is a scalar (broadcast) or an array that broadcasts to the
        selection's shape. Chunks the selection covers only partly are read,
        modified and written back; fully covered chunks are written without a read.

        Raises
        ------
        ReadOnlyError
            The array is read-only.
        ValueError
            ``value``'s shape does not broadcast to the selection's shape (both named).
        IndexError
            Out-of-bounds selection.

        Notes
        -----
        ``value`` may also be a chunked array (an ``AsyncArray``, an h5py
        dataset, a zarr-python 2 array) of the selection's shape: a region of
        step-1 slices is then streamed slab by slab, never read whole
        (``azarr.core._streaming``).
        """
        if fields is None and is_array_source(value):
            region = region_of(selection, self.shape)
            if region is not None:
                self._check_writable()
                await stream_into(self, region, value, progress=progress)
                return
        await self._set_selection(
            BasicIndexer(selection, self.shape, self.chunks), value, fields=fields, progress=progress
        )

    @rechecks_metadata
    async def set_orthogonal_selection(
        self,
        selection: OrthogonalSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Write into an orthogonal selection (zarr-python 2 ``set_orthogonal_selection``)."""
        await self._set_selection(
            OrthogonalIndexer(selection, self.shape, self.chunks), value, fields=fields, progress=progress
        )

    @rechecks_metadata
    async def set_coordinate_selection(
        self,
        selection: CoordinateSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Write points given by broadcast int arrays (zarr-python 2 ``set_coordinate_selection``)."""
        await self._set_selection(
            CoordinateIndexer(selection, self.shape, self.chunks), value, fields=fields, progress=progress
        )

    @rechecks_metadata
    async def set_mask_selection(
        self,
        selection: MaskSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Write the elements where a bool mask is True (zarr-python 2 ``set_mask_selection``)."""
        await self._set_selection(
            MaskIndexer(selection, self.shape, self.chunks), value, fields=fields, progress=progress
        )

    @rechecks_metadata
    async def set_block_selection(
        self,
        selection: BlockSelection,
        value: Any,
        *,
        fields: Fields = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        """Write whole chunks by chunk-grid index (zarr-python 2 ``set_block_selection``)."""
        await self._set_selection(
            BlockIndexer(selection, self.shape, self.chunks), value, fields=fields, progress=progress
        )

    @rechecks_metadata
    async def setitem(self, selection: Selection, value: Any) -> None:
        """``z[selection] = value`` of zarr-python 2, awaited (same routing as `getitem`)."""
        fields, pure = pop_fields(selection)
        if is_pure_fancy_indexing(pure, self.ndim):
            await self.vindex.set(selection, value)
        elif is_pure_orthogonal_indexing(pure, self.ndim):
            await self.set_orthogonal_selection(pure, value, fields=fields)
        else:
            await self.set_basic_selection(pure, value, fields=fields)

    async def _set_selection(
        self,
        indexer: Any,
        value: Any,
        *,
        fields: Fields,
        progress: ProgressCallback | None = None,
        appending: bool = False,
    ) -> None:
        self._check_writable()
        if is_array_source(value):  # other selections than a region: the source is read whole
            value = await read_source(value)
        fields = fields or None
        if isinstance(fields, (list, tuple)) and len(fields) == 1 and not _is_record(value):
            # One field in a list and values of that field (not records of it), as zarr-python 2
            # takes them: write them to the field.
            fields = fields[0]
        value_dtype = check_fields(fields, self.dtype)
        values = _prepare_value(value, tuple(indexer.shape), tuple(indexer.result_shape), value_dtype)
        with telemetry.operation("write", self, indexer.nchunks, tuple(indexer.result_shape)):
            await self._pipeline.write(
                indexer,
                indexer.nchunks,
                values,
                fields=fields,
                progress=progress,
                edges_conditional=appending,
            )

    # ---------------------------------------------------------------- shape changes
    @rechecks_metadata
    async def resize(self, *shape: int | tuple[int, ...]) -> None:
        """Change the shape; chunks wholly outside the new shape are deleted.

        Zarr-python 2 and 3 ``Array.resize``: data in chunks that stay keeps its
        place, including the part of a chunk cut by the new edge (growing again
        shows it, as in zarr-python); growing exposes ``fill_value`` in new
        chunks. Sharded arrays: shards take the place of chunks. Accepts
        ``resize(10, 20)`` and ``resize((10, 20))``. Unlike zarr-python, the
        store is prepared before the new shape is written: a shrink deletes
        first, a grow deletes stale chunks in the region it exposes first, so a
        resize killed at any point leaves what a finished or a never-started one
        would (``docs/consistency.md``, "Crash windows").

        Raises
        ------
        ValueError
            The number of dimensions changes.
        ReadOnlyError
            The array is read-only.
        """
        from azarr.core._normalize import normalize_shape

        self._check_writable()
        if self._is_view:
            raise ReadOnlyError(
                f"cannot resize view {self.name!r}: views never write metadata (zarr-python 2)"
            )
        new_shape = normalize_shape(shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)
        if len(new_shape) != self.ndim:
            raise ValueError(f"cannot resize {self.ndim}-d array {self.name!r} to shape {new_shape}")
        # Chunks wholly outside the new shape (and stale ones in a newly exposed region)
        # are deleted before the shape is written (crash-safe: docs/consistency.md);
        # chunks cut by the edge keep their data, as in zarr-python 2 and 3.
        await change_shape(self, lambda current: current.replace(shape=new_shape))

    @rechecks_metadata
    async def append(self, data: Any, axis: int = 0) -> tuple[int, ...]:
        """Append ``data`` along ``axis``, growing the array (zarr-python 2 ``Array.append``).

        Returns
        -------
        tuple of int
            The new shape.

        Raises
        ------
        ValueError
            ``data`` differs from the array in rank, or in extent on another axis.
        """
        data = np.asanyarray(data)
        if self.ndim == 0:
            raise ValueError("cannot append to a 0-d array")
        axis = axis + self.ndim if axis < 0 else axis
        if not 0 <= axis < self.ndim:
            raise ValueError(f"axis {axis} is out of range for a {self.ndim}-d array")
        if data.ndim != self.ndim or any(
            a != b for i, (a, b) in enumerate(zip(data.shape, self.shape, strict=True)) if i != axis
        ):
            raise ValueError(
                f"cannot append data of shape {data.shape} to array of shape {self.shape} along axis {axis}: "
                "all other dimensions must match"
            )
        self._check_writable()
        offset: list[int] = []

        def grow(current: AnyArrayMetadata) -> AnyArrayMetadata:
            # Against the stored shape, not the one read at open: concurrent appenders
            # each get their own offset (the .zarray update is conditional).
            if any(
                a != b for i, (a, b) in enumerate(zip(data.shape, current.shape, strict=True)) if i != axis
            ):
                raise ValueError(
                    f"cannot append data of shape {data.shape} to array of shape {current.shape} "
                    f"along axis {axis}: all other dimensions must match"
                )
            offset[:] = [current.shape[axis]]
            return current.replace(
                shape=tuple(s + data.shape[axis] if i == axis else s for i, s in enumerate(current.shape))
            )

        # Not idempotent: after an ambiguous failure, equal bytes in the store may be
        # another appender's claim on the same offset; rather claim again (a gap of
        # fill_value) than share its block.
        new_metadata = await change_shape(self, grow, idempotent=False, listing=False)
        start = offset[0]
        selection = tuple(
            slice(start, start + data.shape[axis]) if i == axis else slice(None) for i in range(self.ndim)
        )
        # Edge chunks too are merged conditionally: past this writer's end there may
        # already be the next appender's block.
        await self._set_selection(
            BasicIndexer(selection, self.shape, self.chunks), data, fields=None, appending=True
        )
        return tuple(new_metadata.shape)

    async def _update_metadata(
        self, change: Callable[[Any], AnyArrayMetadata], *, idempotent: bool = True
    ) -> AnyArrayMetadata:
        """Apply ``change`` to the stored ``.zarray`` or ``zarr.json`` as one conditional read-modify-write.

        On stores with conditional writes the change applies to the document as it
        is stored now and is written only if nobody replaced it meanwhile (else it
        is applied again to the newer one), so two concurrent ``resize``/``append``
        calls never undo each other (see ``docs/consistency.md``).
        """
        key = self._metadata_key
        written: list[AnyArrayMetadata] = []

        def modify(raw: bytes | None) -> bytes:
            if raw is None:
                raise ArrayNotFoundError(
                    f"no array at path {self._path!r} in {self.store.url} ({key!r} is missing)"
                )
            # v3: the stored document's attributes and extensions come along unchanged.
            updated = change(self._parse_metadata(raw))
            written[:] = [updated]
            return updated.to_json()

        await self._io.update(key, modify, idempotent=idempotent)
        self._use_metadata(written[0])
        return written[0]

    def _parse_metadata(self, raw: bytes) -> AnyArrayMetadata:
        """The stored ``.zarray`` or ``zarr.json`` (this array's format) as metadata.

        Raises
        ------
        MetadataError
            An invalid document (names its key).
        """
        if self._zarr_format == 3:
            return ArrayV3Metadata.from_json(raw, key=self._metadata_key)
        return ArrayMetadata.from_json(raw, key=self._metadata_key)

    # ---------------------------------------------------------------- accessors
    @property
    def oindex(self) -> OIndex:
        """Orthogonal indexing: ``await arr.oindex[sel]``, ``await arr.oindex.set(sel, value)``."""
        from azarr.core.accessors import OIndex

        return OIndex(self)

    @property
    def vindex(self) -> VIndex:
        """Coordinate/mask indexing: ``await arr.vindex[sel]``, ``await arr.vindex.set(sel, value)``."""
        from azarr.core.accessors import VIndex

        return VIndex(self)

    @property
    def blocks(self) -> BlockIndex:
        """Block indexing by chunk grid: ``await arr.blocks[i, j]``, ``await arr.blocks.set(sel, value)``."""
        from azarr.core.accessors import BlockIndex

        return BlockIndex(self)

    # ---------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        """Pickle the array as configuration, never chunk data or sessions.

        Keeps the store (itself pickled as configuration), path, ``.zarray``
        document, attributes and options. Dask ships arrays to worker processes this way. The unpickled array resolves
        its request budget again (`budget_for`) in its process.
        """
        return {
            **self._node_state(),
            "metadata": self._metadata.to_json(),
            "write_empty_chunks": self._write_empty_chunks,
            "partial_decompress": self._partial_decompress,
            # A cache object stays in this process; the unpickled array uses its own
            # process's cache if it has one (cache=None) unless it was told not to.
            "cache": False if self._cache is False else None,
            # A view's metadata lives only in memory: the copy must not reread .zarray.
            "is_view": self._is_view,
            "recheck_metadata": self._recheck_metadata,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        path = state["path"]
        if state.get("zarr_format", 2) == 3:
            metadata: AnyArrayMetadata = ArrayV3Metadata.from_json(
                state["metadata"], key=metadata_key(path, 3)
            )
        else:
            metadata = ArrayMetadata.from_json(state["metadata"], key=node_key(path, ZARRAY))
        AsyncArray.__init__(
            self,
            state["store"],
            path,
            metadata,
            state["attributes"],
            read_only=state["read_only"],
            allow_pickle=state["allow_pickle"],
            write_empty_chunks=state["write_empty_chunks"],
            partial_decompress=state.get("partial_decompress", False),
            cache=state.get("cache"),
            cache_attrs=state.get("cache_attrs", True),
        )
        if state.get("is_view"):
            self._is_view = True
        self._recheck_metadata = state.get("recheck_metadata", "open")

    # ---------------------------------------------------------------- sync facade
    def to_sync(self, *, timeout: float | None = None) -> Array:
        """This array with zarr-python 2's blocking API (`azarr.sync.Array`; no I/O).

        ``timeout`` (seconds) is the default of every call made through it.
        """
        from azarr.sync import Array

        return Array(self, timeout=timeout)

    # ---------------------------------------------------------------- zarr-python 2 extras
    #: True for arrays made by `view` / `astype`: their metadata lives only in memory.
    _is_view = False
    #: When ``.zarray`` is reread (see ``azarr.core._array_ops``); ``"open"``: never after opening.
    _recheck_metadata: RecheckPolicy = "open"
    #: ``time.monotonic()`` of the last metadata read under a time-bound policy.
    _metadata_read_at = 0.0

    @property
    def is_view(self) -> bool:
        """True for arrays made by `view` or `astype` (zarr-python 2 ``is_view``)."""
        return self._is_view

    def _use_metadata(self, metadata: AnyArrayMetadata) -> None:
        """Adopt changed ``.zarray``/``zarr.json`` contents: the codec is rebuilt if the encoding
        changed, the pipeline always (it holds the codec and the fill value)."""
        old = self._metadata
        if (
            old.dtype != metadata.dtype
            or old.inner_chunks != metadata.inner_chunks
            or old.chain != metadata.chain
        ):
            self._codec = self._make_codec(metadata)
        self._metadata = metadata
        self._pipeline = self._make_pipeline()

    def _adopt_metadata(self, metadata: AnyArrayMetadata, attributes: dict[str, Any]) -> None:
        """Use newly read metadata and attributes (the codec is rebuilt only if the encoding changed)."""
        self._use_metadata(metadata)
        self._attrs = self._make_attributes(attributes)
        self._metadata_read_at = time.monotonic()

    async def refresh(self) -> None:
        """Reread ``.zarray`` and ``.zattrs``: see another writer's resize or attribute change.

        zarr-python 2 does this before every operation with
        ``cache_metadata=False``; here it happens on demand, or by policy
        (`set_recheck_metadata`). A view keeps its overrides and is not refreshed.

        Raises
        ------
        ArrayNotFoundError
            The array was deleted.
        MetadataError
            The new document is invalid.
        """
        if not self._is_view:
            await refresh_array(self)

    def set_recheck_metadata(self, policy: RecheckPolicy) -> AsyncArray:
        """Choose when ``.zarray`` is reread: ``"open"`` (never), True (before every operation) or seconds.

        TensorStore's ``recheck_cached_metadata``; ``True`` is zarr-python 2's
        ``cache_metadata=False``. Returns the array itself.

        Raises
        ------
        ValueError
            Not a valid policy.
        """
        self._recheck_metadata = check_recheck_policy(policy)
        self._metadata_read_at = time.monotonic()
        return self

    def view(
        self,
        shape: Any = None,
        chunks: Any = None,
        dtype: Any = None,
        fill_value: Any = None,
        filters: Any = None,
        read_only: bool | None = None,
    ) -> AsyncArray:
        """The same stored chunks read through different metadata (zarr-python 2 ``Array.view``).

        Overrides apply to the view only; ``.zarray`` is never written through
        a view (``resize``/``append``/``set_fill_value`` raise), but data writes
        go to the shared chunks, encoded with the view's metadata. A ``dtype``
        of another item size reinterprets the chunk bytes (the chunk shape
        must then match the stored bytes); a changed ``shape`` or ``chunks``
        makes the view read the same keys with another grid.

        Raises
        ------
        MetadataError
            The overridden metadata is invalid.
        """
        metadata = view_metadata(
            self, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill_value, filters=filters
        )
        view = AsyncArray(
            self.store,
            self._path,
            metadata,
            self._attrs.asdict(),
            read_only=self._read_only if read_only is None else read_only,
            allow_pickle=self._allow_pickle,
            write_empty_chunks=self._write_empty_chunks,
            partial_decompress=self._partial_decompress,
            cache=self._cache,
            synchronizer=self._synchronizer,
            cache_attrs=self._cache_attrs,
        )
        view._is_view = True
        return view

    def astype(self, dtype: Any) -> AsyncArray:
        """A read-only view decoding the stored values to ``dtype`` (zarr-python 2 ``Array.astype``).

        Adds numcodecs' ``AsType`` filter in front of the array's filters, as
        zarr-python 2 does, so each chunk is converted as it is decoded.
        """
        new_dtype = np.dtype(dtype)
        return self.view(filters=astype_filters(self, new_dtype), dtype=new_dtype, read_only=True)

    def islice(self, start: int | None = None, end: int | None = None) -> AsyncIterator[Any]:
        """Iterate ``async for row in arr.islice(start, end)`` over axis 0 (zarr-python 2 ``islice``).

        Reads one chunk row at a time (the next one while the current is
        consumed), never the whole array.

        Raises
        ------
        TypeError
            The array is 0-d.
        ValueError
            ``start`` or ``end`` is negative or not an int.
        """
        return iterate_rows(self, start, end)

    def __aiter__(self) -> AsyncIterator[Any]:
        """``async for row in arr``: the rows along axis 0 (zarr-python 2 ``iter(arr)``)."""
        return self.islice()

    async def set_fill_value(self, value: Any) -> None:
        """Change the fill value and write ``.zarray`` (zarr-python 2 ``arr.fill_value = value``).

        Stored chunks keep their values; missing chunks read as the new value.

        Raises
        ------
        ReadOnlyError
            The array is read-only, or a view.
        ValueError
            ``value`` is not valid for the dtype.
        """
        await write_fill_value(self, value)  # adopts the written document

    # ---------------------------------------------------------------- digest
    async def digest(self, hashname: str = "sha1") -> bytes:
        """Checksum of the stored chunks and metadata (zarr-python 2 ``Array.digest``).

        Hashes each chunk's stored bytes in C order of the chunk grid (``b""`` for
        a missing chunk), then ``.zarray`` and ``.zattrs``, exactly as zarr-python
        2.18 does, so both libraries give the same value for the same store. A Zarr
        v3 array: its chunks by their v3 keys, then ``zarr.json`` (zarr-python 3 has no
        ``digest``; see ``azarr.core._digest``).

        Parameters
        ----------
        hashname : str
            A `hashlib.new` name; default ``"sha1"``.

        Returns
        -------
        bytes

        Raises
        ------
        ValueError
            Unknown ``hashname``.
        StoreError
            A key could not be read.
        """
        from azarr.core._digest import array_digest

        return await array_digest(self, hashname)

    async def hexdigest(self, hashname: str = "sha1") -> str:
        """`digest` as a hexadecimal string (zarr-python 2 ``Array.hexdigest``)."""
        return (await self.digest(hashname)).hex()


# -------------------------------------------------------------------- helpers
def _is_ellipsis(selection: Any) -> bool:
    return selection is Ellipsis or (isinstance(selection, tuple) and selection == (Ellipsis,))


def _check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, but the selection has shape {shape}")
    if out.dtype != dtype and not _same_fields(out.dtype, dtype):
        raise ValueError(f"out has dtype {out.dtype}, but the selection has dtype {dtype}")
    if not out.flags.writeable:
        raise ValueError("out must be writeable")
    return out


def _is_record(value: Any) -> bool:
    """Whether ``value`` holds records: a structured array or scalar, or a tuple (one record)."""
    dtype = getattr(value, "dtype", None)
    return isinstance(value, tuple) or (isinstance(dtype, np.dtype) and dtype.names is not None)


def _same_fields(out: np.dtype[Any], dtype: np.dtype[Any]) -> bool:
    """The same named fields and field types, laid out apart: NumPy's view of several fields (``a[["x", "y"]]``)."""
    return (
        out.names is not None
        and out.names == dtype.names
        and all(out.fields[n][0] == dtype.fields[n][0] for n in out.names)  # type: ignore[index]
    )


def _is_scalar(value: Any, dtype: np.dtype[Any]) -> bool:
    """Zarr-python 2 ``is_scalar``, except that lists fill object arrays element-wise."""
    if np.isscalar(value) or value is None:
        return True
    if isinstance(value, np.ndarray) or hasattr(value, "__array__"):
        return getattr(value, "shape", None) == ()
    if isinstance(value, tuple) and dtype.names is not None and len(value) == len(dtype.names):
        return True
    return dtype.kind == "O" and not isinstance(value, (list, tuple))


def _prepare_value(
    value: Any, shape: tuple[int, ...], result_shape: tuple[int, ...], dtype: np.dtype[Any]
) -> np.ndarray[Any, Any]:
    """``value`` as an array of the indexer's allocation ``shape`` (broadcast, not copied, where possible)."""
    if dtype.subdtype is not None:
        # A subarray field: each element is an array of the field's shape.
        base, sub = dtype.subdtype
        return _prepare_value(value, shape + sub, result_shape + sub, base)
    if result_shape == () or _is_scalar(value, dtype):
        if isinstance(value, np.ndarray) and value.ndim == 0:
            # Its element: an object holder would keep the 0-d array itself as the element
            # (NumPy's `holder[()] = array`), which no object codec encodes.
            value = value[()]
        if dtype.kind == "O" and isinstance(value, np.str_ | np.bytes_):
            value = value.item()  # a str or bytes, as VLenUTF8 / VLenBytes take (zarr-python 2 converts too)
        # A 0-d holder keeps sequences (a VLenArray element, a structured tuple) as one element.
        holder = np.empty((), dtype=dtype)
        holder[()] = value
        return np.broadcast_to(holder, shape)
    array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=dtype)
    try:
        array = np.broadcast_to(array, result_shape)
    except ValueError:
        raise ValueError(
            f"value of shape {array.shape} does not match the selection of shape {result_shape} "
            "(and cannot be broadcast to it)"
        ) from None
    return array if shape == result_shape else array.reshape(shape)
