"""zarr-python 2's top-level functions (``open_array``, ``zeros``, ``copy_store``, ...), blocking.

Each is generated from the coroutine of the same name in `azarr.api`: same
parameters plus a keyword-only ``timeout`` (seconds), same docstring, the same
coroutine run on the I/O loop thread. Sync arrays/groups passed in (``zeros_like(z)``)
are unwrapped; arrays/groups returned are wrapped (`azarr.sync.Array` /
`azarr.sync.Group`, whose default ``timeout`` is the one given here).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any

from azarr import api
from azarr.sync._array import Array
from azarr.sync._group import Group
from azarr.sync._loop import run
from azarr.sync._mirror import mirrors, to_async, to_sync, with_timeout


def mirror_function(fn: Callable[..., Coroutine[Any, Any, Any]]) -> Callable[..., Any]:
    """The synchronous twin of coroutine function ``fn`` (see the module docstring)."""

    @mirrors(fn)
    def sync(*args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        coro = fn(*(to_async(a) for a in args), **{k: to_async(v) for k, v in kwargs.items()})
        return to_sync(run(coro, timeout), timeout)

    functools.update_wrapper(sync, fn, assigned=("__module__", "__name__", "__qualname__"), updated=())
    sync.__module__ = __name__
    sync.__signature__ = with_timeout(inspect.signature(fn))  # type: ignore[attr-defined]
    return sync


open_array = mirror_function(api.open_array)
open_group = mirror_function(api.open_group)
open = mirror_function(api.open)
open_consolidated = mirror_function(api.open_consolidated)
group = mirror_function(api.group)
create = mirror_function(api.create)
empty = mirror_function(api.empty)
zeros = mirror_function(api.zeros)
ones = mirror_function(api.ones)
full = mirror_function(api.full)
array = mirror_function(api.array)
empty_like = mirror_function(api.empty_like)
zeros_like = mirror_function(api.zeros_like)
ones_like = mirror_function(api.ones_like)
full_like = mirror_function(api.full_like)
consolidate_metadata = mirror_function(api.consolidate_metadata)
copy_store = mirror_function(api.copy_store)
contains_array = mirror_function(api.contains_array)
contains_group = mirror_function(api.contains_group)
copy = mirror_function(api.copy)
copy_all = mirror_function(api.copy_all)
get_dimension_names = mirror_function(api.get_dimension_names)
getsize = mirror_function(api.getsize)
group_dimensions = mirror_function(api.group_dimensions)
_load = mirror_function(api.load)
open_like = mirror_function(api.open_like)
open_zarr2 = mirror_function(api.open_zarr2)
rename = mirror_function(api.rename)
rmdir = mirror_function(api.rmdir)
_save = mirror_function(api.save)
_save_array = mirror_function(api.save_array)
_save_group = mirror_function(api.save_group)
set_dimension_names = mirror_function(api.set_dimension_names)
tree = mirror_function(api.tree)


def _returns_none(node_returning: Callable[..., Any]) -> Callable[..., None]:
    """``node_returning`` (a twin of ``save*``) made to return None, as zarr-python 2's ``save*`` do."""

    @functools.wraps(node_returning)
    def sync(*args: Any, **kwargs: Any) -> None:
        node_returning(*args, **kwargs)

    return sync


save = _returns_none(_save)
save_array = _returns_none(_save_array)
save_group = _returns_none(_save_group)


def _lazy_for_groups(eager: Callable[..., Any]) -> Callable[..., Any]:
    """The twin of `azarr.load` answering a group with a `LazyLoader`, as zarr-python 2's ``load``."""

    @functools.wraps(eager)
    def sync(
        store: Any,
        *,
        path: str | None = None,
        storage_options: dict[str, Any] | None = None,
        zarr_version: int | None = None,
        timeout: float | None = None,
    ) -> Any:
        opened = open(
            store,
            mode="r",
            path=path,
            storage_options=storage_options,
            zarr_version=zarr_version,
            timeout=timeout,
        )
        node = opened
        if isinstance(node, Group):
            return LazyLoader(node)
        return node[...]

    sync.__doc__ = f"{eager.__doc__}\n    In `azarr.sync` a group gives a `LazyLoader`, which reads an array when indexed.\n"
    return sync


load = _lazy_for_groups(_load)


class LazyLoader(Mapping[str, Any]):
    """What `load` gives for a group: its arrays by name, each read when indexed (zarr-python 2 ``LazyLoader``).

    Parameters
    ----------
    group : Group
        The group whose direct member arrays are offered.
    """

    def __init__(self, group: Group) -> None:
        self._group = group
        self._names = sorted(group.array_keys())

    def __getitem__(self, name: str) -> Any:
        if name not in self._names:
            raise KeyError(name)
        array = self._group[name]
        assert isinstance(array, Array)  # the names are array_keys()
        return array[...]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __repr__(self) -> str:
        return f"<LazyLoader: {', '.join(self._names)}>"
