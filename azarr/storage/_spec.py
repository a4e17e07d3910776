"""Store specs: what identifies a store, apart from the live object that talks to it.

TensorStore splits a kvstore into a ``DriverSpec`` (plain, serialisable
configuration) and the ``Driver`` opened from it (connections, caches). azarr
does the same: a `StoreSpec` is frozen, hashable and picklable -- a driver
name, a root, the ``storage_options`` and the driver's other constructor
parameters -- and a live `Store` is opened from it
(`open_store`). Everything that must be shared *per store* rather than per
Python object is keyed by the spec: request budgets, traffic counters, and the
live store itself, so two ``open_array("s3://b/x")`` calls, or two unpickled
copies of one array in a process, are one store for budgets and stats.

A store pickles as its spec (sessions, pools and per-loop state are rebuilt on
first use in the other process); ``repr`` of a spec hides credentials
(`azarr.storage._redact`). A pickled spec carries the credentials the user
put in ``storage_options`` -- that is what lets a dask worker reconnect -- and
nothing else.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from azarr.storage._redact import redact_options, redact_url, remember_options

if TYPE_CHECKING:
    from azarr.storage._base import Store
    from azarr.storage._registry import StoreDriver

__all__ = ["StoreSpec", "freeze", "open_store", "thaw"]


class _FrozenMapping(tuple):  # type: ignore[type-arg]
    """A dict frozen as a sorted tuple of ``(key, frozen value)`` pairs (hashable)."""

    __slots__ = ()


class _FrozenList(tuple):  # type: ignore[type-arg]
    """A list frozen as a tuple (a distinct type, so it thaws back to a list)."""

    __slots__ = ()


@dataclass(frozen=True, eq=False)
class _Opaque:
    """An unhashable option value (a credentials object, a session): equal only to itself."""

    value: Any

    def __hash__(self) -> int:
        return id(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Opaque) and other.value is self.value


def freeze(value: Any) -> Any:
    """A hashable, picklable stand-in for an option value (dicts, lists, objects).

    Mappings become sorted pair tuples and lists tuples (both reversible by
    `thaw`); hashable values stay as they are; anything else is kept by
    identity (two specs holding the same object are equal, copies are not).
    """
    if isinstance(value, Mapping):
        return _FrozenMapping(sorted(((str(k), freeze(v)) for k, v in value.items()), key=lambda kv: kv[0]))
    if isinstance(value, list):
        return _FrozenList(freeze(v) for v in value)
    if isinstance(value, tuple) and not isinstance(value, _FrozenMapping | _FrozenList):
        return tuple(freeze(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return _Opaque(value)
    return value


def thaw(value: Any) -> Any:
    """The plain value `freeze` stood for (fresh dicts and lists: safe to mutate)."""
    if isinstance(value, _FrozenMapping):
        return {k: thaw(v) for k, v in value}
    if isinstance(value, _FrozenList):
        return [thaw(v) for v in value]
    if isinstance(value, _Opaque):
        return value.value
    if isinstance(value, tuple):
        return tuple(thaw(v) for v in value)
    return value


_EMPTY = _FrozenMapping()
_anonymous = itertools.count(1)


def anonymous_root(kind: str) -> str:
    """A root no other store in this process has: for stores with no location (a dict, a mapping).

    Not ``id()``: budgets and counters are kept by spec, and an id is reused once its
    object is collected, which would hand a new store an old one's counters.
    """
    return f"{kind}@{next(_anonymous)}"


@dataclass(frozen=True)
class StoreSpec:
    """The configuration that identifies a store: frozen, hashable, picklable.

    Parameters
    ----------
    driver : str
        Registered driver name (``"s3"``, ``"gs"``, ``"file"``, ``"memory"``,
        ``"http"``, ``"zip"``, an fsspec protocol, or a third-party scheme from the
        ``azarr.stores`` entry-point group); see `azarr.storage.register_store`.
    root : str
        Location of the hierarchy root as the driver spells it (``"bucket/x.zarr"``,
        an absolute path, a URL).
    options : frozen mapping
        The ``storage_options`` (use `storage_options` for a plain dict).
    params : frozen mapping
        The driver's other constructor parameters (``transport``, ``auto_mkdir``, ...).

    Notes
    -----
    ``read_only`` is not part of a spec: a read-only view of a store is the same
    store for budgets and stats. Build specs with `create` or
    `from_url`; every live store has one (`azarr.storage.Store.spec`).
    """

    driver: str
    root: str
    options: Any = field(default=_EMPTY)
    params: Any = field(default=_EMPTY)

    @classmethod
    def create(
        cls,
        driver: str,
        root: str,
        options: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> StoreSpec:
        """A spec from plain ``options`` and ``params`` mappings (frozen here)."""
        remember_options(options or {}, root)
        return cls(driver, root, freeze(dict(options or {})), freeze(dict(params or {})))

    @classmethod
    def from_url(cls, url: str, *, storage_options: Mapping[str, Any] | None = None) -> StoreSpec:
        """The spec a URL or path resolves to (no I/O, nothing opened).

        Same rules as `azarr.storage.from_url`, which opens the result.

        Raises
        ------
        ValueError
            Unknown protocol or malformed URL.
        TypeError
            ``storage_options`` that do not apply to the URL's driver.
        """
        from azarr.storage._registry import spec_from_url

        return spec_from_url(url, storage_options=storage_options)

    def storage_options(self) -> dict[str, Any]:
        """The ``storage_options`` as a new plain dict."""
        result: dict[str, Any] = thaw(self.options)
        return result

    def constructor_params(self) -> dict[str, Any]:
        """The driver parameters as a new plain dict."""
        result: dict[str, Any] = thaw(self.params)
        return result

    def open(self, *, read_only: bool = False) -> Store:
        """The live store for this spec (shared while anyone holds it; see `open_store`)."""
        return open_store(self, read_only=read_only)

    def __hash__(self) -> int:
        # Computed once (the frozen options are tuples, hashed anew each time): specs key
        # every process-wide table, one lookup per inner chunk of a sharded read.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.driver, self.root, self.options, self.params))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_hash", None)  # string hashes differ between processes
        return state

    def __repr__(self) -> str:
        parts = [f"driver={self.driver!r}", f"root={redact_url(self.root)!r}"]
        if self.options:
            parts.append(f"options={redact_options(self.storage_options())!r}")
        if self.params:
            parts.append(f"params={redact_options(self.constructor_params())!r}")
        return f"StoreSpec({', '.join(parts)})"


# Live stores by spec: every open of one spec in this process gets the same object
# (connection pools included) while anyone holds it.
_live: weakref.WeakValueDictionary[StoreSpec, Store] = weakref.WeakValueDictionary()
_live_lock = threading.Lock()


def open_store(spec: StoreSpec, *, read_only: bool = False, driver: StoreDriver | None = None) -> Store:
    """The live store for ``spec``: the one already open in this process, or a new one.

    Parameters
    ----------
    spec : StoreSpec
    read_only : bool
        Return a read-only view (sharing connections and budget) when True.
    driver : StoreDriver, optional
        The driver (usually a Store class); default: the one registered under ``spec.driver``.

    Raises
    ------
    ValueError
        No driver is registered under ``spec.driver``.
    """
    with _live_lock:
        store = _live.get(spec)
    if store is None:
        if driver is None:
            from azarr.storage._registry import driver_for

            driver = driver_for(spec.driver)
        fresh = driver.from_spec(spec)
        with _live_lock:
            store = _live.setdefault(spec, fresh)
    if read_only and not store.read_only:
        return store.with_read_only(True)
    return store


def reopen(driver: StoreDriver, spec: StoreSpec, read_only: bool) -> Store:
    """Unpickling hook of every store: the live store of ``spec`` in this process."""
    return open_store(spec, read_only=read_only, driver=driver)
