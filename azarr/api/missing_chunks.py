"""``fill_missing_data_reads=False``: a missing chunk is an error on read (TensorStore's zarr2 option).

Zarr v2 reads a chunk that was never stored as the fill value, which cannot
tell "never written" from "lost" (an interrupted upload, a wrong path, a
bucket lifecycle rule). TensorStore's ``fill_missing_data_reads=False`` makes
such reads fail; ``open_array(..., fill_missing_data_reads=False)`` does the
same here by opening the array on a `StrictReadStore`.
"""

from __future__ import annotations

from azarr.core._array_ops import WRITING
from azarr.errors import ChunkNotFoundError
from azarr.metadata import ZMETADATA, is_metadata_key
from azarr.storage import ByteRange, WrapperStore


class StrictReadStore(WrapperStore):
    """Pass everything to ``store``, but a chunk read that finds nothing raises `ChunkNotFoundError`.

    Metadata documents may be missing as usual (``.zattrs`` often is), and
    writes that merge into a missing chunk still start from the fill value
    (TensorStore behaves the same): only array reads are strict.
    """

    wrapper_name = "strict-read"

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        value = await self.inner.get(key, byte_range)
        if value is None and not WRITING.get() and not (is_metadata_key(key) or key.endswith(ZMETADATA)):
            raise ChunkNotFoundError(
                f"chunk {key!r} is missing from {self.inner.url} (the array was opened with "
                "fill_missing_data_reads=False, so missing chunks do not read as the fill value)"
            )
        return value
