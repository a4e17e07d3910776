"""``WrapperStore``: a store in front of another one (caches, overlays, recorders).

A wrapper passes every operation to the store it wraps unless it overrides
it, and it is the *same store* for the scheduler: its budget and counters are
the wrapped store's (`budget_key`), so wrapping never multiplies the
connection limit. Its spec records the wrapped store's spec and its own
parameters; it pickles as ``(wrapped store, parameters)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, ClassVar

from azarr.storage._base import ByteRange, Generation, Store
from azarr.storage._spec import StoreSpec

__all__ = ["WrapperStore"]


class WrapperStore(Store):
    """Base of stores that sit in front of another store.

    Parameters
    ----------
    inner : Store
        The wrapped store.
    read_only : bool, optional
        Default: the wrapped store's.

    Notes
    -----
    Subclasses set `wrapper_name` (the spec's driver name) and override
    `wrapper_params` (the keyword arguments that rebuild them around a
    store) and whichever primitives they change.
    """

    #: The spec's driver name for this wrapper (``"lru-cache"``, ``"consolidated"``, ...).
    wrapper_name: ClassVar[str] = "wrapper"
    #: Whether conditional operations pass through to the wrapped store. A wrapper
    #: that answers reads itself (a cache) must not claim the wrapped store's
    #: generations for values it served, so it sets this False.
    forwards_conditional: ClassVar[bool] = True
    #: Whether reads of a wrapped reference store's keys may go straight to their targets
    #: (`Store.resolves_references`, bypassing this wrapper): only for overlays that pass
    #: chunk keys through unchanged (the consolidated overlay); not for wrappers that
    #: translate keys, answer reads themselves (a cache) or refuse missing chunks.
    forwards_references: ClassVar[bool] = False

    def __init__(self, inner: Store, *, read_only: bool | None = None) -> None:
        if not isinstance(inner, Store):
            raise TypeError(f"{type(self).__name__} wraps a Store, got {type(inner).__name__}")
        super().__init__(read_only=inner.read_only if read_only is None else read_only or inner.read_only)
        self.inner = inner
        self.supports_writes = inner.supports_writes
        self.supports_deletes = inner.supports_deletes
        self.supports_listing = inner.supports_listing
        self.is_local = inner.is_local
        self.max_requests = inner.max_requests
        self.supports_conditional_writes = self.forwards_conditional and inner.supports_conditional_writes
        self.supports_conditional_reads = self.forwards_conditional and inner.supports_conditional_reads
        # Safe to forward: a checksum is used only for the very body object it was computed for.
        self.wants_body_crc32c = inner.wants_body_crc32c
        self.resolves_references = self.forwards_references and inner.resolves_references
        self.dimension_separator = inner.dimension_separator

    # ------------------------------------------------------------------ identity
    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def budget_key(self) -> StoreSpec:
        return self.inner.budget_key

    def wrapper_params(self) -> dict[str, Any]:
        """Keyword arguments that rebuild this wrapper around `inner` (pickling, spec)."""
        return {}

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create(
            self.wrapper_name,
            self.inner.spec.root,
            params={"inner": self.inner.spec, **self.wrapper_params()},
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rewrap, (type(self), self.inner, self.wrapper_params(), self.read_only))

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        await self.inner.close()

    async def revalidate(self) -> None:
        await self.inner.revalidate()

    # ------------------------------------------------------------------ primitives: pass through
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self.inner.get(key, byte_range)

    async def _set(self, key: str, value: bytes) -> None:
        await self.inner.set(key, value)

    async def _delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def _exists(self, key: str) -> bool:
        return await self.inner.exists(key)

    async def _get_with_generation(self, key: str) -> tuple[bytes | None, Generation | None]:
        return await self.inner.get_with_generation(key)

    async def _get_range_with_generation(
        self, key: str, byte_range: ByteRange
    ) -> tuple[bytes | None, Generation | None]:
        return await self.inner.get_with_generation(key, byte_range)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        if generation is None:
            await self.inner.set(key, value, if_not_exists=True)
        else:
            await self.inner.set(key, value, if_generation_match=generation)

    async def _delete_if(self, key: str, generation: Generation) -> None:
        await self.inner.delete(key, if_generation_match=generation)

    async def _get_if_match(
        self, key: str, byte_range: ByteRange | None, generation: Generation
    ) -> bytes | None:
        return await self.inner.get(key, byte_range, if_generation_match=generation)

    async def _stat(self, key: str) -> tuple[int, Generation | None] | None:
        return await self.inner.stat(key)

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


def _rewrap(cls: type[WrapperStore], inner: Store, params: dict[str, Any], read_only: bool) -> WrapperStore:
    store = cls(inner, **params)
    store.read_only = read_only or store.read_only
    return store
