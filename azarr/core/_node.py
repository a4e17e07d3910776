"""What arrays and groups share: a place in a store, attributes, read-only state."""

from __future__ import annotations

from typing import Any

from azarr.core._paths import basename, node_key, normalize_path
from azarr.core.attributes import Attributes
from azarr.errors import ReadOnlyError
from azarr.metadata import ZARR_JSON, ZATTRS
from azarr.scheduler import StoreIO
from azarr.storage import Store


class Node:
    """Base of `AsyncArray` and `AsyncGroup`.

    Parameters
    ----------
    store : Store
        Where the node lives.
    path : str
        Node path within the store (``""`` for the root).
    attributes : dict, optional
        The parsed ``.zattrs`` document.
    read_only : bool
        Refuse changes with `ReadOnlyError` (also when the store is read-only).
    allow_pickle : bool, optional
        Let pickle-based codecs decode chunks (passed on to arrays opened below a group).
    zarr_format : {2, 3}, default 2
        The node's format: where its documents are (``.zarray``/``.zgroup`` and
        ``.zattrs``, or one ``zarr.json``).
    synchronizer : optional
        zarr-python 2's ``synchronizer=``, kept for the nodes opened below and reported by
        ``info``; the synchronous facade takes its lock around writes only where the
        store has no conditional writes (see `azarr.sync.ThreadSynchronizer`).
    cache_attrs : bool
        zarr-python 2's ``cache_attrs=``: False makes the synchronous facade reread
        ``.zattrs`` before each read of ``attrs`` (async code calls ``await attrs.refresh()``).
    """

    #: "array" or "group", for messages.
    _kind = "node"

    def __init__(
        self,
        store: Store,
        path: str,
        attributes: dict[str, Any] | None,
        *,
        read_only: bool,
        allow_pickle: bool | None,
        zarr_format: int = 2,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> None:
        # The node's one path to its store: budgeted, timed, retried (never the raw store).
        self._io = StoreIO(store)
        self._path = normalize_path(path)
        self._read_only = read_only or store.read_only
        self._allow_pickle = allow_pickle
        self._zarr_format = zarr_format
        self._synchronizer = synchronizer
        self._cache_attrs = cache_attrs
        self._attrs = self._make_attributes(dict(attributes or {}))

    def _make_attributes(self, values: dict[str, Any]) -> Attributes:
        if self._zarr_format == 3:
            key = node_key(self._path, ZARR_JSON)
            return Attributes(self._io, key, values, read_only=self._read_only, embedded=True)
        return Attributes(self._io, node_key(self._path, ZATTRS), values, read_only=self._read_only)

    @property
    def zarr_format(self) -> int:
        """The node's Zarr format: 2 or 3 (zarr-python 3 ``metadata.zarr_format``)."""
        return self._zarr_format

    @property
    def store(self) -> Store:
        """The store holding the node."""
        return self._io.store

    @property
    def path(self) -> str:
        """Path within the store (``""`` for the root)."""
        return self._path

    @property
    def name(self) -> str:
        """Absolute name within the hierarchy, e.g. ``"/"`` or ``"/group/array"`` (zarr-python 2)."""
        return "/" + self._path

    @property
    def basename(self) -> str:
        """Last segment of the name (``""`` for the root)."""
        return basename(self._path)

    @property
    def read_only(self) -> bool:
        """True if changes are refused; settable (zarr-python 2), except on a read-only store."""
        return self._read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._read_only = bool(value) or self._io.store.read_only
        self._attrs.read_only = self._read_only

    @property
    def synchronizer(self) -> Any:
        """zarr-python 2's ``synchronizer=`` given at open or creation (None by default)."""
        return self._synchronizer

    @property
    def cache_attrs(self) -> bool:
        """False if the synchronous facade rereads ``.zattrs`` before each read (zarr-python 2 ``cache_attrs``)."""
        return self._cache_attrs

    @property
    def attrs(self) -> Attributes:
        """User attributes (``.zattrs``); update them with ``await node.attrs.update(...)``."""
        return self._attrs

    async def update_attributes(self, new_attributes: dict[str, Any]) -> None:
        """Merge ``new_attributes`` into ``.zattrs`` (zarr-python 3 name; same as ``attrs.update``)."""
        await self._attrs.update(new_attributes)

    def _check_writable(self) -> None:
        if self._read_only:
            raise ReadOnlyError(f"{self._kind} {'/' + self._path!r} in {self._io.url} is read-only")

    def _node_state(self) -> dict[str, Any]:
        """Pickled configuration shared by arrays and groups (never data or sessions)."""
        return {
            "store": self._io.store,
            "path": self._path,
            "attributes": self._attrs.asdict(),
            "read_only": self._read_only,
            "allow_pickle": self._allow_pickle,
            "zarr_format": self._zarr_format,
            "cache_attrs": self._cache_attrs,
        }
