"""dask integration: ``from_azarr`` and ``to_azarr`` (extra ``azarr[dask]``).

    import azarr.dask
    x = azarr.dask.from_azarr("s3://bucket/era5.zarr", path="t2m")   # chunks = Zarr chunks
    azarr.dask.to_azarr(x.mean(axis=0, keepdims=True), "s3://bucket/out.zarr", path="mean")

Task throughput
---------------
A task reading one small block mostly waits for a request round trip. On a
dask.distributed worker, ``from_azarr`` tasks whose block is at most 8 MiB leave the
worker's thread pool while they wait (``distributed.secede``/``rejoin``; at most 16 per
worker process), so requests in flight follow azarr's store budget rather than
``threads_per_worker`` (``secede=False`` turns it off). ``chunks="auto"`` picks whole
multiples of the Zarr chunks; a block spanning several Zarr chunks is fetched in one call.

Budgets per process
-------------------
azarr's request budget (``max_concurrency`` requests and ``max_bytes_in_flight``
bytes in flight per store, `azarr.scheduler.set_budget`) is process-wide, across
threads and event loops, so 16 threads of the threaded scheduler share one budget, they
do not multiply it by 16; they also call through the same I/O loop thread
(`azarr.sync`), so they share one connection pool per store. Against a server that
throttles, each process's limit adapts on its own (``adaptive_concurrency``).

On dask.distributed each worker *process* has its own I/O loop and its own budget,
because the graph pickles arrays as configuration and each worker opens the store
afresh. The cluster-wide limit is therefore ``n_workers x max_concurrency`` requests
(threads per worker do not change it). To size it:

* the object store's request-rate limit (S3: about 5,500 GET/s per prefix) caps
  ``n_workers x max_concurrency / latency``; lower ``max_concurrency`` per worker with
  ``azarr.config.set(max_concurrency=...)`` in a worker plugin or ``client.run`` when
  many workers share one prefix;
* memory: up to ``max_bytes_in_flight`` of undecoded chunks per worker, on top of
  dask's own blocks;
* a worker's network link is the usual bottleneck well before 64 requests of
  multi-MiB chunks, so fewer workers with more threads each use the budget best.
"""

from azarr.dask._array import from_azarr, to_azarr

__all__ = ["from_azarr", "to_azarr"]
