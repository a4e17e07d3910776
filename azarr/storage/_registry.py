"""The driver registry: URL schemes -> store classes, extensible without editing azarr.

TensorStore registers each kvstore driver and URL scheme where the driver is
defined; azarr does the same. A driver is a `Store`
subclass with two class methods, ``spec_from_url(url, storage_options)`` and
``from_spec(spec)``. azarr's own drivers are registered below; a third-party
package registers its own either by calling `register_store` or, with no
import needed, through the ``azarr.stores`` entry-point group:

    # pyproject.toml of the third-party package
    [project.entry-points."azarr.stores"]
    mykv = "mypackage.store:MyKVStore"

after which ``azarr.open_array("mykv://...")`` finds it. Schemes that are
neither registered nor entry points fall back to fsspec: any protocol with an
async fsspec implementation opens as `FsspecStore`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from azarr.storage._base import Store
    from azarr.storage._spec import StoreSpec


@runtime_checkable
class StoreDriver(Protocol):
    """What `register_store` takes: usually a Store subclass (its class methods)."""

    def spec_from_url(self, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """The spec of ``url`` (no I/O). Raises TypeError for options that do not apply."""
        ...

    def from_spec(self, spec: StoreSpec) -> Store:
        """A new live store for ``spec`` (writable unless the backend is read-only; no I/O)."""
        ...


__all__ = [
    "ENTRY_POINT_GROUP",
    "StoreDriver",
    "driver_for",
    "register_store",
    "registered_schemes",
    "spec_from_url",
]

#: Entry-point group third-party drivers register under (name = URL scheme).
ENTRY_POINT_GROUP = "azarr.stores"

_drivers: dict[str, StoreDriver] = {}
_lock = threading.Lock()
_builtins_loaded = False


def register_store(scheme: str, driver: StoreDriver, *, replace: bool = False) -> None:
    """Make ``scheme://...`` URLs (and specs with ``driver == scheme``) open with ``driver``.

    Parameters
    ----------
    scheme : str
        Lower-case URL scheme (``"mykv"``).
    driver : StoreDriver
        Usually a `Store` subclass: anything with the (class)
        methods ``spec_from_url(url, storage_options) -> StoreSpec`` and
        ``from_spec(spec) -> Store``.
    replace : bool
        Allow replacing an existing registration (default: refuse).

    Raises
    ------
    ValueError
        ``scheme`` is already registered to another driver and ``replace`` is False.
    TypeError
        ``driver`` lacks ``spec_from_url`` or ``from_spec``.
    """
    if not isinstance(driver, StoreDriver):
        raise TypeError(f"register_store needs a driver with spec_from_url and from_spec, got {driver!r}")
    scheme = scheme.lower()
    _load_builtins()
    with _lock:
        current = _drivers.get(scheme)
        if current is not None and current is not driver and not replace:
            raise ValueError(
                f"store scheme {scheme!r} is already registered to {current!r}; pass replace=True"
            )
        _drivers[scheme] = driver


def registered_schemes() -> list[str]:
    """Every scheme with a registered driver (built-in, registered or entry point), sorted."""
    _load_builtins()
    with _lock:
        names = set(_drivers)
    names.update(ep.name.lower() for ep in entry_points(group=ENTRY_POINT_GROUP))
    return sorted(names)


def driver_for(name: str) -> StoreDriver:
    """The driver class for a scheme or spec driver name.

    Looks in the registry, then the ``azarr.stores`` entry points (loaded on first
    use); fsspec protocols are the `FsspecStore` driver's
    business (see `spec_from_url`), not this lookup's.

    Raises
    ------
    ValueError
        No driver has that name.
    """
    name = name.lower()
    _load_builtins()
    with _lock:
        driver = _drivers.get(name)
    if driver is not None:
        return driver
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() == name:
            loaded = ep.load()
            register_store(name, loaded, replace=True)
            return driver_for(name)
    raise ValueError(
        f"no azarr store driver is registered for {name!r} "
        f"(known: {', '.join(registered_schemes())}; register one with azarr.storage.register_store "
        f"or the {ENTRY_POINT_GROUP!r} entry-point group)"
    )


def spec_from_url(url: str, *, storage_options: Mapping[str, Any] | None = None) -> StoreSpec:
    """Resolve a URL or local path to the `StoreSpec` of its driver.

    Local paths and ``file://`` URLs go to the local driver; ``a::b`` chained URLs to
    the fsspec-chain driver; a registered or entry-point scheme to its driver;
    anything else to fsspec if it knows the protocol.

    Raises
    ------
    ValueError
        Nothing knows the scheme.
    """
    from azarr.storage._reference import is_reference_location
    from azarr.storage._url import split_scheme

    if is_reference_location(url):  # kerchunk / VirtualiZarr reference sets
        return driver_for("reference").spec_from_url(url, storage_options)
    if "::" in url:
        return driver_for("fsspec-chain").spec_from_url(url, storage_options)
    scheme, _ = split_scheme(url)
    name = "file" if scheme is None else scheme
    try:
        driver = driver_for(name)
    except ValueError:
        driver = driver_for("fsspec")
    return driver.spec_from_url(url, storage_options)


def _load_builtins() -> None:
    """Register azarr's own drivers (once; deferred so importing this module is cheap)."""
    global _builtins_loaded
    if _builtins_loaded:
        return
    from azarr.storage._azure import AzureBlobStore
    from azarr.storage._fsspec import FsspecStore
    from azarr.storage._gcs import GCSStore
    from azarr.storage._http import HTTPStore
    from azarr.storage._icechunk import IcechunkStore
    from azarr.storage._local import LocalStore
    from azarr.storage._memory import MemoryStore
    from azarr.storage._reference import ReferenceStore
    from azarr.storage._s3 import S3Store
    from azarr.storage._url import ChainedURLDriver
    from azarr.storage._zip import ZipStore

    builtins: dict[str, StoreDriver] = {
        "file": LocalStore,
        "local": LocalStore,
        "memory": MemoryStore,
        "s3": S3Store,
        "s3a": S3Store,
        "gs": GCSStore,
        "gcs": GCSStore,
        "http": HTTPStore,
        "https": HTTPStore,
        "zip": ZipStore,
        "reference": ReferenceStore,
        "icechunk": IcechunkStore,
        "az": AzureBlobStore,
        "abfs": AzureBlobStore,
        "abfss": AzureBlobStore,
        "fsspec": FsspecStore,
        "fsspec-chain": ChainedURLDriver(),
    }
    with _lock:
        if not _builtins_loaded:
            for scheme, driver in builtins.items():
                _drivers.setdefault(scheme, driver)
            _builtins_loaded = True
