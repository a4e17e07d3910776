"""``ReferenceStore``: a read-only Zarr store whose chunks are byte ranges of other objects.

kerchunk and VirtualiZarr describe NetCDF4/HDF5, NetCDF3 and GRIB files as Zarr
hierarchies: metadata documents inline, and each chunk a ``[url, offset, length]``
reference into the original file (JSON reference sets, versions 0 and 1,
`azarr.storage._refs_json`; or Parquet reference directories,
`azarr.storage._refs_parquet`). This store answers keys from such a set.

It does no target I/O of its own on the managed path: `locate` says where a key's
bytes are -- inline, or a range of an object in a *target store* -- and
`azarr.scheduler.StoreIO` reads that range through the target store's own budget,
retries and timeouts (each target bucket or host resolved once to one live store
of its `StoreSpec`). The chunk pipeline locates a batch of chunks at once and reads
runs of neighbouring ranges with one request each (`azarr.pipeline._coalesced`).
The store's own ``get`` (for callers holding the store itself) reads targets
directly.

Hostile references get typed errors: malformed entries and negative offsets
(`InvalidReferenceError`), ranges past the end of their object (`ByteRangeError`),
targets outside the allowed schemes and hosts or with ``..`` segments
(`ReferenceTargetError`), more references than ``reference_max_refs``.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
from abc import abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from azarr import config
from azarr.errors import ByteRangeError, InvalidReferenceError, ReferenceSetNotFoundError
from azarr.storage._base import ByteRange, Store, validate_key
from azarr.storage._refs_json import JsonReferences, Reference
from azarr.storage._refs_parquet import ParquetReferences
from azarr.storage._spec import StoreSpec, anonymous_root
from azarr.storage._targets import TargetResolver, canonical_scheme
from azarr.storage._url import split_scheme

__all__ = [
    "LoadOnce",
    "LocatingStore",
    "Reader",
    "ReferenceStore",
    "TargetRange",
    "is_reference_location",
    "is_reference_mapping",
]

T = TypeVar("T")

#: ``read(store, key, byte_range) -> bytes | None``: how a reference store reads files
#: of other stores (its reference file, Parquet records): `StoreIO` passes the managed path.
Reader = Callable[[Store, str, ByteRange | None], Awaitable[bytes | None]]

# Keys of the reference options in storage_options (fsspec's ReferenceFileSystem names).
_REFERENCE_OPTIONS = frozenset(
    {"fo", "target_options", "remote_protocol", "remote_options", "allowed_targets"}
)
_METADATA_NAMES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")


@dataclass(frozen=True, slots=True)
class TargetRange:
    """Where a referenced key's bytes are: ``byte_range`` of ``key`` in ``store``
    (``byte_range`` None: the whole object)."""

    store: Store
    key: str
    byte_range: ByteRange | None
    url: str

    @property
    def nbytes(self) -> int | None:
        """Bytes referenced (None for a whole object)."""
        r = self.byte_range
        return None if r is None or r.end is None else r.end - r.start


def is_reference_location(url: str) -> bool:
    """Whether ``url`` names a reference set: a ``reference://`` URL or a ``.json`` file."""
    return url.startswith("reference://") or (url.endswith(".json") and "::" not in url)


def is_reference_mapping(mapping: Mapping[str, Any]) -> bool:
    """Whether a mapping is a decoded reference set rather than a store of bytes: a
    version 1 document, or a version 0 one whose metadata documents are strings."""
    if mapping.get("version") == 1 and isinstance(mapping.get("refs"), Mapping):
        return True
    return any(isinstance(mapping.get(name), str | dict) for name in _METADATA_NAMES)


async def _direct_read(store: Store, key: str, byte_range: ByteRange | None) -> bytes | None:
    return await store.get(key, byte_range)


