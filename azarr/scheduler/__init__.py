"""Scheduling of chunk I/O: one budget per store, retries, timeouts, fan-out, progress and stats.

``StoreIO`` is the path every chunk request takes; ``bounded_map`` fans a
selection's chunks out over a fixed number of workers; ``IOBudget`` (one per
store, via ``budget_for``) caps requests and bytes in flight across every call
on that store.
"""

from azarr.scheduler._budget import IOBudget, budget_for, set_budget
from azarr.scheduler._coalesce import RangeRun, coalesce_ranges
from azarr.scheduler._fanout import bounded_map
from azarr.scheduler._io import StoreIO
from azarr.scheduler._progress import Progress, ProgressCallback, ProgressTracker, tqdm_progress
from azarr.scheduler._retry import RetryPolicy, is_retryable, retry_call
from azarr.scheduler._shared import ChunkCache, default_chunk_cache
from azarr.scheduler._stats import LATENCY_BUCKETS, StoreStats, stats_for

__all__ = [
    "LATENCY_BUCKETS",
    "ChunkCache",
    "IOBudget",
    "Progress",
    "ProgressCallback",
    "ProgressTracker",
    "RangeRun",
    "RetryPolicy",
    "StoreIO",
    "StoreStats",
    "bounded_map",
    "budget_for",
    "coalesce_ranges",
    "default_chunk_cache",
    "is_retryable",
    "retry_call",
    "set_budget",
    "stats_for",
    "tqdm_progress",
]
