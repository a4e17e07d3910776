"""Selections mixing Ellipsis with ints, slices, lists, int arrays and bool arrays.

Imported by ``tests/interop/test_ellipsis_selections.py`` for the table, and run by
the zarr 2.18 reference interpreter as a script: it reads each selection of the
table with ``z[...]``, ``z.get_basic_selection`` and ``z.oindex[...]`` and prints one
JSON line per (case, access) with the result (shape and values) or the exception
(type and message). Only NumPy is imported at module level.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numpy as np

#: (case id, array shape, chunk shape, encoded selection). Items: "..." is Ellipsis,
#: an int is an int, {"slice": [start, stop, step]}, {"list": [...]} a Python list,
#: {"ints": [...]} an int64 array, {"bools": [...]} a bool array.
CASES: list[tuple[str, list[int], list[int], list[Any]]] = [
    ("e-list", [6, 7, 8], [4, 3, 5], ["...", {"list": [0, 3, 5]}]),
    ("e-ints", [6, 7, 8], [4, 3, 5], ["...", {"ints": [0, 3, 5]}]),
    ("e-ints-unsorted", [6, 7, 8], [4, 3, 5], ["...", {"ints": [7, -1, 2, 2]}]),
    ("list-e", [6, 7, 8], [4, 3, 5], [{"list": [0, 3]}, "..."]),
    ("ints-e", [6, 7, 8], [4, 3, 5], [{"ints": [5, 0]}, "..."]),
    ("int-e-list", [6, 7, 8], [4, 3, 5], [1, "...", {"list": [0, 2]}]),
    ("e-slice-list", [6, 7, 8], [4, 3, 5], ["...", {"slice": [1, 3, None]}, {"list": [0, 2]}]),
    ("e-step-list", [6, 7, 8], [4, 3, 5], ["...", {"slice": [None, None, 2]}, {"list": [6, 1]}]),
    ("slice-e-list", [6, 7, 8], [4, 3, 5], [{"slice": [None, None, None]}, "...", {"list": [1]}]),
    ("e-list-int", [6, 7, 8], [4, 3, 5], ["...", {"list": [0, 1]}, 2]),
    (
        "e-boollist",
        [6, 7, 8],
        [4, 3, 5],
        ["...", {"list": [True, False, True, False, False, False, True, False]}],
    ),
    (
        "e-bools",
        [6, 7, 8],
        [4, 3, 5],
        ["...", {"bools": [True, False, False, True, False, False, False, True]}],
    ),
    (
        "slices-bools",
        [6, 7, 8],
        [4, 3, 5],
        [{"slice": [None, None, None]}, {"slice": [None, None, None]}, {"bools": [True] + [False] * 7}],
    ),
    ("list-e-list", [6, 7, 8], [4, 3, 5], [{"list": [0, 2]}, "...", {"list": [1, 3]}]),
    ("e-int", [6, 7, 8], [4, 3, 5], ["...", 1]),
    ("int-e", [6, 7, 8], [4, 3, 5], [0, "..."]),
    ("e-only", [6, 7, 8], [4, 3, 5], ["..."]),
    ("e-e-list", [6, 7, 8], [4, 3, 5], ["...", "...", {"list": [0]}]),
    ("e-list-oob", [6, 7, 8], [4, 3, 5], ["...", {"list": [0, 8]}]),
    ("e-too-many", [6, 7, 8], [4, 3, 5], [0, 0, 0, "...", {"list": [0]}]),
    ("e-float-list", [6, 7, 8], [4, 3, 5], ["...", {"list": [0.5, 1.0]}]),
    ("1d-e-list", [10], [3], ["...", {"list": [9, 0, 4]}]),
    ("1d-list-e", [10], [3], [{"ints": [1, 2]}, "..."]),
    ("2d-list-e-list", [5, 6], [2, 4], [{"list": [0, 4]}, "...", {"list": [1, 5]}]),
]

ACCESSES = ("getitem", "basic", "oindex")


def decode(items: list[Any]) -> tuple[Any, ...]:
    """The selection tuple an encoded case stands for."""
    return tuple(_decode_item(x) for x in items)


def _decode_item(x: Any) -> Any:
    if x == "...":
        return Ellipsis
    if isinstance(x, int):
        return x
    ((kind, value),) = x.items()
    if kind == "slice":
        return slice(*value)
    if kind == "list":
        return list(value)
    if kind == "ints":
        return np.asarray(value, dtype=np.int64)
    return np.asarray(value, dtype=bool)


def reference_array(shape: list[int]) -> np.ndarray[Any, Any]:
    """The array every case reads: distinct values, so a wrong element shows."""
    return np.arange(int(np.prod(shape)), dtype="<i4").reshape(shape)


def read(z: Any, access: str, selection: tuple[Any, ...]) -> Any:
    """One access of ``z`` (zarr 2.18 Array or azarr.sync Array: same names)."""
    if access == "getitem":
        return z[selection]
    if access == "basic":
        return z.get_basic_selection(selection)
    return z.oindex[selection]


def outcome(z: Any, access: str, selection: tuple[Any, ...]) -> dict[str, Any]:
    """``{"shape", "values"}`` of the result, or ``{"error", "bases", "message"}``."""
    try:
        result = np.asarray(read(z, access, selection))
    except Exception as exc:  # the point is to record what is raised
        bases = [c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"]
        return {"error": type(exc).__name__, "bases": bases, "message": str(exc)}
    return {"shape": list(result.shape), "values": result.ravel().tolist()}


def main() -> None:
    import zarr

    for case_id, shape, chunks, items in CASES:
        z = zarr.array(reference_array(shape), chunks=tuple(chunks))
        for access in ACCESSES:
            row = {"case": case_id, "access": access, **outcome(z, access, decode(items))}
            sys.stdout.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