class LoadOnce(Generic[T]):
    """A value loaded on first use, once for every caller and event loop: concurrent
    callers on one loop wait for the one load; a failed load is retried by the next caller."""

    def __init__(self) -> None:
        self.value: T | None = None
        self._pending: dict[asyncio.AbstractEventLoop, asyncio.Future[T]] = {}

    async def get(self, load: Callable[[], Awaitable[T]]) -> T:
        """The value, loading it with ``load()`` if no caller has yet."""
        if self.value is not None:
            return self.value
        loop = asyncio.get_running_loop()
        pending = self._pending.get(loop)
        if pending is not None:
            return await asyncio.shield(pending)
        pending = self._pending[loop] = loop.create_future()
        try:
            value = await load()
        except BaseException as exc:
            pending.set_exception(exc)
            pending.exception()
            raise
        finally:
            self._pending.pop(loop, None)
        pending.set_result(value)
        self.value = value
        return value


class LocatingStore(Store):
    """A read-only store whose keys are *located* -- inline bytes, or a `TargetRange` of an
    object in another store -- rather than read (`ReferenceStore`, `IcechunkStore`).

    `StoreIO` and the chunk pipeline read located ranges through the target stores' own
    managed paths (`resolves_references`); the primitives here read them directly.
    """

    supports_writes = False
    supports_deletes = False
    supports_listing = True
    #: Chunks are ranges of other objects: `StoreIO` reads them through `locate`.
    resolves_references = True

    @abstractmethod
    async def locate(
        self, keys: Sequence[str], read: Reader = _direct_read
    ) -> list[bytes | TargetRange | None]:
        """Where each key's bytes are: inline bytes, a `TargetRange`, or None (missing);
        the store's own files are read with ``read`` (`StoreIO` passes its managed path)."""

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        (located,) = await self.locate([key])
        return await read_located(located, byte_range, key, _direct_read)

    async def _exists(self, key: str) -> bool:
        (located,) = await self.locate([key])
        return located is not None

    async def _getsize(self, key: str) -> int:
        (located,) = await self.locate([key])
        if located is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        if isinstance(located, bytes):
            return len(located)
        nbytes = located.nbytes
        if nbytes is None:
            size = await located.store.getsize(located.key)
            start = 0 if located.byte_range is None else located.byte_range.start
            return max(size - start, 0)
        return nbytes

    async def _set(self, key: str, value: bytes) -> None:  # pragma: no cover - read-only
        self._check_writable(key)

    async def _delete(self, key: str) -> None:  # pragma: no cover - read-only
        self._check_writable(key)


