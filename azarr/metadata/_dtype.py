"""The ``dtype`` field: NumPy dtypes <-> their Zarr v2 JSON encoding.

Zarr v2 spec, "Data type encoding": simple types are NumPy typestr strings with
an explicit byte order (``"<f8"``, ``"|b1"``, ``"<M8[ns]"``); structured types
are lists of ``[name, type]`` or ``[name, type, shape]`` entries, where ``type``
may itself be such a list. zarr-python 2 writes ``dtype.str`` / ``dtype.descr``
(``Metadata2.encode_dtype``) and reads them back with ``np.dtype``.
"""

from __future__ import annotations

import inspect
import re
import warnings
from typing import Any

import numcodecs.registry
import numpy as np

from azarr.metadata._codecs import OBJECT_CODEC_IDS, codec_to_config
from azarr.metadata._keys import ZARRAY, metadata_error
from azarr.metadata._ml_dtypes import ML_DTYPE_KINDS, ml_dtype, ml_dtype_name

# byte order, kind, item size, optional [<multiplier><unit>] (datetime kinds only).
_TYPESTR = re.compile(r"([<>|])([biufcmMSUVO])(\d*)(?:\[(\d*)([A-Za-zμ]+)\])?")
# NumPy's datetime64/timedelta64 units (numpy docs, "Datetime units").
_DATETIME_UNITS = frozenset({"Y", "M", "W", "D", "h", "m", "s", "ms", "us", "μs", "ns", "ps", "fs", "as"})
# Portable item sizes: float128/complex256 ("<f16") are platform-dependent
# long doubles, so they are left out, as in the Zarr v3 data types.
_NUMERIC_SIZES = {"b": {1}, "i": {1, 2, 4, 8}, "u": {1, 2, 4, 8}, "f": {2, 4, 8}, "c": {8, 16}}

# zarr-python 2's creation shorthands for object arrays (``zarr.util.object_codecs``):
# ``dtype=str`` -> VLenUTF8, ``dtype=bytes`` -> VLenBytes, ``"array:<i4"`` -> VLenArray("<i4").
_SHORTHAND_CODECS = {"str": "vlen-utf8", "bytes": "vlen-bytes", "array": "vlen-array"}


def check_dtype(dtype: np.dtype[Any]) -> None:
    """Raise ValueError unless ``dtype`` is representable in a Zarr v2 ``.zarray``.

    Accepted: bool, (u)int 8-64, float 16/32/64, complex 64/128, datetime64 and
    timedelta64 with a unit, ``S<n>``, ``U<n>``, ``V<n>`` (n > 0), object, and
    structured dtypes (nested, with subarray fields) of those without object
    fields or titles, and TensorStore's ``ml_dtypes`` types (``bfloat16``,
    ``float8_*``, ``int4``...).
    """
    if dtype.subdtype is not None:
        raise ValueError(
            f"subarray dtype {dtype} cannot be an array dtype; add its shape {dtype.shape} "
            "to the array shape (zarr-python 2 folds it into 'shape')"
        )
    if dtype.fields is not None:
        _check_fields(dtype)
        return
    if ml_dtype_name(dtype) is not None:
        return  # TensorStore's bfloat16/float8/int4 types (see azarr.metadata._ml_dtypes)
    kind = dtype.kind
    if kind in _NUMERIC_SIZES:
        if dtype.itemsize not in _NUMERIC_SIZES[kind]:
            raise ValueError(f"dtype {dtype} ({dtype.str}) has a non-portable item size")
    elif kind in "mM":
        if np.datetime_data(dtype)[0] == "generic":
            raise ValueError(f"dtype {dtype.str} needs a unit, e.g. '{dtype.str}[ns]' (Zarr v2 spec)")
    elif kind in "SUV":
        if dtype.itemsize == 0:
            raise ValueError(f"dtype {dtype.str} has size 0; give a length, e.g. '{dtype.str}10'")
    elif kind != "O":
        raise ValueError(f"dtype {dtype} (kind {kind!r}) has no Zarr v2 encoding")


