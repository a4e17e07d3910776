"""Normalization of user arguments to array creation (shape, chunks, fill_value,
compressor, filters), following zarr-python 2.18's ``zarr.util`` rules so the
same call produces the same ``.zarray`` in both libraries."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec

from azarr import config
from azarr.errors import CodecError, MetadataError
from azarr.metadata import decode_fill_value, ml_dtype_name

#: zarr-python 2's default compressor: Blosc(cname="lz4", clevel=5, shuffle=SHUFFLE, blocksize=0).
DEFAULT_COMPRESSOR: dict[str, Any] = {
    "id": "blosc",
    "cname": "lz4",
    "clevel": 5,
    "shuffle": 1,
    "blocksize": 0,
}

# Chunk-size targets of zarr-python 2's guess_chunks (itself from h5py), in bytes.
_CHUNK_BASE = 256 * 1024
_CHUNK_MIN = 128 * 1024
_CHUNK_MAX = 64 * 1024 * 1024


def normalize_shape(shape: int | Sequence[int] | tuple[Any, ...]) -> tuple[int, ...]:
    """Shape as a tuple of non-negative ints; an int means a 1-d shape.

    Raises
    ------
    TypeError
        A non-integer extent.
    ValueError
        A negative extent.
    """
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    try:
        dims = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    dims = _integral(dims, "shape")
    result = []
    for axis, extent in enumerate(dims):
        if isinstance(extent, bool) or not isinstance(extent, (int, np.integer)):
            raise TypeError(f"shape[{axis}] must be an int, got {extent!r}")
        if extent < 0:
            raise ValueError(f"shape[{axis}] must be >= 0, got {extent}")
        result.append(int(extent))
    return tuple(result)


def _integral(values: tuple[Any, ...], what: str) -> tuple[Any, ...]:
    """``values`` with floats of integral value made ints, with zarr-python 2's `UserWarning`."""
    if not any(isinstance(v, (float, np.floating)) for v in values):
        return values
    converted = tuple(
        int(v) if isinstance(v, (float, np.floating)) and float(v).is_integer() else v for v in values
    )
    warnings.warn(f"{what} contains non-integer value(s)", UserWarning, stacklevel=4)
    return converted


def guess_chunks(shape: tuple[int, ...], typesize: int) -> tuple[int, ...]:
    """Pick a chunk shape of roughly 128 KiB - 64 MiB for ``shape``.

    The same heuristic as zarr-python 2.18's ``guess_chunks`` (from h5py): the
    target chunk size grows with the array size, and dimensions are halved in
    turn until the chunk fits the target.

    Parameters
    ----------
    shape : tuple of int
        Array shape.
    typesize : int
        Item size in bytes.
    """
    ndim = len(shape)
    # Zero-length dimensions get chunk extent 1, as zarr-python 2 does.
    chunks = np.maximum(np.array(shape, dtype="=f8"), 1)
    dset_size = float(np.prod(chunks)) * typesize
    target = _CHUNK_BASE * (2 ** math.log10(dset_size / (1024.0 * 1024)))
    target = min(max(target, _CHUNK_MIN), _CHUNK_MAX)
    index = 0
    while True:
        chunk_bytes = float(np.prod(chunks)) * typesize
        near_target = abs(chunk_bytes - target) / target < 0.5
        if (chunk_bytes < target or near_target) and chunk_bytes < _CHUNK_MAX:
            break
        if np.prod(chunks) == 1:
            break
        chunks[index % ndim] = math.ceil(chunks[index % ndim] / 2.0)
        index += 1
    return tuple(int(c) for c in chunks)


def normalize_chunks(chunks: Any, shape: tuple[int, ...], typesize: int) -> tuple[int, ...]:
    """Chunk shape from the user's ``chunks`` argument (zarr-python 2 ``normalize_chunks``).

    ``True``/``None`` guesses a shape; ``False`` means one chunk for the whole
    array; an int applies to every dimension; a shorter tuple is completed with
    the array's extents; ``None``/``-1`` entries mean the full extent.

    Raises
    ------
    ValueError
        Too many chunk dimensions, or an extent < 1.
    """
    if chunks is None or chunks is True:
        return guess_chunks(shape, typesize)
    if chunks is False:
        return tuple(max(s, 1) for s in shape)
    if isinstance(chunks, (int, np.integer)):
        chunks = (int(chunks),) * len(shape)
    chunks = _integral(tuple(chunks), "chunks")
    if len(chunks) > len(shape):
        raise ValueError(f"chunks {chunks} have more dimensions than shape {shape}")
    chunks = chunks + tuple(shape[len(chunks) :])
    result = []
    for axis, (extent, size) in enumerate(zip(chunks, shape, strict=True)):
        if extent is None or extent == -1:
            extent = size
        extent = int(extent)
        if extent == 0 and size == 0:
            extent = 1
        if extent < 1:
            raise ValueError(f"chunks[{axis}] must be >= 1, got {extent}")
        result.append(extent)
    return tuple(result)


