"""The adaptive request limit of a remote store: AIMD between a floor and ``max_requests``.

A server that answers "slow down" (S3 ``503 SlowDown``, HTTP ``429``, GCS ``429
rateLimitExceeded``, Azure ``503 ServerBusy``: `ThrottledError`) is telling the client it sends too much.
Retrying each request with backoff while keeping 64 in flight answers it with more
requests, not fewer. So, as TCP's congestion window and the AWS SDKs' adaptive retry
mode do, the number of requests a store may have in flight moves:

* **multiplicative decrease** on a throttling answer or a timed-out request (to
  ``THROTTLE_BACKOFF`` = 0.7 of what was in flight, botocore's CUBIC beta), and, more
  gently (``LATENCY_BACKOFF`` = 0.9), when recent latency rises past
  ``latency_tolerance`` times its long-run average (a server slowing down before it
  refuses, as Netflix's gradient limiters watch for);
* **additive increase** on success: ``INCREASE`` = a quarter of a request more per
  window of successes (``+0.25 / limit`` each), only while the limit is in use. TCP adds
  a whole one per round trip; an object store refuses at once instead of queueing, and a
  refusal costs a retry, so probing gently pays: with several processes sharing a
  throttled server, a quarter step cut the refused share from about 5 % to 2 % at the
  same goodput (a simulation of `benchmarks/bench_throttle.py`'s setting, then that
  benchmark).

One decrease per window: a signal from a request admitted before the last decrease
(an earlier *epoch*) says nothing about the lowered limit and is ignored, so a burst
of throttles from one overfull window cuts the limit once, not once per request.

Unlike botocore's adaptive mode (a token bucket of requests per second) this limits
requests in flight, the quantity azarr's budget already bounds; it does not act below
its floor, where the retries' backoff paces a client that needs less than one request
in flight. The state lives in the store's `IOBudget` and is only touched under its lock.
"""

from __future__ import annotations

#: Multiplicative decrease on a throttling answer or a timeout (botocore's CUBIC beta).
THROTTLE_BACKOFF = 0.7
#: Multiplicative decrease on latency inflation: milder, latency is a noisier signal.
LATENCY_BACKOFF = 0.9
#: Weights of a new latency in the short and long averages (about 10 and 100 samples).
SHORT_WEIGHT = 0.1
LONG_WEIGHT = 0.01
#: Successes before latency can lower the limit (the long average must mean something).
LATENCY_WARMUP = 100
#: Requests added per window of successes (additive increase).
INCREASE = 0.25


class AdaptiveLimit:
    """AIMD control of a request limit between ``floor`` and ``ceiling`` (see the module).

    Parameters
    ----------
    floor, ceiling : int
        The limit's range (1 <= floor <= ceiling); it starts at ``ceiling``.
    latency_tolerance : float or None
        Lower the limit when the short-run average latency exceeds this many times
        the long-run one (> 1); None ignores latency.

    Notes
    -----
    Not thread-safe by itself: `IOBudget` calls it under its lock.
    """

    __slots__ = (
        "_long",
        "_samples",
        "_short",
        "ceiling",
        "decreases",
        "epoch",
        "floor",
        "latency_decreases",
        "latency_tolerance",
        "value",
    )

    def __init__(self, floor: int, ceiling: int, *, latency_tolerance: float | None = 2.0) -> None:
        if not 1 <= floor <= ceiling:
            raise ValueError(f"need 1 <= floor <= ceiling, got floor={floor}, ceiling={ceiling}")
        if latency_tolerance is not None and latency_tolerance <= 1:
            raise ValueError(f"latency_tolerance must be > 1 or None, got {latency_tolerance}")
        self.floor = floor
        self.ceiling = ceiling
        self.latency_tolerance = latency_tolerance
        self.value = float(ceiling)
        #: Incremented by every decrease; requests carry the epoch they were admitted in.
        self.epoch = 0
        #: Decreases so far (throttles, timeouts and latency together), and those for latency.
        self.decreases = 0
        self.latency_decreases = 0
        self._short = 0.0
        self._long = 0.0
        self._samples = 0

    @property
    def limit(self) -> int:
        """The current limit, a whole number of requests in ``[floor, ceiling]``."""
        return max(self.floor, min(self.ceiling, int(self.value)))

    def set_range(self, floor: int, ceiling: int) -> None:
        """New bounds; the value is kept, clipped into them.

        Raises
        ------
        ValueError
            Not ``1 <= floor <= ceiling``.
        """
        if not 1 <= floor <= ceiling:
            raise ValueError(f"need 1 <= floor <= ceiling, got floor={floor}, ceiling={ceiling}")
        self.floor, self.ceiling = floor, ceiling
        self.value = min(float(ceiling), max(float(floor), self.value))

    def throttled(self, epoch: int, in_flight: int) -> bool:
        """A request admitted in ``epoch`` was refused ("slow down") or timed out, with
        ``in_flight`` requests out; True if the limit was lowered."""
        if epoch < self.epoch:
            return False
        self._decrease(in_flight, THROTTLE_BACKOFF)
        return True

    def succeeded(self, epoch: int, seconds: float, in_flight: int) -> bool:
        """A request admitted in ``epoch`` succeeded after ``seconds`` with ``in_flight``
        requests out (itself included); True if the whole-number limit changed.

        Runs once per successful remote request: written flat (no helper calls).
        """
        tolerance = self.latency_tolerance
        if tolerance is not None:
            if self._samples:
                short = self._short = self._short + SHORT_WEIGHT * (seconds - self._short)
                long = self._long = self._long + LONG_WEIGHT * (seconds - self._long)
            else:
                short = long = self._short = self._long = seconds
            self._samples += 1
            if short > tolerance * long and self._samples >= LATENCY_WARMUP and epoch >= self.epoch:
                before = self.limit
                self._decrease(in_flight, LATENCY_BACKOFF)
                self.latency_decreases += 1
                return self.limit != before
        value = self.value  # >= floor: decreases stop there, increases only add
        if value >= self.ceiling or 2 * in_flight < value:  # only grow a limit that is in use
            return False
        grown = value + INCREASE / value
        if grown > self.ceiling:
            grown = float(self.ceiling)
        self.value = grown
        return int(grown) != int(value)

    def _decrease(self, in_flight: int, factor: float) -> None:
        """Cut the limit to ``factor`` x what was in use."""
        # From what was in use, not the nominal limit (botocore decreases from the measured
        # send rate): a limit of 64 with 5 in flight when refused becomes 3, not 44.
        base = min(self.value, float(max(1, in_flight)))
        self.value = max(float(self.floor), base * factor)
        self.epoch += 1
        self.decreases += 1

    def __repr__(self) -> str:
        return f"AdaptiveLimit(limit={self.limit}, floor={self.floor}, ceiling={self.ceiling})"
