"""Sharded Zarr v3 interop (``sharding_indexed``), both ways and bit-exact, with zarr-python 3.4
and TensorStore's zarr3 driver.

The corpus (``v3_scripts/shard_cases.py``: inner chains -- raw, Zstd, big-endian Blosc +
crc32c, gzip + crc32c, a ``transpose`` (F-order inner chunks) -- x index at the start or the
end, with or without its crc32c, little- or big-endian x 1-3 dimensions, edge shards and edge
inner chunks partial, a row of empty inner chunks in shards that hold stored ones) is written
by zarr-python 3.4 and TensorStore in their venv and read here; azarr writes the same cases,
whole and then in part (conditional read-modify-writes of shards), and the reference script
reads them with both. One reference interpreter start for everything (~10 s).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import azarr.sync

from .refenv_v3 import v3_reference_python_or_fail

pytestmark = pytest.mark.interop

SCRIPTS = Path(__file__).resolve().parent / "v3_scripts"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"azarr_{name}", SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


VALUES = _load("v3_cases")
CASES = _load("shard_cases")


@pytest.fixture(scope="module")
def exchange(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = v3_reference_python_or_fail()
    root = tmp_path_factory.mktemp("shard-corpus")
    _write_azarr(root / "azarr-shards")
    proc = subprocess.run(
        [str(python), str(SCRIPTS / "ref_v3.py"), "shards", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"root": root, **result}


def _dtype(case: dict[str, Any]) -> Any:
    spec = VALUES.DTYPES[case["dtype"]][0]
    return str if spec == "str" else VALUES.numpy_dtype(case["dtype"])


def _write_azarr(root: Path) -> None:
    """Every case written by azarr: most whole shards at once, every third case in two
    partial writes (so its shards are read-modify-written, conditionally)."""
    for i, case in enumerate(CASES.cases()):
        shape = tuple(case["shape"])
        array = azarr.sync.create(
            shape,
            chunks=tuple(case["shards"]),
            dtype=_dtype(case),
            fill_value=VALUES.fill_value(case["dtype"]),
            store=str(root / case["name"]),
            zarr_format=3,
            codecs=case["codecs"],
            write_empty_chunks=False,
        )
        region = CASES.written(case)
        data = VALUES.values(case["dtype"], shape)
        if i % 3:
            array[region] = data[region]
            continue
        rows = region[0].stop
        half = rows // 2 + 1  # not on a shard or inner chunk boundary
        for part in (slice(0, half), slice(half, rows)):
            sel = (part, *region[1:])
            array[sel] = data[sel]


def _read_all(root: Path) -> dict[str, str]:
    failures: dict[str, str] = {}
    for case in CASES.cases():
        try:
            array = azarr.sync.open_array(str(root / case["name"]), mode="r")
            got = array[...]
        except Exception as exc:
            failures[case["name"]] = f"{type(exc).__name__}: {exc}"
            continue
        if array.shards != tuple(case["shards"]) or not VALUES.same(got, CASES.expected(case)):
            failures[case["name"]] = f"differs: {np.asarray(got).ravel()[:6]!r}"
    return failures


def test_corpus_covers_the_matrix() -> None:
    cases = CASES.cases()
    assert len(cases) >= 60
    locations = {c["codecs"][0]["configuration"]["index_location"] for c in cases}
    assert locations == {"start", "end"}
    assert any(c["codecs"][0]["configuration"]["codecs"][0]["name"] == "transpose" for c in cases)
    assert {len(c["shape"]) for c in cases} == {1, 2, 3}


def test_azarr_reads_what_zarr_python_wrote(exchange: dict[str, Any]) -> None:
    assert _read_all(exchange["root"] / "zarr-shards") == {}


def test_azarr_reads_what_tensorstore_wrote(exchange: dict[str, Any]) -> None:
    assert exchange["ts_refused"] == {}
    root = exchange["root"] / "ts-shards"
    failures = {k: v for k, v in _read_all(root).items() if (root / k).exists()}
    assert failures == {}
    assert sum(1 for c in CASES.cases() if c["ts"] and (root / c["name"]).exists()) >= 50


def test_zarr_python_and_tensorstore_read_what_azarr_wrote(exchange: dict[str, Any]) -> None:
    results: dict[str, str] = exchange["read"]
    assert {k: v for k, v in results.items() if v != "ok"} == {}
    assert (
        sum(k.startswith("ts:") for k in results) >= 50 and sum(k.startswith("zarr:") for k in results) >= 60
    )
