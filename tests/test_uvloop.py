"""azarr on uvloop, the event loop uvicorn (and so most FastAPI services) runs when installed.

Each test runs its own loop through ``asyncio.Runner(loop_factory=uvloop.new_event_loop)``:
the paths that touch the loop directly are exercised there -- the codec pool posting
results back with ``call_soon_threadsafe``, per-loop aiohttp sessions, request
timeouts, cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import numpy as np
import pytest

import azarr
from azarr.errors import RetriesExhaustedError, StoreTimeoutError
from azarr.scheduler import StoreIO
from azarr.storage import ByteRange, MemoryStore, S3Store
from tests.servers import S3Server
from tests.util import cancel_read_part_way

uvloop = pytest.importorskip("uvloop")

T = TypeVar("T")


def run_on_uvloop(main: Callable[[], Awaitable[T]]) -> T:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        loop = runner.get_loop()
        assert type(loop).__module__.startswith("uvloop")
        return runner.run(main())  # type: ignore[arg-type]


@pytest.mark.s3
def test_write_read_and_small_reads_on_s3(seaweedfs: S3Server, s3_bucket: str) -> None:
    data = np.arange(64 * 48, dtype="<f4").reshape(64, 48)

    async def main() -> None:
        store = S3Store(f"{s3_bucket}/uv", storage_options=seaweedfs.storage_options)
        try:
            arr = await azarr.create(shape=data.shape, chunks=(16, 16), dtype="<f4", store=store)
            await arr.set_basic_selection(..., data)
            again = await azarr.open_array(store, mode="r")
            np.testing.assert_array_equal(await again.get_basic_selection(...), data)
            # The FastAPI pattern: many small reads from concurrent tasks.
            points = [(i, (i * 7) % 48) for i in range(64)]
            values = await asyncio.gather(*(again.get_basic_selection(p) for p in points))
            assert [float(v) for v in values] == [float(data[p]) for p in points]
            assert store._transport is not None and store._transport.open_sessions() >= 1
        finally:
            await store.close()

    run_on_uvloop(main)


def test_cancelled_read_leaves_no_tasks_and_out_untouched() -> None:
    class Crawling(MemoryStore):
        async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
            await asyncio.sleep(0.02)
            return await super()._get(key, byte_range)

    async def main() -> None:
        store = Crawling()
        data = np.arange(4000.0)
        arr = await azarr.array(data, chunks=10, store=store)
        before = asyncio.all_tasks()
        out = np.zeros(4000)
        await cancel_read_part_way(arr.get_basic_selection(..., out=out), out, data, after=0.1)
        assert asyncio.all_tasks() == before
        assert StoreIO(store).budget.bytes_in_flight == 0

    run_on_uvloop(main)


def test_a_stalled_request_times_out() -> None:
    class Stalled(MemoryStore):
        is_local = False  # a remote store: requests get the per-request timeout

        async def _get(self, key: str, byte_range: ByteRange | None) -> Any:
            await asyncio.sleep(3600)

    async def main() -> None:
        with (
            azarr.config.set(request_timeout=0.05, retry_max_attempts=2, retry_initial_delay=0.01),
            pytest.raises(RetriesExhaustedError, match="2 attempts") as info,
        ):
            await StoreIO(Stalled()).get("0")
        assert isinstance(info.value.__cause__, StoreTimeoutError)

    run_on_uvloop(main)
