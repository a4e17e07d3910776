"""Range coalescing: many byte ranges of one object read as few ranged requests.

Chunks that are byte ranges of a larger object -- kerchunk/VirtualiZarr references
into a NetCDF4/HDF5 file, the inner chunks of a shard -- usually sit next to each
other in that object. Reading each with its own request pays a round trip per
chunk; reading runs of neighbours with one request pays it once per run. This
module plans the runs (`coalesce_ranges`: pure, no I/O) and reads one run
(`read_run`, through a `StoreIO`, so budget, retries and timeouts apply);
`StoreIO.get_ranges` puts the two together. The reference store's read path
(`azarr.pipeline._coalesced`) and a sharding adapter both use these, so there is
one coalescing rule, not one per feature.

Where the rule comes from: fsspec's ``merge_offset_ranges`` (``max_gap``,
``max_block``) and TensorStore's ``kvstore/byte_range`` batching read the
same way: ranges sorted by offset, merged while the gap between them is small
and the merged request stays under a size cap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from azarr import config
from azarr.errors import ByteRangeError
from azarr.storage import ByteRange, Generation

if TYPE_CHECKING:
    from azarr.scheduler._io import StoreIO

__all__ = ["RangeRun", "coalesce_ranges", "count_runs", "read_ranges", "read_run"]


@dataclass(frozen=True, slots=True)
class RangeRun:
    """One ranged request covering several requested ranges of one object.

    Attributes
    ----------
    start, end : int
        The request: bytes ``[start, end)`` of the object.
    members : tuple of int
        Indices (into the list given to `coalesce_ranges`) of the ranges this
        run serves, in offset order.
    """

    start: int
    end: int
    members: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        """Bytes the request asks for (gaps between members included)."""
        return self.end - self.start


def coalesce_ranges(
    ranges: Sequence[ByteRange], *, max_gap: int | None = None, max_bytes: int | None = None
) -> list[RangeRun]:
    """Group byte ranges of one object into runs read with one request each.

    Ranges are taken in offset order; a range joins the current run when the gap
    between the run's end and its start is at most ``max_gap`` bytes and the run
    would stay within ``max_bytes`` (a single range larger than that is a run of its
    own). Overlapping and duplicate ranges share a run. Empty ranges (zero bytes)
    get no request: they are members of no run.

    Parameters
    ----------
    ranges : sequence of ByteRange
        Bounded ranges (``end`` not None, no suffix ranges).
    max_gap : int, optional
        Bytes of unrequested data a run may read across to join two ranges;
        default ``azarr.config`` ``coalesce_max_gap``. 0 joins only touching ranges;
        a negative value coalesces nothing.
    max_bytes : int, optional
        Largest run, in bytes; default ``azarr.config`` ``coalesce_max_bytes``.

    Returns
    -------
    list of RangeRun
        The runs in offset order.

    Raises
    ------
    ValueError
        A suffix or open-ended range.
    """
    gap = int(config.get("coalesce_max_gap")) if max_gap is None else max_gap
    cap = int(config.get("coalesce_max_bytes")) if max_bytes is None else max_bytes
    order = []
    for index, r in enumerate(ranges):
        if r.end is None or r.start < 0:
            raise ValueError(f"cannot coalesce an open-ended or suffix range {r!r}")
        if r.end > r.start:
            order.append(index)
    order.sort(key=lambda i: (ranges[i].start, ranges[i].end))
    runs: list[RangeRun] = []
    start = end = 0
    members: list[int] = []
    for index in order:
        r = ranges[index]
        stop = r.end
        assert stop is not None  # checked above
        if members and r.start - end <= gap and max(end, stop) - start <= cap:
            end = max(end, stop)
            members.append(index)
            continue
        if members:
            runs.append(RangeRun(start, end, tuple(members)))
        start, end, members = r.start, stop, [index]
    if members:
        runs.append(RangeRun(start, end, tuple(members)))
    return runs


def count_runs(io: StoreIO, runs: Sequence[RangeRun]) -> None:
    """Record in ``io``'s stats what coalescing ``runs`` saved (`StoreStats.requests_saved`)."""
    served = sum(len(run.members) for run in runs)
    if served > len(runs):
        io.stats.count_coalesced(served, len(runs), sum(len(run.members) > 1 for run in runs))


async def read_run(
    io: StoreIO, key: str, run: RangeRun, ranges: Sequence[ByteRange], *, generation: Generation | None = None
) -> list[memoryview] | None:
    """Read one run with one ranged request and cut out its members' bytes.

    Parameters
    ----------
    io : StoreIO
        The managed path to the object's store (budget, retries, timeouts).
    key : str
        The object's key in that store.
    run : RangeRun
        A run planned by `coalesce_ranges` over ``ranges``.
    ranges : sequence of ByteRange
        The ranges the run was planned from.
    generation : Generation, optional
        Read that version of the object only (`StoreIO.get_pinned`): the ranges came
        from a document of that version (a shard index).

    Returns
    -------
    list of memoryview or None
        One read-only view per member of the run (in ``run.members`` order) into the
        one body received; None if the object is missing.

    Raises
    ------
    ByteRangeError
        The object ends before the run does: a range names bytes past the end.
    PreconditionFailedError
        ``generation`` was given and the object is another version now.
    RetriesExhaustedError, StoreError
        As `StoreIO.get`.
    """
    byte_range = ByteRange(run.start, run.end)
    body = await (
        io.get(key, byte_range) if generation is None else io.get_pinned(key, byte_range, generation)
    )
    if body is None:
        return None
    if len(body) < run.nbytes:
        raise ByteRangeError(
            f"{key!r} in {io.url} ends at byte {run.start + len(body)}, before the requested "
            f"range [{run.start}, {run.end}) does"
        )
    view = memoryview(body)
    parts = []
    for index in run.members:
        r = ranges[index]
        assert r.end is not None
        parts.append(view[r.start - run.start : r.end - run.start])
    return parts


async def read_ranges(
    io: StoreIO,
    key: str,
    ranges: Sequence[ByteRange],
    *,
    max_gap: int | None = None,
    max_bytes: int | None = None,
    generation: Generation | None = None,
) -> list[memoryview] | None:
    """Several byte ranges of one object, read as coalesced runs (concurrently, under
    ``io``'s budget); one view per range, in the order given (empty ranges: empty views).
    ``generation``: every run pinned to that version (`read_run`).

    Returns None if the object is missing.

    Raises
    ------
    ByteRangeError, PreconditionFailedError, RetriesExhaustedError, StoreError
        As `read_run`.
    """
    if not ranges:
        return []
    only = ranges[0]
    if len(ranges) == 1 and only.end is not None and only.end > only.start >= 0:
        # What `coalesce_ranges` plans, without its steps; one run of one range: nothing
        # coalesced to count, and `read_run`'s views are the result (an inner chunk's read).
        run = RangeRun(only.start, only.end, (0,))
        return await read_run(io, key, run, ranges, generation=generation)
    runs = coalesce_ranges(ranges, max_gap=max_gap, max_bytes=max_bytes)
    count_runs(io, runs)
    if len(runs) == 1:  # no gather (a task per run) for the common single run
        bodies = [await read_run(io, key, runs[0], ranges, generation=generation)]
    else:
        bodies = await asyncio.gather(
            *(read_run(io, key, run, ranges, generation=generation) for run in runs)
        )
    result = [memoryview(b"")] * len(ranges)
    for run, parts in zip(runs, bodies, strict=True):
        if parts is None:
            return None
        for index, part in zip(run.members, parts, strict=True):
            result[index] = part
    return result
