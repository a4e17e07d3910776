"""``StoreIO``: the one path from arrays, groups and the api functions to a store.

Everything above the store layer -- chunk reads and writes, metadata and
attribute documents, listings, deletes, sizes, consolidated documents -- goes
through a ``StoreIO``; ``core/`` and ``api/`` never call a store directly. Each
call runs under the store's request budget, with a per-request timeout (a
stalled server becomes :class:`~azarr.errors.StoreTimeoutError` instead of
hanging), retries of transient errors (:mod:`azarr.scheduler._retry`),
per-store counters (:mod:`azarr.scheduler._stats`), optional hedged reads, and
parallel byte-range reads for very large chunks on remote stores. A listing is
retried whole: one that fails part-way is restarted, never returned partial.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from azarr import config
from azarr.errors import StoreTimeoutError, TransientStoreError
from azarr.scheduler._budget import IOBudget, budget_for
from azarr.scheduler._retry import RetryPolicy, retry_call
from azarr.scheduler._stats import StoreStats, stats_for
from azarr.storage import ByteRange, Store

T = TypeVar("T")


async def _collect(items: AsyncIterator[str]) -> list[str]:
    return [item async for item in items]


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
    async def get(self, key: str, byte_range: ByteRange | None = None) -> bytes | None:
        """Read ``key`` (or a byte range of it); None if missing. Retried and timed.

        Raises
        ------
        RetriesExhaustedError
            Transient failures persisted through the retry policy.
        StoreError
            A non-retryable backend error.
        """
        if config.get("hedged_reads"):
            return await self._retried("get", key, lambda: self._hedged_get(key, byte_range))
        # The first attempt is made inline: this is the per-chunk hot path, and the
        # retry machinery (policy, closures, deadline clock) is only built on failure.
        try:
            return await self._call(lambda: self.store.get(key, byte_range), reading=True)
        except TransientStoreError as exc:
            return await self._retried(
                "get", key, lambda: self._call(lambda: self.store.get(key, byte_range), reading=True), exc
            )

    async def get_large(self, key: str, *, expected_nbytes: int) -> bytes | None:
        """Read ``key``, splitting it into parallel byte-range requests when it is large.

        Used for chunks whose decoded size exceeds ``large_chunk_threshold`` on
        remote stores: one size probe, then parts of ``large_chunk_part_size``
        bytes fetched concurrently under the budget and joined.
        """
        threshold = int(config.get("large_chunk_threshold"))
        if self.store.is_local or expected_nbytes <= threshold:
            return await self.get(key)
        try:
            size = await self.getsize(key)
        except FileNotFoundError:
            return None
        if size <= threshold:
            return await self.get(key)
        part = int(config.get("large_chunk_part_size"))
        ranges = [ByteRange(start, min(start + part, size)) for start in range(0, size, part)]
        parts = await asyncio.gather(*(self.get(key, r) for r in ranges))
        if any(p is None for p in parts):
            return None  # deleted while we read it
        return b"".join(p for p in parts if p is not None)

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

    async def delete(self, key: str) -> None:
        """Delete ``key`` (missing is fine). Retried and timed."""
        await self._retried("delete", key, lambda: self._call(lambda: self.store.delete(key)))

    async def getsize(self, key: str) -> int:
        """Bytes stored at ``key``. Retried and timed.

        Raises
        ------
        FileNotFoundError
            The key is missing.
        """
        return await self._retried("getsize", key, lambda: self._call(lambda: self.store.getsize(key)))

    async def delete_prefix(self, prefix: str) -> None:
        """Delete every key under ``prefix`` (see :meth:`Store.delete_prefix`). Retried whole."""
        await self._retried(
            "delete_prefix", prefix, lambda: self._call(lambda: self.store.delete_prefix(prefix))
        )

    async def list_prefix(self, prefix: str) -> list[str]:
        """Every key under ``prefix``, complete: a listing that fails part-way is restarted.

        Listing pages fail and are retried like GETs; the keys of a failed attempt are
        dropped, so the result is never a partial key set presented as complete.
        """
        return await self._retried(
            "list", prefix, lambda: self._call(lambda: _collect(self.store.list_prefix(prefix)))
        )

    async def list_dir(self, prefix: str) -> list[str]:
        """The children of ``prefix`` (see :meth:`Store.list_dir`), complete; retried whole."""
        return await self._retried(
            "list_dir", prefix, lambda: self._call(lambda: _collect(self.store.list_dir(prefix)))
        )

    async def read_documents(self, *keys: str) -> list[Any]:
        """Metadata documents at ``keys``, concurrently; None where missing.

        A store that serves decoded documents (the consolidated-metadata overlay,
        :attr:`Store.serves_documents`) hands them over as they are: no request,
        and no JSON encoding only to decode it again. Others return bytes.
        """
        if self.store.serves_documents:
            return [self.store.get_document(key) for key in keys]
        return list(await asyncio.gather(*(self.get(key) for key in keys)))

    async def revalidate(self) -> None:
        """Let a caching store re-fetch what it cached (called when a node is opened)."""
        await self.store.revalidate()

    # ------------------------------------------------------------------ machinery
    async def _retried(
        self,
        op: str,
        key: str,
        attempt: Callable[[], Awaitable[T]],
        failed_first: TransientStoreError | None = None,
    ) -> T:
        if failed_first is not None:
            self.stats.count_retry()
        return await retry_call(
            attempt,
            policy=self.policy,
            what=f"{op} {key!r} in {self.store.url}",
            on_retry=lambda _exc: self.stats.count_retry(),
            failed_first=failed_first,
        )

    async def _get_once(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self._call(lambda: self.store.get(key, byte_range), reading=True)

    async def _call(self, make: Callable[[], Awaitable[T]], *, reading: bool = False, written: int = 0) -> T:
        """One attempt under a request slot and the per-request timeout, counted in the stats.

        Local and memory stores get no timeout: they do not stall the way a
        network does, and arming a timer per request doubled the cost of reading
        small chunks from memory (measured).
        """
        timeout = None if self.store.is_local else self.request_timeout
        async with self.budget:
            started = time.perf_counter()
            try:
                if timeout is None:
                    result = await make()
                else:
                    async with asyncio.timeout(timeout) as scope:
                        result = await make()
            except TimeoutError as exc:
                self.stats.record(time.perf_counter() - started, failed=True)
                if timeout is not None and scope.expired():
                    raise StoreTimeoutError(
                        f"request to {self.store.url} got no complete answer within {timeout} s"
                    ) from exc
                raise
            except BaseException:
                self.stats.record(time.perf_counter() - started, failed=True)
                raise
            read = len(result) if reading and isinstance(result, bytes) else 0
            self.stats.record(time.perf_counter() - started, read=read, written=written)
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
