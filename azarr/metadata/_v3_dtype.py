"""Zarr v3 data types and fill values (``data_type``, ``fill_value`` of ``zarr.json``).

Core types (spec 3.0, "Data types"): ``bool``, ``int8``...``uint64``, ``float16``,
``float32``, ``float64``, ``complex64``, ``complex128`` and raw bits ``r<N>``. The
extension types are written with the names and configurations zarr-python 3.4
uses for NumPy dtypes (``zarr.core.dtype``), so arrays move both ways:

| NumPy | ``data_type`` |
| --- | --- |
| ``S<n>`` | ``{"name": "null_terminated_bytes", "configuration": {"length_bytes": n}}`` |
| ``U<n>`` | ``{"name": "fixed_length_utf32", "configuration": {"length_bytes": 4n}}`` |
| ``V<n>`` | ``{"name": "raw_bytes", "configuration": {"length_bytes": n}}`` (``r<8n>`` read too) |
| ``datetime64[<k><u>]`` | ``{"name": "numpy.datetime64", "configuration": {"unit": u, "scale_factor": k}}`` |
| ``timedelta64`` | ``numpy.timedelta64``, likewise |
| structured | ``{"name": "struct", "configuration": {"fields": [{"name", "data_type"}, ...]}}`` (zarr-python 3.1's ``structured`` with ``[[name, type], ...]`` read too) |
| object, ``str`` items | ``"string"`` (the ``vlen-utf8`` codec) |
| object, ``bytes`` items | ``"variable_length_bytes"`` (``vlen-bytes``; ``"bytes"`` read too) |
| ml_dtypes | ``"bfloat16"``, ``"float8_e4m3fn"``... (TensorStore's names) |

Arrays hold their elements in this machine's byte order; the ``bytes`` codec says
how they are stored. Variable-length types are NumPy object arrays, as in v2.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from azarr.metadata._keys import metadata_error, short_repr
from azarr.metadata._ml_dtypes import ML_DTYPE_KINDS, ml_dtype, ml_dtype_name

__all__ = ["StringKind", "v3_dtype_from_json", "v3_dtype_to_json", "v3_fill_from_json", "v3_fill_to_json"]

#: Which variable-length type an object array is: ``"string"`` or ``"bytes"``; None otherwise.
StringKind = Literal["string", "bytes"] | None

_CORE = {
    "bool": "?",
    "int8": "i1",
    "int16": "i2",
    "int32": "i4",
    "int64": "i8",
    "uint8": "u1",
    "uint16": "u2",
    "uint32": "u4",
    "uint64": "u8",
    "float16": "f2",
    "float32": "f4",
    "float64": "f8",
    "complex64": "c8",
    "complex128": "c16",
}
_CORE_NAMES = {np.dtype(v).newbyteorder("="): k for k, v in _CORE.items()}
_RAW_BITS = re.compile(r"^r([1-9][0-9]*)$")
_TIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as", "generic")
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MAX_FIELDS = 4096


def _named(value: Any, where: str) -> tuple[str, dict[str, Any]]:
    if isinstance(value, str):
        return value, {}
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        config = value.get("configuration", {})
        if not isinstance(config, Mapping):
            raise metadata_error(
                where, "data_type", f"configuration must be an object, got {short_repr(config)}"
            )
        return str(value["name"]), dict(config)
    raise metadata_error(
        where, "data_type", f"must be a name or an object with a 'name', got {short_repr(value)}"
    )


def _length(config: Mapping[str, Any], where: str, name: str, multiple: int = 1) -> int:
    n = config.get("length_bytes")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n % multiple or n > 2**31:
        raise metadata_error(
            where,
            "data_type",
            f"{name} needs a positive 'length_bytes' (a multiple of {multiple}), got {short_repr(n)}",
        )
    return n


def v3_dtype_from_json(value: Any, *, where: str) -> tuple[np.dtype[Any], StringKind]:
    """The NumPy dtype (native byte order) of a v3 ``data_type``, and its variable-length kind.

    Raises
    ------
    MetadataError
        An unknown type (named in the message), or a configuration it does not accept.
    """
    name, config = _named(value, where)
    if name in _CORE:
        return np.dtype(_CORE[name]).newbyteorder("="), None
    if name == "string":
        return np.dtype(object), "string"
    if name in ("variable_length_bytes", "bytes"):
        return np.dtype(object), "bytes"
    match = _RAW_BITS.match(name)
    if match:
        bits = int(match.group(1))
        if bits % 8 or bits > 2**34:
            raise metadata_error(
                where, "data_type", f"raw bits type {name!r} must be a whole number of bytes"
            )
        return np.dtype(f"V{bits // 8}"), None
    if name == "raw_bytes":
        return np.dtype(f"V{_length(config, where, name)}"), None
    if name == "null_terminated_bytes":
        return np.dtype(f"S{_length(config, where, name)}"), None
    if name == "fixed_length_utf32":
        return np.dtype(f"U{_length(config, where, name, 4) // 4}").newbyteorder("="), None
    if name in ("numpy.datetime64", "numpy.timedelta64"):
        unit, scale = config.get("unit"), config.get("scale_factor", 1)
        if (
            unit not in _TIME_UNITS
            or isinstance(scale, bool)
            or not isinstance(scale, int)
            or not 1 <= scale < 2**31
        ):
            raise metadata_error(
                where,
                "data_type",
                f"{name} needs a 'unit' and a positive 'scale_factor', got {short_repr(config)}",
            )
        code = "M8" if name == "numpy.datetime64" else "m8"
        spec = code if unit == "generic" else f"{code}[{'' if scale == 1 else scale}{unit}]"
        return np.dtype(spec).newbyteorder("="), None
    if name in ("struct", "structured"):
        return _struct_from_json(config, where, name), None
    if name in ML_DTYPE_KINDS:
        try:
            return ml_dtype(name), None
        except ImportError as exc:
            raise metadata_error(where, "data_type", str(exc)) from exc
    raise metadata_error(where, "data_type", f"names unknown data type {short_repr(name)}")


def _struct_from_json(config: Mapping[str, Any], where: str, name: str) -> np.dtype[Any]:
    fields = config.get("fields")
    if not isinstance(fields, list) or not fields or len(fields) > _MAX_FIELDS:
        raise metadata_error(
            where, "data_type", f"{name} needs a non-empty list of 'fields', got {short_repr(fields)}"
        )
    entries: list[tuple[str, np.dtype[Any]]] = []
    for field in fields:
        if isinstance(field, Mapping) and set(field) <= {"name", "data_type"}:
            field_name, field_type = field.get("name"), field.get("data_type")
        elif isinstance(field, list) and len(field) == 2:
            field_name, field_type = field
        else:
            raise metadata_error(
                where, "data_type", f"{name} field must be {{name, data_type}}, got {short_repr(field)}"
            )
        if not isinstance(field_name, str) or field_name in (n for n, _ in entries):
            raise metadata_error(
                where,
                "data_type",
                f"{name} field names must be distinct strings, got {short_repr(field_name)}",
            )
        field_dtype, kind = v3_dtype_from_json(field_type, where=where)
        if kind is not None:
            raise metadata_error(where, "data_type", f"{name} field {field_name!r} cannot be variable-length")
        entries.append((field_name, field_dtype))
    try:
        return np.dtype(entries)
    except (TypeError, ValueError) as exc:
        raise metadata_error(where, "data_type", f"{name} is not a valid structure: {exc}") from exc


def v3_dtype_to_json(
    dtype: np.dtype[Any], string_kind: StringKind = None, *, where: str = "data_type"
) -> Any:
    """The v3 ``data_type`` of ``dtype`` (zarr-python 3.4's spelling; byte order is the codec's).

    Raises
    ------
    MetadataError
        A type with no v3 spelling: subarray fields, datetimes without a unit,
        object arrays that are neither strings nor bytes.
    """
    if dtype.hasobject and dtype.fields is None:
        return "variable_length_bytes" if string_kind == "bytes" else "string"
    if dtype.fields is not None:
        fields = []
        for field_name in dtype.names or ():
            field_dtype = dtype.fields[field_name][0]
            if field_dtype.subdtype is not None:
                raise metadata_error(
                    where, "dtype", f"field {field_name!r} is a subarray, which Zarr v3 cannot store"
                )
            fields.append({"name": field_name, "data_type": v3_dtype_to_json(field_dtype, where=where)})
        return {"name": "struct", "configuration": {"fields": fields}}
    ml_name = ml_dtype_name(dtype)
    if ml_name is not None:
        return ml_name
    native = dtype.newbyteorder("=") if dtype.byteorder not in ("|", "=") else dtype
    if native in _CORE_NAMES:
        return _CORE_NAMES[native]
    if dtype.kind == "S":
        return {"name": "null_terminated_bytes", "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "U":
        return {"name": "fixed_length_utf32", "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind == "V":
        return {"name": "raw_bytes", "configuration": {"length_bytes": dtype.itemsize}}
    if dtype.kind in "mM":
        unit, scale = np.datetime_data(dtype)
        if unit == "generic":
            raise metadata_error(where, "dtype", f"{dtype} has no unit; give one (e.g. datetime64[ns])")
        name = "numpy.datetime64" if dtype.kind == "M" else "numpy.timedelta64"
        return {"name": name, "configuration": {"unit": unit, "scale_factor": int(scale)}}
    raise metadata_error(where, "dtype", f"{dtype} has no Zarr v3 data type")


# ------------------------------------------------------------------ fill values


def _float(value: Any, dtype: np.dtype[Any], where: str) -> Any:
    if isinstance(value, str):
        if value in _SPECIAL:
            return np.array(_SPECIAL[value], dtype=dtype)[()]
        if value.startswith("0x") and len(value) == 2 + 2 * dtype.itemsize:
            try:
                bits = int(value, 16)
            except ValueError:
                pass
            else:  # the spec's hex bit pattern, big-endian as written
                return np.frombuffer(bits.to_bytes(dtype.itemsize, "big"), dtype=dtype.newbyteorder(">"))[
                    0
                ].astype(dtype)
        raise _bad(
            value, dtype, where, "strings allowed are 'NaN', 'Infinity', '-Infinity' and '0x' bit patterns"
        )
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(
            value, dtype, where, "must be a number, 'NaN', 'Infinity', '-Infinity' or a '0x' bit pattern"
        )
    with np.errstate(over="ignore"):
        return np.array(value, dtype=dtype)[()]


def _bad(value: Any, dtype: Any, where: str, problem: str) -> Exception:
    return metadata_error(where, "fill_value", f"{short_repr(value)} is not valid for {dtype}: {problem}")


def _b64(value: Any, dtype: np.dtype[Any], where: str) -> bytes:
    if not isinstance(value, str):
        raise _bad(value, dtype, where, "must be a Base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _bad(value, dtype, where, f"is not Base64: {exc}") from exc


def v3_fill_from_json(value: Any, dtype: np.dtype[Any], string_kind: StringKind, *, where: str) -> Any:
    """Decode a v3 ``fill_value`` for ``dtype`` (every encoding of the spec and zarr-python 3.4).

    Raises
    ------
    MetadataError
        Null, or a value the type cannot hold (names the value and the type).
    """
    if value is None:
        raise _bad(value, dtype, where, "Zarr v3 requires a fill value")
    if string_kind == "string":
        if not isinstance(value, str):
            raise _bad(value, dtype, where, "must be a string")
        return value
    if string_kind == "bytes":
        return _b64(value, dtype, where)
    if dtype.fields is not None:
        if isinstance(value, Mapping):
            if set(value) != set(dtype.names or ()):
                raise _bad(value, dtype, where, f"must name every field {list(dtype.names or ())}")
            holder = np.zeros((), dtype=dtype)
            for field_name in dtype.names or ():
                holder[field_name] = v3_fill_from_json(
                    value[field_name], dtype.fields[field_name][0], None, where=where
                )
            return holder[()]
        raw = _b64(value, dtype, where)
        if len(raw) != dtype.itemsize:
            raise _bad(value, dtype, where, f"decodes to {len(raw)} bytes, expected {dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype).copy()[0]
    kind = dtype.kind
    ml_kind = ML_DTYPE_KINDS.get(ml_dtype_name(dtype) or "")
    if kind == "b":
        if not isinstance(value, bool):
            raise _bad(value, dtype, where, "must be true or false")
        return np.bool_(value)
    if kind in "iu" or ml_kind == "i":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise _bad(value, dtype, where, "must be an integer")
        try:
            return np.array(value, dtype=dtype)[()] if ml_kind else _in_range(value, dtype, where)
        except OverflowError as exc:
            raise _bad(value, dtype, where, str(exc)) from exc
    if kind == "f" or ml_kind == "f":
        return _float(value, dtype, where)
    if kind == "c":
        if not isinstance(value, list) or len(value) != 2:
            raise _bad(value, dtype, where, "must be [real, imaginary]")
        part = np.dtype(f"f{dtype.itemsize // 2}")
        real, imag = (float(_float(p, part, where)) for p in value)
        return np.array(complex(real, imag), dtype=dtype)[()]
    if kind in "mM":
        if isinstance(value, str) and value == "NaT":
            return np.array("NaT", dtype=dtype)[()]
        if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
            raise _bad(value, dtype, where, "must be a 64-bit integer")
        return np.array(value, dtype="i8").view(dtype)[()]
    if kind == "S":
        raw = _b64(value, dtype, where)
        if len(raw) > dtype.itemsize:
            raise _bad(value, dtype, where, f"decodes to {len(raw)} bytes, more than {dtype.itemsize}")
        return np.array(raw, dtype=dtype)[()]
    if kind == "U":
        if not isinstance(value, str) or len(value) > dtype.itemsize // 4:
            raise _bad(value, dtype, where, f"must be a string of at most {dtype.itemsize // 4} characters")
        return np.array(value, dtype=dtype)[()]
    if kind == "V":
        if isinstance(value, list):  # the core spec's r<N>: one integer per byte
            if len(value) != dtype.itemsize or not all(isinstance(b, int) and 0 <= b < 256 for b in value):
                raise _bad(value, dtype, where, f"must be {dtype.itemsize} integers 0-255")
            raw = bytes(value)
        else:
            raw = _b64(value, dtype, where)
        if len(raw) != dtype.itemsize:
            raise _bad(value, dtype, where, f"decodes to {len(raw)} bytes, expected {dtype.itemsize}")
        return np.frombuffer(raw, dtype=dtype).copy()[0]
    raise _bad(value, dtype, where, "this type has no fill value encoding")


def _in_range(value: int, dtype: np.dtype[Any], where: str) -> Any:
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise _bad(value, dtype, where, f"out of range [{info.min}, {info.max}]")
    return np.array(value, dtype=dtype)[()]


def _float_json(value: Any, dtype: np.dtype[Any] | None = None) -> Any:
    number = float(value)
    if math.isnan(number):
        if dtype is not None and dtype.kind == "f":
            bits = np.asarray(value, dtype=dtype).astype(dtype.newbyteorder(">")).tobytes()
            canonical = np.asarray(np.nan, dtype=dtype).astype(dtype.newbyteorder(">")).tobytes()
            if bits != canonical:  # a NaN with a payload: the spec's hex bit pattern keeps it
                return "0x" + bits.hex()
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def v3_fill_to_json(
    value: Any, dtype: np.dtype[Any], string_kind: StringKind, *, raw_bits: bool = False
) -> Any:
    """Encode a decoded fill value as zarr-python 3.4 writes it (numbers, ``"NaN"``,
    ``[re, im]``, Base64 for bytes, a field object for structures). ``raw_bits``: a
    core ``r<N>`` type, whose fill value is a list of byte values."""
    if string_kind == "string":
        return str(value)
    if string_kind == "bytes":
        return base64.standard_b64encode(bytes(value)).decode("ascii")
    if dtype.fields is not None:
        item = np.asarray(value, dtype=dtype)[()]
        return {n: v3_fill_to_json(item[n], dtype.fields[n][0], None) for n in dtype.names or ()}
    kind = dtype.kind
    ml_kind = ML_DTYPE_KINDS.get(ml_dtype_name(dtype) or "")
    if kind == "b":
        return bool(value)
    if kind in "iu" or ml_kind == "i":
        return int(value)
    if kind == "f" or ml_kind == "f":
        return _float_json(value, dtype if kind == "f" else None)
    if kind == "c":
        number = complex(value)
        return [_float_json(number.real), _float_json(number.imag)]
    if kind in "mM":
        return int(np.asarray(value, dtype=dtype).view("i8"))
    if kind == "S":
        return base64.standard_b64encode(bytes(np.asarray(value, dtype=dtype)[()])).decode("ascii")
    if kind == "U":
        return str(value)
    if kind == "V":
        raw = np.asarray(value, dtype=dtype).tobytes()
        return list(raw) if raw_bits else base64.standard_b64encode(raw).decode("ascii")
    raise TypeError(f"no v3 fill value encoding for {dtype}")


def default_fill_value(dtype: np.dtype[Any], string_kind: StringKind) -> Any:
    """zarr-python 3's default fill value: the type's zero (``""`` and ``b""`` for strings)."""
    if string_kind == "string":
        return ""
    if string_kind == "bytes":
        return b""
    return np.zeros((), dtype=dtype)[()]
