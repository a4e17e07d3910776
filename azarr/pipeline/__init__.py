"""The chunk pipeline: the one hand-off between an array and its chunks.

``AsyncArray`` turns a selection into chunk projections and hands them to a
`ChunkPipeline`, which fetches, decodes and scatters (reads) or gathers,
merges, encodes and stores (writes) every chunk, through the store's managed
path and the codec pool. See `azarr.pipeline._chunks`.
"""

from azarr.pipeline._chunks import ChunkPipeline

__all__ = ["ChunkPipeline"]
