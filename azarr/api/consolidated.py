"""Consolidated metadata: one ``.zmetadata`` document describing a whole hierarchy.

``consolidate_metadata`` gathers every ``.zarray``/``.zgroup``/``.zattrs`` under
a path into ``.zmetadata`` (zarr-python 2 format, ``zarr_consolidated_format:
1``). ``open_consolidated`` reads that one key and serves every metadata
document from it, so opening a hierarchy of any size costs one request. As in
zarr-python 2, structure and attributes are read-only there; chunk data stays
writable in mode ``"r+"``.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

from azarr.api.creation import resolve_store
from azarr.api.opening import open_managed
from azarr.core._paths import node_key, normalize_path
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import ConsolidatedMetadataNotFoundError, ReadOnlyError
from azarr.metadata import (
    ZARRAY,
    ZATTRS,
    ZMETADATA,
    build_consolidated,
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
        if document and key.endswith(ZATTRS):
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
    keys = [k for k in await io.list_prefix(root) if is_metadata_key(k)]

    async def fetch(key: str) -> tuple[str, bytes | None]:
        return key[len(prefix) :], await io.get(key)

    fetched = await bounded_map(fetch, keys, io.budget.max_requests)
    documents = {rel: data for rel, data in fetched if data is not None}
    await io.set(node_key(root, metadata_key), build_consolidated(documents))
    return await open_consolidated(the_store, path=root, metadata_key=metadata_key)


async def open_consolidated(
    store: StoreLike,
    mode: str = "r",
    *,
    path: str | None = None,
    metadata_key: str = ZMETADATA,
    storage_options: dict[str, Any] | None = None,
    allow_pickle: bool | None = None,
) -> AsyncArray | AsyncGroup:
    """Open a hierarchy from its consolidated metadata with a single store read.

    Zarr-python 2 ``zarr.open_consolidated``. Every array and group below is
    then opened without further metadata requests.

    Parameters
    ----------
    store : Store, str, os.PathLike or MutableMapping
        The store or its URL.
    mode : {"r", "r+"}
        ``"r+"`` allows writing chunk data (not metadata).
    path : str, optional
        Path of the hierarchy root holding ``.zmetadata``.
    metadata_key : str
        Name of the consolidated document (default ``".zmetadata"``).

    Raises
    ------
    ConsolidatedMetadataNotFoundError
        No consolidated document at ``path``.
    MetadataError
        The document is malformed (names the key).
    ValueError
        ``mode`` is not ``"r"`` or ``"r+"``.
    """
    if mode not in ("r", "r+"):
        raise ValueError(f"open_consolidated mode must be 'r' or 'r+', got {mode!r}")
    the_store, io = await open_managed(store, storage_options, read_only=mode == "r")
    root = normalize_path(path)
    key = node_key(root, metadata_key)
    raw = await io.get(key)
    if raw is None:
        raise ConsolidatedMetadataNotFoundError(f"no consolidated metadata {key!r} in {the_store.url}")
    relative = parse_consolidated(raw, key=key)
    documents = {node_key(root, k): v for k, v in relative.items()}
    overlay = ConsolidatedStore(the_store, documents, read_only=mode == "r")
    if node_key(root, ZARRAY) in documents:
        return await AsyncArray.open(overlay, root, read_only=mode == "r", allow_pickle=allow_pickle)
    return await AsyncGroup.open(overlay, root, read_only=mode == "r", allow_pickle=allow_pickle)
