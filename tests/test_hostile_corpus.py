"""The checked-in hostile stores (tests/hostile/, made by make_corpus.py) each raise their typed error.

For every case: the error class and message from cases.json, the key named in
the message, peak RSS growth under 64 MiB, no pickle executed, and the store
(and everything around it) left byte-for-byte as it was, even when opened in
a writable mode.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from rss import MiB, measure_rss

import azarr
import azarr.errors
from azarr.storage import LocalStore, ZipStore

HERE = Path(__file__).parent / "hostile"
CASES: dict[str, dict[str, Any]] = json.loads((HERE / "cases.json").read_text())

pytestmark = pytest.mark.timeout(30)


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath, name)
            with open(path, "rb") as f:
                out[str(path.relative_to(root))] = hashlib.sha256(f.read()).hexdigest()
    return out


async def _open_and_read(root: Path, case: dict[str, Any], mode: str) -> None:
    if "zip" in case:  # an archive, fuzzer-found: a corrupt deflate stream
        archive = ZipStore(root / case["zip"], mode="r")
        try:
            arr = await azarr.open_array(archive, mode="r", path="a")
            await arr.getitem(Ellipsis)
        finally:
            await archive.close()
        return
    store = LocalStore(root)
    if "path" in case:  # a consolidated group
        group = await azarr.open_consolidated(store, mode=mode, path=case["path"])
        async for _, arr in group.arrays():  # type: ignore[union-attr]
            await arr.getitem(Ellipsis)
        return
    arr = await azarr.open_array(store, mode=mode, path="a")
    await arr.getitem(slice(0, 32))


def test_corpus_is_small() -> None:
    for name in CASES:
        for dirpath, _, files in os.walk(HERE / name):
            for file in files:
                assert os.path.getsize(os.path.join(dirpath, file)) < 16 * 1024, (name, file)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", ["r", "r+"])
async def test_hostile_store_raises_its_typed_error(name: str, mode: str, tmp_path: Path) -> None:
    case = CASES[name]
    # Work on a copy inside a sentinel directory, so "nothing outside touched" is checkable.
    root = tmp_path / "store"
    shutil.copytree(HERE / name, root)
    (tmp_path / "sentinel").write_bytes(b"untouched")
    before = _snapshot(tmp_path)
    expected = getattr(azarr.errors, case["error"])
    os.environ.pop("AZARR_HOSTILE_PICKLE_RAN", None)
    with (
        azarr.config.set(**case.get("config", {})),
        measure_rss() as growth,
        pytest.raises(azarr.errors.AzarrError) as info,
    ):
        await _open_and_read(root, case, mode)
    assert type(info.value) is expected, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    assert re.search(case["match"], message), message
    assert case["key"] in message, message
    assert growth.bytes < 64 * MiB, f"peak RSS grew by {growth.bytes / MiB:.0f} MiB"
    assert "AZARR_HOSTILE_PICKLE_RAN" not in os.environ
    assert _snapshot(tmp_path) == before