def normalize_fill_value(fill_value: Any, dtype: np.dtype[Any]) -> Any:
    """Fill value converted to ``dtype`` (zarr-python 2 ``normalize_fill_value``).

    ``None`` and object dtypes pass through unchanged; ``0`` becomes the dtype's
    zero (also for structured dtypes); others are cast through NumPy.

    Raises
    ------
    ValueError
        The value cannot be represented in ``dtype``.
    """
    if fill_value is None or dtype.hasobject:
        return fill_value
    if ml_dtype_name(dtype) is not None:
        # bfloat16/float8/int4: TensorStore's encoding rules ("NaN", range checks)
        try:
            return decode_fill_value(fill_value, dtype, key="fill_value")
        except MetadataError as exc:
            raise ValueError(str(exc)) from exc
    if not isinstance(fill_value, (np.void, bytes, str)) and _is_zero(fill_value):
        return np.zeros((), dtype=dtype)[()]
    if dtype.kind == "U":
        if not isinstance(fill_value, str):
            raise ValueError(f"fill_value {fill_value!r} is not valid for dtype {dtype}; use a str")
        return fill_value
    try:
        if isinstance(fill_value, bytes) and dtype.kind == "V":
            # As zarr-python 2: the bytes as a void of the item size, zero-padded, so b"" is
            # the all-zero value of a structured dtype.
            return np.array(fill_value, dtype=dtype.str).view(dtype)[()]
        return np.array(fill_value, dtype=dtype)[()]
    except Exception as exc:
        raise ValueError(f"fill_value {fill_value!r} is not valid for dtype {dtype}: {exc}") from exc


def _is_zero(value: Any) -> bool:
    try:
        return bool(value == 0)
    except Exception:
        return False


def codec_config(codec: Codec | dict[str, Any], *, role: str) -> dict[str, Any]:
    """JSON config of a numcodecs codec given as an instance or a config dict.

    Raises
    ------
    CodecError
        Not a codec, or an id unknown to numcodecs' registry.
    """
    if isinstance(codec, dict):
        try:
            numcodecs.get_codec(dict(codec))
        except Exception as exc:
            raise CodecError(f"invalid {role} {codec!r}: {exc}") from exc
        return dict(codec)
    get_config = getattr(codec, "get_config", None)
    if get_config is None:
        raise CodecError(f"{role} must be a numcodecs codec or a config dict, got {codec!r}")
    config: dict[str, Any] = get_config()
    return config


def normalize_compressor(compressor: Any, shape: tuple[int, ...]) -> dict[str, Any] | None:
    """Compressor config: ``"default"`` -> Blosc lz4, ``None``/``"none"`` -> no compressor.

    0-d arrays are never compressed (zarr-python 2: a single value gains nothing).
    """
    if shape == () or compressor is None or compressor == "none" or not _truthy(compressor):
        return None  # zarr-python 2: any false value (None, False, [], "") means no compressor
    if isinstance(compressor, str):
        if compressor == "default":
            return _default_compressor()
        # zarr-python 2 refuses a codec id here too (BadCompressorError, a ValueError).
        raise ValueError(
            f"compressor {compressor!r}: give a numcodecs codec or its config dict, "
            f"e.g. {{'id': {compressor!r}}}, not its name"
        )
    return codec_config(compressor, role="compressor")


def _truthy(value: Any) -> bool:
    try:
        return bool(value)
    except Exception:  # a codec whose truth value is ambiguous counts as given
        return True


def h5py_compression(compressor: Any, compression: Any, compression_opts: Any) -> Any:
    """The compressor of h5py-style ``compression=``/``compression_opts=`` arguments (zarr-python 2).

    ``compression`` is a codec id (``"zlib"``, ``"gzip"``, ...) built with
    ``compression_opts`` (one argument, a sequence of them, or a dict of keywords),
    ``None``/``"none"`` for no compressor, a codec, or ``"default"`` (the default: not
    given). A ``compressor`` other than ``"default"`` wins, with a `UserWarning`
    (zarr-python 2.18 does the same).

    Raises
    ------
    ValueError
        ``compression`` is of no usable kind.
    CodecError
        An unknown codec id.
    """
    if compression == "default" and compression_opts is None:
        return compressor
    if compressor != "default":
        for name, value, unset in (
            ("compression", compression, "default"),
            ("compression_opts", compression_opts, None),
        ):
            if value != unset:
                warnings.warn(
                    f"{name!r} keyword argument overridden by 'compressor'", UserWarning, stacklevel=4
                )
        return compressor
    if compression is None or compression == "none":
        return None
    if compression == "default":
        return "default"
    if isinstance(compression, str):
        config_: dict[str, Any] = {"id": compression}
        codec_cls = type(numcodecs.get_codec(dict(config_))) if compression_opts is not None else None
        if codec_cls is None:
            return config_
        if isinstance(compression_opts, dict):
            return codec_cls(**compression_opts)
        if isinstance(compression_opts, (list, tuple)):
            return codec_cls(*compression_opts)
        return codec_cls(compression_opts)
    if hasattr(compression, "get_config"):
        return compression
    raise ValueError(f"bad value for compression: {compression!r}")


def _default_compressor() -> dict[str, Any] | None:
    """``azarr.config`` ``default_compressor`` as a config (zarr-python 2 ``zarr.storage.default_compressor``)."""
    setting = config.get("default_compressor")
    if setting == "blosc-lz4":
        return dict(DEFAULT_COMPRESSOR)
    if setting is None:
        return None
    return codec_config(setting, role="default_compressor")


def normalize_filters(filters: Any) -> list[dict[str, Any]]:
    """Filter configs from a sequence of numcodecs codecs or config dicts (``None`` -> ``[]``)."""
    if not filters:
        return []
    return [codec_config(f, role="filter") for f in filters]