def _check_fields(dtype: np.dtype[Any]) -> None:
    assert dtype.fields is not None
    for name, spec in dtype.fields.items():
        if len(spec) > 2:
            raise ValueError(f"structured dtype field {name!r} has a title, which Zarr v2 cannot encode")
        field_dtype: np.dtype[Any] = spec[0]
        base = field_dtype.base if field_dtype.subdtype is not None else field_dtype
        if base.hasobject:
            raise ValueError(
                f"structured dtype field {name!r} holds objects; structured dtypes with "
                "object fields are not supported"
            )
        check_dtype(base)


def dtype_to_json(dtype: np.dtype[Any]) -> str | list[Any]:
    """Encode a dtype for the ``dtype`` field of ``.zarray``.

    Simple dtypes give ``dtype.str`` (``"<f8"``, ``">i2"``, ``"|S5"``,
    ``"<U3"``, ``"<M8[10s]"``, ``"|O"``); structured dtypes give ``dtype.descr``
    as nested lists, e.g. ``[["a", "<i4"], ["b", "<f8", [2, 3]],
    ["c", [["x", "|u1"]]]]``, with ``["", "|V<n>"]`` entries for padding.
    This is zarr-python 2's ``Metadata2.encode_dtype``. TensorStore's extra
    types are written by bare name as TensorStore writes them
    (``"bfloat16"``, ``"float8_e4m3fn"``, ``"int4"``), also inside fields.

    Parameters
    ----------
    dtype : numpy.dtype
        Anything ``numpy.dtype`` accepts.

    Returns
    -------
    str or list
        JSON-ready encoding; `dtype_from_json` returns an equal dtype.

    Raises
    ------
    MetadataError
        The dtype has no Zarr v2 encoding (see `check_dtype`), or the
        encoding would not reproduce it (e.g. overlapping structured fields).
    """
    try:
        dtype = np.dtype(dtype)
        check_dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise metadata_error("dtype_to_json", "dtype", f"is not supported: {exc}") from exc
    if dtype.fields is None:
        ml_name = ml_dtype_name(dtype)
        return dtype.str if ml_name is None else ml_name
    # descr cannot express every layout (overlapping or out-of-order fields):
    # refuse rather than write a document that reads back as another dtype.
    try:
        encoded = _descr_to_json(dtype)
    except ValueError as exc:
        raise metadata_error("dtype_to_json", "dtype", f"{dtype} cannot be encoded: {exc}") from exc
    if dtype_from_json(encoded, key="dtype_to_json") != dtype:
        raise metadata_error("dtype_to_json", "dtype", f"{dtype} has a field layout Zarr v2 cannot encode")
    return encoded


def _descr_to_json(dtype: np.dtype[Any]) -> list[Any]:
    # dtype.descr gives the layout, padding included; ml_dtypes fields show in it
    # as '<V2', so their specs come from the fields themselves.
    assert dtype.fields is not None
    out: list[Any] = []
    for entry in dtype.descr:
        name = entry[0]
        spec: Any = entry[1]
        field_dtype = dtype.fields[name][0] if name else None
        base = None if field_dtype is None else field_dtype.base
        if base is not None and base.fields is not None:
            spec = _descr_to_json(base)
        elif base is not None and ml_dtype_name(base) is not None:
            spec = ml_dtype_name(base)
        item: list[Any] = [name, spec]
        if len(entry) > 2:
            item.append(list(entry[2]))
        out.append(item)
    return out


