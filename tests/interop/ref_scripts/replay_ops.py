"""Random operation sequences on zarr-python 2 arrays, replayed in zarr-python 2.18 and `azarr.sync`.

    python replay_ops.py CASES.json   # with the reference interpreter: prints the traces as JSON

`cases` draws the sequences (seeded); `replay` runs them with a zarr-python 2 module (``zarr``
here, ``azarr.sync`` in test_sync_replay.py) and returns one trace per sequence: each
operation's result (values, shape, dtype and type of what a read returned; the shape after a
resize or append; the attributes; the array's metadata) or the built-in class of the error
it raised. Every array has a fill value (with ``null`` zarr-python 2 reads never-written
chunks uninitialised).

Imported by azarr's test as a module; never imports azarr.
"""

from __future__ import annotations

import json
import random
import sys
import warnings
from typing import Any

import numpy as np

DTYPES = ["<i4", ">f8", "<u2", "|b1", "<f4"]
OPERATIONS = ["get", "set", "oget", "oset", "vget", "resize", "append", "attrs", "meta", "whole"]


def _slice(rng: random.Random, n: int) -> list[Any]:
    bounds = [None, 0, 1, -1, n, n + 2, rng.randint(-n - 1, n + 1)]
    return ["S", rng.choice(bounds), rng.choice(bounds), rng.choice([None, 1, 2, 3])]


def _item(rng: random.Random, n: int) -> Any:
    roll = rng.random()
    if roll < 0.5:
        return _slice(rng, n)
    if roll < 0.8 and n:
        return rng.randint(-n, n - 1)
    return rng.randint(-n - 2, n + 2)  # sometimes out of bounds


def cases(seed: int, count: int) -> list[dict[str, Any]]:
    """``count`` sequences of 1-8 operations on a 1-3-d array of 0-7 elements a side."""
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        shape = [rng.randint(0, 7) for _ in range(rng.randint(1, 3))]
        dtype = rng.choice(DTYPES)
        create = {
            "shape": list(shape),
            "chunks": [rng.randint(1, 4) for _ in shape],
            "dtype": dtype,
            "fill": rng.choice([0, True] if dtype == "|b1" else [0, 5]),
            "order": rng.choice("CF"),
        }
        ops: list[list[Any]] = []
        for _ in range(rng.randint(1, 8)):
            name = rng.choice(OPERATIONS)
            if name in ("get", "set"):
                ops.append(
                    [
                        name,
                        ["T", *(_item(rng, n) for n in shape)],
                        *([rng.choice([1, 2, 7])] if name == "set" else []),
                    ]
                )
            elif name in ("oget", "oset"):
                items = [
                    rng.choice([_slice(rng, n), ["A", *sorted(rng.sample(range(n), min(n, 2)))]])
                    if n
                    else _slice(rng, n)
                    for n in shape
                ]
                ops.append([name, ["T", *items], *([4] if name == "oset" else [])])
            elif name == "vget" and all(shape):
                ops.append([name, ["T", *(["A", rng.randrange(n), rng.randrange(n)] for n in shape)]])
            elif name == "resize":
                shape = [rng.randint(0, 8) for _ in shape]
                ops.append([name, list(shape)])
            elif name == "append":
                axis = rng.randrange(len(shape))
                block = list(shape)
                block[axis] = rng.randint(0, 3)
                ops.append([name, block, axis])
                shape[axis] += block[axis]
            elif name == "attrs":
                ops.append([name, {rng.choice("abc"): rng.randint(0, 5)}])
            elif name in ("meta", "whole"):
                ops.append([name])
        drawn.append({"create": create, "ops": ops})
    return drawn


def _selection(encoded: Any) -> Any:
    if isinstance(encoded, list) and encoded and encoded[0] == "S":
        return slice(*encoded[1:])
    if isinstance(encoded, list) and encoded and encoded[0] == "T":
        return tuple(_selection(item) for item in encoded[1:])
    if isinstance(encoded, list) and encoded and encoded[0] == "A":
        return np.array(encoded[1:], dtype=np.intp)
    return encoded


def _shown(value: Any) -> list[Any]:
    array = np.asarray(value)
    return [list(array.shape), str(array.dtype), array.tolist(), type(value).__name__]


def _error(exc: BaseException) -> list[str]:
    for base in (IndexError, KeyError, ValueError, TypeError):
        if isinstance(exc, base):
            return ["error", base.__name__]
    return ["error", type(exc).__name__]


def _run(z: Any, op: list[Any]) -> Any:
    name = op[0]
    if name == "get":
        return _shown(z[_selection(op[1])])
    if name == "set":
        z[_selection(op[1])] = op[2]
        return "ok"
    if name == "oget":
        return _shown(z.oindex[_selection(op[1])])
    if name == "oset":
        z.oindex[_selection(op[1])] = op[2]
        return "ok"
    if name == "vget":
        return _shown(z.vindex[_selection(op[1])])
    if name == "resize":
        z.resize(*op[1])
        return list(z.shape)
    if name == "append":
        return list(z.append(np.full(op[1], 3, dtype=z.dtype), axis=op[2]))
    if name == "attrs":
        z.attrs.update(op[1])
        return dict(z.attrs)
    if name == "meta":  # not nchunks_initialized: zarr-python 2 stores a chunk for an empty write
        fill = z.fill_value.item() if isinstance(z.fill_value, np.generic) else z.fill_value
        return [list(z.shape), list(z.chunks), str(z.dtype), z.nchunks, z.size, z.ndim, fill]
    return _shown(z[...])


def replay(zarr: Any, sequences: list[dict[str, Any]]) -> list[list[Any]]:
    """Each sequence's trace, run with the zarr-python 2 module ``zarr``."""
    warnings.simplefilter("ignore")
    traces = []
    for case in sequences:
        spec = case["create"]
        try:
            z = zarr.create(
                tuple(spec["shape"]),
                chunks=tuple(spec["chunks"]),
                dtype=spec["dtype"],
                fill_value=spec["fill"],
                order=spec["order"],
                compressor=None,
            )
        except Exception as exc:
            traces.append([["create", _error(exc)]])
            continue
        trace: list[Any] = []
        for op in case["ops"]:
            try:
                trace.append([op[0], _run(z, op)])
            except Exception as exc:
                trace.append([op[0], _error(exc)])
        traces.append(trace)
    return traces


if __name__ == "__main__":
    import zarr as zarr2

    with open(sys.argv[1]) as f:
        print(json.dumps(replay(zarr2, json.load(f)), default=str))
