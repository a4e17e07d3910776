"""The chunk pipeline (azarr.pipeline): the array's one hand-off to its chunks."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
from util import AsyncPathMemoryStore, RecordingStore

import azarr
from azarr.codecs._batcher import _loop_queue
from azarr.indexing import BasicIndexer
from azarr.pipeline import ChunkPipeline
from azarr.scheduler import StoreIO
from azarr.storage import MemoryStore


async def test_pipeline_reads_and_writes_projections_directly() -> None:
    store = MemoryStore()
    arr = await azarr.zeros((10, 10), chunks=(4, 4), dtype="i2", store=store)
    pipeline = ChunkPipeline(
        StoreIO(store), arr._codec, arr._chunk_key, arr.fill_value, write_empty_chunks=True
    )
    indexer = BasicIndexer((slice(2, 9), slice(1, 3)), arr.shape, arr.chunks)
    values = np.arange(14, dtype="i2").reshape(7, 2)
    await pipeline.write(indexer, indexer.nchunks, values)
    out = np.empty((7, 2), dtype="i2")
    await pipeline.read(BasicIndexer((slice(2, 9), slice(1, 3)), arr.shape, arr.chunks), indexer.nchunks, out)
    np.testing.assert_array_equal(out, values)
    expected = np.zeros((10, 10), dtype="i2")
    expected[2:9, 1:3] = values
    np.testing.assert_array_equal(await arr.get_basic_selection(), expected)


async def test_codec_queue_is_bounded_across_concurrent_reads() -> None:
    """Eight concurrent reads share one limit on bytes queued for the codec pool, not one each."""
    chunk_bytes = 16 * 1024  # 2048 float64
    limit = 4 * chunk_bytes
    arrays = []
    for _ in range(8):
        arr = await azarr.array(
            np.ones((64, 2048)), chunks=(1, 2048), compressor=None, store=AsyncPathMemoryStore()
        )
        decode = arr._pipeline._decode_into

        def slow_decode(*args: Any, decode: Any = decode) -> None:
            time.sleep(0.0005)  # in the codec thread: decoding is the bottleneck
            decode(*args)

        arr._pipeline._decode_into = slow_decode  # type: ignore[method-assign]
        arrays.append(arr)
    peak = 0
    done = False

    async def watch() -> None:
        nonlocal peak
        queue = _loop_queue()
        while not done:
            peak = max(peak, queue.outstanding_bytes)
            await asyncio.sleep(0)

    with azarr.config.set(codec_queue_bytes=limit):
        watcher = asyncio.ensure_future(watch())
        results = await asyncio.gather(*(a.get_basic_selection() for a in arrays))
        done = True
        await watcher
    assert all(np.array_equal(r, np.ones((64, 2048))) for r in results)
    # Each caller may always queue one chunk (progress), beyond that the shared limit holds.
    assert limit <= peak <= limit + len(arrays) * chunk_bytes, peak
    assert _loop_queue().outstanding_bytes == 0


async def test_large_chunk_threshold_set_after_opening_applies() -> None:
    """The fetch strategy is chosen per call: config changed after an open still applies."""
    data = np.arange(64 * 1024, dtype="f8")  # one 512 KiB chunk
    inner = MemoryStore()
    await azarr.array(data, chunks=data.shape, compressor=None, store=inner)
    recording = RecordingStore(inner)
    recording.is_local = False  # read as a remote store would be
    arr = await azarr.open_array(recording, mode="r")
    recording.reset()
    with azarr.config.set(large_chunk_threshold=100_000, large_chunk_part_size=64 * 1024):
        np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    assert recording.gets["0"] == 8  # split into 64 KiB ranges although opened before the change
