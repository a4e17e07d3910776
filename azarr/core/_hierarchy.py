"""Node bookkeeping shared by arrays and groups: what exists at a path, and
preparing a path for a new node (overwrite, implicit parent groups).

Every function takes the store's `StoreIO`, the one
managed path to it: each existence check, document read and write, listing and
delete here is budgeted, timed and retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

from azarr.core._formats import ZarrFormat, metadata_key, mixed_hierarchy_error, node_kind_and_format
from azarr.core._paths import node_key
from azarr.errors import ContainsArrayError, ContainsGroupError, PreconditionFailedError
from azarr.metadata import ZARRAY, GroupMetadata, GroupV3Metadata
from azarr.scheduler import StoreIO


async def contains_array(io: StoreIO, path: str) -> bool:
    """True if an array (a ``.zarray``, or an array ``zarr.json``) exists at ``path``."""
    return await node_kind(io, path) == "array"


async def contains_group(io: StoreIO, path: str) -> bool:
    """True if a group (a ``.zgroup``, or a group ``zarr.json``) exists at ``path``."""
    return await node_kind(io, path) == "group"


async def node_kind(io: StoreIO, path: str) -> Literal["array", "group"] | None:
    """What is at ``path``: ``"array"``, ``"group"`` or None (the checks run concurrently).

    A v3 ``zarr.json`` wins over v2 documents (zarr-python 3); in v2 an array wins if
    both documents exist, as in zarr-python 2's ``open``.
    """
    kind, _ = await node_kind_and_format(io, path)
    return kind


async def prepare_node_path(io: StoreIO, path: str, *, overwrite: bool, zarr_format: ZarrFormat = 2) -> None:
    """Make ``path`` ready for a new array or group.

    With ``overwrite`` every key under ``path`` is deleted first (zarr-python 2
    ``rmdir``); without it an existing node is an error. Then the parent groups
    are created, as the spec requires every ancestor of a node to be a group
    (zarr-python 2 ``_require_parent_group``).

    Raises
    ------
    ContainsArrayError, ContainsGroupError
        A node exists at ``path`` (or an ancestor is an array) and ``overwrite`` is False.
    MetadataError
        An ancestor group is of the other Zarr format.
    """
    if overwrite:
        await io.delete_prefix(path)
    else:
        kind = await node_kind(io, path)
        if kind == "array":
            raise ContainsArrayError(f"an array already exists at path {path!r} in {io.url}")
        if kind == "group":
            raise ContainsGroupError(f"a group already exists at path {path!r} in {io.url}")
    await require_parent_groups(io, path, overwrite=overwrite, zarr_format=zarr_format)


async def write_node_document(
    io: StoreIO, path: str, name: str, document: bytes, *, overwrite: bool, kind: str | None = None
) -> None:
    """Write a new node's ``.zarray``/``.zgroup`` (or ``zarr.json`` of ``kind``) at ``path``.

    Without ``overwrite``, on stores with conditional writes the document is
    written only if it does not exist (S3 ``If-None-Match: *``, GCS
    ``ifGenerationMatch=0``, ``link()`` locally): of several processes creating
    the same node at once exactly one wins, and the others get the error below
    rather than each "succeeding" over the previous one.

    Raises
    ------
    ContainsArrayError, ContainsGroupError
        Another writer created the node first (``overwrite`` False).
    ConsistencyUnsupportedError
        ``azarr.config`` ``require_consistency`` on a store without conditional writes.
    """
    key = node_key(path, name)
    if overwrite or not io.check_consistency(key):
        await io.set(key, document)
        return
    try:
        await io.set_if(key, document, if_not_exists=True)
    except PreconditionFailedError:
        is_array = name == ZARRAY or kind == "array"
        what = "an array" if is_array else "a group"
        error = ContainsArrayError if is_array else ContainsGroupError
        raise error(f"{what} already exists at path {path!r} in {io.url} (created concurrently)") from None


def group_document(zarr_format: ZarrFormat) -> bytes:
    """A new group's document: ``.zgroup`` or a group ``zarr.json`` without attributes."""
    return GroupV3Metadata().to_json() if zarr_format == 3 else GroupMetadata().to_json()


async def _create_parent_group(io: StoreIO, ancestor: str, zarr_format: ZarrFormat) -> None:
    """A missing ancestor's group document; concurrent creators of the same one all succeed."""
    key = metadata_key(ancestor, zarr_format, "group")
    if not io.store.supports_conditional_writes:
        await io.set(key, group_document(zarr_format))
        return
    # Only if absent: a concurrent creator's group (and anything it did since) stays.
    with contextlib.suppress(PreconditionFailedError):
        await io.set_if(key, group_document(zarr_format), if_not_exists=True)


async def require_parent_groups(
    io: StoreIO, path: str, *, overwrite: bool, zarr_format: ZarrFormat = 2
) -> None:
    """Create a group document (of ``zarr_format``) for every ancestor of ``path`` that lacks one.

    An ancestor that is an array is replaced by a group when ``overwrite`` is
    True, else it is an error (an array cannot contain nodes).

    Raises
    ------
    ContainsArrayError
        An ancestor is an array and ``overwrite`` is False.
    MetadataError
        An ancestor group is of the other format (a hierarchy holds one format).
    """
    if not path:
        return
    segments = path.split("/")
    ancestors = ["/".join(segments[:i]) for i in range(len(segments))]
    found = await asyncio.gather(*(node_kind_and_format(io, a) for a in ancestors))
    for ancestor, (kind, fmt) in zip(ancestors, found, strict=True):
        if kind == "group" and fmt != zarr_format:
            raise mixed_hierarchy_error(path, zarr_format, ancestor, fmt or 2, io.url)
    for ancestor, (kind, _) in zip(ancestors, found, strict=True):
        if kind == "array":
            if not overwrite:
                raise ContainsArrayError(
                    f"cannot create a node at {path!r}: ancestor {ancestor!r} is an array in {io.url}"
                )
            await io.delete_prefix(ancestor)
            await io.set(metadata_key(ancestor, zarr_format, "group"), group_document(zarr_format))
        elif kind is None:
            await _create_parent_group(io, ancestor, zarr_format)
