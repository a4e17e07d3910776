"""Zarr v3 codec lists (the ``codecs`` of ``zarr.json``) as a `CodecChain`, and back.

The names and configurations are the v3 core spec's (``bytes``, ``transpose``,
``blosc``, ``gzip``, ``zstd``, ``crc32c``), the ``vlen-utf8``/``vlen-bytes``
extensions, and the ``numcodecs.<id>`` names zarr-python 3 registers for the rest of
numcodecs (``{"name": "numcodecs.delta", "configuration": {"dtype": "<f8"}}``: the
numcodecs configuration without its ``id``). Every codec runs on numcodecs, as the
v2 codecs do. ``sharding_indexed`` is not a codec of this chain: an array whose one codec
it is has shards (``azarr.codecs._sharding``), read and written below the chunk pipeline,
and its inner ``codecs`` are such a chain.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numcodecs.registry
import numpy as np

from azarr.codecs._chain import CodecChain
from azarr.codecs._sharding import SHARDING_CODEC
from azarr.errors import MetadataError

__all__ = [
    "ARRAY_TO_ARRAY",
    "BYTES_TO_BYTES",
    "SHARDING_CODEC",
    "codec_name",
    "numcodecs_to_v3",
    "parse_v3_codecs",
]


#: v3 codecs that are bytes -> bytes, by name (the ``numcodecs.*`` ones are added below).
BYTES_TO_BYTES = frozenset({"blosc", "gzip", "zstd", "crc32c"})
#: numcodecs ids zarr-python 3 registers as array -> array codecs (``numcodecs.<id>``).
ARRAY_TO_ARRAY = frozenset({"delta", "fixedscaleoffset", "quantize", "bitround", "astype", "packbits"})
#: Those of them that act element by element, so they commute with a ``transpose``.
_ELEMENTWISE = frozenset({"fixedscaleoffset", "quantize", "bitround", "astype"})
#: numcodecs ids zarr-python 3 registers as array -> bytes codecs.
_NUMCODECS_ARRAY_TO_BYTES = frozenset({"pcodec", "zfpy"})
#: numcodecs ids zarr-python 3 registers as bytes -> bytes codecs.
_NUMCODECS_BYTES_TO_BYTES = frozenset(
    {
        "blosc",
        "lz4",
        "zstd",
        "zlib",
        "gzip",
        "bz2",
        "lzma",
        "shuffle",
        "crc32",
        "crc32c",
        "adler32",
        "fletcher32",
        "jenkins_lookup3",
    }
)
_NUMCODECS_PREFIX = "numcodecs."
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
_NATIVE = sys.byteorder


def _error(where: str, field: str, problem: str) -> MetadataError:
    return MetadataError(f"{where}: {field!r} {problem}")


def codec_name(entry: Any) -> str | None:
    """The ``name`` of a v3 codec entry (a string or an object with one), else None."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
        return str(entry["name"])
    return None


def _configuration(entry: Any, where: str, field: str) -> dict[str, Any]:
    if isinstance(entry, str):
        return {}
    if not isinstance(entry, Mapping):
        raise _error(where, field, f"must be an object with a 'name', got {entry!r}")
    extra = set(entry) - {"name", "configuration", "must_understand"}
    if extra:
        raise _error(where, field, f"has unknown member(s) {sorted(extra)}")
    config = entry.get("configuration", {})
    if not isinstance(config, Mapping):
        raise _error(where, field, f"'configuration' must be an object, got {config!r}")
    return dict(config)


def _int(config: Mapping[str, Any], name: str, where: str, field: str, *, low: int, high: int) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _error(
            where, field, f"configuration {name!r} must be an integer in [{low}, {high}], got {value!r}"
        )
    return value


def _only(config: Mapping[str, Any], allowed: set[str], where: str, field: str) -> None:
    extra = set(config) - allowed
    if extra:
        raise _error(where, field, f"has unknown configuration key(s) {sorted(extra)}")


