"""Content digest of an array, equal to zarr-python 2's ``Array.digest``.

zarr-python 2.18 hashes, in this order: the stored bytes of every chunk in
C order of the chunk grid (``b""`` for a chunk that is not stored), then the
``.zarray`` document's stored bytes, then the ``.zattrs`` document's stored
bytes (``b""`` if absent). The digest is of bytes *as stored*, so it changes
with the compressor as well as with the data, and two stores holding the same
bytes agree whichever library wrote them.

A Zarr v3 array is hashed the same way with its own keys: every chunk (``c/0/1``...)
in C order of the grid, then ``zarr.json`` (which holds the attributes). zarr-python 3
has no ``digest``; this is azarr's definition for v3, stable across writers that store
the same bytes.

azarr fetches the chunks concurrently, in windows, through the store's budgeted
and retried path, and feeds them to the hash in grid order.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from azarr.core._paths import node_key
from azarr.metadata import ZARR_JSON, ZARRAY, ZATTRS
from azarr.scheduler import StoreIO, bounded_map

if TYPE_CHECKING:
    from azarr.core.array import AsyncArray

#: Chunks fetched per window, as a multiple of the store's request budget: big
#: enough to keep the budget busy, small enough that a window of chunks fits in memory.
_WINDOW_PER_REQUEST = 2


def _chunk_keys(array: AsyncArray) -> Iterator[str]:
    # zarr-python 2 treats a 0-d array as one chunk at grid position (0,).
    grid = array.cdata_shape if array.ndim else (1,)
    metadata = array.metadata
    for coords in itertools.product(*(range(n) for n in grid)):
        yield node_key(array.path, metadata.chunk_key(coords))


async def array_digest(array: AsyncArray, hashname: str = "sha1") -> bytes:
    """The digest zarr-python 2's ``Array.digest(hashname)`` returns for the same stored bytes.

    Parameters
    ----------
    array : AsyncArray
    hashname : str
        Any name `hashlib.new` accepts (``"sha1"``, ``"sha256"``, ``"md5"``...).

    Returns
    -------
    bytes
        The raw digest.

    Raises
    ------
    ValueError
        ``hashname`` is not a hash `hashlib` knows.
    StoreError
        A chunk or document could not be read (after retries).
    """
    h = hashlib.new(hashname)
    io = StoreIO(array.store)
    limit = io.budget.max_requests
    keys = _chunk_keys(array)
    while window := list(itertools.islice(keys, limit * _WINDOW_PER_REQUEST)):
        for value in await bounded_map(io.get, window, limit):
            h.update(value or b"")
    for name in (ZARRAY, ZATTRS) if array.zarr_format == 2 else (ZARR_JSON,):
        h.update(await io.get(node_key(array.path, name)) or b"")
    return h.digest()
