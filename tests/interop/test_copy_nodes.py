"""``azarr.copy`` / ``copy_all`` against zarr-python 2.18's ``zarr.copy`` / ``copy_all``.

The same scenario (ref_scripts/copy_nodes.py) runs on both sides from one source hierarchy
written by azarr: counts, log lines, every ``.zarray`` / ``.zattrs`` / ``.zgroup`` document and
every array's values must match, and each side's output must read in the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.errors import CopyError

pytestmark = pytest.mark.interop


async def _write_source(root: Path) -> None:
    g = await azarr.open_group(str(root), mode="w")
    await g.attrs.update({"title": "source", "n": 3})
    a = await g.create_dataset("a", data=np.arange(25, dtype="<i4"), chunks=(10,), fill_value=-1)
    await a.attrs.update({"units": "m"})
    sub = await g.create_group("sub")
    await sub.attrs.update({"level": 1})
    b = await sub.create_dataset(
        "b", data=np.linspace(0, 1, 60).reshape(6, 10), chunks=(4, 4), compressor=numcodecs.Zstd(level=3)
    )
    await b.attrs.update({"scale": 0.5})
    # partly initialized: skip_initialized copies it again
    c = await sub.create_dataset("c", shape=(8,), chunks=(2,), dtype="<u2", fill_value=7)
    await c.set_basic_selection(slice(0, 2), np.array([1, 2], dtype="<u2"))
    await (await sub.create_group("deeper")).create_dataset("s", data=np.array(["x", "yz"], dtype="<U2"))


async def _scenario(src: azarr.AsyncGroup, out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}

    async def step(key: str, fn: Any, dest_name: str, source: Any, **kwargs: Any) -> None:
        lines: list[str] = []
        dest = await azarr.open_group(str(out / dest_name), mode="a")
        try:
            counts: Any = list(await fn(source, dest, log=lines.append, **kwargs))
        except CopyError:
            counts = "CopyError"
        results[key] = {"counts": counts, "log": lines}

    await step("array", azarr.copy, "d1", await src.get("a"))
    await step("tree", azarr.copy, "d1", src, name="tree")
    await step("tree_again_raise", azarr.copy, "d1", src, name="tree")
    await step("tree_skip", azarr.copy, "d1", src, name="tree", if_exists="skip")
    await step("tree_replace", azarr.copy, "d1", src, name="tree", if_exists="replace")
    await step("tree_skip_initialized", azarr.copy, "d1", src, name="tree", if_exists="skip_initialized")
    await step("shallow", azarr.copy, "d1", src, name="shallow", shallow=True)
    await step(
        "recoded",
        azarr.copy,
        "d1",
        await src.get("sub"),
        name="recoded",
        without_attrs=True,
        compressor=numcodecs.Zlib(level=1),
    )
    await step("dry", azarr.copy, "d2", src, name="dry", dry_run=True)
    await step("all", azarr.copy_all, "d3", src)
    return results


def _documents(root: Path) -> dict[str, Any]:
    docs = {
        str(p.relative_to(root)): json.loads(p.read_text())
        for p in sorted(root.rglob(".z*"))
        if p.name in (".zarray", ".zattrs", ".zgroup")
    }
    for doc in docs.values():
        # azarr always writes the default "." that zarr-python 2 leaves out: the same meaning (spec)
        if doc.get("dimension_separator") == ".":
            del doc["dimension_separator"]
    return docs


async def test_copy_matches_zarr_218(run_ref_script: Any, tmp_path: Path) -> None:
    source_dir = tmp_path / "src.zarr"
    await _write_source(source_dir)
    theirs_dir, ours_dir = tmp_path / "theirs", tmp_path / "ours"
    result = run_ref_script("copy_nodes.py", source_dir, theirs_dir)
    assert result.returncode == 0, result.report
    theirs = json.loads(result.stdout)
    src = await azarr.open_group(str(source_dir), mode="r")
    ours = await _scenario(src, ours_dir)
    assert ours == theirs
    assert ours["tree"]["counts"] == [7, 0, ours["tree"]["counts"][2]]
    # the same documents (metadata and attributes) in every destination
    for dest in ("d1", "d3"):
        assert _documents(ours_dir / dest) == _documents(theirs_dir / dest), dest
    assert not (ours_dir / "d2" / "dry").exists() and not (theirs_dir / "d2" / "dry").exists()
    # the same values: each side's copy read by azarr
    for dest, path in [
        ("d1", "tree/sub/b"),
        ("d1", "recoded/b"),
        ("d1", "tree/sub/c"),
        ("d3", "sub/deeper/s"),
    ]:
        mine = await azarr.open_array(str(ours_dir / dest), path=path, mode="r")
        other = await azarr.open_array(str(theirs_dir / dest), path=path, mode="r")
        assert np.array_equal(await mine.getitem(...), await other.getitem(...)), path
