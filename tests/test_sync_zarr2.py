"""``azarr.sync`` behaves as zarr-python 2.18 where issue #27 found it did not.

One test per item of the issue's list (properties, setters, exception bases, hierarchy, creation
and metadata, return values, stores as mappings), plus the behaviours of the zarr 2.18 tests the
suite shim deselects because they read zarr's private state (pickling the cache options,
``nchunks_initialized``, ``nbytes_stored``). zarr 2.18's own suite and tutorial run in
``tests/interop/test_zarr2_suite.py`` and ``test_zarr2_tutorial.py``.
"""

from __future__ import annotations

import json
import pickle
import threading
import zipfile
from collections import UserDict
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
import azarr.sync as zs
from azarr.errors import (
    ArrayNotFoundError,
    AzarrError,
    ContainsArrayError,
    ContainsGroupError,
    CopyError,
    GroupNotFoundError,
    ReadOnlyError,
)

# ---------------------------------------------------------------- properties and setters


def test_store_reading_values_are_properties_as_in_zarr2() -> None:
    z = zs.zeros(100, chunks=10, store=zs.MemoryStore())
    assert z.nchunks_initialized == 0 and z.initialized == 0
    z[:25] = 1
    assert z.nchunks_initialized == 3
    stored = z.store
    assert z.nbytes_stored == sum(len(stored[k]) for k in stored)


def test_setters_write_the_documents() -> None:
    store = zs.MemoryStore()
    z = zs.zeros((100,), chunks=10, dtype="i4", store=store)
    z.shape = (105,)
    assert json.loads(store[".zarray"])["shape"] == [105] and zs.open_array(store).shape == (105,)
    z.fill_value = 7
    assert json.loads(store[".zarray"])["fill_value"] == 7 and z[104] == 7
    z.attrs = {"units": "K"}
    assert json.loads(store[".zattrs"]) == {"units": "K"}
    z.read_only = True
    with pytest.raises(PermissionError):
        z[0] = 1
    z.read_only = False
    z[0] = 1


def test_cache_metadata_false_rereads_shape_on_access() -> None:
    store = zs.MemoryStore()
    mine = zs.zeros(10, chunks=5, store=store, cache_metadata=False)
    theirs = zs.open_array(store)
    theirs.resize(20)
    assert mine.shape == (20,) and len(mine) == 20


def test_cache_attrs_false_rereads_attributes() -> None:
    store = zs.MemoryStore()
    g = zs.group(store=store, cache_attrs=False)
    zs.open_group(store).attrs["written"] = "elsewhere"
    assert g.attrs["written"] == "elsewhere"
    cached = zs.open_group(store)
    zs.open_group(store).attrs["later"] = 1
    assert "later" not in cached.attrs


# ---------------------------------------------------------------- exceptions


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (lambda s: zs.open_array(s, mode="r"), ArrayNotFoundError),
        (lambda s: zs.open_group(s, mode="r"), GroupNotFoundError),
        (lambda s: (zs.zeros(3, store=s), zs.group(store=s)), ContainsArrayError),
        (lambda s: (zs.group(store=s), zs.zeros(3, store=s)), ContainsGroupError),
    ],
)
def test_errors_are_caught_as_zarr2_code_catches_them(action: Any, error: type[Exception]) -> None:
    with pytest.raises(ValueError) as caught:  # zarr 2 code writes `except ValueError`
        action(zs.MemoryStore())
    assert isinstance(caught.value, error) and isinstance(caught.value, AzarrError)


def test_read_only_and_copy_errors_have_zarr2_bases() -> None:
    z = zs.zeros(3, store=zs.MemoryStore(), read_only=True)
    with pytest.raises(PermissionError) as read_only:
        z[0] = 1
    assert isinstance(read_only.value, ReadOnlyError)
    source, dest = zs.MemoryStore(), zs.MemoryStore()
    zs.zeros(3, store=source)
    zs.copy_store(source, dest)
    with pytest.raises(CopyError):  # zarr 2: copy_store onto existing keys raises CopyError
        zs.copy_store(source, dest)


# ---------------------------------------------------------------- hierarchy


def test_absolute_paths_from_a_subgroup() -> None:
    root = zs.group()
    sub = root.create_group("a/b")
    root.zeros("x", shape=3)
    assert sub["/x"].path == "x"
    assert sub.require_group("/c/d").path == "c/d"
    sub.create_group("inner")
    sub.move("inner", "/bar")
    assert "bar" in root and "inner" not in sub


