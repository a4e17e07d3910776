"""`IcechunkStore` without a repository: URLs and specs, the chunk-key grammar, the reference
table, hostile chunk ids, and the error when icechunk is missing.

Real repositories (icechunk 2.x needs Python >= 3.12) are read in the Icechunk venv:
tests/interop/test_icechunk.py.
"""

from __future__ import annotations

import pickle
import sys
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import InvalidReferenceError
from azarr.storage import IcechunkStore
from azarr.storage._icechunk import _Array, _parse_array

SECRET = "s3cr3t-value"


def test_url_and_spec() -> None:
    options = {"endpoint_url": "http://127.0.0.1:9", "key": "k", "secret": SECRET, "tag": "v1"}
    store = azarr.storage.from_url("icechunk://s3://bucket/repo/", storage_options=options)
    assert isinstance(store, IcechunkStore)
    assert store.url == "icechunk://s3://bucket/repo"
    assert "tag 'v1'" in repr(store) and SECRET not in repr(store) and SECRET not in repr(store.spec)
    copy = pickle.loads(pickle.dumps(store))  # not opened yet: the spec, no snapshot pinned
    assert isinstance(copy, IcechunkStore) and copy.spec == store.spec
    local = IcechunkStore("relative/repo")
    assert local.url.startswith("icechunk://file:///") and local.url.endswith("/relative/repo")
    assert local.allowed_targets() == ("file",)
    assert IcechunkStore("s3://b/r", allowed_targets=["s3://b/data/"]).allowed_targets() == ("s3://b/data/",)
    with pytest.raises(ValueError, match="at most one"):
        IcechunkStore("s3://b/r", branch="main", snapshot_id="X")
    with pytest.raises(ValueError, match="local paths and s3://"):
        IcechunkStore("gs://bucket/repo")


async def test_missing_icechunk_is_an_import_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "icechunk", None)  # import icechunk -> ImportError
    store = IcechunkStore("/nonexistent/repo")
    with pytest.raises(ImportError, match=r"azarr\[icechunk\]"):
        await azarr.open_group(store, mode="r")


def test_chunk_key_grammar() -> None:
    default = _parse_array(b'{"node_type": "array", "shape": [4, 5]}', "a/b", "icechunk://x")
    assert default is not None and default.coords("c/1/2") == (1, 2)
    assert default.coords("c/1") is None and default.coords("zarr.json") is None
    assert default.coords("c/1/-2") is None and default.coords("c/1/２") is None  # no sign, ASCII digits
    dotted = _parse_array(
        b'{"node_type": "array", "shape": [4, 5], "chunk_key_encoding": '
        b'{"name": "v2", "configuration": {"separator": "."}}}',
        "a",
        "icechunk://x",
    )
    assert dotted is not None and dotted.coords("1.2") == (1, 2) and dotted.coords("c/1/2") is None
    scalar = _parse_array(b'{"node_type": "array", "shape": []}', "", "icechunk://x")
    assert scalar is not None and scalar.coords("c") == ()
    assert _parse_array(b'{"node_type": "group"}', "g", "icechunk://x") is None
    with pytest.raises(InvalidReferenceError, match="chunk key encoding"):
        _parse_array(
            b'{"node_type": "array", "shape": [1], "chunk_key_encoding": {"name": "custom"}}', "a", "x"
        )


def _batch(coords: list[list[int]], kinds: list[int], paths: list[str], inline: dict[int, bytes]) -> Any:
    n = len(coords)
    offsets = np.arange(n, dtype=np.uint64) * 100
    lengths = np.full(n, 100, dtype=np.uint64)
    return (np.array(coords, np.uint32), np.array(kinds, np.uint8), paths, offsets, lengths, inline)


def test_reference_table_and_target_ranges(tmp_path: Any) -> None:
    array = _Array("v", 2, "/", False)
    batches = [
        _batch([[2, 0], [0, 1]], [1, 2], ["CHUNKID0000000000000", "file:///data/a.nc"], {}),
        _batch([[1, 1], [0, 0]], [3, 1], ["", "../../etc/passwd"], {0: b"inline!"}),
    ]
    array.fill(batches, "test")
    assert array.radix == (3, 2)
    assert array.row((5, 0)) is None and array.row((1, 0)) is None  # outside the grid / no reference
    store = IcechunkStore(tmp_path / "repo")
    native = store._target_range(array, array.row((2, 0)), "v/c/2/0")  # type: ignore[arg-type]
    assert not isinstance(native, bytes)
    assert (native.key, native.byte_range) == ("chunks/CHUNKID0000000000000", azarr.storage.ByteRange(0, 100))
    virtual = store._target_range(array, array.row((0, 1)), "v/c/0/1")  # type: ignore[arg-type]
    assert not isinstance(virtual, bytes)
    assert (virtual.key, virtual.byte_range) == ("a.nc", azarr.storage.ByteRange(100, 200))
    assert store._target_range(array, array.row((1, 1)), "v/c/1/1") == b"inline!"  # type: ignore[arg-type]
    with pytest.raises(InvalidReferenceError, match="bad chunk id"):
        store._target_range(array, array.row((0, 0)), "v/c/0/0")  # type: ignore[arg-type]