class ReferenceStore(LocatingStore):
    """A read-only store over a kerchunk reference set (JSON v0/v1, or a Parquet directory).

    Parameters
    ----------
    fo : str or mapping
        The reference set: a URL or path of a JSON reference file (``refs.json``) or
        of a Parquet reference directory (one holding ``.zmetadata`` and
        ``<array>/refs.<i>.parq``), or the decoded reference document itself
        (``{"version": 1, "refs": {...}}`` or a version 0 ``{key: entry}`` mapping).
        fsspec ``ReferenceFileSystem``'s ``fo``.
    storage_options : dict, optional
        Options of the store the reference file is read from (fsspec's ``target_options``).
    remote_protocol : str, optional
        Scheme of target URLs written without one (``"s3"`` for ``bucket/file.nc``);
        it is also an allowed target scheme.
    remote_options : dict, optional
        ``storage_options`` of every target store (S3 endpoint and credentials, ...).
    allowed_targets : sequence of str, optional
        Schemes (``"s3"``) and URL prefixes (``"https://data.example/"``) references
        may name. Default ``azarr.config`` ``reference_allowed_targets``, whose default
        None allows the reference file's own scheme (plus ``remote_protocol``); a
        reference set given as a mapping may name any target unless this is given.

    Raises
    ------
    TypeError
        ``fo`` is neither a string nor a mapping.

    Notes
    -----
    The set is read on first use, not here. Keys are answered as zarr-python's
    ``FsspecStore`` over fsspec's ``ReferenceFileSystem`` answers them; a
    ``.zmetadata`` document is made from the set's metadata when it has none, so
    consolidated opens (xarray's default) cost no request.
    """

    def __init__(
        self,
        fo: str | os.PathLike[str] | Mapping[str, Any],
        *,
        storage_options: Mapping[str, Any] | None = None,
        remote_protocol: str | None = None,
        remote_options: Mapping[str, Any] | None = None,
        allowed_targets: Sequence[str] | None = None,
        read_only: bool = True,
    ) -> None:
        super().__init__(read_only=True)
        if isinstance(fo, os.PathLike):
            fo = os.fspath(fo)
        if not isinstance(fo, str | Mapping):
            raise TypeError(f"ReferenceStore needs a reference URL, path or mapping, got {type(fo).__name__}")
        self._fo = fo
        self._storage_options = dict(storage_options or {})
        self._remote_protocol = canonical_scheme(remote_protocol) if remote_protocol else None
        self._remote_options = dict(remote_options or {})
        self._allowed_param = None if allowed_targets is None else tuple(allowed_targets)
        self._root = anonymous_root("references") if isinstance(fo, Mapping) else self._normalize_fo(fo)
        self._table: LoadOnce[JsonReferences | ParquetReferences] = LoadOnce()
        self._targets = TargetResolver(
            self.allowed_targets, remote_protocol=self._remote_protocol, remote_options=self._remote_options
        )
        self._consolidated: bytes | None = None

    @staticmethod
    def _normalize_fo(fo: str) -> str:
        scheme, _ = split_scheme(fo)
        if scheme is None:
            return os.path.abspath(os.path.expanduser(fo))
        return fo

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        return f"reference://{self._root}"

    def _make_spec(self) -> StoreSpec:
        params: dict[str, Any] = {
            "remote_protocol": self._remote_protocol,
            "remote_options": self._remote_options,
            "allowed_targets": None if self._allowed_param is None else list(self._allowed_param),
        }
        if isinstance(self._fo, Mapping):
            params["references"] = self._fo  # kept by identity (an opaque option)
        return StoreSpec.create("reference", self._root, self._storage_options, params)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``reference://<url of the set>``, ``reference://`` with ``fo`` in the options
        (fsspec's spelling), or a ``.json`` path or URL; reference options
        (``remote_protocol``, ``remote_options``, ``allowed_targets``, ``target_options``)
        are taken out of ``storage_options``, the rest are the reference file's."""
        options = dict(storage_options or {})
        reference = {k: options.pop(k) for k in list(options) if k in _REFERENCE_OPTIONS}
        fo = url[len("reference://") :] if url.startswith("reference://") else url
        fo = reference.pop("fo", None) or fo
        if not fo:
            raise ValueError(f"{url!r} names no reference set (give reference://<url> or fo=)")
        options.update(reference.pop("target_options", None) or {})
        return cls(fo, storage_options=options, **reference).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> ReferenceStore:
        """The store of a spec made by `spec_from_url` or `spec`."""
        params = spec.constructor_params()
        fo = params.pop("references", None) or spec.root
        return cls(fo, storage_options=spec.storage_options(), **params)

    # ------------------------------------------------------------------ targets
    def allowed_targets(self) -> tuple[str, ...] | None:
        """The schemes and URL prefixes references may name; None: any."""
        allowed = self._allowed_param
        if allowed is None:
            setting = config.get("reference_allowed_targets")
            allowed = None if setting is None else tuple(setting)
        if allowed is None:
            if isinstance(self._fo, Mapping):
                return None
            scheme, _ = split_scheme(self._root)
            allowed = (canonical_scheme(scheme or "file"),)
        if self._remote_protocol:
            allowed = (*allowed, self._remote_protocol)
        return allowed

    def target(self, url: str, key: str) -> tuple[Store, str]:
        """The live store and key of a target ``url`` (each bucket or host opened once).

        Raises
        ------
        ReferenceTargetError
            ``url`` is outside `allowed_targets`, or has ``.``/``..`` segments.
        InvalidReferenceError
            ``url`` cannot name an object (no bucket, a query string).
        """
        return self._targets.resolve(url, f"reference {key!r} in {self.url}")

    # ------------------------------------------------------------------ the reference set
    async def table(self, read: Reader = _direct_read) -> JsonReferences | ParquetReferences:
        """The reference set, loaded on first use (once per store, whoever asks first).

        Raises
        ------
        InvalidReferenceError
            The set is not a JSON reference document or Parquet reference directory,
            is larger than ``reference_max_bytes`` or holds more than ``reference_max_refs``.
        ReferenceSetNotFoundError
            Nothing is stored at the reference URL (also a ``FileNotFoundError``).
        """
        return await self._table.get(lambda: self._load(read))

    async def _load(self, read: Reader) -> JsonReferences | ParquetReferences:
        max_refs = int(config.get("reference_max_refs"))
        fo = self._fo
        if isinstance(fo, Mapping):
            return await asyncio.to_thread(JsonReferences, fo, max_refs=max_refs)
        options = self._storage_options or None
        if not fo.endswith(".json"):
            directory = StoreSpec.from_url(fo, storage_options=options).open(read_only=True)
            index = await read(directory, ".zmetadata", None)
            if index is not None and b"record_size" in index:

                async def read_record(key: str) -> bytes | None:
                    return await read(directory, key, None)

                return ParquetReferences(index, read_record, where=fo)
        parent, name = posixpath.split(fo.rstrip("/"))
        folder = StoreSpec.from_url(parent or ".", storage_options=options).open(read_only=True)
        limit = int(config.get("reference_max_bytes"))
        data = await read(folder, name, ByteRange(0, limit + 1))
        if data is None:
            raise ReferenceSetNotFoundError(
                f"no reference set at {fo!r}: no reference file, nor a Parquet reference "
                "directory (a .zmetadata with a record_size)"
            )
        if len(data) > limit:
            raise InvalidReferenceError(
                f"reference file {fo!r} is larger than {limit} bytes (azarr.config reference_max_bytes)"
            )
        return await asyncio.to_thread(_parse_json, data, fo, max_refs)

    async def locate(
        self, keys: Sequence[str], read: Reader = _direct_read
    ) -> list[bytes | TargetRange | None]:
        """Where each key's bytes are: inline data, a `TargetRange`, or None (not in the set).

        Parameters
        ----------
        keys : sequence of str
            Store keys (validated).
        read : Reader, optional
            How files of the reference set are read (default: directly; `StoreIO` passes
            its managed path).

        Raises
        ------
        InvalidReferenceError, ReferenceTargetError
            A malformed or disallowed reference.
        """
        for key in keys:
            validate_key(key)
        table = await self.table(read)
        if isinstance(table, ParquetReferences):
            entries = list(await asyncio.gather(*(table.lookup(key) for key in keys)))
        else:
            entries = [table.lookup(key) for key in keys]
        located: list[bytes | TargetRange | None] = []
        for key, entry in zip(keys, entries, strict=True):
            if entry is None and key == ".zmetadata":
                entry = self._consolidated_document(table)
            if entry is None or isinstance(entry, bytes):
                located.append(entry)
                continue
            located.append(self._target_range(key, entry))
        return located

    def _target_range(self, key: str, ref: Reference) -> bytes | TargetRange:
        if ref.length == 0:
            return b""
        store, name = self.target(ref.url, key)
        if ref.length is None:
            byte_range = None if ref.offset == 0 else ByteRange(ref.offset)
        else:
            byte_range = ByteRange(ref.offset, ref.offset + ref.length)
        return TargetRange(store, name, byte_range, ref.url)

    def _consolidated_document(self, table: JsonReferences | ParquetReferences) -> bytes | None:
        """A ``.zmetadata`` made from the set's inline metadata documents (kerchunk sets
        carry none; Parquet sets keep theirs under another name)."""
        if self._consolidated is None:
            metadata: dict[str, Any] = {}
            keys: Iterable[str] = (
                table.metadata_keys() if isinstance(table, ParquetReferences) else table.keys()
            )
            for key in keys:
                if key.rpartition("/")[2] not in _METADATA_NAMES[:3]:
                    continue
                entry = table.metadata.get(key) if isinstance(table, ParquetReferences) else table.lookup(key)
                if isinstance(entry, bytes):
                    try:
                        metadata[key] = json.loads(entry)
                    except ValueError:
                        return None  # a broken document: let the plain open report it
                elif isinstance(entry, dict | str):
                    metadata[key] = json.loads(entry) if isinstance(entry, str) else entry
                else:
                    return None  # metadata held in a target file: no overlay
            self._consolidated = json.dumps({"zarr_consolidated_format": 1, "metadata": metadata}).encode()
        return self._consolidated

    # ------------------------------------------------------------------ Store primitives
    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        table = await self.table()
        if isinstance(table, ParquetReferences):
            keys = list(table.metadata_keys())
            for path, _grid, _sep in table.arrays():
                if (f"{path}/" if path else "").startswith(prefix) or prefix.startswith(f"{path}/"):
                    keys.extend(await table.chunk_keys(path))
        else:
            keys = list(table.keys())
        for key in keys:
            if key.startswith(prefix):
                yield key

    async def close(self) -> None:
        await self._targets.close()


def _parse_json(data: bytes, where: str, max_refs: int) -> JsonReferences:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise InvalidReferenceError(f"reference file {where!r} is not JSON ({exc})") from None
    return JsonReferences(doc, max_refs=max_refs)


def subrange(located: TargetRange, byte_range: ByteRange | None) -> ByteRange | None:
    """The range of the target object that ``byte_range`` of the referenced bytes is."""
    base = located.byte_range
    if byte_range is None:
        return base
    start = 0 if base is None else base.start
    limit = None if base is None else base.end
    if byte_range.is_suffix:
        if limit is None:
            return byte_range if start == 0 else None  # whole-object suffix only from 0
        return ByteRange(max(start, limit + byte_range.start), limit)
    begin = start + byte_range.start
    end = None if byte_range.end is None else start + byte_range.end
    if limit is not None:
        begin = min(begin, limit)
        end = limit if end is None else min(end, limit)
    return ByteRange(begin, end)


async def read_located(
    located: bytes | TargetRange | None, byte_range: ByteRange | None, key: str, read: Reader
) -> bytes | None:
    """The bytes of one located key (or ``byte_range`` of them), read with ``read``.

    Raises
    ------
    ByteRangeError
        The target object ends before the referenced range does.
    InvalidReferenceError
        The target object does not exist.
    """
    if located is None:
        return None
    if isinstance(located, bytes):
        return located if byte_range is None else byte_range.apply(located)
    wanted = subrange(located, byte_range)
    missing = f"reference {key!r}: target {located.url!r} does not exist"
    if wanted is None:
        whole = await read(located.store, located.key, located.byte_range)
        if whole is None:  # a reference to a whole object, as a ranged one: never fill_value
            raise InvalidReferenceError(missing)
        return byte_range.apply(whole) if byte_range else whole
    data = await read(located.store, located.key, wanted)
    if data is None:
        raise InvalidReferenceError(missing)
    if wanted.end is not None and len(data) < wanted.end - wanted.start:
        raise ByteRangeError(
            f"reference {key!r}: {located.url!r} ends before byte {wanted.end} "
            f"(the reference asks for [{wanted.start}, {wanted.end}))"
        )
    return data
