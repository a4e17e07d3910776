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
from tests.util import load_module

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


def _peers() -> Any:
    return load_module(
        Path(__file__).resolve().parent.parent.parent / "benchmarks" / "peers.py", "azarr_test_peers_h5"
    )


@pytest.fixture(scope="module")
def zarr218_h5py_python() -> Path:
    """zarr 2.18 with h5py: a peer venv of benchmarks/peers.py (built once under .cache/bench-venvs)."""
    peers = _peers()
    try:
        return Path(peers.ensure_peer_python("zarr218-h5py", report=lambda msg: None))
    except peers.PeerError as exc:
        pytest.fail(f"zarr 2.18 + h5py venv unavailable:\n{exc}", pytrace=False)


def _run_copy_h5py(python: Path, h5: Path, out: Path) -> Any:
    """Run ref_scripts/copy_h5py.py with zarr 2.18 + h5py; its JSON result."""
    import subprocess

    script = Path(__file__).parent / "ref_scripts" / "copy_h5py.py"
    proc = subprocess.run(
        [str(python), "-E", "-s", str(script), str(h5), str(out)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


async def test_copy_from_hdf5_matches_zarr_218(zarr218_h5py_python: Path, tmp_path: Path) -> None:
    import h5py

    h5 = tmp_path / "data.h5"
    with h5py.File(h5, "w") as f:
        f.attrs["title"] = "hdf5 source"
        d = f.create_dataset(
            "x", data=np.arange(100, dtype="<f4").reshape(10, 10), chunks=(4, 5), fillvalue=-1
        )
        d.attrs["units"] = "K"
        g = f.create_group("grp")
        g.attrs["level"] = 1
        g.create_dataset("y", data=np.arange(7, dtype="<i8"), chunks=(7,), compression="gzip")
    theirs_dir, ours_dir = tmp_path / "theirs.zarr", tmp_path / "ours.zarr"
    theirs = _run_copy_h5py(zarr218_h5py_python, h5, theirs_dir)
    ours: dict[str, Any] = {}
    with h5py.File(h5, "r") as f:
        for key, kwargs, dest in [
            ("all", {}, ours_dir),
            ("one", {"name": "y2", "chunks": (3,), "compressor": numcodecs.Zlib(level=1)}, ours_dir),
            ("dry", {"dry_run": True}, ours_dir / "dry"),
        ]:
            lines: list[str] = []
            group = await azarr.open_group(str(dest), mode="a")
            if key == "one":
                counts = await azarr.copy(f["grp/y"], group, log=lines.append, **kwargs)
            else:
                counts = await azarr.copy_all(f, group, log=lines.append, **kwargs)
            ours[key] = {"counts": list(counts), "log": lines}
    assert ours == theirs
    mine, other = _documents(ours_dir), _documents(theirs_dir)
    # zarr 2.18's dry run still writes the destination's attributes; azarr's writes nothing
    assert other.pop("dry/.zattrs") == {"title": "hdf5 source"} and "dry/.zattrs" not in mine
    assert mine == other
    for path in ("x", "grp/y", "y2"):
        a = await azarr.open_array(str(ours_dir), path=path, mode="r")
        b = await azarr.open_array(str(theirs_dir), path=path, mode="r")
        assert np.array_equal(await a.getitem(...), await b.getitem(...)), path
