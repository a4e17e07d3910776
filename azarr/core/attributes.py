"""User attributes of an array or group, persisted to ``.zattrs`` (v2) or in ``zarr.json`` (v3)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from azarr.errors import MetadataError, ReadOnlyError
from azarr.metadata import decode_json, encode_json, encode_v3_json, parse_attributes
from azarr.scheduler import StoreIO
from azarr.storage import Store


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
        Refuse updates with `ReadOnlyError`.
    embedded : bool, default False
        ``key`` is a Zarr v3 ``zarr.json``, whose ``attributes`` member holds them:
        every update is a read-modify-write of that member, leaving the rest as stored.
    """

    def __init__(
        self, io: StoreIO, key: str, values: dict[str, Any], *, read_only: bool, embedded: bool = False
    ) -> None:
        self._io = io
        self.key = key
        self._values = values
        self.read_only = read_only
        self._embedded = embedded

    def _parse(self, data: bytes) -> dict[str, Any]:
        if not self._embedded:
            return parse_attributes(data, key=self.key)
        document = decode_json(data, key=self.key)
        if not isinstance(document, dict):
            raise MetadataError(f"{self.key!r}: must be a JSON object, got {type(document).__name__}")
        return parse_attributes(document.get("attributes", {}), key=self.key)

    @property
    def store(self) -> Store:
        """The store holding the document."""
        return self._io.store

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
        self._values = {} if data is None else self._parse(data)

    async def update(self, *args: Mapping[str, Any], **kwargs: Any) -> None:
        """Merge new attributes and write ``.zattrs`` (like ``dict.update``).

        Values must be JSON-serializable.

        Raises
        ------
        ReadOnlyError
            The node was opened read-only.
        TypeError
            A value cannot be encoded as JSON; nothing is written.
        PreconditionFailedError
            Other writers changed ``.zattrs`` on every attempt
            (``azarr.config`` ``conditional_write_attempts``).

        Notes
        -----
        On stores with conditional writes this is a read-modify-write of the stored
        ``.zattrs`` (not of the values read at open): it merges into what is stored
        now and writes only if nobody changed it meanwhile, else merges again, so
        concurrent updates of different attributes all survive. zarr-python 2
        merges into the values it cached and loses other writers' keys.
        """
        changes: dict[str, Any] = {}
        changes.update(*args, **kwargs)
        changes = _string_keys(changes)
        await self._modify(lambda current: {**current, **changes})

    async def put(self, values: Mapping[str, Any]) -> None:
        """Replace all attributes with ``values`` (zarr-python 2 ``attrs.put``)."""
        await self._write(_string_keys(dict(values)))

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
        await self._modify(lambda current: {k: v for k, v in current.items() if k != name})

    async def _modify(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Apply ``change`` to the stored attributes as one conditional read-modify-write."""
        if self.read_only:
            raise ReadOnlyError(f"cannot update attributes {self.key!r}: opened read-only")
        # Encode before touching the store, so an unencodable value loses nothing.
        encode_json(change(dict(self._values)))
        result: dict[str, Any] = {}

        def modify(data: bytes | None) -> bytes:
            if self._embedded:
                if data is None:
                    raise MetadataError(f"cannot update attributes: {self.key!r} is gone")
                document = decode_json(data, key=self.key)
                current = parse_attributes(document.get("attributes", {}), key=self.key)
            else:
                current = {} if data is None else parse_attributes(data, key=self.key)
            result.clear()
            result.update(change(current))
            if self._embedded:
                document["attributes"] = result
                return encode_v3_json(document)
            return encode_json(result)

        await self._io.update(self.key, modify)
        self._values = dict(result)

    async def _write(self, values: dict[str, Any]) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot update attributes {self.key!r}: opened read-only")
        # Encode before touching the store, so an unencodable value loses nothing.
        document = encode_json(values)
        if self._embedded:  # the rest of zarr.json stays as stored
            await self._modify(lambda _: dict(values))
            return
        await self._io.set(self.key, document)
        self._values = values


def _string_keys(values: dict[Any, Any]) -> dict[str, Any]:
    """``values`` with keys that are not ``str`` turned into ``str`` (as JSON does), with a warning.

    zarr-python 2.18 accepts such keys with this `DeprecationWarning`; the document
    stores them as JSON strings either way, so the in-memory copy uses the strings too.
    """
    if all(isinstance(key, str) for key in values):
        return values
    warnings.warn(
        "only attribute keys of type 'string' will be allowed in the future", DeprecationWarning, stacklevel=4
    )
    return {
        key if isinstance(key, str) else json.dumps(key).strip('"'): value for key, value in values.items()
    }
