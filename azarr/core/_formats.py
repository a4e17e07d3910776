"""Which documents a node has in each Zarr format, read in one round trip.

A Zarr v2 node is ``.zarray`` or ``.zgroup`` plus ``.zattrs``; a Zarr v3 node is one
``zarr.json`` holding its attributes. `read_node` fetches what either format
needs at once (``.zarray``, ``.zattrs`` and ``zarr.json`` together, ``.zgroup``
only when neither format has an array there), so opening costs one round trip
whatever the format, and the format is found rather than asked for. Everything
above ``core`` then sees `NodeDocuments` and the metadata classes of
``azarr.metadata``, never the key names.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from azarr import config
from azarr.core._paths import node_key
from azarr.errors import MetadataError
from azarr.metadata import (
    ZARR_JSON,
    ZARRAY,
    ZATTRS,
    ZGROUP,
    AnyArrayMetadata,
    ArrayMetadata,
    ArrayV3Metadata,
    GroupV3Metadata,
    parse_attributes,
    v3_node_type,
)
from azarr.scheduler import StoreIO

Document: TypeAlias = bytes | Mapping[str, Any]
"""A metadata document as stored (bytes) or already decoded (from consolidated metadata)."""

ZarrFormat: TypeAlias = Literal[2, 3]
Kind: TypeAlias = Literal["array", "group"]


def check_zarr_format(zarr_format: Any, *, allow_none: bool = True) -> ZarrFormat | None:
    """``zarr_format`` if it is 2, 3 (or None, when allowed).

    Raises
    ------
    ValueError
        Anything else.
    """
    if zarr_format is None and allow_none:
        return None
    if zarr_format in (2, 3) and not isinstance(zarr_format, bool):
        return zarr_format  # type: ignore[no-any-return]
    raise ValueError(f"zarr_format must be 2 or 3, got {zarr_format!r}")


def format_argument(zarr_format: Any, zarr_version: Any = None) -> ZarrFormat | None:
    """``zarr_format``, or ``zarr_version`` (zarr-python 2's name for it, which zarr-python 3
    keeps as a deprecated alias); None when neither is given.

    Raises
    ------
    ValueError
        Either is not 2 or 3, or they differ.
    """
    if zarr_version is None:
        return check_zarr_format(zarr_format)
    version = check_zarr_format(zarr_version)
    if zarr_format is not None and check_zarr_format(zarr_format) != version:
        raise ValueError(f"zarr_format={zarr_format!r} and zarr_version={zarr_version!r} differ")
    return version


def creation_format(zarr_format: Any) -> ZarrFormat:
    """The format a new node gets: ``zarr_format``, else ``azarr.config`` ``zarr_format`` (2)."""
    chosen = check_zarr_format(zarr_format)
    if chosen is None:
        chosen = check_zarr_format(config.get("zarr_format"), allow_none=False)
    assert chosen is not None
    return chosen


def metadata_key(path: str, zarr_format: ZarrFormat, kind: Kind = "array") -> str:
    """The key of a node's metadata document (``.zarray``/``.zgroup`` or ``zarr.json``)."""
    if zarr_format == 3:
        return node_key(path, ZARR_JSON)
    return node_key(path, ZARRAY if kind == "array" else ZGROUP)


def attributes_key(path: str, zarr_format: ZarrFormat) -> str:
    """The key holding a node's attributes (``.zattrs``, or ``zarr.json`` itself in v3)."""
    return node_key(path, ZATTRS if zarr_format == 2 else ZARR_JSON)


