"""Test helpers: a store wrapper that records every request (a real store underneath, not a
mock), and the check that a cancelled read leaves its output alone."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from azarr.storage import ByteRange, Generation, MemoryStore, Store, WrapperStore


def load_module(path: Path, name: str) -> ModuleType:
    """The Python file at ``path`` imported as module ``name`` (scripts shared with reference
    interpreters, ``benchmarks/peers.py``), registered in ``sys.modules`` as dataclasses need."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class AsyncPathMemoryStore(MemoryStore):
    """A `MemoryStore` without blocking access: its chunks take the per-chunk async
    path of the chunk pipeline (the one remote stores take), for tests of that path."""

    supports_blocking_io = False


async def cancel_read_part_way(
    read: Awaitable[Any], out: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], after: float
) -> None:
    """Cancel ``read`` (a read into ``out`` of ``expected``) ``after`` seconds in.

    Checks that it was cancelled part-way through (``out`` holds some but not all of
    ``expected``'s non-zero values) and that nothing, a codec thread included, writes
    into ``out`` once the cancelled read has returned.
    """
    task = asyncio.ensure_future(read)
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    snapshot = out.copy()
    assert 0 < np.count_nonzero(snapshot) < np.count_nonzero(expected)
    await asyncio.sleep(0.1)
    np.testing.assert_array_equal(out, snapshot)


class RecordingStore(WrapperStore):
    """Delegates to ``inner`` and counts requests per operation and key."""

    wrapper_name = "test-recorder"

    def __init__(self, inner: Store, *, remote: bool = False) -> None:
        super().__init__(inner)
        if remote:  # behave as a remote store would (no local shortcuts: caches, batched jobs)
            self.is_local = False
        self.gets: Counter[str] = Counter()
        self.sets: Counter[str] = Counter()
        self.deletes: Counter[str] = Counter()
        self.lists = 0

    @property
    def requests(self) -> int:
        return sum(self.gets.values()) + sum(self.sets.values()) + sum(self.deletes.values()) + self.lists

    def reset(self) -> None:
        self.gets.clear()
        self.sets.clear()
        self.deletes.clear()
        self.lists = 0

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        self.gets[key] += 1
        return await self.inner.get(key, byte_range)

    async def _exists(self, key: str) -> bool:
        self.gets[key] += 1
        return await self.inner.exists(key)

    async def _set(self, key: str, value: bytes) -> None:
        self.sets[key] += 1
        await self.inner.set(key, value)

    async def _delete(self, key: str) -> None:
        self.deletes[key] += 1
        await self.inner.delete(key)

    # Conditional operations (read-modify-writes) count like their plain forms.
    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        self.gets[key] += 1
        return await self.inner.get_with_generation(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        self.gets[key] += 1
        return await self.inner.get_with_generation(key, byte_range)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        self.sets[key] += 1
        await super()._set_if(key, value, generation)

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        self.gets[key] += 1
        return await self.inner.get(key, byte_range, if_generation_match=generation)

    async def _delete_if(self, key: str, generation: Generation) -> None:
        self.deletes[key] += 1
        await self.inner.delete(key, if_generation_match=generation)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        self.lists += 1
        async for key in self.inner.list_prefix(prefix):
            yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        self.lists += 1
        async for key in self.inner.list_dir(prefix):
            yield key


def proxied_store_pair(kind: str, request: pytest.FixtureRequest, subpath: str) -> tuple[Store, Store, Any]:
    """(direct store, the same store through the fault proxy, the proxy) on a fresh bucket.

    ``kind`` is ``"s3"`` (SeaweedFS) or ``"gcs"`` (fake-gcs-server); both stores have
    the root ``<bucket>/<subpath>``.
    """
    from azarr.storage import GCSStore, S3Store

    server = request.getfixturevalue("seaweedfs" if kind == "s3" else "fake_gcs")
    bucket = request.getfixturevalue("s3_bucket" if kind == "s3" else "gcs_bucket")
    proxy = request.getfixturevalue("s3_fault_proxy" if kind == "s3" else "gcs_fault_proxy")
    cls = S3Store if kind == "s3" else GCSStore
    direct = cls(f"{bucket}/{subpath}", storage_options=server.storage_options)
    proxied = cls(f"{bucket}/{subpath}", storage_options=proxy.storage_options(server.storage_options))
    return direct, proxied, proxy


async def plant_shape(store: Store, key: str, shape: tuple[int, ...]) -> None:
    """Write ``shape`` into the ``.zarray`` at ``key`` and touch no chunk: what a shrink killed
    between writing ``.zarray`` and deleting leaves (zarr-python 2, and azarr before issue #28)."""
    import json

    document = json.loads(await store.get(key) or b"{}")
    document["shape"] = list(shape)
    await store.set(key, json.dumps(document).encode())
