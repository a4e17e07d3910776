"""Names of the Zarr metadata documents (v2 and v3) and how errors about them are worded."""

from __future__ import annotations

from typing import Any

from azarr.errors import MetadataError

#: The only ``zarr_format`` this package reads and writes.
ZARR_FORMAT = 2

#: Array metadata document (Zarr v2 spec, "Arrays / Metadata").
ZARRAY = ".zarray"
#: Group metadata document (Zarr v2 spec, "Hierarchies / Groups").
ZGROUP = ".zgroup"
#: User attributes document (Zarr v2 spec, "Attributes").
ZATTRS = ".zattrs"
#: Consolidated metadata document (zarr-python 2 ``consolidate_metadata``; not in the spec).
ZMETADATA = ".zmetadata"
#: The one metadata document of a Zarr v3 node, array or group (v3 spec, "Metadata").
ZARR_JSON = "zarr.json"

_V2_METADATA_NAMES = frozenset({ZARRAY, ZGROUP, ZATTRS})
_METADATA_NAMES = _V2_METADATA_NAMES | {ZARR_JSON}


def is_v2_metadata_key(key: str) -> bool:
    """True if ``key`` names a ``.zarray``, ``.zgroup`` or ``.zattrs`` document (zarr-python 2 ``is_zarr_key``)."""
    return key.rpartition("/")[2] in _V2_METADATA_NAMES


def is_metadata_key(key: str) -> bool:
    """True if ``key`` names a ``.zarray``, ``.zgroup``, ``.zattrs`` or ``zarr.json`` document at any depth.

    The last ``/``-separated segment must be exactly one of the three names, so
    ``"a/b/.zarray"`` qualifies and ``"a/b.zarray"`` or ``".zmetadata"`` do not.
    (zarr-python 2's ``is_zarr_key`` only checks the suffix; a chunk key can never
    end in these names, so the stricter test accepts every real metadata key.)

    Parameters
    ----------
    key : str
        A store key.

    Returns
    -------
    bool
    """
    return key.rpartition("/")[2] in _METADATA_NAMES


def metadata_error(where: str, field: str | None, problem: str) -> MetadataError:
    """A `MetadataError` worded ``"<where>: '<field>' <problem>"``.

    ``where`` is the store key, already quoted by the caller (``repr(key)``), or
    the name of the object being built, so every message names what it is about.
    """
    if field is None:
        return MetadataError(f"{where}: {problem}")
    return MetadataError(f"{where}: {field!r} {problem}")


def check_zarr_format(value: Any, *, where: str) -> int:
    """Return ``value`` if it is the integer 2, else raise MetadataError (bools refused)."""
    if not isinstance(value, int) or isinstance(value, bool) or value != ZARR_FORMAT:
        raise metadata_error(
            where, "zarr_format", f"must be {ZARR_FORMAT}, got {value!r} (unsupported format)"
        )
    return value


def short_repr(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters (a hostile document can hold huge values)."""
    try:
        text = repr(value)
    except ValueError:  # an int over sys.get_int_max_str_digits()
        return f"<{type(value).__name__} too large to print>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
