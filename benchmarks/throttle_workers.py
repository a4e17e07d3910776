"""Worker of `benchmarks.bench_throttle`: readers of one array, each on its own thread and loop.

Run by the driver in each implementation's interpreter::

    python benchmarks/throttle_workers.py < task.json

The task (one JSON line on stdin) names the implementation, the S3 endpoint (the
throttling proxy), credentials, the array's prefix and how many reader threads to run.
Once its library is imported and it has opened the array once (first-use work: a
client, credentials, connections), the worker prints ``ready`` and waits for a line with the
wall-clock time (``time.time()``) to start at, so the readers of every process begin
together however long the imports took. Each
reader opens the array itself and reads it whole: azarr and zarr-python through their
async APIs on a loop of their own (``asyncio.run`` per thread), TensorStore from its
thread. The worker prints one JSON line: per reader its seconds, the MD5 of what it read
or its error, and for azarr its store counters (retries, throttled answers, the adaptive
limit), the most store calls it had in flight at once across its threads, and the
request limit sampled every 50 ms.

Only the standard library and NumPy at module level: this runs in the peers' venvs too.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cloud_workers import Azarr, TensorStore, Zarr3Obstore, digest

AZARR_IMPLS = ("azarr", "azarr-baseline")


class ObstoreReader(Zarr3Obstore):
    """zarr-python + obstore without s3fs (the peer venv here has no s3fs)."""

    imports = ("zarr", "zarr.api.asynchronous", "obstore.store")


class InFlight:
    """Store calls in flight in this process, across threads, and the most at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def wrap(self, call: Callable[..., Any]) -> Callable[..., Any]:
        async def counted(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            try:
                return await call(*args, **kwargs)
            finally:
                with self.lock:
                    self.now -= 1

        return counted


def azarr_reader(impl: Azarr, prefix: str, in_flight: InFlight) -> Callable[..., Any]:
    async def read(whole: bool) -> Any:
        import azarr

        store = impl.store(prefix)
        # Count the store's own calls (what reaches the network), whatever the budget allows.
        store.get = in_flight.wrap(store.get)
        store.get_into = in_flight.wrap(store.get_into)
        try:
            arr = await azarr.open_array(store, mode="r")
            return await arr.get_basic_selection(...) if whole else arr
        finally:
            await store.close()

    return lambda whole=True: asyncio.run(read(whole))


def zarr_reader(impl: ObstoreReader, prefix: str) -> Callable[..., Any]:
    async def read(whole: bool) -> Any:
        import zarr.api.asynchronous as za

        arr = await za.open_array(store=impl.store(prefix), mode="r", zarr_format=2)
        return await arr.getitem(...) if whole else arr

    return lambda whole=True: asyncio.run(read(whole))


def tensorstore_reader(impl: TensorStore, prefix: str) -> Callable[..., Any]:
    def read(whole: bool = True) -> Any:
        import tensorstore as ts

        arr = ts.open(impl.spec(prefix), read=True, context=ts.Context()).result()
        return arr.read().result() if whole else arr

    return read


def _versions(impl: str) -> dict[str, str]:
    names = {"zarr3-obstore": ("zarr", "obstore", "numcodecs"), "tensorstore": ("tensorstore",)}.get(
        impl, ("aiohttp", "numcodecs")
    )
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "?"
    if impl in AZARR_IMPLS:
        import azarr

        out["azarr"] = os.path.dirname(azarr.__file__)
    return out


def main() -> int:
    """Read the task from stdin, run the readers, print the report."""
    task = json.loads(sys.stdin.readline())
    impl = task["impl"]
    in_flight = InFlight()
    prefix = task["prefix"]
    # The cloud benchmark's implementations build the stores (and import their libraries).
    if impl in AZARR_IMPLS:
        azarr_impl = Azarr(task)
        make = azarr_reader(azarr_impl, prefix, in_flight)
    elif impl == "zarr3-obstore":
        make = zarr_reader(ObstoreReader(task), prefix)
    elif impl == "tensorstore":
        make = tensorstore_reader(TensorStore(task), prefix)
    else:
        raise SystemExit(f"unknown implementation {impl!r}")

    readers: list[dict[str, Any]] = [{} for _ in range(task["threads"])]

    def run(i: int) -> None:
        start = time.perf_counter()
        try:
            result = make()
            readers[i].update(ok=True, digest=digest(result))
        except BaseException as exc:  # a failed read is the measurement, not a crash
            readers[i].update(ok=False, error=f"{type(exc).__name__}: {exc}"[:1000])
        readers[i]["seconds"] = time.perf_counter() - start
        readers[i]["finished_at"] = time.time()

    limits: list[tuple[float, int, int]] = []
    done = threading.Event()

    def sample() -> None:  # azarr's adaptive limit and its budget's requests in flight
        from azarr.scheduler import budget_for

        budget = budget_for(azarr_impl.store(prefix))
        while not done.wait(0.05):
            limits.append(
                (
                    round(time.time() - task["start_at"], 3),
                    int(getattr(budget, "limit", budget.max_requests)),
                    int(getattr(budget, "requests_in_flight", -1)),
                )
            )

    threads = [threading.Thread(target=run, args=(i,)) for i in range(task["threads"])]
    make(whole=False)  # open once: first-use work is not part of the run
    in_flight.peak = 0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    task["start_at"] = float(sys.stdin.readline())
    time.sleep(max(0.0, task["start_at"] - time.time()))
    sampler = threading.Thread(target=sample) if impl in AZARR_IMPLS else None
    if sampler is not None:
        sampler.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    done.set()
    if sampler is not None:
        sampler.join()
    report: dict[str, Any] = {"impl": impl, "versions": _versions(impl), "readers": readers}
    if impl in AZARR_IMPLS:
        from azarr.scheduler import budget_for, stats_for

        store = azarr_impl.store(prefix)
        stats = stats_for(store).as_dict()
        stats.pop("latency_histogram", None)
        report["stats"] = stats
        report["peak_store_calls"] = in_flight.peak
        budget = budget_for(store)
        report["max_requests"] = budget.max_requests
        adaptive = getattr(budget, "_adaptive", None)
        report["decreases"] = getattr(adaptive, "decreases", None)
        report["latency_decreases"] = getattr(adaptive, "latency_decreases", None)
        report["limits"] = limits
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
