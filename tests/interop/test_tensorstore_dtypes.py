"""TensorStore's zarr2 ml_dtypes types (bfloat16, float8_*, int4): read and written as TensorStore does.

TensorStore runs in the benchmark peer venv (``benchmarks/peers.py``, built once under
``.cache/bench-venvs/tensorstore``; ``AZARR_BENCH_TENSORSTORE_PYTHON`` overrides), driven by
``ts_scripts/ts_dtypes.py``. Arrays TensorStore writes must read bit-exact here, and arrays
azarr writes must open in TensorStore with the same dtype, fill value and bytes.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import ModuleType

import ml_dtypes
import numpy as np
import pytest

import azarr
from tests.util import load_module

pytestmark = pytest.mark.interop

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "ts_scripts" / "ts_dtypes.py"
FLOATS = [
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e4m3b11fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
]
NAMES = [*FLOATS, "int4"]
FILLS = {"bfloat16": "NaN", "float8_e5m2": "-Infinity", "int4": -3}


def _peers() -> ModuleType:
    return load_module(HERE.parent.parent / "benchmarks" / "peers.py", "azarr_test_peers")


@pytest.fixture(scope="session")
def tensorstore_python() -> Path:
    peers = _peers()
    try:
        return Path(peers.ensure_peer_python("tensorstore", report=lambda msg: None))
    except peers.PeerError as exc:
        pytest.fail(f"TensorStore peer venv unavailable:\n{exc}", pytrace=False)


def _run(python: Path, *args: str | Path) -> str:
    proc = subprocess.run(
        [str(python), "-E", "-s", str(SCRIPT), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def ts_written(tensorstore_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-dtypes")
    _run(tensorstore_python, "write", root)
    return root


@pytest.mark.parametrize("name", NAMES)
async def test_reads_tensorstore_arrays_bit_exact(ts_written: Path, name: str) -> None:
    document = json.loads((ts_written / name / ".zarray").read_text())
    assert document["dtype"] == name  # the literal TensorStore writes
    arr = await azarr.open_array(str(ts_written / name), mode="r")
    assert arr.dtype == np.dtype(getattr(ml_dtypes, name))
    data = await arr.getitem(...)
    assert data.dtype == arr.dtype and data.shape == (5, 3)
    assert data.tobytes() == (ts_written / f"{name}.bin").read_bytes()
    expected_fill = FILLS.get(name, 0.5 if name in FLOATS else 1)
    if expected_fill == "NaN":
        assert np.isnan(float(arr.fill_value))
    elif expected_fill == "-Infinity":
        assert float(arr.fill_value) == -np.inf
    else:
        assert float(arr.fill_value) == expected_fill
    # the unwritten chunk reads as the fill value, bit for bit
    fill_bits = np.array(arr.fill_value, dtype=arr.dtype).tobytes()
    assert data[4:5, 2:3].tobytes() == fill_bits


async def test_tensorstore_opens_arrays_azarr_writes(tensorstore_python: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    written: dict[str, np.ndarray] = {}
    for name in NAMES:
        dtype = np.dtype(getattr(ml_dtypes, name))
        if name == "int4":
            data = rng.integers(-8, 8, size=(7, 5)).astype(dtype)
        else:
            data = rng.integers(0, 1 << (8 * dtype.itemsize), size=(7, 5), dtype=f"u{dtype.itemsize}").view(
                dtype
            )
        # the dtype by name, as a user coming from TensorStore writes it
        arr = await azarr.create(
            (7, 5), chunks=(3, 2), dtype=name, fill_value=FILLS.get(name, 1), store=str(tmp_path / name)
        )
        await arr.setitem(..., data)
        document = json.loads((tmp_path / name / ".zarray").read_text())
        assert document["dtype"] == name
        written[name] = data
    seen = json.loads(_run(tensorstore_python, "read", tmp_path))
    assert sorted(seen) == sorted(NAMES)
    for name, data in written.items():
        assert seen[name]["dtype"] == name
        assert seen[name]["shape"] == [7, 5]
        assert bytes.fromhex(seen[name]["hex"]) == data.tobytes(), name
        expected_fill = {"NaN": np.nan, "-Infinity": -np.inf}.get(str(FILLS.get(name)), FILLS.get(name, 1))
        if np.isnan(expected_fill):
            assert np.isnan(seen[name]["fill_value"])
        else:
            assert seen[name]["fill_value"] == expected_fill


async def test_zarr2_url_form_opens_tensorstore_output(ts_written: Path) -> None:
    url = (ts_written / "bfloat16").as_uri() + "|zarr2:"
    arr = await azarr.open_zarr2(url, read_only=True, dtype="bfloat16", shape=[5, 3], chunks=[2, 2], rank=2)
    assert (await arr.getitem(...)).tobytes() == (ts_written / "bfloat16.bin").read_bytes()
    with pytest.raises(azarr.errors.MetadataError, match="chunks"):
        await azarr.open_zarr2(url, read_only=True, shape=[5, 3], chunks=[4, 4])
