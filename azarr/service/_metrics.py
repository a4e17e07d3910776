"""Prometheus text exposition of azarr's per-store counters, for a service's ``/metrics``.

`prometheus_metrics` renders every store's `azarr.scheduler.StoreStats` (and optional
extra gauges of the service's own) with ``prometheus-client``: scraped by Prometheus
as it scrapes any process. The same numbers go to OpenTelemetry with
`azarr.telemetry.instrument`; this is for deployments that scrape instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from azarr.scheduler import LATENCY_BUCKETS, _stats

__all__ = ["PROMETHEUS_CONTENT_TYPE", "prometheus_metrics"]

#: The ``Content-Type`` of `prometheus_metrics`' text (exposition format 0.0.4).
PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# (metric name, StoreStats attribute, help) of the per-store counters.
_COUNTERS = (
    ("azarr_store_requests", "requests", "Store calls made (every attempt)."),
    ("azarr_store_read_bytes", "bytes_read", "Payload bytes received."),
    ("azarr_store_written_bytes", "bytes_written", "Payload bytes sent."),
    ("azarr_store_retries", "retries", "Attempts repeated after a transient error."),
    ("azarr_store_errors", "errors", "Attempts that failed."),
    ("azarr_store_throttled", "throttled", "Attempts refused with 'slow down' (503 SlowDown, 429)."),
    ("azarr_chunk_cache_hits", "cache_hits", "Chunk reads answered by the decoded-chunk cache."),
    ("azarr_chunk_cache_misses", "cache_misses", "Chunk reads the decoded-chunk cache missed."),
    ("azarr_chunk_cache_evictions", "cache_evictions", "Cached chunks evicted to make room."),
    ("azarr_reads_collapsed", "collapsed", "Chunk reads answered by another reader's fetch."),
)


class _StoreCollector:
    """A ``prometheus_client`` collector reading `StoreStats` at scrape time."""

    def __init__(self, extra: Mapping[str, float]) -> None:
        self.extra = extra

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        everything = [(stats.url, stats.as_dict()) for stats in _stats.every_stats()]
        for name, attribute, doc in _COUNTERS:
            family = CounterMetricFamily(name, doc, labels=["store"])
            for url, counts in everything:
                family.add_metric([url], counts[attribute])
            yield family
        limit = GaugeMetricFamily(
            "azarr_store_concurrency_limit", "Requests the store may have in flight now.", labels=["store"]
        )
        for url, counts in everything:
            if counts["concurrency_limit"] is not None:
                limit.add_metric([url], counts["concurrency_limit"])
        yield limit
        latency = HistogramMetricFamily(
            "azarr_store_request_seconds", "Latency of each store call attempt.", labels=["store"]
        )
        for url, counts in everything:
            per_bucket = list(counts["latency_histogram"].values())
            cumulative, buckets = 0, []
            for bound, n in zip([*map(str, LATENCY_BUCKETS), "+Inf"], per_bucket, strict=True):
                cumulative += n
                buckets.append((bound, cumulative))
            # StoreStats keeps counts per bucket, not the sum of latencies: the sum is unknown.
            latency.add_metric([url], buckets, sum_value=float("nan"))
        yield latency
        for name, value in self.extra.items():
            yield GaugeMetricFamily(name, f"{name} (the service's own).", value=value)


def prometheus_metrics(extra: Mapping[str, float] | None = None) -> bytes:
    """Every store's counters in Prometheus' text format (for a ``GET /metrics``).

    Parameters
    ----------
    extra : mapping of str to float, optional
        More gauges to expose by name (the service's requests in flight, ...).

    Returns
    -------
    bytes
        The exposition, of type `PROMETHEUS_CONTENT_TYPE`: per store (label ``store``,
        its URL without credentials) ``azarr_store_requests_total``, ``..._read_bytes_total``,
        ``..._retries_total``, ``..._throttled_total``, the chunk cache's hits, misses and
        evictions, collapsed reads, the adaptive ``azarr_store_concurrency_limit`` and the
        ``azarr_store_request_seconds`` histogram (`azarr.scheduler.LATENCY_BUCKETS`).

    Raises
    ------
    ImportError
        ``prometheus-client`` is not installed (``pip install azarr[service]``).
    """
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StoreCollector(dict(extra or {})))
    return generate_latest(registry)