def test_members_as_attributes_and_in_dir() -> None:
    g = zs.group()
    g.zeros("temperature", shape=4)
    g.create_group("not-an-identifier")
    assert g.temperature.path == "temperature"
    assert "temperature" in dir(g) and "not-an-identifier" not in dir(g)
    with pytest.raises(AttributeError):
        g.pressure  # noqa: B018
    assert g._repr_html_() is None  # IPython's probes never become member lookups


def test_group_mapping_methods_and_recurse() -> None:
    g = zs.group()
    g.zeros("a", shape=2)
    sub = g.create_group("s")
    sub.zeros("b", shape=2)
    assert list(g.keys()) == ["a", "s"]
    assert [v.path for v in g.values()] == ["a", "s"]
    assert [(k, v.path) for k, v in g.items()] == [("a", "a"), ("s", "s")]
    assert list(g.array_keys()) == ["a"]
    assert list(g.array_keys(recurse=True)) == ["a", "b"]
    assert [a.path for _, a in g.arrays(recurse=True)] == ["a", "s/b"]
    assert list(g.group_keys(recurse=True)) == ["s"]


def test_with_group_and_store_close_the_store(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    with zs.ZipStore(path, mode="w") as store, zs.group(store=store) as g:
        g.zeros("z", shape=4, chunks=2)[:] = 1
    assert zipfile.is_zipfile(path)
    with zipfile.ZipFile(path) as archive:
        assert {".zgroup", "z/.zarray", "z/0", "z/1"} <= set(archive.namelist())


def test_equality_is_same_store_path_and_mode() -> None:
    store = zs.MemoryStore()
    g = zs.group(store=store)
    g.create_group("a")
    assert zs.open_group(store) == g and g["a"] == zs.open_group(store, path="a")
    assert zs.open_group(store, mode="r") != g
    z = g.zeros("z", shape=3)
    assert z == zs.open_array(store, path="z") and z != z.view(shape=(2,))
    assert pickle.loads(pickle.dumps(z)) == z  # an in-memory store compares by contents


def test_chunk_store_on_groups_and_as_attribute() -> None:
    store, chunks = zs.MemoryStore(), zs.MemoryStore()
    g = zs.group(store=store, chunk_store=chunks)
    z = g.zeros("z", shape=4, chunks=2)
    z[:] = 1
    assert g.store is store and g.chunk_store is chunks and z.chunk_store is chunks
    assert sorted(chunks) == ["z/0", "z/1"] and "z/0" not in store


def test_compression_arguments_and_h5py_names() -> None:
    z = zs.create(10, compression="zlib", compression_opts=9)
    assert z.compressor == numcodecs.Zlib(level=9)
    assert zs.create(10, compression=None).compressor is None
    g = zs.group()
    assert g.create_dataset("x", shape=3, fillvalue=42).fill_value == 42
    with pytest.warns(UserWarning, match="shuffle"):
        g.create_dataset("y", shape=3, shuffle=True)


def test_synchronizers_are_kept_and_lock_writes_without_generations() -> None:
    sync = zs.ThreadSynchronizer()
    z = zs.zeros(10, chunks=5, store=zs.KVStore(_PlainMapping()), synchronizer=sync)
    assert z.synchronizer is sync and "Synchronizer type" in z.info
    lock = sync[".zarray"]
    lock.acquire()
    done = threading.Event()
    writer = threading.Thread(target=lambda: (z.__setitem__(slice(0, 3), 1), done.set()))
    writer.start()
    assert not done.wait(0.3)  # the store has no conditional writes: the write waits for the lock
    lock.release()
    writer.join(10)
    assert done.is_set() and z[0] == 1


def test_process_synchronizer_locks_by_file(tmp_path: Path) -> None:
    sync = zs.ProcessSynchronizer(tmp_path / "locks")
    with sync["a/.zarray"]:
        assert (tmp_path / "locks" / "a" / ".zarray").is_file()
    assert pickle.loads(pickle.dumps(sync)).path == sync.path


class _PlainMapping(UserDict[str, bytes]):
    """A mapping that is not a dict: azarr serves it through a MappingStore, without conditional writes."""


# ---------------------------------------------------------------- creation and metadata


def test_compressor_empty_list_means_none() -> None:
    assert zs.zeros(10, compressor=[]).compressor is None


def test_structured_fill_value_of_empty_bytes_is_zero() -> None:
    z = zs.create(3, dtype=[("a", "i4"), ("b", "S2")], fill_value=b"")
    assert z[0].tolist() == (0, b"")


def test_one_field_in_a_list_takes_its_values_or_records_of_it() -> None:
    """``fields=["foo"]`` with values of that field (zarr 2) or with records holding it (NumPy's view)."""
    dt = np.dtype([("foo", "i4"), ("bar", "f8")])
    z = zs.zeros(3, dtype=dt)
    z.set_basic_selection(slice(None), np.array([5, 6, 7]), fields=["foo"])
    assert z["foo"].tolist() == [5, 6, 7]
    z.set_basic_selection(slice(None), np.array([(1, 2.0)] * 3, dtype=dt), fields=["foo"])
    assert z[:].tolist() == [(1, 0.0)] * 3
    z.set_basic_selection(0, (9,), fields=["foo"])
    assert z[0].tolist() == (9, 0.0)


def test_read_only_on_create() -> None:
    z = zs.create(5, read_only=True)
    with pytest.raises(PermissionError):
        z[:] = 1
    assert zs.array(np.arange(3), read_only=True).read_only


def test_array_and_group_constructors_take_a_store() -> None:
    store = zs.MemoryStore()
    zs.zeros(4, store=store, path="a/b")
    z = zs.Array(store, path="a/b")
    assert z.path == "a/b" and z.store is store and z.basename == "b"
    assert zs.Group(store, path="a").path == "a"
    with pytest.raises(ValueError):
        zs.Array(store, path="a")  # a group is there
    with pytest.raises(ValueError):
        zs.Group(store, path="nothing")


def test_n5_paths_and_n5store_from_a_path(tmp_path: Path) -> None:
    z = zs.open_array(str(tmp_path / "x.n5"), mode="w", shape=10, chunks=5, dtype="i4")
    z[:] = 3
    assert isinstance(z.store, zs.N5Store)
    assert (tmp_path / "x.n5" / "attributes.json").is_file()
    store = zs.N5Store(str(tmp_path / "y.n5"))
    zs.group(store=store).zeros("d", shape=2)
    assert json.loads((tmp_path / "y.n5" / "d" / "attributes.json").read_text())["dataType"] == "float64"


def test_documents_as_zarr2_writes_them() -> None:
    store = zs.MemoryStore()
    g = zs.group(store=store)
    g.attrs["a"] = {"z": 1, "é": 2}
    g.zeros("x", shape=(3,), chunks=(2,), dtype="<i4")
    assert store[".zgroup"] == b'{\n    "zarr_format": 2\n}'
    assert store[".zattrs"] == b'{\n    "a": {\n        "z": 1,\n        "\\u00e9": 2\n    }\n}'
    document = json.loads(store["x/.zarray"])
    assert "dimension_separator" not in document  # zarr 2.18 states it only when one was chosen
    assert store["x/.zarray"].startswith(b'{\n    "chunks": [\n        2\n    ],\n    "compressor": {\n')
    assert "dimension_separator" in json.loads(
        zs.zeros(2, store=zs.MemoryStore(), dimension_separator="/").store[".zarray"]
    )


def test_paths_are_normalised_as_zarr2_does() -> None:
    g = zs.group()
    assert g.create_group("a\\b").path == "a/b"
    assert g.create_group("p//q/").path == "p/q"
    assert g.create_group(b"bytes/name").path == "bytes/name"


# ---------------------------------------------------------------- return values


def test_root_array_name_and_0d_chunk_grid() -> None:
    z = zs.zeros((), store=zs.MemoryStore())
    assert z.name is None and z.basename is None and z.async_array.name is None
    assert z.cdata_shape == (1,) and z.nchunks == 1
    assert zs.zeros(3, path="p").name == "/p"


def test_info_and_tree_are_reports() -> None:
    g = zs.group()
    z = g.zeros("foo/bar", shape=(100,), chunks=(10,), dtype="i4")
    z[:] = 1
    info = z.info
    assert repr(info) == str(info) and "azarr.sync.Array" in info
    labels = [label for label, _ in info.items]
    assert labels[-3:] == ["No. bytes stored", "Storage ratio", "Chunks initialized"]
    assert "Chunks initialized : 10/10" in info
    assert info._repr_html_().startswith('<table class="zarr-info">')
    group_info = g.info
    assert ("No. members", "1") in group_info.items and ("Groups", "foo") in group_info.items
    tree = g.tree()
    assert repr(tree) == "/\n └── foo\n     └── bar (100,) int32"
    assert bytes(tree) == b"/\n +-- foo\n     +-- bar (100,) int32"
    assert "<pre" in tree._repr_html_()


def test_copy_results_are_zarr2_tuples() -> None:
    source = zs.group()
    source.zeros("a", shape=4, chunks=2)[:] = 1
    dest = zs.group()
    result = zs.copy(source["a"], dest)
    assert result == (1, 0, result[2]) and repr(result) == repr(tuple(result))
    copied = zs.copy_store(source.store, zs.MemoryStore())
    assert copied == (4, 0, copied[2]) and isinstance(copied, tuple)


def test_save_returns_none_and_load_of_a_group_is_lazy() -> None:
    store = zs.MemoryStore()
    assert zs.save(store, np.arange(3), np.ones(2)) is None
    loaded = zs.load(store)
    assert isinstance(loaded, zs.LazyLoader) and sorted(loaded) == ["arr_0", "arr_1"]
    assert repr(loaded) == "<LazyLoader: arr_0, arr_1>"
    np.testing.assert_array_equal(loaded["arr_1"], np.ones(2))
    assert zs.save_array(zs.MemoryStore(), np.arange(2)) is None


def test_vindex_takes_a_list_of_bools_as_a_mask() -> None:
    z = zs.array(np.arange(3))
    np.testing.assert_array_equal(z.vindex[[True, False, True]], [0, 2])


# ---------------------------------------------------------------- stores in sync code


@pytest.mark.parametrize("kind", ["local", "memory", "zip"])
def test_stores_are_mutable_mappings(kind: str, tmp_path: Path) -> None:
    store = {
        "local": lambda: zs.LocalStore(tmp_path / "d"),
        "memory": lambda: zs.MemoryStore(),
        "zip": lambda: zs.ZipStore(tmp_path / "d.zip"),  # zarr 2's default mode "a"
    }[kind]()
    store["a/k"] = b"value"
    store["b"] = np.arange(2, dtype="u1")  # any bytes-like value
    assert store["a/k"] == b"value" and store["b"] == b"\x00\x01"
    assert "a/k" in store and len(store) == 2 and sorted(store) == ["a/k", "b"]
    assert store.listdir() == ["a", "b"]
    with pytest.raises(KeyError):
        store["missing"]
    if kind != "zip":  # entries of a zip archive cannot be removed
        del store["a/k"]
        assert "a/k" not in store
        with pytest.raises(KeyError):
            del store["a/k"]
    store.close()


def test_zipstore_close_leaves_a_valid_archive(tmp_path: Path) -> None:
    store = zs.ZipStore(tmp_path / "x.zip", mode="w")
    zs.zeros(4, chunks=2, store=store)[:] = 1
    store.close()
    with zipfile.ZipFile(tmp_path / "x.zip") as archive:
        assert archive.testzip() is None and ".zarray" in archive.namelist()
    np.testing.assert_array_equal(zs.open_array(zs.ZipStore(tmp_path / "x.zip", mode="r"))[:], 1)
    with pytest.raises(NotImplementedError):  # as zarr 2's ZipStore
        del zs.ZipStore(tmp_path / "x.zip")[".zarray"]


async def test_open_consolidated_defaults_to_r_plus() -> None:
    store = azarr.MemoryStore()
    group = await azarr.group(store=store)
    await group.zeros("z", shape=2)
    await azarr.consolidate_metadata(store)
    root = await azarr.open_consolidated(store)
    array = await root.get("z")
    await array.setitem(0, 5)  # chunk data writable, as zarr 2's default mode "r+"
    assert (await array.getitem(0)) == 5
    sync_root = zs.open_consolidated(store)
    assert not sync_root.read_only


# ---------------------------------------------------------------- what the zarr suite's private-state tests check


def test_pickle_keeps_the_cache_options() -> None:
    z = zs.zeros(10, chunks=5, store=zs.MemoryStore(), cache_metadata=False, cache_attrs=False)
    z[:] = 3
    copy = pickle.loads(pickle.dumps(z))
    assert copy.async_array._recheck_metadata is True and copy.attrs.cache is False
    np.testing.assert_array_equal(copy[:], 3)


def test_nchunks_initialized_counts_what_is_stored() -> None:
    z = zs.zeros(100, chunks=10, store=zs.MemoryStore())
    z.store["foo"] = b"bar"  # not a chunk
    z[:] = 42
    assert z.nchunks_initialized == 10
    del z.chunk_store["0"]
    assert z.nchunks_initialized == 9


# ---------------------------------------------------------------- the same facade on Zarr v3


@pytest.mark.parametrize(
    "make",
    [
        lambda s, **kw: zs.create(10, store=s, **kw),
        lambda s, **kw: zs.zeros(10, store=s, **kw),
        lambda s, **kw: zs.array(np.arange(10), store=s, **kw),
        lambda s, **kw: zs.open_array(s, mode="w", shape=10, **kw),
        lambda s, **kw: zs.open(s, mode="w", shape=10, **kw),
        lambda s, **kw: zs.open_group(s, mode="w", **kw).zeros("z", shape=10),
        lambda s, **kw: zs.group(s, **kw).create_dataset("z", shape=10),
        lambda s, **kw: zs.open(s, mode="w", **kw).create_group("g").zeros("z", shape=10),
    ],
    ids=["create", "zeros", "array", "open_array", "open", "open_group", "group", "open-group-member"],
)
@pytest.mark.parametrize("argument", ["zarr_format", "zarr_version"])
def test_v3_nodes_are_created_and_opened_through_the_facade(make: Any, argument: str) -> None:
    """``zarr_format=3`` (zarr-python 3's name) or ``zarr_version=3`` (zarr 2's) writes ``zarr.json``
    only; the node, and what opens it again, say format 3."""
    store = zs.MemoryStore()
    z = make(store, **{argument: 3})
    assert z.zarr_format == 3
    assert not any(k.rpartition("/")[2] in (".zarray", ".zgroup", ".zattrs") for k in store)
    assert zs.open(store, mode="r", path=z.path).zarr_format == 3
    assert zs.Array(store, path=z.path).zarr_format == 3


def test_v3_opens_refuse_the_other_format() -> None:
    store = zs.MemoryStore()
    zs.zeros(10, store=store, zarr_format=3)
    assert zs.open_array(store, mode="r", zarr_version=3).zarr_format == 3
    with pytest.raises(ArrayNotFoundError):
        zs.open_array(store, mode="r", zarr_format=2)
    with pytest.raises(ValueError, match="differ"):
        zs.open_array(store, mode="r", zarr_format=2, zarr_version=3)
    with pytest.raises(ValueError):
        zs.create(10, zarr_format=4)


def test_v3_properties_and_setters_write_zarr_json() -> None:
    store = zs.MemoryStore()
    z = zs.zeros(100, chunks=10, dtype="i4", store=store, zarr_format=3)
    assert z.nchunks_initialized == 0
    z[:25] = 1
    assert z.nchunks_initialized == 3 and z.nbytes_stored == sum(len(store[k]) for k in store)
    z.shape = (105,)
    z.fill_value = 7
    z.attrs = {"units": "K"}
    document = json.loads(store["zarr.json"])
    assert document["shape"] == [105] and document["fill_value"] == 7
    assert document["attributes"] == {"units": "K"} and ".zattrs" not in store
    again = zs.open_array(store, mode="r")
    assert again.shape == (105,) and again[104] == 7 and dict(again.attrs) == {"units": "K"}
    info = str(z.info)
    assert "Zarr format        : 3" in info and "Codec [1]" in info and "Chunks initialized : 3/11" in info
    group = zs.open_group(zs.MemoryStore(), zarr_format=3)
    group.zeros("x", shape=3)
    group.attrs = {"title": "t"}
    assert json.loads(group.store["zarr.json"])["attributes"] == {"title": "t"}
    assert "Zarr format : 3" in str(group.info) and "No. arrays  : 1" in str(group.info)


def test_v3_uncached_metadata_and_attributes_are_reread() -> None:
    store = zs.MemoryStore()
    mine = zs.zeros(10, chunks=5, store=store, zarr_format=3, cache_metadata=False, cache_attrs=False)
    theirs = zs.open_array(store)
    theirs.resize(20)
    theirs.attrs["k"] = 1
    assert mine.shape == (20,) and dict(mine.attrs) == {"k": 1}
