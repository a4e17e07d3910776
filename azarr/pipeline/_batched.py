"""Chunk I/O in batches, for stores whose reads and writes are cheap and blocking.

On a memory store a chunk read is a dict lookup, on a local file a ``read()`` of a
few microseconds from the page cache. The machinery the remote path needs around
each chunk -- a coroutine, a request slot, a thread hop for the file, a codec-pool
hop, a wake-up of the loop -- costs several times that: writing 10,000 chunks of
1,600 bytes took azarr 1.5-1.9x zarr-python 2.18's time, which runs one tight
synchronous loop (``benchmarks/README.md``, issue #19). For stores that declare
`supports_blocking_io` the pipeline therefore splits
the chunks of a call into a few jobs per codec thread and runs each job in the
codec pool: read, decode and scatter every chunk of the job in turn (or merge,
encode and store), as zarr-python 2's loop does, but on every codec thread at
once and never on the event loop. TensorStore's file driver avoids the per-chunk
hop the same way.

Each job holds one request slot of the store's budget (its requests run one after
another) and, for chunks of 64 KiB or more, one chunk's decoded size of its bytes
budget (one chunk is alive in a job at a time). Requests are still timed and counted
in the store's `StoreStats` (``StoreIO.blocking_batch``).
A failed or cancelled call stops the other jobs at their next chunk and waits for
them: no codec thread writes into the caller's output after the call returns.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from azarr import config
from azarr.codecs import submit_to_codec_pool
from azarr.indexing import ChunkProjection, Fields
from azarr.pipeline._fill import put_fill
from azarr.scheduler import ProgressTracker, bounded_map

if TYPE_CHECKING:
    from azarr.pipeline._chunks import ChunkPipeline

__all__ = [
    "RESERVE_MIN_BYTES",
    "BatchedWrites",
    "RunningJobs",
    "StopFlag",
    "UpcomingJobs",
    "iter_jobs",
    "iter_write_items",
    "raw_rows",
    "read_batched",
]

#: Jobs per codec thread a call is split into (>1 balances chunks of uneven cost).
_JOBS_PER_THREAD = 4
#: Decoded chunk bytes per job at most: large chunks go a few per job, in parallel.
_MAX_JOB_BYTES = 4 << 20
#: Chunks (bytes, decoded) from which jobs run on every codec thread at once (see _JobGate).
_PARALLEL_MIN_CHUNK_BYTES = 32 << 10
#: Share of a job's time in the store's calls from which jobs of small chunks run on every
#: codec thread too (see _JobGate).
_STORE_BOUND_SHARE = 0.8
#: Files a job asks the store to read ahead of the one it reads (`Store.read_ahead_blocking`),
#: at most, and their decoded bytes at most: deep enough to keep the disk busy from one
#: thread (10,000 cold 1.6 KB files: 32 ahead 0.33-0.63 s, 128 ahead 0.25-0.26 s, none 1.1-1.9 s).
_AHEAD_FILES = 128
_AHEAD_BYTES = 32 << 20
#: Chunks below this size (bytes, decoded) are read without reading ahead until reads take
#: longer than `_COLD_READ_SECONDS` (`_COLD_READS` in a row): from the page cache the hint is
#: pure cost for them (an open and a ``posix_fadvise`` more per file, 10 % of a warm
#: 10,000-chunk read), while larger chunks' reads dwarf it. A cold 1.6 KB file waits
#: 100-150 us on the disk; a cached one below 64 KiB takes 3-15 us.
_PROBE_BELOW_BYTES = 64 << 10
_COLD_READ_SECONDS = 50e-6
#: Slow reads in a row that turn the hints on: one alone is as often a warm read the host
#: stalled, or a fresh process's first (both seen here), as a read from the disk.
_COLD_READS = 2
#: Chunks at least this large (bytes, decoded) reserve their size in the store's
#: bytes-in-flight budget while they are fetched, decoded or stored (here and in
#: `azarr.pipeline._chunks`); smaller ones cannot add up to much under the request limit.
RESERVE_MIN_BYTES = 64 << 10


class StopFlag:
    """Set on the loop when the call fails or is cancelled; read by the jobs between chunks."""

    __slots__ = ("stopped",)

    def __init__(self) -> None:
        self.stopped = False  # a plain bool: GIL-atomic


def chunks_per_job(nchunks: int, chunk_nbytes: int, max_job_bytes: int = _MAX_JOB_BYTES) -> int:
    """Chunks per job: ``_JOBS_PER_THREAD`` jobs per codec thread, at most ``max_job_bytes``
    of decoded chunks each, at least one chunk."""
    threads = max(1, int(config.get("codec_threads")))
    per_job = -(-nchunks // (threads * _JOBS_PER_THREAD))
    return max(1, min(per_job, max_job_bytes // max(chunk_nbytes, 1)))


def iter_jobs(
    projections: Iterable[ChunkProjection],
    nchunks: int,
    chunk_nbytes: int,
    max_job_bytes: int = _MAX_JOB_BYTES,
) -> Iterator[list[ChunkProjection]]:
    """``projections`` cut into consecutive jobs (`chunks_per_job`), drawn lazily: a
    read of millions of chunks never holds all their projections at once."""
    per_job, source = chunks_per_job(nchunks, chunk_nbytes, max_job_bytes), iter(projections)
    while job := list(itertools.islice(source, per_job)):
        yield job


class UpcomingJobs:
    """The jobs of one read not yet started, in order, for a running job to read ahead into.

    A job reads ahead a window of files past the chunk it reads (`_read_job`); near its end
    the window runs past its last chunk, into the first job no running job has claimed yet
    (`claim`), so the disk is still busy when that job starts. Without it each job started on
    a drained device: a traced cold read of 256 MiB of 1 MiB Blosc chunks (8 jobs of 32 on
    two threads) waited 16-36 ms in the first read of every job.
    """

    __slots__ = ("_jobs", "_lock")

    def __init__(self) -> None:
        self._jobs: dict[int, Sequence[ChunkProjection]] = {}  # in the order they were drawn
        self._lock = threading.Lock()  # the loop adds and starts jobs, codec threads claim them

    def drawn(self, jobs: Iterable[Sequence[ChunkProjection]]) -> Iterator[Sequence[ChunkProjection]]:
        """``jobs``, each remembered as upcoming as it is drawn (lazily, like ``jobs``)."""
        for job in jobs:
            with self._lock:
                self._jobs[id(job)] = job
            yield job

    def started(self, job: Sequence[ChunkProjection]) -> None:
        """``job`` runs now (its own reads ahead take over)."""
        with self._lock:
            self._jobs.pop(id(job), None)

    def claim(self) -> Sequence[ChunkProjection] | None:
        """The first upcoming job, no longer upcoming (one running job reads into it), or None."""
        with self._lock:
            if not self._jobs:
                return None
            key = next(iter(self._jobs))
            return self._jobs.pop(key)


class _Part:
    """Chunks ``job[start:end]`` of a running job, which one thread reads from the front
    (``next``); `RunningJobs.steal` lowers ``end`` to hand the back half to another thread.
    ``ahead``: the chunks up to which that thread asked the store to read ahead (a thief
    does not ask again for what the part's thread did)."""

    __slots__ = ("ahead", "end", "job", "next", "start")

    def __init__(self, job: Sequence[ChunkProjection], start: int, end: int, ahead: int = 0) -> None:
        self.job, self.start, self.next, self.end, self.ahead = job, start, start, end, ahead


class RunningJobs:
    """The chunks of one read's running jobs not read yet, for a thread out of work to take
    the back half of (work stealing), so that the codec threads finish a read together.

    A read's jobs are equal in chunks but not in time: a job that waits on the disk or on the
    run queue more than its neighbour finishes later, and with as many jobs running as codec
    threads, the last of them ran alone. Traced cold reads of 256 MiB of 1 MiB Blosc chunks
    (8 jobs of 32 on two threads) left one thread idle for the last 7-35 ms on a quiet host
    and 60-77 ms under load. Once every chunk of the read is in a started job, a thread that
    finishes its own takes half of the chunks the fullest running job has not reached (its
    thread stops before them), as TBB's and Rayon's schedulers split ranges on demand; a
    read then ends at most one chunk apart on its threads. A job's chunks are read in order
    from its front, so the back half was the last its read-ahead window hinted.

    A thread that finishes while the read's last job waits for its place (`_JobGate`) has
    nothing to steal yet; the read therefore ends with `helpers`: jobs of no chunks of their
    own that only steal, started (in order, after the last job) as places free up.
    """

    __slots__ = ("_lock", "_parts", "_unstarted")

    def __init__(self, nchunks: int) -> None:
        self._lock = threading.Lock()  # the loop starts jobs; codec threads take chunks and steal
        self._parts: list[_Part] = []
        #: Chunks of the read in no started job: stealing waits for them to start.
        self._unstarted = nchunks

    @staticmethod
    def helpers(threads: int) -> list[Sequence[ChunkProjection]]:
        """The jobs of no chunks that end a read of ``threads`` jobs at once: one fewer."""
        return [() for _ in range(threads - 1)]

    def start(self, job: Sequence[ChunkProjection]) -> _Part:
        """``job`` runs now (on the loop, before it is handed to a thread: a helper handed
        over after it finds its chunks to steal)."""
        part = _Part(job, 0, len(job))
        with self._lock:
            self._unstarted -= len(job)
            self._parts.append(part)
        return part

    def parts(self, part: _Part) -> Iterator[tuple[_Part, Sequence[ChunkProjection], Iterator[int]]]:
        """A started job's ``part``, then the parts this thread steals once it is done: each
        with its chunks and an iterator of the indices into them to read, in order."""
        yield part, part.job, self._indices(part)
        while (stolen := self.steal()) is not None:
            yield stolen, stolen.job[stolen.start : stolen.end], self._indices(stolen)

    def steal(self) -> _Part | None:
        """The back half of the fullest running part's chunks not reached yet, as a running
        part of its own; None while chunks of the read are unstarted or none is worth it."""
        with self._lock:
            if self._unstarted > 0 or not self._parts:
                return None
            victim = max(self._parts, key=lambda part: part.end - part.next)
            left = victim.end - victim.next
            if left < 2:  # the one left is as soon read by its own thread
                return None
            victim.end -= left // 2
            part = _Part(victim.job, victim.end, victim.end + left // 2, victim.ahead)
            self._parts.append(part)
            return part

    def _indices(self, part: _Part) -> Iterator[int]:
        """Indices (from ``part.start``) of ``part``'s chunks as this thread reaches them,
        up to its ``end`` as it is when each is taken."""
        lock, start = self._lock, part.start
        while True:
            with lock:
                index = part.next
                if index >= part.end:
                    self._parts.remove(part)
                    return
                part.next = index + 1
            yield index - start


class JobResult(NamedTuple):
    """What a job reports: chunks and bytes read or stored, and seconds in the store's
    calls and in all."""

    chunks: int
    nbytes: int
    store_seconds: float
    seconds: float


async def _run_job(
    fn: Callable[..., JobResult], args: tuple[Any, ...], stop: StopFlag, *, file_io: bool = False
) -> JobResult:
    """``fn(*args)`` in the codec pool (``file_io``: the file I/O pool); on cancellation, stop
    it at its next chunk and wait for it."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[BaseException | None] = loop.create_future()
    result: list[JobResult] = []

    def body() -> None:
        result.append(fn(*args))

    def finished(error: BaseException | None) -> None:
        if not done.done():
            done.set_result(error)

    submit_to_codec_pool(body, (), loop, finished, file_io=file_io)
    try:
        error = await asyncio.shield(done)
    except asyncio.CancelledError:
        stop.stopped = True
        while not done.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(done)
        raise
    if error is not None:
        stop.stopped = True
        raise error
    return result[0]


@contextlib.asynccontextmanager
async def _job_slot(pipeline: ChunkPipeline) -> AsyncIterator[None]:
    """One request slot, and one chunk's bytes when chunks are large, for a running job."""
    budget, nbytes = pipeline.io.budget, pipeline.codec.nbytes
    async with budget:
        if nbytes >= RESERVE_MIN_BYTES:
            async with budget.reserve(nbytes):
                yield
        else:
            yield


class _JobGate:
    """How many of one call's jobs run at once, and in which pool.

    Jobs of chunks of ``_PARALLEL_MIN_CHUNK_BYTES`` or more run on every codec thread
    (within the request budget): their decoding and encoding release the GIL. A small
    chunk's job is mostly Python holding the GIL, and two at once were 15-45 % slower
    than one (quiet host, 1.6-8 KB Blosc chunks, memory, tmpfs or cached files), so
    such jobs run one at a time.

    Once a finished job shows that the store's calls took ``_STORE_BOUND_SHARE`` of its
    time or more -- system calls that run without the GIL: opening and reading files cold
    from the disk, creating them on a disk or network file system -- the call's remaining
    jobs run in the file I/O pool, up to ``file_io_threads`` at once (within the request
    budget): threads blocked on the disk hold no core, so more of them than cores keep
    the device busy (TensorStore's ``file_io_concurrency``). Measured with 10,000 1.6 KB
    Blosc chunks: written to ext4 the store's share of a job was 0.81-0.99 and two jobs
    took 0.43-0.48 s against 0.57-0.62 s for one; on tmpfs the share was 0.59-0.73 and
    two jobs were slower (0.31 against 0.25 s); reads from the page cache 0.3-0.59
    (``benchmarks/README.md``, which also has the cold reads).

    Reads of small chunks from a store that reads ahead (``reads_ahead``: the job hints
    its next files to the kernel, `Store.read_ahead_blocking`) never switch: one job
    already keeps the disk busy, and more jobs only contend for the GIL. 10,000 cold
    1.6 KB chunks, 5 rounds: never switching 0.53 s median [0.42-0.66] (0.45 CPU-s),
    switching after the first job 0.78 [0.67-0.86] (0.82 CPU-s); the store-share rule
    switched in some rounds and not in others (0.45-0.88 s), its share borderline
    (0.62-0.84 against 0.8).

    Writes of large chunks (``writes``; their jobs already run on every codec thread)
    never switch either. A ``write()`` into the page cache keeps its thread on a core
    (copying, ext4 allocating inodes and blocks) rather than waiting on the device: the
    store's share of a 1 MiB Blosc job reached 0.8 whenever the kernel was slow, while the
    job's thread was on a core 0.7-1.0 of its time. Eight file I/O threads on two cores then
    contended for the cores and the GIL, and each faulted in its own malloc arena for the
    compressor's buffers. 256 MiB of 1 MiB chunks to ext4, 10 rounds each: Blosc-LZ4
    0.197 s median (0.361 CPU-s, 4,700 page faults) against 0.219 s (0.395 CPU-s, 21,300)
    with the switch; uncompressed 0.172 s (0.303 CPU-s) against 0.175 (0.320)
    (``benchmarks/README.md``).
    """

    def __init__(self, pipeline: ChunkPipeline, *, reads_ahead: bool = False, writes: bool = False) -> None:
        budget = pipeline.io.budget.max_requests
        self.threads = max(1, min(budget, int(config.get("codec_threads"))))
        #: Jobs at once once they are store-bound (and the `bounded_map` width of the call).
        self.io_threads = max(self.threads, min(budget, int(config.get("file_io_threads"))))
        self.limit = self.threads if pipeline.codec.nbytes >= _PARALLEL_MIN_CHUNK_BYTES else 1
        #: Jobs go to the file I/O pool (set by the first store-bound job).
        self.file_io = False
        #: Whether a store-bound job may switch the call to the file I/O pool (see above).
        self._may_switch = not (reads_ahead and self.limit == 1) and not (writes and self.limit > 1)
        self._running = 0
        #: Jobs waiting for a place, in the order they asked: each is resolved once it holds
        #: one. First come, first served -- a job that asks while others wait never goes first
        #: (with an ``asyncio.Condition``, the task whose job had just finished drew the next
        #: job and took the place before the one woken for it, which then waited for every
        #: other: that job, the one the first job's window had read ahead into, ran last).
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Wait until fewer than `limit` jobs run (in the order jobs ask), and hold the place
        while one runs."""
        if self._running < self.limit and not self._waiting:
            self._running += 1
        else:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter  # `_admit` counts this job in, then resolves it
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._leave()  # admitted, then cancelled before it ran
                else:
                    with contextlib.suppress(ValueError):
                        self._waiting.remove(waiter)
                raise
        try:
            yield
        finally:
            self._leave()

    def _leave(self) -> None:
        self._running -= 1
        self._admit()

    def _admit(self) -> None:
        """Count waiting jobs in, in order, while the limit allows (on the loop)."""
        waiting = self._waiting
        while waiting and self._running < self.limit:
            waiter = waiting.popleft()
            if not waiter.done():  # not cancelled
                self._running += 1
                waiter.set_result(None)

    async def finished(self, result: JobResult) -> None:
        """Learn from a finished job whether its store's calls leave the GIL to the others."""
        if (
            self._may_switch
            and not self.file_io
            and result.store_seconds >= _STORE_BOUND_SHARE * result.seconds > 0
        ):
            self.file_io = True
            self.limit = self.io_threads
            self._admit()


# ------------------------------------------------------------------------ reads
async def read_batched(
    pipeline: ChunkPipeline,
    projections: Iterable[ChunkProjection],
    nchunks: int,
    out: np.ndarray[Any, Any],
    fields: Fields,
    tracker: ProgressTracker,
) -> None:
    """Fill ``out`` from the chunks of ``projections``, a batch of chunks per codec-pool job.

    Same contract as `ChunkPipeline.read`: the first failing chunk's error
    propagates (the other jobs stop at their next chunk and are waited for).
    """
    stop = StopFlag()
    fill = pipeline.fill_for(fields, out.dtype)
    direct = pipeline._can_decode_direct(out, fields)

    reads_ahead = pipeline.io.store.reads_ahead
    gate = _JobGate(pipeline, reads_ahead=reads_ahead)

    # Jobs of large chunks run side by side and each reads its whole job ahead at once: their
    # windows also run on into the next job (`UpcomingJobs`). Small chunks' jobs run one at a
    # time with a window of a fraction of the job, topped up as they go: no need.
    upcoming = UpcomingJobs() if reads_ahead and gate.limit > 1 else None
    # A store that reads ahead does so within a job (its descriptors are the thread's): jobs
    # of large chunks as long as the read-ahead window keep the disk busy while they decode
    # (256 MiB of 1 MiB Blosc chunks, cold: 8 jobs of 32 chunks 0.35 s, 64 jobs of 4 0.48 s).
    # Still one chunk alive a job at a time; only the page cache holds the files ahead.
    max_job_bytes = max(_MAX_JOB_BYTES, _AHEAD_BYTES) if reads_ahead else _MAX_JOB_BYTES
    # Small chunks read ahead once the read's files come from the disk (for all its jobs).
    ahead_needed = ReadAheadNeeded(reads_ahead and pipeline.codec.nbytes >= _PROBE_BELOW_BYTES)
    # Jobs that run side by side finish together (`RunningJobs`) when they have chunks to
    # share; a small chunk's job runs alone and mostly holds the GIL: a lock per chunk would
    # cost it for nothing.
    running = None
    if gate.limit > 1 and chunks_per_job(nchunks, pipeline.codec.nbytes, max_job_bytes) > 1:
        running = RunningJobs(nchunks)

    async def run(job: Sequence[ChunkProjection]) -> None:
        async with gate.slot(), _job_slot(pipeline):
            if upcoming is not None:
                upcoming.started(job)
            part = running.start(job) if running is not None else None
            args = (pipeline, job, out, fields, fill, direct, stop, upcoming, running, part, ahead_needed)
            result = await _run_job(_read_job, args, stop, file_io=gate.file_io)
        await gate.finished(result)
        tracker.advance_many(result.chunks, result.nbytes)

    jobs: Iterable[Sequence[ChunkProjection]]
    jobs = iter_jobs(projections, nchunks, pipeline.codec.nbytes, max_job_bytes)
    if upcoming is not None:
        jobs = upcoming.drawn(jobs)
    if running is not None:
        jobs = itertools.chain(jobs, running.helpers(gate.threads))
    await bounded_map(run, jobs, gate.io_threads)


class ReadAheadNeeded:
    """Whether one read's jobs hint their files to the store (``needed``): set by the first
    job whose reads came from the disk rather than the page cache (see `_PROBE_BELOW_BYTES`)."""

    __slots__ = ("needed",)

    def __init__(self, needed: bool) -> None:
        self.needed = needed


def _read_job(
    pipeline: ChunkPipeline,
    job: Sequence[ChunkProjection],
    out: np.ndarray[Any, Any],
    fields: Fields,
    fill: Any,
    direct: bool,
    stop: StopFlag,
    upcoming: UpcomingJobs | None = None,
    running: RunningJobs | None = None,
    part: _Part | None = None,
    ahead_needed: ReadAheadNeeded | None = None,
) -> JobResult:
    """Read, decode and scatter each chunk of ``job`` (a codec thread); near its end, read
    ahead into the first of the ``upcoming`` jobs; then read what it steals from the other
    ``running`` jobs (``part``: ``job`` as `RunningJobs.start` made it). A store that reads
    ahead does so once ``ahead_needed`` says so (from the start when None)."""
    started = time.perf_counter()
    codec = pipeline.codec
    chunk_key, decode_into, decode = pipeline.chunk_key, pipeline._decode_into, codec.decode
    # No chunk-shaped region of ``out`` is contiguous, no fields: every chunk is decoded and
    # its selection copied out, with no per-chunk checks (``_decode_into``'s last step, inline).
    scatter = not direct and fields is None
    # Uncompressed chunks a file store reads straight into their region of ``out``.
    raw = codec.stores_raw and fields is None and pipeline.io.store.reads_into_buffers
    reads_ahead = pipeline.io.store.reads_ahead
    parts: Iterable[tuple[_Part | None, Sequence[ChunkProjection], Iterable[int]]]
    parts = [(None, job, range(len(job)))] if running is None or part is None else running.parts(part)
    nbytes = chunks = 0
    with pipeline.io.blocking_batch() as store:
        get = store.get
        for part_of, chunks_of, indices in parts:
            keys = [chunk_key(projection.chunk_coords) for projection in chunks_of]
            # Files the store reads ahead (local files): a window ahead of the chunk being
            # read, topped up by half a window at a time, so the disk has many reads at once.
            window = 0
            if reads_ahead and len(keys) > 1:
                window = max(2, min(_AHEAD_FILES, _AHEAD_BYTES // max(codec.nbytes, 1)))
            # Chunks of a stolen part its first thread asked for are on their way already.
            ahead = 0 if part_of is None else min(len(keys), max(0, part_of.ahead - part_of.start))
            # Until a read is slow, no hints (see `_PROBE_BELOW_BYTES`): each read is timed instead.
            probe = bool(window) and ahead_needed is not None and not ahead_needed.needed
            slow = 0
            for i in indices:
                if stop.stopped:
                    break
                chunks += 1
                if probe and ahead_needed is not None:
                    slow = slow + 1 if store.last_seconds > _COLD_READ_SECONDS else 0
                    if slow == _COLD_READS:
                        probe, ahead_needed.needed = False, True
                        ahead = max(ahead, i)  # from this chunk on: the ones before are read
                if not probe and window and i >= ahead - window // 2:
                    # Not into chunks stolen from this part: the thief asks for them.
                    end = len(keys) if part_of is None else min(len(keys), part_of.end - part_of.start)
                    if ahead < end:
                        upto = min(end, i + window)
                        if part_of is not None:  # before the call: a thief may steal meanwhile
                            part_of.ahead = part_of.start + upto
                        store.read_ahead(keys[ahead:upto])
                        ahead = upto
                    elif upcoming is not None:
                        # The window runs on into the next job, once: that job's files are
                        # still arriving when it starts (their descriptors close with this
                        # job's batch; the pages stay in the page cache).
                        following = upcoming.claim()
                        if following is not None:
                            more = following[: i + window - len(keys)]
                            store.read_ahead([chunk_key(p.chunk_coords) for p in more])
                        upcoming = None
                projection, key = chunks_of[i], keys[i]
                if raw and projection.is_complete_chunk:
                    rows = raw_rows(out, projection, codec.chunks, codec.order)
                    if rows is not None:
                        found = store.readinto(key, rows, codec.nbytes)
                        if found:
                            nbytes += codec.nbytes
                            continue
                        if found is None:
                            put_fill(out, projection.out_selection, fill)
                            continue
                        # Another size than a chunk's: the general path below says what is wrong.
                data = get(key)
                if data is None:
                    put_fill(out, projection.out_selection, fill)
                    continue
                if scatter:
                    out[projection.out_selection] = decode(data, key=key, writable=False)[
                        projection.chunk_selection
                    ]
                else:
                    decode_into(data, key, out, projection, fields, direct)
                nbytes += len(data)
            if stop.stopped:
                break
        return JobResult(chunks, nbytes, store.store_seconds, time.perf_counter() - started)


#: Smallest contiguous run (bytes) of a chunk's region in the output worth a buffer of its
#: own in `raw_rows`: below it, one row object per run costs more than the copy it saves.
_MIN_RAW_ROW_BYTES = 2048


def raw_rows(
    out: np.ndarray[Any, Any], projection: ChunkProjection, chunks: tuple[int, ...], order: str
) -> list[np.ndarray[Any, Any]] | None:
    """The region of ``out`` a whole uncompressed chunk fills, as the contiguous runs a
    file is read into in order (``preadv``): the region itself when it is contiguous, else
    its rows (trailing dimensions merged while contiguous). None when the chunk is not
    exactly a view of ``out`` in its stored order, or its runs are under
    ``_MIN_RAW_ROW_BYTES``: the caller then reads and copies."""
    selection = projection.out_selection
    if not all(type(s) is slice for s in selection) or not all(
        type(s) is slice and s.step in (None, 1) for s in projection.chunk_selection
    ):
        return None
    region = out[selection]
    if not isinstance(region, np.ndarray) or region.shape != chunks:  # 0-d: a scalar, no view
        return None
    if order == "F":
        region = region.T  # the file holds the chunk in F order: its transpose in C order
    if region.flags.c_contiguous:
        return [region]
    itemsize, shape, strides = region.itemsize, region.shape, region.strides
    if strides[-1] != itemsize:
        return None
    run, axis = shape[-1] * itemsize, region.ndim - 1
    while axis > 0 and strides[axis - 1] == run:  # merge contiguous trailing dimensions
        axis -= 1
        run *= shape[axis]
    if run < _MIN_RAW_ROW_BYTES:
        return None
    rows = region.view()
    try:
        rows.shape = (-1, run // itemsize)  # a view, or AttributeError where it cannot be one
    except AttributeError:
        return None
    return list(rows)


# ------------------------------------------------------------------------ writes
class BatchedWrites:
    """The batched half of one `ChunkPipeline.write` call: runs jobs of chunks that
    need no conditional read-modify-write (whole chunks, or partial ones on stores without
    conditional writes, whose current bytes are read in the job) in the codec pool.

    `ChunkPipeline.write` sends the other chunks down the async path, from the
    same stream (`iter_write_items`). At most as many jobs as the reads run
    (codec threads, within the request budget) hold a request slot at once.
    """

    def __init__(
        self,
        pipeline: ChunkPipeline,
        values: np.ndarray[Any, Any],
        fields: Fields,
        tracker: ProgressTracker,
    ) -> None:
        self.pipeline, self.values, self.fields, self.tracker = pipeline, values, fields, tracker
        self.stop = StopFlag()
        self._gate = _JobGate(pipeline, writes=True)

    async def run(self, job: Sequence[ChunkProjection]) -> None:
        """Merge, encode and store the chunks of ``job`` in one codec-pool job."""
        async with self._gate.slot(), _job_slot(self.pipeline):
            args = (self.pipeline, job, self.values, self.fields, self.stop)
            result = await _run_job(_write_job, args, self.stop, file_io=self._gate.file_io)
        await self._gate.finished(result)
        self.tracker.advance_many(result.chunks, result.nbytes)


def iter_write_items(
    projections: Iterable[ChunkProjection],
    nchunks: int,
    chunk_nbytes: int,
    is_conditional: Callable[[ChunkProjection], bool],
) -> Iterator[list[ChunkProjection] | ChunkProjection]:
    """The chunks of a write, lazily: jobs (lists) of chunks to write in batches, and
    single projections for which ``is_conditional`` holds (the async path)."""
    per_job = chunks_per_job(nchunks, chunk_nbytes)
    job: list[ChunkProjection] = []
    for projection in projections:
        if is_conditional(projection):
            yield projection
            continue
        job.append(projection)
        if len(job) == per_job:
            yield job
            job = []
    if job:
        yield job


def _write_job(
    pipeline: ChunkPipeline,
    job: Sequence[ChunkProjection],
    values: np.ndarray[Any, Any],
    fields: Fields,
    stop: StopFlag,
) -> JobResult:
    """Merge, encode and store (or delete) each chunk of ``job`` (a codec thread).

    Chunks stored as their own memory go to the store as a view of it, not a copy
    (`ChunkCodec.encode_buffer`): ``set_blocking`` writes it out, or copies it for
    a store that keeps values, before the next chunk, and the call keeps ``values``
    unchanged until its jobs have finished (`_run_job` waits for them).
    """
    started = time.perf_counter()
    chunk_key, updated, codec = pipeline.chunk_key, pipeline._updated_chunk, pipeline.codec
    # Only chunks with no compressor and no filters can be views; the others skip the indirection.
    encode = codec.encode_buffer if codec.compressor is None and not codec.filters else codec.encode
    nbytes = 0
    with pipeline.io.blocking_batch() as store:
        for projection in job:
            if stop.stopped:
                break
            key = chunk_key(projection.chunk_coords)
            complete = projection.is_complete_chunk and fields is None
            data = None if complete else store.get(key)
            chunk = updated(data, key, projection, values, fields)
            if chunk is None:
                store.delete(key)
            else:
                encoded = encode(chunk, key=key)
                store.set(key, encoded)
                nbytes += encoded.nbytes if type(encoded) is memoryview else len(encoded)
        return JobResult(len(job), nbytes, store.store_seconds, time.perf_counter() - started)
