"""The logic behind ``AsyncArray``'s zarr-python 2 extras: views, ``astype``, ``islice``,
a settable fill value, and re-reading metadata another writer changed.

Metadata recheck policy (TensorStore's ``recheck_cached_metadata``, zarr-python
2's ``cache_metadata``), set per array with `AsyncArray.set_recheck_metadata`
or ``open_array(..., recheck_metadata=...)``:

``"open"`` (default; zarr-python 2 ``cache_metadata=True``)
    ``.zarray`` is read when the array is opened and never again: shape, chunks
    and dtype are fixed for the life of the object. Cheapest; right when no one
    else resizes the array while it is open. `AsyncArray.refresh` rereads on demand.
``True`` (zarr-python 2 ``cache_metadata=False``)
    ``.zarray`` and ``.zattrs`` are reread before every read, write, resize or
    append (one extra request each), so another process's resize is seen at once.
``seconds`` (a number, TensorStore's time bound)
    Reread before an operation when the last read is older than that many seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import math
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar

import numpy as np

from azarr.core._formats import read_node
from azarr.errors import ArrayNotFoundError, ReadOnlyError
from azarr.metadata import AnyArrayMetadata, ArrayV3Metadata

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray

RecheckPolicy = bool | float | Literal["open"]
P = ParamSpec("P")
T = TypeVar("T")

# The array whose operation is running, so the operations it calls on itself
# (getitem -> get_basic_selection) do not reread its metadata a second time; an
# operation on another array (a streamed copy's source) still applies its own policy.
_RECHECKED: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "azarr_metadata_rechecked", default=None
)
#: True while an array operation that writes runs (see `rechecks_metadata`).
WRITING: contextvars.ContextVar[bool] = contextvars.ContextVar("azarr_array_writing", default=False)


def check_recheck_policy(policy: Any) -> RecheckPolicy:
    """Validate a recheck policy (see the module docstring).

    Raises
    ------
    ValueError
        Not ``"open"``, a bool, or a number of seconds >= 0.
    """
    if policy == "open" or isinstance(policy, bool):
        return policy  # type: ignore[no-any-return]
    if isinstance(policy, (int, float)) and math.isfinite(policy) and policy >= 0:
        return float(policy)
    raise ValueError(f"recheck_metadata must be 'open', True, False or seconds >= 0, got {policy!r}")


def rechecks_metadata(
    method: Callable[P, Coroutine[Any, Any, T]],
) -> Callable[P, Coroutine[Any, Any, T]]:
    """Decorate an ``AsyncArray`` operation so it first applies the array's recheck policy.

    It also records whether the operation writes (``set_*``, ``append``,
    ``resize``) in `WRITING`, which `StrictReadStore`
    reads: a partial write into a missing chunk starts from the fill value even
    when reads of missing chunks are errors. The wrapper costs about 0.4 µs per
    call with the default policy (a single-element read takes ~90 µs).
    """
    writes = method.__name__.startswith(("set", "append", "resize"))

    @functools.wraps(method)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        array: AsyncArray = args[0]  # type: ignore[assignment]
        policy = array._recheck_metadata
        # `is False`, not `in (..., False)`: a time bound of 0.0 seconds equals False
        if not (policy is False or policy == "open" or _RECHECKED.get() is array) and _is_due(array):
            await array.refresh()
        rechecked = _RECHECKED.set(array)
        # Set only when it changes (a read outside any write: every random read), as the
        # context's mapping is copied on each set.
        writing = WRITING.set(writes) if WRITING.get() is not writes else None
        try:
            return await method(*args, **kwargs)
        finally:
            if writing is not None:
                WRITING.reset(writing)
            _RECHECKED.reset(rechecked)

    return wrapper


async def recheck_if_due(array: AsyncArray) -> None:
    """Apply ``array``'s recheck policy now (before its shape is used outside its own operations)."""
    policy = array._recheck_metadata
    if not (policy is False or policy == "open") and _is_due(array):
        await array.refresh()


def _is_due(array: AsyncArray) -> bool:
    policy = array._recheck_metadata
    if policy is True:
        return True
    return time.monotonic() - array._metadata_read_at > float(policy)


async def refresh_array(array: AsyncArray) -> None:
    """Reread ``.zarray`` and ``.zattrs`` (or ``zarr.json``) and adopt them (see `AsyncArray.refresh`)."""
    found = await read_node(array._io, array.path, zarr_format=array.zarr_format)  # type: ignore[arg-type]
    if found is None or found.kind != "array":
        raise ArrayNotFoundError(
            f"array {array.name!r} is gone from {array.store.url} ({array._metadata_key!r} is missing)"
        )
    array._adopt_metadata(found.array_metadata(array.path), found.attributes_dict(array.path))


