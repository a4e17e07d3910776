"""Serving Zarr arrays from async web services (FastAPI, Starlette): the ``azarr[service]`` extra.

The pieces a data service needs to be right by default:

    from fastapi import FastAPI
    from azarr import service

    datasets = service.Datasets(refresh_interval=300)       # open once per process
    datasets.add("era5", "s3://bucket/era5.zarr")
    app = FastAPI(lifespan=datasets.lifespan)
    app.add_middleware(service.CancelOnDisconnectMiddleware, deadline=30)  # abandoned -> cancelled
    app.add_middleware(service.ClientLimitMiddleware, max_requests=16)     # one client cannot hog it
    service.install_error_handlers(app)                      # 400/404/503/504 from azarr errors
    limits = service.ResponseLimits(256 * 2**20, send_timeout=30)  # all responses' bytes in flight

    @app.get("/slice/{name}/{path:path}")
    async def slice_(name: str, path: str, sel: str = "", format: str = "npy"):
        arr = await datasets.array(name, path)
        plan = service.SelectionPlan(arr, azarr.indexing.parse_selection(sel))
        return await service.array_response(plan, format, limits=limits)  # bounded, streamed

| name | what it does |
| --- | --- |
| `Datasets` | hierarchies opened at startup, metadata cached and refreshed on a timer or on demand |
| `CancelOnDisconnectMiddleware` | cancels a handler (and its chunk requests) when the client leaves; per-request deadline -> 504 |
| `deadline` | a tighter deadline around one block -> 504 |
| `http_error_for`, `install_error_handlers` | one table from azarr errors to HTTP statuses |
| `SelectionPlan`, `array_response` | selections validated before reading; ``.npy`` and raw bytes streamed in bounded slabs; JSON for small results |
| `ResponseLimits` | one byte budget across all responses in flight, a send timeout for clients that stop reading |
| `ClientLimitMiddleware` | requests in flight per client -> 429 beyond |
| `prometheus_metrics` | every store's counters for a ``/metrics`` endpoint |

Only `install_error_handlers` and `array_response` import Starlette (installed with
FastAPI); the rest is plain asyncio and ASGI.
"""

from azarr.service._clients import DEFAULT_MAX_CLIENT_REQUESTS, ClientLimitMiddleware, client_address
from azarr.service._datasets import Datasets
from azarr.service._disconnect import CancelOnDisconnectMiddleware, deadline
from azarr.service._errors import (
    DEFAULT_RETRY_AFTER,
    DeadlineExceededError,
    HTTPError,
    ResponseTooLargeError,
    ServiceError,
    UnknownDatasetError,
    UnsupportedFormatError,
    http_error_for,
    install_error_handlers,
)
from azarr.service._limits import (
    DEFAULT_RESPONSE_BUDGET,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_SMALL_BYTES,
    ResponseLimits,
    SendTimeoutError,
    default_limits,
)
from azarr.service._metrics import PROMETHEUS_CONTENT_TYPE, prometheus_metrics
from azarr.service._plan import SelectionPlan
from azarr.service._responses import (
    DEFAULT_JSON_MAX_BYTES,
    DEFAULT_MAX_BYTES,
    FORMATS,
    array_headers,
    array_response,
    little_endian,
    npy_header,
    to_json_data,
)

__all__ = [
    "DEFAULT_JSON_MAX_BYTES",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_CLIENT_REQUESTS",
    "DEFAULT_RESPONSE_BUDGET",
    "DEFAULT_RETRY_AFTER",
    "DEFAULT_SEND_TIMEOUT",
    "DEFAULT_SMALL_BYTES",
    "FORMATS",
    "PROMETHEUS_CONTENT_TYPE",
    "CancelOnDisconnectMiddleware",
    "ClientLimitMiddleware",
    "Datasets",
    "DeadlineExceededError",
    "HTTPError",
    "ResponseLimits",
    "ResponseTooLargeError",
    "SelectionPlan",
    "SendTimeoutError",
    "ServiceError",
    "UnknownDatasetError",
    "UnsupportedFormatError",
    "array_headers",
    "array_response",
    "client_address",
    "deadline",
    "default_limits",
    "http_error_for",
    "install_error_handlers",
    "little_endian",
    "npy_header",
    "prometheus_metrics",
    "to_json_data",
]
