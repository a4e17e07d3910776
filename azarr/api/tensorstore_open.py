"""``open_zarr2``: TensorStore's zarr2 driver open options on top of `azarr.open_array`.

TensorStore describes an open by flags rather than a mode string and checks
what it opens against the caller's constraints (its "schema"). The mapping:

| TensorStore | azarr |
| --- | --- |
| ``open=True`` (default), ``create=False`` | mode ``"r+"`` (``"r"`` with ``read_only``) |
| ``create=True``, ``open=False`` | mode ``"w-"`` (fails if it exists) |
| ``open=True, create=True`` | mode ``"a"`` |
| ``create=True, delete_existing=True`` | mode ``"w"`` |
| ``assume_metadata=True`` | the given metadata, ``.zarray`` neither read nor written |
| ``fill_missing_data_reads=False`` | `ChunkNotFoundError` on missing chunks |
| ``store_data_equal_to_fill_value`` (default False) | ``write_empty_chunks`` (zarr-python 2 default True) |
| ``recheck_cached_metadata`` | ``recheck_metadata`` (``"open"``, True, seconds) |
| ``metadata.shape/dtype/chunks/...`` on open | checked against the stored ``.zarray`` |
| ``rank`` | checked against the stored rank |
| ``metadata_key`` | the array document under another name (`MetadataKeyStore`) |

TensorStore's URL form ``"<kvstore-url>|zarr2:"`` is accepted as the store, e.g.
``"file:///data/a.zarr|zarr2:"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from azarr.api.creation import build_array_metadata, resolve_store
from azarr.api.opening import open_array
from azarr.core._paths import node_key, normalize_path
from azarr.core.array import AsyncArray
from azarr.errors import MetadataError
from azarr.metadata import ZARRAY, AnyArrayMetadata
from azarr.storage import ByteRange, Store, StoreLike, WrapperStore

_URL_DRIVER = "|zarr2:"
# Creation arguments TensorStore calls the array's metadata (its "schema" constraints).
_METADATA_FIELDS = (
    "shape",
    "chunks",
    "dtype",
    "compressor",
    "fill_value",
    "order",
    "filters",
    "dimension_separator",
)


def split_zarr2_url(url: str) -> tuple[str, str]:
    """``"file:///d/a.zarr|zarr2:"`` -> ``("file:///d/a.zarr", "")``; ``"...|zarr2:sub/x"`` gives path ``"sub/x"``.

    Raises
    ------
    ValueError
        The URL has no ``|zarr2:`` part, or another driver after it.
    """
    kvstore, sep, rest = url.partition(_URL_DRIVER)
    if not sep:
        raise ValueError(f"not a TensorStore zarr2 URL (expected '<kvstore-url>|zarr2:'): {url!r}")
    if "|" in rest:
        raise ValueError(f"only one driver may follow the kvstore in {url!r}")
    return kvstore, rest


class MetadataKeyStore(WrapperStore):
    """``store`` with the ``.zarray`` of the array at ``path`` kept under ``metadata_key`` (TensorStore option).

    Only that one document is renamed; every other key passes through.
    """

    wrapper_name = "metadata-key"

    def wrapper_params(self) -> dict[str, Any]:
        return {"path": self._path, "metadata_key": self._metadata_key}

    def __init__(self, store: Store, path: str, metadata_key: str) -> None:
        if not metadata_key or "/" in metadata_key:
            raise ValueError(f"metadata_key must be a plain file name, got {metadata_key!r}")
        super().__init__(store)
        # Keys are translated in _get/_set; the inner store's conditional operations would
        # bypass that, so this wrapper offers none (writes through it are plain replaces).
        self.supports_conditional_writes = False
        self.supports_conditional_reads = False
        self._path = path
        self._metadata_key = metadata_key
        self._zarray = node_key(path, ZARRAY)
        self._renamed = node_key(path, metadata_key)

    def _map(self, key: str) -> str:
        return self._renamed if key == self._zarray else key

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self.inner.get(self._map(key), byte_range)

    async def _set(self, key: str, value: bytes) -> None:
        await self.inner.set(self._map(key), value)

    async def _delete(self, key: str) -> None:
        await self.inner.delete(self._map(key))

    async def _exists(self, key: str) -> bool:
        return await self.inner.exists(self._map(key))

    async def _getsize(self, key: str) -> int:
        return await self.inner.getsize(self._map(key))

    async def _delete_prefix(self, prefix: str) -> None:
        await self.inner.delete_prefix(prefix)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async for key in self.inner.list_prefix(prefix):
            yield self._zarray if key == self._renamed else key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        renamed = self._renamed.rpartition("/")[2]
        at_array = node_key(prefix.rstrip("/"), ZARRAY) == self._zarray
        async for name in self.inner.list_dir(prefix):
            yield ZARRAY if at_array and name == renamed else name


def _mode(open: bool, create: bool, delete_existing: bool, read_only: bool) -> str:
    if delete_existing and (not create or open):
        raise ValueError("delete_existing=True needs create=True and open=False (TensorStore's rule)")
    if not open and not create:
        raise ValueError("at least one of open=True and create=True is needed")
    if read_only and create:
        raise ValueError("read_only cannot be combined with create=True")
    if delete_existing:
        return "w"
    if open and create:
        return "a"
    if create:
        return "w-"
    return "r" if read_only else "r+"


def check_schema(array: AsyncArray, expected: AnyArrayMetadata, given: set[str], rank: int | None) -> None:
    """Raise MetadataError naming the first field of ``array``'s metadata that differs from a given constraint."""
    where = node_key(array.path, ZARRAY)
    if rank is not None and array.ndim != rank:
        raise MetadataError(f"{where!r}: rank {array.ndim} does not match the expected rank {rank}")
    stored = array.metadata
    for field in _METADATA_FIELDS:
        if field not in given:
            continue
        want, have = getattr(expected, field), getattr(stored, field)
        if field == "fill_value":
            same = np.array_equal(
                np.asarray(want), np.asarray(have), equal_nan=np.asarray(want).dtype.kind in "fc"
            )
        else:
            same = want == have
        if not same:
            raise MetadataError(f"{where!r}: {field} {have!r} does not match the expected {field} {want!r}")


