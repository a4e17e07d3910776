"""TensorStore side of tests/interop/test_tensorstore_dtypes.py (runs in the TensorStore peer venv).

``write DIR``  TensorStore writes one zarr2 array per ml_dtypes type under DIR/<name>
               (Blosc, 2x2 chunks of a 5x3 array, one chunk left unwritten, a fill value)
               and the values it wrote as raw bytes in DIR/<name>.bin.
``read DIR``   TensorStore opens every DIR/<name> azarr wrote and prints, per array, its
               dtype name, fill value and the hex of its values' bytes (JSON, one object).
"""

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import tensorstore as ts

FLOATS = [
    "bfloat16",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e4m3b11fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
]
INTS = ["int4"]
FILLS = {"bfloat16": "NaN", "float8_e5m2": "-Infinity", "int4": -3}


def values(name: str) -> np.ndarray:
    dtype = np.dtype(getattr(ml_dtypes, name))
    rng = np.random.default_rng(17)
    if name in INTS:
        return rng.integers(-8, 8, size=(5, 3)).astype(dtype)
    bits = rng.integers(0, 1 << (8 * dtype.itemsize), size=(5, 3), dtype=f"u{dtype.itemsize}")
    return bits.view(dtype)


def spec(path: Path, name: str) -> dict:
    return {"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)}}


def write(root: Path) -> None:
    for name in FLOATS + INTS:
        data = values(name)
        metadata = {
            "dtype": name,
            "shape": [5, 3],
            "chunks": [2, 2],
            "compressor": {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1},
            "fill_value": FILLS.get(name, 0.5 if name in FLOATS else 1),
        }
        arr = ts.open({**spec(root / name, name), "metadata": metadata}, create=True).result()
        # leave chunk (2, 1) (rows 4, cols 2) unwritten: it reads as the fill value
        arr[0:4, :].write(data[0:4, :]).result()
        arr[4:5, 0:2].write(data[4:5, 0:2]).result()
        (root / f"{name}.bin").write_bytes(arr.read().result().tobytes())


def read(root: Path) -> None:
    out = {}
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        arr = ts.open(spec(path, path.name), open=True).result()
        data = arr.read().result()
        fill = arr.fill_value
        out[path.name] = {
            "dtype": arr.dtype.name,
            "shape": list(arr.shape),
            "fill_value": None if fill is None else float(np.asarray(fill).astype(np.float64)),
            "hex": data.tobytes().hex(),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    {"write": write, "read": read}[sys.argv[1]](Path(sys.argv[2]))
