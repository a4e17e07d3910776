"""A FastAPI service serving Zarr arrays from a bucket with azarr.

Run (a demo dataset in memory when nothing is configured)::

    uvicorn examples.service.app:app --port 8000
    curl 'localhost:8000/slice/demo/temperature?sel=0,0:4,0:4&format=json'

Serve your own hierarchies: ``AZARR_DATASETS`` is a JSON object of
``name -> {"url": ..., "storage_options": {...}, "path": ...}``::

    AZARR_DATASETS='{"era5": {"url": "s3://bucket/era5.zarr", "storage_options": {"anon": true}}}' \\
        uvicorn examples.service.app:app

Other settings: ``AZARR_REFRESH_INTERVAL`` (seconds between metadata refreshes,
default 300), ``AZARR_DEADLINE`` (seconds per request before a 504, default 30),
``AZARR_CONFIG`` (JSON of `azarr.config.set` settings, e.g. retries),
``AZARR_MAX_BYTES`` (bytes of one streamed result held in memory, default 32 MiB),
``AZARR_RESPONSE_BUDGET`` (bytes of response bodies in flight across all requests,
default 256 MiB), ``AZARR_SEND_TIMEOUT`` (seconds a client may stop reading before
its response is ended, default 30), ``AZARR_CLIENT_REQUESTS`` (requests in flight per
client IP before 429, default 16), ``AZARR_MAX_RESULT_BYTES`` (largest result one
request may ask for, default 1 GiB: a short list of repeated indices can ask for
gigabytes). See docs/recipes.md, "Limits".

Endpoints
---------
``GET /``                                  the viewer: browse datasets, pan and zoom tiles
                                           (``viewer.html``: one static page, no build step)
``GET /datasets``                          names
``GET /tree/{name}``                       every array and group, with shapes and dtypes
``GET /info/{name}/{path}``                one node: shape, chunks, dtype, codecs, attributes
``GET /slice/{name}/{path}?sel=&format=``  a selection (``"0:10,::2,5"``) as json, npy or raw
``GET /timeseries/{name}/{path}?at=i,j``   ``arr[:, i, j]`` (all of axis 0 at one point), JSON
``GET /tile/{name}/{path}/{z}/{y}/{x}.png`` a 256x256 grayscale PNG of the last two axes,
                                           downsampled by 2**z; ``lead=`` gives the indices of
                                           the axes before them (``lead=0`` for the demo's 3-D
                                           ``temperature``)
``POST /refresh/{name}``                   re-read the dataset's metadata now
``GET /health``                            requests in flight, cancelled, event-loop tasks,
                                           response budget, the longest event-loop stall
                                           (``?reset=true`` starts a new measurement)
``GET /metrics``                           Prometheus: per-store requests, bytes, retries,
                                           throttles, adaptive limit, cache and collapsed
                                           reads, latency histogram; the service's requests

A dataset whose root is an array (``AZARR_DATASETS`` pointing at a ``.zarray``) has no
``{path}``: ``/info/{name}``, ``/slice/{name}?sel=...``, ``/tile/{name}/{z}/{y}/{x}.png``.

Concurrent requests for the same chunks share one fetch and decode (request collapsing,
on by default). A decoded-chunk cache pays when clients come back to the same tiles and
the data does not change under the service: ``AZARR_CONFIG='{"chunk_cache_bytes":
268435456, "chunk_cache_recheck": 60}'`` keeps 256 MiB of decoded chunks, each trusted
for 60 s before its generation is checked again (see ``docs/guides/serving.md``).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response

import azarr
from azarr import service
from azarr.indexing import parse_selection

TILE = 256
MAX_BYTES = int(os.environ.get("AZARR_MAX_BYTES", service.DEFAULT_MAX_BYTES))
MAX_ZOOM = 6  # a tile reads at most TILE * 2**6 rows/cols: bounded work per request
LIMITS = service.ResponseLimits(
    int(os.environ.get("AZARR_RESPONSE_BUDGET", service.DEFAULT_RESPONSE_BUDGET)),
    send_timeout=float(os.environ.get("AZARR_SEND_TIMEOUT", service.DEFAULT_SEND_TIMEOUT)),
)
MAX_RESULT_BYTES = int(os.environ.get("AZARR_MAX_RESULT_BYTES", 2**30))
CLIENT_REQUESTS = int(os.environ.get("AZARR_CLIENT_REQUESTS", service.DEFAULT_MAX_CLIENT_REQUESTS))


class LoopLag:
    """A heartbeat that measures how late the event loop wakes it: the longest stall seen.

    ``max`` is the wall-clock lateness; ``busy_max`` the part of it the loop's thread
    spent on the CPU (its own work: a handler computing on the loop), which leaves out
    time the operating system gave to other processes on a busy machine.
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.max = self.busy_max = 0.0

    def reset(self) -> None:
        self.max = self.busy_max = 0.0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            start, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(self.interval)
            late = loop.time() - start - self.interval
            self.max = max(self.max, late)
            self.busy_max = max(self.busy_max, min(late, time.thread_time() - cpu))


