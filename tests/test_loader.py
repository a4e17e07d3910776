"""azarr.loader on SeaweedFS through the fault proxy: every sample once, reproducible order, one GET per chunk."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.loader import BatchLoader
from azarr.storage import S3Store

pytestmark = pytest.mark.s3

N = 4096
X = np.arange(N * 16, dtype="<f4").reshape(N, 16)
Y = np.arange(N, dtype="<i8")
NCHUNKS = N // 128 + N // 256  # x in 32 chunks of 128 rows, y in 16 of 256: units of 256 rows


async def _write(bucket: str, options: dict[str, Any]) -> None:
    # train.zarr in Zarr v2, train3.zarr the same arrays in Zarr v3 (crc32c after zstd).
    for name, v3 in (
        ("train.zarr", {}),
        ("train3.zarr", {"zarr_format": 3, "compressors": ["zstd", "crc32c"]}),
    ):
        store = S3Store(f"{bucket}/{name}", storage_options=options)
        try:
            x = await azarr.zeros(X.shape, chunks=(128, 16), dtype=X.dtype, store=store, path="x", **v3)
            await x.set_basic_selection(..., X)
            y = await azarr.zeros(Y.shape, chunks=(256,), dtype=Y.dtype, store=store, path="y", **v3)
            await y.set_basic_selection(..., Y)
        finally:
            await store.close()


@pytest.fixture(scope="module")
def bucket(seaweedfs: Any) -> str:
    name: str = seaweedfs.create_bucket()
    asyncio.run(_write(name, seaweedfs.storage_options))
    return name


def _open(bucket: str, name: str, seaweedfs: Any, s3_fault_proxy: Any) -> dict[str, azarr.AsyncArray]:
    options = s3_fault_proxy.storage_options(seaweedfs.storage_options)

    async def open_both() -> dict[str, azarr.AsyncArray]:
        store = S3Store(f"{bucket}/{name}", storage_options=options)
        return {
            "x": await azarr.open_array(store, mode="r", path="x"),
            "y": await azarr.open_array(store, mode="r", path="y"),
        }

    opened = asyncio.run(open_both())
    s3_fault_proxy.reset_counters()  # count chunk requests only
    return opened


@pytest.fixture
def arrays(bucket: str, seaweedfs: Any, s3_fault_proxy: Any) -> Iterator[dict[str, azarr.AsyncArray]]:
    yield _open(bucket, "train.zarr", seaweedfs, s3_fault_proxy)


def _labels(loader: Any) -> list[int]:
    out: list[int] = []
    for batch in loader:
        np.testing.assert_array_equal(batch["x"], X[batch["y"]])  # x and y stay paired
        out.extend(int(v) for v in batch["y"])
    return out


def test_every_sample_once_and_one_get_per_chunk(
    arrays: dict[str, azarr.AsyncArray], s3_fault_proxy: Any
) -> None:
    loader = BatchLoader(arrays, batch_size=100, seed=7, preload_chunks=3, max_prefetch_bytes=1 << 20)
    labels = _labels(loader)
    assert sorted(labels) == list(range(N)) and labels != sorted(labels)
    assert len(loader) == -(-N // 100)
    assert s3_fault_proxy.counters().methods == {"GET": NCHUNKS}


def test_zarr_v3_arrays_every_sample_once_and_one_get_per_chunk(
    bucket: str, seaweedfs: Any, s3_fault_proxy: Any
) -> None:
    arrays = _open(bucket, "train3.zarr", seaweedfs, s3_fault_proxy)
    assert {a.zarr_format for a in arrays.values()} == {3}
    loader = BatchLoader(arrays, batch_size=100, seed=7, preload_chunks=3, max_prefetch_bytes=1 << 20)
    labels = _labels(loader)
    assert sorted(labels) == list(range(N)) and labels != sorted(labels)
    assert s3_fault_proxy.counters().methods == {"GET": NCHUNKS}


def test_shards_partition_an_epoch(arrays: dict[str, azarr.AsyncArray], s3_fault_proxy: Any) -> None:
    loader = BatchLoader(arrays, batch_size=64, seed=3)
    parts = [_labels(loader.shard(3, i)) for i in range(3)]
    assert sorted(v for part in parts for v in part) == list(range(N))
    assert s3_fault_proxy.counters().methods == {"GET": NCHUNKS}
    nested = [_labels(loader.shard(2, i).shard(2, j)) for i in range(2) for j in range(2)]
    assert sorted(v for part in nested for v in part) == list(range(N))


def test_same_seed_same_order(arrays: dict[str, azarr.AsyncArray]) -> None:
    a = BatchLoader(arrays, batch_size=50, seed=11, preload_chunks=2)
    b = BatchLoader(arrays, batch_size=50, seed=11, preload_chunks=2, max_prefetch_bytes=1)
    first = _labels(a)
    assert first == _labels(b)  # prefetch depth changes timing, never the order
    a.set_epoch(1)
    assert _labels(a) != first
    assert _labels(BatchLoader(arrays, batch_size=50, seed=12, preload_chunks=2)) != first


async def test_async_for_and_drop_last(arrays: dict[str, azarr.AsyncArray]) -> None:
    loader = BatchLoader(arrays["y"], batch_size=1000, shuffle=False, drop_last=True)
    batches = [b async for b in loader]
    assert [len(b) for b in batches] == [1000] * 4 and len(loader) == 4
    np.testing.assert_array_equal(np.concatenate(batches), Y[:4000])


def test_bad_arguments(arrays: dict[str, azarr.AsyncArray]) -> None:
    with pytest.raises(ValueError, match="share the length"):
        BatchLoader({"x": arrays["x"], "z": arrays["x"]} | {"w": _short(arrays)}, batch_size=1)
    with pytest.raises(ValueError, match="shard_id"):
        BatchLoader(arrays, batch_size=1).shard(2, 2)
    with pytest.raises(ValueError, match="at least one"):
        BatchLoader({}, batch_size=1)


def _short(arrays: dict[str, azarr.AsyncArray]) -> azarr.AsyncArray:
    return asyncio.run(azarr.zeros((3,), chunks=(3,), dtype="u1", store=azarr.MemoryStore()))


def test_leaving_early_cancels_prefetch(arrays: dict[str, azarr.AsyncArray], s3_fault_proxy: Any) -> None:
    # One window (one unit: 2 chunks of x, 1 of y) held at a time.
    loader = BatchLoader(arrays, batch_size=16, seed=0, preload_chunks=1, max_prefetch_bytes=1)
    for _ in loader:
        break
    assert s3_fault_proxy.counters().methods == {"GET": 3}  # the rest of the epoch was never fetched
    assert s3_fault_proxy.counters().in_flight == 0


@pytest.mark.parametrize("shuffle", [True, False])
def test_kept_batches_keep_their_samples_with_one_window_held(
    arrays: dict[str, azarr.AsyncArray], s3_fault_proxy: Any, shuffle: bool
) -> None:
    # One window held at a time, every batch kept to the end: each must still hold
    # its own samples, so batches are copies, never views of a window's buffers
    # (which a later window could reuse), and x and y stay paired.
    loader = BatchLoader(
        arrays, batch_size=100, seed=2, shuffle=shuffle, preload_chunks=2, max_prefetch_bytes=1
    )
    kept = list(loader)
    for batch in kept:
        np.testing.assert_array_equal(batch["x"], X[batch["y"]])
    labels = [int(v) for batch in kept for v in batch["y"]]
    assert sorted(labels) == list(range(N))
    assert (labels == sorted(labels)) is not shuffle
    assert s3_fault_proxy.counters().methods == {"GET": NCHUNKS}
    # one window of 2 units = 4 chunks of x and 2 of y in flight at most
    assert s3_fault_proxy.counters().peak_in_flight <= 6


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_torch_workers(arrays: dict[str, azarr.AsyncArray], s3_fault_proxy: Any, context: str) -> None:
    # The test extra installs torch on Python 3.11 only: the CPU wheel of torch 2.13.0 on this
    # machine is built for 3.11, and on 3.12/3.13 pip would pull a multi-GB CUDA build.
    torch = pytest.importorskip("torch", reason="torch is installed by the test extra on Python 3.11 only")
    from azarr.loader import TorchIterableDataset

    dataset = TorchIterableDataset(BatchLoader(arrays, batch_size=128, seed=5))
    data = torch.utils.data.DataLoader(
        dataset, batch_size=None, num_workers=2, multiprocessing_context=context
    )
    labels: list[int] = []
    for batch in data:
        assert isinstance(batch["x"], torch.Tensor) and batch["x"].dtype == torch.float32
        np.testing.assert_array_equal(batch["x"].numpy(), X[batch["y"].numpy()])
        labels.extend(batch["y"].tolist())
    assert sorted(labels) == list(range(N))
    assert s3_fault_proxy.counters().methods == {"GET": NCHUNKS}  # workers never fetch the same chunk
