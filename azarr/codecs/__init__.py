"""Codecs: stored chunk bytes <-> chunk arrays, run in a shared thread pool.

The layer between the scheduler (which fetches bytes) and the arrays (which
assemble selections): `ChunkCodec` turns ``.zarray`` codec configs into
a decode/encode pipeline with zarr-python 2 semantics, and the codec pool runs
that CPU work off the event loop, batched by `CodecBatcher` so small
chunks share one thread hop.
"""

from __future__ import annotations

from azarr.codecs._batcher import CodecBatcher
from azarr.codecs._chain import CodecChain, v2_chain
from azarr.codecs._pipeline import ChunkCodec, decode_chunk_async, encode_chunk_async
from azarr.codecs._pool import get_codec_pool, reset_codec_pool, run_in_codec_pool, submit_to_codec_pool
from azarr.codecs._sharding import ShardingSpec

__all__ = [
    "ChunkCodec",
    "CodecBatcher",
    "CodecChain",
    "ShardingSpec",
    "v2_chain",
    "decode_chunk_async",
    "encode_chunk_async",
    "get_codec_pool",
    "reset_codec_pool",
    "run_in_codec_pool",
    "submit_to_codec_pool",
]
