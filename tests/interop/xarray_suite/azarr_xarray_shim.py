"""pytest plugin: xarray's own Zarr backend tests, run against azarr instead of zarr-python.

Loaded with ``-p azarr_xarray_shim`` into a pytest run of xarray's test modules from
its sdist (``tests/interop/test_xarray_suite.py`` does that, in the venv
``tests/interop/xarray_env.py`` builds). It points xarray's write and open hooks at
azarr, so every ``Dataset.to_zarr``/``DataArray.to_zarr``/``DataTree.to_zarr`` in
those tests is ``azarr.xarray.to_zarr`` and every ``open_dataset``/``open_zarr``/
``open_datatree``/``open_groups`` with the ``zarr`` engine (named or guessed) is
``engine="azarr"``:

* ``xarray.backends.writers.to_zarr`` and ``_datatree_to_zarr`` (what the
  ``to_zarr`` methods call) become ``azarr.xarray.to_zarr``, given the arguments
  the caller set;
* the ``zarr`` entry of xarray's backend registry becomes azarr's entry point;
* ``ZarrBase.create_store`` yields an ``azarr.xarray.AzarrDataStore`` (tests that
  write through ``Dataset.dump_to_store``);
* a zarr-python ``MemoryStore`` the tests create (``TestZarrDictStore``) is given to
  azarr as a store over the same dict (zarr-python keeps ``Buffer`` objects there,
  azarr bytes), so the zarr-python reads some tests make see what azarr wrote.

zarr-python stays installed: xarray's tests import it, check with it what azarr
wrote, and set its ``default_zarr_format`` config, which the shim passes on as
``zarr_format=``.

Selection: the Zarr format variants in ``AZARR_SUITE_ZARR_FORMATS`` (default
``2,3``), minus `DESELECTED`.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any

import pytest

FORMATS = tuple(int(f) for f in os.environ.get("AZARR_SUITE_ZARR_FORMATS", "2,3").split(","))

#: Tests that inspect or patch zarr-python objects, so they test zarr-python, not the engine.
#: Matched against the test name without its parameters, in the four selected classes.
DESELECTED: dict[str, str] = {
    # Reads and rewrites attributes through ``store.ds``, the zarr-python group inside xarray's
    # ZarrStore (``zarr_group[var].attrs.put``).
    "test_hidden_zarr_keys": "uses the zarr-python group of xarray's ZarrStore (store.ds)",
    # Reads each array's ``metadata.dimension_names`` through ``store.ds`` (Zarr v3); what azarr
    # writes there is checked against zarr-python 3.4's own output in test_xarray_v3_interop.py.
    "test_dimension_names": "uses the zarr-python group of xarray's ZarrStore (store.ds)",
    # Builds xarray's ZarrStore over zarr-python groups and checks its member cache.
    "test_cache_members": "tests xarray's ZarrStore member cache over zarr-python groups",
    # Patch zarr.AsyncGroup.getitem / zarr.AsyncArray.getitem and count calls (and write
    # zarr_format=3); azarr's load_async concurrency is checked in tests/test_xarray.py.
    "test_avoid_excess_metadata_calls": "counts calls of zarr-python's AsyncGroup.getitem",
    "test_async_load_multiple_variables": "counts calls of zarr-python's AsyncArray.getitem",
    "test_concurrent_load_multiple_objects": "counts calls of zarr-python's AsyncArray.getitem",
    "test_indexing": "counts calls of zarr-python's AsyncArray/AsyncOIndex/AsyncVIndex.getitem",
}

#: What xarray's ``to_zarr`` functions default to: only arguments the caller changed are
#: passed on, so a test exercising a default exercises azarr's.
_DEFAULTS: dict[str, Any] = {
    "mode": None,
    "group": None,
    "encoding": None,
    "compute": True,
    "consolidated": None,
    "append_dim": None,
    "region": None,
    "safe_chunks": True,
    "align_chunks": False,
    "storage_options": None,
    "zarr_format": None,
    "write_empty_chunks": None,
    "chunkmanager_store_kwargs": None,
    "write_inherited_coords": False,
}


class ZarrMemoryView(MutableMapping[str, bytes]):
    """The dict inside a zarr-python ``MemoryStore``, as ``str -> bytes``."""

    def __init__(self, store: Any) -> None:
        self._items = store._store_dict

    def __getitem__(self, key: str) -> bytes:
        return bytes(self._items[key].to_bytes())

    def __setitem__(self, key: str, value: bytes) -> None:
        from zarr.core.buffer import cpu

        self._items[key] = cpu.Buffer.from_bytes(bytes(value))

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)


_stores: dict[int, tuple[Any, Any]] = {}


def adapt(target: Any) -> Any:
    """azarr's store for a zarr-python ``MemoryStore`` (one per dict, shared); anything else as is."""
    import zarr.storage

    if not isinstance(target, zarr.storage.MemoryStore):
        return target
    key = id(target._store_dict)
    if key not in _stores:
        from azarr.storage import MappingStore

        _stores[key] = (target, MappingStore(ZarrMemoryView(target)))  # keeps the dict alive
    return _stores[key][1]


