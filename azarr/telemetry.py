"""OpenTelemetry metrics and spans for azarr's stores and arrays (optional).

`instrument` turns them on for the process, through the OpenTelemetry API
(``pip install azarr[otel]``, which is ``opentelemetry-api`` only): the application
chooses the SDK, exporters and readers, as for any instrumented library. Until then
azarr calls nothing of OpenTelemetry and pays one ``None`` check per request.

Metrics (attributes: ``azarr.store``, the store's URL without credentials; array
instruments add ``azarr.array``, the array's path, and ``azarr.operation``):

| instrument | kind | from |
| --- | --- | --- |
| ``azarr.store.requests`` | counter | store calls, every attempt |
| ``azarr.store.read`` / ``.written`` | counter (By) | payload bytes |
| ``azarr.store.retries`` / ``.errors`` | counter | retried and failed attempts |
| ``azarr.store.throttled`` | counter | "slow down" answers |
| ``azarr.store.concurrency_limit`` | gauge | the adaptive request limit now |
| ``azarr.store.request.duration`` | histogram (s) | each attempt's latency |
| ``azarr.chunk_cache.hits`` / ``.misses`` | counter | the decoded-chunk cache |
| ``azarr.chunk_cache.evictions`` | counter | entries evicted to make room |
| ``azarr.reads.collapsed`` | counter | reads sharing another's fetch |
| ``azarr.array.operation.duration`` | histogram (s) | each array read or write |
| ``azarr.array.chunks`` | counter | chunks those touched |

The store counters are observed from `azarr.scheduler.StoreStats` (the same numbers
``stats_for(store).as_dict()`` shows; `StoreStats.reset` restarts them). Spans: one
``azarr.read`` / ``azarr.write`` per array operation (``get_basic_selection``,
``set_orthogonal_selection``, ...), with the store, array path, chunk count and
selection shape, and the error if it failed. Icechunk is the one peer exporting
OpenTelemetry; this follows the OpenTelemetry semantic conventions' naming.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from azarr.scheduler import _stats
from azarr.storage._redact import redact_url

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray

__all__ = ["instrument", "instrumented", "uninstrument"]

_lock = threading.Lock()
_state: _Instruments | None = None

#: The counters observed from `StoreStats`: (instrument name, attribute, unit, description).
_STORE_COUNTERS = (
    ("azarr.store.requests", "requests", "{request}", "Store calls made (every attempt)"),
    ("azarr.store.read", "bytes_read", "By", "Payload bytes received"),
    ("azarr.store.written", "bytes_written", "By", "Payload bytes sent"),
    ("azarr.store.retries", "retries", "{request}", "Attempts repeated after a transient error"),
    ("azarr.store.errors", "errors", "{request}", "Attempts that failed"),
    ("azarr.store.throttled", "throttled", "{request}", "Attempts refused with 'slow down'"),
    ("azarr.chunk_cache.hits", "cache_hits", "{chunk}", "Chunk reads answered by the decoded-chunk cache"),
    ("azarr.chunk_cache.misses", "cache_misses", "{chunk}", "Chunk reads the decoded-chunk cache missed"),
    ("azarr.chunk_cache.evictions", "cache_evictions", "{chunk}", "Cached chunks evicted to make room"),
    ("azarr.reads.collapsed", "collapsed", "{chunk}", "Chunk reads answered by another reader's fetch"),
)


class _Instruments:
    def __init__(self, meter_provider: Any, tracer_provider: Any) -> None:
        from opentelemetry import metrics, trace

        from azarr import __version__

        meter = (meter_provider or metrics.get_meter_provider()).get_meter("azarr", __version__)
        self.tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("azarr", __version__)
        for name, attribute, unit, description in _STORE_COUNTERS:
            meter.create_observable_counter(
                name, callbacks=[self._observer(attribute)], unit=unit, description=description
            )
        meter.create_observable_gauge(
            "azarr.store.concurrency_limit",
            callbacks=[self._observer("concurrency_limit")],
            unit="{request}",
            description="Requests the store may have in flight now (the adaptive limit)",
        )
        self.request_duration = meter.create_histogram(
            "azarr.store.request.duration", unit="s", description="Latency of each store call attempt"
        )
        self.operation_duration = meter.create_histogram(
            "azarr.array.operation.duration", unit="s", description="Duration of each array read or write"
        )
        self.chunks = meter.create_counter(
            "azarr.array.chunks", unit="{chunk}", description="Chunks touched by array reads and writes"
        )

    @staticmethod
    def _observer(attribute: str) -> Any:
        from opentelemetry.metrics import Observation

        gauge = attribute == "concurrency_limit"

        def observe(options: Any) -> Iterable[Observation]:
            # One point per URL: stores of one URL with other options (two credentials, a
            # wrapper's own spec) are added up; a gauge shows the lowest limit among them.
            by_url: dict[str, int] = {}
            for stats in _stats.every_stats():
                value = getattr(stats, attribute)
                if value is not None:
                    old = by_url.get(stats.url)
                    by_url[stats.url] = value if old is None else min(old, value) if gauge else old + value
            return [Observation(value, {"azarr.store": url}) for url, value in by_url.items()]

        return observe

    def record_request(self, stats: _stats.StoreStats, seconds: float) -> None:
        self.request_duration.record(seconds, {"azarr.store": stats.url})


def instrument(*, meter_provider: Any = None, tracer_provider: Any = None) -> None:
    """Export azarr's metrics and spans through OpenTelemetry from now on.

    Parameters
    ----------
    meter_provider, tracer_provider : optional
        OpenTelemetry providers (default: the global ones, ``metrics.get_meter_provider()``
        and ``trace.get_tracer_provider()``).

    Raises
    ------
    ImportError
        ``opentelemetry-api`` is not installed (``pip install azarr[otel]``).

    Notes
    -----
    Calling it again replaces the providers; `uninstrument` stops recording.
    """
    global _state
    with _lock:
        _state = _Instruments(meter_provider, tracer_provider)
        _stats.set_request_observer(_state.record_request)


def uninstrument() -> None:
    """Stop recording spans and request latencies (instruments already created stay with
    their providers)."""
    global _state
    with _lock:
        _state = None
        _stats.set_request_observer(None)


def instrumented() -> bool:
    """Whether `instrument` is in force."""
    return _state is not None


#: What `operation` returns when not instrumented: one reusable no-op context for every
#: read and write (not a generator-based context manager made per operation).
_NOTHING: contextlib.AbstractContextManager[None] = contextlib.nullcontext()


def operation(
    kind: str, array: AsyncArray, nchunks: int, shape: tuple[int, ...]
) -> contextlib.AbstractContextManager[None]:
    """A span and a duration for one array read or write (``kind``: ``"read"``/``"write"``);
    nothing when not instrumented."""
    state = _state
    if state is None:
        return _NOTHING
    return _recorded(state, kind, array, nchunks, shape)


@contextlib.contextmanager
def _recorded(
    state: _Instruments, kind: str, array: AsyncArray, nchunks: int, shape: tuple[int, ...]
) -> Iterator[None]:
    store = redact_url(array.store.url)
    attributes = {"azarr.store": store, "azarr.array": array.path or "/", "azarr.operation": kind}
    started = time.perf_counter()
    with state.tracer.start_as_current_span(
        f"azarr.{kind}",
        attributes={**attributes, "azarr.chunks": nchunks, "azarr.shape": list(shape)},
    ):
        try:
            yield
        finally:
            state.operation_duration.record(time.perf_counter() - started, attributes)
            state.chunks.add(nchunks, attributes)
