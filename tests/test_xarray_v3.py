"""``azarr.xarray`` on Zarr format 3: what xarray's engine writes and reads there, and what azarr refuses.

Fidelity against xarray + zarr-python 3.4 itself (identical ``zarr.json`` documents, values
bit for bit both ways) is ``tests/interop/test_xarray_v3_interop.py``; these run on a local
directory without the reference interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import xarray as xr

import azarr
import azarr.sync as zs
import azarr.xarray as ax
from azarr.errors import MetadataError


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _dataset() -> xr.Dataset:
    return xr.Dataset(
        {"t2m": (("time", "x"), np.arange(12.0).reshape(3, 4), {"units": "K"})},
        coords={"time": [1, 2, 3], "x": [10, 20, 30, 40]},
        attrs={"title": "v3"},
    )


def test_v3_layout_region_and_append(tmp_path: Path) -> None:
    """Dimension names in ``dimension_names``, attributes in ``zarr.json``, consolidated metadata
    inline; a region write opens through it and an append grows the arrays."""
    path = tmp_path / "ds.zarr"
    ds = _dataset()
    ax.to_zarr(ds, path, zarr_format=3)
    array_doc = json.loads((path / "t2m" / "zarr.json").read_text())
    assert array_doc["dimension_names"] == ["time", "x"]
    assert array_doc["attributes"] == {
        "units": "K",
        "_FillValue": "AAAAAAAA+H8=",
    }  # NaN, encoded as xarray does
    root_doc = json.loads((path / "zarr.json").read_text())
    assert root_doc["attributes"] == {"title": "v3"}
    assert sorted(root_doc["consolidated_metadata"]["metadata"]) == ["t2m", "time", "x"]
    assert not list(path.rglob(".z*"))
    ax.to_zarr(ds.isel(time=[1]) * 0 + 5, path, region="auto")
    more = (ds.isel(time=[0]) + 100).assign_coords(time=[4])
    ax.to_zarr(more, path, append_dim="time")
    expected = xr.concat([ds.where(ds.time != 2, 5), more], dim="time")
    opened = xr.open_dataset(path, engine="azarr", consolidated=True)
    assert opened.t2m.encoding["fill_value"] != opened.t2m.encoding["fill_value"]  # NaN, not a mask
    xr.testing.assert_identical(opened.load(), expected)


def test_v3_encodings_take_every_codec_spelling(tmp_path: Path) -> None:
    """numcodecs codecs, v3 entries and zarr-python-3-style objects (``to_dict``) alike; several
    compressors; a v2 chunk key encoding; fill_value from the encoding."""

    class ZarrPythonStyle:  # what zarr.codecs.Crc32cCodec() gives to_dict()
        def to_dict(self) -> dict[str, str]:
            return {"name": "crc32c"}

    path = tmp_path / "ds.zarr"
    encoding = {
        "t2m": {
            "compressors": [{"name": "blosc", "configuration": {"cname": "lz4"}}, ZarrPythonStyle()],
            "filters": [numcodecs.Delta(dtype="f8")],
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
            "fill_value": -1.0,
            "chunks": (2, 4),
        }
    }
    ax.to_zarr(_dataset(), path, zarr_format=3, encoding=encoding)
    array = zs.open_array(str(path), path="t2m", mode="r")
    assert [c["name"] for c in array.codecs] == ["numcodecs.delta", "bytes", "blosc", "crc32c"]
    assert array.fill_value == -1.0 and (path / "t2m" / "1.0").is_file()
    back = xr.open_dataset(path, engine="azarr")
    assert back.t2m.encoding["compressors"] == (
        numcodecs.Blosc(cname="lz4", clevel=5, shuffle=1),
        numcodecs.CRC32C(),
    )
    xr.testing.assert_identical(back.load(), _dataset())


def test_v3_refusals_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ds.zarr"
    ax.to_zarr(_dataset(), path, zarr_format=2)
    before = _snapshot(path)
    with pytest.raises(ValueError, match=r"zarr_format=3 but the group '/' .* is Zarr format 2"):
        ax.to_zarr(_dataset().rename(t2m="other"), path, mode="a", zarr_format=3)
    assert _snapshot(path) == before
    ax.to_zarr(_dataset(), path, mode="w", zarr_format=3)  # replacing changes the format
    assert not list(path.rglob(".z*"))
    before = _snapshot(path)
    with pytest.raises(ValueError, match="does not divide the shard shape"):
        ax.to_zarr(
            _dataset().rename(t2m="other"),
            path,
            mode="a",
            encoding={"other": {"chunks": (2, 3), "shards": (2, 4)}},
        )
    with pytest.raises(ValueError, match="unexpected encoding parameters"):
        ax.to_zarr(_dataset().rename(t2m="other"), path, mode="a", encoding={"other": {"compresors": None}})
    assert _snapshot(path) == before


def test_sharded_variables(tmp_path: Path) -> None:
    """``encoding["shards"]`` writes a sharded array (inner chunks ``chunks``), reported back as
    xarray's engine reports it; appends grow it and dask chunks must cover whole shards."""
    path = tmp_path / "ds.zarr"
    ds = xr.Dataset({"v": (("t", "x"), np.arange(48.0).reshape(6, 8))}, coords={"t": np.arange(6)})
    ax.to_zarr(ds, path, zarr_format=3, encoding={"v": {"chunks": (1, 4), "shards": (2, 8)}})
    assert sorted(p.name for p in (path / "v" / "c").iterdir()) == ["0", "1", "2"]  # one object a shard
    back = xr.open_dataset(path, engine="azarr")
    assert (back.v.encoding["shards"], back.v.encoding["chunks"]) == ((2, 8), (1, 4))
    more = ds.isel(t=[0, 1]).assign_coords(t=[6, 7])
    ax.to_zarr(more, path, append_dim="t")
    xr.testing.assert_identical(xr.open_dataset(path, engine="azarr").load(), xr.concat([ds, more], "t"))
    with pytest.raises(ValueError, match="would overlap multiple Dask chunks"):
        ax.to_zarr(ds.chunk({"t": 1}).isel(t=[2, 3]), path, region={"t": slice(2, 4)})


