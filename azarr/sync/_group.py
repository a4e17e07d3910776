"""``azarr.sync.Group``: zarr-python 2's ``zarr.hierarchy.Group``, blocking, over an `AsyncGroup`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from types import TracebackType
from typing import Any, TypeVar

from azarr import api
from azarr.core import AsyncGroup
from azarr.core._formats import ZarrFormat
from azarr.core._reports import InfoReport, TreeReport, group_info_items, typestr
from azarr.sync._array import Array
from azarr.sync._loop import run
from azarr.sync._mirror import Forward, mirror_method, mirrors, to_async, to_sync
from azarr.sync._node import SyncNode
from azarr.sync._stores import Store, store_view_types

T = TypeVar("T")


async def _collect(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


class Group(SyncNode):
    """A Zarr v2 group with zarr-python 2's synchronous API.

    A thin layer over `AsyncGroup` (see `azarr.sync.Array`), with zarr-python 2's
    mapping interface: ``g["a/b"]`` (``g["/x"]`` from the root), ``g.a`` (a member as an
    attribute, and in ``dir(g)``), ``"a" in g``, ``for name in g``, ``len(g)``,
    ``g.keys()`` / ``g.values()`` / ``g.items()``, ``g.tree()``, ``g.info``,
    ``g.create_group``, ``g.create_dataset``, ``g.require_*``, ``with g:`` (closes the
    store). Members come back as `Array` / `Group` with this group's default ``timeout``;
    listing methods list the store once and return iterators.

    Parameters
    ----------
    store : AsyncGroup, or Store, str, os.PathLike or MutableMapping
        The group to drive, or (zarr-python 2's constructor) the store of an existing group.
    path : str, optional
        The group's path within ``store``.
    read_only : bool
        Refuse changes.
    chunk_store : Store, str or MutableMapping, optional
        Where the chunks of the arrays below are, when apart from the metadata.
    cache_attrs : bool
        False rereads ``.zattrs`` before every read of `attrs`.
    synchronizer : optional
        zarr-python 2's synchronizer, passed on to the arrays below (see `azarr.sync.Array`).
    zarr_version : {None, 2, 3}
        Open only a group of that format (zarr-python 2's name of ``zarr_format``).
    timeout : float, optional
        Default ``timeout`` (seconds) of every call; None waits without limit.

    Raises
    ------
    GroupNotFoundError
        (a ``ValueError``) no group at ``path``; `ContainsArrayError` when an array is there.
    """

    _async: AsyncGroup

    def __init__(
        self,
        store: Any,
        path: str | None = None,
        read_only: bool = False,
        chunk_store: Any = None,
        cache_attrs: bool = True,
        synchronizer: Any = None,
        zarr_version: int | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        super().__init__(timeout)
        if isinstance(store, AsyncGroup):
            self._async = store
            return
        opened = api.open_group(
            to_async(store),
            mode="r" if read_only else "r+",
            path=path,
            chunk_store=to_async(chunk_store),
            cache_attrs=cache_attrs,
            synchronizer=synchronizer,
            use_consolidated=False,
            zarr_version=zarr_version,
        )
        self._async = run(opened, timeout)
        self._keep_views(store, chunk_store)

    def _node(self, coro: Any, timeout: float | None) -> Any:
        return self._wrap(self._run(coro, timeout))

    def _wrap(self, node: Any) -> Any:
        """A member as a sync node holding this group's store views (so ``member.store is g.store``)."""
        wrapped = to_sync(node, self.timeout)
        return self._share_views(wrapped) if isinstance(wrapped, SyncNode) else wrapped

    @property
    def async_group(self) -> AsyncGroup:
        """The `AsyncGroup` this wraps."""
        return self._async

    path: Forward[str] = Forward(AsyncGroup, "path")
    name: Forward[str] = Forward(AsyncGroup, "name")
    basename: Forward[str] = Forward(AsyncGroup, "basename")
    zarr_format: Forward[int] = Forward(AsyncGroup, "zarr_format")
    synchronizer: Forward[Any] = Forward(AsyncGroup, "synchronizer")
    cache_attrs: Forward[bool] = Forward(AsyncGroup, "cache_attrs")

    def __repr__(self) -> str:
        return f"<azarr.sync.Group {self.name!r}{' read-only' if self.read_only else ''}>"

    def __eq__(self, other: object) -> bool:
        """Same store, path and read-only flag (zarr-python 2 ``Group.__eq__``)."""
        if not isinstance(other, Group):
            return NotImplemented
        return self.store == other.store and self.read_only == other.read_only and self.path == other.path

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by store and path

    def __enter__(self) -> Group:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Leaving ``with g:`` closes the store, as in zarr-python 2."""
        self.store.close()

    # ---------------------------------------------------------------- opening
    @classmethod
    @mirrors(AsyncGroup.open)
    def open(
        cls,
        store: Store,
        path: str = "",
        *,
        read_only: bool = False,
        allow_pickle: bool | None = None,
        zarr_format: ZarrFormat | None = None,
        synchronizer: Any = None,
        cache_attrs: bool = True,
        timeout: float | None = None,
    ) -> Group:
        coro = AsyncGroup.open(
            to_async(store),
            path,
            read_only=read_only,
            allow_pickle=allow_pickle,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
            zarr_format=zarr_format,
        )
        return cls._opened(coro, store, timeout)

    @classmethod
    @mirrors(AsyncGroup.init)
    def init(
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
        timeout: float | None = None,
    ) -> Group:
        coro = AsyncGroup.init(
            to_async(store),
            path,
            overwrite=overwrite,
            attributes=attributes,
            allow_pickle=allow_pickle,
            synchronizer=synchronizer,
            cache_attrs=cache_attrs,
            zarr_format=zarr_format,
        )
        return cls._opened(coro, store, timeout)

    # ---------------------------------------------------------------- members
    @mirrors(AsyncGroup.get)
    def get(self, name: str, *, timeout: float | None = None) -> Array | Group:
        node: Array | Group = self._node(self._async.get(name), timeout)
        return node

    def __getitem__(self, name: str) -> Array | Group:
        """``g[name]``: see `get` (raises `NodeNotFoundError`, a KeyError); ``/name`` is from the root."""
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        """``g[name] = data``: create (or replace) array ``name`` holding ``data`` (zarr-python 2)."""
        self._run(self._async.array(name, value, overwrite=True), None)

    def __getattr__(self, name: str) -> Array | Group:
        """``g.name``: the member ``name`` (zarr-python 2); names starting with ``_`` are never members.

        Raises
        ------
        AttributeError
            No such member.
        """
        if name.startswith("_") or name in ("timeout",):
            raise AttributeError(name)
        try:
            return self.get(name)
        except KeyError as exc:
            raise AttributeError(f"{type(self).__name__} has no attribute or member {name!r}") from exc

    def __dir__(self) -> list[str]:
        """Attributes and the members whose names are Python identifiers (tab completion)."""
        names = set(super().__dir__())
        names.update(n for n in self.keys() if n.isidentifier())
        return sorted(names)

    def _ipython_key_completions_(self) -> list[str]:
        return sorted(self.keys())

    @mirrors(AsyncGroup.contains)
    def contains(self, name: str, *, timeout: float | None = None) -> bool:
        result: bool = self._run(self._async.contains(name), timeout)
        return result

    def __contains__(self, name: object) -> bool:
        return isinstance(name, (str, bytes)) and self.contains(name)  # type: ignore[arg-type]

    @mirrors(AsyncGroup.members)
    def members(
        self, max_depth: int | None = 0, *, timeout: float | None = None
    ) -> Iterator[tuple[str, Array | Group]]:
        found = self._run(_collect(self._async.members(max_depth)), timeout)
        return iter([(name, self._wrap(node)) for name, node in found])

    @mirrors(AsyncGroup.keys)
    def keys(self, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.keys()), timeout))

    def values(self) -> Iterator[Array | Group]:
        """The direct members (zarr-python 2: a group is a mapping of names to members)."""
        return (node for _, node in self.members())

    def items(self) -> Iterator[tuple[str, Array | Group]]:
        """``(name, member)`` of the direct members, sorted by name."""
        return self.members()

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __len__(self) -> int:
        return len(self._run(_collect(self._async.keys()), None))

    @mirrors(AsyncGroup.group_keys)
    def group_keys(self, recurse: bool = False, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.group_keys(recurse)), timeout))

    @mirrors(AsyncGroup.array_keys)
    def array_keys(self, recurse: bool = False, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.array_keys(recurse)), timeout))

    @mirrors(AsyncGroup.groups)
    def groups(self, recurse: bool = False, *, timeout: float | None = None) -> Iterator[tuple[str, Group]]:
        found = self._run(_collect(self._async.groups(recurse)), timeout)
        return iter([(name, self._wrap(node)) for name, node in found])

    @mirrors(AsyncGroup.arrays)
    def arrays(self, recurse: bool = False, *, timeout: float | None = None) -> Iterator[tuple[str, Array]]:
        found = self._run(_collect(self._async.arrays(recurse)), timeout)
        return iter([(name, self._wrap(node)) for name, node in found])

    @mirrors(AsyncGroup.tree)
    def tree(
        self,
        expand: bool = False,
        level: int | None = None,
        *,
        codecs: bool = False,
        timeout: float | None = None,
    ) -> TreeReport:
        result: TreeReport = self._run(self._async.tree(expand, level, codecs=codecs), timeout)
        return result

    # ---------------------------------------------------------------- info
    @property
    def info(self) -> InfoReport:
        """zarr-python 2's ``Group.info``: name, type, store and members (lists the group).

        An `InfoReport`, which a notebook shows as a table.
        """
        return InfoReport(self.info_items())

    @mirrors(AsyncGroup.info_items)
    def info_items(self, *, timeout: float | None = None) -> list[tuple[str, str]]:
        members = self._run(self._async._members(), timeout)
        store_type, chunk_store_type = store_view_types(self._async.store)
        synchronizer = self._async.synchronizer
        return group_info_items(
            self._async,
            members,
            type_name="azarr.sync.Group",
            store_type=store_type,
            chunk_store_type=chunk_store_type,
            synchronizer_type=None if synchronizer is None else typestr(synchronizer),
        )

    @mirrors(AsyncGroup.info_complete)
    def info_complete(self, *, timeout: float | None = None) -> InfoReport:
        return InfoReport(self.info_items(timeout=timeout))

    # ---------------------------------------------------------------- creating members
    @mirrors(AsyncGroup.create_group)
    def create_group(self, name: str, *, overwrite: bool = False, timeout: float | None = None) -> Group:
        group: Group = self._node(self._async.create_group(name, overwrite=overwrite), timeout)
        return group

    @mirrors(AsyncGroup.require_group)
    def require_group(self, name: str, *, overwrite: bool = False, timeout: float | None = None) -> Group:
        group: Group = self._node(self._async.require_group(name, overwrite=overwrite), timeout)
        return group

    def _array(self, coro: Any, timeout: float | None) -> Array:
        array: Array = self._node(coro, timeout)
        return array

    @mirrors(AsyncGroup.create_dataset)
    def create_dataset(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.create_dataset(name, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.create)
    def create(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.create(name, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.require_dataset)
    def require_dataset(
        self,
        name: str,
        shape: Any,
        dtype: Any = None,
        *,
        exact: bool = False,
        timeout: float | None = None,
        **kwargs: Any,
    ) -> Array:
        coro = self._async.require_dataset(name, shape, dtype, exact=exact, **_unwrapped(kwargs))
        return self._array(coro, timeout)

    @mirrors(AsyncGroup.zeros)
    def zeros(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.zeros(name, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.ones)
    def ones(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.ones(name, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.empty)
    def empty(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.empty(name, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.full)
    def full(self, name: str, fill_value: Any, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.full(name, fill_value, **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.array)
    def array(self, name: str, data: Any, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.array(name, to_async(data), **_unwrapped(kwargs)), timeout)

    @mirrors(AsyncGroup.update_attributes)
    def update_attributes(self, new_attributes: dict[str, Any], *, timeout: float | None = None) -> None:
        self._run(self._async.update_attributes(new_attributes), timeout)

    # ---------------------------------------------------------------- zarr-python 2 extras
    nmembers = mirror_method(AsyncGroup.nmembers)
    create_groups = mirror_method(AsyncGroup.create_groups)
    require_groups = mirror_method(AsyncGroup.require_groups)
    move = mirror_method(AsyncGroup.move)
    delitem = mirror_method(AsyncGroup.delitem)
    empty_like = mirror_method(AsyncGroup.empty_like)
    zeros_like = mirror_method(AsyncGroup.zeros_like)
    ones_like = mirror_method(AsyncGroup.ones_like)
    full_like = mirror_method(AsyncGroup.full_like)

    def __delitem__(self, name: str) -> None:
        """``del g[name]``: see `delitem`."""
        self.delitem(name)

    def _visitor(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """``func`` called with sync nodes where the async walk passes async ones."""
        return lambda *args: func(*(self._wrap(a) for a in args))

    @mirrors(AsyncGroup.visit)
    def visit(self, func: Callable[..., Any], *, timeout: float | None = None) -> Any:
        return self._run(self._async.visit(self._visitor(func)), timeout)

    @mirrors(AsyncGroup.visitkeys)
    def visitkeys(self, func: Callable[..., Any], *, timeout: float | None = None) -> Any:
        return self._run(self._async.visitkeys(self._visitor(func)), timeout)

    @mirrors(AsyncGroup.visitvalues)
    def visitvalues(self, func: Callable[..., Any], *, timeout: float | None = None) -> Any:
        return self._run(self._async.visitvalues(self._visitor(func)), timeout)

    @mirrors(AsyncGroup.visititems)
    def visititems(self, func: Callable[..., Any], *, timeout: float | None = None) -> Any:
        return self._run(self._async.visititems(self._visitor(func)), timeout)


def _no_rich_display(self: Group, **kwargs: Any) -> None:
    """None: IPython then shows ``repr(group)`` (its probes for rich forms never list the store)."""
    return None


# IPython probes for rich display methods; zarr-python 2 defines them as returning None so the
# probe does not fall through to member lookup, and so does azarr.
for _kind in ("html", "json", "javascript", "markdown", "svg", "png", "jpeg", "latex", "pdf", "mimebundle"):
    setattr(Group, f"_repr_{_kind}_", _no_rich_display)


def _unwrapped(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments with sync nodes and stores as the async objects they wrap."""
    return {key: to_async(value) for key, value in kwargs.items()}
