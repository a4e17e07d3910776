"""Workers for `benchmarks.bench_cloud`: one implementation, a list of timed operations, JSON out.

Each implementation runs in its own interpreter (azarr and the raw aiohttp
client in azarr's venv, the peers in theirs: `benchmarks.peers`)::

    python benchmarks/cloud_workers.py < task.json > result.json

The task (JSON on stdin) names the implementation, the S3 endpoint (the delay
proxy), credentials, the proxy's admin port and a list of operations; the worker
prints one JSON line ``{"impl", "versions", "ops": [...]}``. Every operation
records its wall time (``seconds``), the worker's CPU time meanwhile
(``cpu_seconds``: ``time.process_time()``, every thread of the worker process,
native threads included; not the server's or the proxy's), the kernel's share of
it (``sys_seconds``: ``os.times().system``; page faults of a new output array are
charged there) and the HTTP requests
the proxy saw while it ran (the worker resets and reads the proxy's counters
around it; nothing else talks to the proxy meanwhile).

Operations (``op`` field):

``read``
    Cold full read of an array: a new store/client/context, open, ``arr[...]``.
    Returns an MD5 of the result's bytes so the driver can check that every
    implementation read the same data (``raw`` returns the bytes it moved instead).
``write``
    Generate the benchmark data (not timed), then create the array at a fresh
    prefix and write it whole.
``small``
    Open the array once, warm up with the first ``concurrency`` requests, then
    issue every request in ``selections`` from ``concurrency`` concurrent tasks
    (threads for synchronous APIs) and time each one: the FastAPI pattern.
``open``
    Open a hierarchy (consolidated or not) and visit every array in it, reading
    its shape: what listing a dataset's variables costs.

This module must stay importable by every peer's interpreter: only the standard
library and NumPy at module level; each implementation imports its library
inside its own functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import importlib.metadata
import inspect
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from delay_proxy import admin_command

Selection = tuple[Any, ...]


# ---------------------------------------------------------------------- shared helpers
def make_data(shape: tuple[int, int]) -> np.ndarray:
    """The benchmark array: deterministic from integer arithmetic alone (same bytes in any NumPy).

    Each value is a 14-bit hash of its position divided by 64 plus a smooth column
    term, so it is exact in float32 and compresses about as well as noisy
    measurements do (Blosc-lz4 with shuffle: ~0.7 of the raw size).
    """
    rows, cols = shape
    out = np.empty(shape, dtype="<f4")
    j = np.arange(cols, dtype=np.uint32)[None, :]
    smooth = (j % 256).astype(np.float32)
    step = max(1, (8 << 20) // (cols * 4))
    for start in range(0, rows, step):
        i = np.arange(start, min(rows, start + step), dtype=np.uint32)[:, None]
        h = i * np.uint32(2654435761) + j * np.uint32(40503)
        h ^= h >> np.uint32(15)
        h *= np.uint32(2246822519)
        h ^= h >> np.uint32(13)
        out[start : start + len(i)] = (h >> np.uint32(18)).astype(np.float32) / np.float32(64) + smooth
    return out


def digest(arr: Any) -> str:
    """MD5 of an array's C-order bytes (little-endian float32 here)."""
    data = np.ascontiguousarray(np.asarray(arr))
    return hashlib.md5(memoryview(data).cast("B")).hexdigest()


def numcodecs_compressor(name: str) -> Any:
    """The numcodecs compressor for ``name``: ``blosc-lz4`` (zarr-python 2's default), ``zstd``,
    or ``none`` (``None``: chunks stored as their raw bytes, so decoding is one copy)."""
    import numcodecs

    if name == "none":
        return None
    if name == "blosc-lz4":
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE, blocksize=0)
    if name == "zstd":
        return numcodecs.Zstd(level=1)
    raise ValueError(f"unknown compressor {name!r}")


def v3_codecs(name: str) -> list[dict[str, Any]]:
    """The Zarr v3 codec list of ``name`` (``--zarr-format 3``): the same compression as
    `numcodecs_compressor`'s, after a little-endian ``bytes`` serializer (float32 chunks)."""
    codecs: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if name == "blosc-lz4":
        config = {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4, "blocksize": 0}
        codecs.append({"name": "blosc", "configuration": config})
    elif name == "zstd":
        codecs.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
    elif name != "none":
        raise ValueError(f"unknown compressor {name!r}")
    return codecs


