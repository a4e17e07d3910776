"""``copy_store(dry_run=..., log=...)``: zarr-python 2's dry runs and copy logs."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import azarr
from azarr.errors import KeyExistsError


async def _source() -> azarr.MemoryStore:
    src = azarr.MemoryStore()
    arr = await azarr.zeros((4, 4), chunks=(2, 2), dtype="i4", store=src, path="a")
    await arr.set_basic_selection(..., np.arange(16, dtype="i4").reshape(4, 4))
    return src


async def test_dry_run_copies_nothing_and_logs_plan() -> None:
    src, dst = await _source(), azarr.MemoryStore()
    lines: list[str] = []
    result = await azarr.copy_store(src, dst, dest_path="b", dry_run=True, log=lines.append)
    keys = sorted([k async for k in src.list_prefix("")])  # .zgroup, a/.zarray, four chunks
    assert tuple(result) == (len(keys), 0, 0) == (6, 0, 0)
    assert [k async for k in dst.list_prefix("")] == []
    assert lines == [*(f"copy {k} -> b/{k}" for k in keys), "dry run: 6 copied, 0 skipped"]


async def test_dry_run_with_skip_counts_existing(tmp_path: Path) -> None:
    src, dst = await _source(), azarr.MemoryStore()
    await dst.set("a/0.0", b"old")
    log_file = tmp_path / "copy.log"
    result = await azarr.copy_store(src, dst, if_exists="skip", dry_run=True, log=str(log_file))
    assert tuple(result) == (5, 1, 0)
    text = log_file.read_text().splitlines()
    assert "skip a/0.0" in text and text[-1] == "dry run: 5 copied, 1 skipped"
    assert await dst.get("a/0.0") == b"old"


async def test_dry_run_still_refuses_clashes() -> None:
    src, dst = await _source(), azarr.MemoryStore()
    await dst.set("a/0.0", b"old")
    with pytest.raises(KeyExistsError, match=r"a/0\.0"):
        await azarr.copy_store(src, dst, dry_run=True)


async def test_real_run_logs_every_key_and_summary() -> None:
    src, dst = await _source(), azarr.MemoryStore()
    out = io.StringIO()
    n_copied, n_skipped, n_bytes = await azarr.copy_store(src, dst, log=out)
    lines = out.getvalue().splitlines()
    assert sorted(lines[:-1]) == sorted([f"copy {k}" async for k in src.list_prefix("")])
    assert lines[-1] == f"all done: 6 copied, 0 skipped, {n_bytes:,} bytes copied"
    assert (n_copied, n_skipped) == (6, 0) and n_bytes > 0


async def test_bad_log_is_type_error() -> None:
    with pytest.raises(TypeError, match="log must be"):
        await azarr.copy_store(azarr.MemoryStore(), azarr.MemoryStore(), log=42)  # type: ignore[arg-type]