loop_lag = LoopLag()
VIEWER = Path(__file__).with_name("viewer.html")


async def _demo_store() -> azarr.MemoryStore:
    """A small hierarchy for trying the service without a bucket."""
    store = azarr.MemoryStore()
    root = await azarr.group(store=store)
    t = np.linspace(0, 4 * np.pi, 48, dtype="f4")
    y, x = np.mgrid[0:512, 0:512].astype("f4") / 64
    field = np.sin(x[None] + t[:, None, None]) * np.cos(y[None]) * 20 + 280
    arr = await root.create_dataset("temperature", shape=field.shape, chunks=(8, 128, 128), dtype="f4")
    await arr.set_basic_selection(..., field)
    await arr.attrs.update(units="K", valid_range=[260, 300])
    await azarr.consolidate_metadata(store)
    return store


def _configure(datasets: service.Datasets) -> bool:
    """Register ``AZARR_DATASETS``; False when unset (the demo dataset is used)."""
    config = json.loads(os.environ.get("AZARR_DATASETS", "{}"))
    for name, spec in config.items():
        datasets.add(name, spec["url"], path=spec.get("path"), storage_options=spec.get("storage_options"))
    return bool(config)


azarr.config.set(**json.loads(os.environ.get("AZARR_CONFIG", "{}")))
datasets = service.Datasets(refresh_interval=float(os.environ.get("AZARR_REFRESH_INTERVAL", "300")))
configured = _configure(datasets)


async def lifespan(app: FastAPI) -> Any:
    if not configured:
        datasets.add("demo", await _demo_store())
    heartbeat = asyncio.ensure_future(loop_lag.run())
    try:
        async with datasets.lifespan(app):
            yield
    finally:
        heartbeat.cancel()


api = FastAPI(title="azarr array service", lifespan=lifespan)
service.install_error_handlers(api)


@api.get("/", include_in_schema=False)
async def viewer() -> HTMLResponse:
    return HTMLResponse(VIEWER.read_text(encoding="utf-8"))


@api.get("/datasets")
async def list_datasets() -> list[str]:
    return datasets.names


@api.get("/tree/{name}")
async def tree(name: str) -> dict[str, Any]:
    root = await datasets.get(name)
    nodes: list[dict[str, Any]] = []
    if isinstance(root, azarr.AsyncGroup):
        async for path, node in root.members(max_depth=None):
            nodes.append(_describe(path, node, brief=True))
    else:
        nodes.append(_describe("", root, brief=True))
    return {"dataset": name, "nodes": nodes}


# Each node route also has a form without {path} for a dataset whose root is an array
# (/slice/era5?sel=...): with {path:path} alone its URL would need an empty segment (//).
@api.get("/info/{name}")
@api.get("/info/{name}/{path:path}")
async def info(name: str, path: str = "") -> dict[str, Any]:
    return _describe(path, await datasets.get(name, path), brief=False)


