"""azarr.service.Datasets: opened once, nodes cached, metadata refreshed on demand and on a timer."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import azarr
from azarr.service import Datasets, UnknownDatasetError


async def _make(path: Path) -> None:
    root = await azarr.group(store=str(path))
    await root.zeros("a", shape=(4,), chunks=(2,), dtype="i2")
    await azarr.consolidate_metadata(str(path))


async def _add_array(path: Path, name: str) -> None:
    root = await azarr.open_group(str(path))
    await root.zeros(name, shape=(3,), chunks=(3,), dtype="f8")
    await azarr.consolidate_metadata(str(path))


async def test_open_once_refresh_on_demand(tmp_path: Path) -> None:
    await _make(tmp_path / "x.zarr")
    datasets = Datasets()
    datasets.add("x", str(tmp_path / "x.zarr"))
    async with datasets.lifespan():
        a = await datasets.array("x", "a")
        assert a is await datasets.array("x", "/a/")  # cached node
        await _add_array(tmp_path / "x.zarr", "b")
        with pytest.raises(azarr.errors.NodeNotFoundError):
            await datasets.get("x", "b")  # the cached consolidated metadata does not know it yet
        await datasets.refresh("x")
        assert (await datasets.array("x", "b")).shape == (3,)
        with pytest.raises(azarr.errors.ArrayNotFoundError):
            await datasets.array("x", "")  # the root is a group
        with pytest.raises(UnknownDatasetError):
            await datasets.get("y")


async def test_refresh_on_a_timer(tmp_path: Path) -> None:
    await _make(tmp_path / "x.zarr")
    datasets = Datasets(refresh_interval=0.05)
    datasets.add("x", str(tmp_path / "x.zarr"), consolidated=True)
    async with datasets.lifespan():
        await _add_array(tmp_path / "x.zarr", "c")
        for _ in range(100):
            await asyncio.sleep(0.02)
            try:
                await datasets.get("x", "c")
                break
            except azarr.errors.NodeNotFoundError:
                continue
        else:
            pytest.fail("the timer never refreshed the metadata")
        assert datasets.age("x") is not None


async def test_unconsolidated_and_failed_open(tmp_path: Path) -> None:
    root = await azarr.group(store=str(tmp_path / "plain.zarr"))
    await root.zeros("a", shape=(2,), dtype="u1")
    datasets = Datasets()
    datasets.add("plain", str(tmp_path / "plain.zarr"))
    datasets.add("strict", str(tmp_path / "plain.zarr"), consolidated=True)
    with pytest.raises(ValueError, match="already registered"):
        datasets.add("plain", "elsewhere")
    assert (await datasets.array("plain", "a")).dtype == "u1"  # opened lazily, without .zmetadata
    with pytest.raises(azarr.errors.ConsolidatedMetadataNotFoundError):
        await datasets.get("strict")
