"""Helpers the sync classes share: docstrings taken from the async twin, forwarded properties,
and the conversions between async and sync nodes at the call boundary."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, Generic, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: The keyword every synchronous method adds to its async twin's signature.
TIMEOUT_DOC = (
    "Synchronous form of the coroutine of the same name: blocks until done. ``timeout`` "
    "(seconds, keyword-only; default the object's ``timeout``, None = no limit) cancels the "
    "coroutine and its requests on expiry (`azarr.sync.SyncTimeoutError`)."
)


def mirrors(async_fn: Callable[..., Any]) -> Callable[[F], F]:
    """Give the decorated sync function ``async_fn``'s docstring and remember its twin.

    ``__azarr_async__`` lets the tests check that every public coroutine has a sync
    counterpart with the same signature (plus ``timeout``) and docstring summary.
    """

    def decorate(fn: F) -> F:
        doc = async_fn.__doc__ or ""
        fn.__doc__ = f"{doc.rstrip()}\n\n    Notes\n    -----\n    {TIMEOUT_DOC}\n" if doc else TIMEOUT_DOC
        fn.__azarr_async__ = async_fn  # type: ignore[attr-defined]
        return fn

    return decorate


class Forward(Generic[T]):
    """A read-only property answered by the wrapped async node (no I/O), with its docstring."""

    def __init__(self, owner: type, name: str) -> None:
        self.name = name
        self.__doc__ = getattr(owner, name).__doc__

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Forward[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> Forward[T] | T:
        if obj is None:
            return self
        value: T = getattr(obj._async, self.name)  # type: ignore[attr-defined]
        return value


class MetadataForward(Forward[T]):
    """A `Forward` of a value from ``.zarray``: reread first when the array does not cache metadata.

    zarr-python 2's ``cache_metadata=False`` rereads ``.zarray`` before answering ``z.shape``
    & co, so another process's resize is seen at once.
    """

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> MetadataForward[T]: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> T: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> MetadataForward[T] | T:
        if obj is None:
            return self
        obj._refresh_if_uncached()  # type: ignore[attr-defined]
        value: T = getattr(obj._async, self.name)  # type: ignore[attr-defined]
        return value


def with_timeout(signature: inspect.Signature) -> inspect.Signature:
    """``signature`` with a keyword-only ``timeout=None`` before any ``**kwargs``."""
    params = list(signature.parameters.values())
    timeout = inspect.Parameter(
        "timeout", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="float | None"
    )
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    params.insert(at, timeout)
    return signature.replace(parameters=params, return_annotation=inspect.Signature.empty)


async def _collect(items: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in items]


def _sync_value(value: Any, timeout: float | None) -> Any:
    """Nodes in ``value`` (alone or in a ``(name, node)`` pair) as their sync wrappers."""
    if isinstance(value, tuple):
        return tuple(to_sync(v, timeout) for v in value)
    return to_sync(value, timeout)


def mirror_method(async_fn: Callable[..., Any]) -> Callable[..., Any]:
    """The blocking twin of an async method of ``AsyncArray``/``AsyncGroup``.

    Same parameters plus keyword-only ``timeout``, same docstring; sync nodes passed
    in are unwrapped, nodes returned are wrapped. An async generator method
    (``islice``, ``visit...``) returns a list of what it yields. For the methods whose
    sync form needs no more than that; the others are written out in the classes.
    """
    is_generator = inspect.isasyncgenfunction(async_fn)
    name = async_fn.__name__

    @mirrors(async_fn)
    def sync(self: Any, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        call = getattr(self._async, name)(
            *(to_async(a) for a in args), **{k: to_async(v) for k, v in kwargs.items()}
        )
        result = self._run(_collect(call) if is_generator else call, timeout)
        if is_generator:
            return [_sync_value(item, self.timeout) for item in result]
        return _sync_value(result, self.timeout)

    sync.__name__ = sync.__qualname__ = name
    sync.__signature__ = with_timeout(inspect.signature(async_fn))  # type: ignore[attr-defined]
    return sync


def to_sync(node: Any, timeout: float | None = None) -> Any:
    """An `AsyncArray` / `AsyncGroup` as its sync wrapper; anything else as is."""
    from azarr.core import AsyncArray, AsyncGroup
    from azarr.sync._array import Array
    from azarr.sync._group import Group

    if isinstance(node, AsyncArray):
        return Array(node, timeout=timeout)
    if isinstance(node, AsyncGroup):
        return Group(node, timeout=timeout)
    return node


def to_async(value: Any) -> Any:
    """A sync `Array` / `Group` / store as the async node or store it wraps; anything else as is."""
    from azarr.sync._array import Array
    from azarr.sync._group import Group
    from azarr.sync._stores import Store

    if isinstance(value, Array):
        return value.async_array
    if isinstance(value, Group):
        return value.async_group
    if isinstance(value, Store):
        return value.async_store
    return value