def _describe(path: str, node: azarr.AsyncArray | azarr.AsyncGroup, *, brief: bool) -> dict[str, Any]:
    if isinstance(node, azarr.AsyncGroup):
        out: dict[str, Any] = {"path": path, "kind": "group"}
    else:
        out = {"path": path, "kind": "array", "shape": list(node.shape), "dtype": node.dtype.str}
        if not brief:
            out |= {
                "chunks": list(node.chunks),
                "nchunks": node.nchunks,
                "fill_value": _jsonable(node.fill_value),
                "order": node.order,
                "zarr_format": node.zarr_format,
                "codecs": node.codecs,  # the chain as Zarr v3 codecs, for either format
            }
    if not brief:
        out["attrs"] = node.attrs.asdict()
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


@api.get("/slice/{name}")
@api.get("/slice/{name}/{path:path}")
async def slice_(
    name: str,
    path: str = "",
    sel: str = Query("", description="selection text, e.g. '0:10,::2,5' or '[1,5,9],:'"),
    format: str = Query("json", description="json, npy or raw (little-endian bytes)"),
) -> Response:
    arr = await datasets.array(name, path)
    plan = service.SelectionPlan(arr, parse_selection(sel))
    if plan.nbytes > MAX_RESULT_BYTES:  # "[0,0,0,...]" asks for the same rows over and over
        raise service.ResponseTooLargeError(
            f"the selection is {plan.nbytes} bytes, above this service's limit of {MAX_RESULT_BYTES}"
        )
    return await service.array_response(plan, format, max_bytes=MAX_BYTES, limits=LIMITS)


@api.get("/timeseries/{name}")
@api.get("/timeseries/{name}/{path:path}")
async def timeseries(
    name: str, path: str = "", at: str = Query(..., description="indices of axes 1.., e.g. '10,20'")
) -> Response:
    arr = await datasets.array(name, path)
    plan = service.SelectionPlan(arr, (slice(None), *parse_selection(at)))
    if len(plan.shape) != 1:
        raise service.UnsupportedFormatError(
            f"'at' must give one index for each of the {arr.ndim - 1} axes after axis 0; got {at!r}"
        )
    return await service.array_response(plan, "json", limits=LIMITS)


@api.get("/tile/{name}/{z}/{y}/{x}.png")
@api.get("/tile/{name}/{path:path}/{z}/{y}/{x}.png")
async def tile(
    name: str,
    z: int,
    y: int,
    x: int,
    path: str = "",
    lead: str = Query("", description="indices of the axes before the last two, e.g. '0'"),
    vmin: float | None = None,
    vmax: float | None = None,
) -> Response:
    # Every parameter is checked before it is used in any computation: 2**z for a z of
    # 4,000,000,000 alone held the event loop for 16 s.
    if not 0 <= z <= MAX_ZOOM:
        raise service.UnsupportedFormatError(f"zoom {z} is out of range 0..{MAX_ZOOM}")
    arr = await datasets.array(name, path)
    if arr.ndim < 2:
        raise service.UnsupportedFormatError(
            f"{path or 'the root array'} has {arr.ndim} dimensions; tiles need 2 or more"
        )
    leading = parse_selection(lead) if lead else ()
    if len(leading) != arr.ndim - 2 or not all(isinstance(i, int) for i in leading):
        what = f"{path or 'the root array'} is {arr.ndim}-d: a tile shows its last two axes"
        if arr.ndim == 2:
            raise service.UnsupportedFormatError(f"{what}, so it takes no 'lead'; got {lead!r}")
        example = ",".join("0" * (arr.ndim - 2))
        raise service.UnsupportedFormatError(
            f"{what}, and 'lead' must give one integer index for each of the {arr.ndim - 2} axes "
            f"before them (e.g. ?lead={example}); got {lead!r}"
        )
    rows, cols = arr.shape[-2:]
    if not (0 <= y < rows and 0 <= x < cols):  # cheap bounds first: y and x may have 4,000 digits
        raise azarr.errors.ArrayNotFoundError(
            f"tile {z}/{y}/{x} is outside the {rows}x{cols} grid of {path!r}"
        )
    step = 2**z
    r0, c0 = y * TILE * step, x * TILE * step
    if r0 >= rows or c0 >= cols:
        raise azarr.errors.ArrayNotFoundError(
            f"tile {z}/{y}/{x} is outside the {rows}x{cols} grid of {path!r}"
        )
    window = (*leading, slice(r0, r0 + TILE * step, step), slice(c0, c0 + TILE * step, step))
    data = np.asarray(await arr.get_basic_selection(window), dtype="f8")
    png = await asyncio.to_thread(_to_png, data, *_limits(arr, data, vmin, vmax))
    return Response(png, media_type="image/png")


