"""A third-party store driver, as a separate package would ship one: found by azarr only
through the ``azarr.stores`` entry point in ``azarr_testkv-0.1.dist-info`` beside it.

Keys live in process-wide dicts by name, like ``memory://``; the point is the plumbing
(URL -> spec -> live store, pickling, budgets), exercised without editing azarr.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from azarr.storage import ByteRange, Store, StoreSpec

_DATA: dict[str, dict[str, bytes]] = {}


class TestKVStore(Store):
    """``testkv://<name>``: a named in-process key-value store."""

    __test__ = False  # not a pytest class

    def __init__(
        self, name: str, *, storage_options: Mapping[str, Any] | None = None, read_only: bool = False
    ) -> None:
        super().__init__(read_only=read_only)
        if storage_options:
            raise TypeError(f"testkv takes no storage_options, got {sorted(storage_options)}")
        self.name = name
        self._data = _DATA.setdefault(name, {})

    @property
    def url(self) -> str:
        return f"testkv://{self.name}"

    def _make_spec(self) -> StoreSpec:
        return StoreSpec.create("testkv", self.name)

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        if storage_options:
            raise TypeError(f"testkv takes no storage_options, got {sorted(storage_options)}")
        return StoreSpec.create("testkv", url.partition("://")[2].strip("/"))

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        value = self._data.get(key)
        return value if value is None or byte_range is None else byte_range.apply(value)

    async def _set(self, key: str, value: bytes) -> None:
        self._data[key] = value

    async def _delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in sorted(k for k in list(self._data) if k.startswith(prefix)):
            yield key
