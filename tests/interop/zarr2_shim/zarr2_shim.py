"""pytest plugin: run zarr-python 2.18's own tests (the ``zarr.tests`` package in its wheel) on ``azarr.sync``.

Loaded with ``-p zarr2_shim`` in the venv of ``refenv.SHIM`` (zarr 2.18 + azarr's dependencies, this
checkout on ``PYTHONPATH``). It does these things, and no more:

* **routes** zarr-python 2's public names to azarr's: every name a zarr 2 user imports from ``zarr``,
  ``zarr.core``, ``zarr.creation``, ``zarr.hierarchy``, ``zarr.convenience``, ``zarr.storage``,
  ``zarr.n5``, ``zarr.attrs``, ``zarr.sync``, ``zarr.util`` and ``zarr.errors`` is replaced by the
  object of the same name in ``azarr.sync`` (errors: ``azarr.errors``) where azarr has one, in the
  test modules' namespaces and as attributes of the ``zarr`` package (``zarr.open_group(...)``).
  zarr's own modules keep their own objects, so zarr's helpers that the tests also call
  (``zarr.storage.init_array``, ``normalize_store_arg``) run as written. Names azarr does not
  define (``SQLiteStore``, ``DBMStore``, ...) stay zarr 2's: zarr 2 code passes their stores to
  azarr as mappings, as a user would. The routed and unrouted names are printed in the header.
* lets zarr 2's storage helpers take azarr's sync stores as stores: `azarr.sync.Store` is
  registered as a virtual ``zarr._storage.store.BaseStore`` with zarr's format tag
  (``_store_version = 2``) and its default chunk-key separator under zarr's private name
  (``_dimension_separator``), so ``init_array(store)`` writes into it rather than into a
  ``KVStore`` wrapped around it; azarr's nodes carry zarr's private format tag ``_version = 2``,
  and ``_store`` (their store), on which zarr's tests pick their Zarr v2 expectations.
* **deselects** the tests listed in `DESELECTED`, each with its reason: tests of zarr-python 2's
  private state, and tests of structured dtypes with object fields (refused by design); and
  **trims** parametrisations (`TRIMMED_CLASSES`, `_trim_reason`): test classes that repeat
  another's tests on a store azarr serves with the same code (kept out so the suite stays short),
  zarr 2.18's experimental v3 layout, and copies into HDF5 files.
* allows unpickling in numcodecs and azarr, as zarr's object-array tests need (they unpickle what
  they wrote; zarr 2.18.7 fails them beside numcodecs 0.15 without it).
* marks as strict expected failures (`ACCEPTS_MORE`) the tests asserting that zarr-python 2
  raises where azarr deliberately accepts more (docs/parity.md).
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

#: zarr-python 2 modules and the public names routed from each (when azarr defines them).
ROUTED_MODULES: dict[str, tuple[str, ...]] = {
    "zarr": (
        "Array", "Group", "array", "consolidate_metadata", "copy", "copy_all", "copy_store", "create",
        "empty", "empty_like", "full", "full_like", "group", "load", "ones", "ones_like", "open",
        "open_array", "open_consolidated", "open_group", "open_like", "save", "save_array", "save_group",
        "tree", "zeros", "zeros_like", "CopyError", "MetadataError",
        "ABSStore", "DBMStore", "DictStore", "DirectoryStore", "KVStore", "LMDBStore", "LRUStoreCache",
        "MemoryStore", "MongoDBStore", "NestedDirectoryStore", "RedisStore", "SQLiteStore", "TempStore",
        "ZipStore", "N5Store", "N5FSStore", "ProcessSynchronizer", "ThreadSynchronizer",
    ),
    "zarr.core": ("Array",),
    "zarr.creation": (
        "array", "create", "empty", "empty_like", "full", "full_like", "ones", "ones_like", "open_array",
        "open_like", "zeros", "zeros_like",
    ),
    "zarr.hierarchy": ("Group", "group", "open_group"),
    "zarr.convenience": (
        "consolidate_metadata", "copy", "copy_all", "copy_store", "load", "open", "open_consolidated",
        "save", "save_array", "save_group", "tree",
    ),
    "zarr.storage": (
        "ABSStore", "DBMStore", "DictStore", "DirectoryStore", "FSStore", "KVStore", "LMDBStore",
        "LRUStoreCache", "MemoryStore", "MongoDBStore", "NestedDirectoryStore", "RedisStore",
        "SQLiteStore", "TempStore", "ZipStore", "ConsolidatedMetadataStore", "getsize",
    ),
    "zarr.n5": ("N5Store", "N5FSStore"),
    "zarr.attrs": ("Attributes",),
    "zarr.sync": ("ThreadSynchronizer", "ProcessSynchronizer"),
    "zarr.util": ("InfoReporter", "TreeViewer"),
}  # fmt: skip

#: zarr-python 2's error classes, routed to `azarr.errors` (azarr's tree keeps zarr 2's bases).
ROUTED_ERRORS = (
    "MetadataError", "CopyError", "ContainsGroupError", "ContainsArrayError", "ArrayNotFoundError",
    "GroupNotFoundError", "PathNotFoundError", "BadCompressorError", "ReadOnlyError",
    "BoundsCheckError", "NegativeStepError", "VindexInvalidSelectionError", "ArrayIndexError",
)  # fmt: skip

_PRIVATE = "reads zarr-python 2's private state ({}); the behaviour is tested in tests/test_sync_zarr2.py"

_OBJECT_FIELDS = (
    "a structured dtype with an object field, which azarr refuses by design (docs/parity.md: its "
    "fill value is a pickle decoded on every open); zarr 2.18 passes these only with unpickling allowed"
)


#: Tests not run, as ``(module, class ("*": any, "": none), test name)``, each with its reason.
DESELECTED: dict[tuple[str, str, str], str] = {
    ("test_core", "*", "test_nbytes_stored"): _PRIVATE.format("Array._key_prefix"),
    ("test_core", "*", "test_pickle"): _PRIVATE.format("Array._cache_metadata"),
    ("test_core", "*", "test_nchunks_initialized"): _PRIVATE.format("Array._chunk_key"),
    ("test_core", "*", "test_object_arrays_danger"): _PRIVATE.format("writes Array._filters"),
    ("test_creation", "", "test_open_array"): _PRIVATE.format("Array._dimension_separator"),
    ("test_creation", "", "test_open_array_infer_separator_from_store"): _PRIVATE.format(
        "Array._dimension_separator"
    ),
    ("test_hierarchy", "", "test_open_group_from_paths"): _PRIVATE.format("Group._chunk_store"),
    ("test_core", "*", "test_structured_array_contain_object"): _OBJECT_FIELDS,
    ("test_core", "*", "test_structured_with_object"): _OBJECT_FIELDS,
}  # fmt: skip

_routed: list[str] = []
_unrouted: list[str] = []
#: id(zarr 2 object) -> (zarr 2 object, azarr object); the zarr object is kept so its id stays unique.
_replacements: dict[int, tuple[Any, Any]] = {}


def _azarr_object(module: str, name: str) -> Any:
    import azarr.errors
    import azarr.sync

    if module == "zarr.errors":
        return getattr(azarr.errors, name, None)
    return getattr(azarr.sync, name, None)


def route() -> None:
    """Find azarr's object for each routed zarr-python 2 name (see the module docstring)."""
    import zarr
    from zarr._storage.store import BaseStore

    import azarr.sync

    targets: Iterable[tuple[str, tuple[str, ...]]] = [*ROUTED_MODULES.items(), ("zarr.errors", ROUTED_ERRORS)]
    for module_name, names in targets:
        module = importlib.import_module(module_name)
        for name in names:
            original = getattr(module, name)
            replacement = _azarr_object(module_name, name)
            if replacement is None:
                _unrouted.append(f"{module_name}.{name}")
                continue
            _replacements[id(original)] = (original, replacement)
            _routed.append(f"{module_name}.{name}")
    for name in ROUTED_MODULES["zarr"]:
        original = getattr(zarr, name)
        if id(original) in _replacements:
            setattr(zarr, name, _replacements[id(original)][1])
    BaseStore.register(azarr.sync.Store)
    # zarr 2's helpers read a store's format tag and default chunk-key separator under private names.
    azarr.sync.Store._store_version = 2  # type: ignore[attr-defined]
    azarr.sync.Store._dimension_separator = property(  # type: ignore[attr-defined]
        lambda store: store.async_store.dimension_separator
    )
    # zarr's tests branch on a node's private format tag (``_version``, ``_store._store_version``)
    # to pick their Zarr v2 expectations.
    azarr.sync.Array._version = azarr.sync.Group._version = 2  # type: ignore[attr-defined]
    azarr.sync.Array._store = azarr.sync.Group._store = property(lambda node: node.store)  # type: ignore[attr-defined]


