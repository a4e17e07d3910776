"""Fuzzing kerchunk reference documents: a mutated document gives data or an AzarrError.

A valid version 1 document (inline, base64, ranged and templated references, a ``gen``
block, a v2 array and group) has one to four of its members, at any depth, replaced by a
hostile value (`fuzz_stores.HOSTILE_VALUES` and reference-specific ones: undefined
templates, gen dimensions of 10**12 keys, paths that escape, foreign schemes, documents
that are no JSON), then its group and arrays are opened and read through `ReferenceStore`.
Every outcome is data or an `AzarrError`, within `CASE_SECONDS` and 256 MiB of peak RSS
growth. ``AZARR_FUZZ_EXAMPLES`` sets the count as in test_fuzz.py (a third of it here).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_stores import HOSTILE_VALUES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rss import MiB, measure_rss

import azarr
from azarr.errors import AzarrError

EXAMPLES = max(50, int(os.environ.get("AZARR_FUZZ_EXAMPLES", "300")) // 3)
CASE_SECONDS = 5.0
DATA = np.arange(40, dtype="<i4")

REFERENCE_VALUES: list[Any] = [
    "{{u}}",
    "{{nope}}",
    "{{i * 10**9}}",
    "{{i}}",
    "'x' * 99",
    "base64:",
    "base64:AAAA",
    "base64:!!",
    "x/.zarray",
    "../etc/passwd",
    "/etc/passwd",
    "file:///etc/passwd",
    "s3://someone-elses-bucket/key",
    "http://127.0.0.1:1/x",
    {"start": 0, "stop": 10**12},
    {"start": 0, "stop": 5, "step": 0},
    {"start": 5, "stop": 0, "step": -1},
    list(range(5)),
    '{"zarr_format": 2}',
    '{"zarr_format": 3, "node_type": "array"}',
    "not json",
]


def document(blob: Path) -> dict[str, Any]:
    """The valid document every case mutates: ``x`` (four chunks: a templated range, plain
    ranges, base64) and ``y`` (four ``gen`` references), both reading `DATA`."""
    zarray = {
        "zarr_format": 2, "shape": [40], "chunks": [10], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": 0, "order": "C",
    }  # fmt: skip
    refs = {
        ".zgroup": '{"zarr_format": 2}',
        "x/.zarray": json.dumps(zarray),
        "x/.zattrs": '{"_ARRAY_DIMENSIONS": ["t"]}',
        "x/0": ["{{u}}", 0, 40],
        "x/1": [str(blob), 40, 40],
        "x/2": "base64:" + base64.b64encode(DATA[20:30].tobytes()).decode(),
        "x/3": [str(blob), 120, 40],
        "y/.zarray": json.dumps(zarray),
    }
    gen = {
        "key": "y/{{i}}",
        "url": "{{u}}",
        "offset": "{{i * 40}}",
        "length": "40",
        "dimensions": {"i": {"start": 0, "stop": 4}},
    }
    return {"version": 1, "templates": {"u": str(blob)}, "refs": refs, "gen": [gen]}


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every member's path in ``doc`` (the document itself excluded)."""
    members = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for name, value in members:
        yield (*prefix, name)
        yield from _paths(value, (*prefix, name))


@st.composite
def hostile_documents(draw: st.DrawFn, blob: Path) -> dict[str, Any]:
    doc = document(blob)
    for _ in range(draw(st.integers(1, 4), label="mutations")):
        path = draw(st.sampled_from(list(_paths(doc))), label="member")
        value = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES + REFERENCE_VALUES), label="value"))
        parent = doc
        for name in path[:-1]:
            parent = parent[name]
        parent[path[-1]] = value
    return doc


async def _open_and_read(doc: dict[str, Any]) -> None:
    try:
        await azarr.open_group(doc, mode="r")
    except AzarrError:
        pass
    for path in ("x", "y"):
        try:
            arr = await azarr.open_array(doc, path=path, mode="r")
            await arr.getitem(...)
        except AzarrError:
            pass


def test_the_document_reads_back_unmutated(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(DATA.tobytes())

    async def read() -> tuple[Any, Any]:
        doc = document(blob)
        x = await (await azarr.open_array(doc, path="x", mode="r")).getitem(...)
        return x, await (await azarr.open_array(doc, path="y", mode="r")).getitem(...)

    x, y = asyncio.run(read())
    np.testing.assert_array_equal(x, DATA)
    np.testing.assert_array_equal(y, DATA)


@pytest.mark.timeout(0)
def test_fuzz_mutated_reference_documents(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(DATA.tobytes())
    loop = asyncio.new_event_loop()

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=os.environ.get("AZARR_FUZZ_RANDOM") is None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    @given(doc=hostile_documents(blob))
    def one_case(doc: dict[str, Any]) -> None:
        start = time.perf_counter()
        loop.run_until_complete(_open_and_read(doc))
        elapsed = time.perf_counter() - start
        assert elapsed < CASE_SECONDS, f"took {elapsed:.1f} s: {json.dumps(doc, default=str)[:500]}"

    try:
        with measure_rss() as growth:
            one_case()
    finally:
        loop.close()
    assert growth.bytes < 256 * MiB, f"peak RSS grew by {growth.bytes / MiB:.0f} MiB"
