"""An in-memory store: a ``dict`` of key -> bytes."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping, MutableMapping
from typing import Any

from azarr.errors import PreconditionFailedError
from azarr.storage._base import ByteRange, Generation, Store
from azarr.storage._spec import StoreSpec, anonymous_root

# Named stores opened through ``memory://<name>`` URLs, shared process-wide like
# fsspec's memory filesystem so that two opens of one URL see the same data.
_REGISTRY: dict[str, MutableMapping[str, bytes]] = {}
_REGISTRY_LOCK = threading.Lock()
# Conditional writes check and replace under one lock: stores opened by name are
# shared by every thread (and event loop) of the process.
_CONDITIONAL_LOCK = threading.Lock()


class MemoryStore(Store):
    """Keys and values held in a Python mapping (zarr-python 2 ``MemoryStore``/``KVStore``).

    Parameters
    ----------
    data : MutableMapping[str, bytes], optional
        The mapping to use, shared, not copied (a new ``dict`` when omitted). Its
        methods run on the event loop, so it should be an in-memory mapping.
    read_only : bool
        Refuse writes with `ReadOnlyError`.

    Notes
    -----
    Pickling copies the contents: the unpickled store is independent, except for
    stores opened by name (`named`, ``memory://<name>``), which rejoin the
    process-wide registry entry of that name.

    Examples
    --------
    >>> import asyncio
    >>> store = MemoryStore()
    >>> asyncio.run(store.set("a/.zgroup", b"{}"))
    >>> asyncio.run(store.get("a/.zgroup"))
    b'{}'
    """

    is_local = True
    supports_conditional_writes = True
    supports_conditional_reads = True
    supports_blocking_io = True

    def __init__(self, data: MutableMapping[str, bytes] | None = None, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self._data: MutableMapping[str, bytes] = {} if data is None else data
        # A caller's own mapping may not be safe to use from codec threads; a dict is.
        self.supports_blocking_io = type(self).supports_blocking_io and type(self._data) is dict
        self._name: str | None = None
        self._anonymous_root = anonymous_root("memory")

    @classmethod
    def named(cls, name: str, *, read_only: bool = False) -> MemoryStore:
        """The store registered under ``name`` (created empty on first use).

        Every call with the same ``name`` shares one mapping for the life of the
        process, which is what ``from_url("memory://<name>")`` returns.
        """
        with _REGISTRY_LOCK:
            data = _REGISTRY.setdefault(name, {})
        store = cls(data, read_only=read_only)
        store._name = name
        return store

    @property
    def url(self) -> str:
        if self._name is not None:
            return f"memory://{self._name}"
        return f"memory://{id(self._data):x}"

    @property
    def data(self) -> MutableMapping[str, bytes]:
        """The underlying mapping (live, not a copy)."""
        return self._data

    # ------------------------------------------------------------------ spec and pickling
    def _make_spec(self) -> StoreSpec:
        # A named store is its name; an anonymous one is its mapping (by identity).
        return StoreSpec.create("memory", self._name if self._name is not None else self._anonymous_root)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``memory://<name>``: the process-wide named store (no options)."""
        from azarr.storage._url import reject_options, split_scheme

        reject_options("memory URL", url, storage_options, frozenset())
        _, name = split_scheme(url)
        return StoreSpec.create("memory", name.strip("/"))

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> MemoryStore:
        """The named store ``spec.root``."""
        return cls.named(spec.root)

    def __reduce__(self) -> tuple[Any, ...]:
        # Memory has no location to reconnect to: the copy carries the contents (a named
        # store rejoins the registry entry of its name if the process has one).
        return (_unpickle_memory, (self._name, dict(self._data), self.read_only))

    # ------------------------------------------------------------------ primitives
    def _get_blocking(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        value = self._data.get(key)
        if value is None or byte_range is None:
            return value
        return byte_range.apply(value)

    def _set_blocking(self, key: str, value: bytes | memoryview) -> None:
        # Store.set_blocking copied any buffer to bytes already (the dict keeps the object);
        # bytes(x) of an exact bytes object is that object.
        self._data[key] = bytes(value)

    def _delete_blocking(self, key: str) -> None:
        self._data.pop(key, None)

    # A dict operation is atomic and cheap: the async primitives run it in place.
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return self._get_blocking(key, byte_range)

    async def _set(self, key: str, value: bytes) -> None:
        self._data[key] = value

    async def _delete(self, key: str) -> None:
        self._data.pop(key, None)

    # A value's generation is the stored object itself, compared by identity: holding
    # it keeps its address from being reused, and the only "ABA" left (the same
    # object stored again) means the same bytes, which is what a match promises.
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        value = self._data.get(key)
        return value, value

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        value = self._data.get(key)
        return (None, None) if value is None else (byte_range.apply(value), value)

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        value = self._data.get(key)
        return None if value is None else (len(value), value)

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        value = self._data.get(key)
        if value is None or value is not generation:
            raise PreconditionFailedError(f"get {key!r} in {self.url}: the value was replaced or deleted")
        return value if byte_range is None else byte_range.apply(value)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        with _CONDITIONAL_LOCK:
            current = self._data.get(key)
            if current is not generation:
                raise self._conflict(key, generation)
            # A copy when the caller's object is the current one: the new generation
            # must differ from every generation handed out before.
            self._data[key] = value if value is not current else bytes(bytearray(value))

    async def _delete_if(self, key: str, generation: Generation) -> None:
        with _CONDITIONAL_LOCK:
            current = self._data.get(key)
            if current is None:
                return
            if current is not generation:
                raise self._conflict(key, generation)
            del self._data[key]

    def _conflict(self, key: str, generation: Generation | None) -> PreconditionFailedError:
        wanted = "absent" if generation is None else "unchanged"
        return PreconditionFailedError(f"{key!r} in {self.url} is not {wanted}: another writer changed it")

    async def _exists(self, key: str) -> bool:
        return key in self._data

    async def _getsize(self, key: str) -> int:
        value = self._data.get(key)
        if value is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return len(value)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # Snapshot first: other tasks may set keys while the caller iterates.
        for key in sorted(k for k in list(self._data) if k.startswith(prefix)):
            yield key

    async def _delete_prefix(self, prefix: str) -> None:
        for key in [k for k in list(self._data) if k.startswith(prefix)]:
            self._data.pop(key, None)


def _unpickle_memory(name: str | None, data: dict[str, bytes], read_only: bool) -> MemoryStore:
    if name is None:
        return MemoryStore(data, read_only=read_only)
    with _REGISTRY_LOCK:
        shared = _REGISTRY.setdefault(name, data)
    store = MemoryStore(shared, read_only=read_only)
    store._name = name
    return store