def _route_module(module: Any) -> None:
    """Rebind the routed zarr-python 2 objects a test module imported to azarr's."""
    for name, value in list(vars(module).items()):
        entry = _replacements.get(id(value))
        if entry is not None and entry[0] is value:
            setattr(module, name, entry[1])


#: ``--zarr2-report PATH``: where to write the outcome of every test run, by zarr test name.
_report: dict[str, Any] = {"outcomes": Counter(), "failed": [], "deselected": Counter()}
_test_names: dict[str, str] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--zarr2-report", default=None, help="write counts and failures as JSON here")


def pytest_configure(config: pytest.Config) -> None:
    route()
    # zarr's object-array tests unpickle chunks they have just written: trusted data, for which a
    # zarr 2 user opts in to unpickling in numcodecs >= 0.15 (zarr's own tests fail without it),
    # and in azarr the same way.
    import numcodecs.pickles

    import azarr

    numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = True
    azarr.config.set(allow_pickle=True)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome
        _report["outcomes"][outcome] += 1
        if outcome in ("failed", "xpassed"):
            _report["failed"].append(_test_names.get(report.nodeid, report.nodeid))


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--zarr2-report")
    if path:
        Path(path).write_text(json.dumps(_report, indent=1, sort_keys=True))


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [
        f"zarr2_shim: {len(_routed)} zarr-python 2 names routed to azarr",
        f"zarr2_shim: not routed (zarr 2's own): {', '.join(_unrouted) or '-'}",
    ]


