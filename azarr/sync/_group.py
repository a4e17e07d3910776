"""``azarr.sync.Group``: zarr-python 2's ``zarr.hierarchy.Group``, blocking, over an `AsyncGroup`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from azarr.core import AsyncArray, AsyncGroup
from azarr.core._formats import ZarrFormat
from azarr.storage import Store
from azarr.sync._array import Array
from azarr.sync._attributes import Attributes
from azarr.sync._loop import run
from azarr.sync._mirror import Forward, mirror_method, mirrors, to_sync

T = TypeVar("T")


async def _collect(items: AsyncIterator[T]) -> list[T]:
    return [item async for item in items]


class Group:
    """A Zarr v2 group with zarr-python 2's synchronous API.

    A thin layer over `AsyncGroup` (see `azarr.sync.Array`):
    ``g["a/b"]``, ``"a" in g``, ``for name in g``, ``len(g)``, ``g.tree()``,
    ``g.create_group``, ``g.create_dataset``, ``g.require_*``. Members come back as
    `Array` / `Group` with this group's default ``timeout``; listing
    methods (``keys``, ``arrays``, ...) list the store once and return iterators.

    Parameters
    ----------
    async_group : AsyncGroup
        The group to drive.
    timeout : float, optional
        Default ``timeout`` (seconds) of every call; None waits without limit.
    """

    def __init__(self, async_group: AsyncGroup, *, timeout: float | None = None) -> None:
        self._async = async_group
        self.timeout = timeout

    def _run(self, coro: Any, timeout: float | None) -> Any:
        return run(coro, self.timeout if timeout is None else timeout)

    def _node(self, coro: Any, timeout: float | None) -> Any:
        return to_sync(self._run(coro, timeout), self.timeout)

    @property
    def async_group(self) -> AsyncGroup:
        """The `AsyncGroup` this wraps."""
        return self._async

    store: Forward[Store] = Forward(AsyncGroup, "store")
    path: Forward[str] = Forward(AsyncGroup, "path")
    name: Forward[str] = Forward(AsyncGroup, "name")
    basename: Forward[str] = Forward(AsyncGroup, "basename")
    read_only: Forward[bool] = Forward(AsyncGroup, "read_only")
    zarr_format: Forward[int] = Forward(AsyncGroup, "zarr_format")

    @property
    def attrs(self) -> Attributes:
        """User attributes (``.zattrs``): a mutable mapping whose changes are written at once."""
        return Attributes(self._async.attrs, self)

    def __repr__(self) -> str:
        return f"<azarr.sync.Group {self.name!r}{' read-only' if self.read_only else ''}>"

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
        timeout: float | None = None,
    ) -> Group:
        coro = AsyncGroup.open(
            store, path, read_only=read_only, allow_pickle=allow_pickle, zarr_format=zarr_format
        )
        return cls(run(coro, timeout), timeout=timeout)

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
        timeout: float | None = None,
    ) -> Group:
        coro = AsyncGroup.init(
            store,
            path,
            overwrite=overwrite,
            attributes=attributes,
            allow_pickle=allow_pickle,
            zarr_format=zarr_format,
        )
        return cls(run(coro, timeout), timeout=timeout)

    # ---------------------------------------------------------------- members
    @mirrors(AsyncGroup.get)
    def get(self, name: str, *, timeout: float | None = None) -> Array | Group:
        node: Array | Group = self._node(self._async.get(name), timeout)
        return node

    def __getitem__(self, name: str) -> Array | Group:
        """``g[name]``: see `get` (raises `NodeNotFoundError`, a KeyError)."""
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        """``g[name] = data``: create (or replace) array ``name`` holding ``data`` (zarr-python 2)."""
        self._run(self._async.array(name, value, overwrite=True), None)

    @mirrors(AsyncGroup.contains)
    def contains(self, name: str, *, timeout: float | None = None) -> bool:
        result: bool = self._run(self._async.contains(name), timeout)
        return result

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.contains(name)

    @mirrors(AsyncGroup.members)
    def members(
        self, max_depth: int | None = 0, *, timeout: float | None = None
    ) -> Iterator[tuple[str, Array | Group]]:
        found = self._run(_collect(self._async.members(max_depth)), timeout)
        return iter([(name, to_sync(node, self.timeout)) for name, node in found])

    @mirrors(AsyncGroup.keys)
    def keys(self, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.keys()), timeout))

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __len__(self) -> int:
        return len(self._run(_collect(self._async.keys()), None))

    @mirrors(AsyncGroup.group_keys)
    def group_keys(self, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.group_keys()), timeout))

    @mirrors(AsyncGroup.array_keys)
    def array_keys(self, *, timeout: float | None = None) -> Iterator[str]:
        return iter(self._run(_collect(self._async.array_keys()), timeout))

    @mirrors(AsyncGroup.groups)
    def groups(self, *, timeout: float | None = None) -> Iterator[tuple[str, Group]]:
        found = self._run(_collect(self._async.groups()), timeout)
        return iter([(name, Group(node, timeout=self.timeout)) for name, node in found])

    @mirrors(AsyncGroup.arrays)
    def arrays(self, *, timeout: float | None = None) -> Iterator[tuple[str, Array]]:
        found = self._run(_collect(self._async.arrays()), timeout)
        return iter([(name, Array(node, timeout=self.timeout)) for name, node in found])

    @mirrors(AsyncGroup.tree)
    def tree(self, level: int | None = None, *, codecs: bool = False, timeout: float | None = None) -> str:
        result: str = self._run(self._async.tree(level, codecs=codecs), timeout)
        return result

    # ---------------------------------------------------------------- creating members
    @mirrors(AsyncGroup.create_group)
    def create_group(self, name: str, *, overwrite: bool = False, timeout: float | None = None) -> Group:
        return Group(
            self._run(self._async.create_group(name, overwrite=overwrite), timeout), timeout=self.timeout
        )

    @mirrors(AsyncGroup.require_group)
    def require_group(self, name: str, *, overwrite: bool = False, timeout: float | None = None) -> Group:
        coro = self._async.require_group(name, overwrite=overwrite)
        return Group(self._run(coro, timeout), timeout=self.timeout)

    def _array(self, coro: Any, timeout: float | None) -> Array:
        node: AsyncArray = self._run(coro, timeout)
        return Array(node, timeout=self.timeout)

    @mirrors(AsyncGroup.create_dataset)
    def create_dataset(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.create_dataset(name, **kwargs), timeout)

    @mirrors(AsyncGroup.create)
    def create(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.create(name, **kwargs), timeout)

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
        return self._array(self._async.require_dataset(name, shape, dtype, exact=exact, **kwargs), timeout)

    @mirrors(AsyncGroup.zeros)
    def zeros(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.zeros(name, **kwargs), timeout)

    @mirrors(AsyncGroup.ones)
    def ones(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.ones(name, **kwargs), timeout)

    @mirrors(AsyncGroup.empty)
    def empty(self, name: str, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.empty(name, **kwargs), timeout)

    @mirrors(AsyncGroup.full)
    def full(self, name: str, fill_value: Any, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.full(name, fill_value, **kwargs), timeout)

    @mirrors(AsyncGroup.array)
    def array(self, name: str, data: Any, *, timeout: float | None = None, **kwargs: Any) -> Array:
        return self._array(self._async.array(name, data, **kwargs), timeout)

    @mirrors(AsyncGroup.update_attributes)
    def update_attributes(self, new_attributes: dict[str, Any], *, timeout: float | None = None) -> None:
        self._run(self._async.update_attributes(new_attributes), timeout)

    # ---------------------------------------------------------------- zarr-python 2 extras
    info: Forward[str] = Forward(AsyncGroup, "info")
    info_complete = mirror_method(AsyncGroup.info_complete)
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
        return lambda *args: func(*(to_sync(a, self.timeout) for a in args))

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
