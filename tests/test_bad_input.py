"""Bad input gets a clear error naming the key, and loses nothing already stored."""

from __future__ import annotations

import json

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import CodecError, InvalidKeyError, MetadataError, UnsafeCodecError
from azarr.storage import Store

GOOD = {
    "zarr_format": 2,
    "shape": [10],
    "chunks": [5],
    "dtype": "<i4",
    "compressor": None,
    "fill_value": 0,
    "order": "C",
    "filters": None,
}


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        (b"{not json", "a/.zarray"),
        (b"[1, 2]", "a/.zarray"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "dtype"}).encode(), "dtype"),
        (json.dumps({**GOOD, "shape": [-1]}).encode(), "shape"),
        (json.dumps({**GOOD, "shape": "10"}).encode(), "shape"),
        (json.dumps({**GOOD, "chunks": [5, 5]}).encode(), "chunks"),
        (json.dumps({**GOOD, "chunks": [0]}).encode(), "chunks"),
        (json.dumps({**GOOD, "dtype": "<x9"}).encode(), "dtype"),
        (json.dumps({**GOOD, "order": "K"}).encode(), "order"),
        (json.dumps({**GOOD, "zarr_format": 3}).encode(), "zarr_format"),
        (json.dumps({**GOOD, "compressor": {"id": "no-such-codec"}}).encode(), "no-such-codec"),
        (json.dumps({**GOOD, "filters": [{"nope": 1}]}).encode(), "filters"),
        (json.dumps({**GOOD, "dimension_separator": "-"}).encode(), "dimension_separator"),
        (json.dumps({**GOOD, "fill_value": "abc"}).encode(), "fill_value"),
    ],
)
async def test_malformed_zarray_names_key_and_field(store: Store, document: bytes, expected: str) -> None:
    await store.set("a/0", b"precious chunk")
    await store.set("a/.zarray", document)
    with pytest.raises(MetadataError) as info:
        await azarr.open_array(store, mode="r", path="a")
    assert expected in str(info.value)
    assert "a/.zarray" in str(info.value)
    # Nothing was touched: not by the failed open, and not by opening in a writable mode.
    with pytest.raises(MetadataError):
        await azarr.open_array(store, mode="a", path="a", shape=(3,))
    assert await store.get("a/0") == b"precious chunk"
    assert await store.get("a/.zarray") == document


async def test_unknown_extra_keys_are_ignored(store: Store) -> None:
    await store.set(".zarray", json.dumps({**GOOD, "future_extension": {"x": 1}}).encode())
    arr = await azarr.open_array(store, mode="r")
    assert arr.shape == (10,)


async def test_malformed_attrs_and_group_documents(store: Store) -> None:
    await store.set(".zgroup", b'{"zarr_format": 2}')
    await store.set(".zattrs", b"[]")
    with pytest.raises(MetadataError, match=r"\.zattrs"):
        await azarr.open_group(store, mode="r")
    await store.set(".zgroup", b'{"zarr_format": 7}')
    with pytest.raises(MetadataError, match=r"\.zgroup"):
        await azarr.open_group(store, mode="r")


