"""Open datasets once per process, keep their (consolidated) metadata, refresh it on a timer.

Services that open a hierarchy per request pay a metadata round trip (or a
hundred) on every call; services that cache ``.zmetadata`` by hand never see
new data. `Datasets` opens each registered hierarchy at startup (FastAPI
lifespan), serves nodes from the cached metadata, and re-opens in the background
every ``refresh_interval`` seconds or when `Datasets.refresh` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import azarr
from azarr.core import AsyncArray, AsyncGroup
from azarr.errors import ArrayNotFoundError, ConsolidatedMetadataNotFoundError
from azarr.service._errors import UnknownDatasetError
from azarr.storage import Store

logger = logging.getLogger("azarr.service")

Node = AsyncArray | AsyncGroup


@dataclasses.dataclass
class _Entry:
    store: Store | str
    path: str | None
    storage_options: dict[str, Any] | None
    consolidated: bool | None
    root: Node | None = None
    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    opened_at: float = 0.0
    lock: asyncio.Lock | None = None


class Datasets:
    """Named hierarchies opened once per process, for use from request handlers.

    Parameters
    ----------
    refresh_interval : float, optional
        Seconds between background re-opens of every dataset (new arrays,
        resized shapes, changed attributes become visible). ``None``: only on
        `refresh`.

    Examples
    --------
    >>> datasets = Datasets(refresh_interval=300)
    >>> datasets.add("era5", "s3://bucket/era5.zarr", storage_options={"anon": True})
    >>> app = FastAPI(lifespan=datasets.lifespan)  # doctest: +SKIP
    >>> arr = await datasets.array("era5", "t2m")  # in a handler  # doctest: +SKIP

    Notes
    -----
    A dataset is opened with `azarr.open_consolidated` (one request for the
    whole hierarchy) when it has ``.zmetadata``, else with `azarr.open`.
    Nodes looked up below a root are cached until the next refresh. A failed
    refresh keeps the previous metadata and logs a warning.
    """

    def __init__(self, *, refresh_interval: float | None = None) -> None:
        if refresh_interval is not None and refresh_interval <= 0:
            raise ValueError(f"refresh_interval must be > 0 seconds, got {refresh_interval}")
        self.refresh_interval = refresh_interval
        self._entries: dict[str, _Entry] = {}
        self._refresher: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ registry
    def add(
        self,
        name: str,
        store: Store | str,
        *,
        path: str | None = None,
        storage_options: dict[str, Any] | None = None,
        consolidated: bool | None = None,
    ) -> None:
        """Register a hierarchy (opened by `open`, or lazily on first use).

        Parameters
        ----------
        name : str
            The name handlers use.
        store : Store or str
            A store or URL (``"s3://bucket/x.zarr"``); ``storage_options`` go to fsspec.
        path : str, optional
            Path of the root node inside the store.
        consolidated : bool, optional
            ``True``: require ``.zmetadata``; ``False``: never use it; ``None``: use it if present.
        """
        if name in self._entries:
            raise ValueError(f"a dataset named {name!r} is already registered")
        self._entries[name] = _Entry(store, path, storage_options, consolidated)

    @property
    def names(self) -> list[str]:
        """Registered dataset names, in registration order."""
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def _entry(self, name: str) -> _Entry:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownDatasetError(
                f"no dataset named {name!r}; known: {', '.join(self._entries) or 'none'}"
            ) from None

    # ------------------------------------------------------------------ opening
    async def _open_root(self, entry: _Entry) -> Node:
        kwargs: dict[str, Any] = {"path": entry.path, "storage_options": entry.storage_options}
        if entry.consolidated is not False:
            try:
                return await azarr.open_consolidated(entry.store, mode="r", **kwargs)
            except ConsolidatedMetadataNotFoundError:
                if entry.consolidated:
                    raise
        node: Node = await azarr.open(entry.store, mode="r", **kwargs)
        return node

    async def refresh(self, name: str | None = None) -> None:
        """Re-open ``name`` (every dataset when None) and swap in its new metadata.

        Raises
        ------
        UnknownDatasetError
            No dataset of that name.
        AzarrError
            The open failed (the previous metadata stays in use).
        """
        names = [name] if name is not None else list(self._entries)
        entries = [self._entry(n) for n in names]
        await asyncio.gather(*(self._reopen(entry) for entry in entries))

    async def _reopen(self, entry: _Entry) -> None:
        if entry.lock is None:
            entry.lock = asyncio.Lock()
        started = time.monotonic()
        async with entry.lock:
            if entry.opened_at > started:  # another caller refreshed while we waited
                return
            root = await self._open_root(entry)
            # One assignment each: concurrent handlers see the old or the new metadata, never a mix.
            entry.nodes = {}
            entry.root = root
            entry.opened_at = time.monotonic()

    async def open(self) -> None:
        """Open every registered dataset (concurrently) and start the refresh timer."""
        await self.refresh()
        if self.refresh_interval is not None and self._refresher is None:
            self._refresher = asyncio.create_task(self._refresh_forever(self.refresh_interval))

    async def _refresh_forever(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            for name in list(self._entries):
                try:
                    await self.refresh(name)
                except Exception as exc:  # keep serving the previous metadata
                    logger.warning("refreshing dataset %r failed: %s", name, exc)

    async def close(self) -> None:
        """Stop the refresh timer and close the stores opened from URLs."""
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher
            self._refresher = None
        for entry in self._entries.values():
            if entry.root is not None and isinstance(entry.store, str):
                with contextlib.suppress(Exception):
                    await entry.root.store.close()
            entry.root, entry.nodes, entry.opened_at = None, {}, 0.0

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        """``FastAPI(lifespan=datasets.lifespan)``: open at startup, close at shutdown."""
        await self.open()
        try:
            yield
        finally:
            await self.close()

    # ------------------------------------------------------------------ lookups
    async def get(self, name: str, path: str = "") -> Node:
        """The node at ``path`` below dataset ``name``'s root (the root for ``""``).

        Raises
        ------
        UnknownDatasetError
            No dataset of that name (HTTP 404).
        NodeNotFoundError
            Nothing at ``path`` (HTTP 404).
        """
        entry = self._entry(name)
        if entry.root is None:
            await self._reopen(entry)
        root, nodes = entry.root, entry.nodes
        assert root is not None
        path = path.strip("/")
        if not path:
            return root
        node = nodes.get(path)
        if node is None:
            if not isinstance(root, AsyncGroup):
                raise ArrayNotFoundError(f"dataset {name!r} is an array; it has no member {path!r}")
            node = nodes[path] = await root.get(path)
        return node

    async def array(self, name: str, path: str = "") -> AsyncArray:
        """The array at ``path`` of dataset ``name``.

        Raises
        ------
        ArrayNotFoundError
            ``path`` is a group or missing (HTTP 404).
        """
        node = await self.get(name, path)
        if not isinstance(node, AsyncArray):
            raise ArrayNotFoundError(f"{path!r} in dataset {name!r} is a group, not an array")
        return node

    def age(self, name: str) -> float | None:
        """Seconds since dataset ``name``'s metadata was read (None if not opened yet)."""
        entry = self._entry(name)
        return None if entry.root is None else time.monotonic() - entry.opened_at