def _bytes_to_bytes(name: str, config: dict[str, Any], where: str, field: str) -> dict[str, Any]:
    """The numcodecs configuration of a v3 bytes -> bytes codec."""
    if name == "blosc":
        _only(config, {"cname", "clevel", "shuffle", "typesize", "blocksize"}, where, field)
        cname = config.get("cname")
        if cname not in ("lz4", "lz4hc", "blosclz", "zstd", "snappy", "zlib"):
            raise _error(where, field, f"configuration 'cname' is not a Blosc compressor: {cname!r}")
        shuffle = config.get("shuffle", "noshuffle")
        if not isinstance(shuffle, str) or shuffle not in _BLOSC_SHUFFLE:  # a list is unhashable
            raise _error(
                where,
                field,
                f"configuration 'shuffle' must be one of {sorted(_BLOSC_SHUFFLE)}, got {shuffle!r}",
            )
        numcodecs_config: dict[str, Any] = {
            "id": "blosc",
            "cname": cname,
            "clevel": _int(config, "clevel", where, field, low=0, high=9),
            "shuffle": _BLOSC_SHUFFLE[shuffle],
            "blocksize": _int(
                {"blocksize": config.get("blocksize", 0)}, "blocksize", where, field, low=0, high=2**31 - 1
            ),
        }
        if "typesize" in config:
            numcodecs_config["typesize"] = _int(config, "typesize", where, field, low=1, high=255)
        return numcodecs_config
    if name == "gzip":
        _only(config, {"level"}, where, field)
        return {"id": "gzip", "level": _int(config, "level", where, field, low=0, high=9)}
    if name == "zstd":
        _only(config, {"level", "checksum"}, where, field)
        checksum = config.get("checksum", False)
        if not isinstance(checksum, bool):
            raise _error(where, field, f"configuration 'checksum' must be a boolean, got {checksum!r}")
        level = _int(config, "level", where, field, low=-131072, high=22)
        return {"id": "zstd", "level": level, "checksum": checksum}
    _only(config, set(), where, field)  # crc32c
    return {"id": "crc32c"}


def _numcodecs(name: str, config: dict[str, Any], where: str, field: str) -> dict[str, Any]:
    codec_id = name[len(_NUMCODECS_PREFIX) :]
    if "id" in config:
        raise _error(where, field, "configuration must not hold an 'id' (the name says it)")
    if codec_id not in numcodecs.registry.codec_registry and codec_id not in numcodecs.registry.entries:
        raise _error(where, field, f"names numcodecs codec {codec_id!r}, which numcodecs does not know")
    return {"id": codec_id, **config}


