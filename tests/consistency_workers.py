"""Worker bodies for tests/test_consistency.py, run in spawned processes (or threads).

Each takes a store (pickled as its spec: the child reconnects to the same data) and
a wall-clock start time, so every worker begins its writes at the same moment.
Only azarr's public API is used, so the same tests run against older azarr code.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

import azarr
from azarr.scheduler import stats_for
from azarr.storage import Store


def _wait(start_at: float) -> None:
    time.sleep(max(0.0, start_at - time.time()))


def _conflicts(store: Store) -> int:
    return int(stats_for(store).as_dict().get("conflicts", 0))


def _configure(settings: dict[str, Any]) -> None:
    if settings:
        azarr.config.set(**settings)  # process-wide until this worker process ends


def write_tokens(
    store: Store,
    path: str,
    writer_base: int,
    tasks: int,
    writers: int,
    n: int,
    start_at: float,
    settings: dict[str, Any],
) -> int:
    """``tasks`` concurrent tasks; task ``t`` writes elements ``i = writer_base + t (mod writers)``,
    one element per call, value ``i + 1``. Returns this process's conflict count."""
    _configure(settings)

    async def main() -> int:
        arr = await azarr.open_array(store, mode="r+", path=path)

        async def task(writer: int) -> None:
            for i in range(writer, n, writers):
                await arr.set_basic_selection(i, i + 1)

        _wait(start_at)
        await asyncio.gather(*(task(writer_base + t) for t in range(tasks)))
        return _conflicts(store)

    return asyncio.run(main())


def create_array(store: Store, path: str, chunk: int, start_at: float) -> str:
    """``create(mode="w-")`` with chunk length ``chunk``: "ok" or the error's class name."""

    async def main() -> str:
        _wait(start_at)
        try:
            await azarr.open_array(store, mode="w-", path=path, shape=(100,), chunks=(chunk,), dtype="i4")
        except Exception as exc:  # the test checks which
            return type(exc).__name__
        return "ok"

    return asyncio.run(main())


def update_attrs(store: Store, path: str, proc: int, keys: int, start_at: float) -> None:
    """``attrs.update`` of ``keys`` attributes of this process, one call each."""

    async def main() -> None:
        arr = await azarr.open_array(store, mode="r+", path=path)
        _wait(start_at)
        for k in range(keys):
            await arr.attrs.update({f"p{proc}-k{k}": proc * 100 + k})

    asyncio.run(main())


def append_blocks(store: Store, path: str, proc: int, blocks: int, length: int, start_at: float) -> None:
    """Append ``blocks`` blocks of ``length`` elements; block ``b`` holds ``proc * 1000 + b``."""

    async def main() -> None:
        arr = await azarr.open_array(store, mode="r+", path=path)
        _wait(start_at)
        for b in range(blocks):
            await arr.append(np.full(length, proc * 1000 + b, dtype="i4"))

    asyncio.run(main())


def zarr_v3_mixed(
    store: Store,
    proc: int,
    procs: int,
    tasks: int,
    n: int,
    blocks: int,
    length: int,
    keys: int,
    start_at: float,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """Everything at once on Zarr v3 arrays, whose one ``zarr.json`` holds shape and attributes:
    ``tasks`` token writers into ``tokens`` (as `write_tokens`), `append_blocks` and
    `update_attrs` on ``log`` concurrently (both rewrite its ``zarr.json``), and a
    ``create(mode="w-")`` of ``race`` with chunk length ``proc + 3``. Returns the create's
    outcome ("ok" or the error's class name) and this process's conflict count."""
    _configure(settings)

    async def main() -> dict[str, Any]:
        tokens = await azarr.open_array(store, mode="r+", path="tokens")
        log = await azarr.open_array(store, mode="r+", path="log")
        assert tokens.zarr_format == log.zarr_format == 3

        async def write(writer: int) -> None:
            for i in range(writer, n, procs * tasks):
                await tokens.set_basic_selection(i, i + 1)

        async def append() -> None:
            for b in range(blocks):
                await log.append(np.full(length, proc * 1000 + b, dtype="i4"))

        async def attrs() -> None:
            for k in range(keys):
                await log.attrs.update({f"p{proc}-k{k}": proc * 100 + k})

        async def create() -> str:
            try:
                await azarr.open_array(
                    store, mode="w-", path="race", shape=(100,), chunks=(proc + 3,), dtype="i4", zarr_format=3
                )
            except Exception as exc:  # the test checks which
                return type(exc).__name__
            return "ok"

        _wait(start_at)
        *_, created = await asyncio.gather(
            *(write(proc * tasks + t) for t in range(tasks)), append(), attrs(), create()
        )
        return {"create": created, "conflicts": _conflicts(store)}

    return asyncio.run(main())
