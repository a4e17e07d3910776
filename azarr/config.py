"""Process-wide azarr settings.

One place for the defaults that are shared resources rather than per-call
arguments (the TensorStore "context resource" idea): the codec thread pool
size, how many chunk requests a store may have in flight, and whether
pickle-based codecs may run.

Examples
--------
>>> import azarr
>>> azarr.config.get("codec_threads") >= 1
True
>>> with azarr.config.set(max_concurrency=8):
...     pass
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

_DEFAULTS: dict[str, Any] = {
    # Threads decoding/encoding chunks (numcodecs releases the GIL in blosc/zstd/zlib).
    "codec_threads": os.cpu_count() or 1,
    # Threads that run the chunk jobs of a local store once they wait on the disk more than
    # they decode (opening and reading files cold from the disk; TensorStore's
    # ``file_io_concurrency``), within the store's request budget (max_concurrency_local).
    "file_io_threads": max(8, (os.cpu_count() or 1) * 2),
    # Chunk requests in flight per store for remote stores (S3, GCS, HTTP).
    "max_concurrency": 64,
    # Chunk requests in flight per store for local and memory stores (cores x 4).
    "max_concurrency_local": (os.cpu_count() or 1) * 4,
    # Remote stores: the request limit adapts between min_concurrency and
    # max_concurrency, dropping when the server throttles (503 SlowDown, 429) and
    # climbing back on success (AIMD, azarr/scheduler/_adaptive.py). False: fixed.
    "adaptive_concurrency": True,
    "min_concurrency": 1,
    # Adaptive limits also drop (gently) when recent latency exceeds this many times
    # its long-run average; None: only throttling and timeouts lower them.
    "adaptive_latency_tolerance": 2.0,
    # Bytes of chunk payloads in flight per store (reads hold them until decoded).
    "max_bytes_in_flight": 256 * 2**20,
    # Bytes of chunks (decoded size) queued for or being decoded/encoded in the codec
    # pool, across every call on an event loop.
    "codec_queue_bytes": 256 * 2**20,
    # Idle capacity (bytes) kept, once no read runs, of the reused buffers that chunk
    # bodies from remote stores are read into (azarr/pipeline/_buffers.py); 0: a new
    # bytes object per body.
    "buffer_pool_bytes": 128 * 2**20,
    # Whether a read's result and the receive buffers (from 4 MiB) keep NumPy's request
    # for transparent huge pages; off, they fault in 4 KiB pages (azarr/pipeline/_pages.py).
    "huge_pages": False,
    # Seconds the pooled S3 connections of a closed store stay open for the next
    # store with the same settings (storage/_aiohttp.py SharedSessions); 0: close at once.
    "connection_linger": 15.0,
    # Seconds one store request may take (connect + transfer) before it is
    # abandoned as stalled and retried. None disables it.
    "request_timeout": 60.0,
    # Retry policy for transient store errors (throttling, 5xx, resets, timeouts):
    # attempts in total, first and largest backoff (seconds, full jitter), and a
    # deadline (seconds) across all attempts of one request (None: no deadline).
    "retry_max_attempts": 6,
    "retry_initial_delay": 0.05,
    "retry_max_delay": 5.0,
    "retry_deadline": 300.0,
    # Chunks larger than this (bytes) on remote stores are fetched as parallel
    # byte ranges of ``large_chunk_part_size`` bytes.
    "large_chunk_threshold": 32 * 2**20,
    "large_chunk_part_size": 8 * 2**20,
    # Hedged reads: after the observed p95 latency, send a backup GET and take
    # the first answer (off by default: it costs extra requests).
    "hedged_reads": False,
    # Let pickle-based codecs decode data. Off: unpickling untrusted data runs code.
    "allow_pickle": False,
    # Store chunks that equal fill_value (zarr-python 2 default: True).
    "write_empty_chunks": True,
    # Hardening limits (docs/security.md). Largest metadata document (.zarray,
    # .zgroup, .zattrs, .zmetadata) parsed, in bytes: real consolidated metadata
    # of a few thousand arrays is a few MB.
    "max_metadata_bytes": 64 * 2**20,
    # Largest decoded chunk (chunk shape x itemsize) an array may have, checked
    # when it is opened or created; also the cap on intermediate codec output
    # whose size the chunk shape does not fix (object codecs).
    "max_chunk_bytes": 2 * 2**30,
    # Largest element (dtype itemsize, bytes) an array may have, checked when it is
    # opened or created: reading one element allocates one element (a "|V2147483647"
    # dtype would make a one-element read allocate 2 GiB before any chunk is seen).
    "max_itemsize": 16 * 2**20,
    # Compressor of new arrays created with compressor="default" (zarr-python 2's
    # ``zarr.storage.default_compressor``): a numcodecs codec, its config dict, or
    # None for no compression. "blosc-lz4" is Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE).
    "default_compressor": "blosc-lz4",
    # Optimistic read-modify-writes (partial chunks, attributes, resize/append):
    # attempts before a write that keeps losing to other writers gives up.
    "conditional_write_attempts": 64,
    # Refuse writes that could lose another writer's update (partial chunks,
    # attributes, resize/append, mode="w-") on stores without conditional writes.
    "require_consistency": False,
    # Range coalescing (azarr/scheduler/_coalesce.py): byte ranges of one object (kerchunk
    # references into one file) closer than this many bytes are read with one request,
    # up to ``coalesce_max_bytes`` per request; a negative gap coalesces nothing.
    "coalesce_max_gap": 1 * 2**20,
    "coalesce_max_bytes": 16 * 2**20,
    # Zarr v3 sharding: bytes of decoded shard indexes kept (LRU, per store spec, key and
    # generation; 0 keeps none), so a read of inner chunks of a shard read before costs
    # only its data requests.
    "shard_index_cache_bytes": 64 * 2**20,
    # Reference stores (kerchunk/VirtualiZarr): most references a JSON set may hold or
    # generate, largest JSON reference file read (bytes), Parquet record files kept.
    "reference_max_refs": 10_000_000,
    "reference_max_bytes": 512 * 2**20,
    "reference_parquet_cache": 128,
    # Which targets references may name: None = the reference file's own scheme (and
    # remote_protocol); else a list of schemes ("s3") and URL prefixes ("https://host/data/").
    "reference_allowed_targets": None,
    # Zarr format of nodes created without zarr_format= (2 or 3). Opening finds the
    # format of what exists, whatever this says.
    "zarr_format": 2,
    # Seconds after which a LocalStore temporary file no writer holds counts as
    # abandoned by a killed writer, and is removed (azarr/storage/_sweep.py).
    "local_temp_max_age": 600.0,
    # Concurrent reads of one chunk (same store spec and key) share one fetch and one
    # decode, from any array, task, thread or loop (azarr/scheduler/_shared.py).
    "collapse_reads": True,
    # Bytes of decoded chunks the process's chunk cache keeps (0: no cache, the default),
    # and when a cached chunk is checked against the store before use: True (always),
    # False (never), "open" (if cached before the array was opened) or seconds of trust.
    "chunk_cache_bytes": 0,
    "chunk_cache_recheck": True,
}

# Settings that must be integers >= 1.
_COUNTS = frozenset(
    {
        "codec_threads",
        "file_io_threads",
        "max_concurrency",
        "max_concurrency_local",
        "min_concurrency",
        "max_bytes_in_flight",
        "codec_queue_bytes",
        "retry_max_attempts",
        "large_chunk_threshold",
        "large_chunk_part_size",
        "max_metadata_bytes",
        "max_chunk_bytes",
        "max_itemsize",
        "conditional_write_attempts",
        "coalesce_max_bytes",
        "reference_max_refs",
        "reference_max_bytes",
        "reference_parquet_cache",
    }
)

_lock = threading.Lock()
_values: dict[str, Any] = dict(_DEFAULTS)
# Callbacks run after a setting changes (the codec pool resizes itself this way), so this
# module imports nothing of azarr's: every other package may read settings at import.
_hooks: dict[str, list[Callable[[], None]]] = {}


def on_change(name: str, callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever setting ``name`` changes (``set``, its restore, ``reset``).

    Raises
    ------
    KeyError
        ``name`` is not an azarr setting.
    """
    get(name)
    _hooks.setdefault(name, []).append(callback)


