"""``fill_missing_data_reads=False``: a missing chunk is an error on read (TensorStore's zarr2 option).

Zarr v2 reads a chunk that was never stored as the fill value, which cannot
tell "never written" from "lost" (an interrupted upload, a wrong path, a
bucket lifecycle rule). TensorStore's ``fill_missing_data_reads=False`` makes
such reads fail; ``open_array(..., fill_missing_data_reads=False)`` does the
same here by opening the array on a :class:`StrictReadStore`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from azarr.core._array_ops import WRITING
from azarr.errors import ChunkNotFoundError
from azarr.metadata import ZMETADATA, is_metadata_key
from azarr.storage import ByteRange, Store, WrapperStore


class StrictReadStore(WrapperStore):
    """Pass everything to ``store``, but a chunk read that finds nothing raises :class:`ChunkNotFoundError`.

    Metadata documents may be missing as usual (``.zattrs`` often is), and
    writes that merge into a missing chunk still start from the fill value
    (TensorStore behaves the same): only array reads are strict.
    """

    wrapper_name = "strict-read"

    def __init__(self, store: Store) -> None:
        super().__init__(store)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        value = await self.inner.get(key, byte_range)
        if value is None and not WRITING.get() and not (is_metadata_key(key) or key.endswith(ZMETADATA)):
            raise ChunkNotFoundError(
                f"chunk {key!r} is missing from {self.inner.url} (the array was opened with "
                "fill_missing_data_reads=False, so missing chunks do not read as the fill value)"
            )
        return value

    async def _set(self, key: str, value: bytes) -> None:
        await self.inner.set(key, value)

    async def _delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def _exists(self, key: str) -> bool:
        return await self.inner.exists(key)

    async def _getsize(self, key: str) -> int:
        return await self.inner.getsize(key)

    async def _delete_prefix(self, prefix: str) -> None:
        await self.inner.delete_prefix(prefix)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async for key in self.inner.list_prefix(prefix):
            yield key

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        async for name in self.inner.list_dir(prefix):
            yield name
