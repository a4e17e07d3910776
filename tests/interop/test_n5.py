"""``azarr.N5Store`` against zarr-python 2.18's ``zarr.N5Store``: each reads what the other wrote,
and both write the same ``attributes.json`` documents and chunk files for the same hierarchy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import MetadataError

pytestmark = pytest.mark.interop

ARRAYS: dict[str, dict[str, Any]] = {
    "x": {
        "data": np.arange(35, dtype="<u2").reshape(5, 7),
        "chunks": (2, 3),
        "compressor": numcodecs.GZip(5),
    },
    "sub/y": {"data": np.linspace(0, 1, 10, dtype="<f4"), "chunks": (4,), "compressor": None},
    "b": {
        "data": np.arange(-6, 6, dtype="<i8").reshape(3, 4),
        "chunks": (2, 2),
        "compressor": numcodecs.Blosc("zstd", 3, 1),
    },
}


async def _write_ours(root: Path) -> None:
    g = await azarr.open_group(azarr.N5Store(azarr.LocalStore(root / "ours.n5")), mode="w")
    await g.attrs.update({"title": "n5 container", "n": 2})
    for path, spec in ARRAYS.items():
        z = await g.create_dataset(
            path, data=spec["data"], chunks=spec["chunks"], compressor=spec["compressor"]
        )
        await z.attrs.update({"units": path})


def _files(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            rel = p.relative_to(root).as_posix()
            out[rel] = json.loads(p.read_text()) if p.name == "attributes.json" else p.stat().st_size
    return out


async def test_n5_both_ways(run_ref_script: Any, tmp_path: Path) -> None:
    result = run_ref_script("n5_store.py", "write", tmp_path)
    assert result.returncode == 0, result.report
    theirs = await azarr.open_group(azarr.N5Store(azarr.LocalStore(tmp_path / "theirs.n5")), mode="r")
    assert dict(theirs.attrs) == {"title": "n5 container", "n": 2}
    for path, spec in ARRAYS.items():
        z = await theirs.get(path)
        assert isinstance(z, azarr.AsyncArray)
        assert z.dtype == spec["data"].dtype and z.chunks == spec["chunks"]
        assert np.array_equal(await z.getitem(...), spec["data"]), path
        assert dict(z.attrs) == {"units": path}
        assert await z.nchunks_initialized() == z.nchunks
    await _write_ours(tmp_path)
    result = run_ref_script("n5_store.py", "read", tmp_path)
    assert result.returncode == 0, result.report
    seen = json.loads(result.stdout)
    assert seen["attrs"] == {"title": "n5 container", "n": 2}
    for path, spec in ARRAYS.items():
        got = seen["arrays"][path]
        assert (got["dtype"], got["shape"], got["chunks"]) == (
            spec["data"].dtype.str,
            list(spec["data"].shape),
            list(spec["chunks"]),
        )
        assert got["values"] == spec["data"].tolist() and got["attrs"] == {"units": path}
    # the same files: attributes.json documents equal, chunk files of equal size
    assert _files(tmp_path / "ours.n5") == _files(tmp_path / "theirs.n5")


async def test_n5_edge_blocks_truncated_by_other_writers(tmp_path: Path) -> None:
    # N5 writers other than zarr-python store edge blocks at their true size: 5 x 7 in 2 x 3 blocks
    store = azarr.N5Store(azarr.LocalStore(tmp_path / "t.n5"))
    z = await azarr.create((5, 7), chunks=(2, 3), dtype="<i4", compressor=None, store=store)
    data = np.arange(35, dtype="<i4").reshape(5, 7)
    await z.setitem(..., data)
    edge = tmp_path / "t.n5" / "2" / "2"  # chunk (2, 2): rows 4, cols 6 -> a 1 x 1 block
    header = (0).to_bytes(2, "big") + (2).to_bytes(2, "big") + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
    edge.write_bytes(header + np.array([34], dtype=">i4").tobytes())
    again = await azarr.open_array(azarr.N5Store(azarr.LocalStore(tmp_path / "t.n5")), mode="r")
    assert np.array_equal(await again.getitem(...), data)


async def test_n5_refuses_what_it_cannot_store(tmp_path: Path) -> None:
    store = azarr.N5Store(azarr.LocalStore(tmp_path / "t.n5"))
    with pytest.raises(MetadataError, match="fill value"):
        await azarr.create((4,), fill_value=3, store=store)
    with pytest.raises(MetadataError, match="order"):
        await azarr.create((4,), order="F", fill_value=0, store=store, overwrite=True)
    with pytest.raises(MetadataError, match="no N5 dataType"):
        await azarr.create((4,), dtype="c8", fill_value=0, store=store, overwrite=True)
    g = await azarr.open_group(store, mode="w")
    with pytest.raises(MetadataError, match="reserved N5 keywords"):
        await g.attrs.update({"dimensions": [1]})
