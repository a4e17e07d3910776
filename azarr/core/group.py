"""``AsyncGroup``: a Zarr group (v2 or v3), its members and its attributes, with coroutines."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from azarr.core._creation import create_array, create_array_from_data
from azarr.core._formats import Document, NodeDocuments, ZarrFormat, creation_format, metadata_key, read_node
from azarr.core._group_ops import like_array, move_node, visit_nodes
from azarr.core._hierarchy import (
    contains_array,
    contains_group,
    group_document,
    node_kind,
    prepare_node_path,
    write_node_document,
)
from azarr.core._node import Node
from azarr.core._paths import join_path, node_key, normalize_path
from azarr.core._reports import InfoReport, TreeReport, group_info_items, tree_report
from azarr.core.array import AsyncArray
from azarr.errors import (
    ContainsArrayError,
    ContainsGroupError,
    GroupNotFoundError,
    NodeNotFoundError,
    ReadOnlyError,
)
from azarr.metadata import ZATTRS, ZGROUP, GroupMetadata, GroupV3Metadata, is_metadata_key, parse_attributes
from azarr.scheduler import StoreIO, bounded_map
from azarr.storage import Store

if TYPE_CHECKING:
    from azarr.sync import Group


class AsyncGroup(Node):
    """A Zarr group (v2 or v3) whose I/O methods are coroutines.

    Open or create one with `azarr.open_group` / `azarr.group`.
    Methods mirror zarr-python 2's ``zarr.hierarchy.Group``, awaited;
    iteration over members is ``async for``.

    Parameters
    ----------
    store : Store
        Where the group lives.
    path : str
        Node path (``""`` for the root).
    attributes : dict
        The parsed ``.zattrs`` document.
    read_only : bool
        Refuse changes with `ReadOnlyError`.
    allow_pickle : bool, optional
        Passed on to arrays opened through this group.
    zarr_format : {2, 3}, default 2
        The group's format; its members are of the same format (the other format's
        nodes are not members, as in zarr-python 3), and so are nodes created in it.
    synchronizer, cache_attrs
        zarr-python 2's options, passed on to the members (see `azarr.sync.Group`).
    """

    _kind = "group"

    def __init__(
        self,
        store: Store,
        path: str = "",
        attributes: dict[str, Any] | None = None,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        zarr_format: int = 2,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> None:
        super().__init__(
            store,
            path,
            attributes,
            read_only=read_only,
            allow_pickle=allow_pickle,
            zarr_format=zarr_format,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    # ---------------------------------------------------------------- opening
    @classmethod
    async def open(
        cls,
        store: Store,
        path: str = "",
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        zarr_format: ZarrFormat | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncGroup:
        """Open the group at ``path``, Zarr v2 (``.zgroup``, ``.zattrs``) or v3 (``zarr.json``).

        ``zarr_format`` (2 or 3) looks for that format only.

        Raises
        ------
        GroupNotFoundError
            No group at ``path``.
        MetadataError
            A document is invalid.
        """
        path = normalize_path(path)
        found = await read_node(StoreIO(store), path, zarr_format=zarr_format)
        if found is None or found.kind != "group":
            what = "an array" if found is not None else "no .zgroup or zarr.json"
            raise GroupNotFoundError(f"no group at path {path!r} in {store.url} ({what} there)")
        return cls.from_node(
            store,
            path,
            found,
            read_only=read_only,
            allow_pickle=allow_pickle,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    @classmethod
    def from_node(
        cls,
        store: Store,
        path: str,
        found: NodeDocuments,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncGroup:
        """The group at normalized ``path`` from its documents as `read_node` found them.

        Raises
        ------
        MetadataError
            A document is invalid (names its key).
        """
        options: dict[str, Any] = {
            "read_only": read_only,
            "allow_pickle": allow_pickle,
            "synchronizer": synchronizer,
            "cache_attrs": cache_attrs,
        }
        if found.zarr_format == 2:
            return cls.from_documents(store, path, found.metadata, found.attributes, **options)
        metadata = GroupV3Metadata.from_json(found.metadata, key=metadata_key(path, 3))
        return cls(store, path, metadata.attributes, zarr_format=3, **options)

    @classmethod
    def from_documents(
        cls,
        store: Store,
        path: str,
        zgroup: Document,
        zattrs: Document | None,
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncGroup:
        """The group at normalized ``path`` from its already-read ``.zgroup`` and ``.zattrs`` documents (bytes, or decoded).

        Raises
        ------
        MetadataError
            A document is invalid (the message names its key).
        """
        GroupMetadata.from_json(zgroup, key=node_key(path, ZGROUP))
        attrs_key = node_key(path, ZATTRS)
        attributes = {} if zattrs is None else parse_attributes(zattrs, key=attrs_key)
        return cls(
            store,
            path,
            attributes,
            read_only=read_only,
            allow_pickle=allow_pickle,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
        )

    @classmethod
    async def init(
        cls,
        store: Store,
        path: str = "",
        *,
        overwrite: bool = False,
        attributes: dict[str, Any] | None = None,
        allow_pickle: bool | None = None,
        zarr_format: int | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
    ) -> AsyncGroup:
        """Create a group at ``path``, with any missing ancestor groups (zarr-python 2 ``init_group``).

        ``zarr_format`` 2 writes ``.zgroup`` (and ``.zattrs``), 3 one ``zarr.json`` holding
        the attributes; default ``azarr.config`` ``zarr_format`` (2).

        Raises
        ------
        ContainsArrayError, ContainsGroupError
            A node exists at ``path`` and ``overwrite`` is False.
        MetadataError
            An ancestor group is of the other format.
        """
        path = normalize_path(path)
        if store.read_only:
            raise ReadOnlyError(f"cannot create group {path!r}: store {store.url} is read-only")
        fmt = creation_format(zarr_format)
        io = StoreIO(store)
        await prepare_node_path(io, path, overwrite=overwrite, zarr_format=fmt)
        options: dict[str, Any] = {
            "allow_pickle": allow_pickle,
            "synchronizer": synchronizer,
            "cache_attrs": cache_attrs,
        }
        if fmt == 3:
            document = GroupV3Metadata(attributes=dict(attributes or {})).to_json()
            await write_node_document(io, path, "zarr.json", document, overwrite=overwrite, kind="group")
            return cls(store, path, attributes, zarr_format=3, **options)
        await write_node_document(io, path, ZGROUP, group_document(2), overwrite=overwrite)
        group = cls(store, path, **options)
        if attributes:
            await group.attrs.put(attributes)
        return group

    # ---------------------------------------------------------------- properties
    def __repr__(self) -> str:
        return f"<azarr.AsyncGroup {self.name!r}{' read-only' if self.read_only else ''}>"

    # ---------------------------------------------------------------- members
    def _child_options(self) -> dict[str, Any]:
        """What nodes opened or created through this group inherit from it (as in zarr-python 2)."""
        return {
            "allow_pickle": self._allow_pickle,
            "synchronizer": self._synchronizer,
            "cache_attrs": self._cache_attrs,
            "zarr_format": self._zarr_format,
        }

    async def get(self, name: str) -> AsyncArray | AsyncGroup:
        """The array or group at ``name`` (relative, may contain ``/``), like ``group[name]``.

        One round trip for an array (``.zarray`` and ``.zattrs`` read together),
        two for a group.

        Raises
        ------
        NodeNotFoundError
            Neither an array nor a group exists there (a ``KeyError``).
        """
        node = await open_node(
            self.store,
            join_path(self._path, name),
            read_only=self._read_only,
            **self._child_options(),
        )
        if node is None:
            raise NodeNotFoundError(
                f"no array or group named {name!r} in group {self.name!r} of {self._io.url}"
            )
        return node

    async def contains(self, name: str) -> bool:
        """True if an array or group exists at ``name`` (zarr-python 2 ``name in group``)."""
        path = join_path(self._path, name)
        return await node_kind(self._io, path) is not None

    async def _members(self) -> list[tuple[str, AsyncArray | AsyncGroup]]:
        """Sorted ``(name, node)`` of the direct members, all opened in one concurrent wave.

        One listing, then every child's documents read concurrently under the
        store's budget: the round trips are bounded by depth, not by the number
        of members (the unconsolidated-open figures are in ``benchmarks/README.md``).
        """
        listed = await self._io.list_dir(self._path)
        names = sorted({n for n in listed if not n.startswith(".") and not is_metadata_key(n)})

        async def open_child(name: str) -> AsyncArray | AsyncGroup | None:
            # Children in the group's own format only (zarr-python 3 does the same).
            return await open_node(
                self.store,
                join_path(self._path, name),
                read_only=self._read_only,
                **self._child_options(),
            )

        nodes = await bounded_map(open_child, names, self._io.budget.max_requests)
        return [(name, node) for name, node in zip(names, nodes, strict=True) if node is not None]

    async def _subtree(self, max_depth: int | None) -> _Subtree:
        """The direct members, each group's own members below it down to ``max_depth`` more levels.

        One walk serves `members` and `tree`: every group is listed and
        opened in one concurrent wave and sibling groups are walked at the same
        time, so a whole tree costs about (requests / budget) + depth round trips
        instead of a sequence of them per group.
        """
        direct = await self._members()
        if max_depth is not None and max_depth <= 0:
            return [(name, node, []) for name, node in direct]
        below = None if max_depth is None else max_depth - 1

        async def expand(member: tuple[str, AsyncArray | AsyncGroup]) -> _SubtreeEntry:
            name, node = member
            return name, node, await node._subtree(below) if isinstance(node, AsyncGroup) else []

        return await bounded_map(expand, direct, max(1, len(direct)))

    async def members(self, max_depth: int | None = 0) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """Yield ``(name, node)`` for the members, sorted by name (zarr-python 3 ``members``).

        Parameters
        ----------
        max_depth : int or None, default 0
            Levels below the direct members to include: 0 yields the direct
            members only; ``None`` the whole subtree. Deeper members are named by
            their path relative to this group (``"sub/array"``), as in zarr-python 3.

        Notes
        -----
        Each level is opened in one concurrent wave under the store's request
        budget, and sibling groups' levels overlap.
        """
        if max_depth is not None and max_depth < 0:
            raise ValueError(f"max_depth must be None or >= 0, got {max_depth}")
        for name, node in sorted(_flatten(await self._subtree(max_depth)), key=lambda item: item[0]):
            yield name, node

    async def keys(self) -> AsyncIterator[str]:
        """Yield the names of the direct members, sorted."""
        for name, _ in await self._members():
            yield name

    async def group_keys(self, recurse: bool = False) -> AsyncIterator[str]:
        """Yield the names of child groups, sorted (zarr-python 2 ``group_keys``); see `groups`."""
        async for name, _ in self.groups(recurse):
            yield name

    async def array_keys(self, recurse: bool = False) -> AsyncIterator[str]:
        """Yield the names of child arrays, sorted (zarr-python 2 ``array_keys``); see `arrays`."""
        async for name, _ in self.arrays(recurse):
            yield name

    async def groups(self, recurse: bool = False) -> AsyncIterator[tuple[str, AsyncGroup]]:
        """Yield ``(name, group)`` for child groups.

        ``recurse=True`` goes on below each child group after it (azarr's addition, as
        zarr-python 2's ``arrays(recurse=True)``): names stay those within their parent.
        """
        async for name, node in self._listed(AsyncGroup, recurse):
            yield name, node  # type: ignore[misc]

    async def arrays(self, recurse: bool = False) -> AsyncIterator[tuple[str, AsyncArray]]:
        """Yield ``(name, array)`` for child arrays.

        ``recurse=True`` also yields the arrays of every group below, each child group's
        after the arrays before it in name order (zarr-python 2 ``arrays(recurse=True)``);
        names are those within their parent group, as in zarr-python 2.
        """
        async for name, node in self._listed(AsyncArray, recurse):
            yield name, node  # type: ignore[misc]

    async def _listed(
        self, kind: type[AsyncArray] | type[AsyncGroup], recurse: bool
    ) -> AsyncIterator[tuple[str, AsyncArray | AsyncGroup]]:
        """``(name, node)`` of the members of class ``kind``, in name order, with those below if ``recurse``."""
        entries = await self._subtree(None if recurse else 0)

        def walk(subtree: _Subtree) -> Iterator[tuple[str, AsyncArray | AsyncGroup]]:
            for name, node, below in subtree:
                if isinstance(node, kind):
                    yield name, node
                if recurse:
                    yield from walk(below)

        for item in walk(entries):
            yield item

    def __aiter__(self) -> AsyncIterator[str]:
        return self.keys()

    async def tree(
        self, expand: bool = False, level: int | None = None, *, codecs: bool = False
    ) -> TreeReport:
        """Text rendering of the hierarchy below this group, like zarr-python 2's ``Group.tree()``, e.g.:

            /
             ├── bar
             │   └── baz (100,) float64
             └── foo

        The first line is the group's basename (``/`` for the root). A `TreeReport`: a ``str``
        whose ``repr`` is the tree, ``bytes(tree)`` draws it in ASCII and a notebook shows it
        as preformatted text (zarr-python 2's ``TreeViewer``).

        Parameters
        ----------
        expand : bool
            zarr-python 2's option for its notebook widget; ignored.
        level : int, optional
            Maximum depth to descend.
        codecs : bool, keyword-only
            Also show each array's Zarr format and codec chain in encoding order
            (``baz (100,) float64 v3 bytes > zstd``; azarr's addition, what ``azarr tree`` prints).
        """
        del expand
        below = (
            await self._subtree(None if level is None else level - 1) if level is None or level > 0 else []
        )
        return tree_report(self.basename or "/", below, codecs=codecs)

    # ---------------------------------------------------------------- creation
    async def create_group(self, name: str, *, overwrite: bool = False) -> AsyncGroup:
        """Create a child group (intermediate groups too).

        Raises
        ------
        ContainsArrayError, ContainsGroupError
            A node exists at ``name`` and ``overwrite`` is False.
        """
        self._check_writable()
        return await AsyncGroup.init(
            self.store, join_path(self._path, name), overwrite=overwrite, **self._child_options()
        )

    async def require_group(self, name: str, *, overwrite: bool = False) -> AsyncGroup:
        """Open the child group ``name``, creating it if missing (zarr-python 2 ``require_group``).

        Raises
        ------
        ContainsArrayError
            An array exists at ``name``.
        """
        path = join_path(self._path, name)
        if not overwrite and await contains_group(self._io, path):
            return await AsyncGroup.open(self.store, path, read_only=self._read_only, **self._child_options())
        if not overwrite and await contains_array(self._io, path):
            raise ContainsArrayError(
                f"cannot require group {path!r}: an array exists there in {self._io.url}"
            )
        try:
            return await self.create_group(name, overwrite=overwrite)
        except ContainsGroupError:
            # Another writer created it between the check and our conditional create.
            return await AsyncGroup.open(self.store, path, read_only=self._read_only, **self._child_options())

    async def create_dataset(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create an array ``name``; keyword arguments as `azarr.create` (``data=`` writes it).

        Zarr-python 2 ``Group.create_dataset`` (h5py-compatible name).
        """
        self._check_writable()
        path = join_path(self._path, name)
        for option, value in self._child_options().items():
            kwargs.setdefault(option, value)
        data = kwargs.pop("data", None)
        if data is not None:
            return await create_array_from_data(self.store, path, data, **kwargs)
        return await create_array(self.store, path, kwargs.pop("shape"), **kwargs)

    async def create(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create an array ``name`` (zarr-python 2 ``Group.create``); see `azarr.create`."""
        return await self.create_dataset(name, **kwargs)

    async def require_dataset(
        self, name: str, shape: Any, dtype: Any = None, *, exact: bool = False, **kwargs: Any
    ) -> AsyncArray:
        """Open array ``name`` if it exists with a compatible shape and dtype, else create it.

        Zarr-python 2 ``Group.require_dataset``: shapes must match exactly;
        dtypes must be equal with ``exact=True``, else castable.

        Raises
        ------
        TypeError
            An existing array has another shape or an incompatible dtype.
        """
        import numpy as np

        from azarr.core._normalize import normalize_shape

        path = join_path(self._path, name)
        if not await contains_array(self._io, path):
            return await self.create_dataset(name, shape=shape, dtype=dtype, **kwargs)
        existing = await AsyncArray.open(
            self.store,
            path,
            read_only=self._read_only,
            **(self._child_options() | {k: v for k, v in kwargs.items() if k in _CHILD_OPTIONS}),
        )
        wanted_shape = normalize_shape(shape)
        if existing.shape != wanted_shape:
            raise TypeError(f"array {path!r} exists with shape {existing.shape}, not {wanted_shape}")
        if dtype is not None:
            wanted = np.dtype(dtype)
            ok = existing.dtype == wanted if exact else np.can_cast(wanted, existing.dtype)
            if not ok:
                raise TypeError(
                    f"array {path!r} exists with dtype {existing.dtype}, incompatible with {wanted}"
                )
        return existing

    async def zeros(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` filled with 0 (see `azarr.zeros`)."""
        return await self.create_dataset(name, fill_value=0, **kwargs)

    async def ones(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` filled with 1 (see `azarr.ones`)."""
        return await self.create_dataset(name, fill_value=1, **kwargs)

    async def empty(self, name: str, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` with no fill value (see `azarr.empty`)."""
        return await self.create_dataset(name, fill_value=None, **kwargs)

    async def full(self, name: str, fill_value: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` filled with ``fill_value`` (see `azarr.full`)."""
        return await self.create_dataset(name, fill_value=fill_value, **kwargs)

    async def array(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` holding ``data`` (see `azarr.array`)."""
        return await self.create_dataset(name, data=data, **kwargs)

    # ---------------------------------------------------------------- pickling
    def __getstate__(self) -> dict[str, Any]:
        """Pickle the group as configuration: store (itself pickled as configuration), path, attributes, options."""
        return self._node_state()

    def __setstate__(self, state: dict[str, Any]) -> None:
        AsyncGroup.__init__(
            self,
            state["store"],
            state["path"],
            state["attributes"],
            read_only=state["read_only"],
            allow_pickle=state["allow_pickle"],
            zarr_format=state.get("zarr_format", 2),
            cache_attrs=state.get("cache_attrs", True),
        )

    # ---------------------------------------------------------------- sync facade
    def to_sync(self, *, timeout: float | None = None) -> Group:
        """This group with zarr-python 2's blocking API (`azarr.sync.Group`; no I/O).

        ``timeout`` (seconds) is the default of every call made through it.
        """
        from azarr.sync import Group

        return Group(self, timeout=timeout)

    # ---------------------------------------------------------------- zarr-python 2 extras
    async def visitvalues(self, func: Callable[..., Any]) -> Any:
        """Call ``func(node)`` on every node below this group (zarr-python 2 ``visitvalues``).

        Depth first, members sorted by name; the first value other than None
        that ``func`` returns stops the walk and is returned. ``func`` may be a
        coroutine function.
        """
        return await visit_nodes(self, func, with_path=False, with_node=True)

    async def visit(self, func: Callable[..., Any]) -> Any:
        """Call ``func(path)`` with every node's path relative to this group (zarr-python 2 ``visit``)."""
        return await visit_nodes(self, func, with_path=True, with_node=False)

    async def visitkeys(self, func: Callable[..., Any]) -> Any:
        """The same as `visit` (zarr-python 2 ``visitkeys``)."""
        return await self.visit(func)

    async def visititems(self, func: Callable[..., Any]) -> Any:
        """Call ``func(path, node)`` on every node below this group (zarr-python 2 ``visititems``)."""
        return await visit_nodes(self, func, with_path=True, with_node=True)

    async def nmembers(self) -> int:
        """Number of direct members: zarr-python 2's ``len(group)`` (zarr-python 3's name)."""
        return len(await self._members())

    @property
    def info(self) -> InfoReport:
        """Name, type and store of the group (no I/O; `info_complete` adds its members).

        An `InfoReport`: a ``str`` whose ``repr`` is the report (zarr-python 2's ``InfoReporter``).
        """
        return InfoReport(group_info_items(self, None, type_name="azarr.AsyncGroup"))

    async def info_items(self) -> list[tuple[str, str]]:
        """zarr-python 2's ``Group.info_items()``: the `info_complete` rows as ``(label, value)`` pairs."""
        return group_info_items(self, await self._members(), type_name="azarr.AsyncGroup")

    async def info_complete(self) -> InfoReport:
        """zarr-python 2's ``Group.info``: `info` plus member counts and names (lists the group)."""
        return InfoReport(await self.info_items())

    async def create_groups(self, *names: str, **kwargs: Any) -> tuple[AsyncGroup, ...]:
        """Create several child groups (zarr-python 2 ``create_groups``); arguments as `create_group`."""
        return tuple([await self.create_group(name, **kwargs) for name in names])

    async def require_groups(self, *names: str) -> tuple[AsyncGroup, ...]:
        """Open or create several child groups (zarr-python 2 ``require_groups``)."""
        return tuple([await self.require_group(name) for name in names])

    async def move(self, source: str, dest: str) -> None:
        """Move the node at ``source`` to ``dest``, paths relative to this group (zarr-python 2 ``Group.move``).

        Raises
        ------
        NodeNotFoundError
            Nothing at ``source``.
        ContainsArrayError, ContainsGroupError
            Something exists at ``dest``.
        ReadOnlyError
            The group is read-only.
        """
        self._check_writable()
        await move_node(self, source, dest)

    async def zeros_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` of zeros shaped like ``data`` (zarr-python 2 ``Group.zeros_like``)."""
        return await like_array(self, "zeros", name, data, **kwargs)

    async def ones_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` of ones shaped like ``data`` (zarr-python 2 ``Group.ones_like``)."""
        return await like_array(self, "ones", name, data, **kwargs)

    async def empty_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` without fill value shaped like ``data`` (zarr-python 2 ``Group.empty_like``)."""
        return await like_array(self, "empty", name, data, **kwargs)

    async def full_like(self, name: str, data: Any, **kwargs: Any) -> AsyncArray:
        """Create array ``name`` filled like ``data`` (zarr-python 2 ``Group.full_like``)."""
        return await like_array(self, "full", name, data, **kwargs)

    async def delitem(self, name: str) -> None:
        """Delete the member ``name`` and everything below it (zarr-python 2 ``del group[name]``).

        Raises
        ------
        NodeNotFoundError
            No member ``name``.
        ReadOnlyError
            The group is read-only.
        """
        self._check_writable()
        path = join_path(self._path, name)
        if await node_kind(self._io, path) is None:
            raise NodeNotFoundError(
                f"no array or group named {name!r} in group {self.name!r} of {self._io.url}"
            )
        await self._io.delete_prefix(path)

    async def __aenter__(self) -> AsyncGroup:
        """``async with group:`` returns the group; on exit its store is closed (zarr-python 2 ``with group:``)."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.store.close()


#: The keyword arguments of `AsyncGroup._child_options`.
_CHILD_OPTIONS = ("allow_pickle", "synchronizer", "cache_attrs", "zarr_format")

_SubtreeEntry = tuple[str, "AsyncArray | AsyncGroup", "list[_SubtreeEntry]"]
"""``(name, node, its members)``: a group's members as `AsyncGroup._subtree` found them
(an array's, and a group's beyond the depth asked for, are ``[]``)."""
_Subtree = list[_SubtreeEntry]


def _flatten(subtree: _Subtree, prefix: str = "") -> Iterator[tuple[str, AsyncArray | AsyncGroup]]:
    """``(path relative to the walked group, node)`` for every member of ``subtree``."""
    for name, node, below in subtree:
        yield prefix + name, node
        yield from _flatten(below, f"{prefix}{name}/")


async def open_node(
    store: Store,
    path: str,
    *,
    read_only: bool = False,
    allow_pickle: bool | None = None,
    zarr_format: ZarrFormat | None = None,
    synchronizer: Any = None,
    cache_attrs: bool = True,
) -> AsyncArray | AsyncGroup | None:
    """Open whatever node is at ``path`` (of ``zarr_format``, if given); None if there is none.

    Reads ``.zarray``, ``.zattrs`` and ``zarr.json`` together (one round trip opens an
    array of either format, or a v3 group) and ``.zgroup`` only when there is neither
    (an array wins, as in zarr-python 2's ``open``; ``zarr.json`` wins over v2 documents).
    """
    options: dict[str, Any] = {
        "read_only": read_only,
        "allow_pickle": allow_pickle,
        "synchronizer": synchronizer,
        "cache_attrs": cache_attrs,
    }
    found = await read_node(StoreIO(store), path, zarr_format=zarr_format)
    if found is None:
        return None
    if found.kind == "array":
        return AsyncArray.from_node(store, path, found, **options)
    return AsyncGroup.from_node(store, path, found, **options)
