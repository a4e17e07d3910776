"""Workers of benchmarks/bench_loader.py: one training-loader implementation per process.

Run by any peer interpreter as ``python benchmarks/loader_workers.py '<task json>'``;
prints one JSON line: samples delivered, seconds from the start of iteration
(the array opened; DataLoader worker start-up included, as an epoch pays it) to the
last batch, samples/s. Imports only the standard library at module level (peers lack
azarr, azarr's venv lacks the peers).

Every implementation reads the same float32 array ``x`` of ``nsamples`` samples
(rows of ``features`` values, 4 KiB) in chunks of ``chunk_rows`` rows, shuffled,
``batch_size`` samples per batch, and stops at the end of the epoch or after
``seconds`` (slow peers would take hours for a whole epoch).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

TASK: dict[str, Any] = {}


def _s3fs_options(task: dict[str, Any]) -> dict[str, Any]:
    return {
        "endpoint_url": task["endpoint"],
        "key": task["key"],
        "secret": task["secret"],
        "skip_instance_cache": True,
    }


class _Clock:
    """Samples and seconds from the start of iteration (the array already open) to the last batch."""

    def __init__(self, cap: float) -> None:
        self.cap, self.samples, self.batches = cap, 0, 0
        self.first = self.last = self.first_batch = time.perf_counter()
        self.first_samples = 0

    def add(self, n: int) -> bool:
        self.last = time.perf_counter()
        if not self.batches:
            self.first_batch, self.first_samples = self.last, n
        self.samples += n
        self.batches += 1
        return self.last - self.first < self.cap

    def result(self) -> dict[str, Any]:
        seconds = self.last - self.first
        return {
            "samples": self.samples,
            "batches": self.batches,
            "seconds": seconds,
            "samples_per_s": self.samples / seconds if seconds > 0 else 0.0,
            "first_batch_s": self.first_batch - self.first,
            # After the first batch: what start-up (imports, opens, first fetch) does not weigh on.
            "steady_samples_per_s": (self.samples - self.first_samples) / (self.last - self.first_batch)
            if self.last > self.first_batch
            else None,
        }


# ---------------------------------------------------------------------- the ceiling
def run_raw(task: dict[str, Any]) -> dict[str, Any]:
    """Anonymous aiohttp GETs of every chunk object, 64 at a time: the bytes' ceiling (second pass timed)."""
    import aiohttp

    nchunks = -(-task["nsamples"] // task["chunk_rows"])
    keys = [f"{task['prefix']}/x/{i}.0" for i in range(nchunks)]

    async def main() -> tuple[int, float]:
        sem = asyncio.Semaphore(64)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as session:

            async def get(key: str) -> int:
                async with sem, session.get(f"{task['endpoint']}/{task['bucket']}/{key}") as r:
                    body = await r.read()
                    assert r.status == 200, (key, r.status)
                    return len(body)

            t0 = time.perf_counter()
            sizes = await asyncio.gather(*(get(k) for k in keys))
            return sum(sizes), time.perf_counter() - t0

    asyncio.run(main())  # untimed pass: runs first, and would otherwise pay the server's cold caches
    nbytes, seconds = asyncio.run(main())
    return {
        "samples": task["nsamples"],
        "seconds": seconds,
        "samples_per_s": task["nsamples"] / seconds,
        "bytes": nbytes,
    }


# ---------------------------------------------------------------------- azarr
async def _azarr_open(task: dict[str, Any]) -> Any:
    import azarr
    from azarr.storage import S3Store

    options = {"endpoint_url": task["endpoint"], "key": task["key"], "secret": task["secret"]}
    store = S3Store(f"{task['bucket']}/{task['prefix']}", storage_options=options)
    return await azarr.open_array(store, mode="r", path="x")


def _azarr_array(task: dict[str, Any]) -> Any:
    return asyncio.run(_azarr_open(task))


def _prefetch(task: dict[str, Any]) -> dict[str, Any]:
    """``max_prefetch_bytes`` when the run sets one (``--prefetch-mib``), else the loader's default."""
    mib = task.get("prefetch_mib")
    return {"max_prefetch_bytes": int(mib) * 2**20} if mib else {}


async def _azarr_epoch(task: dict[str, Any], number: int, cap: float) -> dict[str, Any]:
    """One epoch (``set_epoch(number)``) of ``BatchLoader`` on a new store, for at most ``cap``
    seconds; its `_Clock` result and the store requests it made."""
    from azarr.loader import BatchLoader
    from azarr.scheduler import stats_for

    arr = await _azarr_open(task)
    stats = stats_for(arr.store)
    before = stats.requests
    loader = BatchLoader(
        arr,
        batch_size=task["batch_size"],
        seed=task["seed"],
        preload_chunks=task["preload_chunks"],
        **_prefetch(task),
    )
    loader.set_epoch(number)
    clock = _Clock(cap)
    async for batch in loader:
        if not clock.add(len(batch)):
            break
    result = clock.result()
    result["requests"] = stats.requests - before
    await arr.store.close()
    return result


def run_azarr(task: dict[str, Any]) -> dict[str, Any]:
    """``async for`` over ``azarr.loader.BatchLoader`` on one event loop.

    As in bench_cloud, one untimed read first (its own store) so that first-use work
    (codec threads, lazily built state) is not timed; the timed epoch then uses a new
    store with new connections, opened on the loop that iterates. Then a second epoch
    (``set_epoch(1)``), again on a new store with new connections: the first epoch of
    a fresh process pays for first-touched memory and first-use code paths that the
    raw ceiling's timed pass (its second) does not; the second epoch is the like-for-like
    figure, and what every epoch after the first of a training run sees.
    """

    async def main() -> dict[str, Any]:
        warm = await _azarr_open(task)
        await warm.get_basic_selection(slice(0, task["chunk_rows"]))
        first = await _azarr_epoch(task, 0, task["seconds"])
        second = await _azarr_epoch(task, 1, task["seconds"])
        return dict(first, second_epoch=second)

    return asyncio.run(main())


def run_azarr_cache(task: dict[str, Any]) -> dict[str, Any]:
    """`run_azarr` with the process's decoded-chunk cache sized to the dataset
    (``chunk_cache_recheck=False``: training data does not change under the run), three
    epochs, each on a new store of the same URL (one store spec, so one cache): the
    first fetches every chunk, the later ones should make no request. Reports each
    epoch's samples/s and store requests."""
    import azarr

    async def main() -> dict[str, Any]:
        warm = await _azarr_open(task)
        await warm.get_basic_selection(slice(0, task["chunk_rows"]))
        with azarr.config.set(chunk_cache_bytes=warm.nbytes + 2**20, chunk_cache_recheck=False):
            # Whole epochs: the cache must hold all of the first.
            epochs = [await _azarr_epoch(task, number, float("inf")) for number in range(3)]
        return dict(epochs[0], epochs=epochs)

    return asyncio.run(main())


def run_azarr_torch(task: dict[str, Any]) -> dict[str, Any]:
    """``TorchIterableDataset`` in ``DataLoader(num_workers=2, batch_size=None)``."""
    import torch

    from azarr.loader import BatchLoader, TorchIterableDataset

    arr = _azarr_array(task)
    loader = BatchLoader(
        arr,
        batch_size=task["batch_size"],
        seed=task["seed"],
        preload_chunks=task["preload_chunks"],
        **_prefetch(task),
    )
    data = torch.utils.data.DataLoader(TorchIterableDataset(loader), batch_size=None, num_workers=2)
    clock = _Clock(task["seconds"])
    for batch in data:
        if not clock.add(len(batch)):
            break
    return clock.result()


# ---------------------------------------------------------------------- map-style peers
class _MapStyle:
    """``dataset[i]`` = sample ``i``, the array opened lazily in each DataLoader worker (fork-safe)."""

    def __init__(self, task: dict[str, Any], opener: str) -> None:
        self.task, self.opener, self.array = task, opener, None

    def __len__(self) -> int:
        return int(self.task["nsamples"])

    def __getitem__(self, i: int) -> Any:
        if self.array is None:
            self.array = OPENERS[self.opener](self.task)
        return self.array[i]


def _open_zarr218(task: dict[str, Any]) -> Any:
    import zarr

    store = zarr.storage.FSStore(f"s3://{task['bucket']}/{task['prefix']}", **_s3fs_options(task))
    return zarr.open_array(store, mode="r", path="x")


def _open_zarr3(task: dict[str, Any]) -> Any:
    import zarr
    from zarr.storage import ObjectStore

    from benchmarks.obstore_s3 import obstore_s3

    inner = obstore_s3(task["bucket"], task["prefix"], task["endpoint"], task["key"], task["secret"])
    return zarr.open_array(ObjectStore(inner, read_only=True), mode="r", path="x")


OPENERS = {"zarr218": _open_zarr218, "zarr3": _open_zarr3}


def _torch_map(task: dict[str, Any], opener: str) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(task["seed"])
    data = torch.utils.data.DataLoader(
        _MapStyle(task, opener),
        batch_size=task["batch_size"],
        shuffle=True,
        num_workers=2,
        generator=generator,
    )
    clock = _Clock(task["seconds"])
    for batch in data:
        if not clock.add(len(batch)):
            break
    return clock.result()


def run_zarr218(task: dict[str, Any]) -> dict[str, Any]:
    """torch ``DataLoader(num_workers=2, shuffle=True)`` over ``z[i]``, zarr 2.18 ``FSStore`` + s3fs."""
    return _torch_map(task, "zarr218")


def run_zarr3(task: dict[str, Any]) -> dict[str, Any]:
    """torch ``DataLoader(num_workers=2, shuffle=True)`` over ``z[i]``, zarr 3.1 ``ObjectStore`` + obstore."""
    return _torch_map(task, "zarr3")


class _XBatches:
    """xbatcher batches of ``batch_size`` samples, by index (opened lazily per worker)."""

    def __init__(self, task: dict[str, Any]) -> None:
        self.task, self.gen = task, None

    def __len__(self) -> int:
        return int(self.task["nsamples"]) // int(self.task["batch_size"])

    def __getitem__(self, k: int) -> Any:
        if self.gen is None:
            import s3fs
            import xarray as xr
            import xbatcher

            fs = s3fs.S3FileSystem(**_s3fs_options(self.task))
            ds = xr.open_zarr(
                fs.get_mapper(f"{self.task['bucket']}/{self.task['prefix']}"), consolidated=True
            )
            dims = {"sample": self.task["batch_size"], "feature": self.task["features"]}
            self.gen = xbatcher.BatchGenerator(ds["x"], input_dims=dims)
        return self.gen[k].values


def run_xbatcher(task: dict[str, Any]) -> dict[str, Any]:
    """xbatcher ``BatchGenerator`` over ``xarray.open_zarr`` (zarr 2.18 + s3fs), batches in shuffled
    order through ``DataLoader(num_workers=2, batch_size=None)`` (xbatcher shuffles batches, not samples)."""
    import torch

    generator = torch.Generator().manual_seed(task["seed"])
    data = torch.utils.data.DataLoader(
        _XBatches(task), batch_size=None, shuffle=True, num_workers=2, generator=generator
    )
    clock = _Clock(task["seconds"])
    for batch in data:
        if not clock.add(len(batch)):
            break
    return clock.result()


# ---------------------------------------------------------------------- batch peers
ZARR34_PIPELINES = {
    "zarr34": None,
    "zarr34-fused": "zarr.core.codec_pipeline.FusedCodecPipeline",
    "zarr34-zarrs": "zarrs.ZarrsCodecPipeline",
}


def _batches(task: dict[str, Any], read: Any) -> dict[str, Any]:
    """Shuffled batches without a DataLoader: each batch's sample indices (a seeded
    permutation, sorted within the batch) read by one orthogonal selection, ``read(indices)``,
    which the library fetches concurrently -- what a user of a synchronous library without
    torch writes."""
    import numpy as np

    order = np.random.default_rng(task["seed"]).permutation(int(task["nsamples"]))
    batch = int(task["batch_size"])
    clock = _Clock(task["seconds"])
    for start in range(0, len(order), batch):
        indices = np.sort(order[start : start + batch])
        if not clock.add(len(read(indices))):
            break
    return clock.result()


def _run_zarr34(task: dict[str, Any]) -> dict[str, Any]:
    """zarr-python 3.4 ``ObjectStore`` + obstore, one ``get_orthogonal_selection`` per shuffled batch,
    with its default pipeline, ``FusedCodecPipeline`` or zarrs (``task['impl']``)."""
    import zarr

    pipeline = ZARR34_PIPELINES[task["impl"]]
    if pipeline:
        zarr.config.set({"codec_pipeline.path": pipeline})
    array = _open_zarr3(task)
    return _batches(task, lambda idx: array.get_orthogonal_selection((idx, slice(None))))


def run_tensorstore(task: dict[str, Any]) -> dict[str, Any]:
    """TensorStore's ``zarr`` driver on its ``s3`` kvstore, ``arr.oindex[indices].read()`` per shuffled batch."""
    import tensorstore as ts

    os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"] = task["key"], task["secret"]
    spec = {
        "driver": "zarr",
        "kvstore": {
            "driver": "s3",
            "bucket": task["bucket"],
            "path": f"{task['prefix']}/x/",
            "endpoint": task["endpoint"],
            "aws_region": "us-east-1",
            "aws_credentials": {"type": "environment"},
        },
    }
    array = ts.open(spec, read=True, context=ts.Context()).result()
    return _batches(task, lambda idx: array.oindex[idx].read().result())


IMPLS = {
    "raw": run_raw,
    "azarr": run_azarr,
    "azarr-baseline": run_azarr,  # importing an older azarr (bench_loader.BASELINE)
    "azarr-torch": run_azarr_torch,
    "zarr218": run_zarr218,
    "zarr3": run_zarr3,
    "xbatcher": run_xbatcher,
    **dict.fromkeys(ZARR34_PIPELINES, _run_zarr34),
    "tensorstore": run_tensorstore,
    "azarr-cache": run_azarr_cache,
}


def main() -> None:
    task = json.loads(sys.argv[1])
    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    result = IMPLS[task["impl"]](task)
    result["impl"] = task["impl"]
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