_NEGATIVE_STEPS = "negative slice steps are read as NumPy reads them (azarr accepts more: docs/parity.md)"
_BLOCK_CLIP = "block slices past the chunk grid clip as Python slices do (azarr accepts more: docs/parity.md)"
_MULTI_FIELD = "writes to several fields of a structured dtype at once (azarr accepts more: docs/parity.md)"

#: Tests that assert zarr-python 2 raises where azarr deliberately accepts more; they run as strict
#: expected failures (``xfail(strict=True)``, failing by pytest's "DID NOT RAISE"), so azarr's
#: behaviour stays as listed in docs/parity.md: a pass would fail the suite.
ACCEPTS_MORE: dict[tuple[str, str, str], str] = {
    ("test_core", "*", "test_array_2d_partial"): (
        "values broadcast to the selection as NumPy broadcasts them, e.g. shape (10,) into (1, 10) "
        "(azarr accepts more: docs/parity.md)"
    ),
    ("test_indexing", "", "test_get_basic_selection_1d"): _NEGATIVE_STEPS,
    ("test_indexing", "", "test_get_basic_selection_2d"): _NEGATIVE_STEPS,
    ("test_indexing", "", "test_get_orthogonal_selection_1d_int"): _NEGATIVE_STEPS,
    ("test_indexing", "", "test_get_orthogonal_selection_2d"): _NEGATIVE_STEPS,
    ("test_indexing", "", "test_get_block_selection_2d"): _BLOCK_CLIP,
    ("test_indexing", "", "test_set_block_selection_2d"): _BLOCK_CLIP,
    ("test_indexing", "", "test_fancy_indexing_doesnt_mix_with_implicit_slicing"): (
        "integer arrays with fewer indices than dimensions, and Ellipsis with an integer array, "
        "select as NumPy does (azarr accepts more: docs/parity.md)"
    ),
    ("test_indexing", "", "test_set_basic_selection_0d"): _MULTI_FIELD,
    ("test_indexing", "", "test_set_selections_with_fields"): _MULTI_FIELD,
}