def view_metadata(
    array: AsyncArray,
    *,
    shape: Any = None,
    chunks: Any = None,
    dtype: Any = None,
    fill_value: Any = None,
    filters: Any = None,
) -> AnyArrayMetadata:
    """The array's metadata with zarr-python 2 ``Array.view``'s overrides applied.

    For a Zarr v3 array ``filters`` replace its array -> array numcodecs codecs
    (``numcodecs.*`` entries, after any ``transpose``), zarr-python 3's meaning of
    ``filters``; the serializer and bytes -> bytes codecs stay.
    """
    from azarr.core._normalize import normalize_chunks, normalize_filters, normalize_shape

    changes: dict[str, Any] = {}
    new_dtype = array.dtype if dtype is None else np.dtype(dtype)
    if dtype is not None:
        changes["dtype"] = new_dtype
        if fill_value is None and array.fill_value is not None:
            # the old fill value in the new type, where it converts (zarr 2 keeps it as is)
            try:
                changes["fill_value"] = np.array(array.fill_value).astype(new_dtype)[()]
            except (TypeError, ValueError):
                changes["fill_value"] = None
    new_shape = array.shape if shape is None else normalize_shape(shape)
    if shape is not None:
        changes["shape"] = new_shape
    if chunks is not None:
        changes["chunks"] = normalize_chunks(chunks, new_shape, new_dtype.itemsize)
    if fill_value is not None:
        changes["fill_value"] = fill_value
    if filters is not None:
        if isinstance(array.metadata, ArrayV3Metadata):
            changes["codecs"] = _v3_codecs_with_filters(array.metadata, normalize_filters(filters) or [])
        else:
            changes["filters"] = normalize_filters(filters)
    return array.metadata.replace(**changes)


def _v3_codecs_with_filters(
    metadata: ArrayV3Metadata, filters: list[dict[str, Any]]
) -> tuple[dict[str, Any], ...]:
    """``metadata``'s v3 codecs with numcodecs ``filters`` as its array -> array codecs."""
    from azarr.codecs._v3 import ARRAY_TO_ARRAY, codec_name, numcodecs_to_v3

    def is_filter(entry: Any) -> bool:
        name = codec_name(entry) or ""
        return name.startswith("numcodecs.") and name[len("numcodecs.") :] in ARRAY_TO_ARRAY

    kept = [dict(c) for c in metadata.codecs if not is_filter(c)]
    transposes = 0
    while transposes < len(kept) and codec_name(kept[transposes]) == "transpose":
        transposes += 1
    added = [numcodecs_to_v3(f) for f in filters]
    return (*kept[:transposes], *added, *kept[transposes:])


def astype_filters(array: AsyncArray, dtype: np.dtype[Any]) -> list[dict[str, Any]]:
    """zarr-python 2 ``Array.astype``: an ``AsType`` filter first, decoding the stored type to ``dtype``."""
    astype = {"id": "astype", "encode_dtype": array.dtype.str, "decode_dtype": dtype.str}
    if isinstance(array.metadata, ArrayV3Metadata):
        # The v3 array's numcodecs array -> array codecs are its filters (see view_metadata).
        from azarr.codecs._v3 import ARRAY_TO_ARRAY

        return [astype, *(f for f in array.metadata.chain.filters if f["id"] in ARRAY_TO_ARRAY)]
    return [astype, *(array.metadata.filters or [])]


async def iterate_rows(array: AsyncArray, start: int | None, end: int | None) -> AsyncIterator[Any]:
    """zarr-python 2 ``Array.islice``: rows ``start:end`` along axis 0, one chunk row read at a time.

    The next chunk row is fetched while the caller consumes the current one.
    """
    if array.ndim == 0:
        raise TypeError("Array is zero-dimensional and cannot be iterated")
    start = 0 if start is None else start
    end = array.shape[0] if end is None or end > array.shape[0] else end
    if not isinstance(start, int) or start < 0:
        raise ValueError("start must be a nonnegative integer")
    if not isinstance(end, int) or end < 0:
        raise ValueError("end must be a nonnegative integer")
    if start >= end:
        return
    step = array.chunks[0]

    def fetch(row_start: int) -> asyncio.Task[Any]:
        return asyncio.ensure_future(array.get_basic_selection(slice(row_start, min(row_start + step, end))))

    block_start = start - start % step
    pending: asyncio.Task[Any] | None = fetch(block_start)
    try:
        while pending is not None:
            block = await pending
            next_start = block_start + step
            pending = fetch(next_start) if next_start < end else None
            for j in range(max(start, block_start), min(end, next_start)):
                yield block[j - block_start]
            block_start = next_start
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            # the caller stopped early: the prefetch's outcome no longer matters
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending


async def write_fill_value(array: AsyncArray, value: Any) -> AnyArrayMetadata:
    """Validate ``value`` as ``array``'s fill value and store it in ``.zarray``.

    A conditional read-modify-write of the stored document (as ``resize``), so a
    concurrent resize by another writer is kept.
    """
    from azarr.core._normalize import normalize_fill_value

    if array._is_view:
        raise ReadOnlyError(
            f"cannot change the fill value of view {array.name!r}: views never write metadata"
        )
    array._check_writable()
    fill_value = normalize_fill_value(value, array.dtype)
    return await array._update_metadata(lambda stored: stored.replace(fill_value=fill_value))
