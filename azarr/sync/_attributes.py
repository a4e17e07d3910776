"""``node.attrs`` of the sync classes: a mutable mapping whose changes are written at once."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from azarr.api.creation import resolve_store
from azarr.core import Attributes as AsyncAttributes
from azarr.metadata import ZATTRS
from azarr.scheduler import StoreIO
from azarr.sync._loop import run
from azarr.sync._mirror import mirrors, to_async
from azarr.sync._owner import Runner
from azarr.sync._stores import Store


class _NoTimeout:
    """The runner of attributes opened on their own: no default timeout."""

    def _run(self, coro: Any, timeout: float | None) -> Any:
        return run(coro, timeout)


class Attributes(MutableMapping[str, Any]):
    """zarr-python 2's ``Attributes``: reads use the loaded copy, every change rewrites ``.zattrs``.

    ``attrs["units"] = "K"``, ``del attrs["units"]`` and ``attrs.update(...)`` each
    write the whole document once (batch several changes in one ``update``).
    Nodes give theirs as ``node.attrs``; zarr-python 2's constructor
    ``Attributes(store, key=".zattrs")`` opens the document at ``key`` of any store.

    Parameters
    ----------
    store : azarr.Attributes, or Store, str or MutableMapping
        A node's async attributes to drive, or the store holding the document.
    key : str
        The document's key, when ``store`` is a store (default ``".zattrs"``).
    read_only : bool
        Refuse changes (when ``store`` is a store).
    cache : bool
        False rereads the document before every read (zarr-python 2 ``cache_attrs=False``),
        so changes made through another handle or process are seen.
    synchronizer : optional
        zarr-python 2's argument, accepted (see `azarr.sync.ThreadSynchronizer`).
    owner : Array or Group, optional
        The node whose default ``timeout`` applies.
    """

    def __init__(
        self,
        store: Any,
        key: str = ZATTRS,
        read_only: bool = False,
        cache: bool = True,
        synchronizer: Any = None,
        *,
        owner: Runner | None = None,
    ) -> None:
        self._owner: Runner = owner or _NoTimeout()
        self._cached = cache
        if isinstance(store, AsyncAttributes):
            self._inner = store
            self._loaded = True  # read when the node was opened
        else:
            io = StoreIO(resolve_store(to_async(store), None))
            self._inner = AsyncAttributes(io, key, {}, read_only=read_only)
            self._loaded = False  # read on first use, as zarr-python 2 does

    @property
    def store(self) -> Store:
        """The store holding the document."""
        return Store.view_of(self._inner.store)

    @property
    def cache(self) -> bool:
        """False if every read rereads ``.zattrs`` (zarr-python 2 ``cache_attrs=False``)."""
        return self._cached

    def _current(self) -> AsyncAttributes:
        if not (self._cached and self._loaded):
            self._owner._run(self._inner.refresh(), None)
            self._loaded = True
        return self._inner

    def _ipython_key_completions_(self) -> list[str]:
        return sorted(self._current())

    @property
    def key(self) -> str:
        """The ``.zattrs`` key."""
        return self._inner.key

    @property
    def read_only(self) -> bool:
        """True if changes are refused."""
        return self._inner.read_only

    def __getitem__(self, name: str) -> Any:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())

    def __setitem__(self, name: str, value: Any) -> None:
        self._owner._run(self._inner.set(name, value), None)

    def __delitem__(self, name: str) -> None:
        self._owner._run(self._inner.delete(name), None)

    def asdict(self) -> dict[str, Any]:
        """A copy of the attributes as a plain dict (zarr-python 2 ``attrs.asdict()``)."""
        return self._current().asdict()

    @mirrors(AsyncAttributes.refresh)
    def refresh(self, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.refresh(), timeout)

    @mirrors(AsyncAttributes.update)
    def update(self, *args: Mapping[str, Any], timeout: float | None = None, **kwargs: Any) -> None:  # type: ignore[override]
        self._owner._run(self._inner.update(*args, **kwargs), timeout)

    @mirrors(AsyncAttributes.put)
    def put(self, values: Mapping[str, Any], *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.put(values), timeout)

    @mirrors(AsyncAttributes.set)
    def set(self, name: str, value: Any, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.set(name, value), timeout)

    @mirrors(AsyncAttributes.delete)
    def delete(self, name: str, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.delete(name), timeout)
