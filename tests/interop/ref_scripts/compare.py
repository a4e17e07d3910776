"""Comparison helpers shared by both sides of the interop tests.

Imported by the reference scripts (run with zarr-python 2.18's interpreter, where this directory is on
``sys.path``) and by the azarr tests (as ``ref_scripts.compare``). It only needs numpy and the standard
library, so it must stay free of azarr and zarr imports.

Every ``*_problems`` function returns a list of human-readable mismatch descriptions; an empty list
means "equal". Equality is strict: dtypes must be identical (byte order and structured layout
included), fixed-size values must match bit for bit, and object elements must match in type and value.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

MANIFEST = "manifest.json"


def to_json_value(obj: Any) -> Any:
    """Normalise a metadata value the way a JSON round trip would (tuples -> lists, numpy -> python)."""
    return json.loads(json.dumps(obj, default=_json_default))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {obj!r}")


def expected_file_name(store: str, path: str, suffix: str) -> str:
    """A flat, readable file name for the expected data of ``store``/``path``."""
    flat = (store + "__" + (path or "root")).replace("/", "__").replace(".", "_")
    return f"{flat}.{suffix}.npy"


def save_npy(file: Path, value: np.ndarray) -> None:
    """Save ``value``; object arrays are pickled (the tests' own trusted files)."""
    np.save(file, value, allow_pickle=value.dtype.hasobject)


def load_npy(file: Path) -> np.ndarray:
    return np.load(file, allow_pickle=True)


def _dtype_problems(actual: np.dtype[Any], expected: np.dtype[Any], what: str) -> list[str]:
    if actual != expected or actual.str != expected.str or actual.descr != expected.descr:
        return [
            f"{what}: dtype {actual!r} (descr {actual.descr}) != expected {expected!r} ({expected.descr})"
        ]
    return []


def _element_equal(a: Any, b: Any) -> bool:
    """Strict equality for object-array elements (type and value, NaN equal to NaN)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.dtype.str == b.dtype.str
            and a.shape == b.shape
            and (a.tobytes() == b.tobytes() if not a.dtype.hasobject else _object_equal(a, b))
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_element_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_element_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _object_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and all(
        _element_equal(x, y) for x, y in zip(a.reshape(-1), b.reshape(-1), strict=True)
    )


def array_problems(actual: Any, expected: np.ndarray, what: str = "data") -> list[str]:
    """Compare a read result with the expected array: type, dtype, shape, then values bit for bit."""
    if not isinstance(actual, np.ndarray):
        return [f"{what}: got {type(actual).__name__}, expected numpy.ndarray"]
    problems = _dtype_problems(actual.dtype, expected.dtype, what)
    if actual.shape != expected.shape:
        problems.append(f"{what}: shape {actual.shape} != expected {expected.shape}")
    if problems:
        return problems
    if expected.dtype.hasobject:
        bad = [
            (idx, x, y)
            for idx, x, y in zip(
                np.ndindex(expected.shape), actual.reshape(-1), expected.reshape(-1), strict=True
            )
            if not _element_equal(x, y)
        ]
        if bad:
            shown = "; ".join(
                f"[{i}] {x!r} ({type(x).__name__}) != {y!r} ({type(y).__name__})" for i, x, y in bad[:5]
            )
            return [f"{what}: {len(bad)} object element(s) differ: {shown}"]
        return []
    if actual.tobytes() != expected.tobytes():
        diff = _first_differences(actual, expected)
        return [f"{what}: values differ (bytes not identical); first differences: {diff}"]
    if expected.dtype.names is None:
        try:
            np.testing.assert_array_equal(actual, expected, strict=True)
        except AssertionError as exc:
            return [f"{what}: assert_array_equal failed: {exc}"]
    return []


def _first_differences(actual: np.ndarray, expected: np.ndarray, limit: int = 5) -> str:
    a = np.ascontiguousarray(actual).reshape(-1)
    e = np.ascontiguousarray(expected).reshape(-1)
    out = []
    for i in range(a.size):
        if a[i : i + 1].tobytes() != e[i : i + 1].tobytes():
            out.append(f"[{tuple(int(j) for j in np.unravel_index(i, expected.shape))}] {a[i]!r} != {e[i]!r}")
            if len(out) >= limit:
                break
    return "; ".join(out) if out else "(byte order / padding only)"


def fill_value_problems(actual: Any, expected: np.ndarray | None, dtype: np.dtype[Any]) -> list[str]:
    """Compare a fill value (any scalar-ish object) with the expected 0-d array (or ``None``)."""
    if expected is None:
        return [] if actual is None else [f"fill_value: {actual!r} != expected None"]
    if actual is None:
        return [f"fill_value: None != expected {expected[()]!r}"]
    if dtype.hasobject:
        if not _element_equal(actual, expected[()]):
            return [f"fill_value: {actual!r} ({type(actual).__name__}) != expected {expected[()]!r}"]
        return []
    try:
        got = np.array(actual, dtype=dtype)
    except (TypeError, ValueError) as exc:
        return [f"fill_value: {actual!r} cannot be converted to {dtype}: {exc}"]
    if got.tobytes() != expected.tobytes():
        return [f"fill_value: {actual!r} != expected {expected[()]!r} (bytes differ)"]
    return []


def config_problems(actual: Any, expected: Any, what: str) -> list[str]:
    """Compare codec configs / attributes after JSON normalisation."""
    a, e = to_json_value(actual), to_json_value(expected)
    if a != e:
        return [f"{what}: {json.dumps(a, sort_keys=True)} != expected {json.dumps(e, sort_keys=True)}"]
    return []
