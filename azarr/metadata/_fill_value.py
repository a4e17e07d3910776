"""The ``fill_value`` field: Python/NumPy values <-> their Zarr v2 JSON encoding.

Zarr v2 spec, "Fill value encoding": non-finite floats are the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"``; byte strings and structured values are Base64.
Everything else follows zarr-python 2.18's ``Metadata2.encode_fill_value`` /
``decode_fill_value``: complex as ``[real, imag]``, datetime64/timedelta64 as
their int64 count (NaT is ``-9223372036854775808``), ``U`` strings and object
values stored as they are.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from azarr.metadata._json import special_float_json, to_jsonable
from azarr.metadata._keys import ZARRAY, metadata_error, short_repr
from azarr.metadata._ml_dtypes import ml_int_range, ml_value_kind

_SPECIAL_FLOATS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FIELD = "fill_value"


def encode_fill_value(value: Any, dtype: np.dtype[Any], *, where: str = "encode_fill_value") -> Any:
    """Encode a fill value for ``.zarray`` (zarr-python 2.18 ``Metadata2.encode_fill_value``).

    The value is first converted to ``dtype`` the way zarr-python 2's
    ``normalize_fill_value`` does (so ``0`` is the zero of any dtype, including
    ``b""`` for ``S``, ``""`` for ``U`` and all-zero bytes for structured), then:

    | dtype kind | JSON |
    | --- | --- |
    | any, value None | ``null`` |
    | ``b`` | ``true`` / ``false`` |
    | ``i``, ``u`` | integer |
    | ``f`` | number, or ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` |
    | ``c`` | ``[real, imag]``, each encoded as a float |
    | ``m``, ``M`` | int64 count of units (NaT -> -9223372036854775808) |
    | ``S`` | Base64 of the bytes (trailing NULs dropped, as NumPy does) |
    | ``V``, structured | Base64 of all ``itemsize`` bytes of the value |
    | ``U`` | the string itself |
    | ``O`` | the value itself (must be JSON-able) |

    Parameters
    ----------
    value : Any
        Python or NumPy scalar (for structured dtypes a ``numpy.void``, a tuple,
        ``bytes`` of ``itemsize`` or ``0``), or None.
    dtype : numpy.dtype
        The array's dtype.

    Returns
    -------
    Any
        JSON-ready value.

    Raises
    ------
    MetadataError
        The value cannot be represented in ``dtype`` (e.g. 300 for ``|u1``,
        1e300 for ``<f4``, a non-str for ``U``), or the dtype is structured with
        object fields.
    """
    return _encode(value, np.dtype(dtype), where=where)


def _encode(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if value is None:
        return None
    if dtype.hasobject:
        if dtype.fields is not None:
            raise metadata_error(where, _FIELD, "cannot be set for structured dtypes with object fields")
        try:
            return to_jsonable(value, special_floats=True)
        except TypeError as exc:
            raise metadata_error(where, _FIELD, f"of an object array must be JSON-able: {exc}") from exc
    ml_kind = ml_value_kind(dtype)
    if ml_kind is not None:
        return _encode_ml(value, dtype, ml_kind, where=where)
    scalar = _coerce(value, dtype, where=where)
    kind = dtype.kind
    if kind == "f":
        return special_float_json(float(scalar))
    if kind == "c":
        return [special_float_json(float(scalar.real)), special_float_json(float(scalar.imag))]
    if kind in "iu":
        return int(scalar)
    if kind == "b":
        return bool(scalar)
    if kind in "mM":
        return int(scalar.view("i8"))
    if kind == "S":
        return base64.standard_b64encode(bytes(scalar)).decode("ascii")
    if kind == "V":
        return base64.standard_b64encode(scalar.tobytes()).decode("ascii")
    # kind "U": the string as is (zarr-python 2 stores U fill values unencoded).
    return str(scalar)


def _encode_ml(value: Any, dtype: np.dtype[Any], kind: str, *, where: str) -> Any:
    """Fill value of a TensorStore ml_dtypes type: encoded as NumPy floats/ints are (TensorStore's encoding)."""
    scalar = _decode_ml(value, dtype, kind, where=where)
    return int(scalar) if kind == "i" else special_float_json(float(scalar))


def _decode_ml(value: Any, dtype: np.dtype[Any], kind: str, *, where: str) -> Any:
    if isinstance(value, np.generic) and value.dtype == dtype:
        value = int(value) if kind == "i" else float(value)  # e.g. the canonical scalar read back
    if kind == "i":
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
            raise _invalid(value, dtype, where, "must be an integer")
        low, high = ml_int_range(dtype)
        if not low <= int(value) <= high:
            raise _invalid(value, dtype, where, f"out of range [{low}, {high}]")
        # Sign-extended in the byte, as TensorStore holds int4 -3 (0xfd, not 0x0d):
        # chunks padded with the fill value then match TensorStore's bit for bit.
        return np.array(int(value), dtype=np.int8).view(dtype)[()]
    if isinstance(value, str):
        if value not in _SPECIAL_FLOATS:
            raise _invalid(value, dtype, where, "the only strings allowed are 'NaN', 'Infinity', '-Infinity'")
        value = _SPECIAL_FLOATS[value]
    elif not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
        raise _invalid(value, dtype, where, "must be a number or 'NaN', 'Infinity', '-Infinity'")
    number = float(value)
    scalar = np.array(number, dtype=dtype)[()]
    # ml_dtypes casts out-of-range values silently (to inf, or to NaN for the
    # "fn" types without infinities): refuse a value the type cannot hold.
    result = float(scalar)
    if math.isfinite(number) != math.isfinite(result) or (math.isinf(number) and result != number):
        raise _invalid(value, dtype, where, f"cannot be represented (it becomes {result})")
    return scalar


def _coerce(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    """``value`` as a scalar of ``dtype`` (zarr-python 2 ``normalize_fill_value`` rules)."""
    kind = dtype.kind
    is_text = isinstance(value, (str, bytes, bytearray, memoryview, np.void))
    # zarr-python 2 maps a numeric 0 to the dtype's zero; for these kinds a plain
    # cast would give b"0" / "0" / an error instead.
    if kind in "SUV" and not is_text and _is_zero(value):
        return np.zeros((), dtype=dtype)[()]
    if kind == "U":
        if not isinstance(value, str):
            raise metadata_error(
                where, _FIELD, f"{short_repr(value)} is not valid for dtype {dtype.str}: must be a str"
            )
        return value
    if kind == "b" and is_text:
        # NumPy casts any non-empty string to True; "false" would become True.
        raise metadata_error(
            where, _FIELD, f"{short_repr(value)} is not valid for dtype {dtype.str}: must be a bool"
        )
    if kind == "V" and isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != dtype.itemsize:
            raise metadata_error(
                where, _FIELD, f"has {len(raw)} bytes but dtype {dtype} has itemsize {dtype.itemsize}"
            )
        return np.frombuffer(raw, dtype=dtype).copy()[0]
    if dtype.fields is not None:
        # Assign field by field into zeros: np.array(value, dtype) leaves padding
        # bytes uninitialized, which would leak into the Base64 fill value.
        out = np.zeros((), dtype=dtype)
        try:
            with np.errstate(over="raise"):
                out[()] = value
        except Exception as exc:
            raise metadata_error(
                where, _FIELD, f"{short_repr(value)} is not valid for dtype {dtype}: {exc}"
            ) from exc
        return out[()]
    if kind in "iu" and isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        # NumPy wraps NumPy integers silently (np.int64(300) -> uint8 44): check the range.
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:
            raise metadata_error(where, _FIELD, f"{short_repr(value)} is out of range for dtype {dtype.str}")
    try:
        with np.errstate(over="raise"):
            return np.array(value, dtype=dtype)[()]
    except Exception as exc:
        raise metadata_error(
            where, _FIELD, f"{short_repr(value)} is not valid for dtype {dtype.str}: {exc}"
        ) from exc


def _is_zero(value: Any) -> bool:
    try:
        return bool(value == 0)
    except Exception:  # arrays, odd objects: not a zero scalar
        return False


def decode_fill_value(value: Any, dtype: np.dtype[Any], *, key: str = ZARRAY) -> Any:
    """Decode the ``fill_value`` field (zarr-python 2.18 ``Metadata2.decode_fill_value``).

    The result can be passed to ``numpy.full(shape, fill_value, dtype=dtype)``
    (except None, which means "no fill value", spec "Chunks").

    Accepted JSON per dtype kind: ``b`` - true/false (or 0/1); ``i``/``u`` - an
    integer in range (integral floats such as ``0.0`` too); ``f`` - a number or
    ``"NaN"``/``"Infinity"``/``"-Infinity"``; ``c`` - ``[real, imag]`` with each
    part like ``f`` (a bare number means ``imag = 0``); ``m``/``M`` - an int64
    count (or a string NumPy parses, e.g. ``"NaT"``); ``S`` - Base64, falling
    back to the raw string or number as zarr-python 2 does for documents
    written before Base64 was introduced; ``V``/structured - Base64 of exactly
    ``itemsize`` bytes; ``U`` - a string; ``O`` - any JSON value, unchanged.

    Parameters
    ----------
    value : Any
        The decoded JSON value.
    dtype : numpy.dtype
        The array's dtype.
    key : str
        Store key of the document, named in errors.

    Returns
    -------
    Any
        None; a NumPy scalar of ``dtype`` (``numpy.void`` for structured and
        ``V``); ``str`` for ``U``; the JSON value itself for ``O``.

    Raises
    ------
    MetadataError
        The value is not a valid encoding for ``dtype``.
    """
    dtype = np.dtype(dtype)
    where = repr(key)
    if value is None:
        return None
    if dtype.hasobject:
        if dtype.fields is not None:
            raise metadata_error(where, _FIELD, "cannot be set for structured dtypes with object fields")
        return value
    ml_kind = ml_value_kind(dtype)
    if ml_kind is not None:
        return _decode_ml(value, dtype, ml_kind, where=where)
    kind = dtype.kind
    if kind == "f":
        return _decode_float(value, dtype, where=where)
    if kind == "c":
        return _decode_complex(value, dtype, where=where)
    if kind in "iu":
        return _decode_int(value, dtype, where=where)
    if kind == "b":
        if isinstance(value, bool) or (_is_json_int(value) and value in (0, 1)):
            return np.bool_(value)
        raise _invalid(value, dtype, where, "must be true or false")
    if kind in "mM":
        if _is_json_int(value) or isinstance(value, str):
            return _cast(value, dtype, where=where)
        raise _invalid(value, dtype, where, "must be an integer count of time units")
    if kind == "S":
        return _decode_bytes(value, dtype, where=where)
    if kind == "V":
        return _decode_void(value, dtype, where=where)
    # kind "U": zarr-python 2 leaves the value as it is.
    if isinstance(value, str):
        return value
    if _is_json_number(value):
        return str(_cast(value, dtype, where=where))
    raise _invalid(value, dtype, where, "must be a string")


def _invalid(value: Any, dtype: np.dtype[Any], where: str, problem: str) -> Exception:
    name = dtype.name if ml_value_kind(dtype) is not None else dtype.str
    return metadata_error(where, _FIELD, f"{short_repr(value)} is not valid for dtype {name}: {problem}")


def _is_json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_json_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _cast(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    try:
        with np.errstate(over="raise"):
            return np.array(value, dtype=dtype)[()]
    except Exception as exc:
        raise _invalid(value, dtype, where, str(exc)) from exc


def _decode_float(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if isinstance(value, str):
        if value not in _SPECIAL_FLOATS:
            raise _invalid(value, dtype, where, "the only strings allowed are 'NaN', 'Infinity', '-Infinity'")
        return np.array(_SPECIAL_FLOATS[value], dtype=dtype)[()]
    if not _is_json_number(value):
        raise _invalid(value, dtype, where, "must be a number or 'NaN', 'Infinity', '-Infinity'")
    # A finite number too large for the dtype would silently become inf.
    return _cast(value, dtype, where=where)


def _decode_complex(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if _is_json_number(value):
        parts: list[Any] = [value, 0.0]
    elif isinstance(value, list) and len(value) == 2:
        parts = value
    else:
        raise _invalid(value, dtype, where, "must be [real, imag]")
    part_dtype = np.dtype(f"f{dtype.itemsize // 2}")  # float32 parts for c8, as zarr-python 2
    real, imag = (float(_decode_float(p, part_dtype, where=where)) for p in parts)
    # complex(real, imag), not real + 1j * imag as zarr-python 2 writes it:
    # 1j * inf is (nan+infj), which would corrupt an infinite imaginary part.
    return np.array(complex(real, imag), dtype=dtype)[()]


def _decode_int(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not _is_json_int(value):
        raise _invalid(value, dtype, where, "must be an integer")
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise _invalid(value, dtype, where, f"out of range [{info.min}, {info.max}]")
    return np.array(value, dtype=dtype)[()]


def _decode_bytes(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if isinstance(value, (list, dict)):
        raise _invalid(value, dtype, where, "must be a Base64 string")
    raw: Any = value
    if isinstance(value, str):
        try:
            raw = base64.standard_b64decode(value)
        except (binascii.Error, ValueError):
            # zarr-python 2 is lenient here: documents from before fill values
            # were Base64-encoded hold the plain value.
            raw = value
        if isinstance(raw, bytes) and len(raw) > dtype.itemsize:
            raise _invalid(
                value, dtype, where, f"decodes to {len(raw)} bytes, more than itemsize {dtype.itemsize}"
            )
    return _cast(raw, dtype, where=where)


def _decode_void(value: Any, dtype: np.dtype[Any], *, where: str) -> Any:
    if not isinstance(value, str):
        raise _invalid(value, dtype, where, "must be a Base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _invalid(value, dtype, where, f"is not Base64: {exc}") from exc
    if len(raw) != dtype.itemsize:
        raise _invalid(
            value, dtype, where, f"decodes to {len(raw)} bytes, expected itemsize {dtype.itemsize}"
        )
    # copy(): a scalar indexed from a frombuffer view would alias read-only bytes.
    return np.frombuffer(raw, dtype=dtype).copy()[0]
