"""``zarr.json`` of a group (v3 spec, "Group metadata"), and node documents in general.

A group's ``zarr.json`` holds its ``attributes`` and, as zarr-python 3 writes it,
its hierarchy's consolidated metadata: ``"consolidated_metadata": {"kind": "inline",
"must_understand": false, "metadata": {relative path: node zarr.json, ...}}``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from azarr.metadata._json import decode_json
from azarr.metadata._keys import ZARR_JSON, metadata_error, short_repr
from azarr.metadata._v3_array import check_extensions, encode_v3_json

__all__ = ["GroupV3Metadata", "parse_v3_consolidated", "v3_node_type"]

_GROUP_MEMBERS = frozenset({"zarr_format", "node_type", "attributes", "consolidated_metadata"})


def v3_node_type(data: bytes | str | Mapping[str, Any], *, key: str) -> tuple[str, Mapping[str, Any]]:
    """``("array" | "group", document)`` of a ``zarr.json``.

    Raises
    ------
    MetadataError
        Not a JSON object, ``zarr_format`` not 3, or ``node_type`` neither.
    """
    where = repr(key)
    document = data if isinstance(data, Mapping) else decode_json(data, key=key)
    if not isinstance(document, Mapping):
        raise metadata_error(where, None, f"must be a JSON object, got {type(document).__name__}")
    zarr_format = document.get("zarr_format")
    if zarr_format != 3 or isinstance(zarr_format, bool):
        raise metadata_error(where, "zarr_format", f"must be 3, got {short_repr(zarr_format)}")
    node_type = document.get("node_type")
    if node_type not in ("array", "group"):
        raise metadata_error(where, "node_type", f"must be 'array' or 'group', got {short_repr(node_type)}")
    return str(node_type), document


@dataclass(frozen=True)
class GroupV3Metadata:
    """A group's ``zarr.json``: attributes, optional consolidated metadata, extensions.

    zarr-python 3: ``zarr.core.group.GroupMetadata`` with ``zarr_format=3``.
    """

    attributes: dict[str, Any] = field(default_factory=dict)
    consolidated: dict[str, dict[str, Any]] | None = None
    extensions: dict[str, Any] = field(default_factory=dict)
    zarr_format: int = 3

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], *, key: str = ZARR_JSON) -> GroupV3Metadata:
        """Parse and validate a group ``zarr.json``.

        Raises
        ------
        MetadataError
            Not a group document; ``attributes`` not an object; malformed
            ``consolidated_metadata``; an unknown member without ``"must_understand": false``.
        """
        where = repr(key)
        node_type, document = v3_node_type(data, key=key)
        if node_type != "group":
            raise metadata_error(where, "node_type", "must be 'group', got 'array'")
        extensions = check_extensions(document, _GROUP_MEMBERS, where=where)
        attributes = document.get("attributes", {})
        if not isinstance(attributes, Mapping):
            raise metadata_error(where, "attributes", f"must be an object, got {short_repr(attributes)}")
        consolidated = document.get("consolidated_metadata")
        return cls(
            attributes=dict(attributes),
            consolidated=None if consolidated is None else parse_v3_consolidated(consolidated, where=where),
            extensions=extensions,
        )

    def to_dict(self) -> dict[str, Any]:
        """The document, members in zarr-python 3's order."""
        document: dict[str, Any] = {"attributes": copy.deepcopy(self.attributes), "zarr_format": 3}
        if self.consolidated is not None:
            document["consolidated_metadata"] = {
                "kind": "inline",
                "must_understand": False,
                "metadata": copy.deepcopy(self.consolidated),
            }
        document["node_type"] = "group"
        document.update(copy.deepcopy(self.extensions))
        return document

    def to_json(self) -> bytes:
        """The ``zarr.json`` bytes as zarr-python 3 writes them."""
        return encode_v3_json(self.to_dict())


def parse_v3_consolidated(value: Any, *, where: str) -> dict[str, dict[str, Any]]:
    """The ``metadata`` of a ``consolidated_metadata`` member: relative path -> node document.

    The node documents are checked when their nodes open.

    Raises
    ------
    MetadataError
        Not an object of kind ``"inline"`` with a ``metadata`` object of objects.
    """
    if not isinstance(value, Mapping) or value.get("kind") != "inline":
        raise metadata_error(
            where, "consolidated_metadata", f"must be an object of kind 'inline', got {short_repr(value)}"
        )
    entries = value.get("metadata")
    if not isinstance(entries, Mapping):
        raise metadata_error(
            where, "consolidated_metadata", f"'metadata' must be an object, got {short_repr(entries)}"
        )
    out: dict[str, dict[str, Any]] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name or name.startswith("/") or not isinstance(entry, Mapping):
            raise metadata_error(
                where, "consolidated_metadata", f"entry {short_repr(name)} must be a path and a node document"
            )
        out[name] = dict(entry)
    return out
