"""Chunk reads from reference stores: located in batches, neighbouring ranges read together.

A kerchunk/VirtualiZarr chunk is a byte range of an object in another store
(`azarr.storage.ReferenceStore`). Read one request per chunk, a NetCDF4 file of
4,096 chunks costs 4,096 round trips; its chunks mostly sit back to back in the
file. So for reference stores the pipeline's fetch step works on a batch of
chunks at a time: it locates them (`ReferenceStore.locate`), groups the ranges
by target object, plans runs with the shared rule (`azarr.scheduler._coalesce`:
``coalesce_max_gap``, ``coalesce_max_bytes``) and reads each run with one ranged
request through the target store's `StoreIO` (its budget, retries and
timeouts), holding the run's bytes in that store's byte budget until its chunks
are handed to the codec pool. Decoding and scattering are the pipeline's own
(`ChunkPipeline._decode_into`), so selections, fill values and the codec
batching are unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from azarr.codecs import CodecBatcher
from azarr.errors import InvalidReferenceError
from azarr.indexing import ChunkProjection, Fields
from azarr.pipeline._fill import put_fill
from azarr.scheduler import ProgressTracker, StoreIO, bounded_map
from azarr.scheduler._coalesce import RangeRun, coalesce_ranges, count_runs, read_run
from azarr.scheduler._references import locate, managed_reader
from azarr.storage import ByteRange, Store
from azarr.storage._reference import TargetRange, read_located

if TYPE_CHECKING:
    from azarr.pipeline._chunks import ChunkPipeline

__all__ = ["read_coalesced"]

#: Chunks located (and planned into runs) at a time: bounds the memory of a read of
#: millions of chunks while leaving runs long enough to matter.
_WINDOW = 4096


class _Run:
    """One planned request: a run of ranges of one target object and the chunks it serves."""

    __slots__ = ("io", "key", "members", "ranges", "run", "url")

    def __init__(
        self, io: StoreIO, key: str, url: str, run: RangeRun, ranges: list[ByteRange], members: list[int]
    ) -> None:
        self.io, self.key, self.url, self.run, self.ranges, self.members = io, key, url, run, ranges, members


async def read_coalesced(
    pipeline: ChunkPipeline,
    projections: Iterable[ChunkProjection],
    out: np.ndarray[Any, Any],
    fields: Fields,
    tracker: ProgressTracker,
) -> None:
    """`ChunkPipeline.read` for reference stores (see the module docstring).

    Raises
    ------
    InvalidReferenceError, ReferenceTargetError, ByteRangeError
        A malformed, disallowed or out-of-range reference.
    CodecError, StoreError
        The first chunk that failed; no codec thread writes into ``out`` after this returns.
    """
    read = _CoalescedRead(pipeline, out, fields, tracker)
    try:
        iterator = iter(projections)
        while batch := list(itertools.islice(iterator, _WINDOW)):
            await read.window(batch)
        await read.codec.drain()
    except BaseException:
        await read.codec.abandon()  # no codec thread may write into `out` once we return
        raise


class _CoalescedRead:
    """The state of one `read_coalesced` call."""

    def __init__(
        self, pipeline: ChunkPipeline, out: np.ndarray[Any, Any], fields: Fields, tracker: ProgressTracker
    ) -> None:
        self.pipeline, self.out, self.fields, self.tracker = pipeline, out, fields, tracker
        self.io = pipeline.io
        self.fill = pipeline.fill_for(fields, out.dtype)
        self.direct = pipeline._can_decode_direct(out, fields)
        self.codec = CodecBatcher()
        self.reader = managed_reader(self.io)
        self._ios: dict[int, StoreIO] = {}

    def io_for(self, store: Store) -> StoreIO:
        """The managed path of a target store (one per store for the call)."""
        found = self._ios.get(id(store))
        if found is None:
            found = self._ios[id(store)] = self.io.with_store(store)
        return found

    async def submit(self, data: bytes | memoryview, key: str, projection: ChunkProjection) -> None:
        """Hand one chunk's bytes to the codec pool (decode and scatter into ``out``)."""
        job = (data, key, self.out, projection, self.fields, self.direct)
        weight = self.pipeline.codec.nbytes
        if not self.codec.try_submit(self.pipeline._decode_into, job, weight):
            await self.codec.submit(self.pipeline._decode_into, job, weight)
        self.tracker.advance(len(data))

    async def window(self, batch: list[ChunkProjection]) -> None:
        """Locate a batch of chunks, plan their runs and read them."""
        chunk_key = self.pipeline.chunk_key
        keys = [chunk_key(p.chunk_coords) for p in batch]
        located = await locate(self.io, keys)
        groups: dict[tuple[int, str], list[int]] = {}
        work: list[_Run | int] = []
        for i, where in enumerate(located):
            if where is None:
                put_fill(self.out, batch[i].out_selection, self.fill)
                self.tracker.advance(0)
            elif isinstance(where, bytes):
                await self.submit(where, keys[i], batch[i])
            elif where.nbytes is None:
                work.append(i)  # a whole object (or its tail): its size is unknown
            else:
                groups.setdefault((id(where.store), where.key), []).append(i)
        for members in groups.values():
            first = located[members[0]]
            assert isinstance(first, TargetRange)
            ranges = [_range_of(located[i]) for i in members]
            target_io = self.io_for(first.store)
            runs = coalesce_ranges(ranges)
            count_runs(target_io, runs)
            work.extend(_Run(target_io, first.key, first.url, run, ranges, members) for run in runs)

        async def read_item(item: _Run | int) -> None:
            if isinstance(item, int):
                data = await read_located(located[item], None, keys[item], self.reader)
                assert data is not None  # read_located raises for a missing target
                await self.submit(data, keys[item], batch[item])
                return
            async with item.io.budget.reserve(item.run.nbytes):
                parts = await read_run(item.io, item.key, item.run, item.ranges)
                if parts is None:
                    first_key = keys[item.members[item.run.members[0]]]
                    raise InvalidReferenceError(
                        f"reference {first_key!r}: target {item.url!r} does not exist"
                    )
                for index, part in zip(item.run.members, parts, strict=True):
                    chunk = item.members[index]
                    await self.submit(part, keys[chunk], batch[chunk])

        # Zero-length references are inline b"" (ReferenceStore.locate): every range here
        # has bytes, so every chunk is a member of exactly one run.
        await bounded_map(read_item, work, max(self.io.budget.max_requests, 1))


def _range_of(where: bytes | TargetRange | None) -> ByteRange:
    assert isinstance(where, TargetRange) and where.byte_range is not None
    return where.byte_range
