"""Fuzzing kerchunk reference sets: a mutated one gives data or an AzarrError.

JSON: a valid version 1 document (inline, base64, ranged and templated references, a ``gen``
block, a v2 array and group) has one to four of its members, at any depth, replaced by a
hostile value (`fuzz_stores.HOSTILE_VALUES` and reference-specific ones: undefined
templates, gen dimensions of 10**12 keys, paths that escape, foreign schemes, documents
that are no JSON), then its group and arrays are opened and read through `ReferenceStore`.
Parquet (fsspec's ``LazyReferenceMapper`` layout): the ``.zmetadata`` index has members
replaced, the two record files get hostile cells (sizes past 2**62, NUL in paths, wrong
types), lose columns, have bytes flipped or are cut short.
Every outcome is data or an `AzarrError`, within `CASE_SECONDS` and 256 MiB of peak RSS
growth. ``AZARR_FUZZ_EXAMPLES`` sets the count as in test_fuzz.py (a third of it here for
documents, a tenth for Parquet sets: every case writes files).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import io
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz_stores import HOSTILE_VALUES, fuzz_settings
from hypothesis import given
from hypothesis import strategies as st
from rss import MiB, measure_rss

import azarr
from azarr.errors import AzarrError
from azarr.storage import ReferenceStore

EXAMPLES = max(50, int(os.environ.get("AZARR_FUZZ_EXAMPLES", "300")) // 3)
PARQUET_EXAMPLES = max(30, int(os.environ.get("AZARR_FUZZ_EXAMPLES", "300")) // 10)
CASE_SECONDS = 5.0
DATA = np.arange(40, dtype="<i4")
#: The one array of every reference set here (``x``, and ``y`` of JSON documents): `DATA`.
ZARRAY = {
    "zarr_format": 2, "shape": [40], "chunks": [10], "dtype": "<i4",
    "compressor": None, "filters": None, "fill_value": 0, "order": "C",
}  # fmt: skip

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
    zarray = ZARRAY
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

    @fuzz_settings(EXAMPLES)
    @given(doc=hostile_documents(blob))
    def one_case(doc: dict[str, Any]) -> None:
        _timed(loop, _open_and_read(doc), doc)

    _within_memory(loop, one_case)


def _timed(loop: asyncio.AbstractEventLoop, case: Any, described_by: Any) -> None:
    """Run one case's coroutine; it must end within `CASE_SECONDS`."""
    start = time.perf_counter()
    loop.run_until_complete(case)
    elapsed = time.perf_counter() - start
    assert elapsed < CASE_SECONDS, f"took {elapsed:.1f} s: {json.dumps(described_by, default=str)[:500]}"


def _within_memory(loop: asyncio.AbstractEventLoop, cases: Any) -> None:
    """Run every case of a fuzzer; peak RSS may grow by 256 MiB at most."""
    try:
        with measure_rss() as growth:
            cases()
    finally:
        loop.close()
    assert growth.bytes < 256 * MiB, f"peak RSS grew by {growth.bytes / MiB:.0f} MiB"


# ------------------------------------------------------------------ Parquet reference sets

RECORD_SIZE = 3
CELLS: list[Any] = [None, 0, -1, 2**62, 2**63 - 1, "x", b"x", 1.5, float("nan"), "/etc/passwd", "../b",
                    "s3://someone-elses-bucket/key", "a\x00b", b"\x00" * 100]  # fmt: skip


def _columns(blob: Path) -> dict[str, list[Any]]:
    """The four chunks of ``x``: ranges of the blob, and one inline (raw) chunk."""
    return {
        "path": [str(blob), str(blob), None, str(blob)],
        "offset": [0, 40, 0, 120],
        "size": [40, 40, 0, 40],
        "raw": [None, None, DATA[20:30].tobytes(), None],
    }


