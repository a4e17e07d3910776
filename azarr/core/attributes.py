"""User attributes of an array or group, persisted to its ``.zattrs`` document."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from azarr.errors import ReadOnlyError
from azarr.metadata import encode_json, parse_attributes
from azarr.scheduler import StoreIO


class Attributes(Mapping[str, Any]):
    """Read access to a node's attributes, with awaitable updates.

    Reading (``attrs["units"]``, ``dict(attrs)``) uses the copy loaded when the
    node was opened — no I/O. Updates are coroutines that write the whole
    ``.zattrs`` document at once (zarr-python 2's ``Attributes``, made async).

    Parameters
    ----------
    io : StoreIO
        The managed path to the store holding the node.
    key : str
        The ``.zattrs`` key, e.g. ``"group/array/.zattrs"``.
    values : dict
        The attributes as loaded.
    read_only : bool
        Refuse updates with :class:`~azarr.errors.ReadOnlyError`.
    """

    def __init__(self, io: StoreIO, key: str, values: dict[str, Any], *, read_only: bool) -> None:
        self._io = io
        self.key = key
        self._values = values
        self.read_only = read_only

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Attributes({self._values!r})"

    def asdict(self) -> dict[str, Any]:
        """A copy of the attributes as a plain dict (zarr-python 2 ``attrs.asdict()``)."""
        return dict(self._values)

    async def refresh(self) -> None:
        """Reload the attributes from the store (another writer may have changed them)."""
        data = await self._io.get(self.key)
        self._values = {} if data is None else parse_attributes(data, key=self.key)

    async def update(self, *args: Mapping[str, Any], **kwargs: Any) -> None:
        """Merge new attributes and write ``.zattrs`` (like ``dict.update``).

        Values must be JSON-serializable.

        Raises
        ------
        ReadOnlyError
            The node was opened read-only.
        TypeError
            A value cannot be encoded as JSON; nothing is written.
        """
        merged = dict(self._values)
        merged.update(*args, **kwargs)
        await self._write(merged)

    async def put(self, values: Mapping[str, Any]) -> None:
        """Replace all attributes with ``values`` (zarr-python 2 ``attrs.put``)."""
        await self._write(dict(values))

    async def set(self, name: str, value: Any) -> None:
        """Set one attribute (the async form of ``attrs[name] = value``)."""
        await self.update({name: value})

    async def delete(self, name: str) -> None:
        """Remove one attribute (the async form of ``del attrs[name]``).

        Raises
        ------
        KeyError
            No attribute ``name``.
        """
        if name not in self._values:
            raise KeyError(f"no attribute {name!r} in {self.key!r}")
        remaining = {k: v for k, v in self._values.items() if k != name}
        await self._write(remaining)

    async def _write(self, values: dict[str, Any]) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot update attributes {self.key!r}: opened read-only")
        # Encode before touching the store, so an unencodable value loses nothing.
        document = encode_json(values)
        await self._io.set(self.key, document)
        self._values = values