def _dtype_after(config: Mapping[str, Any], dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The element type a numcodecs array -> array codec produces from ``dtype``."""
    for key in ("astype", "encode_dtype"):
        if isinstance(config.get(key), str):
            found: np.dtype[Any] = np.dtype(config[key])
            return found
    return dtype


def parse_v3_codecs(
    codecs: Any, *, dtype: np.dtype[Any], ndim: int, where: str
) -> tuple[list[Any], CodecChain]:
    """Validate a v3 ``codecs`` list and build its `CodecChain`.

    Parameters
    ----------
    codecs : Any
        The ``codecs`` member of ``zarr.json``.
    dtype : numpy.dtype
        The array's element type in memory (object for ``string`` and ``bytes``).
    ndim : int
        The array's number of dimensions (``transpose`` must permute them all).
    where : str
        The quoted store key, named in every error.

    Returns
    -------
    list, CodecChain
        The codec list as given (a copy) and its chain.

    Raises
    ------
    MetadataError
        Not a list; an entry that is not a codec object; an unknown codec name (each
        names the entry); ``sharding_indexed`` (an array's one codec only: see
        ``azarr.codecs._sharding``); no array -> bytes
        codec, or two; codecs out of kind order (array -> array, array -> bytes,
        bytes -> bytes); a configuration the codec does not accept; ``bytes`` without
        ``endian`` for a multi-byte type; ``vlen-*`` on a fixed-size type or ``bytes``
        on a variable-length one; an order-dependent numcodecs filter before a ``transpose``.
    """
    if not isinstance(codecs, list | tuple) or not codecs:
        raise _error(where, "codecs", f"must be a non-empty list of codec objects, got {codecs!r}")
    permutation = tuple(range(ndim))
    filters: list[dict[str, Any]] = []
    compressors: list[dict[str, Any]] = []
    endian: Literal["little", "big"] | None = None
    serialized = dtype  # element type the array -> bytes codec receives
    phase = 0  # 0: array -> array, 1: after array -> bytes
    for i, entry in enumerate(codecs):
        field = f"codecs[{i}]"
        name = codec_name(entry)
        if name is None:
            raise _error(
                where, field, f"must be a codec name or an object with a string 'name', got {entry!r}"
            )
        config = _configuration(entry, where, field)
        if name == SHARDING_CODEC:
            raise _error(
                where,
                field,
                "is the sharding_indexed codec, which azarr supports only as an array's one codec "
                "(codecs: [sharding_indexed], as zarr-python 3 and TensorStore write it)",
            )
        numcodecs_id = name[len(_NUMCODECS_PREFIX) :] if name.startswith(_NUMCODECS_PREFIX) else None
        if name == "transpose" or numcodecs_id in ARRAY_TO_ARRAY:
            if phase:
                raise _error(where, field, f"({name}, array -> array) cannot follow the array -> bytes codec")
            if name == "transpose":
                _only(config, {"order"}, where, field)
                order = config.get("order")
                if (
                    not isinstance(order, list | tuple)
                    or not all(isinstance(x, int) and not isinstance(x, bool) for x in order)
                    or sorted(order) != list(range(ndim))
                ):
                    raise _error(
                        where,
                        field,
                        f"configuration 'order' must be a permutation of 0..{ndim - 1}, got {order!r}",
                    )
                if any(f["id"] not in _ELEMENTWISE for f in filters) and tuple(order) != tuple(range(ndim)):
                    raise _error(
                        where,
                        field,
                        "follows an order-dependent numcodecs codec, which azarr cannot run before a transpose",
                    )
                permutation = tuple(permutation[j] for j in order)
            else:
                filter_config = _numcodecs(name, config, where, field)
                filters.append(filter_config)
                serialized = _dtype_after(filter_config, serialized)
            continue
        if name in ("bytes", "vlen-utf8", "vlen-bytes") or numcodecs_id in _NUMCODECS_ARRAY_TO_BYTES:
            if phase:
                raise _error(where, field, f"is a second array -> bytes codec ({name})")
            phase = 1
            if name == "bytes":
                _only(config, {"endian"}, where, field)
                if dtype.hasobject:
                    raise _error(
                        where,
                        field,
                        "(bytes) cannot serialize a variable-length data type; use vlen-utf8 or vlen-bytes",
                    )
                given = config.get("endian")
                if given not in (None, "little", "big"):
                    raise _error(
                        where, field, f"configuration 'endian' must be 'little' or 'big', got {given!r}"
                    )
                if _order_matters(serialized):
                    if given is None:
                        raise _error(
                            where, field, f"needs configuration 'endian' for the multi-byte type {serialized}"
                        )
                    endian = given
            elif numcodecs_id is not None:
                filters.append(_numcodecs(name, config, where, field))
            else:
                if not dtype.hasobject:
                    raise _error(where, field, f"({name}) serializes variable-length types only, not {dtype}")
                _only(config, set(), where, field)
                filters.append({"id": name})
            continue
        if name in BYTES_TO_BYTES or numcodecs_id in _NUMCODECS_BYTES_TO_BYTES:
            if not phase:
                raise _error(
                    where, field, f"({name}, bytes -> bytes) cannot come before the array -> bytes codec"
                )
            if numcodecs_id is not None:
                compressors.append(_numcodecs(name, config, where, field))
            else:
                compressors.append(_bytes_to_bytes(name, config, where, field))
            continue
        raise _error(where, field, f"names unknown codec {name!r}")
    if not phase:
        raise _error(where, "codecs", "has no array -> bytes codec (such as bytes or vlen-utf8)")
    if dtype.hasobject and not any(f["id"] in ("vlen-utf8", "vlen-bytes") for f in filters):
        raise _error(where, "codecs", "must serialize the variable-length type with vlen-utf8 or vlen-bytes")
    layout: Literal["C", "F"] = "C"
    perm: tuple[int, ...] | None = None
    if permutation == tuple(reversed(range(ndim))) and ndim > 1:
        layout = "F"
    elif permutation != tuple(range(ndim)):
        perm = permutation
    chain = CodecChain(
        order=layout,
        permutation=perm,
        filters=tuple(filters),
        endian=endian,
        compressors=tuple(compressors),
    )
    return [dict(e) if isinstance(e, Mapping) else e for e in codecs], chain


def _order_matters(dtype: np.dtype[Any]) -> bool:
    """Whether ``dtype``'s bytes depend on the byte order (multi-byte numbers, UTF-32, such fields)."""
    return dtype.newbyteorder("<") != dtype.newbyteorder(">")


def numcodecs_to_v3(config: Mapping[str, Any]) -> dict[str, Any]:
    """The v3 codec entry of a numcodecs configuration (zarr-python 3's spelling).

    Blosc, Zstd, GZip and CRC32C become the core codecs (``blosc``, ``zstd``,
    ``gzip``, ``crc32c``); any other codec ``numcodecs.<id>`` with its configuration.
    """
    conf = dict(config)
    codec_id = conf.pop("id")
    if codec_id == "blosc":
        number = conf.get("shuffle", 1)
        names = {v: k for k, v in _BLOSC_SHUFFLE.items()}
        shuffle = names.get(number, "shuffle") if isinstance(number, int) else "shuffle"
        entry: dict[str, Any] = {
            "cname": conf.get("cname", "lz4"),
            "clevel": conf.get("clevel", 5),
            "shuffle": shuffle,
            "blocksize": conf.get("blocksize", 0),
        }
        if "typesize" in conf:
            entry = {"typesize": conf["typesize"], **entry}
        return {"name": "blosc", "configuration": entry}
    if codec_id == "zstd":
        return {
            "name": "zstd",
            "configuration": {"level": conf.get("level", 0), "checksum": bool(conf.get("checksum", False))},
        }
    if codec_id == "gzip":
        return {"name": "gzip", "configuration": {"level": conf.get("level", 1)}}
    if codec_id == "crc32c" and not conf:
        return {"name": "crc32c"}
    if codec_id in ("vlen-utf8", "vlen-bytes"):
        return {"name": codec_id, "configuration": {}}
    return {"name": _NUMCODECS_PREFIX + codec_id, "configuration": conf}


def default_serializer(dtype: np.dtype[Any], string_kind: str | None = None) -> dict[str, Any]:
    """zarr-python 3's serializer for ``dtype``: ``bytes`` (with ``endian`` for multi-byte
    types), or ``vlen-utf8``/``vlen-bytes`` for the variable-length ``string``/``bytes`` types."""
    if dtype.hasobject:
        return {"name": "vlen-bytes" if string_kind == "bytes" else "vlen-utf8", "configuration": {}}
    if _order_matters(dtype):
        return {"name": "bytes", "configuration": {"endian": "little"}}
    return {"name": "bytes"}


def v3_endian_of(dtype: np.dtype[Any]) -> Literal["little", "big"]:
    """The ``bytes`` codec endian that stores ``dtype``'s own byte order."""
    order = dtype.byteorder
    if order == "=":
        return "little" if _NATIVE == "little" else "big"
    return "big" if order == ">" else "little"


def normalize_v3_codec(codec: Any) -> dict[str, Any]:
    """One codec given by a caller (a v3 entry, its name, or a numcodecs codec/config with
    an ``id``) as a v3 entry."""
    if isinstance(codec, str):
        return {"name": codec}
    if isinstance(codec, Mapping):
        if "name" in codec:
            return dict(codec)
        if "id" in codec:
            return numcodecs_to_v3(codec)
    get_config = getattr(codec, "get_config", None)
    if callable(get_config):
        return numcodecs_to_v3(get_config())
    to_dict = getattr(codec, "to_dict", None)  # a zarr-python 3 codec object
    if callable(to_dict):
        entry = to_dict()
        if isinstance(entry, Mapping) and "name" in entry:
            return dict(entry)
    raise TypeError(f"not a codec (a v3 codec object, a name, or a numcodecs codec): {codec!r}")


def normalize_v3_codecs(codecs: Sequence[Any]) -> list[dict[str, Any]]:
    """`normalize_v3_codec` of each."""
    return [normalize_v3_codec(c) for c in codecs]