async def open_zarr2(
    store: StoreLike,
    path: str | None = None,
    *,
    open: bool = True,
    create: bool = False,
    delete_existing: bool = False,
    assume_metadata: bool = False,
    read_only: bool = False,
    rank: int | None = None,
    fill_missing_data_reads: bool = True,
    store_data_equal_to_fill_value: bool = False,
    recheck_cached_metadata: bool | float | str = "open",
    metadata_key: str = ZARRAY,
    storage_options: dict[str, Any] | None = None,
    **metadata: Any,
) -> AsyncArray:
    """Open or create an array with TensorStore's zarr2 driver options (see the module docstring).

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
        The store, or a URL; ``"<kvstore-url>|zarr2:"`` is accepted too.
    path : str, optional
        Array path in the store.
    open : bool
        Open an existing array (TensorStore's ``open`` flag).
    create : bool
        Create the array if there is none (TensorStore's ``create`` flag).
    delete_existing : bool
        Replace an existing array (TensorStore's ``delete_existing`` flag).
    assume_metadata : bool
        Use the given ``metadata`` without reading or writing ``.zarray``
        (TensorStore: for speed when the caller knows the array).
    read_only : bool
        Open for reading only.
    rank : int, optional
        Expected number of dimensions.
    fill_missing_data_reads : bool
        False: reading a missing chunk raises.
    store_data_equal_to_fill_value : bool
        Store chunks equal to the fill value (TensorStore's default False).
    recheck_cached_metadata : {"open", True, False} or seconds
        When ``.zarray`` is reread.
    metadata_key : str
        Name of the array's metadata document (default ``".zarray"``). Other
        Zarr readers only find the array under the default name.
    **metadata
        ``shape``, ``chunks``, ``dtype``, ``compressor``, ``fill_value``,
        ``order``, ``filters``, ``dimension_separator``: used to create the
        array, and checked against an existing one when opening.

    Raises
    ------
    MetadataError
        An existing array does not match the given metadata or ``rank``.
    ArrayNotFoundError, ContainsArrayError
        As the mode mapped from the flags implies.
    ValueError
        Contradictory flags, or an unknown metadata field.
    """
    unknown = set(metadata) - set(_METADATA_FIELDS)
    if unknown:
        raise ValueError(f"unknown zarr2 metadata fields {sorted(unknown)}; known: {list(_METADATA_FIELDS)}")
    if isinstance(store, str) and _URL_DRIVER in store:
        store, url_path = split_zarr2_url(store)
        path = "/".join(p for p in (url_path.strip("/"), normalize_path(path)) if p)
    mode = _mode(open, create, delete_existing, read_only)
    the_store = resolve_store(store, storage_options, read_only=mode == "r")
    node_path = normalize_path(path)
    if metadata_key != ZARRAY:
        the_store = MetadataKeyStore(the_store, node_path, metadata_key)
    if assume_metadata or create or metadata:
        if "shape" not in metadata:
            if assume_metadata:
                raise ValueError("assume_metadata=True needs the metadata, at least shape and dtype")
            expected = None
        else:
            expected = build_array_metadata(
                metadata["shape"],
                chunks=metadata.get("chunks", True),
                dtype=metadata.get("dtype", "f8"),
                compressor=metadata.get("compressor", "default"),
                fill_value=metadata.get("fill_value"),
                order=metadata.get("order", "C"),
                filters=metadata.get("filters"),
                object_codec=None,
                dimension_separator=metadata.get("dimension_separator"),
                key=node_key(node_path, ZARRAY),
            )
    else:
        expected = None
    if assume_metadata:
        assert expected is not None
        array = AsyncArray(
            the_store,
            node_path,
            expected,
            {},
            read_only=read_only,
            write_empty_chunks=store_data_equal_to_fill_value,
        )
        return array.set_recheck_metadata(False)
    create_kwargs: dict[str, Any] = {}
    if expected is not None:
        # fill_value defaults to null above: TensorStore's default (zarr-python 2's is 0)
        create_kwargs = {
            "shape": expected.shape,
            "chunks": expected.chunks,
            "dtype": expected.dtype,
            "compressor": expected.compressor,
            "fill_value": expected.fill_value,
            "order": expected.order,
            "filters": list(expected.filters) if expected.filters else None,
            "dimension_separator": expected.dimension_separator,
        }
    array = await open_array(
        the_store,
        mode,
        path=node_path,
        write_empty_chunks=store_data_equal_to_fill_value,
        recheck_metadata=recheck_cached_metadata,
        fill_missing_data_reads=fill_missing_data_reads,
        **create_kwargs,
    )
    if expected is not None:
        check_schema(array, expected, set(metadata), rank)
    elif rank is not None:
        check_schema(array, array.metadata, set(), rank)
    return array
