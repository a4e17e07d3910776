"""``from_azarr`` / ``to_azarr``: dask arrays over Zarr v2 arrays, read and written through azarr."""

from __future__ import annotations

import itertools
from typing import Any

import dask.array as da
import numpy as np
from dask.array.core import normalize_chunks

import azarr
from azarr.core import AsyncArray
from azarr.dask._secede import outside_worker_pool
from azarr.sync import Array, run


class _Chunked:
    """What a dask task holds: the array's configuration, read and written through the sync facade.

    Pickles as the `AsyncArray` it wraps (store configuration, path,
    ``.zarray``), never data or sessions; in a worker process the first task starts
    that process's azarr I/O loop and store sessions.
    """

    def __init__(self, array: AsyncArray, *, secede: bool = False) -> None:
        self.array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim
        self.secede = secede

    def __getitem__(self, selection: Any) -> Any:
        if not self.secede:
            return run(self.array.get_basic_selection(selection))
        with outside_worker_pool(_nbytes(selection, self.shape, self.dtype.itemsize)):
            return run(self.array.get_basic_selection(selection))

    def __setitem__(self, selection: Any, value: Any) -> None:
        run(self.array.set_basic_selection(selection, np.asarray(value)))

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        # Identity from configuration (store URL and options, node path, .zarray), as da.from_zarr
        # does: two opens of one array give one token, so dask deduplicates their graphs.
        store = self.array.store
        options = getattr(store, "storage_options", None)
        return (
            "azarr",
            type(store).__name__,
            store.url,
            options,
            self.array.path,
            self.array.metadata.to_json(),
        )


def _nbytes(selection: Any, shape: tuple[int, ...], itemsize: int) -> int:
    """Decoded bytes of a dask block: ``selection`` is a tuple of slices (``fancy=False``)."""
    count = 1
    for sel, n in zip(selection if isinstance(selection, tuple) else (selection,), shape, strict=False):
        count *= len(range(*sel.indices(n))) if isinstance(sel, slice) else 1
    return count * itemsize


def _as_async_array(
    source: Any, *, mode: str, path: str | None, storage_options: Any, **kwargs: Any
) -> AsyncArray:
    if isinstance(source, AsyncArray):
        return source
    if isinstance(source, Array):
        return source.async_array
    node: AsyncArray = run(
        azarr.open_array(source, mode, path=path, storage_options=storage_options, **kwargs)
    )
    return node


def from_azarr(
    url_or_array: Any,
    chunks: Any = None,
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    name: str | None = None,
    inline_array: bool = False,
    secede: bool = True,
    **open_kwargs: Any,
) -> da.Array:
    """A dask array reading a Zarr v2 array through azarr (zarr-python 2 / dask ``da.from_zarr``).

    Building the graph does no I/O beyond opening the array (``meta`` is given);
    each task reads its block with one budgeted azarr call. The graph pickles
    as configuration, so it runs on dask.distributed workers (see `azarr.dask`
    for how request budgets behave there).

    Parameters
    ----------
    url_or_array : str, os.PathLike, Store, AsyncArray or azarr.sync.Array
        The array, or where it is (opened read-only).
    chunks : optional
        Dask chunks (anything ``dask.array.core.normalize_chunks`` takes). Default:
        the Zarr chunks; a sharded Zarr v3 array's shards (a task reads a shard with one
        GET; xarray's convention too). ``"auto"`` picks whole multiples of the Zarr chunks of about
        dask's ``array.chunk-size`` (as ``da.from_array`` for chunked sources). A block
        spanning several Zarr chunks is read in one call that fetches them concurrently:
        with small Zarr chunks and latency-bound storage, multiples read much faster than
        one task per Zarr chunk, whose throughput is capped at (worker threads x chunk
        size / request latency).
    path : str, optional
        Array path within the store.
    storage_options : dict, optional
        fsspec-style options for a URL.
    name : str, optional
        Dask key prefix; default ``"from-azarr-<token>"`` with a deterministic token
        from the store URL, path and ``.zarray``.
    inline_array : bool
        Embed the array in every task instead of one graph key (as ``da.from_array``).
    secede : bool
        On a dask.distributed worker, a task reading a block of at most 8 MiB leaves the
        worker's thread pool while its chunks are fetched (``distributed.secede`` /
        ``rejoin``), so the worker runs other tasks meanwhile and requests in flight are
        bounded by azarr's store budget rather than ``threads_per_worker``; at most 16
        reads per worker process do so at once (`azarr.dask._secede`). No effect
        elsewhere (dask's threaded scheduler). False keeps every read in the pool.
    **open_kwargs
        More `azarr.open_array` arguments (``allow_pickle``, ...).

    Returns
    -------
    dask.array.Array
        Of the array's shape and dtype.

    Raises
    ------
    ArrayNotFoundError
        No array there.
    """
    array = _as_async_array(url_or_array, mode="r", path=path, storage_options=storage_options, **open_kwargs)
    # previous_chunks: "auto" (or -1/None per axis) picks whole multiples of the Zarr chunks, as
    # da.from_array does for arrays exposing .chunks, so no Zarr chunk is read by two tasks.
    # A sharded array's unit is its shard: one task reads one shard (one GET).
    stored = _stored_chunks(array)
    normalized = normalize_chunks(
        stored if chunks is None else chunks,
        array.shape,
        dtype=array.dtype,
        previous_chunks=stored,
    )
    wrapper = _Chunked(array, secede=secede)
    token_name = name or f"from-azarr-{da.core.tokenize(wrapper, normalized)}"
    return da.from_array(
        wrapper,
        chunks=normalized,
        name=token_name,
        lock=False,
        asarray=False,
        fancy=False,
        meta=np.empty((0,) * array.ndim, dtype=array.dtype),
        inline_array=inline_array,
    )


