"""Validation of the codec configurations named by ``compressor`` and ``filters``.

Only the JSON shape and the codec id are checked here; instantiating codecs is
the codec layer's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numcodecs.registry

from azarr.metadata._json import to_jsonable
from azarr.metadata._keys import metadata_error

#: numcodecs codecs that encode NumPy object arrays. zarr-python 2 requires one of
#: them as the first filter of an object array (it inserts ``object_codec`` at
#: filters[0] in ``_init_array_metadata``): encoding applies filters in order, so
#: the first one receives the Python objects. ``categorize`` counts, as zarr 2's
#: own tests use ``Categorize(labels, dtype=object)`` as an object codec.
OBJECT_CODEC_IDS = frozenset(
    {"vlen-utf8", "vlen-bytes", "vlen-array", "json2", "msgpack2", "pickle", "categorize"}
)


def is_known_codec(codec_id: str) -> bool:
    """True if numcodecs can resolve ``codec_id`` (registered, or an entry point).

    This is the lookup ``numcodecs.get_codec`` performs, without loading anything.
    """
    return codec_id in numcodecs.registry.codec_registry or codec_id in numcodecs.registry.entries


def parse_codec_config(value: Any, *, where: str, field: str) -> dict[str, Any]:
    """Check one codec configuration: a JSON object whose ``"id"`` names a known codec.

    Parameters
    ----------
    value : Any
        The configuration as found in the document or passed by a caller.
    where : str
        What is being validated (a quoted store key), for error messages.
    field : str
        The field holding it, e.g. ``"compressor"`` or ``"filters[1]"``.

    Returns
    -------
    dict
        A JSON-ready copy (NumPy values converted, tuples made lists).

    Raises
    ------
    MetadataError
        Not an object, no string ``"id"``, an id numcodecs does not know, or a
        value with no JSON representation.
    """
    if not isinstance(value, Mapping):
        raise metadata_error(where, field, f"must be null or a JSON object with an 'id', got {value!r}")
    codec_id = value.get("id")
    if not isinstance(codec_id, str):
        raise metadata_error(where, field, f"must have a string 'id', got {value!r}")
    if not is_known_codec(codec_id):
        raise metadata_error(
            where, field, f"names unknown codec id {codec_id!r} (not in numcodecs' registry)"
        )
    try:
        config: dict[str, Any] = to_jsonable(value, special_floats=False)
    except TypeError as exc:
        raise metadata_error(where, field, f"is not JSON-serializable: {exc}") from exc
    return config


def parse_filters(value: Any, *, where: str) -> tuple[dict[str, Any], ...] | None:
    """Check ``filters``: null, or a list of codec configurations.

    An empty list is kept as ``()`` (zarr-python 2 writes null for "no filters"
    but reads ``[]``, so both round-trip as given).

    Raises
    ------
    MetadataError
        Not null or a list, or an entry fails `parse_codec_config`.
    """
    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise metadata_error(where, "filters", f"must be null or a list of codec objects, got {value!r}")
    return tuple(parse_codec_config(f, where=where, field=f"filters[{i}]") for i, f in enumerate(value))


def codec_to_config(codec: Any, *, where: str, field: str) -> dict[str, Any]:
    """Configuration dict of a numcodecs ``Codec`` instance or of a config mapping.

    Raises
    ------
    MetadataError
        Neither a codec (no ``get_config``) nor a valid configuration.
    """
    if isinstance(codec, Mapping):
        return parse_codec_config(codec, where=where, field=field)
    get_config = getattr(codec, "get_config", None)
    if not callable(get_config):
        raise metadata_error(where, field, f"must be a numcodecs codec or a config dict, got {codec!r}")
    return parse_codec_config(get_config(), where=where, field=field)
