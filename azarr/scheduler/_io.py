"""``StoreIO``: the one path from arrays, groups and the api functions to a store.

Everything above the store layer -- chunk reads and writes, metadata and
attribute documents, listings, deletes, sizes, consolidated documents -- goes
through a ``StoreIO``; ``core/`` and ``api/`` never call a store directly. Each
call runs under the store's request budget, with a per-request timeout (a
stalled server becomes `StoreTimeoutError` instead of
hanging), retries of transient errors (`azarr.scheduler._retry`),
per-store counters (`azarr.scheduler._stats`), optional hedged reads, and
parallel byte-range reads for very large chunks on remote stores. A listing is
retried whole: one that fails part-way is restarted, never returned partial.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

from azarr import config
from azarr.errors import (
    BodyTooLargeError,
    ConsistencyUnsupportedError,
    PreconditionFailedError,
    StoreTimeoutError,
    ThrottledError,
    TransientStoreError,
)
from azarr.scheduler._blocking import BlockingBatch
from azarr.scheduler._budget import IOBudget, budget_for
from azarr.scheduler._coalesce import read_ranges
from azarr.scheduler._references import get_referenced
from azarr.scheduler._retry import RetryPolicy, retry_call
from azarr.scheduler._shared import SHARED_READS
from azarr.scheduler._stats import StoreStats, stats_for
from azarr.storage import ByteRange, Generation, Store
from azarr.storage._limits import expected_body

# Names of metadata documents: bounded by max_metadata_bytes when read.
_DOCUMENTS = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"})

T = TypeVar("T")


async def _collect(items: AsyncIterator[str]) -> list[str]:
    return [item async for item in items]


def _bound(key: str, max_bytes: int | None) -> int | None:
    """The most bytes an answer for ``key`` may hold: ``max_bytes``, else ``max_metadata_bytes``
    for a metadata document, else None (the default bound, `default_body_limit`)."""
    if max_bytes is not None:
        return max_bytes
    if key.rpartition("/")[2] in _DOCUMENTS:
        return int(config.get("max_metadata_bytes"))
    return None


class StoreIO:
    """Budgeted, timed, retried access to one store.

    Parameters
    ----------
    store : Store
        The store to talk to.
    policy : RetryPolicy, optional
        Default: from ``azarr.config`` at each call.
    request_timeout : float or None, optional
        Seconds per attempt; default ``azarr.config`` ``request_timeout``.
    """

    __slots__ = ("_policy", "_timeout", "budget", "stats", "store")

    def __init__(
        self, store: Store, *, policy: RetryPolicy | None = None, request_timeout: float | None = None
    ) -> None:
        self.store = store
        self.budget: IOBudget = budget_for(store)
        self.stats: StoreStats = stats_for(store)
        self._policy = policy
        self._timeout = request_timeout

    @property
    def url(self) -> str:
        """The store's URL, for messages."""
        return self.store.url

    @property
    def read_only(self) -> bool:
        """Whether the store refuses writes."""
        return self.store.read_only

    def with_store(self, store: Store) -> StoreIO:
        """The same policy and timeout over another store (an overlay of this one, a read-only view)."""
        return StoreIO(store, policy=self._policy, request_timeout=self._timeout)

    @property
    def policy(self) -> RetryPolicy:
        """The retry policy in force."""
        return self._policy or RetryPolicy.from_config()

    @property
    def request_timeout(self) -> float | None:
        """Seconds one attempt may take (None: unbounded)."""
        return self._timeout if self._timeout is not None else config.get("request_timeout")

    # ------------------------------------------------------------------ operations
    async def get(
        self, key: str, byte_range: ByteRange | None = None, *, max_bytes: int | None = None
    ) -> bytes | None:
        """Read ``key`` (or a byte range of it); None if missing. Retried and timed.

        ``max_bytes`` bounds the response body (a chunk's largest stored size);
        metadata documents are bounded by ``max_metadata_bytes``, other values
        by the largest of it and ``max_chunk_bytes`` (`expected_body`).

        Raises
        ------
        RetriesExhaustedError
            Transient failures persisted through the retry policy.
        BodyTooLargeError
            The answer is larger than the bound.
        StoreError
            A non-retryable backend error.
        """
        if self.store.resolves_references:  # kerchunk references: read from their targets
            return await get_referenced(self, key, byte_range)
        with expected_body(_bound(key, max_bytes)):
            if config.get("hedged_reads"):
                return await self._retried("get", key, lambda: self._hedged_get(key, byte_range))
            return await self._read("get", key, self.store.get, key, byte_range)

    async def get_into(
        self, key: str, allocate: Callable[[int], memoryview], *, max_bytes: int | None = None
    ) -> bytes | memoryview | None:
        """Read the whole value at ``key`` into ``allocate(size)`` where the store can
        (`Store.get_into`); None if missing.
        Retried, timed and bounded as `get` (hedged reads use `get`).

        Raises
        ------
        RetriesExhaustedError, BodyTooLargeError, StoreError
            As `get`.
        """
        if config.get("hedged_reads") or self.store.resolves_references:
            return await self.get(key, max_bytes=max_bytes)
        with expected_body(_bound(key, max_bytes)):
            return await self._read("get", key, self.store.get_into, key, allocate)

    async def _read(self, op: str, key: str, make: Callable[..., Awaitable[T]], *args: Any) -> T:
        # The first attempt is made inline: this is the per-chunk hot path, and the
        # retry machinery (policy, closures) is only built on failure. The deadline
        # counts from this attempt's start.
        started = asyncio.get_running_loop().time()
        try:
            return await self._call(make, *args, reading=True)
        except TransientStoreError as exc:
            return await self._retried(op, key, lambda: self._call(make, *args, reading=True), exc, started)

    async def get_large(
        self, key: str, *, expected_nbytes: int, max_bytes: int | None = None
    ) -> bytes | None:
        """Read ``key``, splitting it into parallel byte-range requests when it is large.

        Used for chunks whose decoded size exceeds ``large_chunk_threshold`` on
        remote stores: one size probe, then parts of ``large_chunk_part_size``
        bytes fetched concurrently under the budget and joined. On stores with
        `supports_conditional_reads` every part is pinned
        to the generation the probe saw (S3 ``If-Match``): if the object is
        replaced mid-read the read starts again, so the result is one whole
        version, never a mix. A size above ``max_bytes`` (the chunk's largest
        stored size; default ``max_chunk_bytes``) is refused before any range is
        planned.

        Raises
        ------
        BodyTooLargeError
            The stored value is larger than ``max_bytes``.
        """
        threshold = int(config.get("large_chunk_threshold"))
        limit = int(config.get("max_chunk_bytes")) if max_bytes is None else max_bytes
        if self.store.is_local or expected_nbytes <= threshold:
            return await self.get(key, max_bytes=max_bytes)
        pinned = self.store.supports_conditional_reads
        for _ in range(int(config.get("conditional_write_attempts"))):
            if pinned:
                info = await self._retried("getsize", key, lambda: self._call(lambda: self.store.stat(key)))
                if info is None:
                    return None
                size, generation = info
            else:
                try:
                    size, generation = await self.getsize(key), None
                except FileNotFoundError:
                    return None
            if size > limit:
                raise BodyTooLargeError(
                    f"get {key!r} in {self.store.url}: the store says it holds {size} bytes, more than "
                    f"the {limit} bytes it can (the chunk's largest stored size, at most max_chunk_bytes; "
                    "azarr.config)",
                    declared=size,
                    limit=limit,
                )
            if size <= threshold:
                return await self.get(key, max_bytes=max_bytes)
            part = int(config.get("large_chunk_part_size"))
            ranges = [ByteRange(start, min(start + part, size)) for start in range(0, size, part)]
            try:
                parts = await asyncio.gather(*(self.get_pinned(key, r, generation) for r in ranges))
            except PreconditionFailedError:
                self.stats.count_conflict()
                continue  # replaced while we read it: read the new version from the start
            if any(p is None for p in parts):
                return None  # deleted while we read it
            return b"".join(p for p in parts if p is not None)
        raise PreconditionFailedError(
            f"get {key!r} in {self.store.url}: the object kept changing while it was read in parts"
        )

    async def get_ranges(
        self,
        key: str,
        ranges: Sequence[ByteRange],
        *,
        max_gap: int | None = None,
        max_bytes: int | None = None,
    ) -> list[memoryview] | None:
        """Several byte ranges of ``key``, with one ranged request per run of nearby ranges.

        Ranges closer than ``max_gap`` bytes (``azarr.config`` ``coalesce_max_gap``) are
        read together, in requests of at most ``max_bytes`` (``coalesce_max_bytes``);
        each request is retried and timed as `get`, all under this store's budget
        (`azarr.scheduler._coalesce`: the planning rule, shared with the reference
        store's chunk reads).

        Parameters
        ----------
        key : str
            The object.
        ranges : sequence of ByteRange
            Bounded ranges (no suffix or open-ended ones), in any order, overlaps allowed.

        Returns
        -------
        list of memoryview or None
            One view per range, in the order given; None if the object is missing.

        Raises
        ------
        ByteRangeError
            The object ends before a range does.
        RetriesExhaustedError, StoreError
            As `get`.
        """
        return await read_ranges(self, key, ranges, max_gap=max_gap, max_bytes=max_bytes)

    async def get_with_generation(
        self, key: str, byte_range: ByteRange | None = None, *, max_bytes: int | None = None
    ) -> tuple[bytes | None, Generation | None]:
        """Read ``key`` (or a byte range of it) and its generation (see
        `Store.get_with_generation`). Retried, timed and bounded as `get` (``max_bytes`` as
        there)."""
        with expected_body(_bound(key, max_bytes)):
            return await self._retried(
                "get",
                key,
                lambda: self._call(lambda: self.store.get_with_generation(key, byte_range), reading=True),
            )

    async def get_pinned(
        self, key: str, byte_range: ByteRange | None, generation: Generation | None
    ) -> bytes | None:
        """`get`, pinned to ``generation`` when there is one (`Store.get` ``if_generation_match``).

        Raises
        ------
        PreconditionFailedError
            The object is another version now (or was deleted): start again from its new version.
        RetriesExhaustedError, StoreError
            As `get`.
        """
        if generation is None:
            return await self.get(key, byte_range)
        # The first attempt inline, as `get`'s (`_read`): every inner chunk read of a sharded
        # array whose index is cached comes this way.
        return await self._read("get", key, self._store_get_pinned, key, byte_range, generation)

    def _store_get_pinned(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> Awaitable[bytes | None]:
        # `Store.get` with positional arguments only, for `_call` (no closure per request).
        return self.store.get(key, byte_range, if_generation_match=generation)

    async def exists(self, key: str) -> bool:
        """True if ``key`` holds a value. Retried and timed."""
        return await self._retried("exists", key, lambda: self._call(lambda: self.store.exists(key)))

    async def set(self, key: str, value: bytes) -> None:
        """Write ``key`` (whole-value replace, so a retry is safe). Retried and timed."""
        try:
            await self._call(lambda: self.store.set(key, value), written=len(value))
        except TransientStoreError as exc:
            await self._retried(
                "set", key, lambda: self._call(lambda: self.store.set(key, value), written=len(value)), exc
            )
        finally:  # failed or not (a timed-out PUT may have landed): shared reads of it are stale
            SHARED_READS.forget(self.store.budget_key, key)

    async def set_if(
        self,
        key: str,
        value: bytes,
        *,
        if_generation_match: Generation | None = None,
        if_not_exists: bool = False,
        idempotent: bool = True,
    ) -> None:
        """Write ``key`` only if the condition holds (see `Store.set`). Retried and timed.

        A retry keeps the condition, so it never replays an old value over a newer
        writer's. When an attempt failed ambiguously (a timeout or a reset: the
        request may have been applied) and a retry then finds the condition broken,
        the stored value is compared with ``value``: equal means the earlier attempt
        landed (S3 can answer 412 to a retried conditional PUT of its own write) --
        or another writer stored the very same bytes, which is the same result when
        the write is ``idempotent`` (a merge of elements, attributes). Pass
        ``idempotent=False`` where *who* wrote matters (``append`` claiming an
        offset): the 412 is then raised, and the caller's next round may allocate
        again rather than share another writer's allocation.

        Raises
        ------
        PreconditionFailedError
            Another writer changed (or created) the key first; nothing was written.
        ConsistencyUnsupportedError
            The store has no conditional writes.
        """
        ambiguous = False

        async def attempt() -> None:
            nonlocal ambiguous
            try:
                await self._call(
                    lambda: self.store.set(
                        key, value, if_generation_match=if_generation_match, if_not_exists=if_not_exists
                    ),
                    written=len(value),
                )
            except ThrottledError:
                raise  # answered "slow down": not applied
            except TransientStoreError:
                ambiguous = True
                raise
            except PreconditionFailedError:
                if ambiguous and idempotent and await self.get(key) == value:
                    return  # our own earlier attempt was applied (or the same bytes were)
                raise

        try:
            await self._retried("set", key, attempt)
        finally:
            SHARED_READS.forget(self.store.budget_key, key)

    async def delete_if(self, key: str, *, if_generation_match: Generation) -> None:
        """Delete ``key`` only if it is still ``if_generation_match`` (missing is fine). Retried.

        Raises
        ------
        PreconditionFailedError
            Another writer replaced the key first; nothing was deleted.
        """
        ambiguous = False

        async def attempt() -> None:
            nonlocal ambiguous
            try:
                await self._call(lambda: self.store.delete(key, if_generation_match=if_generation_match))
            except TransientStoreError:
                ambiguous = True
                raise
            except PreconditionFailedError:
                if ambiguous and not await self.exists(key):
                    return  # our own earlier attempt deleted it
                raise

        try:
            await self._retried("delete", key, attempt)
        finally:
            SHARED_READS.forget(self.store.budget_key, key)

    async def replace_read(
        self, key: str, value: bytes | None, *, existed: bool, generation: Generation | None
    ) -> None:
        """The write step of an optimistic read-modify-write: store ``value`` (None: delete)
        only if ``key`` is still what was read -- the version ``generation``, or absent when
        nothing ``existed``. A value read without a generation (a backend that sent no
        ETag) is replaced blind.

        Raises
        ------
        PreconditionFailedError
            Another writer changed (or created) the key since it was read; nothing was written.
        """
        if value is None:
            if not existed:
                return
            if generation is None:
                await self.delete(key)
            else:
                await self.delete_if(key, if_generation_match=generation)
        elif not existed:
            await self.set_if(key, value, if_not_exists=True)
        elif generation is None:
            await self.set(key, value)
        else:
            await self.set_if(key, value, if_generation_match=generation)

    async def conflicted(self, attempt: int) -> None:
        """Record that round ``attempt`` (1-based) of a read-modify-write lost to another writer,
        and wait before the next round: at once after a first conflict, then the retry
        policy's backoff (full jitter), so writers contending for one key spread out instead
        of one of them losing every round."""
        self.stats.count_conflict()
        if attempt > 1:
            await asyncio.sleep(self.policy.backoff(attempt - 1))

    async def update(
        self,
        key: str,
        modify: Callable[[bytes | None], bytes | None],
        *,
        require_consistency: bool | None = None,
        idempotent: bool = True,
    ) -> bytes | None:
        """Optimistic read-modify-write of one value: read with its generation, apply
        ``modify``, write conditionally; start again when another writer got there first.

        Parameters
        ----------
        key : str
            The key (a ``.zattrs``/``.zarray`` document, typically).
        modify : callable
            ``modify(current bytes or None) -> new bytes``, or None to leave the value
            as it is. Called again with the newer value after every conflict, so it
            must be a pure function of its argument (and may raise to abort).
        require_consistency : bool, optional
            Refuse stores without conditional writes (default: ``azarr.config``
            ``require_consistency``); otherwise those get a plain read and write.
        idempotent : bool
            Whether applying the change twice equals applying it once (see
            `set_if`); False for allocations such as ``append``.

        Returns
        -------
        bytes or None
            The value written (or left in place when ``modify`` returned None).

        Raises
        ------
        PreconditionFailedError
            ``conditional_write_attempts`` rounds all lost to other writers.
        ConsistencyUnsupportedError
            ``require_consistency`` on a store without conditional writes.
        """
        if not self.check_consistency(key, require_consistency):
            current = await self.get(key)
            new = modify(current)
            if new is not None:
                await self.set(key, new)
            return current if new is None else new
        for attempt in range(1, int(config.get("conditional_write_attempts")) + 1):
            current, generation = await self.get_with_generation(key)
            new = modify(current)
            if new is None:
                return current
            try:
                if current is None:
                    await self.set_if(key, new, if_not_exists=True, idempotent=idempotent)
                elif generation is None:
                    await self.set(key, new)  # the backend gave no generation (no ETag header)
                else:
                    await self.set_if(key, new, if_generation_match=generation, idempotent=idempotent)
            except PreconditionFailedError:
                await self.conflicted(attempt)
                continue
            return new
        raise PreconditionFailedError(
            f"update {key!r} in {self.store.url}: other writers changed it on each of "
            f"{config.get('conditional_write_attempts')} attempts"
        )

    def check_consistency(self, key: str, require: bool | None = None) -> bool:
        """Whether read-modify-writes of ``key`` can be conditional on this store.

        Raises
        ------
        ConsistencyUnsupportedError
            They cannot, and ``require`` (default ``azarr.config``
            ``require_consistency``) asks for them.
        """
        if self.store.supports_conditional_writes:
            return True
        if require if require is not None else config.get("require_consistency"):
            raise ConsistencyUnsupportedError(
                f"cannot update {key!r} safely: {type(self.store).__name__} {self.store.url} has no "
                "conditional writes, so concurrent writers could lose each other's updates "
                "(require_consistency=True; see docs/consistency.md)"
            )
        return False

    async def delete(self, key: str) -> None:
        """Delete ``key`` (missing is fine). Retried and timed."""
        try:
            await self._retried("delete", key, lambda: self._call(lambda: self.store.delete(key)))
        finally:
            SHARED_READS.forget(self.store.budget_key, key)

    async def stat(self, key: str) -> tuple[int, Generation | None] | None:
        """Size and generation of ``key``, None if missing (see `Store.stat`). Retried and timed."""
        return await self._retried("stat", key, lambda: self._call(lambda: self.store.stat(key)))

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key``. Retried and timed.

        Raises
        ------
        FileNotFoundError
            The key is missing.
        """
        return await self._retried("getsize", key, lambda: self._call(lambda: self.store.getsize(key)))

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (see `Store.delete_prefix`). Retried whole."""
        try:
            await self._retried(
                "delete_prefix", prefix, lambda: self._call(lambda: self.store.delete_prefix(prefix))
            )
        finally:
            SHARED_READS.forget(self.store.budget_key, prefix=prefix)

    async def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, complete: a listing that fails part-way is restarted.

        Listing pages fail and are retried like GETs; the keys of a failed attempt are
        dropped, so the result is never a partial key set presented as complete.
        """
        return await self._retried(
            "list", prefix, lambda: self._call(lambda: _collect(self.store.list_prefix(prefix)))
        )

    async def list_dir(self, prefix: str) -> list[str]:
        """The children of ``prefix`` (see `Store.list_dir`), complete; retried whole."""
        return await self._retried(
            "list_dir", prefix, lambda: self._call(lambda: _collect(self.store.list_dir(prefix)))
        )

    async def read_documents(self, *keys: str) -> list[Any]:
        """Metadata documents at ``keys``, concurrently; None where missing.

        A store that serves decoded documents (the consolidated-metadata overlay,
        `Store.serves_documents`) hands them over as they are: no request,
        and no JSON encoding only to decode it again. Others return bytes.
        """
        if self.store.serves_documents:
            return [self.store.get_document(key) for key in keys]
        return list(await asyncio.gather(*(self.get(key) for key in keys)))

    async def revalidate(self) -> None:
        """Let a caching store re-fetch what it cached (called when a node is opened)."""
        await self.store.revalidate()

    # ------------------------------------------------------------------ blocking access
    # For worker threads of the chunk pipeline on stores with ``supports_blocking_io``
    # (memory, local files), which run batches of chunk reads and writes in one codec-pool
    # job. The caller holds a request slot of the budget for the whole job (its requests
    # run one after another). Not retried: these stores raise no transient errors.
    def get_blocking(self, key: str) -> bytes | None:
        """`get` from a worker thread (timed and counted; not retried, no budget slot)."""
        with BlockingBatch(self) as batch:
            return batch.get(key)

    def set_blocking(self, key: str, value: bytes | memoryview) -> None:
        """`set` from a worker thread (timed and counted; not retried, no budget slot).

        ``value`` as `Store.set_blocking` (a memoryview of any shape: its ``nbytes`` are counted)."""
        with BlockingBatch(self) as batch:
            batch.set(key, value)

    def delete_blocking(self, key: str) -> None:
        """`delete` from a worker thread (timed and counted; not retried, no budget slot)."""
        with BlockingBatch(self) as batch:
            batch.delete(key)

    def blocking_batch(self) -> BlockingBatch:
        """The blocking calls of one codec-pool job, each timed, recorded in the stats
        at once when the batch closes (`BlockingBatch`)."""
        return BlockingBatch(self)

    # ------------------------------------------------------------------ machinery
    async def _retried(
        self,
        op: str,
        key: str,
        attempt: Callable[[], Awaitable[T]],
        failed_first: TransientStoreError | None = None,
        started: float | None = None,
    ) -> T:
        if failed_first is not None:
            self.stats.count_retry()
        return await retry_call(
            attempt,
            policy=self.policy,
            what=f"{op} {key!r} in {self.store.url}",
            on_retry=lambda _exc: self.stats.count_retry(),
            failed_first=failed_first,
            started=started,
        )

    async def _get_once(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self._call(lambda: self.store.get(key, byte_range), reading=True)

    async def _call(
        self, make: Callable[..., Awaitable[T]], *args: Any, reading: bool = False, written: int = 0
    ) -> T:
        """One attempt, ``make(*args)``, under a request slot and the per-request timeout,
        counted in the stats and reported to the budget's adaptive limit (throttled, timed
        out, or succeeded).

        Local and memory stores get no timeout: they do not stall the way a
        network does, and arming a timer per request doubled the cost of reading
        small chunks from memory (measured).
        """
        timeout = None if self.store.is_local else self.request_timeout
        deadline = config.get("retry_deadline")
        if timeout is not None and deadline is not None and deadline < timeout:
            timeout = deadline  # no attempt outlives the deadline of the whole read
        budget = self.budget
        async with budget as epoch:
            started = time.perf_counter()
            try:
                if timeout is None:
                    result = await make(*args)
                else:
                    async with asyncio.timeout(timeout) as scope:
                        result = await make(*args)
            except TimeoutError as exc:
                self.stats.record(time.perf_counter() - started, failed=True)
                if timeout is not None and scope.expired():
                    budget.record_throttle(epoch)  # a stalled server: fewer requests, as for "slow down"
                    raise StoreTimeoutError(
                        f"request to {self.store.url} got no complete answer within {timeout} s"
                    ) from exc
                raise
            except ThrottledError:
                self.stats.record(time.perf_counter() - started, throttled=True)
                budget.record_throttle(epoch)
                raise
            except BaseException:
                self.stats.record(time.perf_counter() - started, failed=True)
                raise
            seconds = time.perf_counter() - started
            read = 0
            if reading:
                value = result[0] if isinstance(result, tuple) else result
                read = len(value) if isinstance(value, (bytes, memoryview)) else 0
            self.stats.record(seconds, read=read, written=written)
            if budget.adaptive:
                budget.record_success(epoch, seconds)
            return result

    async def _hedged_get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        """Send a backup GET if the first has not answered by the recent p95 latency.

        AWS and Google both recommend this for tail latency; the first answer
        wins and the other request is cancelled.
        """
        threshold = self.stats.latency_quantile(0.95)
        first = asyncio.ensure_future(self._get_once(key, byte_range))
        if threshold is None:
            return await first
        done, _ = await asyncio.wait({first}, timeout=threshold)
        if done:
            return first.result()
        self.stats.count_hedge()
        backup = asyncio.ensure_future(self._get_once(key, byte_range))
        racers = {first, backup}
        try:
            while racers:
                finished, racers = await asyncio.wait(racers, return_when=asyncio.FIRST_COMPLETED)
                for task in finished:
                    if task.exception() is None:
                        return task.result()
            # Both failed: raise the first request's error (it started earlier).
            return first.result()
        finally:
            for task in (first, backup):
                if not task.done():
                    task.cancel()
            await asyncio.gather(first, backup, return_exceptions=True)
