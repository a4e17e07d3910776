"""A store over any synchronous ``MutableMapping[str, bytes]``, called from worker threads."""

from __future__ import annotations

import pickle
from collections.abc import AsyncIterator, Iterable, MutableMapping
from typing import Any

from azarr.errors import (
    ConnectionFailedError,
    PermissionDeniedError,
    StoreError,
)
from azarr.storage._base import ByteRange, Store, validate_key
from azarr.storage._spec import StoreSpec, anonymous_root
from azarr.storage._threads import BlockingIO

# Requests the store admits per worker thread: enough to overlap fetching with decoding,
# few enough that queueing in front of a slow backend does not eat the per-request timeout.
_REQUESTS_PER_WORKER = 2


def _is_connection_error(exc: BaseException) -> bool:
    # By class name too: client libraries (redis-py, pymongo) define their own ConnectionError.
    return isinstance(exc, ConnectionError) or any(c.__name__ == "ConnectionError" for c in type(exc).__mro__)


def iter_keys(keys: Iterable[Any], prefix: str) -> list[str]:
    """The valid store keys among ``keys`` (str, or UTF-8 bytes as ``dbm`` returns) under ``prefix``, sorted.

    Names that are not valid store keys (absolute, ``..``, trailing ``/`` directory
    entries) cannot be read through the Store API, so they are left out.
    """
    out = []
    for raw in keys:
        key = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes | bytearray) else raw
        if not isinstance(key, str) or not key.startswith(prefix):
            continue
        try:
            validate_key(key)
        except ValueError:
            continue
        out.append(key)
    out.sort()
    return out


#: What an object needs to serve as a mapping store without being a ``MutableMapping``
#: (zarr-python 2 takes such duck-typed mappings too).
_MAPPING_METHODS = ("keys", "__getitem__", "__setitem__", "__delitem__", "__contains__")


def is_mapping_like(value: Any) -> bool:
    """True for a ``MutableMapping``, or an object with its key, item and membership methods."""
    return isinstance(value, MutableMapping) or all(
        callable(getattr(value, name, None)) for name in _MAPPING_METHODS
    )


