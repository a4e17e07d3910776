"""``IcechunkStore``: one snapshot of an Icechunk repository, read by azarr's own pipeline.

An Icechunk repository (https://icechunk.io) keeps a Zarr v3 hierarchy under version
control: branches and tags name snapshots, a snapshot holds every node's ``zarr.json``,
and manifests say where each chunk is -- a byte range of a chunk file in the repository
(*native*), a byte range of another object such as a NetCDF file (*virtual*), or bytes
kept in the manifest itself (*inline*).

The ``icechunk`` package (2.1 or newer, Python >= 3.12) reads the repository's own
files: it resolves the branch, tag or snapshot, answers ``zarr.json`` documents and
listings from the snapshot, and lists an array's chunk references
(``IcechunkStore.array_chunk_iterator``, its public API for chunk locations). azarr
reads the chunk bytes itself, as it reads a kerchunk reference set's: `locate` returns
each chunk's `TargetRange` -- ``chunks/<id>`` in the repository's own azarr store, or a
virtual chunk's URL resolved to the live store of its bucket or host -- and the chunk
pipeline coalesces neighbouring ranges of one object into one request under that
store's budget, retries and timeouts (`azarr.pipeline._coalesced`).

What azarr does not do that icechunk's own reads do: icechunk 2.3's chunk iterator does
not return a virtual reference's stored checksum (the ETag or modification time of the
referenced file when the reference was made), so a virtual chunk whose file was
replaced is read as it is now, not refused. Virtual chunk URLs are checked against
``allowed_targets`` (default: the repository's own scheme), as a reference set's are.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr import config
from azarr.errors import (
    CorruptRepositoryError,
    InvalidReferenceError,
    RefNotFoundError,
    RepositoryError,
    RepositoryNotFoundError,
    StoreError,
    ThrottledError,
    TransientStoreError,
)
from azarr.storage._base import ByteRange, Store, validate_key
from azarr.storage._redact import redact_url
from azarr.storage._reference import LoadOnce, LocatingStore, Reader, TargetRange
from azarr.storage._spec import StoreSpec
from azarr.storage._targets import TargetResolver, canonical_scheme
from azarr.storage._url import split_scheme

if TYPE_CHECKING:
    import icechunk

__all__ = ["IcechunkStore"]

# storage_options keys that select the snapshot or configure targets, not the storage.
_ICECHUNK_OPTIONS = frozenset({"branch", "tag", "snapshot_id", "remote_options", "allowed_targets"})
# Rows of chunk references asked of icechunk per batch.
_BATCH_ROWS = 100_000
# icechunk.ChunkType values in array_chunk_iterator's kinds column.
_NATIVE, _VIRTUAL, _INLINE = 1, 2, 3


def _import_icechunk() -> Any:
    try:
        import icechunk
    except ImportError as exc:
        raise ImportError(
            "reading Icechunk repositories needs the icechunk package (2.1 or newer, Python >= 3.12): "
            "pip install 'azarr[icechunk]'"
        ) from exc
    if not hasattr(icechunk.IcechunkStore, "array_chunk_iterator"):
        raise ImportError(
            f"icechunk {getattr(icechunk, '__version__', '?')} has no IcechunkStore.array_chunk_iterator: "
            "azarr needs icechunk 2.1 or newer"
        )
    return icechunk


async def _direct_read(store: Store, key: str, byte_range: ByteRange | None) -> bytes | None:
    return await store.get(key, byte_range)


class _Array:
    """What `locate` needs of one array node: its chunk key grammar and, once loaded,
    its chunk references (sorted by a linear index of their grid coordinates)."""

    __slots__ = (
        "inline", "kinds", "lengths", "linear", "loaded", "ndim", "offsets", "path", "paths", "radix",
        "separator", "v2_keys",
    )  # fmt: skip

    def __init__(self, path: str, ndim: int, separator: str, v2_keys: bool) -> None:
        self.path, self.ndim, self.separator, self.v2_keys = path, ndim, separator, v2_keys
        self.loaded: LoadOnce[bool] = LoadOnce()
        self.linear: np.ndarray[Any, np.dtype[np.int64]] | None = None
        self.radix: tuple[int, ...] = ()
        self.kinds: np.ndarray[Any, np.dtype[np.uint8]] = np.empty(0, np.uint8)
        self.offsets: np.ndarray[Any, np.dtype[np.uint64]] = np.empty(0, np.uint64)
        self.lengths: np.ndarray[Any, np.dtype[np.uint64]] = np.empty(0, np.uint64)
        self.paths: list[str] = []
        self.inline: dict[int, bytes] = {}

    def coords(self, rest: str) -> tuple[int, ...] | None:
        """The grid coordinates of chunk key ``rest`` (relative to the array), or None."""
        sep = self.separator
        if self.v2_keys:
            parts = rest.split(sep) if rest else []
            if self.ndim == 0:
                return () if rest == "0" else None
        else:
            if rest == "c":
                return () if self.ndim == 0 else None
            if not rest.startswith("c" + sep):
                return None
            parts = rest[2:].split(sep)
        if len(parts) != self.ndim or not all(p.isdigit() and p.isascii() for p in parts):
            return None
        return tuple(int(p) for p in parts)

    def row(self, coords: tuple[int, ...]) -> int | None:
        """The row of chunk ``coords`` in the loaded table, or None (no reference)."""
        linear = self.linear
        assert linear is not None
        index = 0
        for c, r in zip(coords, self.radix, strict=True):
            if c >= r:
                return None
            index = index * r + c
        i = int(np.searchsorted(linear, index))
        return i if i < len(linear) and int(linear[i]) == index else None

    def fill(self, batches: list[tuple[Any, ...]], where: str) -> None:
        """Build the table from ``array_chunk_iterator`` batches."""
        if not batches:
            self.radix = (0,) * self.ndim
            self.linear = np.empty(0, np.int64)
            return
        coords = np.concatenate([np.asarray(b[0], dtype=np.int64).reshape(-1, self.ndim) for b in batches])
        radix = tuple(int(v) + 1 for v in coords.max(axis=0)) if self.ndim else ()
        if np.prod([float(r) for r in radix]) >= 2.0**62:
            raise InvalidReferenceError(f"{where}: chunk grid {radix} is too large to index")
        linear = (
            np.ravel_multi_index(tuple(coords.T), radix) if self.ndim else np.zeros(len(coords), np.int64)
        )
        order = np.argsort(linear, kind="stable")
        self.radix = radix
        self.kinds = np.concatenate([np.asarray(b[1], dtype=np.uint8) for b in batches])[order]
        paths = [p for b in batches for p in b[2]]
        self.paths = [paths[i] for i in order.tolist()]
        self.offsets = np.concatenate([np.asarray(b[3], dtype=np.uint64) for b in batches])[order]
        self.lengths = np.concatenate([np.asarray(b[4], dtype=np.uint64) for b in batches])[order]
        position = np.empty(len(order), np.int64)
        position[order] = np.arange(len(order))
        inline: dict[int, bytes] = {}
        base = 0
        for b in batches:
            for i, data in b[5].items():
                inline[int(position[base + int(i)])] = bytes(data)
            base += len(b[2])
        self.inline = inline
        self.linear = np.asarray(linear, dtype=np.int64)[order]


class IcechunkStore(LocatingStore):
    """A read-only store over one branch, tag or snapshot of an Icechunk repository.

    Parameters
    ----------
    repository : str or os.PathLike
        The repository's location: a local path (``file://`` URL) or ``s3://bucket/prefix``.
    branch, tag, snapshot_id : str, optional
        What to read; at most one. Default: the ``main`` branch. A branch is resolved to
        its snapshot when the store is first used, and the store keeps reading that
        snapshot (a copy unpickled elsewhere reads the same one).
    storage_options : dict, optional
        Options of the repository's store, as for that scheme's azarr store
        (`S3Options`: ``endpoint_url``, ``key``, ``secret``, ``token``, ``anon``,
        ``client_kwargs={"region_name": ...}``); azarr passes the same credentials to
        icechunk for the repository's own files.
    remote_options : dict, optional
        ``storage_options`` of the stores virtual chunks are read from (their buckets or
        hosts), as `ReferenceStore`'s ``remote_options``.
    allowed_targets : sequence of str, optional
        Schemes (``"s3"``) and URL prefixes virtual chunks may name. Default ``azarr.config``
        ``reference_allowed_targets``, whose default None allows the repository's own scheme.

    Raises
    ------
    ValueError
        More than one of ``branch``, ``tag`` and ``snapshot_id``, or a repository URL of
        a scheme this store cannot open (only local paths and ``s3://``).

    Notes
    -----
    Opening does no I/O; the repository is opened on first use, raising
    `RepositoryNotFoundError`, `RefNotFoundError` or `CorruptRepositoryError`.
    zarr-python's equivalent is ``icechunk.Repository.open(storage).readonly_session(...).store``.
    """

    def __init__(
        self,
        repository: str | os.PathLike[str],
        *,
        branch: str | None = None,
        tag: str | None = None,
        snapshot_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        remote_options: Mapping[str, Any] | None = None,
        allowed_targets: Sequence[str] | None = None,
        read_only: bool = True,
    ) -> None:
        super().__init__(read_only=True)
        if sum(v is not None for v in (branch, tag, snapshot_id)) > 1:
            raise ValueError("give at most one of branch=, tag= and snapshot_id=")
        location = os.fspath(repository)
        scheme, rest = split_scheme(location)
        scheme = canonical_scheme(scheme or "file")
        if scheme == "file":
            location = "file://" + os.path.abspath(os.path.expanduser(rest)).rstrip("/")
        elif scheme == "s3":
            bucket = rest.split("/", 1)[0]
            if not bucket:
                raise ValueError(f"Icechunk repository URL {location!r} names no bucket")
            location = f"s3://{rest.strip('/')}"
        else:
            raise ValueError(
                f"IcechunkStore opens repositories on local paths and s3:// URLs, not {location!r}"
            )
        self._location = location
        self._scheme = scheme
        self._branch, self._tag, self._snapshot_id = branch, tag, snapshot_id
        self._storage_options = dict(storage_options or {})
        self._remote_options = dict(remote_options or {})
        self._allowed_param = None if allowed_targets is None else tuple(allowed_targets)
        self._targets = TargetResolver(self.allowed_targets, remote_options=self._remote_options)
        self._documents = _Documents(self)
        self._session: LoadOnce[Any] = LoadOnce()
        self._nodes: dict[str, _Array | None] = {}
        self._repository_store: Store | None = None
        self._pinned: str | None = None  # set when unpickled: the snapshot the original read

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        return f"icechunk://{redact_url(self._location)}"

    def _ref(self) -> str:
        if self._pinned:
            return f"snapshot {self._pinned}"
        if self._snapshot_id is not None:
            return f"snapshot {self._snapshot_id}"
        if self._tag is not None:
            return f"tag {self._tag!r}"
        return f"branch {self._branch or 'main'!r}"

    def __repr__(self) -> str:
        return f"IcechunkStore({self.url!r}, {self._ref()})"

    def _make_spec(self) -> StoreSpec:
        params: dict[str, Any] = {
            "branch": self._branch,
            "tag": self._tag,
            "snapshot_id": self._snapshot_id,
            "remote_options": self._remote_options,
            "allowed_targets": None if self._allowed_param is None else list(self._allowed_param),
        }
        return StoreSpec.create("icechunk", self._location, self._storage_options, params)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``icechunk://<repository URL or path>`` (``icechunk://s3://bucket/repo``,
        ``icechunk:///data/repo``); ``branch``, ``tag``, ``snapshot_id``,
        ``remote_options`` and ``allowed_targets`` are taken out of ``storage_options``,
        the rest are the repository store's."""
        options = dict(storage_options or {})
        selected = {k: options.pop(k) for k in list(options) if k in _ICECHUNK_OPTIONS}
        location = url[len("icechunk://") :] if url.startswith("icechunk://") else url
        if not location:
            raise ValueError(f"{url!r} names no Icechunk repository (give icechunk://<repository URL>)")
        return cls(location, storage_options=options, **selected).spec

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> IcechunkStore:
        """The store of a spec made by `spec_from_url` or `spec`."""
        return cls(spec.root, storage_options=spec.storage_options(), **spec.constructor_params())

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the spec and the snapshot read so far: a copy reads that snapshot."""
        snapshot = self.snapshot_id or self._pinned
        return (_reopen_at, (self.spec, snapshot))

    # ------------------------------------------------------------------ targets
    def allowed_targets(self) -> tuple[str, ...] | None:
        """The schemes and URL prefixes virtual chunks may name; None: any."""
        if self._allowed_param is not None:
            return self._allowed_param
        setting = config.get("reference_allowed_targets")
        return (self._scheme,) if setting is None else tuple(setting)

    def repository_store(self) -> Store:
        """The azarr store of the repository's root (native chunks are ``chunks/<id>`` in it)."""
        if self._repository_store is None:
            options = self._storage_options or None
            spec = StoreSpec.from_url(self._location, storage_options=options)
            self._repository_store = spec.open(read_only=True)
        return self._repository_store

    # ------------------------------------------------------------------ the session
    @property
    def snapshot_id(self) -> str | None:
        """The snapshot read (None until the repository is first opened)."""
        session = self._session.value
        return None if session is None else str(session.snapshot_id)

    async def session(self) -> Any:
        """The ``icechunk.Session`` read (opened on first use, once per store).

        Raises
        ------
        RepositoryNotFoundError, RefNotFoundError, CorruptRepositoryError, RepositoryError
            See `azarr.errors`.
        ImportError
            icechunk is not installed, or older than 2.1.
        """
        return await self._session.get(self._open)

    async def _open(self) -> Any:
        ic = _import_icechunk()
        storage = self._icechunk_storage(ic)
        try:
            repository = await ic.Repository.open_async(storage)
            if self._pinned or self._snapshot_id:
                return await repository.readonly_session_async(snapshot_id=self._pinned or self._snapshot_id)
            if self._tag is not None:
                return await repository.readonly_session_async(tag=self._tag)
            return await repository.readonly_session_async(branch=self._branch or "main")
        except ic.IcechunkError as exc:
            raise _translate(exc, f"{self.url} ({self._ref()})") from None

    def _icechunk_storage(self, ic: Any) -> icechunk.Storage:
        """The icechunk ``Storage`` of the repository, from azarr's options for its URL."""
        _, rest = split_scheme(self._location)
        if self._scheme == "file":
            return ic.local_filesystem_storage(rest)
        options = self._storage_options
        bucket, _, prefix = rest.partition("/")
        client = dict(options.get("client_kwargs") or {})
        endpoint = options.get("endpoint_url") or client.get("endpoint_url")
        region = client.get("region_name") or options.get("region") or ("us-east-1" if endpoint else None)
        key = options.get("key") or client.get("aws_access_key_id")
        secret = options.get("secret") or client.get("aws_secret_access_key")
        token = options.get("token") or client.get("aws_session_token")
        credentials: dict[str, Any]
        if options.get("anon"):
            credentials = {"anonymous": True}
        elif key and secret:
            credentials = {"access_key_id": key, "secret_access_key": secret, "session_token": token}
        else:
            credentials = {"from_env": True}
        return ic.s3_storage(
            bucket=bucket,
            prefix=prefix or None,
            region=region,
            endpoint_url=endpoint,
            allow_http=bool(endpoint and str(endpoint).startswith("http://")),
            force_path_style=bool(endpoint),
            **credentials,
        )

    async def _call(self, make: Callable[[], Awaitable[Any]], what: str) -> Any:
        """Await an icechunk call, its errors translated to azarr's."""
        ic = _import_icechunk()
        try:
            return await make()
        except ic.IcechunkError as exc:
            raise _translate(exc, what) from None

    # ------------------------------------------------------------------ locating keys
    async def _node(self, path: str, read: Reader) -> _Array | None:
        """The array at ``path`` (None: a group or nothing), its ``zarr.json`` read once."""
        if path in self._nodes:
            return self._nodes[path]
        data = await read(self._documents, f"{path}/zarr.json" if path else "zarr.json", None)
        node: _Array | None = None
        if data is not None:
            node = _parse_array(data, path, self.url)
        self._nodes[path] = node
        return node

    async def _chunk_of(self, key: str, read: Reader) -> tuple[_Array, tuple[int, ...]] | None:
        """The array and grid coordinates of chunk key ``key``; None for other keys.

        Ancestors are tried from the root down (nodes never nest under an array), so the
        probes are the few groups above the arrays, not one per chunk.
        """
        parts = key.split("/")
        for depth in range(len(parts)):
            path = "/".join(parts[:depth])
            node = await self._node(path, read)
            if node is not None:
                coords = node.coords("/".join(parts[depth:]))
                return None if coords is None else (node, coords)
        return None

    async def _table(self, array: _Array) -> _Array:
        """``array`` with its chunk references loaded (once per array, whoever asks first)."""
        await array.loaded.get(lambda: self._load(array))
        return array

    async def _load(self, array: _Array) -> bool:
        session = await self.session()
        where = f"array {array.path or '/'!r} in {self.url}"
        limit = int(config.get("reference_max_refs"))

        async def collect() -> list[tuple[Any, ...]]:
            batches = []
            count = 0
            async for batch in session.store.array_chunk_iterator("/" + array.path, batch_size=_BATCH_ROWS):
                count += len(batch[2])
                if count > limit:
                    raise InvalidReferenceError(
                        f"{where} has more than {limit} chunk references (azarr.config reference_max_refs)"
                    )
                batches.append(batch)
            return batches

        batches = await self._call(collect, where)
        await asyncio.to_thread(array.fill, batches, where)
        return True

    async def locate(
        self, keys: Sequence[str], read: Reader = _direct_read
    ) -> list[bytes | TargetRange | None]:
        """Where each key's bytes are: inline bytes (documents, inline chunks), a
        `TargetRange` (native and virtual chunks), or None (not in the snapshot).

        Parameters
        ----------
        keys : sequence of str
            Store keys (validated).
        read : Reader, optional
            How the repository's documents are read (default: directly; `StoreIO`
            passes its managed path).

        Raises
        ------
        InvalidReferenceError, ReferenceTargetError
            A malformed reference, or a virtual chunk outside the allowed targets.
        RepositoryError
            The repository cannot be opened or read.
        """
        for key in keys:
            validate_key(key)
        located: list[bytes | TargetRange | None] = []
        for key in keys:
            found = await self._chunk_of(key, read)
            if found is None:
                located.append(await read(self._documents, key, None))
                continue
            array, coords = found
            await self._table(array)
            row = array.row(coords)
            located.append(None if row is None else self._target_range(array, row, key))
        return located

    def _target_range(self, array: _Array, row: int, key: str) -> bytes | TargetRange:
        kind = int(array.kinds[row])
        if kind == _INLINE:
            return array.inline.get(row, b"")
        offset, length = int(array.offsets[row]), int(array.lengths[row])
        if length == 0:
            return b""
        path = array.paths[row]
        if kind == _NATIVE:
            name = f"chunks/{path}"
            try:
                validate_key(name)
            except ValueError:
                raise InvalidReferenceError(f"chunk {key!r} in {self.url}: bad chunk id {path!r}") from None
            store = self.repository_store()
            url = f"{self._location}/{name}"
        elif kind == _VIRTUAL:
            store, name = self._targets.resolve(path, f"virtual chunk {key!r} in {self.url}")
            url = path
        else:
            raise InvalidReferenceError(f"chunk {key!r} in {self.url}: unknown chunk kind {kind}")
        return TargetRange(store, name, ByteRange(offset, offset + length), url)

    # ------------------------------------------------------------------ Store primitives
    def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        return self._documents._list_prefix(prefix)

    def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        return self._documents._list_dir(prefix)

    async def close(self) -> None:
        await self._targets.close()
        if self._repository_store is not None:
            await self._repository_store.close()


class _Documents(Store):
    """The snapshot's own keys (``zarr.json`` documents, listings), read through icechunk's
    store; `IcechunkStore.locate` reads through it so `StoreIO` times and counts those reads
    under the repository store's budget."""

    supports_writes = False
    supports_deletes = False

    def __init__(self, owner: IcechunkStore) -> None:
        super().__init__(read_only=True)
        self._owner = owner

    @property
    def url(self) -> str:
        return self._owner.url

    def _make_spec(self) -> StoreSpec:
        return self._owner.spec

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        session = await self._owner.session()
        from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest
        from zarr.core.buffer import default_buffer_prototype

        request: Any = None
        if byte_range is not None:
            if byte_range.is_suffix:
                request = SuffixByteRequest(-byte_range.start)
            elif byte_range.end is None:
                request = OffsetByteRequest(byte_range.start)
            else:
                request = RangeByteRequest(byte_range.start, byte_range.end)
        buffer = await self._owner._call(
            lambda: session.store.get(key, default_buffer_prototype(), request), f"{key!r} in {self.url}"
        )
        return None if buffer is None else bytes(buffer.to_bytes())

    async def _set(self, key: str, value: bytes) -> None:  # pragma: no cover - read-only
        self._check_writable(key)

    async def _delete(self, key: str) -> None:  # pragma: no cover - read-only
        self._check_writable(key)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        session = await self._owner.session()
        keys = await self._owner._call(
            lambda: _collect(session.store.list_prefix(prefix)), f"listing {prefix!r} in {self.url}"
        )
        for key in keys:
            yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        session = await self._owner.session()
        names = await self._owner._call(
            lambda: _collect(session.store.list_dir(prefix.rstrip("/"))), f"listing {prefix!r} in {self.url}"
        )
        for name in names:
            yield name


async def _collect(iterator: AsyncIterator[str]) -> list[str]:
    return [item async for item in iterator]


def _parse_array(data: bytes, path: str, url: str) -> _Array | None:
    """The chunk key grammar of the array whose ``zarr.json`` is ``data``; None for groups."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None  # the open reports the broken document
    if not isinstance(doc, dict) or doc.get("node_type") != "array":
        return None
    shape = doc.get("shape")
    encoding = doc.get("chunk_key_encoding", {"name": "default"})
    if isinstance(encoding, str):
        encoding = {"name": encoding}
    if not isinstance(shape, list) or not isinstance(encoding, dict):
        return None
    name = encoding.get("name")
    configuration = encoding.get("configuration") or {}
    v2_keys = name == "v2"
    separator = configuration.get("separator", "." if v2_keys else "/")
    if name not in ("default", "v2") or separator not in ("/", "."):
        raise InvalidReferenceError(f"array {path or '/'!r} in {url}: chunk key encoding {encoding!r}")
    return _Array(path, len(shape), separator, v2_keys)


def _translate(exc: Exception, where: str) -> StoreError:
    """An icechunk error as azarr's (its message kept, the repository named)."""
    name = type(exc).__name__
    kind = str(getattr(exc, "kind", "") or "")
    message = str(exc).split("\n\ncontext:", 1)[0].strip()
    text = f"{where}: {message}"
    if name == "RepositoryNotFoundError":
        return RepositoryNotFoundError(text)
    if name in ("RefNotFoundError", "SnapshotNotFoundError") or kind == "invalid-snapshot-id":
        return RefNotFoundError(text)
    if kind == "throttled":
        return ThrottledError(text)
    if name == "StorageError" and kind not in ("object-not-found", "storage-config", "cannot-parse-url"):
        return TransientStoreError(text)
    if name in ("FormatError", "StorageError") or kind in ("object-not-found", "deserialization"):
        return CorruptRepositoryError(text)
    return RepositoryError(text)


def _reopen_at(spec: StoreSpec, snapshot: str | None) -> IcechunkStore:
    """Unpickling: the live store of ``spec``, or a store of its own pinned to ``snapshot``
    when the live one reads another snapshot."""
    store = spec.open(read_only=True)
    assert isinstance(store, IcechunkStore)
    opened = store._session.value is not None
    if snapshot is None or store.snapshot_id == snapshot or (not opened and not store._pinned):
        if snapshot is not None and not opened:
            store._pinned = snapshot
        return store
    pinned = IcechunkStore.from_spec(spec)
    pinned._pinned = snapshot
    return pinned
