"""``node.attrs`` of the sync classes: a mutable mapping whose changes are written at once."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from azarr.core import Attributes as AsyncAttributes
from azarr.sync._mirror import mirrors
from azarr.sync._owner import Runner


class Attributes(MutableMapping[str, Any]):
    """zarr-python 2's ``Attributes``: reads use the loaded copy, every change rewrites ``.zattrs``.

    ``attrs["units"] = "K"``, ``del attrs["units"]`` and ``attrs.update(...)`` each
    write the whole document once (batch several changes in one ``update``).

    Parameters
    ----------
    inner : azarr.Attributes
        The async attributes of the node.
    owner : Array or Group
        The node whose default ``timeout`` applies.
    """

    def __init__(self, inner: AsyncAttributes, owner: Runner) -> None:
        self._inner = inner
        self._owner = owner

    @property
    def key(self) -> str:
        """The ``.zattrs`` key."""
        return self._inner.key

    @property
    def read_only(self) -> bool:
        """True if changes are refused."""
        return self._inner.read_only

    def __getitem__(self, name: str) -> Any:
        return self._inner[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)

    def __repr__(self) -> str:
        return repr(self._inner)

    def __setitem__(self, name: str, value: Any) -> None:
        self._owner._run(self._inner.set(name, value), None)

    def __delitem__(self, name: str) -> None:
        self._owner._run(self._inner.delete(name), None)

    def asdict(self) -> dict[str, Any]:
        """A copy of the attributes as a plain dict (zarr-python 2 ``attrs.asdict()``)."""
        return self._inner.asdict()

    @mirrors(AsyncAttributes.refresh)
    def refresh(self, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.refresh(), timeout)

    @mirrors(AsyncAttributes.update)
    def update(self, *args: Mapping[str, Any], timeout: float | None = None, **kwargs: Any) -> None:  # type: ignore[override]
        self._owner._run(self._inner.update(*args, **kwargs), timeout)

    @mirrors(AsyncAttributes.put)
    def put(self, values: Mapping[str, Any], *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.put(values), timeout)

    @mirrors(AsyncAttributes.set)
    def set(self, name: str, value: Any, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.set(name, value), timeout)

    @mirrors(AsyncAttributes.delete)
    def delete(self, name: str, *, timeout: float | None = None) -> None:
        self._owner._run(self._inner.delete(name), timeout)
