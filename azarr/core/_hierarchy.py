"""Node bookkeeping shared by arrays and groups: what exists at a path, and
preparing a path for a new node (overwrite, implicit parent groups).

Every function takes the store's `StoreIO`, the one
managed path to it: each existence check, document read and write, listing and
delete here is budgeted, timed and retried.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from azarr.core._paths import node_key
from azarr.errors import ContainsArrayError, ContainsGroupError, PreconditionFailedError
from azarr.metadata import ZARRAY, ZGROUP, GroupMetadata
from azarr.scheduler import StoreIO


async def contains_array(io: StoreIO, path: str) -> bool:
    """True if an array (a ``.zarray`` document) exists at ``path``."""
    return await io.exists(node_key(path, ZARRAY))


async def contains_group(io: StoreIO, path: str) -> bool:
    """True if a group (a ``.zgroup`` document) exists at ``path``."""
    return await io.exists(node_key(path, ZGROUP))


async def node_kind(io: StoreIO, path: str) -> Literal["array", "group"] | None:
    """What is at ``path``: ``"array"``, ``"group"`` or None (both checks run concurrently).

    An array wins if both documents exist, as in zarr-python 2's ``open``.
    """
    is_array, is_group = await asyncio.gather(contains_array(io, path), contains_group(io, path))
    return "array" if is_array else "group" if is_group else None


Document: TypeAlias = bytes | Mapping[str, Any]
"""A metadata document as stored (bytes) or already decoded (from consolidated metadata)."""


async def prepare_node_path(io: StoreIO, path: str, *, overwrite: bool) -> None:
    """Make ``path`` ready for a new array or group.

    With ``overwrite`` every key under ``path`` is deleted first (zarr-python 2
    ``rmdir``); without it an existing node is an error. Then the parent groups
    are created, as the spec requires every ancestor of a node to be a group
    (zarr-python 2 ``_require_parent_group``).

    Raises
    ------
    ContainsArrayError, ContainsGroupError
        A node exists at ``path`` (or an ancestor is an array) and ``overwrite`` is False.
    """
    if overwrite:
        await io.delete_prefix(path)
    else:
        kind = await node_kind(io, path)
        if kind == "array":
            raise ContainsArrayError(f"an array already exists at path {path!r} in {io.url}")
        if kind == "group":
            raise ContainsGroupError(f"a group already exists at path {path!r} in {io.url}")
    await require_parent_groups(io, path, overwrite=overwrite)


async def write_node_document(io: StoreIO, path: str, name: str, document: bytes, *, overwrite: bool) -> None:
    """Write a new node's ``.zarray``/``.zgroup`` at ``path``.

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
        kind = "an array" if name == ZARRAY else "a group"
        error = ContainsArrayError if name == ZARRAY else ContainsGroupError
        raise error(f"{kind} already exists at path {path!r} in {io.url} (created concurrently)") from None


async def _create_parent_group(io: StoreIO, ancestor: str) -> None:
    """A missing ancestor's ``.zgroup``; concurrent creators of the same one all succeed."""
    key = node_key(ancestor, ZGROUP)
    if not io.store.supports_conditional_writes:
        await io.set(key, GroupMetadata().to_json())
        return
    # Only if absent: a concurrent creator's group (and anything it did since) stays.
    with contextlib.suppress(PreconditionFailedError):
        await io.set_if(key, GroupMetadata().to_json(), if_not_exists=True)


async def require_parent_groups(io: StoreIO, path: str, *, overwrite: bool) -> None:
    """Create a ``.zgroup`` for every ancestor of ``path`` that lacks one.

    An ancestor that is an array is replaced by a group when ``overwrite`` is
    True, else it is an error (an array cannot contain nodes).

    Raises
    ------
    ContainsArrayError
        An ancestor is an array and ``overwrite`` is False.
    """
    if not path:
        return
    segments = path.split("/")
    ancestors = ["/".join(segments[:i]) for i in range(len(segments))]
    kinds = await asyncio.gather(*(node_kind(io, a) for a in ancestors))
    for ancestor, kind in zip(ancestors, kinds, strict=True):
        if kind == "array":
            if not overwrite:
                raise ContainsArrayError(
                    f"cannot create a node at {path!r}: ancestor {ancestor!r} is an array in {io.url}"
                )
            await io.delete_prefix(ancestor)
            await io.set(node_key(ancestor, ZGROUP), GroupMetadata().to_json())
        elif kind is None:
            await _create_parent_group(io, ancestor)
