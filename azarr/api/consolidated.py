"""Consolidated metadata: one document describing a whole hierarchy.

Zarr v2: ``consolidate_metadata`` gathers every ``.zarray``/``.zgroup``/``.zattrs``
under a path into ``.zmetadata`` (zarr-python 2 format, ``zarr_consolidated_format:
1``). Zarr v3: it gathers every node's ``zarr.json`` into the root group's
``zarr.json``, as zarr-python 3 does (``"consolidated_metadata": {"kind": "inline",
...}``). ``open_consolidated`` reads the one document (either, in one round trip)
and serves every metadata document from it, so opening a hierarchy of any size costs
one request. As in zarr-python, structure and attributes are read-only there; chunk
data stays writable in mode ``"r+"``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from azarr.api.creation import resolve_store, with_chunk_store
from azarr.api.opening import open_managed
from azarr.core._formats import format_argument, read_node
from azarr.core._paths import node_key, normalize_path
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import ConsolidatedMetadataNotFoundError, ReadOnlyError
from azarr.metadata import (
    ZARR_JSON,
    ZARRAY,
    ZATTRS,
    ZGROUP,
    ZMETADATA,
    GroupV3Metadata,
    build_consolidated,
    decode_json,
    encode_json,
    is_metadata_key,
    parse_consolidated,
)
from azarr.scheduler import StoreIO, bounded_map
from azarr.storage import ByteRange, Generation, Store, StoreLike, StoreSpec, WrapperStore, validate_key


class ConsolidatedStore(WrapperStore):
    """A store overlay serving metadata documents from consolidated metadata.

    Metadata keys (``.zarray``, ``.zgroup``, ``.zattrs``) are answered from the
    ``.zmetadata`` contents without a request and cannot be written; chunk
    keys go to the wrapped store (zarr-python 2 ``ConsolidatedMetadataStore``
    plus its ``chunk_store``).

    Parameters
    ----------
    store : Store
        The wrapped store holding the chunks.
    documents : dict
        Metadata documents by full store key (``"a/b/.zarray"`` -> JSON object).
    read_only : bool
        Also refuse chunk writes (mode ``"r"``).
    """

    wrapper_name = "consolidated"
    forwards_references = True  # chunk keys pass through unchanged
    serves_documents = True

    def __init__(self, store: Store, documents: dict[str, Any], *, read_only: bool = True) -> None:
        super().__init__(store, read_only=read_only)
        self.documents = documents

    def wrapper_params(self) -> dict[str, Any]:
        # Pickled with the documents (the overlay has no request to rebuild them); the
        # spec names the wrapped store only, so it stays small and hashable.
        return {"documents": self.documents, "read_only": self.read_only}

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create(self.wrapper_name, self.inner.spec.root, params={"inner": self.inner.spec})

    def _refuse_metadata_write(self, key: str) -> None:
        if is_metadata_key(key):
            raise ReadOnlyError(
                f"cannot write {key!r}: metadata opened from consolidated metadata in {self.url} is read-only; "
                "open without consolidation to change structure or attributes, then consolidate_metadata again"
            )

    def get_document(self, key: str) -> Any | None:
        """The decoded metadata document at ``key`` (None if absent); no request, no JSON.

        Array and group documents are handed over as stored here (their parsers
        copy what they keep); ``.zattrs`` objects are copied, since attributes
        are returned to the caller as dicts.
        """
        document = self.documents.get(validate_key(key))
        if document and key.endswith((ZATTRS, ZARR_JSON)):  # v3 documents hold attributes too
            return copy.deepcopy(document)
        return document

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        if is_metadata_key(key):
            document = self.documents.get(key)
            if document is None:
                return None
            data = encode_json(document)
            return data if byte_range is None else data[byte_range.slice()]
        return await self.inner.get(key, byte_range)

    async def _getsize(self, key: str) -> int:
        if is_metadata_key(key):
            data = await self._get(key, None)
            if data is None:
                raise FileNotFoundError(f"{key!r} not found in the consolidated metadata of {self.url}")
            return len(data)
        return await super()._getsize(key)

    async def _set(self, key: str, value: bytes) -> None:
        self._refuse_metadata_write(key)
        await super()._set(key, value)

    async def _delete(self, key: str) -> None:
        self._refuse_metadata_write(key)
        await super()._delete(key)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        self._refuse_metadata_write(key)
        await super()._set_if(key, value, generation)

    async def _delete_if(self, key: str, generation: Generation) -> None:
        self._refuse_metadata_write(key)
        await super()._delete_if(key, generation)

    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        if is_metadata_key(key):
            return await self._get(key, None), None  # served from .zmetadata: read-only here
        return await super()._get_with_generation(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        if is_metadata_key(key):
            return await self._get(key, byte_range), None
        return await super()._get_range_with_generation(key, byte_range)

    async def _delete_prefix(self, prefix: str) -> None:
        raise ReadOnlyError(
            f"cannot delete {prefix!r}: the structure of a hierarchy opened from consolidated metadata "
            f"in {self.url} is read-only"
        )

    async def _exists(self, key: str) -> bool:
        if is_metadata_key(key):
            return key in self.documents
        return await self.inner.exists(key)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        # Chunk keys come from the wrapped store; metadata keys from the documents.
        async for key in self.inner.list_prefix(prefix):
            if not is_metadata_key(key):
                yield key
        for key in sorted(self.documents):
            if key.startswith(prefix):
                yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        # Group members are derived from the documents alone: no listing request.
        seen: set[str] = set()
        for key in sorted(self.documents):
            if key.startswith(prefix):
                child = key[len(prefix) :].split("/", 1)[0]
                if child not in seen:
                    seen.add(child)
                    yield child


async def load_consolidated(
    store: Store,
    path: str = "",
    metadata_key: str = ZMETADATA,
    *,
    read_only: bool = True,
    zarr_format: int | None = None,
) -> ConsolidatedStore:
    """The overlay of ``store`` serving the documents of the consolidated metadata at ``path``:
    ``path/metadata_key`` (v2) or inline in ``path/zarr.json`` (v3); both are read together
    unless ``zarr_format`` says which (one round trip).

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        No consolidated metadata there.
    MetadataError
        The document is malformed (names the key).
    """
    root = normalize_path(path)
    io = StoreIO(store)
    key = node_key(root, metadata_key)
    v3_key = node_key(root, ZARR_JSON)

    async def nothing() -> None:
        return None

    raw, raw_v3 = await asyncio.gather(  # either format, one round trip
        io.get(key) if zarr_format != 3 else nothing(), io.get(v3_key) if zarr_format != 2 else nothing()
    )
    if raw_v3 is not None:
        v3_documents = _v3_consolidated(raw_v3, root, v3_key)
        if v3_documents is not None:
            return ConsolidatedStore(store, v3_documents, read_only=read_only)
    if raw is None:
        where = {2: repr(key), 3: f"inline in {v3_key!r}"}.get(
            zarr_format or 0, f"{key!r} or inline in {v3_key!r}"
        )
        raise ConsolidatedMetadataNotFoundError(f"no consolidated metadata {where} in {store.url}")
    relative = parse_consolidated(raw, key=key)
    documents = {node_key(root, k): v for k, v in relative.items()}
    return ConsolidatedStore(store, documents, read_only=read_only)


async def consolidate_metadata(
    store: StoreLike,
    *,
    path: str | None = None,
    metadata_key: str = ZMETADATA,
    storage_options: dict[str, Any] | None = None,
) -> AsyncArray | AsyncGroup:
    """Write ``.zmetadata`` for the hierarchy at ``path`` and reopen it consolidated.

    Zarr-python 2 ``zarr.consolidate_metadata``: lists the store once, reads
    every metadata document concurrently, and stores them in one document
    whose keys are relative to ``path``.

    Returns
    -------
    AsyncGroup or AsyncArray
        The hierarchy root, opened with `open_consolidated`.

    Raises
    ------
    ReadOnlyError
        The store is read-only.
    """
    the_store = resolve_store(store, storage_options)
    io = StoreIO(the_store)
    root = normalize_path(path)
    prefix = node_key(root, "")
    found = await read_node(io, root)
    if found is not None and found.zarr_format == 3:
        await _consolidate_v3(io, root)
        return await open_consolidated(the_store, path=root)
    keys = [k for k in await io.list_prefix(root) if is_metadata_key(k)]

    async def fetch(key: str) -> tuple[str, bytes | None]:
        return key[len(prefix) :], await io.get(key)

    fetched = await bounded_map(fetch, keys, io.budget.max_requests)
    documents = {rel: data for rel, data in fetched if data is not None}
    await io.set(node_key(root, metadata_key), build_consolidated(documents))
    return await open_consolidated(the_store, path=root, metadata_key=metadata_key)


async def _consolidate_v3(io: StoreIO, root: str) -> None:
    """Write every ``zarr.json`` below ``root`` into the root group's, as zarr-python 3 does:
    a flat ``{relative path: document}``, nested groups with an empty one of their own."""
    prefix = node_key(root, "")
    keys = [k for k in await io.list_prefix(root) if k.endswith(ZARR_JSON) and k != node_key(root, ZARR_JSON)]
    keys = [k for k in keys if k.rpartition("/")[2] == ZARR_JSON]

    async def fetch(key: str) -> tuple[str, bytes | None]:
        return key[len(prefix) : -len("/" + ZARR_JSON)], await io.get(key)

    entries: dict[str, Any] = {}
    for rel, data in sorted(await bounded_map(fetch, keys, io.budget.max_requests)):
        if data is None:
            continue
        document = decode_json(data, key=node_key(root, f"{rel}/{ZARR_JSON}"))
        if isinstance(document, dict) and document.get("zarr_format") == 3:
            if document.get("node_type") == "group":
                document["consolidated_metadata"] = {
                    "kind": "inline",
                    "must_understand": False,
                    "metadata": {},
                }
                document = {
                    k: document[k]
                    for k in ("attributes", "zarr_format", "consolidated_metadata", "node_type")
                    if k in document
                } | document
            entries[rel] = document

    def modify(raw: bytes | None) -> bytes:
        current = GroupV3Metadata.from_json(raw or b"{}", key=node_key(root, ZARR_JSON))
        return GroupV3Metadata(
            attributes=current.attributes, consolidated=entries, extensions=current.extensions
        ).to_json()

    await io.update(node_key(root, ZARR_JSON), modify)


async def open_consolidated(
    store: StoreLike,
    mode: str = "r+",
    *,
    path: str | None = None,
    metadata_key: str = ZMETADATA,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
    zarr_format: int | None = None,
    chunk_store: StoreLike | None = None,
    cache_attrs: bool = True,
    synchronizer: Any = None,
    zarr_version: int | None = None,
) -> AsyncArray | AsyncGroup:
    """Open a hierarchy from its consolidated metadata with a single store read.

    Zarr-python 2 ``zarr.open_consolidated``. Every array and group below is
    then opened without further metadata requests.

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
        The store or its URL.
    mode : {"r+", "r"}
        ``"r+"`` (the default, as in zarr-python 2) allows writing chunk data (not
        metadata); ``"r"`` refuses every write.
    path : str, optional
        The node to open: the root of a consolidated hierarchy (zarr-python 3), or a node
        inside the hierarchy whose consolidated metadata an ancestor holds (zarr-python 2:
        ``metadata_key`` at the store's root).
    metadata_key : str
        Name of the consolidated document (default ``".zmetadata"``).
    zarr_format : {None, 2, 3}, optional
        Look for that format's consolidated metadata only: 2, ``metadata_key``; 3, the
        ``consolidated_metadata`` inline in the root ``zarr.json`` (zarr-python 3's
        ``open_consolidated(zarr_format=...)``). By default both are read together: one
        round trip, two requests.
    chunk_store : Store, str or MutableMapping, optional
        Where the chunks are, when not beside the metadata (zarr-python 2).
    cache_attrs : bool, default True
        zarr-python 2's option (see `open_group`).
    synchronizer : optional
        zarr-python 2's synchronizer (see `open_group`).
    zarr_version : {None, 2, 3}
        zarr-python 2's name of ``zarr_format`` (zarr-python 3 keeps it, deprecated).

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        No consolidated document at ``path``, nor at an ancestor listing ``path``.
    MetadataError
        The document is malformed (names the key).
    ValueError
        ``mode`` is not ``"r"`` or ``"r+"``.
    """
    if mode not in ("r", "r+"):
        raise ValueError(f"open_consolidated mode must be 'r' or 'r+', got {mode!r}")
    fmt = format_argument(zarr_format, zarr_version)
    the_store, _ = await open_managed(store, storage_options, read_only=mode == "r")
    root = normalize_path(path)
    overlay = await _consolidated_holding(
        the_store, root, metadata_key, read_only=mode == "r", zarr_format=fmt
    )
    if chunk_store is not None:
        chunks = with_chunk_store(the_store, chunk_store, storage_options, read_only=mode == "r")
        overlay = ConsolidatedStore(chunks, overlay.documents, read_only=mode == "r")
    options: dict[str, Any] = {
        "allow_pickle": allow_pickle,
        "synchronizer": synchronizer,
        "cache_attrs": cache_attrs,
    }
    v3_document = overlay.documents.get(node_key(root, ZARR_JSON))
    v3_array = isinstance(v3_document, dict) and v3_document.get("node_type") == "array"
    if node_key(root, ZARRAY) in overlay.documents or v3_array:  # (an array listed by an ancestor)
        return await AsyncArray.open(overlay, root, read_only=mode == "r", **options)
    if node_key(root, ZARR_JSON) in overlay.documents:  # inline in a v3 root group's zarr.json
        return await AsyncGroup.open(overlay, root, read_only=mode == "r", zarr_format=3, **options)
    return await AsyncGroup.open(overlay, root, read_only=mode == "r", **options)


async def _consolidated_holding(
    store: Store, node: str, metadata_key: str, *, read_only: bool, zarr_format: int | None
) -> ConsolidatedStore:
    """`load_consolidated` at ``node``, else at its nearest ancestor whose consolidated
    metadata lists ``node``: zarr-python 2 reads ``metadata_key`` at the store's root and opens
    ``path`` from it (``open_consolidated(store, path="a")`` is group ``a`` of the root's
    ``.zmetadata``), zarr-python 3 reads the consolidated metadata at ``path``; both work.
    The ancestors cost a round trip each, only when ``node`` has none of its own.

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        Neither ``node`` nor an ancestor has consolidated metadata listing ``node``.
    """
    try:
        return await load_consolidated(
            store, node, metadata_key, read_only=read_only, zarr_format=zarr_format
        )
    except ConsolidatedMetadataNotFoundError as missing:
        segments = node.split("/") if node else []
        for depth in range(len(segments) - 1, -1, -1):
            ancestor = "/".join(segments[:depth])
            try:
                overlay = await load_consolidated(
                    store, ancestor, metadata_key, read_only=read_only, zarr_format=zarr_format
                )
            except ConsolidatedMetadataNotFoundError:
                continue
            if any(node_key(node, name) in overlay.documents for name in (ZARRAY, ZGROUP, ZARR_JSON)):
                return overlay
            break  # the nearest consolidated hierarchy does not hold the node
        raise missing


def _v3_consolidated(raw: bytes, root: str, key: str) -> dict[str, Any] | None:
    """Every ``zarr.json`` of the hierarchy by full key, from a root ``zarr.json`` with inline
    consolidated metadata (None when it has none).

    Raises
    ------
    MetadataError
        The document or its ``consolidated_metadata`` is malformed.
    """
    document = decode_json(raw, key=key)
    if not isinstance(document, dict) or document.get("node_type") != "group":
        return None
    if document.get("consolidated_metadata") is None:
        return None
    group = GroupV3Metadata.from_json(document, key=key)
    assert group.consolidated is not None
    documents: dict[str, Any] = {
        node_key(root, f"{rel}/{ZARR_JSON}"): doc for rel, doc in group.consolidated.items()
    }
    documents[key] = document
    return documents
