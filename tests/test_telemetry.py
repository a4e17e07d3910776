"""OpenTelemetry output, read back with the SDK's in-memory reader and exporter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_shared_reads import DATA, KEYS, make_store

import azarr
from azarr import telemetry
from azarr.scheduler import ChunkCache, _stats, stats_for


@pytest.fixture
def otel() -> Iterator[tuple[InMemoryMetricReader, InMemorySpanExporter]]:
    reader = InMemoryMetricReader()
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.instrument(
        meter_provider=MeterProvider(metric_readers=[reader]), tracer_provider=tracer_provider
    )
    yield reader, exporter
    telemetry.uninstrument()


def points(reader: InMemoryMetricReader, store_url: str) -> dict[str, Any]:
    """Metric name -> its data point for ``store_url`` (value, or the histogram point)."""
    found: dict[str, Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "azarr"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    if point.attributes.get("azarr.store") == store_url:
                        key = metric.name
                        if "azarr.array" in point.attributes:
                            key += f"[{point.attributes['azarr.operation']}]"
                        found[key] = getattr(point, "value", point)
    return found


async def test_metrics_and_spans(
    otel: tuple[InMemoryMetricReader, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fresh counter registry: the suite's earlier stores (up to 256 recent ones, and those
    # still in use) would otherwise be observed too; after thousands of store specs the SDK's
    # 2,000 points per metric (its cardinality limit) put this store's point in the overflow.
    monkeypatch.setattr(_stats, "_stats", _stats.SpecRegistry())
    reader, exporter = otel
    store = await make_store()
    cache = ChunkCache(1 << 20, recheck_cached_data=False)
    arr = await azarr.open_array(store, path="a", mode="r+", cache=cache)
    await arr.get_basic_selection()  # 4 misses
    await arr.get_basic_selection((1, slice(0, 5)))  # 1 hit
    await arr.set_basic_selection((3, slice(None)), 1.0)
    stats = stats_for(store)
    got = points(reader, store.url)
    assert got["azarr.store.requests"] == stats.requests > 0
    assert got["azarr.store.read"] == stats.bytes_read > 0
    assert got["azarr.store.written"] == stats.bytes_written > 0
    assert got["azarr.chunk_cache.misses"] == 4 and got["azarr.chunk_cache.hits"] == 1
    assert got["azarr.store.concurrency_limit"] == stats.concurrency_limit
    assert got["azarr.store.request.duration"].count == stats.requests
    assert got["azarr.array.operation.duration[read]"].count == 2
    assert got["azarr.array.operation.duration[write]"].count == 2  # make_store's, then ours
    assert got["azarr.array.chunks[read]"] == 5 and got["azarr.array.chunks[write]"] == 4 + 1

    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["azarr.write", "azarr.read", "azarr.read", "azarr.write"]
    first = spans[1].attributes
    assert first is not None
    assert (first["azarr.array"], first["azarr.chunks"], tuple(first["azarr.shape"])) == ("a", 4, DATA.shape)

    # A failed read ends its span with the error.
    store._data[KEYS[0]] = b"corrupt"
    fresh = await azarr.open_array(store, path="a", mode="r", cache=False)
    with pytest.raises(azarr.errors.CodecError):
        await fresh.get_basic_selection((0, 0))
    failed = exporter.get_finished_spans()[-1]
    assert failed.status.status_code.name == "ERROR" and failed.events[0].name == "exception"

    telemetry.uninstrument()
    assert not telemetry.instrumented()
    await arr.get_basic_selection((2, 0))
    assert len(exporter.get_finished_spans()) == 5  # nothing recorded any more