def _parquet(columns: dict[str, list[Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    try:
        pq.write_table(pa.table(columns), buffer)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # cells of mixed types: as text
        buffer = io.BytesIO()
        pq.write_table(
            pa.table({k: [None if v is None else str(v) for v in c] for k, c in columns.items()}), buffer
        )
    return buffer.getvalue()


@st.composite
def hostile_parquet_sets(draw: st.DrawFn, blob: Path) -> tuple[Any, list[bytes]]:
    index: Any = {
        "metadata": {".zgroup": {"zarr_format": 2}, "x/.zarray": ZARRAY},
        "record_size": RECORD_SIZE,
    }
    for _ in range(draw(st.integers(0, 2), label="index mutations")):
        value = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES), label="value"))
        where = draw(st.sampled_from(["record_size", "metadata", "x/.zarray", "zarray member", "index"]))
        if where == "record_size":
            index["record_size"] = value
        elif where == "metadata":
            index["metadata"] = value
        elif where == "index":
            index = value
        elif isinstance(index.get("metadata"), dict):
            if where == "x/.zarray":
                index["metadata"]["x/.zarray"] = value
            else:
                zarray = dict(ZARRAY)
                zarray[draw(st.sampled_from(sorted(zarray)), label="member")] = value
                index["metadata"]["x/.zarray"] = zarray
        if not isinstance(index, dict):
            break
    records = []
    full = _columns(blob)
    for i in range(2):
        columns = {k: list(v[i * RECORD_SIZE : (i + 1) * RECORD_SIZE]) for k, v in full.items()}
        for _ in range(draw(st.integers(0, 2), label="cells")):
            name = draw(st.sampled_from(sorted(columns)), label="column")
            row = draw(st.integers(0, len(columns[name]) - 1), label="row")
            columns[name][row] = draw(st.sampled_from(CELLS), label="cell")
        if draw(st.integers(0, 5), label="drop a column") == 0:
            del columns[draw(st.sampled_from(sorted(columns)), label="dropped")]
        data = bytearray(_parquet(columns))
        for _ in range(draw(st.integers(0, 2), label="flips")):
            data[draw(st.integers(0, len(data) - 1))] ^= draw(st.integers(1, 255))
        if draw(st.integers(0, 6), label="truncate") == 0:
            del data[draw(st.integers(0, len(data))) :]
        records.append(bytes(data))
    return index, records


def test_fuzz_mutated_parquet_reference_sets(tmp_path: Path) -> None:
    blob = tmp_path / "blob"
    blob.write_bytes(DATA.tobytes())
    loop = asyncio.new_event_loop()
    folder = tmp_path / "set"

    async def read() -> None:
        try:
            arr = await azarr.open_array(ReferenceStore(str(folder)), path="x", mode="r")
            await arr.getitem(...)
        except AzarrError:
            pass

    @fuzz_settings(PARQUET_EXAMPLES)
    @given(case=hostile_parquet_sets(blob))
    def one_case(case: tuple[Any, list[bytes]]) -> None:
        _write_set(folder, *case)
        _timed(loop, read(), case[0])

    # Unmutated, the set reads back.
    index = {"metadata": {".zgroup": {"zarr_format": 2}, "x/.zarray": ZARRAY}, "record_size": RECORD_SIZE}
    records = [
        _parquet({k: v[i * RECORD_SIZE : (i + 1) * RECORD_SIZE] for k, v in _columns(blob).items()})
        for i in range(2)
    ]
    _write_set(folder, index, records)
    got = loop.run_until_complete(_read_x(folder))
    np.testing.assert_array_equal(got, DATA)
    _within_memory(loop, one_case)


def _write_set(folder: Path, index: Any, records: list[bytes]) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "x").mkdir(parents=True)
    (folder / ".zmetadata").write_text(json.dumps(index, default=str))
    for i, data in enumerate(records):
        (folder / "x" / f"refs.{i}.parq").write_bytes(data)


async def _read_x(folder: Path) -> Any:
    return await (await azarr.open_array(ReferenceStore(str(folder)), path="x", mode="r")).getitem(...)
