"""``bounded_map``: results in order, the first failure raised as itself, and no worker left behind.

Two workers failing in the same round used to leave one exception unretrieved (``asyncio.wait``
never inspects the task whose completion ends the wait), which asyncio logged as "Task exception
was never retrieved" with a traceback when the task was collected: after the CLI's one-line
error, or in a service's log. The tests collect the tasks and look for that report.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
from typing import Any

import pytest

import azarr
from azarr.errors import ChunkNotFoundError
from azarr.scheduler import bounded_map


async def collect_reports() -> list[dict[str, Any]]:
    """Collect the dropped tasks (their ``__del__`` reports an unretrieved exception)."""
    loop = asyncio.get_running_loop()
    reports: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    try:
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(previous)
    return reports


async def test_results_in_order_with_limit() -> None:
    async def square(i: int) -> int:
        await asyncio.sleep(0.001 * (i % 3))
        return i * i

    assert await bounded_map(square, range(20), 4) == [i * i for i in range(20)]
    assert await bounded_map(square, iter(range(5)), 100) == [0, 1, 4, 9, 16]
    assert await bounded_map(square, [], 3) == []
    with pytest.raises(ValueError, match="limit"):
        await bounded_map(square, [1], 0)


@pytest.mark.parametrize(("n_items", "limit"), [(2, 2), (4, 4), (9, 3)])
async def test_failures_in_one_round_are_all_retrieved(n_items: int, limit: int) -> None:
    async def fail(i: int) -> None:
        await asyncio.sleep(0)  # every worker fails in the same round of the loop
        raise KeyError(i)

    async def run() -> None:
        with pytest.raises(KeyError) as excinfo:
            await bounded_map(fail, range(n_items), limit)
        assert excinfo.value.args == (0,)  # the first worker's failure, as itself

    await run()
    reports = await collect_reports()
    assert [r.get("message") for r in reports] == []


async def test_missing_chunks_with_fill_missing_data_reads_false() -> None:
    """Two missing chunks of one read fail together (the issue's reproduction)."""
    store = azarr.MemoryStore()
    await azarr.zeros((20,), chunks=(10,), dtype="i4", store=store)
    strict = await azarr.open_array(store, mode="r", fill_missing_data_reads=False)

    async def read() -> None:
        with pytest.raises(ChunkNotFoundError):
            await strict.get_basic_selection(...)

    await read()
    assert [r.get("message") for r in await collect_reports()] == []


def test_a_script_prints_nothing_at_exit() -> None:
    """A user's script in a fresh process: its own line, and no report of a dropped task at exit."""
    code = (
        "import asyncio, sys, azarr\n"
        "async def main():\n"
        "    store = azarr.MemoryStore()\n"
        "    await azarr.zeros((20,), chunks=(10,), dtype='i4', store=store)\n"
        "    arr = await azarr.open_array(store, mode='r', fill_missing_data_reads=False)\n"
        "    try:\n"
        "        await arr.get_basic_selection(...)\n"
        "    except Exception as exc:\n"
        "        print(type(exc).__name__, file=sys.stderr)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stderr.splitlines() == ["ChunkNotFoundError"], proc.stderr
