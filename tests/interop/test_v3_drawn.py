"""Drawn Zarr v3 arrays, sharded or not, both ways against zarr-python 3.4 and TensorStore.

The corpus tests (test_v3_interop.py, test_sharding_interop.py) cover every data type and
codec chain on chosen shapes. Here the shapes are drawn: `test_selection.specs` (0-d to 4-d,
zero-length dimensions, edge chunks, shards of 1-3 inner chunks a side reaching past the
array's end, C/F order, either chunk key encoding and separator, ``write_empty_chunks`` on
and off, a basic selection written with data and the rest left to fill_value), derandomized
so every run draws the same `DRAWN` arrays. azarr writes each, and the reference interpreter
(``v3_scripts/ref_drawn.py``) reads them with zarr-python 3.4 and TensorStore and writes each
with zarr-python 3.4 for azarr to read; every read must equal the NumPy model bit for bit.
One reference interpreter start for everything.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import azarr
from azarr.storage import LocalStore
from tests.test_selection import Spec, make_array, specs

from .refenv import RefEnvError
from .refenv_v3 import ensure_v3_reference_python

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).resolve().parent / "v3_scripts" / "ref_drawn.py"
DRAWN = int(os.environ.get("AZARR_INTEROP_DRAWN", "300"))


def _compressor(spec: Spec) -> str | None:
    """``spec``'s compressor by the name ref_drawn.py knows: None, "zstd" (azarr's and
    zarr-python 3's default, level 0) or "gzip" (`specs`' Zlib, which Zarr v3 has no core
    codec for: written as gzip on both sides)."""
    return None if spec.compressor is None else "zstd" if spec.compressor == "default" else "gzip"


def _drawn() -> list[Spec]:
    found: list[Spec] = []

    @settings(
        max_examples=DRAWN,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=specs(max_cells=400, max_chunks=60, layouts=("v3", "sharded")))
    def collect(spec: Spec) -> None:
        found.append(spec)

    collect()
    return found


def _written(spec: Spec) -> tuple[str | None, Any, np.ndarray | None]:
    """How ref_drawn.py writes ``spec.written``: ("box", [[start, stop], ...]) when it is a
    box of unit steps, else ("mask", None) with the Boolean mask; (None, None) for nothing."""
    if spec.written is None or math.prod(spec.shape) == 0:
        return None, None, None
    mask = np.zeros(spec.shape, dtype=bool)
    mask[spec.written] = True
    if not mask.any():
        return None, None, None
    if mask.ndim == 0:
        return "box", [], mask
    where = np.nonzero(mask)
    box = [[int(w.min()), int(w.max()) + 1] for w in where]
    if (
        mask.ndim
        and mask[tuple(slice(a, b) for a, b in box)].all()
        and mask.sum() == math.prod(b - a for a, b in box)
    ):
        return "box", box, mask
    return "mask", None, mask


def _case(i: int, spec: Spec, root: Path) -> dict[str, Any]:
    kind, box, mask = _written(spec)
    data = spec.data()
    if kind == "box":
        np.save(root / "data" / f"{i}.npy", data[tuple(slice(a, b) for a, b in box)])
    elif kind == "mask":
        np.save(root / "mask" / f"{i}.npy", mask)
        np.save(root / "data" / f"{i}.npy", data[mask])
    np.save(root / "expected" / f"{i}.npy", spec.model())
    return {
        "i": i,
        "shape": spec.shape,
        "chunks": spec.chunks,
        "shards": spec.shards,
        "dtype": spec.dtype.str,
        "order": spec.order,
        "fill_value": 0 if spec.fill_value is None else spec.fill_value,
        "compressor": _compressor(spec),
        "key_encoding": spec.key_encoding,
        "separator": spec.separator,
        "write_empty_chunks": spec.write_empty_chunks,
        "written": kind,
        "box": box,
        "spec": repr(spec),
    }


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    try:
        python = ensure_v3_reference_python(lambda msg: print(msg, file=sys.stderr, flush=True))
    except RefEnvError as exc:
        pytest.fail(f"Zarr v3 reference environment unavailable:\n{exc}", pytrace=False)
    root = tmp_path_factory.mktemp("drawn")
    for folder in ("data", "mask", "expected", "azarr", "zarr"):
        (root / folder).mkdir()
    drawn = _drawn()
    cases = []

    async def write_all() -> None:
        for i, spec in enumerate(drawn):
            spec = _with_gzip(spec) if _compressor(spec) == "gzip" else spec
            await make_array(spec, LocalStore(root / "azarr" / str(i)), "")
            cases.append(_case(i, spec, root))

    asyncio.run(write_all())
    (root / "cases.json").write_text(json.dumps(cases))
    proc = subprocess.run(
        [str(python), str(SCRIPT), str(root)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "cases": cases, **json.loads(proc.stdout.strip().splitlines()[-1])}


def _with_gzip(spec: Spec) -> Spec:
    import dataclasses

    import numcodecs

    return dataclasses.replace(spec, compressor=numcodecs.GZip(level=1))


def test_zarr_python_and_tensorstore_read_what_azarr_wrote(exchange: dict[str, Any]) -> None:
    wrong = {k: v for k, v in exchange["read"].items() if v != "ok"}
    by_case = {str(c["i"]): c["spec"] for c in exchange["cases"]}
    assert not wrong, "\n".join(
        f"{k}: {v}\n    {by_case[k.split('/')[0]]}" for k, v in list(wrong.items())[:10]
    )
    assert len(exchange["read"]) >= DRAWN  # zarr-python for every case, TensorStore for most


def test_azarr_reads_what_zarr_python_wrote(exchange: dict[str, Any]) -> None:
    root: Path = exchange["root"]
    refused = exchange["refused"]
    # zarr-python 3.4 cannot write a 0-d array's chunks=() or a negative step: the rest, all.
    assert len(refused) < len(exchange["cases"]) // 3, refused

    async def read_all() -> dict[str, str]:
        wrong = {}
        for case in exchange["cases"]:
            name = str(case["i"])
            if name in refused:
                continue
            expected = np.load(root / "expected" / f"{name}.npy")
            arr = await azarr.open_array(str(root / "zarr" / name), mode="r")
            got = np.asarray(await arr.get_basic_selection(...))
            if got.shape != expected.shape or not np.array_equal(got, expected):
                wrong[name] = f"{got.ravel()[:6]} != {expected.ravel()[:6]}: {case['spec']}"
        return wrong

    wrong = asyncio.run(read_all())
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in list(wrong.items())[:10])
