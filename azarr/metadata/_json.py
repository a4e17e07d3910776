"""JSON encoding and decoding of metadata documents, byte-compatible with zarr-python 2."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from azarr import config
from azarr.metadata._keys import metadata_error

#: Deepest nesting of arrays/objects accepted in a metadata document. Deeper
#: documents parse, but later recursive steps (copying, encoding) would hit
#: Python's recursion limit; no real document comes near this.
MAX_DEPTH = 128

# The strings the Zarr v2 spec ("Fill value encoding") uses for non-finite floats.
# Any non-finite float reaching encode_json is written this way, as zarr-python 3
# does for v2 documents (``_replace_special_floats``), so output is always
# standard JSON that every parser accepts.
_NAN = "NaN"
_POS_INF = "Infinity"
_NEG_INF = "-Infinity"


def special_float_json(value: float) -> float | str:
    """``value`` itself if finite, else ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``."""
    if math.isnan(value):
        return _NAN
    if math.isinf(value):
        return _POS_INF if value > 0 else _NEG_INF
    return value


def to_jsonable(obj: Any, *, special_floats: bool) -> Any:
    """Convert ``obj`` to plain JSON types (dict, list, str, int, float, bool, None).

    NumPy scalars become Python scalars (zarr-python 2's ``NumberEncoder`` does
    the same for ``numbers.Integral``/``numbers.Real``), NumPy arrays and tuples
    become lists, mappings become dicts. Non-finite floats are replaced by their
    spec strings when ``special_floats`` is True and kept as floats otherwise.

    Raises
    ------
    TypeError
        A value (or a mapping key) has no JSON representation.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return str(obj) if isinstance(obj, np.str_) else obj
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return special_float_json(value) if special_floats else value
    if isinstance(obj, Mapping):
        return {_json_key(k): to_jsonable(v, special_floats=special_floats) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, special_floats=special_floats) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist(), special_floats=special_floats)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable: {obj!r}")


def _json_key(key: Any) -> str:
    # JSON object keys are strings; ints are accepted and written as their decimal
    # form, exactly what json.dumps itself would do with them.
    if isinstance(key, str):
        return str(key)
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        return str(int(key))
    raise TypeError(f"JSON object keys must be str, got {type(key).__name__} {key!r}")


def encode_json(obj: Any) -> bytes:
    """Encode a metadata document exactly as zarr-python 2's ``json_dumps`` does.

    ``json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=True,
    separators=(",", ": "))`` encoded as ASCII, with NumPy scalars and arrays
    converted to Python values first. NaN and ±Infinity are never emitted raw
    (they are not JSON): they are written as the strings ``"NaN"``,
    ``"Infinity"`` and ``"-Infinity"`` (the Zarr v2 spec's fill value encoding,
    applied everywhere as zarr-python 3 does for v2 documents). Note that this
    makes such values read back as strings in user attributes.

    Parameters
    ----------
    obj : Any
        A JSON-able value: dicts with str (or int) keys, lists, tuples, str,
        int, float, bool, None, NumPy scalars and arrays of those.

    Returns
    -------
    bytes
        ASCII JSON, no trailing newline.

    Raises
    ------
    TypeError
        ``obj`` holds something with no JSON representation (as ``json.dumps``).
    """
    plain = to_jsonable(obj, special_floats=True)
    text = json.dumps(
        plain, indent=4, sort_keys=True, ensure_ascii=True, separators=(",", ": "), allow_nan=False
    )
    return text.encode("ascii")


def decode_json(data: bytes | bytearray | memoryview | str, *, key: str) -> Any:
    """Decode a metadata document (UTF-8 JSON, as zarr-python 2.18's ``json_loads``).

    Raw ``NaN``/``Infinity`` literals are accepted, because zarr-python 2 wrote
    them into ``.zattrs`` for non-finite attribute values.

    Parameters
    ----------
    data : bytes or str
        The document as stored.
    key : str
        The store key the document came from, named in errors.

    Returns
    -------
    Any
        The decoded JSON value (not necessarily an object).

    Raises
    ------
    MetadataError
        ``data`` is larger than ``azarr.config`` ``max_metadata_bytes``, is not
        valid UTF-8 or not valid JSON, holds an integer with more digits than
        Python converts (``sys.get_int_max_str_digits()``), or nests arrays and
        objects deeper than `MAX_DEPTH`.
    """
    limit = int(config.get("max_metadata_bytes"))
    size = len(data) if isinstance(data, str) else memoryview(data).nbytes
    if size > limit:
        raise metadata_error(
            repr(key),
            None,
            f"is {size} bytes, more than max_metadata_bytes ({limit} bytes); if this store is "
            f"trusted, raise the limit with azarr.config.set(max_metadata_bytes={size})",
        )
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise metadata_error(repr(key), None, f"is not valid UTF-8: {exc}") from exc
    try:
        document = json.loads(text)
    except RecursionError as exc:
        raise metadata_error(repr(key), None, "is nested too deeply to decode") from exc
    except ValueError as exc:  # JSONDecodeError, and integers over the digit limit
        raise metadata_error(repr(key), None, f"is not valid JSON: {exc}") from exc
    if text.count("[") + text.count("{") > MAX_DEPTH:  # only then can it be too deep
        _check_depth(document, key)
    return document


def _check_depth(document: Any, key: str) -> None:
    """Raise MetadataError if ``document`` nests containers deeper than MAX_DEPTH (iteratively)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise metadata_error(repr(key), None, f"nests arrays/objects deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, dict | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, dict | list))