def dtype_from_json(value: Any, *, key: str = ZARRAY) -> np.dtype[Any]:
    """Decode the ``dtype`` field of ``.zarray`` (zarr-python 2 ``Metadata2.decode_dtype``).

    Strings must be typestrs with an explicit byte order, as the spec requires
    (``"<f8"``, ``"|b1"``, ``"|S12"``, ``"<M8[ns]"``, ``"|O"``); NumPy names such
    as ``"float64"`` are refused. TensorStore's extra types are read by name
    (``"bfloat16"``, ``"float8_e4m3fn"``, ``"float8_e4m3fnuz"``,
    ``"float8_e4m3b11fnuz"``, ``"float8_e5m2"``, ``"float8_e5m2fnuz"``,
    ``"int4"``...) as ``ml_dtypes`` types, which need that package. Lists are structured dtypes; ``["", "|V<n>"]``
    entries are padding, so padded layouts round-trip exactly (plain
    ``np.dtype(descr)``, which zarr-python 2 uses, turns padding into fields
    named ``f1``, ``f3``...).

    Parameters
    ----------
    value : str or list
        The decoded JSON value.
    key : str
        Store key of the document, named in errors.

    Returns
    -------
    numpy.dtype

    Raises
    ------
    MetadataError
        Not a valid, supported data type encoding.
    """
    where = repr(key)
    if isinstance(value, str):
        dtype = _parse_typestr(value, where=where, field="dtype")
    elif isinstance(value, list) and value:
        dtype = _parse_fields(value, where=where, field="dtype")
    else:
        raise metadata_error(
            where, "dtype", f"must be a typestr such as '<f8' or a non-empty list of fields, got {value!r}"
        )
    try:
        check_dtype(dtype)
    except ValueError as exc:
        raise metadata_error(where, "dtype", f"is not supported: {exc}") from exc
    return dtype


def _parse_typestr(text: str, *, where: str, field: str) -> np.dtype[Any]:
    if text in ML_DTYPE_KINDS:
        try:
            return ml_dtype(text)
        except ImportError as exc:
            raise metadata_error(where, field, str(exc)) from exc
    match = _TYPESTR.fullmatch(text)
    if match is None:
        raise metadata_error(
            where, field, f"must be a NumPy typestr with byte order, e.g. '<f8' or '|b1', got {text!r}"
        )
    _, kind, size, _multiplier, unit = match.groups()
    if kind in "mM":
        if size != "8" or unit is None or unit not in _DATETIME_UNITS:
            raise metadata_error(
                where, field, f"datetime/timedelta types need size 8 and a unit, e.g. '<M8[ns]', got {text!r}"
            )
    elif unit is not None:
        raise metadata_error(where, field, f"only datetime/timedelta types take a [unit], got {text!r}")
    elif not size and kind != "O":
        raise metadata_error(where, field, f"is missing its item size, got {text!r}")
    try:
        return np.dtype(text)
    except (TypeError, ValueError) as exc:
        raise metadata_error(where, field, f"is not a valid data type {text!r}: {exc}") from exc


