"""Helpers for object-dtype chunks: the pickle gate and value equality.

Zarr v2 stores ``dtype "|O"`` arrays (strings, bytes, ragged arrays, arbitrary
Python objects) through an *object codec*: the first filter, which turns an
object array into bytes (``VLenUTF8``, ``VLenBytes``, ``VLenArray``, ``JSON``,
``MsgPack``, ``Categorize``, ``Pickle``). Of the numcodecs codecs only
``Pickle`` runs code while decoding: ``JSON`` and ``MsgPack`` parse plain data
(their ``dtype``/``shape`` trailer is handed to ``np.empty``, which cannot run
code) and the ``VLen*`` codecs read length-prefixed buffers.
"""

from __future__ import annotations

import math
import pickle
import warnings
from typing import Any

import numpy as np

with warnings.catch_warnings():
    # numcodecs 0.16 warns at import about its optional crc32c backend; the
    # warning is not actionable for azarr users.
    warnings.simplefilter("ignore", DeprecationWarning)
    from numcodecs.abc import Codec
    from numcodecs.compat import ensure_contiguous_ndarray
    from numcodecs.pickles import Pickle

__all__ = ["is_unpickling_codec", "object_all_equal", "unpickle", "values_equal"]


def is_unpickling_codec(codec: Codec) -> bool:
    """Whether decoding with ``codec`` unpickles (and so can execute arbitrary code).

    Parameters
    ----------
    codec : numcodecs.abc.Codec
        A resolved codec.

    Returns
    -------
    bool
        True for `numcodecs.Pickle` (id ``"pickle"``) and subclasses.
    """
    return isinstance(codec, Pickle) or getattr(codec, "codec_id", None) == "pickle"


def unpickle(buf: Any) -> Any:
    """Decode a ``Pickle``-encoded chunk; call only after the caller opted in.

    numcodecs >= 0.16 refuses ``Pickle.decode`` unless the process-wide flag
    ``numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE`` is set. Toggling a global
    from codec threads would race, and azarr has its own opt-in
    (``allow_pickle``), so this does the same work as ``Pickle.decode`` directly.

    Parameters
    ----------
    buf : bytes-like
        The pickled bytes (after decompression).

    Returns
    -------
    object
        The unpickled value (an object ndarray for zarr data).
    """
    return pickle.loads(ensure_contiguous_ndarray(buf))


def values_equal(a: Any, b: Any) -> bool:
    """Compare two elements of an object array, treating NaN as equal to NaN.

    Parameters
    ----------
    a, b : object
        Elements such as ``str``, ``bytes``, numbers, ``None`` or ndarrays
        (``VLenArray`` elements).

    Returns
    -------
    bool
        True when equal. Arrays compare by shape and values; comparisons that
        raise, or that do not produce a single truth value, count as unequal.
    """
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
        except TypeError:  # equal_nan on non-numeric data
            return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if _is_nan(a) and _is_nan(b):
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _is_nan(value: Any) -> bool:
    return isinstance(value, float | np.floating) and math.isnan(value)


def object_all_equal(array: np.ndarray[Any, Any], value: Any) -> bool:
    """Whether every element of an object array equals ``value`` (see `values_equal`).

    Stops at the first element that differs.
    """
    return all(values_equal(element, value) for element in array.flat)
