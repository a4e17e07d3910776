"""What `azarr.sync.Array` and `azarr.sync.Group` share: the wrapped node, calls on the I/O loop,
the store views, ``read_only`` and ``attrs``."""

from __future__ import annotations

from typing import Any, TypeVar

from azarr.core._node import Node as AsyncNode
from azarr.sync._attributes import Attributes
from azarr.sync._loop import run
from azarr.sync._stores import Store, chunk_store_view, store_view

N = TypeVar("N", bound="SyncNode")


class SyncNode:
    """Base of the sync array and group: a node of the async API driven from blocking code."""

    _async: AsyncNode

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._views: list[Store] = []

    @classmethod
    def _opened(cls: type[N], coro: Any, store: Any, timeout: float | None) -> N:
        """The node ``coro`` opens or creates, holding the caller's ``store`` view."""
        # Array and Group take the async node first (their zarr 2 constructors).
        node = cls(run(coro, timeout), timeout=timeout)  # type: ignore[misc]
        node._keep_views(store)
        return node

    def _keep_views(self, *stores: Any) -> None:
        """Hold the caller's sync stores, so `store` / `chunk_store` give those very objects back."""
        self._views = [s for s in stores if isinstance(s, Store)]

    def _share_views(self, other: SyncNode) -> SyncNode:
        """``other`` (a node opened through this one) holding the same store views."""
        other._views = self._views
        return other

    def _run(self, coro: Any, timeout: float | None) -> Any:
        return run(coro, self.timeout if timeout is None else timeout)

    @property
    def read_only(self) -> bool:
        """True if changes are refused; settable, as in zarr-python 2."""
        return self._async.read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._async.read_only = value

    @property
    def store(self) -> Any:
        """The store holding the node's metadata (the object given when it was opened with one)."""
        return store_view(self._async.store, self.timeout)

    @property
    def chunk_store(self) -> Any:
        """Where the chunks are: `store` unless the node was opened with a ``chunk_store``."""
        return chunk_store_view(self._async.store, self.timeout)

    @property
    def attrs(self) -> Attributes:
        """User attributes (``.zattrs``, or inside a v3 ``zarr.json``): a mutable mapping whose changes
        are written at once.

        ``node.attrs = {...}`` replaces them all (one write).
        """
        return Attributes(self._async.attrs, cache=self._async.cache_attrs, owner=self)

    @attrs.setter
    def attrs(self, values: dict[str, Any]) -> None:
        self._run(self._async.attrs.put(values), None)