#: The Zarr format the running test chose with xarray's ``default_zarr_format`` fixture
#: (which sets zarr-python's config), or None when it does not use that fixture.
_fixture_format: list[int | None] = [None]


@pytest.fixture(autouse=True)
def _follow_default_zarr_format(request: pytest.FixtureRequest) -> Iterator[None]:
    callspec = getattr(request.node, "callspec", None)
    _fixture_format[0] = callspec.params.get("default_zarr_format") if callspec is not None else None
    yield
    _fixture_format[0] = None


def _given(arguments: dict[str, Any]) -> dict[str, Any]:
    given = {k: v for k, v in arguments.items() if k not in _DEFAULTS or v is not _DEFAULTS[k]}
    # What zarr-python's config says is what xarray's engine would write when not told.
    if _fixture_format[0] is not None:
        given.setdefault("zarr_format", _fixture_format[0])
    return given


def to_zarr(
    dataset: Any, store: Any = None, mode: Any = None, group: Any = None, encoding: Any = None, **kwargs: Any
) -> Any:
    import azarr.xarray

    arguments = {"mode": mode, "group": group, "encoding": encoding, **kwargs}
    return azarr.xarray.to_zarr(dataset, adapt(store), **_given(arguments))


def datatree_to_zarr(
    tree: Any,
    store: Any,
    mode: Any = "w-",
    encoding: Any = None,
    group: Any = None,
    write_inherited_coords: bool = False,
    **kwargs: Any,
) -> Any:
    import azarr.xarray

    arguments = {
        "mode": mode,
        "encoding": encoding,
        "group": group,
        "write_inherited_coords": write_inherited_coords,
        **kwargs,
    }
    return azarr.xarray.to_zarr(tree, adapt(store), **_given(arguments))


def install() -> None:
    """Point xarray's Zarr write and open hooks at azarr."""
    import xarray.backends.writers as writers
    from xarray.backends import common, plugins

    from azarr.xarray import AzarrBackendEntrypoint

    class Entrypoint(AzarrBackendEntrypoint):  # type: ignore[misc]
        def open_dataset(self, filename_or_obj: Any, **kwargs: Any) -> Any:
            return super().open_dataset(adapt(filename_or_obj), **kwargs)

        def open_datatree(self, filename_or_obj: Any, **kwargs: Any) -> Any:
            return super().open_datatree(adapt(filename_or_obj), **kwargs)

        def open_groups_as_dict(self, filename_or_obj: Any, **kwargs: Any) -> Any:
            return super().open_groups_as_dict(adapt(filename_or_obj), **kwargs)

    writers.to_zarr = to_zarr
    writers._datatree_to_zarr = datatree_to_zarr
    common.BACKEND_ENTRYPOINTS["zarr"] = ("azarr", Entrypoint)
    plugins.list_engines.cache_clear()


def _patch_create_store() -> None:
    module = sys.modules.get("xarray.tests.test_backends")
    if module is None:
        return
    from azarr.xarray import AzarrDataStore

    @contextlib.contextmanager
    def create_store(self: Any, cache_members: bool = False) -> Iterator[Any]:
        with self.create_zarr_target() as target:
            yield AzarrDataStore.open_group(adapt(target), mode="w")

    module.ZarrBase.create_store = create_store


def _enabled() -> bool:
    # AZARR_SUITE_ENGINE=zarr runs the same selection on xarray's own engine (the reference).
    return os.environ.get("AZARR_SUITE_ENGINE", "azarr") == "azarr"


def pytest_configure(config: pytest.Config) -> None:
    if _enabled():
        install()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _enabled():
        _patch_create_store()
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        fmt = params.get("default_zarr_format", params.get("zarr_format"))
        name = getattr(item, "originalname", item.name)
        wanted = (fmt is None or fmt in FORMATS) and name not in DESELECTED
        (keep if wanted else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
