"""``azarr bench``: a quick read-throughput probe of one array in a bucket path.

Reads whole chunk-rows (along the first axis) of an array through the normal
read path, a few dozen chunks per call, until the array or the time budget
ends, then reports decoded and stored bytes per second, chunks per second and
the store's request counters (``azarr.scheduler.stats_for``). It measures this
machine's link to the store, not azarr alone: run it from where the work runs.
"""

from __future__ import annotations

import math
import time
from typing import Any

import click

from azarr import AsyncArray, AsyncGroup
from azarr.cli._app import Session, command
from azarr.cli._format import display_url, human_bytes
from azarr.cli._inspect import open_node
from azarr.scheduler import set_budget, stats_for

#: Chunks requested per read call: enough to fill a request budget of 64.
_CHUNKS_PER_CALL = 64


async def _largest_array(group: AsyncGroup) -> AsyncArray:
    arrays = [node async for _, node in group.members(None) if isinstance(node, AsyncArray)]
    if not arrays:
        raise click.UsageError(f"no arrays below group {group.name} in {group.store.url}")
    return max(arrays, key=lambda a: (a.nbytes, a.path))


async def probe(arr: AsyncArray, seconds: float) -> dict[str, Any]:
    """Read chunk-rows of ``arr`` for at most about ``seconds``; return the figures."""
    stats = stats_for(arr.store)
    before = stats.as_dict()
    if arr.ndim == 0:
        rows, per_row = 1, 1
    else:
        rows, per_row = arr.cdata_shape[0], math.prod(arr.cdata_shape[1:])
    rows_per_call = max(1, _CHUNKS_PER_CALL // max(per_row, 1))
    decoded = chunks = 0
    start = time.monotonic()
    for first in range(0, rows, rows_per_call):
        last = min(rows, first + rows_per_call)
        if arr.ndim == 0:
            data = await arr.getitem(())
        else:
            data = await arr.getitem(slice(first * arr.chunks[0], last * arr.chunks[0]))
        decoded += getattr(data, "nbytes", 0)
        chunks += (last - first) * per_row
        if time.monotonic() - start >= seconds:
            break
    elapsed = time.monotonic() - start
    after = stats.as_dict()
    stored = after["bytes_read"] - before["bytes_read"]
    return {
        "array": arr.name,
        "seconds": round(elapsed, 3),
        "chunks": chunks,
        "bytes_decoded": decoded,
        "bytes_stored": stored,
        "decoded_bytes_per_second": round(decoded / elapsed) if elapsed else None,
        "stored_bytes_per_second": round(stored / elapsed) if elapsed else None,
        "chunks_per_second": round(chunks / elapsed, 1) if elapsed else None,
        "requests": after["requests"] - before["requests"],
        "retries": after["retries"] - before["retries"],
        "errors": after["errors"] - before["errors"],
        "complete": chunks >= arr.nchunks,
    }


def _text(url: str, r: dict[str, Any], open_seconds: float) -> str:
    rate = r["decoded_bytes_per_second"] or 0
    stored_rate = r["stored_bytes_per_second"] or 0
    return "\n".join(
        [
            f"{url} {r['array']}: open {open_seconds * 1000:.0f} ms",
            f"read {r['chunks']} chunks in {r['seconds']:.2f} s"
            + ("" if r["complete"] else " (time budget reached)"),
            f"decoded {human_bytes(r['bytes_decoded'])} ({human_bytes(rate)}/s), "
            f"stored {human_bytes(r['bytes_stored'])} ({human_bytes(stored_rate)}/s), "
            f"{r['chunks_per_second']} chunks/s",
            f"{r['requests']} requests, {r['retries']} retries, {r['errors']} errors",
        ]
    )


@command("bench")
@click.argument("url")
@click.option("--path", default="", help="Array (or group: its largest array) to read; default the root.")
@click.option(
    "--seconds",
    type=click.FloatRange(min=0),
    default=10.0,
    show_default=True,
    help="Stop after about this long.",
)
@click.option("--max-requests", type=click.IntRange(min=1), help="Requests in flight for the store.")
async def bench(session: Session, url: str, path: str, seconds: float, max_requests: int | None) -> None:
    """A quick read-throughput probe: MB/s decoded and stored, chunks/s, requests and retries."""
    start = time.monotonic()
    node = await open_node(session, url, path)
    open_seconds = time.monotonic() - start
    arr = node if isinstance(node, AsyncArray) else await _largest_array(node)
    if max_requests is not None:
        set_budget(arr.store, max_requests=max_requests)
    result = await probe(arr, seconds)
    result = {"url": display_url(url), "open_seconds": round(open_seconds, 3), **result}
    session.output(result, _text(display_url(url), result, open_seconds))