async def test_v3_array_without_dimension_names_is_named_at_open(tmp_path: Path) -> None:
    group = await azarr.group(store=str(tmp_path), zarr_format=3)
    await group.zeros("plain", shape=(2, 3))
    with pytest.raises(MetadataError, match=r"array '/plain' in .* has no dimension_names"):
        xr.open_dataset(tmp_path, engine="azarr", consolidated=False)


@pytest.mark.parametrize(("source", "target"), [(3, 2), (2, 3)])
def test_an_opened_dataset_writes_to_the_other_format(tmp_path: Path, source: int, target: int) -> None:
    """The encoding read from one format writes in the other: a v3 variable's ``serializer``
    (little-endian ``bytes``, ``vlen-utf8``) says nothing a v2 dtype does not, a v2 string
    variable's VLenUTF8 filter is v3's serializer. xarray 2026.9 over zarr-python 3.4 refuses
    both ("Zarr format 2 arrays do not support `serializer`"; "Expected a BytesBytesCodec")."""
    ds = xr.Dataset(
        {
            "v": ("x", np.arange(4.0)),
            "s": ("x", np.array(["a", "b", "cc", ""], dtype=object)),
            "b": ("x", np.array([b"a", b"", b"x", b"yy"])),
        }
    )
    ax.to_zarr(ds, tmp_path / "a.zarr", zarr_format=source)
    opened = xr.open_dataset(tmp_path / "a.zarr", engine="azarr", chunks={})
    ax.to_zarr(opened, tmp_path / "b.zarr", zarr_format=target)
    assert zs.open_group(str(tmp_path / "b.zarr"), mode="r").zarr_format == target
    xr.testing.assert_identical(xr.open_dataset(tmp_path / "b.zarr", engine="azarr").load(), ds)
