"""Retries of transient store errors: exponential backoff with full jitter.

Throttling (S3 ``503 SlowDown``, GCS ``429``), 5xx/408 responses, dropped
connections and timeouts are retried; everything else (403, missing bucket,
400, corrupt data) fails at once. The backoff is "full jitter" from the AWS
architecture blog: sleep ``uniform(0, min(max_delay, initial * 2**attempt))``,
which spreads retries of many clients instead of synchronising them.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from azarr import config
from azarr.errors import RetriesExhaustedError, TransientStoreError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How transient store errors are retried.

    Parameters
    ----------
    max_attempts : int
        Attempts in total, the first included (1 = no retries).
    initial_delay : float
        Backoff ceiling of the first retry, in seconds.
    max_delay : float
        Largest backoff ceiling, in seconds.
    deadline : float or None
        Seconds across all attempts of one request, the one in progress included:
        an attempt still running at the deadline (a body trickling in) is
        abandoned, and no retry starts after it.
    """

    max_attempts: int = 6
    initial_delay: float = 0.05
    max_delay: float = 5.0
    deadline: float | None = 300.0

    @classmethod
    def from_config(cls) -> RetryPolicy:
        """The policy set in ``azarr.config`` (``retry_*`` settings)."""
        return cls(
            max_attempts=int(config.get("retry_max_attempts")),
            initial_delay=float(config.get("retry_initial_delay")),
            max_delay=float(config.get("retry_max_delay")),
            deadline=config.get("retry_deadline"),
        )

    def backoff(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to sleep before retry number ``attempt`` (1-based), full jitter."""
        ceiling = min(self.max_delay, self.initial_delay * (2 ** (attempt - 1)))
        return (rng or random).uniform(0, ceiling)


def is_retryable(exc: BaseException) -> bool:
    """True for errors worth retrying (`TransientStoreError` and subclasses)."""
    return isinstance(exc, TransientStoreError)


async def retry_call(
    attempt: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    what: str,
    on_retry: Callable[[BaseException], None] | None = None,
    failed_first: TransientStoreError | None = None,
    started: float | None = None,
) -> T:
    """Await ``attempt()`` until it succeeds, retrying transient errors per ``policy``.

    Parameters
    ----------
    attempt : callable
        Makes one fresh attempt (a new coroutine each call).
    policy : RetryPolicy
    what : str
        Description for the error message, e.g. ``"get 'a/0.0' in s3://b/x"``.
    on_retry : callable, optional
        Called with the transient error before each retry (counters).
    failed_first : TransientStoreError, optional
        The caller already made the first attempt inline and it failed with
        this error: start with the backoff before attempt 2.
    started : float, optional
        When the caller's first attempt began (``loop.time()``): the deadline
        counts from there.

    Raises
    ------
    RetriesExhaustedError
        The last attempt still failed transiently, or the deadline passed
        (chains the last error).
    StoreError
        Non-retryable errors propagate unchanged at once.
    """
    loop = asyncio.get_running_loop()
    start = loop.time() if started is None else started
    deadline_at = None if policy.deadline is None else start + policy.deadline
    first = 1
    if failed_first is not None:
        if policy.max_attempts <= 1:
            raise RetriesExhaustedError(f"{what} failed after 1 attempts: {failed_first}") from failed_first
        delay = policy.backoff(1)
        if deadline_at is not None and loop.time() + delay >= deadline_at:
            raise RetriesExhaustedError(
                f"{what} failed after deadline reached: {failed_first}"
            ) from failed_first
        await asyncio.sleep(delay)
        first = 2
    for number in range(first, policy.max_attempts + 1):
        try:
            if deadline_at is None:
                return await attempt()
            async with asyncio.timeout_at(deadline_at) as scope:
                return await attempt()
        except (TransientStoreError, TimeoutError) as exc:
            if deadline_at is not None and scope.expired():
                # The attempt in progress (a slow or trickling answer) ran into the deadline.
                raise RetriesExhaustedError(
                    f"{what} failed after deadline reached: attempt {number} was still running after "
                    f"retry_deadline ({policy.deadline} s)"
                ) from exc
            if not isinstance(exc, TransientStoreError):
                raise  # a TimeoutError of the attempt's own making, not a store error

            delay = policy.backoff(number)
            out_of_time = policy.deadline is not None and loop.time() - start + delay > policy.deadline
            if number == policy.max_attempts or out_of_time:
                reason = "deadline reached" if out_of_time else f"{number} attempts"
                raise RetriesExhaustedError(f"{what} failed after {reason}: {exc}") from exc
            if on_retry is not None:
                on_retry(exc)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover - loop always returns or raises
