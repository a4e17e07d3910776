"""bench_service's peer: the example service's ``/slice`` endpoint on zarr-python 3.4 + obstore.

The same request as ``examples/service/app.py``'s ``GET /slice/{name}/{path}?sel=&format=raw``
(a basic selection, the raw little-endian bytes of the result), written the way a
zarr-python 3 user writes it: the array opened once at startup with the async API
(``zarr.api.asynchronous.open_array``) over ``zarr.storage.ObjectStore`` and obstore's
``S3Store``, each request one ``await arr.getitem(selection)``. Run by bench_service in
the ``zarr34-service`` peer venv (Python 3.12) under uvicorn; ``AZARR_PEER_DATASET`` is
JSON ``{"bucket", "prefix", "path", "endpoint", "key", "secret"}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import numpy as np
import zarr
import zarr.api.asynchronous as za
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse, Response
from zarr.storage import ObjectStore

from benchmarks.obstore_s3 import obstore_s3

DATASET = json.loads(os.environ.get("AZARR_PEER_DATASET", "{}"))
arrays: dict[str, Any] = {}


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    inner = obstore_s3(
        DATASET["bucket"], DATASET["prefix"], DATASET["endpoint"], DATASET["key"], DATASET["secret"]
    )
    arrays["a"] = await za.open_array(
        store=ObjectStore(inner, read_only=True), path=DATASET["path"], mode="r"
    )
    yield


app = FastAPI(lifespan=lifespan)


def _selection(sel: str) -> tuple[Any, ...]:
    """``"0:10,5"`` -> ``(slice(0, 10), 5)``: the slices and integers bench_service sends."""
    out: list[Any] = []
    for part in sel.split(","):
        if ":" in part:
            start, stop = part.split(":")
            out.append(slice(int(start) if start else None, int(stop) if stop else None))
        else:
            out.append(int(part))
    return tuple(out)


@app.get("/slice/d/a")
async def slice_(sel: str, format: str = "raw") -> Response:
    try:
        selection = _selection(sel)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from exc
    data = np.asarray(await arrays["a"].getitem(selection))
    if format == "json":
        return JSONResponse({"data": data.tolist()})
    return Response(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).tobytes())


@app.get("/health")
async def health() -> dict[str, Any]:
    return {"ok": True, "zarr": zarr.__version__}
