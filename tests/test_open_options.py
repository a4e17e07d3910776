"""TensorStore-style open options and storage compatibility: fill_missing_data_reads, default_compressor,
TempStore, NestedDirectoryStore."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import ChunkNotFoundError
from azarr.storage import LocalStore, NestedDirectoryStore, TempStore


async def test_fill_missing_data_reads_false(tmp_path: Path) -> None:
    root = str(tmp_path / "a.zarr")
    z = await azarr.create((10,), chunks=(5,), dtype="i4", fill_value=-1, store=root)
    await z.set_basic_selection(slice(0, 5), np.arange(5, dtype="i4"))
    strict = await azarr.open_array(root, mode="r+", fill_missing_data_reads=False)
    assert np.array_equal(await strict.get_basic_selection(slice(0, 5)), np.arange(5))
    with pytest.raises(ChunkNotFoundError, match=r"chunk '1' is missing"):
        await strict.getitem(...)
    with pytest.raises(ChunkNotFoundError):
        await strict.get_orthogonal_selection(([7],))
    # a partial write into the missing chunk starts from the fill value, as in TensorStore
    await strict.set_basic_selection(slice(6, 8), np.array([60, 70], dtype="i4"))
    assert np.array_equal(await strict.getitem(...), [0, 1, 2, 3, 4, -1, 60, 70, -1, -1])
    lenient = await azarr.open_array(root, mode="r")
    await z.store.delete("0")
    assert (await lenient.getitem(...))[0] == -1


async def test_default_compressor_setting() -> None:
    with azarr.config.set(default_compressor=numcodecs.Zstd(level=2)):
        assert (await azarr.zeros((10,))).compressor == numcodecs.Zstd(level=2)
        assert (await azarr.zeros((10,), compressor=None)).compressor is None
    with azarr.config.set(default_compressor=None):
        assert (await azarr.zeros((10,))).compressor is None
    assert (await azarr.zeros((10,))).compressor == numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1)
    with azarr.config.set(default_compressor={"id": "no-such-codec"}), pytest.raises(azarr.errors.CodecError):
        await azarr.zeros((10,))


async def test_temp_store_is_removed_on_close() -> None:
    store = TempStore()
    root = store.root
    z = await azarr.array(np.arange(4), store=store)
    assert np.array_equal(await z.getitem(...), np.arange(4)) and root.is_dir()
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(store)
    await store.close()
    assert not root.exists()


async def test_nested_directory_store_reads_old_nested_data(tmp_path: Path) -> None:
    root = tmp_path / "old.zarr"
    data = np.arange(36, dtype="<i2").reshape(6, 6)
    z = await azarr.array(data, chunks=(4, 4), store=str(root), dimension_separator="/")
    assert (root / "1" / "0").is_file()
    # what zarr-python < 2.8 left behind: nested files, no dimension_separator in .zarray
    doc = json.loads((root / ".zarray").read_text())
    del doc["dimension_separator"]
    (root / ".zarray").write_text(json.dumps(doc))
    plain = await azarr.open_array(LocalStore(root), mode="r")
    assert not (await plain.getitem(...)).any()  # the flat keys are missing: all fill value
    nested = await azarr.open_array(NestedDirectoryStore(root), mode="r+")
    assert np.array_equal(await nested.getitem(...), data)
    await nested.set_basic_selection((slice(4, 6), slice(0, 2)), np.full((2, 2), 99, dtype="<i2"))
    assert not (root / "1.0").exists() and (root / "1" / "0").is_file()
    assert (await nested.getitem(...))[5, 1] == 99
    assert z.path == ""


async def test_open_zarr2_flags_and_schema_check(tmp_path: Path) -> None:
    url = (tmp_path / "t.zarr").as_uri() + "|zarr2:"
    with pytest.raises(azarr.errors.ArrayNotFoundError):
        await azarr.open_zarr2(url)  # open=True, create=False: must exist
    z = await azarr.open_zarr2(url, create=True, open=False, shape=[6], chunks=[3], dtype="<u2")
    assert z.fill_value is None and z.shape == (6,)  # TensorStore's default fill value is null
    filled = await azarr.open_zarr2(
        (tmp_path / "f.zarr").as_uri() + "|zarr2:",
        create=True,
        shape=[6],
        chunks=[3],
        dtype="<u2",
        fill_value=7,
    )
    await filled.set_basic_selection(..., np.full(6, 7, dtype="<u2"))
    assert await filled.nchunks_initialized() == 0  # store_data_equal_to_fill_value=False
    with pytest.raises(azarr.errors.ContainsArrayError):
        await azarr.open_zarr2(url, create=True, open=False, shape=[6], dtype="<u2")
    same = await azarr.open_zarr2(url, shape=[6], dtype="<u2", chunks=[3], rank=1)
    assert same.chunks == (3,)
    with pytest.raises(
        azarr.errors.MetadataError, match=r"dtype .*uint16.* does not match the expected dtype"
    ):
        await azarr.open_zarr2(url, shape=[6], dtype="<i4")
    with pytest.raises(azarr.errors.MetadataError, match="rank 1 does not match the expected rank 2"):
        await azarr.open_zarr2(url, rank=2)
    replaced = await azarr.open_zarr2(
        url, create=True, delete_existing=True, open=False, shape=[2], dtype="f4"
    )
    assert replaced.shape == (2,)
    assumed = await azarr.open_zarr2(url, assume_metadata=True, shape=[2], dtype="f4", fill_value=5)
    assert np.array_equal(await assumed.getitem(...), [5, 5])  # its own metadata: .zarray not read
    with pytest.raises(ValueError, match="delete_existing=True needs create=True and open=False"):
        await azarr.open_zarr2(url, delete_existing=True)
    with pytest.raises(ValueError, match="unknown zarr2 metadata fields"):
        await azarr.open_zarr2(url, dimension_names=["x"])
    strict = await azarr.open_zarr2(url, fill_missing_data_reads=False)
    with pytest.raises(ChunkNotFoundError):
        await strict.getitem(...)


async def test_open_zarr2_metadata_key(tmp_path: Path) -> None:
    root = tmp_path / "k.zarr"
    z = await azarr.open_zarr2(
        str(root), create=True, shape=[4], chunks=[2], dtype="<i2", metadata_key="meta.json"
    )
    await z.setitem(..., np.arange(4, dtype="<i2"))
    assert (root / "meta.json").is_file() and not (root / ".zarray").exists()
    again = await azarr.open_zarr2(str(root), metadata_key="meta.json", read_only=True)
    assert np.array_equal(await again.getitem(...), np.arange(4))
    assert await again.nchunks_initialized() == 2
    with pytest.raises(azarr.errors.ArrayNotFoundError):
        await azarr.open_zarr2(str(root))  # under the default name there is no array
    with pytest.raises(ValueError, match="plain file name"):
        await azarr.open_zarr2(str(root), metadata_key="a/b")
