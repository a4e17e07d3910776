"""``chunk_store=``: metadata documents in one store, chunks in another (zarr-python 2).

zarr-python 2's ``Array(store, chunk_store=...)`` and ``open_array(...,
chunk_store=...)`` keep ``.zarray``/``.zgroup``/``.zattrs`` (and
``.zmetadata``) in ``store`` and every other key in ``chunk_store``. azarr
does the same with one `SplitStore` routing each key, so arrays and
groups keep a single store object and its one I/O path.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from azarr.metadata import ZMETADATA, is_metadata_key
from azarr.storage import ByteRange, Store, StoreSpec


def _is_document(key: str) -> bool:
    return is_metadata_key(key) or key == ZMETADATA or key.endswith("/" + ZMETADATA)


class SplitStore(Store):
    """Metadata keys in ``store``, chunk keys in ``chunk_store``.

    The request and byte budget is the chunk store's (``budget_key``): chunk
    traffic is what it limits. Listings merge both stores; deleting a prefix
    deletes it in both.

    Parameters
    ----------
    store : Store
        Holds ``.zarray``, ``.zgroup``, ``.zattrs`` and ``.zmetadata`` documents.
    chunk_store : Store
        Holds every other key (the chunks).
    """

    def __init__(self, store: Store, chunk_store: Store) -> None:
        super().__init__(read_only=store.read_only or chunk_store.read_only)
        self.meta = store
        self.chunks = chunk_store
        self.supports_listing = store.supports_listing and chunk_store.supports_listing
        self.is_local = chunk_store.is_local
        self.dimension_separator = store.dimension_separator

    @property
    def url(self) -> str:
        return self.meta.url

    def __repr__(self) -> str:
        return f"SplitStore({self.meta!r}, chunk_store={self.chunks!r})"

    @property
    def budget_key(self) -> StoreSpec:
        return self.chunks.budget_key

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create(
            "split", self.meta.spec.root, params={"store": self.meta.spec, "chunk_store": self.chunks.spec}
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_unpickle_split, (self.meta, self.chunks, self.read_only))

    def _route(self, key: str) -> Store:
        return self.meta if _is_document(key) else self.chunks

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self._route(key).get(key, byte_range)

    async def _set(self, key: str, value: bytes) -> None:
        await self._route(key).set(key, value)

    async def _delete(self, key: str) -> None:
        await self._route(key).delete(key)

    async def _exists(self, key: str) -> bool:
        return await self._route(key).exists(key)

    async def _getsize(self, key: str) -> int:
        return await self._route(key).getsize(key)

    async def _delete_prefix(self, prefix: str) -> None:
        await self.meta.delete_prefix(prefix)
        await self.chunks.delete_prefix(prefix)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async for key in self.meta.list_prefix(prefix):
            if _is_document(key):
                yield key
        async for key in self.chunks.list_prefix(prefix):
            if not _is_document(key):
                yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        seen: set[str] = set()
        for store in (self.meta, self.chunks):
            async for name in store.list_dir(prefix):
                if name not in seen:
                    seen.add(name)
                    yield name

    async def close(self) -> None:
        await self.meta.close()
        await self.chunks.close()


def _unpickle_split(store: Store, chunk_store: Store, read_only: bool) -> SplitStore:
    split = SplitStore(store, chunk_store)
    split.read_only = read_only or split.read_only
    return split