def _stored_chunks(array: AsyncArray) -> tuple[int, ...]:
    """The shape of the objects ``array`` stores: its shards when it is sharded, else its chunks."""
    return array.shards or array.chunks


def _aligned_chunks(sizes: tuple[int, ...], zarr_chunk: int, start: int) -> tuple[int, ...] | None:
    """Dask chunk sizes along one dimension whose boundaries fall on Zarr chunk boundaries
    (``start`` is where the written region begins); None if ``sizes`` already do."""
    edges = np.cumsum((start, *sizes))
    inner = edges[1:-1]
    if all(e % zarr_chunk == 0 for e in inner):
        return None
    stop = int(edges[-1])
    bounds = [start, *range((start // zarr_chunk + 1) * zarr_chunk, stop, zarr_chunk), stop]
    return tuple(int(b - a) for a, b in itertools.pairwise(bounds) if b > a)


def _align(darr: da.Array, target: AsyncArray, region: tuple[slice, ...], rechunk: bool) -> da.Array:
    new_chunks = []
    changed = False
    unit = "chunk" if target.shards is None else "shard"  # a sharded array stores shards whole
    for dim, (sizes, zc, sel) in enumerate(zip(darr.chunks, _stored_chunks(target), region, strict=True)):
        aligned = _aligned_chunks(sizes, zc, sel.start or 0)
        if aligned is not None and not rechunk:
            raise ValueError(
                f"dask chunks {sizes} along dimension {dim} do not end on Zarr {unit} boundaries "
                f"({unit} {zc}, region start {sel.start or 0}): two tasks would write one Zarr {unit}; "
                "rechunk, or pass rechunk=True"
            )
        changed |= aligned is not None
        new_chunks.append(aligned or sizes)
    return darr.rechunk(tuple(new_chunks)) if changed else darr


def _region(region: Any, shape: tuple[int, ...], darr: da.Array) -> tuple[slice, ...]:
    given = tuple(slice(0, n) for n in shape) if region is None else tuple(region)
    slices = tuple(slice(*s.indices(n)[:2]) for s, n in zip(given, shape, strict=True))
    extent = tuple(s.stop - s.start for s in slices)
    if extent != tuple(darr.shape):
        raise ValueError(f"region {slices} has shape {extent}, the dask array {darr.shape}")
    return slices


def to_azarr(
    darr: da.Array,
    url_or_array: Any,
    *,
    path: str | None = None,
    storage_options: dict[str, Any] | None = None,
    region: tuple[slice, ...] | None = None,
    overwrite: bool = False,
    rechunk: bool = True,
    compute: bool = True,
    **create_kwargs: Any,
) -> Any:
    """Write a dask array into a Zarr v2 array through azarr (dask ``da.to_zarr``).

    Every task writes whole Zarr chunks of its own (whole shards of a sharded Zarr v3
    array), so tasks never read-modify-write one chunk or shard concurrently: dask chunk
    boundaries must fall on those boundaries (offset by the region's start), which
    ``rechunk=True`` arranges and ``rechunk=False`` checks.

    Parameters
    ----------
    darr : dask.array.Array
        The data.
    url_or_array : str, os.PathLike, Store, AsyncArray or azarr.sync.Array
        An existing array (always written in place), or where to create one. A new
        array gets ``darr``'s shape and dtype and its first chunk sizes as Zarr chunks
        (``chunks=`` in ``create_kwargs`` overrides).
    path : str, optional
        Array path within the store.
    storage_options : dict, optional
        fsspec-style options for a URL.
    region : tuple of slice, optional
        Where in an existing array to write ``darr`` (its shape must match); the
        array is opened, not created.
    overwrite : bool
        Replace an existing array when creating.
    rechunk : bool
        Rechunk ``darr`` onto the Zarr chunk grid when needed (else raise).
    compute : bool
        Write now (True) or return a ``dask.delayed`` that writes when computed.
    **create_kwargs
        More `azarr.create` arguments (``compressor``, ``fill_value``, ...).

    Returns
    -------
    None or dask.delayed.Delayed
        The delayed write when ``compute=False``.

    Raises
    ------
    ValueError
        ``region`` does not match ``darr``'s shape; misaligned chunks with ``rechunk=False``.
    ContainsArrayError
        An array exists there, and neither ``overwrite`` nor ``region`` was given.
    """
    if isinstance(url_or_array, AsyncArray | Array) or region is not None:
        target = _as_async_array(url_or_array, mode="r+", path=path, storage_options=storage_options)
    else:
        create_kwargs.setdefault("chunks", tuple(c[0] if c else 1 for c in darr.chunks))
        target = run(
            azarr.create(
                darr.shape,
                dtype=darr.dtype,
                store=url_or_array,
                path=path,
                storage_options=storage_options,
                overwrite=overwrite,
                **create_kwargs,
            )
        )
    slices = _region(region, target.shape, darr)
    darr = _align(darr, target, slices, rechunk)
    return da.store(darr, _Chunked(target), regions=slices, lock=False, compute=compute)