@dataclass(frozen=True)
class NodeDocuments:
    """What `read_node` found at a path.

    Attributes
    ----------
    zarr_format : {2, 3}
    kind : {"array", "group"}
    metadata : Document
        ``.zarray``/``.zgroup``, or ``zarr.json``.
    attributes : Document or None
        ``.zattrs`` (v2; None if absent). v3 attributes are inside ``metadata``.
    """

    zarr_format: ZarrFormat
    kind: Kind
    metadata: Document
    attributes: Document | None = None

    @property
    def key(self) -> str:
        """The metadata document's name (relative): ``.zarray``, ``.zgroup`` or ``zarr.json``."""
        return ZARR_JSON if self.zarr_format == 3 else ZARRAY if self.kind == "array" else ZGROUP

    def array_metadata(self, path: str) -> AnyArrayMetadata:
        """The array metadata of either format.

        Raises
        ------
        MetadataError
            The document is invalid (names its key).
        """
        key = node_key(path, self.key)
        if self.zarr_format == 3:
            return ArrayV3Metadata.from_json(self.metadata, key=key)
        return ArrayMetadata.from_json(self.metadata, key=key)

    def attributes_dict(self, path: str) -> dict[str, Any]:
        """The node's attributes (``.zattrs``, or the ``attributes`` member of ``zarr.json``).

        Raises
        ------
        MetadataError
            An invalid document.
        """
        if self.zarr_format == 3:
            if self.kind == "array":
                return dict(self.array_metadata(path).attributes)  # type: ignore[union-attr]
            return GroupV3Metadata.from_json(self.metadata, key=node_key(path, ZARR_JSON)).attributes
        if self.attributes is None:
            return {}
        return parse_attributes(self.attributes, key=node_key(path, ZATTRS))


async def read_node(io: StoreIO, path: str, *, zarr_format: ZarrFormat | None = None) -> NodeDocuments | None:
    """The documents of the node at ``path`` in either format (or ``zarr_format`` only); None
    if there is none.

    One round trip for arrays of both formats and v3 groups (``.zarray``, ``.zattrs``
    and ``zarr.json`` read together), two for v2 groups (``.zgroup`` after). Where both
    formats have a node, v3's ``zarr.json`` wins, as in zarr-python 3.

    Raises
    ------
    MetadataError
        ``zarr.json`` is not a v3 node document.
    """
    v2 = zarr_format in (None, 2)
    v3 = zarr_format in (None, 3)
    keys = [node_key(path, ZARRAY), node_key(path, ZATTRS)] if v2 else []
    if v3:
        keys.append(node_key(path, ZARR_JSON))
    found = await io.read_documents(*keys)
    raw_v3 = found[-1] if v3 else None
    if raw_v3 is not None:
        kind, _ = v3_node_type(raw_v3, key=node_key(path, ZARR_JSON))
        return NodeDocuments(3, kind, raw_v3)  # type: ignore[arg-type]
    if not v2:
        return None
    raw_array, raw_attrs = found[0], found[1]
    if raw_array is not None:
        return NodeDocuments(2, "array", raw_array, raw_attrs)
    (raw_group,) = await io.read_documents(node_key(path, ZGROUP))
    if raw_group is not None:
        return NodeDocuments(2, "group", raw_group, raw_attrs)
    return None


async def node_kind_and_format(io: StoreIO, path: str) -> tuple[Kind | None, ZarrFormat | None]:
    """What is at ``path`` and in which format, without parsing array metadata: v2 by
    existence checks, v3 by reading ``zarr.json`` (all concurrently)."""
    is_array, is_group, raw_v3 = await asyncio.gather(
        io.exists(node_key(path, ZARRAY)),
        io.exists(node_key(path, ZGROUP)),
        io.read_documents(node_key(path, ZARR_JSON)),
    )
    if raw_v3[0] is not None:
        kind, _ = v3_node_type(raw_v3[0], key=node_key(path, ZARR_JSON))
        return kind, 3  # type: ignore[return-value]
    if is_array:
        return "array", 2
    if is_group:
        return "group", 2
    return None, None


def mixed_hierarchy_error(
    path: str, zarr_format: int, ancestor: str, ancestor_format: int, url: str
) -> MetadataError:
    """The error for a node whose format differs from its parent group's (spec: one format per hierarchy)."""
    return MetadataError(
        f"cannot create a Zarr v{zarr_format} node at {path!r} in {url}: its ancestor group "
        f"{ancestor!r} is Zarr v{ancestor_format}, and a hierarchy holds one format (zarr-python "
        f"does not see nodes of the other format as members)"
    )