def _accepts_more_reason(item: pytest.Item, module: str, cls: str, name: str) -> str | None:
    for key in ((module, cls, name), (module, "*" if cls else "", name)):
        if key in ACCEPTS_MORE:
            return ACCEPTS_MORE[key]
    params = item.callspec.params if isinstance(item, pytest.Function) and hasattr(item, "callspec") else {}
    if name == "test_consolidate_metadata" and params.get("listable") is False:
        return (
            "lists a file system whose ls() the test removed (zarr 2 raises NotImplementedError): "
            "azarr lists fsspec stores with find() (azarr accepts more: docs/parity.md)"
        )
    return None


_SAME_PATH = "runs the azarr code path of {} again (trimmed: the suite runs each code path once)"

#: Parametrisations not run: whole test classes, as ``(module, class)``, that repeat another
#: class's tests on a store azarr handles with the same code, and the reason.
TRIMMED_CLASSES: dict[tuple[str, str], str] = {
    ("test_core", "TestArrayWithN5FSStore"): _SAME_PATH.format("TestArrayWithN5Store (one N5Store in azarr)"),
    ("test_core", "TestArrayWithSQLiteStore"): _SAME_PATH.format(
        "TestArrayWithDBMStore (a zarr 2 store used as a mapping)"
    ),
    ("test_core", "TestArrayWithFSStore"): _SAME_PATH.format("TestArrayWithDirectoryStore (a local path)"),
    ("test_core", "TestArrayWithFSStoreNestedPartialRead"): _SAME_PATH.format(
        "TestArrayWithFSStoreNested and TestArrayWithFSStorePartialRead"
    ),
    ("test_core", "TestArrayWithBZ2Compressor"): _SAME_PATH.format("TestArray (a numcodecs compressor)"),
    ("test_core", "TestArrayWithLZMACompressor"): _SAME_PATH.format("TestArray (a numcodecs compressor)"),
    ("test_core", "TestArrayWithBloscCompressor"): _SAME_PATH.format("TestArrayWithPath (Blosc)"),
    ("test_hierarchy", "TestGroupWithMemoryStore"): _SAME_PATH.format("TestGroup (azarr's MemoryStore)"),
    ("test_hierarchy", "TestGroupWithSQLiteStore"): _SAME_PATH.format(
        "TestGroupWithDBMStore (a zarr 2 store used as a mapping)"
    ),
    ("test_hierarchy", "TestGroupWithFSStore"): _SAME_PATH.format(
        "TestGroupWithDirectoryStore (a local path)"
    ),
}


def _trim_reason(item: pytest.Item, module: str, cls: str) -> str | None:
    if (module, cls) in TRIMMED_CLASSES:
        return TRIMMED_CLASSES[(module, cls)]
    params = item.callspec.params if isinstance(item, pytest.Function) and hasattr(item, "callspec") else {}
    if params.get("zarr_version") == 3:
        return "zarr 2.18's experimental Zarr v3 layout (never the Zarr v3 spec): not what azarr.sync writes"
    if module == "test_convenience" and cls == "TestCopy" and params.get("dest") is True:
        return "copies into an h5py file: azarr writes Zarr, not HDF5 (docs/parity.md)"
    return None


def _names(item: pytest.Item) -> tuple[str, str, str]:
    """``(module, class or "", test function)`` of a collected zarr test."""
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module else ""
    cls = item.cls.__name__ if item.cls else ""
    name = item.originalname if isinstance(item, pytest.Function) else item.name
    return module, cls, name


def _deselect_reason(item: pytest.Item) -> str | None:
    module, cls, name = _names(item)
    for key in ((module, cls, name), (module, "*" if cls else "", name)):
        if key in DESELECTED:
            return DESELECTED[key]
    return _trim_reason(item, module, cls)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept, dropped = [], []
    routed_modules: set[int] = set()
    for item in items:
        module, cls, name = _names(item)
        _test_names[item.nodeid] = f"{module}::{cls}::{name}"
        reason = _deselect_reason(item)
        if reason is not None:
            _report["deselected"][reason] += 1
        (dropped if reason else kept).append(item)
        reason = _accepts_more_reason(item, *_names(item))
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=pytest.fail.Exception))
        module = getattr(item, "module", None)
        if module is not None and id(module) not in routed_modules:
            routed_modules.add(id(module))
            _route_module(module)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
