"""Committing a ``to_zarr``: metadata in one concurrent wave, then the data, stopped as one on failure.

xarray's ``ArrayWriter`` assigns in-memory variables one by one as they are
planned and hands dask variables to one ``dask.array.store`` call. Here:

* `commit` writes every planned metadata change of every group at once
  (attributes, new arrays, grown arrays) and reopens nothing;
* `write_data` writes the in-memory variables concurrently on the event loop
  and the dask ones with one ``dask.array.store`` call (so a dask array shared by
  several variables, or by several DataTree nodes, is computed once), both at the
  same time; ``compute=False`` returns that call's ``dask.delayed`` instead;
* when one write fails (or the call is cancelled) nothing keeps writing after
  ``to_zarr`` raised: the other in-memory writes are cancelled and awaited, and
  dask tasks of this process are refused from then on while the ones already
  writing are waited for (`WriteGate`). Tasks on a dask.distributed cluster run in
  other processes and end as dask ends them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
from xarray.namedarray.pycompat import is_chunked_array

from azarr.core import AsyncArray
from azarr.errors import AzarrError
from azarr.metadata import encode_json
from azarr.scheduler import bounded_map
from azarr.sync import run
from azarr.xarray._encoding import created_dimensions
from azarr.xarray._plan import GroupPlan, PendingArray
from azarr.xarray._store import AzarrDataStore


class WriteRefusedError(AzarrError):
    """A dask task of a ``to_zarr`` that already failed or was cancelled tried to write."""


class Writes:
    """The data one ``to_zarr`` queued, as xarray's ``ArrayWriter.add`` receives it."""

    def __init__(self) -> None:
        self.eager: list[tuple[Any, PendingArray, tuple[slice, ...]]] = []
        self.chunked: list[tuple[Any, PendingArray, tuple[slice, ...]]] = []

    def add(self, source: Any, target: PendingArray, region: tuple[slice, ...]) -> None:
        if is_chunked_array(source):
            self.chunked.append((source, target, region))
        else:
            self.eager.append((np.asarray(source), target, region))

    def stores(self) -> list[AzarrDataStore]:
        seen: dict[int, AzarrDataStore] = {}
        for _, target, _ in (*self.eager, *self.chunked):
            seen.setdefault(id(target.store), target.store)
        return list(seen.values())


def check_attributes(attrs: dict[str, Any], where: str) -> None:
    """Refuse attributes JSON cannot hold before anything is written (xarray's message)."""
    try:
        encode_json(attrs)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"Invalid attribute in Dataset.attrs. ({where}: {exc})") from exc


async def _all(coros: Iterable[Any]) -> list[Any]:
    """Await every coroutine concurrently; on the first failure cancel and await the rest, then raise."""
    pending = list(coros)

    async def call(coro: Any) -> Any:
        return await coro

    try:
        return await bounded_map(call, pending, max(1, len(pending)))
    finally:
        for coro in pending:  # never started ones (the wave was cut short)
            coro.close()


async def _commit_group(store: AzarrDataStore) -> None:
    plan, store.plan = store.plan, GroupPlan()
    group = store.group

    async def create(name: str) -> tuple[str, AsyncArray]:
        kwargs = dict(plan.create[name])
        return name, await group.create_dataset(name, **kwargs)

    async def grow(name: str) -> None:
        await store.arrays[name].resize(plan.resize[name])

    async def attrs() -> None:
        if plan.attrs is not None:
            await group.attrs.put(plan.attrs)

    results = await _all([attrs(), *(grow(n) for n in plan.resize), *(create(n) for n in plan.create)])
    for item in results:
        if item is not None:
            name, array = item
            store.arrays[name] = array
            store.dims[name] = created_dimensions(plan.create[name])
            store.created_now.add(name)


async def commit(stores: Iterable[AzarrDataStore]) -> None:
    """Write the metadata every store planned (attributes, new and grown arrays), all at once."""
    await _all(_commit_group(store) for store in stores if not store.plan.empty)


def _target(pending: PendingArray) -> AsyncArray:
    """The committed array, set to skip chunks that are all ``fill_value`` as ``to_zarr`` was told."""
    store = pending.store
    array = store.arrays[pending.name]
    if pending.name in store.created_now:
        return array  # created with the setting
    wanted = bool(store.write_empty)  # None: xarray's default, skip them
    if bool(array.write_empty_chunks) == wanted:
        return array
    return AsyncArray(
        array.store,
        array.path,
        array.metadata,
        array.attrs.asdict(),
        read_only=False,
        write_empty_chunks=wanted,
    )