def chunk_indices(shape: Iterable[int], chunks: Iterable[int]) -> list[tuple[int, int]]:
    """``(i, j)`` of every chunk of a 2-d array, row-major (the key is ``f"{i}.{j}"``)."""
    rows, cols = (-(-s // c) for s, c in zip(shape, chunks, strict=True))
    return [(i, j) for i in range(rows) for j in range(cols)]


def chunk_region(i: int, j: int, chunks: Iterable[int]) -> tuple[slice, slice]:
    """The region of chunk ``(i, j)`` in the array (edge chunks: NumPy clips the stops)."""
    rows, cols = chunks
    return slice(i * rows, (i + 1) * rows), slice(j * cols, (j + 1) * cols)


def zarray_document(shape: Iterable[int], chunks: Iterable[int], codec: Any) -> bytes:
    """The ``.zarray`` azarr writes for a float32 array with ``codec`` (byte for byte: sorted keys, indent 4)."""
    doc = {
        "chunks": list(chunks),
        "compressor": None if codec is None else codec.get_config(),
        "dimension_separator": ".",
        "dtype": "<f4",
        "fill_value": 0.0,
        "filters": None,
        "order": "C",
        "shape": list(shape),
        "zarr_format": 2,
    }
    return json.dumps(doc, indent=4, sort_keys=True).encode()


def encode_chunk(codec: Any, chunk: np.ndarray) -> bytes:
    """One chunk's stored bytes: ``codec`` (None: the C-order bytes as they are)."""
    contiguous = np.ascontiguousarray(chunk)
    return contiguous.tobytes() if codec is None else bytes(codec.encode(contiguous))


def decode_chunk(codec: Any, body: bytes, out: np.ndarray) -> np.ndarray:
    """Decode one stored chunk into ``out`` (C-contiguous, the chunk's shape and dtype)."""
    if codec is None:
        out[...] = np.frombuffer(body, dtype=out.dtype).reshape(out.shape)
    else:
        codec.decode(body, out=out)
    return out


def s3fs_options(task: dict[str, Any]) -> dict[str, Any]:
    """s3fs options as a user of that library passes them (library defaults otherwise).

    ``skip_instance_cache``: fsspec would hand every store the same cached
    ``S3FileSystem`` (same arguments), so a second "cold" read in one worker would
    reuse the first one's open connections, and a filesystem made for zarr 3's
    sync loop would be reused on another loop. azarr's stores make their own.
    """
    return {
        "endpoint_url": task["endpoint"],
        "key": task["key"],
        "secret": task["secret"],
        "skip_instance_cache": True,
    }


def _versions(modules: Iterable[str]) -> dict[str, str]:
    out = {"python": sys.version.split()[0]}
    for name in modules:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "?"
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def latency_summary(latencies: list[float]) -> dict[str, float]:
    """p50 / p90 / p99 / max / mean of per-request seconds."""
    return {
        "p50": _percentile(latencies, 0.50),
        "p90": _percentile(latencies, 0.90),
        "p99": _percentile(latencies, 0.99),
        "max": max(latencies),
        "mean": statistics.fmean(latencies),
    }


def selection(spec: list[Any]) -> Selection:
    """A selection from its JSON form: ints stay ints, ``[start, stop]`` pairs become slices."""
    return tuple(slice(s[0], s[1]) if isinstance(s, list) else int(s) for s in spec)


def value_sum(result: Any) -> float:
    """A cheap checksum for small-read results: size plus first, middle and last value.

    It runs on the event loop between requests, so it must cost microseconds (a full
    float64 sum of a 1 MiB chunk took ~0.5 ms and inflated every async peer's tail).
    """
    flat = np.asarray(result).reshape(-1)
    if flat.size == 0:
        return 0.0
    return float(flat.size) + float(flat[0]) + float(flat[flat.size // 2]) + float(flat[-1])


class GCMeter:
    """Python's garbage collections and their pauses while a timed part runs.

    A collection stops the whole interpreter, event loop included: a full (generation 2)
    collection walks every tracked object of the process, tens of milliseconds in a process
    that imported botocore, and every request in flight waits that long. How often the
    collector runs follows how many container objects the code allocates per request, so
    these figures belong beside a latency tail. Only the standard library.
    """

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.pauses: list[float] = []
        self.full_pauses: list[float] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        pause = time.perf_counter() - self._started
        generation = int(info.get("generation", 0))
        self.collections[generation] += 1
        self.pauses.append(pause)
        if generation == 2:
            self.full_pauses.append(pause)

    def __enter__(self) -> GCMeter:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def report(self) -> dict[str, Any]:
        return {
            "collections": list(self.collections),
            "pause_seconds": sum(self.pauses),
            "max_pause_seconds": max(self.pauses, default=0.0),
            "full_pause_seconds": list(self.full_pauses),
            "tracked_objects": len(gc.get_objects()),
        }


async def run_concurrent_async(
    fn: Callable[[Selection], Awaitable[Any]], selections: list[Selection], concurrency: int
) -> tuple[list[float], float]:
    """Run ``fn`` over ``selections`` from ``concurrency`` tasks; per-call seconds and a checksum."""
    latencies = [0.0] * len(selections)
    sums = [0.0] * len(selections)
    queue = iter(range(len(selections)))

    async def worker() -> None:
        for index in queue:
            t0 = time.perf_counter()
            result = await fn(selections[index])
            latencies[index] = time.perf_counter() - t0
            sums[index] = value_sum(result)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, sum(sums)


def run_concurrent_threads(
    fn: Callable[[Selection], Any], selections: list[Selection], concurrency: int
) -> tuple[list[float], float]:
    """Run ``fn`` over ``selections`` from a pool of ``concurrency`` threads."""

    def timed(sel: Selection) -> tuple[float, float]:
        t0 = time.perf_counter()
        result = fn(sel)
        return time.perf_counter() - t0, value_sum(result)

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        out = list(pool.map(timed, selections))
    return [t for t, _ in out], sum(s for _, s in out)


# ---------------------------------------------------------------------- implementations
class Impl:
    """One implementation: how it reads, writes, serves small reads and opens hierarchies.

    Synchronous methods; async libraries run their coroutines on ``self.runner``.
    """

    modules: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    """Modules imported before anything is timed: a cold read is one without cached
    connections or data, not one that includes the interpreter importing the library."""

    def __init__(self, task: dict[str, Any]) -> None:
        self.task = task
        self.bucket: str = task["bucket"]
        self.op: dict[str, Any] = {}
        """The operation being run (set by `run_op`), for what a method's arguments do not say."""
        self.runner = asyncio.Runner()
        for name in self.imports:
            importlib.import_module(name)

    def read(self, prefix: str) -> Any:
        raise NotImplementedError

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        raise NotImplementedError

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        raise NotImplementedError

    def open_tree(self, prefix: str, consolidated: bool) -> tuple[int, int]:
        """Open the hierarchy and visit every array: (number of arrays, sum of their sizes)."""
        raise NotImplementedError

    def close(self) -> None:
        self.runner.close()


class Raw(Impl):
    """The path's ceiling: aiohttp GETs/PUTs of the same objects at concurrency 64, no Zarr at all.

    GETs are anonymous (the benchmark server lets the anonymous identity read);
    PUTs are signed with botocore's SigV4 signer (``UNSIGNED-PAYLOAD``).
    """

    modules = ("aiohttp", "botocore")
    imports = ("aiohttp", "botocore.auth", "botocore.awsrequest", "numcodecs")
    concurrency = 64
    _http: Any = None

    @contextlib.asynccontextmanager
    async def _pooled(self) -> AsyncIterator[Any]:
        """The worker's one aiohttp session, on the runner's loop: connections are kept from
        one operation to the next, as azarr's shared pool, TensorStore's process-wide
        transport and s3fs's cached clients keep theirs (a ceiling must not pay handshakes
        the clients it bounds do not)."""
        import aiohttp

        if self._http is None:
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.concurrency))
        yield self._http

    def close(self) -> None:
        if self._http is not None:
            self.runner.run(self._http.close())
        super().close()

    def _url(self, prefix: str, key: str) -> str:
        return f"{self.task['endpoint']}/{self.bucket}/{prefix}/{key}"

    async def _get(self, session: Any, prefix: str, key: str) -> bytes:
        """One anonymous GET of ``key``; anything but 200 is an error."""
        async with session.get(self._url(prefix, key)) as response:
            body: bytes = await response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {key}: {response.status} {body[:200]!r}")
            return body

    def read(self, prefix: str) -> Any:
        keys = [f"{i}.{j}" for i, j in chunk_indices(self.task["shape"], self.task["chunks"])]
        return self.runner.run(self._get_all(prefix, keys))

    async def _get_all(self, prefix: str, keys: list[str]) -> int:

        sem = asyncio.Semaphore(self.concurrency)
        async with self._pooled() as session:

            async def get(key: str) -> int:
                async with sem:
                    return len(await self._get(session, prefix, key))

            sizes = await asyncio.gather(*(get(k) for k in keys))
        return sum(sizes)

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        """PUT the chunks, encoded beforehand: only the PUTs are timed (``write_elapsed``)."""
        codec = numcodecs_compressor(compressor)
        payloads = {
            f"{i}.{j}": encode_chunk(codec, data[chunk_region(i, j, chunks)])
            for i, j in chunk_indices(data.shape, chunks)
        }
        start = clock()
        self.runner.run(self._put_all(prefix, payloads))
        self.write_elapsed = elapsed(start)

    async def _put_all(self, prefix: str, payloads: dict[str, bytes]) -> None:
        async with self._putter(prefix) as put:
            await asyncio.gather(*(put(k, v) for k, v in payloads.items()))

    @contextlib.asynccontextmanager
    async def _putter(self, prefix: str) -> AsyncIterator[Callable[[str, bytes], Awaitable[None]]]:
        """A session and ``put(key, body)``: signed PUTs under ``prefix``, ``concurrency`` at a time."""
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        class Unsigned(S3SigV4Auth):
            def _should_sha256_sign_payload(self, request: Any) -> bool:
                return False

        signer = Unsigned(Credentials(self.task["key"], self.task["secret"]), "s3", "us-east-1")
        sem = asyncio.Semaphore(self.concurrency)
        async with self._pooled() as session:

            async def put(key: str, body: bytes) -> None:
                url = self._url(prefix, key)
                request = AWSRequest(method="PUT", url=url, data=body)
                signer.add_auth(request)
                async with (
                    sem,
                    session.put(url, data=body, headers=dict(request.headers.items())) as response,
                ):
                    text = await response.read()
                    if response.status != 200:
                        raise RuntimeError(f"PUT {key}: {response.status} {text[:300]!r}")

            yield put

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        """Single-chunk GETs: the chunk each selection falls in (bytes, not decoded)."""
        rows, cols = self.task["chunks"]

        def key(sel: Selection) -> str:
            i, j = (s.start if isinstance(s, slice) else s for s in sel)
            return f"{i // rows}.{j // cols}"

        async def go() -> tuple[list[float], float]:

            async with self._pooled() as session:

                async def get(sel: Selection) -> Any:
                    return np.zeros(1) + len(await self._get(session, prefix, key(sel)))

                await run_concurrent_async(get, selections[:concurrency], concurrency)
                return await run_concurrent_async(get, selections, concurrency)

        return self.runner.run(go())


class RawCodec(Raw):
    """The ceiling with the codec work a Zarr client must do: ``raw``'s requests plus numcodecs in a thread pool.

    Same GETs (anonymous) and signed PUTs at concurrency 64 as `Raw`; each
    chunk is decoded / encoded by numcodecs in a ``ThreadPoolExecutor(os.cpu_count())``.
    Reads decode every chunk straight into its region of a preallocated output
    (which the driver checks like everyone's); writes encode inside the timed region,
    overlapped with the PUTs, and PUT a ``.zarray`` like azarr's (the driver reads the
    array back). No metadata is read: like ``raw`` it knows the chunk keys, and the
    codec from the operation (``self.op``).
    """

    modules = ("aiohttp", "botocore", "numcodecs", "numpy")

    def _codec(self) -> Any:
        return numcodecs_compressor(self.op["compressor"])

    def read(self, prefix: str) -> Any:
        shape, (rows, cols) = self.task["shape"], self.task["chunks"]
        out = np.empty(shape, dtype="<f4")
        codec = self._codec()
        scratch = threading.local()

        def decode(body: bytes, i: int, j: int) -> None:
            buf = getattr(scratch, "buf", None)
            if buf is None:
                buf = scratch.buf = np.empty((rows, cols), dtype="<f4")
            decode_chunk(codec, body, buf)  # contiguous temporary: the region in `out` is strided
            region = out[chunk_region(i, j, (rows, cols))]
            region[...] = buf[: region.shape[0], : region.shape[1]]

        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            futures = self.runner.run(self._get_decode_all(prefix, pool, decode))
            for future in futures:
                future.result()
        return out

    async def _get_decode_all(
        self, prefix: str, pool: ThreadPoolExecutor, decode: Callable[[bytes, int, int], None]
    ) -> list[Any]:
        """GET every chunk; hand each body to the pool as it arrives (futures, not awaited on the loop)."""

        sem = asyncio.Semaphore(self.concurrency)
        futures: list[Any] = []
        async with self._pooled() as session:

            async def get(i: int, j: int) -> None:
                async with sem:
                    body = await self._get(session, prefix, f"{i}.{j}")
                futures.append(pool.submit(decode, body, i, j))

            await asyncio.gather(
                *(get(i, j) for i, j in chunk_indices(self.task["shape"], self.task["chunks"]))
            )
        return futures

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        """``.zarray`` and every chunk, each encoded in the pool and PUT as soon as it is (all timed)."""
        codec = numcodecs_compressor(compressor)

        def encode(i: int, j: int) -> bytes:
            return encode_chunk(codec, data[chunk_region(i, j, chunks)])

        async def go(pool: ThreadPoolExecutor) -> None:
            loop = asyncio.get_running_loop()
            async with self._putter(prefix) as put:

                async def one(i: int, j: int) -> None:
                    await put(f"{i}.{j}", await loop.run_in_executor(pool, encode, i, j))

                await asyncio.gather(
                    put(".zarray", zarray_document(data.shape, chunks, codec)),
                    *(one(i, j) for i, j in chunk_indices(data.shape, chunks)),
                )

        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            self.runner.run(go(pool))

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        """One GET of the selection's chunk, decoded in the pool; the element or the chunk (no Zarr)."""
        rows, cols = self.task["chunks"]
        codec = self._codec()

        def decode(body: bytes, sel: Selection, i0: int, j0: int) -> Any:
            chunk = decode_chunk(codec, body, np.empty((rows, cols), dtype="<f4"))
            local = tuple(
                slice(s.start - o, s.stop - o) if isinstance(s, slice) else s - o
                for s, o in zip(sel, (i0, j0), strict=True)
            )
            return chunk[local]

        async def go(pool: ThreadPoolExecutor) -> tuple[list[float], float]:

            loop = asyncio.get_running_loop()
            async with self._pooled() as session:

                async def get(sel: Selection) -> Any:
                    i, j = (s.start if isinstance(s, slice) else s for s in sel)
                    ci, cj = i // rows, j // cols
                    body = await self._get(session, prefix, f"{ci}.{cj}")
                    return await loop.run_in_executor(pool, decode, body, sel, ci * rows, cj * cols)

                await run_concurrent_async(get, selections[:concurrency], concurrency)
                return await run_concurrent_async(get, selections, concurrency)

        with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
            return self.runner.run(go(pool))


class Azarr(Impl):
    """azarr's ``S3Store`` as it comes (``transport="aiohttp"`` since it has the option)."""

    modules = ("azarr", "s3fs", "aiobotocore", "botocore", "aiohttp", "numcodecs", "numpy")
    imports = ("azarr", "azarr.storage", "s3fs", "aiohttp", "numcodecs")
    transport: str | None = None
    """``transport=`` for ``S3Store``; None: the default (and the only choice before it had one)."""

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(task)
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

    def store(self, prefix: str, read_only: bool = True) -> Any:
        import inspect

        from azarr.storage import S3Store

        kwargs: dict[str, Any] = {}
        if self.transport is not None:
            if "transport" not in inspect.signature(S3Store.__init__).parameters:
                raise RuntimeError("this azarr's S3Store has no transport= option")
            kwargs["transport"] = self.transport
        return S3Store(
            f"{self.bucket}/{prefix}", storage_options=s3fs_options(self.task), read_only=read_only, **kwargs
        )

    def read(self, prefix: str) -> Any:
        async def go() -> Any:
            import azarr

            store = self.store(prefix)
            try:
                arr = await azarr.open_array(store, mode="r")
                return await arr.get_basic_selection(...)
            finally:
                await store.close()

        return self.runner.run(go())

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        async def go() -> None:
            import azarr

            store = self.store(prefix, read_only=False)
            # Zarr v3 (bench_cloud --zarr-format 3): the same compression as a v3 codec list.
            encoding: dict[str, Any] = (
                {"zarr_format": 3, "codecs": v3_codecs(compressor)}
                if self.op.get("zarr_format") == 3
                else {"compressor": numcodecs_compressor(compressor)}
            )
            try:
                arr = await azarr.create(
                    shape=data.shape,
                    chunks=chunks,
                    dtype=data.dtype,
                    store=store,
                    overwrite=False,
                    **encoding,
                )
                await arr.set_basic_selection(..., data)
            finally:
                await store.close()

        self.runner.run(go())

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        async def go() -> tuple[list[float], float]:
            import azarr

            store = self.store(prefix)
            try:
                arr = await azarr.open_array(store, mode="r")
                await run_concurrent_async(arr.get_basic_selection, selections[:concurrency], concurrency)
                return await run_concurrent_async(arr.get_basic_selection, selections, concurrency)
            finally:
                await store.close()

        return self.runner.run(go())

    def open_tree(self, prefix: str, consolidated: bool) -> tuple[int, int]:
        async def go() -> tuple[int, int]:
            import azarr

            store = self.store(prefix)
            # azarr >= the parity work tries .zmetadata first in mode "r" (as xarray does):
            # the unconsolidated case must ask for the plain walk (older azarr has no option).
            plain = (
                {"use_consolidated": False}
                if "use_consolidated" in inspect.signature(azarr.open_group).parameters
                else {}
            )
            # The format is known, as zarr 3.1's peer says zarr_format=2: one request, not
            # .zmetadata and a v3 root's zarr.json together (azarr >= Zarr v3 reads both by default).
            known = (
                {"zarr_format": 2}
                if "zarr_format" in inspect.signature(azarr.open_consolidated).parameters
                else {}
            )
            try:
                root = await (
                    azarr.open_consolidated(store, **known)
                    if consolidated
                    else azarr.open_group(store, "r", **plain)
                )
                return await self._walk(root)
            finally:
                await store.close()

        return self.runner.run(go())

    async def _walk(self, group: Any) -> tuple[int, int]:
        """Every array below ``group``: ``members(max_depth=None)`` (zarr-python 3's walk) where
        this azarr has it, else member lists group by group."""
        import inspect

        import azarr

        count = size = 0
        if "max_depth" in inspect.signature(group.members).parameters:
            async for _, node in group.members(max_depth=None):
                if isinstance(node, azarr.AsyncArray):
                    count, size = count + 1, size + node.size
            return count, size
        async for _, node in group.members():
            if isinstance(node, azarr.AsyncArray):
                count, size = count + 1, size + node.size
            else:
                c, s = await self._walk(node)
                count, size = count + c, size + s
        return count, size


class AzarrS3fs(Azarr):
    """azarr's ``S3Store(transport="s3fs")``, when it has the option."""

    transport = "s3fs"


class AzarrUvloop(Azarr):
    """azarr's default ``S3Store`` on a uvloop event loop (what uvicorn runs when uvloop is installed)."""

    modules = (*Azarr.modules, "uvloop")

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(task)
        import uvloop

        self.runner.close()  # the default loop's runner, never started
        self.runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)


class Zarr218(Impl):
    """zarr-python 2.18 ``FSStore`` over s3fs, synchronous API, library defaults."""

    modules = ("zarr", "numcodecs", "numpy", "s3fs", "aiobotocore", "botocore", "fsspec")
    imports = ("zarr", "zarr.storage", "s3fs", "numcodecs")

    def store(self, prefix: str) -> Any:
        import zarr

        return zarr.storage.FSStore(f"s3://{self.bucket}/{prefix}", **s3fs_options(self.task))

    def read(self, prefix: str) -> Any:
        import zarr

        return zarr.open_array(self.store(prefix), mode="r")[...]

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        import zarr

        arr = zarr.create(
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            compressor=numcodecs_compressor(compressor),
            store=self.store(prefix),
            overwrite=False,
        )
        arr[...] = data

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        import zarr

        arr = zarr.open_array(self.store(prefix), mode="r")
        fn = arr.__getitem__
        run_concurrent_threads(fn, selections[:concurrency], concurrency)
        return run_concurrent_threads(fn, selections, concurrency)

    def open_tree(self, prefix: str, consolidated: bool) -> tuple[int, int]:
        import zarr

        store = self.store(prefix)
        root = zarr.open_consolidated(store, mode="r") if consolidated else zarr.open_group(store, mode="r")

        def walk(group: Any) -> tuple[int, int]:
            count = size = 0
            for _, arr in group.arrays():
                count, size = count + 1, size + arr.size
            for _, sub in group.groups():
                c, s = walk(sub)
                count, size = count + c, size + s
            return count, size

        return walk(root)


class Zarr3(Impl):
    """zarr-python 3.1, Zarr v2 format, default configuration (``async.concurrency`` 10)."""

    modules = ("zarr", "numcodecs", "numpy", "s3fs", "aiobotocore", "botocore", "fsspec", "obstore")
    imports = ("zarr", "zarr.storage", "zarr.api.asynchronous", "s3fs", "obstore.store", "numcodecs")

    def store(self, prefix: str, read_only: bool = True) -> Any:
        raise NotImplementedError

    def read(self, prefix: str) -> Any:
        import zarr

        return zarr.open_array(self.store(prefix), mode="r", zarr_format=2)[...]

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        import zarr

        arr = zarr.create_array(
            store=self.store(prefix, read_only=False),
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            zarr_format=2,
            compressors=numcodecs_compressor(compressor),
            filters=None,
            fill_value=0.0,
            overwrite=False,
        )
        arr[...] = data

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        """zarr 3's async API on one event loop: 50 tasks, as in an async web server."""

        async def go() -> tuple[list[float], float]:
            import zarr.api.asynchronous as za

            arr = await za.open_array(store=self.store(prefix), mode="r", zarr_format=2)
            await run_concurrent_async(arr.getitem, selections[:concurrency], concurrency)
            return await run_concurrent_async(arr.getitem, selections, concurrency)

        return self.runner.run(go())

    def open_tree(self, prefix: str, consolidated: bool) -> tuple[int, int]:
        import zarr

        store = self.store(prefix)
        if consolidated:
            root = zarr.open_consolidated(store, mode="r", zarr_format=2)
        else:
            root = zarr.open_group(store, mode="r", zarr_format=2, use_consolidated=False)
        count = size = 0
        for _, node in root.members(max_depth=None):
            if isinstance(node, zarr.Array):
                count, size = count + 1, size + node.size
        return count, size


class Zarr3Fsspec(Zarr3):
    """zarr-python 3.1 ``FsspecStore`` (s3fs)."""

    def store(self, prefix: str, read_only: bool = True) -> Any:
        from zarr.storage import FsspecStore

        return FsspecStore.from_url(
            f"s3://{self.bucket}/{prefix}", storage_options=s3fs_options(self.task), read_only=read_only
        )


def zarr_obstore(task: dict[str, Any], bucket: str, prefix: str, read_only: bool = True) -> Any:
    """zarr-python 3's ``ObjectStore`` over obstore's ``S3Store`` at ``bucket/prefix`` of the
    task's endpoint (plain HTTP, path-style, the task's credentials)."""
    from obstore.store import S3Store
    from zarr.storage import ObjectStore

    inner = S3Store(
        bucket,
        prefix=prefix,
        endpoint=task["endpoint"],
        access_key_id=task["key"],
        secret_access_key=task["secret"],
        region="us-east-1",
        virtual_hosted_style_request=False,
        client_options={"allow_http": True},
    )
    return ObjectStore(inner, read_only=read_only)


class Zarr3Obstore(Zarr3):
    """zarr-python 3.1 ``ObjectStore`` over obstore's ``S3Store`` (Rust ``object_store``)."""

    def store(self, prefix: str, read_only: bool = True) -> Any:
        return zarr_obstore(self.task, self.bucket, prefix, read_only)


class Zarr34(Zarr3Obstore):
    """zarr-python 3.4 ``ObjectStore`` (obstore), one codec pipeline, either format.

    ``pipeline``: None for the default (``BatchedCodecPipeline``), else the
    ``codec_pipeline.path`` set with ``zarr.config.set`` for the worker process (the
    pipeline is chosen when an array is opened). Operations with ``zarr_format`` 3 use
    Zarr v3 data; the others Zarr v2, as zarr 3.1's worker (`Zarr3`).
    """

    modules = ("zarr", "numcodecs", "numpy", "obstore", "zarrs")
    imports = ("zarr", "zarr.storage", "zarr.api.asynchronous", "obstore.store", "numcodecs")
    pipeline: str | None = None

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(task)
        if self.pipeline:
            import zarr

            zarr.config.set({"codec_pipeline.path": self.pipeline})

    def read(self, prefix: str) -> Any:
        import zarr

        if self.op.get("zarr_format") != 3:
            return super().read(prefix)
        return zarr.open_array(self.store(prefix), mode="r", zarr_format=3)[...]

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        import zarr

        if self.op.get("zarr_format") != 3:
            super().write(prefix, data, compressor, chunks)
            return
        codecs = v3_codecs(compressor)
        arr = zarr.create_array(
            store=self.store(prefix, read_only=False),
            shape=data.shape,
            chunks=chunks,
            dtype=data.dtype,
            zarr_format=3,
            serializer=codecs[0],
            compressors=codecs[1:] or None,
            filters=None,
            fill_value=0.0,
            overwrite=False,
        )
        arr[...] = data


class Zarr34Fused(Zarr34):
    """zarr-python 3.4 with its ``FusedCodecPipeline``."""

    pipeline = "zarr.core.codec_pipeline.FusedCodecPipeline"


class Zarr34Zarrs(Zarr34):
    """zarr-python 3.4 with the zarrs (Rust) codec pipeline."""

    imports = (*Zarr34.imports, "zarrs")
    pipeline = "zarrs.ZarrsCodecPipeline"


class TensorStore(Impl):
    """TensorStore's ``zarr`` (v2) driver on its ``s3`` kvstore, default context (no cache);
    ``zarr3`` for operations with ``zarr_format`` 3."""

    modules = ("tensorstore", "numpy")
    imports = ("tensorstore",)

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(task)
        os.environ["AWS_ACCESS_KEY_ID"] = task["key"]
        os.environ["AWS_SECRET_ACCESS_KEY"] = task["secret"]

    def spec(self, prefix: str) -> dict[str, Any]:
        return {
            "driver": "zarr3" if self.op.get("zarr_format") == 3 else "zarr",
            "kvstore": {
                "driver": "s3",
                "bucket": self.bucket,
                "path": f"{prefix}/",
                "endpoint": self.task["endpoint"],
                "aws_region": "us-east-1",
                "aws_credentials": {"type": "environment"},
            },
        }

    def read(self, prefix: str) -> Any:
        import tensorstore as ts

        arr = ts.open(self.spec(prefix), read=True, context=ts.Context()).result()
        return arr.read().result()

    def write(self, prefix: str, data: np.ndarray, compressor: str, chunks: tuple[int, int]) -> None:
        import tensorstore as ts

        comp = {  # its venv has no numcodecs: the same configs, spelled out
            "blosc-lz4": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0},
            "zstd": {"id": "zstd", "level": 1},
            "none": None,
        }[compressor]
        spec = self.spec(prefix)
        spec["metadata"] = {
            "shape": list(data.shape),
            "chunks": list(chunks),
            "dtype": "<f4",
            "compressor": comp,
            "fill_value": 0.0,
            "order": "C",
            "filters": None,
        }
        if self.op.get("zarr_format") == 3:
            spec["metadata"] = {
                "shape": list(data.shape),
                "data_type": "float32",
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunks)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": 0.0,
                "codecs": v3_codecs(compressor),
            }
        arr = ts.open(spec, create=True, context=ts.Context()).result()
        arr.write(data).result()

    def small(self, prefix: str, selections: list[Selection], concurrency: int) -> tuple[list[float], float]:
        """TensorStore futures awaited from 50 asyncio tasks."""
        import tensorstore as ts

        async def go() -> tuple[list[float], float]:
            arr = await ts.open(self.spec(prefix), read=True, context=ts.Context())

            async def get(sel: Selection) -> Any:
                return await arr[sel].read()

            await run_concurrent_async(get, selections[:concurrency], concurrency)
            return await run_concurrent_async(get, selections, concurrency)

        return self.runner.run(go())