class MappingStore(Store):
    """A store over a synchronous ``MutableMapping[str, bytes]``, run in a small thread pool.

    For key-value backends with a blocking mapping interface: `dbm` /
    `shelve`-style databases, LMDB or SQLite wrappers, redis-py based mappings,
    and zarr-python 2 stores (``DBMStore``, ``LMDBStore``, ``SQLiteStore``,
    ``RedisStore``, ``ZipStore``, ...). zarr-python 2 accepts such mappings directly
    as ``store=``; `make_store` wraps them in this class.

    Parameters
    ----------
    mapping : MutableMapping[str, bytes]
        The mapping, used (not copied). Keys are ``/``-separated strings; keys
        returned as UTF-8 ``bytes`` (as `dbm` does) are decoded. Values may be
        any bytes-like object; they are returned as ``bytes``.
    read_only : bool
        Refuse writes with `ReadOnlyError`.
    max_workers : int, optional
        Threads calling the mapping. The default, 1, runs every call on one thread,
        one at a time, which is safe for mappings that are not thread-safe
        (`dbm`, `shelve`, most SQLite wrappers). Give more for thread-safe
        clients of remote servers (redis-py, LMDB), so requests overlap.

    Raises
    ------
    TypeError
        ``mapping`` is not a ``MutableMapping``.
    ValueError
        ``max_workers`` < 1.

    Notes
    -----
    * Every mapping call runs on the store's own threads, never on the event loop,
      and not in the codec pool: a slow key-value server must not stall decoding.
      The pool is not bound to an event loop, so the store works across successive
      ``asyncio.run`` calls and from several threads at once.
    * ``get`` reads the whole value and slices byte ranges from it; ``getsize`` is
      ``len(mapping[key])`` (computed in the worker, the value is not returned);
      listings iterate over every key of the mapping.
    * ``close()`` does nothing: the caller owns the mapping (and its ``close``),
      and the store stays usable, as the `Store` protocol requires.
    * Errors: ``KeyError`` means a missing key (``None`` / ignored on delete);
      ``PermissionError`` becomes `PermissionDeniedError`, a
      ``ConnectionError`` (builtin, or a client library's class of that name)
      `ConnectionFailedError`, anything else
      `StoreError`; each names the key and chains the original.
    * Pickling pickles the mapping (with the standard `pickle` module), so the
      copy is independent unless the mapping pickles as a reference to shared data
      (a file name, a server address). An unpicklable mapping (an open ``dbm``
      handle, a client with sockets) raises a `TypeError` naming it.
    * The request budget (`azarr.scheduler.budget_for`) defaults to
      ``2 * max_workers`` requests in flight: more would only queue in front of the
      workers, where waiting counts against ``request_timeout``.

    Examples
    --------
    >>> import asyncio, dbm.dumb, tempfile, os
    >>> db = dbm.dumb.open(os.path.join(tempfile.mkdtemp(), "data"), "c")
    >>> store = MappingStore(db)
    >>> asyncio.run(store.set("a/.zgroup", b"{}"))
    >>> asyncio.run(store.get("a/.zgroup"))
    b'{}'
    """

    def __init__(
        self,
        mapping: MutableMapping[str, bytes],
        *,
        read_only: bool = False,
        max_workers: int | None = None,
    ) -> None:
        if not is_mapping_like(mapping):
            raise TypeError(f"MappingStore needs a MutableMapping, got {type(mapping).__name__}")
        super().__init__(read_only=read_only)
        self._mapping = mapping
        self._anonymous_root = anonymous_root("mapping")
        workers = 1 if max_workers is None else int(max_workers)
        self._io = BlockingIO(workers, "azarr-mapping")
        #: Requests in flight at most (read by `azarr.scheduler.budget_for`).
        self.max_requests = _REQUESTS_PER_WORKER * workers

    @property
    def mapping(self) -> MutableMapping[str, bytes]:
        """The wrapped mapping (live, not a copy)."""
        return self._mapping

    @property
    def max_workers(self) -> int:
        """Threads calling the mapping."""
        return self._io.max_workers

    @property
    def url(self) -> str:
        kind = type(self._mapping)
        return f"mapping://{kind.__module__}.{kind.__qualname__}@{id(self._mapping):x}"

    # ------------------------------------------------------------------ spec and pickling
    def _make_spec(self) -> StoreSpec:
        # A mapping has no location to name: each MappingStore is a store of its own.
        return StoreSpec.create("mapping", self._anonymous_root)

    def __reduce__(self) -> tuple[Any, ...]:
        # The mapping itself travels (a dbm/lmdb/redis mapping pickles as a reference to its data).
        return (_unpickle_mapping, (self._pickled_mapping(), self.read_only, self.max_workers))

    def _pickled_mapping(self) -> bytes:
        try:
            # Pickled here, not by the outer pickler, so a failure can say which mapping
            # is to blame rather than "cannot pickle '_io.BufferedRandom' object".
            blob = pickle.dumps(self._mapping, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            kind = type(self._mapping)
            raise TypeError(
                f"cannot pickle MappingStore: its mapping {kind.__module__}.{kind.__qualname__} "
                f"is not picklable ({type(exc).__name__}: {exc}); use a mapping that pickles "
                "as a reference to its data (a path or server address), or open the store "
                "anew in the other process"
            ) from exc
        return blob

    # ------------------------------------------------------------------ helpers
    def _translate(self, exc: BaseException, op: str, key: str) -> StoreError:
        what = f"{op} {key!r} in {self.url}"
        detail = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, PermissionError):
            return PermissionDeniedError(f"permission denied: {what}: {detail}")
        if _is_connection_error(exc):
            return ConnectionFailedError(f"{what} failed: backend unreachable ({detail})")
        return StoreError(f"{what} failed: {detail}")

    # ------------------------------------------------------------------ sync bodies (worker threads)
    def _read(self, key: str) -> bytes | None:
        try:
            value = self._mapping[key]
        except KeyError:
            return None
        return value if type(value) is bytes else bytes(value)

    def _size(self, key: str) -> int | None:
        try:
            value = self._mapping[key]
        except KeyError:
            return None
        return len(value) if isinstance(value, bytes) else memoryview(value).nbytes

    def _write(self, key: str, value: bytes) -> None:
        self._mapping[key] = value

    def _remove(self, key: str) -> None:
        try:
            del self._mapping[key]
        except KeyError:
            pass

    def _contains(self, key: str) -> bool:
        return key in self._mapping

    def _keys(self, prefix: str) -> list[str]:
        return iter_keys(list(self._mapping.keys()), prefix)

    def _remove_prefix(self, prefix: str) -> None:
        for key in self._keys(prefix):
            self._remove(key)

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        value = await self._io.call(self._translate, "get", key, self._read, key)
        if value is None or byte_range is None:
            return value
        return byte_range.apply(value)

    async def _set(self, key: str, value: bytes) -> None:
        await self._io.call(self._translate, "set", key, self._write, key, value)

    async def _delete(self, key: str) -> None:
        await self._io.call(self._translate, "delete", key, self._remove, key)

    async def _exists(self, key: str) -> bool:
        return await self._io.call(self._translate, "exists", key, self._contains, key)

    async def _getsize(self, key: str) -> int:
        size = await self._io.call(self._translate, "getsize", key, self._size, key)
        if size is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return size

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._io.call(self._translate, "list", prefix, self._keys, prefix):
            yield key

    async def _delete_prefix(self, prefix: str) -> None:
        await self._io.call(self._translate, "delete_prefix", prefix, self._remove_prefix, prefix)


def _unpickle_mapping(blob: bytes, read_only: bool, max_workers: int) -> MappingStore:
    return MappingStore(pickle.loads(blob), read_only=read_only, max_workers=max_workers)