def _changed(names: Iterable[str]) -> None:
    for name in names:
        for callback in _hooks.get(name, ()):
            callback()


def get(name: str) -> Any:
    """Return the current value of setting ``name``.

    Raises
    ------
    KeyError
        ``name`` is not an azarr setting; the message lists the valid names.
    """
    try:
        return _values[name]
    except KeyError:
        raise KeyError(f"unknown azarr setting {name!r}; valid: {sorted(_DEFAULTS)}") from None


@contextmanager
def _restore(previous: dict[str, Any]) -> Iterator[None]:
    try:
        yield
    finally:
        with _lock:
            _values.update(previous)
        _changed(previous)


def set(**settings: Any) -> Any:
    """Change settings process-wide; usable as a context manager to restore them.

    Parameters
    ----------
    **settings
        ``codec_threads`` (int >= 1), ``file_io_threads`` (int >= 1: threads for the
        chunk jobs of local stores while they wait on the disk more than they decode;
        default max(8, 2 x cores)), ``max_concurrency`` / ``max_concurrency_local``
        (int >= 1, requests in flight per store and process), ``adaptive_concurrency``
        (bool, default True: a remote store's request limit drops when the server
        throttles and climbs back on success, between ``min_concurrency`` (int >= 1,
        default 1) and ``max_concurrency``), ``adaptive_latency_tolerance`` (float > 1
        or None, default 2: the adaptive limit also drops when recent latency exceeds
        this many times its long-run average), ``max_bytes_in_flight`` (bytes),
        ``codec_queue_bytes`` (bytes queued for the codec pool across all calls),
        ``buffer_pool_bytes`` (bytes of idle receive buffers kept for chunk bodies
        from remote stores once no read runs, each buffer counted by the longest body it
        held; default 128 MiB; 0 reads every body into a new ``bytes``),
        ``huge_pages`` (bool, default False: a read's result and the receive buffers,
        from 4 MiB, are allocated without NumPy's transparent huge-page advice, whose
        faults can stall to compact memory; True keeps it),
        ``connection_linger`` (seconds an S3 connection pool stays open after its last
        store closed, for the next store with the same settings; default 15, 0: at once),
        ``request_timeout`` (seconds or None), ``retry_max_attempts``,
        ``retry_initial_delay`` / ``retry_max_delay`` / ``retry_deadline`` (seconds),
        ``large_chunk_threshold`` / ``large_chunk_part_size`` (bytes),
        ``hedged_reads`` (bool), ``allow_pickle`` (bool), ``write_empty_chunks`` (bool),
        ``max_metadata_bytes`` (bytes, default 64 MiB: largest metadata document parsed),
        ``max_chunk_bytes`` (bytes, default 2 GiB: largest decoded chunk; checked when an
        array is opened, and the cap on every decode step; also the bound of a response
        body whose size is not otherwise known; see ``docs/security.md``),
        ``max_itemsize`` (bytes, default 16 MiB: largest dtype element, checked when an
        array is opened or created).
        ``default_compressor`` (numcodecs codec, config dict, None, or ``"blosc-lz4"``).
        ``conditional_write_attempts`` (int >= 1, tries of one read-modify-write),
        ``require_consistency`` (bool: refuse read-modify-writes on stores without
        conditional writes, see ``docs/consistency.md``).
        ``coalesce_max_gap`` / ``coalesce_max_bytes`` (bytes: ranges of one object closer
        than the gap are read with one request of at most the size; default 1 MiB / 16 MiB),
        ``shard_index_cache_bytes`` (bytes, default 64 MiB: decoded shard indexes kept, per
        store spec, key and generation; 0 keeps none),
        ``reference_max_refs`` (int, default 10,000,000: most references one JSON reference
        set holds or generates, or one Icechunk array lists), ``reference_max_bytes`` (bytes,
        default 512 MiB: largest JSON reference file), ``reference_parquet_cache`` (Parquet
        record files kept, default 128), ``reference_allowed_targets`` (None: the reference
        file's or Icechunk repository's own scheme; or a list of schemes and URL prefixes
        references and virtual chunks may name).
        ``zarr_format`` (2 or 3: the format of new arrays and groups created without
        ``zarr_format=``; default 2),
        ``local_temp_max_age`` (seconds, default 600: a `LocalStore` temporary file
        older than this that no live writer holds is removed by the next write into its
        directory or a listing passing it).
        ``collapse_reads`` (bool, default True: concurrent reads of one chunk share one
        fetch and decode), ``chunk_cache_bytes`` (bytes of decoded chunks the process's
        `azarr.scheduler.ChunkCache` keeps; default 0, no cache) and
        ``chunk_cache_recheck`` (its ``recheck_cached_data``: True, False, ``"open"`` or
        seconds; default True).
        Budgets are fixed when a store is first used; change a live store's with
        `azarr.scheduler.set_budget`.

    Raises
    ------
    KeyError
        Unknown setting name.
    ValueError
        A count below 1.
    """
    for name, value in settings.items():
        get(name)
        if name in _COUNTS and int(value) < 1:
            raise ValueError(f"azarr setting {name!r} must be >= 1, got {value!r}")
        if name == "zarr_format" and value not in (2, 3):
            raise ValueError(f"azarr setting 'zarr_format' must be 2 or 3, got {value!r}")
        nonnegative = (
            "buffer_pool_bytes",
            "shard_index_cache_bytes",
            "chunk_cache_bytes",
            "local_temp_max_age",
        )
        if name in nonnegative and float(value) < 0:
            raise ValueError(f"azarr setting {name!r} must be >= 0, got {value!r}")
        if name == "adaptive_latency_tolerance" and value is not None and float(value) <= 1:
            raise ValueError(f"azarr setting {name!r} must be > 1 or None, got {value!r}")
    with _lock:
        previous = {k: _values[k] for k in settings}
        _values.update(settings)
    _changed(settings)
    return _restore(previous)


def reset() -> None:
    """Restore every setting to its default."""
    with _lock:
        _values.clear()
        _values.update(_DEFAULTS)
    _changed(_hooks)