IMPL_CLASSES: dict[str, type[Impl]] = {
    "raw": Raw,
    "raw-codec": RawCodec,
    "azarr": Azarr,
    "azarr-s3fs": AzarrS3fs,
    "azarr-uvloop": AzarrUvloop,
    "azarr-baseline": Azarr,  # the same worker, importing an older azarr (bench_cloud.BASELINE)
    "zarr218": Zarr218,
    "zarr3-fsspec": Zarr3Fsspec,
    "zarr3-obstore": Zarr3Obstore,
    "tensorstore": TensorStore,
    # Zarr v3 (bench_cloud --zarr-format 3); azarr-v2 is azarr on the same data stored as Zarr v2.
    "azarr-v2": Azarr,
    "zarr34": Zarr34,
    "zarr34-fused": Zarr34Fused,
    "zarr34-zarrs": Zarr34Zarrs,
}


# ---------------------------------------------------------------------- driver loop
class _Requests:
    """Counts the proxy's requests around one operation (``None`` without an admin port),
    and the CPU seconds the server's and the proxy's processes spent meanwhile (``cpu_pids``:
    ``{"server": pid, "proxy": pid}``; the two share the host's cores with the client)."""

    def __init__(self, admin_port: int | None, cpu_pids: dict[str, int] | None = None) -> None:
        self.admin_port = admin_port
        self.cpu_pids = cpu_pids or {}
        self._cpu: dict[str, float] = {}

    def reset(self) -> None:
        if self.admin_port:
            admin_command(self.admin_port, "reset")
        self._cpu = {name: process_cpu(pid) for name, pid in self.cpu_pids.items()}

    def read(self) -> dict[str, Any] | None:
        counters = admin_command(self.admin_port, "counters") if self.admin_port else None
        if counters is not None and self._cpu:
            counters = dict(counters)
            for name, pid in self.cpu_pids.items():
                counters[f"{name}_cpu_seconds"] = process_cpu(pid) - self._cpu[name]
        return counters


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, every thread (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Clock = tuple[float, float, float, float]


def clock() -> Clock:
    """Wall, process CPU, kernel CPU and calling-thread CPU seconds now (the kernel's share:
    ``os.times().system``; the calling thread runs the worker's event loop, or zarr 2.18's
    synchronous calls)."""
    return time.perf_counter(), time.process_time(), os.times().system, time.thread_time()


def elapsed(start: Clock) -> dict[str, float]:
    """``seconds``, ``cpu_seconds``, ``sys_seconds`` and ``loop_seconds`` (the main thread's
    CPU: the event loop's, for the asyncio clients) since ``start`` (from `clock`)."""
    now = clock()
    return {
        "seconds": now[0] - start[0],
        "cpu_seconds": now[1] - start[1],
        "sys_seconds": now[2] - start[2],
        "loop_seconds": now[3] - start[3],
    }


def run_op(impl: Impl, op: dict[str, Any], requests: _Requests) -> dict[str, Any]:
    """Run and time one operation; the result dict goes into the worker's JSON."""
    kind = op["op"]
    out: dict[str, Any] = dict(op)
    out.pop("selections", None)
    impl.op = op
    if kind == "read":
        requests.reset()
        start = clock()
        result = impl.read(op["prefix"])
        out.update(elapsed(start))
        out["proxy"] = requests.read()
        out["digest"] = digest(result) if isinstance(result, np.ndarray) else f"bytes:{result}"
        if isinstance(result, np.ndarray):
            out["nbytes"] = int(result.nbytes)
        else:  # raw: the stored bytes it moved; rates are per MiB of array data like everyone's
            out["stored_bytes"] = int(result)
            out["nbytes"] = int(np.prod(impl.task["shape"])) * 4
        del result
    elif kind == "write":
        data = make_data(tuple(op["shape"]))
        requests.reset()
        start = clock()
        impl.write(op["prefix"], data, op["compressor"], tuple(op["chunks"]))
        # raw times its PUTs only (its encoding is not the path's work)
        out.update(getattr(impl, "write_elapsed", None) or elapsed(start))
        out["proxy"] = requests.read()
        out["nbytes"] = int(data.nbytes)
    elif kind == "small":
        selections = [selection(s) for s in op["selections"]]
        requests.reset()
        start = clock()
        latencies, checksum = impl.small(op["prefix"], selections, op["concurrency"])
        out.update(elapsed(start))
        out["proxy"] = requests.read()
        measured = latencies[-len(selections) :]
        out["latency"] = latency_summary(measured)
        out["checksum"] = round(checksum, 3)
        out["count"] = len(measured)
    elif kind == "open":
        requests.reset()
        start = clock()
        count, size = impl.open_tree(op["prefix"], op["consolidated"])
        out.update(elapsed(start))
        out["proxy"] = requests.read()
        out["arrays"] = count
        out["checksum"] = size
    else:
        raise ValueError(f"unknown op {kind!r}")
    return out


def run_task(task: dict[str, Any]) -> dict[str, Any]:
    """Run every operation of ``task`` in order with one implementation."""
    impl = IMPL_CLASSES[task["impl"]](task)
    requests = _Requests(task.get("admin_port"), task.get("cpu_pids"))
    results = []
    try:
        for op in task["ops"]:
            t0 = time.perf_counter()
            try:
                results.append(run_op(impl, op, requests))
            except Exception as exc:  # report and go on: one failing op must not hide the others
                failed = {k: v for k, v in op.items() if k != "selections"}
                failed["error"] = f"{type(exc).__name__}: {exc}"[:2000]
                failed["seconds"] = time.perf_counter() - t0
                results.append(failed)
    finally:
        impl.close()
    return {
        "impl": task["impl"],
        "versions": _versions(impl.modules),
        "ops": results,
        "threads": threading.active_count(),
    }


def main() -> int:
    """Read a task from stdin, print the result JSON on stdout."""
    task = json.loads(sys.stdin.read())
    if task.get("profile"):
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        report = run_task(task)
        profiler.disable()
        profiler.dump_stats(task["profile"])
        pstats.Stats(task["profile"])  # validate the dump
    else:
        report = run_task(task)
    sys.stdout.write(json.dumps(report) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