def _parse_fields(entries: list[Any], *, where: str, field: str) -> np.dtype[Any]:
    # Build the dtype with explicit offsets so that padding entries (empty name,
    # void type) become gaps, not fields: the exact inverse of dtype.descr.
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    offset = 0
    for index, entry in enumerate(entries):
        here = f"{field}[{index}]"
        if not isinstance(entry, list) or len(entry) not in (2, 3):
            raise metadata_error(where, here, f"must be [name, type] or [name, type, shape], got {entry!r}")
        name, spec = entry[0], entry[1]
        if not isinstance(name, str):
            raise metadata_error(where, here, f"field name must be a string, got {name!r}")
        if isinstance(spec, str):
            field_dtype = _parse_typestr(spec, where=where, field=here)
        elif isinstance(spec, list) and spec:
            field_dtype = _parse_fields(spec, where=where, field=here)
        else:
            raise metadata_error(
                where, here, f"field type must be a typestr or a list of fields, got {spec!r}"
            )
        if len(entry) == 3:
            shape = entry[2]
            if not isinstance(shape, list) or not all(_is_int(n) and n >= 0 for n in shape):
                raise metadata_error(where, here, f"subarray shape must be a list of integers, got {shape!r}")
            try:
                field_dtype = np.dtype((field_dtype, tuple(shape)))
            except (TypeError, ValueError, OverflowError, MemoryError) as exc:  # sizes past C int
                raise metadata_error(where, here, f"subarray shape is not valid: {exc}") from exc
        if name == "":
            if field_dtype.kind != "V" or field_dtype.fields is not None or len(entry) == 3:
                raise metadata_error(where, here, "an empty field name is only allowed for '|V<n>' padding")
            offset += field_dtype.itemsize
            continue
        names.append(name)
        formats.append(field_dtype)
        offsets.append(offset)
        offset += field_dtype.itemsize
    if not names:
        raise metadata_error(where, field, "a structured type needs at least one named field")
    try:
        return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": offset})
    except (TypeError, ValueError, OverflowError) as exc:
        raise metadata_error(where, field, f"is not a valid structured type: {exc}") from exc


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def normalize_dtype(
    dtype: Any, object_codec: Any = None
) -> tuple[np.dtype[Any], list[dict[str, Any]] | None]:
    """Resolve a user's ``dtype`` argument for array creation (zarr-python 2 ``normalize_dtype``).

    Shorthands give an object dtype plus the codec that stores it:
    ``str``/``"str"`` -> VLenUTF8, ``bytes``/``"bytes"`` -> VLenBytes,
    ``"array:<i4"`` -> VLenArray("<i4") (text after ``:`` is split on ``,`` into
    the codec's arguments). An explicit ``object_codec`` overrides the
    shorthand's codec. Anything else goes through ``numpy.dtype``; an object
    dtype then needs ``object_codec``. A subarray dtype such as ``"(2,)<f8"`` is
    returned as is: the caller adds ``dtype.shape`` to the array shape and uses
    ``dtype.base``, as zarr-python 2's ``_init_array_metadata`` does.

    Parameters
    ----------
    dtype : Any
        A dtype, a Python type, or a shorthand string.
    object_codec : numcodecs.abc.Codec or dict, optional
        Codec (or its config) for object arrays.

    Returns
    -------
    dtype : numpy.dtype
    filters : list of dict or None
        ``[object_codec_config]`` to prepend to the array's filters, or None.

    Raises
    ------
    MetadataError
        Not a dtype NumPy/Zarr v2 supports; a datetime without unit; an object
        dtype without ``object_codec``; an ``object_codec`` that is not an
        object codec (see ``OBJECT_CODEC_IDS``).

    Warns
    -----
    UserWarning
        ``object_codec`` given for a non-object dtype (it is ignored, as in zarr 2).
    """
    where = "normalize_dtype"
    if inspect.isclass(dtype) and dtype.__name__ in _SHORTHAND_CODECS:
        dtype = dtype.__name__
    if isinstance(dtype, str):
        shorthand, _, arguments = dtype.partition(":")
        if shorthand in _SHORTHAND_CODECS:
            if object_codec is None:
                codec_id = _SHORTHAND_CODECS[shorthand]
                args = arguments.split(",") if arguments else []
                try:
                    object_codec = numcodecs.registry.codec_registry[codec_id](*args)
                except Exception as exc:
                    raise metadata_error(
                        where, "dtype", f"cannot build codec {codec_id!r} for {dtype!r}: {exc}"
                    ) from exc
            return np.dtype(object), [_object_codec_config(object_codec)]
    if isinstance(dtype, str) and dtype in ML_DTYPE_KINDS:
        try:
            dtype = ml_dtype(dtype)
        except ImportError as exc:
            raise metadata_error(where, "dtype", str(exc)) from exc
    try:
        resolved = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise metadata_error(where, "dtype", f"{dtype!r} is not a data type: {exc}") from exc
    try:
        check_dtype(resolved.base)
    except ValueError as exc:
        raise metadata_error(where, "dtype", f"is not supported: {exc}") from exc
    if resolved.hasobject:
        if object_codec is None:
            raise metadata_error(
                where,
                "object_codec",
                "is required for object arrays (e.g. numcodecs.VLenUTF8(), or dtype=str)",
            )
        return resolved, [_object_codec_config(object_codec)]
    if object_codec is not None:
        warnings.warn(
            "an object_codec is only needed for object arrays; ignoring it", UserWarning, stacklevel=2
        )
    return resolved, None


def _object_codec_config(codec: Any) -> dict[str, Any]:
    config = codec_to_config(codec, where="normalize_dtype", field="object_codec")
    if config["id"] not in OBJECT_CODEC_IDS:
        raise metadata_error(
            "normalize_dtype",
            "object_codec",
            f"{config['id']!r} does not encode objects; use one of {sorted(OBJECT_CODEC_IDS)}",
        )
    return config