@pytest.mark.parametrize(
    "document",
    [
        b"garbage",
        b'{"metadata": {}}',
        b'{"metadata": [], "zarr_consolidated_format": 1}',
        b'{"zarr_consolidated_format": 2, "metadata": {}}',
    ],
)
async def test_malformed_zmetadata(store: Store, document: bytes) -> None:
    await azarr.group(store)
    await store.set(".zmetadata", document)
    with pytest.raises(MetadataError, match=r"\.zmetadata"):
        await azarr.open_consolidated(store)
    assert await store.get(".zgroup") is not None


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
async def test_corrupt_chunk_raises_codec_error_and_loses_nothing(store: Store, damage: str) -> None:
    data = np.arange(100, dtype="f8")
    arr = await azarr.array(data, chunks=25, store=store, path="x", compressor=numcodecs.Zstd())
    good = await store.get("x/1")
    assert good is not None
    broken = b"\x00not zstd at all" if damage == "garbage" else good[: len(good) // 2]
    await store.set("x/1", broken)
    with pytest.raises(CodecError, match=r"x/1"):
        await arr.get_basic_selection()
    np.testing.assert_array_equal(await arr.get_basic_selection(slice(50, 100)), data[50:])
    # A partial write into the damaged chunk must fail without replacing it.
    with pytest.raises(CodecError, match=r"x/1"):
        await arr.set_basic_selection(30, 1.0)
    assert await store.get("x/1") == broken


async def test_uncompressed_chunk_of_wrong_size(store: Store) -> None:
    arr = await azarr.zeros(10, chunks=5, dtype="i4", compressor=None, store=store)
    await store.set("0", b"\x01\x02\x03")
    with pytest.raises(CodecError, match="'0'"):
        await arr.get_basic_selection()


@pytest.mark.parametrize("path", ["../escape", "a/../../b", "./a", "a/./b"])
async def test_unsafe_node_paths_rejected(store: Store, path: str) -> None:
    with pytest.raises(InvalidKeyError):
        await azarr.zeros(3, store=store, path=path)
    root = await azarr.group(store)
    with pytest.raises(InvalidKeyError):
        await root.get(path)
    with pytest.raises(InvalidKeyError):
        await root.create_group(path)
    assert [k async for k in store.list_prefix("")] == [".zgroup"]


@pytest.mark.parametrize("path", ["a\\b", "a//b", "/a/b/"])
async def test_node_paths_normalised_as_zarr2_does(store: Store, path: str) -> None:
    """Backslashes and runs of slashes in a node path are separators (zarr-python 2's
    ``normalize_storage_path``); store keys given to a store directly are still refused."""
    arr = await azarr.zeros(3, store=store, path=path)
    assert arr.path == "a/b"
    assert sorted([k async for k in store.list_prefix("")]) == [".zgroup", "a/.zgroup", "a/b/.zarray"]


@pytest.mark.parametrize("key", ["../escape", "a/../../b", "/abs", "a\\b", "a//b", "./a", ""])
async def test_unsafe_store_keys_rejected(store: Store, key: str) -> None:
    with pytest.raises(InvalidKeyError):
        await store.get(key)
    with pytest.raises(InvalidKeyError):
        await store.set(key, b"x")
    with pytest.raises(InvalidKeyError):
        await store.delete(key)


async def test_leading_slash_node_paths_mean_the_same_node(store: Store) -> None:
    # zarr-python 2 normalize_storage_path: "/a/b/" is the node "a/b".
    arr = await azarr.zeros(3, store=store, path="/a/b/")
    assert arr.path == "a/b" and await store.exists("a/b/.zarray")


async def test_pickle_codec_needs_opt_in(store: Store) -> None:
    values = np.array([{"a": 1}, (1, 2), "s"], dtype=object)
    await azarr.array(values, dtype=object, object_codec=numcodecs.Pickle(), store=store, chunks=3)
    arr = await azarr.open_array(store, mode="r")
    with pytest.raises(UnsafeCodecError, match="allow_pickle"):
        await arr.get_basic_selection()
    trusted = await azarr.open_array(store, mode="r", allow_pickle=True)
    assert list(await trusted.get_basic_selection()) == [{"a": 1}, (1, 2), "s"]
    with azarr.config.set(allow_pickle=True):
        assert list(await (await azarr.open_array(store, mode="r")).get_basic_selection())[2] == "s"


async def test_object_array_without_object_codec() -> None:
    with pytest.raises(MetadataError, match="object_codec"):
        await azarr.create(3, dtype=object)


async def test_out_of_bounds_selection_names_dimension() -> None:
    arr = await azarr.zeros((4, 5), chunks=2)
    with pytest.raises(IndexError, match="1"):
        await arr.get_basic_selection((0, 9))
    with pytest.raises(IndexError):
        await arr.get_basic_selection((0, 0, 0))