def _region(selection: tuple[slice, ...], shape: tuple[int, ...]) -> Any:
    if not shape:
        return Ellipsis
    return tuple(slice(*s.indices(n)[:2]) for s, n in zip(selection, shape, strict=True))


class WriteGate:
    """Lets dask tasks write until the ``to_zarr`` they belong to fails, then waits for the ones writing."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._writing = 0
        self._closed = False

    def enter(self) -> None:
        with self._changed:
            if self._closed:
                raise WriteRefusedError("to_zarr failed or was cancelled: this task's write is not made")
            self._writing += 1

    def leave(self) -> None:
        with self._changed:
            self._writing -= 1
            self._changed.notify_all()

    def close_and_wait(self) -> None:
        """Refuse further writes and wait until the ones in flight have ended."""
        with self._changed:
            self._closed = True
            self._changed.wait_for(lambda: self._writing == 0)


class DaskTarget:
    """What ``dask.array.store`` writes a block into: an azarr array, through the sync facade.

    Pickles as the array alone (its configuration): in another process (a
    dask.distributed worker) there is no gate, and that process's azarr loop writes.
    """

    def __init__(self, array: AsyncArray, gate: WriteGate | None) -> None:
        self.array = array
        self.gate = gate
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim

    def __setitem__(self, selection: Any, value: Any) -> None:
        if self.gate is None:
            run(self.array.set_basic_selection(selection, np.asarray(value)))
            return
        self.gate.enter()
        try:
            run(self.array.set_basic_selection(selection, np.asarray(value)))
        finally:
            self.gate.leave()

    def __reduce__(self) -> tuple[Any, ...]:
        return (DaskTarget, (self.array, None))


def _dask_store(writes: Writes, gate: WriteGate | None, *, compute: bool, kwargs: dict[str, Any]) -> Any:
    import dask.array as da

    sources, targets, regions = [], [], []
    for source, pending, selection in writes.chunked:
        array = _target(pending)
        sources.append(source)
        targets.append(DaskTarget(array, gate))
        regions.append(_region(selection, array.shape))
    if not compute:
        return da.store(sources, targets, regions=regions, lock=False, compute=False)
    da.store(sources, targets, regions=regions, lock=False, compute=True, **kwargs)
    return None


async def _compute(writes: Writes, kwargs: dict[str, Any]) -> None:
    """Run the dask writes in a thread; on failure or cancellation, stop them before returning."""
    gate = WriteGate()
    future = asyncio.get_running_loop().run_in_executor(
        None, lambda: _dask_store(writes, gate, compute=True, kwargs=kwargs)
    )
    try:
        await asyncio.shield(future)
    except BaseException:
        await asyncio.to_thread(gate.close_and_wait)
        if not future.done():  # cancelled while dask still runs: it stops at its next write
            await asyncio.wait([future])
        raise


async def write_data(
    writes: Writes, *, compute: bool = True, chunkmanager_store_kwargs: dict[str, Any] | None = None
) -> Any:
    """Write the queued data (committed metadata first); a ``dask.delayed`` for the dask part if not ``compute``."""

    async def eager(item: tuple[Any, PendingArray, tuple[slice, ...]]) -> None:
        values, pending, selection = item
        array = _target(pending)
        await array.set_basic_selection(_region(selection, array.shape), values)

    jobs = [eager(item) for item in writes.eager]
    delayed = None
    if writes.chunked:
        if compute:
            jobs.append(_compute(writes, dict(chunkmanager_store_kwargs or {})))
        else:
            delayed = _dask_store(writes, None, compute=False, kwargs={})
    await _all(jobs)
    return delayed


def commit_now(writes: Writes, writer: Any, store: AzarrDataStore) -> None:
    """For ``Dataset.dump_to_store`` with xarray's own writer: commit the metadata now, hand it arrays."""
    stores = {id(s): s for s in (store, *writes.stores())}
    run(commit(stores.values()))
    for source, pending, selection in (*writes.eager, *writes.chunked):
        array = _target(pending)
        writer.add(source, DaskTarget(array, None), _region(selection, array.shape))
