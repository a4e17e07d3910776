"""``.zgroup`` (Zarr v2 spec, "Groups") and ``.zattrs`` (spec, "Attributes")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azarr.metadata._json import decode_json, encode_json
from azarr.metadata._keys import ZARR_FORMAT, ZATTRS, ZGROUP, check_zarr_format, metadata_error


@dataclass(frozen=True)
class GroupMetadata:
    """The contents of a ``.zgroup`` document: ``{"zarr_format": 2}``.

    Parameters
    ----------
    zarr_format : int
        Always 2.

    Raises
    ------
    MetadataError
        ``zarr_format`` is not 2.
    """

    zarr_format: int = ZARR_FORMAT

    def __post_init__(self) -> None:
        check_zarr_format(self.zarr_format, where="GroupMetadata")

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], *, key: str = ZGROUP) -> GroupMetadata:
        """Parse and validate a ``.zgroup`` document (zarr-python 2 ``decode_group_metadata``).

        Other keys are ignored. (The spec says they MUST NOT be present, but
        zarr-python 2 ignores them too, and refusing would make such groups
        unreadable for no gain.)

        Parameters
        ----------
        data : bytes, str or Mapping
            The stored JSON, or an already-decoded object (consolidated metadata).
        key : str
            Store key of the document, named in errors.

        Raises
        ------
        MetadataError
            Invalid JSON, not an object, ``zarr_format`` missing or not 2.
        """
        where = repr(key)
        document = data if isinstance(data, Mapping) else decode_json(data, key=key)
        if not isinstance(document, Mapping):
            raise metadata_error(where, None, f"must be a JSON object, got {type(document).__name__}")
        if "zarr_format" not in document:
            raise metadata_error(where, None, "is missing required key(s) ['zarr_format']")
        return cls(zarr_format=check_zarr_format(document["zarr_format"], where=where))

    def to_dict(self) -> dict[str, Any]:
        """The document as a dict: ``{"zarr_format": 2}``."""
        return {"zarr_format": self.zarr_format}

    def to_json(self) -> bytes:
        """The ``.zgroup`` bytes exactly as zarr-python 2 writes them."""
        return encode_json(self.to_dict())


def parse_attributes(data: bytes | str | Mapping[str, Any], *, key: str = ZATTRS) -> dict[str, Any]:
    """Parse a ``.zattrs`` document: a JSON object of user attributes.

    Parameters
    ----------
    data : bytes, str or Mapping
        The stored JSON, or an already-decoded object (consolidated metadata).
    key : str
        Store key of the document, named in errors.

    Returns
    -------
    dict
        A new dict of the attributes.

    Raises
    ------
    MetadataError
        Invalid JSON or UTF-8, or not a JSON object.
    """
    document = data if isinstance(data, Mapping) else decode_json(data, key=key)
    if not isinstance(document, Mapping):
        raise metadata_error(repr(key), None, f"must be a JSON object, got {type(document).__name__}")
    return dict(document)
