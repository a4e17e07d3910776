"""Reads of reference stores (kerchunk/VirtualiZarr) through their targets' managed paths.

A `ReferenceStore` (or an `IcechunkStore`) holds keys whose bytes are ranges
of objects in other stores. `StoreIO` sends a read of such a key here: the key is
located (the reference set itself is read through the managed path of the store
holding it), and the range is read through the *target* store's own `StoreIO` --
its request and byte budget, retries, timeouts and hedging -- so a thousand
reference files naming one bucket share that bucket's one budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from azarr.storage import ByteRange, Store, WrapperStore
from azarr.storage._reference import LocatingStore, Reader, TargetRange, read_located

if TYPE_CHECKING:
    from azarr.scheduler._io import StoreIO

__all__ = ["get_referenced", "locate", "managed_reader"]


def managed_reader(io: StoreIO) -> Reader:
    """Reads of other stores' keys through their own `StoreIO` (with ``io``'s policy)."""

    async def read(store: Store, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await io.with_store(store).get(key, byte_range)

    return read


def reference_store(store: Store) -> LocatingStore:
    """The locating store under ``store`` (itself, or the one an overlay wraps)."""
    while not isinstance(store, LocatingStore):
        store = cast(WrapperStore, store).inner
    return store


async def locate(io: StoreIO, keys: Sequence[str]) -> list[bytes | TargetRange | None]:
    """Where each key of the reference store behind ``io`` is (see `ReferenceStore.locate`)."""
    return await reference_store(io.store).locate(keys, managed_reader(io))


async def get_referenced(io: StoreIO, key: str, byte_range: ByteRange | None) -> bytes | None:
    """`StoreIO.get` of a reference store's key: located, then read from its target.

    Raises
    ------
    InvalidReferenceError, ReferenceTargetError, ByteRangeError
        A malformed, disallowed or out-of-range reference.
    RetriesExhaustedError, StoreError
        As `StoreIO.get` on the target.
    """
    reader = managed_reader(io)
    (located,) = await reference_store(io.store).locate([key], reader)
    return await read_located(located, byte_range, key, reader)
