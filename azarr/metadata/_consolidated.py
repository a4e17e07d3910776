"""``.zmetadata``: zarr-python 2's consolidated metadata (``consolidate_metadata``).

Not part of the Zarr v2 spec. The document is
``{"metadata": {key: document, ...}, "zarr_consolidated_format": 1}`` where each
key is a ``.zarray``/``.zgroup``/``.zattrs`` key relative to the consolidated
root and each value is that document as a JSON object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from azarr.metadata._json import decode_json, encode_json, to_jsonable
from azarr.metadata._keys import ZMETADATA, is_v2_metadata_key, metadata_error

CONSOLIDATED_FORMAT = 1


def build_consolidated(documents: Mapping[str, bytes | str | Mapping[str, Any]]) -> bytes:
    """Encode a ``.zmetadata`` document (zarr-python 2 ``consolidate_metadata``).

    Keys that are not v2 metadata keys (see `is_v2_metadata_key`) are skipped,
    as zarr-python 2 filters the store listing, so a whole listing may be passed.

    Parameters
    ----------
    documents : Mapping of str to bytes, str or Mapping
        Store key -> the document as stored (JSON bytes) or already decoded.

    Returns
    -------
    bytes
        The ``.zmetadata`` bytes, formatted as by `encode_json`.

    Raises
    ------
    MetadataError
        A document is not valid JSON or not a JSON object (names its key).
    TypeError
        A decoded document holds a value with no JSON representation.
    """
    metadata: dict[str, Any] = {}
    for key, value in documents.items():
        if not is_v2_metadata_key(key):
            continue
        document = value if isinstance(value, Mapping) else decode_json(value, key=key)
        if not isinstance(document, Mapping):
            raise metadata_error(repr(key), None, f"must be a JSON object, got {type(document).__name__}")
        metadata[key] = to_jsonable(document, special_floats=True)
    return encode_json({"metadata": metadata, "zarr_consolidated_format": CONSOLIDATED_FORMAT})


def parse_consolidated(
    data: bytes | str | Mapping[str, Any], *, key: str = ZMETADATA
) -> dict[str, dict[str, Any]]:
    """Parse and validate a ``.zmetadata`` document (zarr-python 2 ``ConsolidatedMetadataStore``).

    Entries whose key is not a metadata key are dropped (the format does not
    define them). The documents themselves are not validated here: each is
    checked when its node is opened (``ArrayMetadata.from_json`` etc.).

    Parameters
    ----------
    data : bytes, str or Mapping
        The stored JSON.
    key : str
        Store key of the document, named in errors.

    Returns
    -------
    dict
        Metadata key (e.g. ``"a/b/.zarray"``) -> decoded document.

    Raises
    ------
    MetadataError
        Invalid JSON; not an object; ``zarr_consolidated_format`` missing or not
        1; ``metadata`` missing or not an object; an entry that is not an object.
    """
    where = repr(key)
    document = data if isinstance(data, Mapping) else decode_json(data, key=key)
    if not isinstance(document, Mapping):
        raise metadata_error(where, None, f"must be a JSON object, got {type(document).__name__}")
    version = document.get("zarr_consolidated_format")
    if not isinstance(version, int) or isinstance(version, bool) or version != CONSOLIDATED_FORMAT:
        raise metadata_error(
            where,
            "zarr_consolidated_format",
            f"must be {CONSOLIDATED_FORMAT}, got {version!r} (unsupported consolidated metadata format)",
        )
    entries = document.get("metadata")
    if not isinstance(entries, Mapping):
        raise metadata_error(where, "metadata", f"must be a JSON object of documents, got {entries!r}")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not is_v2_metadata_key(name):
            continue
        if not isinstance(entry, Mapping):
            raise metadata_error(where, f"metadata[{name!r}]", f"must be a JSON object, got {entry!r}")
        out[name] = dict(entry)
    return out