def _limits(
    arr: azarr.AsyncArray, data: np.ndarray[Any, Any], vmin: float | None, vmax: float | None
) -> tuple[float, float]:
    valid = arr.attrs.asdict().get("valid_range")
    finite = data[np.isfinite(data)]
    lo = vmin if vmin is not None else (valid[0] if valid else (finite.min() if finite.size else 0.0))
    hi = vmax if vmax is not None else (valid[1] if valid else (finite.max() if finite.size else 1.0))
    return float(lo), float(hi)


def _to_png(data: np.ndarray[Any, Any], lo: float, hi: float) -> bytes:
    from PIL import Image

    scaled = np.clip((data - lo) / ((hi - lo) or 1.0), 0, 1)
    gray = np.nan_to_num(scaled * 255).astype(np.uint8)
    alpha = np.where(np.isfinite(data), 255, 0).astype(np.uint8)  # missing data is transparent
    padded = np.zeros((TILE, TILE, 2), np.uint8)  # edge tiles are padded, transparent
    padded[: data.shape[0], : data.shape[1], 0] = gray
    padded[: data.shape[0], : data.shape[1], 1] = alpha
    buf = io.BytesIO()
    Image.fromarray(padded).save(buf, format="PNG")
    return buf.getvalue()


@api.post("/refresh/{name}")
async def refresh(name: str) -> dict[str, Any]:
    await datasets.refresh(name)
    return {"dataset": name, "age": datasets.age(name)}


# The middleware wraps the whole app (outside FastAPI) so /health can read its counters;
# the per-client limit outermost, so a request counts until its response has been sent.
cancelling = service.CancelOnDisconnectMiddleware(api, deadline=float(os.environ.get("AZARR_DEADLINE", "30")))
app = service.ClientLimitMiddleware(cancelling, max_requests=CLIENT_REQUESTS)


@api.get("/metrics")
async def metrics() -> Response:
    extra = {
        "azarr_service_requests_in_flight": cancelling.active - 1,
        "azarr_service_requests_cancelled": cancelling.cancelled,
        "azarr_service_requests_timed_out": cancelling.timed_out,
        "azarr_service_requests_rejected": app.rejected,
    }
    return Response(service.prometheus_metrics(extra), media_type=service.PROMETHEUS_CONTENT_TYPE)


@api.get("/health")
async def health(reset: bool = False) -> JSONResponse:
    body = {
        "ok": True,
        "active_requests": cancelling.active - 1,  # not counting this one
        "cancelled": cancelling.cancelled,
        "timed_out": cancelling.timed_out,
        "rejected": app.rejected,
        "tasks": len(asyncio.all_tasks()),
        "responses": LIMITS.as_dict(),
        "loop_lag_max_ms": round(loop_lag.max * 1000, 1),
        "loop_busy_max_ms": round(loop_lag.busy_max * 1000, 1),
    }
    if reset:
        loop_lag.reset()
    return JSONResponse(body)
