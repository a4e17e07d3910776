"""An in-memory store: a ``dict`` of key -> bytes."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

from azarr.storage._base import ByteRange, Store

# Named stores opened through ``memory://<name>`` URLs, shared process-wide like
# fsspec's memory filesystem so that two opens of one URL see the same data.
_REGISTRY: dict[str, MutableMapping[str, bytes]] = {}
_REGISTRY_LOCK = threading.Lock()


class MemoryStore(Store):
    """Keys and values held in a Python mapping (zarr-python 2 ``MemoryStore``/``KVStore``).

    Parameters
    ----------
    data : MutableMapping[str, bytes], optional
        The mapping to use, shared, not copied (a new ``dict`` when omitted). Its
        methods run on the event loop, so it should be an in-memory mapping.
    read_only : bool
        Refuse writes with :class:`~azarr.errors.ReadOnlyError`.

    Notes
    -----
    Pickling copies the contents: the unpickled store is independent, except for
    stores opened by name (:meth:`named`, ``memory://<name>``), which rejoin the
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

    def __init__(self, data: MutableMapping[str, bytes] | None = None, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self._data: MutableMapping[str, bytes] = {} if data is None else data
        self._name: str | None = None

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

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_data"] = dict(self._data)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        name = state.get("_name")
        if name is not None:
            with _REGISTRY_LOCK:
                state["_data"] = _REGISTRY.setdefault(name, state["_data"])
        self.__dict__.update(state)

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        value = self._data.get(key)
        if value is None or byte_range is None:
            return value
        return byte_range.apply(value)

    async def _set(self, key: str, value: bytes) -> None:
        self._data[key] = value

    async def _delete(self, key: str) -> None:
        self._data.pop(key, None)

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
