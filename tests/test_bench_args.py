"""Smoke tests of the benchmarks' argument handling and case tables (no benchmark runs here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks import bench_indexing, bench_local


def test_local_rejects_unknown_case() -> None:
    with pytest.raises(SystemExit) as info:
        bench_local.main(["--cases", "zstd,lz5"])
    assert info.value.code == 2


def test_local_geometry_sizes() -> None:
    shape, chunks, dtype, comp = bench_local.geometry("zstd", 1024)
    assert np.prod(shape) * np.dtype(dtype).itemsize == 2**30
    assert np.prod(chunks) * np.dtype(dtype).itemsize == 2**20
    assert comp == "zstd"
    shape, chunks, dtype, _ = bench_local.geometry("small-chunks", 1024)
    assert math.prod(-(-s // c) for s, c in zip(shape, chunks, strict=True)) == 10_000
    assert dtype == "int32"


def test_local_data_is_seeded() -> None:
    a = bench_local.make_data((600, 64), "float32")
    b = bench_local.make_data((600, 64), "float32")
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a[:256], a[256:512])  # blocks differ by their offset


def test_indexing_small_chunk_case() -> None:
    try:
        bench_indexing.select_case("small-chunks")
        assert bench_indexing.SHAPE == (2000, 2000) and bench_indexing.CHUNKS == (20, 20)
        data, rows500, rows, cols = bench_indexing.make_inputs()
        assert data.dtype == np.int32 and data.shape == (2000, 2000)
        assert len(set(rows500.tolist())) == 500 and rows.max() < 2000 and cols.max() < 2000
        assert "full write" in bench_indexing.WORKLOADS
    finally:
        bench_indexing.select_case("wide")
    assert bench_indexing.SHAPE == (10_000, 100)


def test_geometric_mean() -> None:
    assert bench_indexing.geometric_mean([0.5, 2.0, 4.0, 0.25]) == pytest.approx(1.0)


def test_v3_v2_cases_and_paired_ratio() -> None:
    from benchmarks import bench_v3_v2

    assert bench_v3_v2.encoding("v2 /", "none")["dimension_separator"] == "/"
    v3 = bench_v3_v2.encoding("v3 .", "zstd")
    assert v3["zarr_format"] == 3 and v3["chunk_key_encoding"]["configuration"] == {"separator": "."}
    assert [c["name"] for c in v3["codecs"]] == ["bytes", "zstd"]
    # Each v3 run over the v2 run of its own round: 1.1, 1.0, 0.5 -> median 1.0.
    v2_runs = [{"round": 0, "seconds": 1.0}, {"round": 1, "seconds": 2.0}, {"round": 2, "seconds": 4.0}]
    v3_runs = [{"round": 0, "seconds": 1.1}, {"round": 1, "seconds": 2.0}, {"round": 2, "seconds": 2.0}]
    assert math.isclose(bench_v3_v2.paired_ratio(v3_runs, v2_runs), 1.0)
    with pytest.raises(SystemExit) as info:
        bench_v3_v2.main(["--compressors", "lz5"])
    assert info.value.code == 2
