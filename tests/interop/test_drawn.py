"""Drawn arrays, both ways: Zarr v3 (sharded or not) against zarr-python 3.4 and TensorStore,
Zarr v2 against zarr-python 2.18.

The corpus tests (test_read_zarr2.py, test_write_for_zarr2.py, test_v3_interop.py,
test_sharding_interop.py) cover every data type and codec chain on chosen shapes. Here the
shapes are drawn: `test_selection.specs` (0-d to 4-d, zero-length dimensions, edge chunks,
shards of 1-3 inner chunks a side reaching past the array's end, C/F order, either chunk key
separator and v3 encoding, ``write_empty_chunks`` on and off, a basic selection written and
the rest left to fill_value), derandomized so every run draws the same `DRAWN` arrays per
format. azarr writes each; the reference interpreter (``v3_scripts/ref_drawn.py``,
``ref_scripts/drawn_v2.py``) reads them and writes each itself (v3: with zarr-python 3.4 and
TensorStore) for azarr to read. Every read must equal the NumPy model bit for bit. One
reference interpreter start per format.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import azarr
from azarr.storage import LocalStore
from tests.test_selection import Spec, make_array, specs

from .conftest import RunRef
from .refenv_v3 import v3_reference_python_or_fail

pytestmark = pytest.mark.interop

V3_SCRIPT = Path(__file__).resolve().parent / "v3_scripts" / "ref_drawn.py"
DRAWN = int(os.environ.get("AZARR_INTEROP_DRAWN", "300"))


def _drawn(layouts: tuple[str, ...]) -> list[Spec]:
    found: list[Spec] = []

    @settings(
        max_examples=DRAWN,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(spec=specs(max_cells=400, max_chunks=60, layouts=layouts))
    def collect(spec: Spec) -> None:
        found.append(spec)

    collect()
    return found


def _compressor(spec: Spec) -> str | None:
    """``spec``'s compressor by the names the reference scripts know: None, "default" (v2:
    Blosc; v3: Zstd level 0, azarr's and zarr-python 3's default), "zlib" (v2) or "gzip" (v3,
    for `specs`' Zlib, which Zarr v3 has no core codec for: gzip on both sides)."""
    if spec.compressor is None or spec.compressor == "default":
        return spec.compressor
    return "zlib" if spec.zarr_format == 2 else "gzip"


def _written(spec: Spec) -> tuple[str | None, Any, np.ndarray | None]:
    """How the reference scripts write ``spec.written``: ("box", [[start, stop], ...]) when
    it is a box of unit steps, else ("mask", None) with the Boolean mask; (None, None) for
    nothing."""
    if spec.written is None or math.prod(spec.shape) == 0:
        return None, None, None
    mask = np.zeros(spec.shape, dtype=bool)
    mask[spec.written] = True
    if not mask.any():
        return None, None, None
    if mask.ndim == 0:
        return "box", [], mask
    box = [[int(w.min()), int(w.max()) + 1] for w in np.nonzero(mask)]
    if mask.sum() == math.prod(b - a for a, b in box):
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
    v3_fill = 0 if spec.fill_value is None else spec.fill_value  # v3 has no null fill value
    return {
        "i": i,
        "shape": spec.shape,
        "chunks": spec.chunks,
        "shards": spec.shards,
        "dtype": spec.dtype.str,
        "order": spec.order,
        "fill_value": spec.fill_value if spec.zarr_format == 2 else v3_fill,
        "compressor": _compressor(spec),
        "key_encoding": spec.key_encoding,
        "separator": spec.separator,
        "write_empty_chunks": spec.write_empty_chunks,
        "written": kind,
        "box": box,
        "spec": repr(spec),
    }


def _prepare(root: Path, layouts: tuple[str, ...]) -> list[dict[str, Any]]:
    """azarr writes the drawn arrays of ``layouts`` under ``root/azarr``; their cases."""
    for folder in ("data", "mask", "expected", "azarr", "zarr", "ts"):
        (root / folder).mkdir()
    cases = []

    async def write_all() -> None:
        for i, spec in enumerate(_drawn(layouts)):
            if _compressor(spec) == "gzip":
                spec = dataclasses.replace(spec, compressor=numcodecs.GZip(level=1))
            await make_array(spec, LocalStore(root / "azarr" / str(i)), "")
            cases.append(_case(i, spec, root))

    asyncio.run(write_all())
    (root / "cases.json").write_text(json.dumps(cases))
    return cases


def _result(stdout: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def v3_exchange(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = v3_reference_python_or_fail()
    root = tmp_path_factory.mktemp("drawn-v3")
    cases = _prepare(root, ("v3", "sharded"))
    proc = subprocess.run(
        [str(python), str(V3_SCRIPT), str(root)], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "cases": cases, **_result(proc.stdout)}


@pytest.fixture(scope="module")
def v2_exchange(tmp_path_factory: pytest.TempPathFactory, run_ref_script: RunRef) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("drawn-v2")
    cases = _prepare(root, ("v2",))
    ran = run_ref_script("drawn_v2.py", root)
    assert ran.returncode == 0, ran.report
    return {"root": root, "cases": cases, **_result(ran.stdout)}


def _check_reads(exchange: dict[str, Any]) -> None:
    """Every read the reference made of what azarr wrote returned the model."""
    wrong = {k: v for k, v in exchange["read"].items() if v != "ok"}
    by_case = {str(c["i"]): c["spec"] for c in exchange["cases"]}
    assert not wrong, "\n".join(
        f"{k}: {v}\n    {by_case[k.split('/')[0]]}" for k, v in list(wrong.items())[:10]
    )
    assert len(exchange["read"]) >= DRAWN


def _check_azarr_reads(exchange: dict[str, Any], writer: str = "zarr") -> int:
    """azarr reads every case ``writer`` ("zarr" or "ts") wrote as the model says; returns
    how many it read."""
    root: Path = exchange["root"]
    refused = {k.removesuffix("/ts") for k in exchange["refused"] if k.endswith("/ts") == (writer == "ts")}
    # The references may refuse a drawn case: the rest must read back.
    assert len(refused) < len(exchange["cases"]) // 3, exchange["refused"]
    read = 0

    async def read_all() -> dict[str, str]:
        nonlocal read
        wrong = {}
        for case in exchange["cases"]:
            name = str(case["i"])
            if name in refused or not (root / writer / name).exists():
                continue
            expected = np.load(root / "expected" / f"{name}.npy")
            arr = await azarr.open_array(str(root / writer / name), mode="r")
            got = np.asarray(await arr.get_basic_selection(...))
            read += 1
            if got.shape != expected.shape or not np.array_equal(got, expected):
                wrong[name] = f"{got.ravel()[:6]} != {expected.ravel()[:6]}: {case['spec']}"
        return wrong

    wrong = asyncio.run(read_all())
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in list(wrong.items())[:10])
    return read


def test_zarr_python_3_and_tensorstore_read_what_azarr_wrote(v3_exchange: dict[str, Any]) -> None:
    _check_reads(v3_exchange)  # zarr-python for every case, TensorStore too


def test_azarr_reads_what_zarr_python_3_wrote(v3_exchange: dict[str, Any]) -> None:
    _check_azarr_reads(v3_exchange)


def test_azarr_reads_what_tensorstore_wrote(v3_exchange: dict[str, Any]) -> None:
    # Every case but the 0-d and the datetime ones (TensorStore's zarr3 driver has neither).
    assert _check_azarr_reads(v3_exchange, "ts") >= DRAWN // 2


def test_zarr_python_2_reads_what_azarr_wrote(v2_exchange: dict[str, Any]) -> None:
    _check_reads(v2_exchange)


def test_azarr_reads_what_zarr_python_2_wrote(v2_exchange: dict[str, Any]) -> None:
    _check_azarr_reads(v2_exchange)
