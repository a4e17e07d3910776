"""TensorStore's extra zarr2 data types (``bfloat16``, ``float8_*``, ``int4``...) through ``ml_dtypes``.

TensorStore's ``zarr`` driver (the zarr2 format) accepts, besides NumPy
typestrs, a few machine-learning types that NumPy lacks and writes them into
``.zarray`` by bare name, with no byte-order prefix: ``"dtype": "bfloat16"``.
Elements are stored little-endian, one byte per element for the sub-byte types
(``int4``, ``int2``, ``float4_e2m1fn`` are not packed). ``ml_dtypes`` (the
library JAX and TensorStore use) provides these types to NumPy with exactly
that memory layout, so a chunk decodes with ``numpy.frombuffer``.

``ml_dtypes`` is optional (``pip install azarr[ml]``); it is imported only when
a document names one of these types or a caller passes one.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import numpy as np

#: The names TensorStore 0.1.86's zarr driver reads and writes, mapped to the
#: kind of value their fill values hold ("f": a float encoded like NumPy floats,
#: "i": an integer). ``uint4``/``uint2``/``float8_e4m3`` are in ml_dtypes but not
#: accepted by TensorStore's zarr driver, so they are refused here too.
ML_DTYPE_KINDS: dict[str, str] = {
    "bfloat16": "f",
    "float8_e4m3fn": "f",
    "float8_e4m3fnuz": "f",
    "float8_e4m3b11fnuz": "f",
    "float8_e5m2": "f",
    "float8_e5m2fnuz": "f",
    "float8_e3m4": "f",
    "float8_e8m0fnu": "f",
    "float4_e2m1fn": "f",
    "int4": "i",
    "int2": "i",
}

_INSTALL_HINT = "install ml_dtypes (pip install 'azarr[ml]') to use it"


def ml_dtype(name: str) -> np.dtype[Any]:
    """The NumPy dtype of the TensorStore type ``name`` (a key of `ML_DTYPE_KINDS`).

    Raises
    ------
    KeyError
        ``name`` is not one of TensorStore's extra types.
    ImportError
        ``ml_dtypes`` is not installed, or lacks ``name`` (too old a version).
    """
    if name not in ML_DTYPE_KINDS:
        raise KeyError(name)
    try:
        module = importlib.import_module("ml_dtypes")
    except ImportError as exc:
        raise ImportError(f"data type {name!r} needs the ml_dtypes package; {_INSTALL_HINT}") from exc
    scalar_type = getattr(module, name, None)
    if scalar_type is None:
        version = getattr(module, "__version__", "?")
        raise ImportError(f"ml_dtypes {version} has no {name!r}; upgrade ml_dtypes (>= 0.5)")
    result: np.dtype[Any] = np.dtype(scalar_type)
    return result


def ml_dtype_name(dtype: np.dtype[Any]) -> str | None:
    """TensorStore's name for ``dtype`` if it is one of the ml_dtypes types, else None.

    Never imports ml_dtypes: a dtype of that library exists only once it is loaded.
    """
    if dtype.fields is not None or dtype.subdtype is not None:
        return None
    if "ml_dtypes" not in sys.modules or not str(getattr(dtype.type, "__module__", "")).startswith(
        "ml_dtypes"
    ):
        return None
    name = dtype.name
    return name if name in ML_DTYPE_KINDS else None


def ml_value_kind(dtype: np.dtype[Any]) -> str | None:
    """``"f"`` or ``"i"`` for an ml_dtypes float or integer type (how its fill value is encoded), else None."""
    name = ml_dtype_name(dtype)
    return None if name is None else ML_DTYPE_KINDS[name]


def ml_int_range(dtype: np.dtype[Any]) -> tuple[int, int]:
    """``(min, max)`` of an ml_dtypes integer type such as ``int4`` (-8, 7)."""
    module = importlib.import_module("ml_dtypes")
    info = module.iinfo(dtype)
    return int(info.min), int(info.max)
