"""``azarr.copy`` / ``copy_all`` with h5py sources, logs, progress and bad arguments.

The comparison with zarr-python 2.18 itself is tests/interop/test_copy_nodes.py.
"""

from __future__ import annotations

import io
from pathlib import Path

import h5py
import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import CopyError
from azarr.scheduler import Progress


@pytest.fixture
def h5_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.h5"
    with h5py.File(path, "w") as f:
        f.attrs["title"] = "hdf5 source"
        f.attrs["scale"] = np.float32(0.5)
        d = f.create_dataset(
            "x", data=np.arange(100, dtype="<f4").reshape(10, 10), chunks=(4, 5), fillvalue=-1
        )
        d.attrs["units"] = "K"
        d.attrs["range"] = np.array([0, 99])
        g = f.create_group("grp")
        g.create_dataset("y", data=np.arange(7, dtype="<i8"), compression="gzip")
    return path


async def test_copy_all_from_hdf5(h5_file: Path, tmp_path: Path) -> None:
    dest = await azarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    lines: list[str] = []
    reports: list[Progress] = []
    with h5py.File(h5_file, "r") as f:
        counts = await azarr.copy_all(f, dest, log=lines.append, progress=reports.append)
    assert tuple(counts) == (3, 0, 400 + 56)
    assert lines == [
        "copy /grp",
        "copy /grp/y (7,) int64",
        "copy /x (10, 10) float32",
        "all done: 3 copied, 0 skipped, 456 bytes copied",
    ]
    assert [r.done for r in reports] == [1, 2, 3] and reports[-1].total == 3
    x = await dest.get("x")
    assert isinstance(x, azarr.AsyncArray)
    assert x.chunks == (4, 5) and x.fill_value == -1 and x.dtype == np.dtype("<f4")
    assert np.array_equal(await x.getitem(...), np.arange(100, dtype="<f4").reshape(10, 10))
    assert dict(x.attrs) == {"units": "K", "range": [0, 99]}
    assert dict(dest.attrs) == {"title": "hdf5 source", "scale": 0.5}
    y = await dest.get("grp/y")
    assert np.array_equal(await y.getitem(...), np.arange(7))


async def test_copy_hdf5_dataset_rechunked_and_recompressed(h5_file: Path, tmp_path: Path) -> None:
    dest = await azarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    with h5py.File(h5_file, "r") as f:
        n = await azarr.copy(f["x"], dest, name="x2", chunks=(10, 2), compressor=numcodecs.Zlib(level=1))
    assert tuple(n) == (1, 0, 400)
    x2 = await dest.get("x2")
    assert x2.chunks == (10, 2) and x2.compressor == numcodecs.Zlib(level=1)
    assert np.array_equal(await x2.getitem(...), np.arange(100, dtype="<f4").reshape(10, 10))


async def test_dry_run_writes_nothing_and_logs_to_files(tmp_path: Path) -> None:
    src = await azarr.group()
    await src.create_dataset("a", data=np.arange(5))
    dest = await azarr.open_group(str(tmp_path / "out.zarr"), mode="w")
    log_path = tmp_path / "copy.log"
    counts = await azarr.copy_all(src, dest, dry_run=True, log=str(log_path))
    assert tuple(counts) == (1, 0, 0)
    assert log_path.read_text() == "copy /a (5,) int64\ndry run: 1 copied, 0 skipped\n"
    assert [k async for k in dest] == []
    stream = io.StringIO()
    await azarr.copy(await src.get("a"), dest, log=stream)
    assert stream.getvalue().splitlines()[-1] == "all done: 1 copied, 0 skipped, 40 bytes copied"


async def test_bad_arguments() -> None:
    src = await azarr.group()
    arr = await src.create_dataset("a", data=np.arange(5))
    dest = await azarr.group()
    with pytest.raises(ValueError, match="dest must be a group"):
        await azarr.copy(arr, arr)
    with pytest.raises(ValueError, match="if_exists must be one of"):
        await azarr.copy(arr, dest, if_exists="overwrite")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="provide the `name` parameter"):
        await azarr.copy(src, dest)
    with pytest.raises(TypeError, match="log must be"):
        await azarr.copy(arr, dest, log=42)  # type: ignore[arg-type]
    await azarr.copy(arr, dest)
    with pytest.raises(CopyError, match="an object 'a' already exists in destination '/'"):
        await azarr.copy(arr, dest)
    assert tuple(await azarr.copy(arr, dest, if_exists="skip")) == (0, 1, 0)
