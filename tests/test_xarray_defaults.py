"""xarray's defaults: consolidated metadata first with a fallback, and dimension names
(``_ARRAY_DIMENSIONS``, NCZarr ``_nczarr_array``) read, written and validated."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import azarr
from azarr.api import get_dimension_names, group_dimensions, set_dimension_names
from azarr.api.consolidated import ConsolidatedStore
from azarr.errors import ConsolidatedMetadataNotFoundError, MetadataError


async def test_open_group_uses_zmetadata_when_present(tmp_path: Path) -> None:
    root = str(tmp_path / "c.zarr")
    g = await azarr.open_group(root, mode="w")
    await g.zeros("a", shape=(4,))
    plain = await azarr.open_group(root, mode="r")
    assert not isinstance(plain.store, ConsolidatedStore)  # no .zmetadata: the walk
    await azarr.consolidate_metadata(root)
    await g.zeros("added_later", shape=(2,))  # not in .zmetadata
    opened = await azarr.open_group(root, mode="r")
    assert isinstance(opened.store, ConsolidatedStore)
    assert [k async for k in opened] == ["a"]  # what xarray sees too: the consolidated view
    assert [k async for k in await azarr.open_group(root, mode="r", use_consolidated=False)] == [
        "a",
        "added_later",
    ]
    writable = await azarr.open_group(root, mode="a")  # structure may change: never consolidated
    assert not isinstance(writable.store, ConsolidatedStore)
    node = await azarr.open(root, mode="r")
    assert isinstance(node.store, ConsolidatedStore)
    with pytest.raises(ValueError, match="use_consolidated=True needs mode"):
        await azarr.open_group(root, mode="a", use_consolidated=True)
    other = str(tmp_path / "plain.zarr")
    await azarr.open_group(other, mode="w")
    with pytest.raises(ConsolidatedMetadataNotFoundError):
        await azarr.open_group(other, mode="r", use_consolidated=True)


async def test_consolidated_open_reads_no_node_documents(tmp_path: Path) -> None:
    root = str(tmp_path / "c.zarr")
    g = await azarr.open_group(root, mode="w")
    for i in range(5):
        await g.zeros(f"a{i}", shape=(4,))
    await azarr.consolidate_metadata(root)
    for i in range(5):  # the documents now exist only inside .zmetadata
        (tmp_path / "c.zarr" / f"a{i}" / ".zarray").unlink()
    opened = await azarr.open_group(root, mode="r")
    assert len([k async for k in opened]) == 5
    assert (await opened.get("a3")).shape == (4,)


async def test_dimension_names_round_trip_and_validation() -> None:
    g = await azarr.group()
    t = await g.zeros("t", shape=(3, 4))
    await set_dimension_names(t, ["time", "x"])
    assert dict(t.attrs) == {"_ARRAY_DIMENSIONS": ["time", "x"]}
    assert await get_dimension_names(t) == ("time", "x")
    for bad, problem in [
        (["time"], "1 dimension names"),
        (["x", "x"], "repeat"),
        (["x", 3], "non-empty strings"),
        ("xy", "a list"),
    ]:
        with pytest.raises(MetadataError, match=problem):
            await set_dimension_names(t, bad)  # type: ignore[arg-type]
    u = await g.zeros("u", shape=(4,))
    await set_dimension_names(u, ["x"])
    assert await group_dimensions(g) == {"time": 3, "x": 4}
    v = await g.zeros("v", shape=(5,))
    assert await get_dimension_names(v) is None
    with pytest.raises(MetadataError, match="has no _ARRAY_DIMENSIONS"):
        await group_dimensions(g, strict=True)
    await set_dimension_names(v, ["x"])
    with pytest.raises(MetadataError, match="conflicting sizes for dimension 'x': 4 in '/t', 5 in '/v'"):
        await group_dimensions(g)


async def test_v3_dimension_names_live_in_zarr_json(tmp_path: Path) -> None:
    """A Zarr v3 array's names are its ``dimension_names`` (xarray reads nothing else there):
    set_dimension_names rewrites zarr.json and keeps the attributes; a 0-d array has ()."""
    g = await azarr.group(store=str(tmp_path), zarr_format=3)
    t = await g.zeros("t", shape=(3, 4), attributes={"units": "K"})
    assert await get_dimension_names(t) is None
    await set_dimension_names(t, ["time", "x"])
    reopened = await azarr.open_array(str(tmp_path), path="t", mode="r")
    assert reopened.dimension_names == ("time", "x") and dict(reopened.attrs) == {"units": "K"}
    assert await get_dimension_names(reopened) == ("time", "x")
    assert await group_dimensions(g) == {"time": 3, "x": 4}
    assert await get_dimension_names(await g.zeros("s", shape=())) == ()
    with pytest.raises(MetadataError, match="repeat"):
        await set_dimension_names(t, ["x", "x"])


async def test_nczarr_dimrefs(tmp_path: Path) -> None:
    root = tmp_path / "nc.zarr"
    g = await azarr.open_group(str(root), mode="w")
    await g.create_dataset("var", data=np.zeros((2, 3)))
    doc = json.loads((root / "var" / ".zarray").read_text())
    doc["_nczarr_array"] = {"dimrefs": ["/lat", "/lon"], "storage": "chunked"}
    (root / "var" / ".zarray").write_text(json.dumps(doc))
    var = await azarr.open_array(str(root), path="var", mode="r")
    assert await get_dimension_names(var) == ("lat", "lon")
    assert await get_dimension_names(var, try_nczarr=False) is None
    doc["_nczarr_array"]["dimrefs"] = ["/lat"]
    (root / "var" / ".zarray").write_text(json.dumps(doc))
    with pytest.raises(MetadataError, match="NCZarr dimrefs"):
        await get_dimension_names(await azarr.open_array(str(root), path="var", mode="r"))
