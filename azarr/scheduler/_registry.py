"""What the scheduler keeps per store spec (budgets, counters), bounded.

A process that makes many stores (a `MemoryStore` or a `LocalStore` of a temporary
directory per request or per test) has a spec for each. Kept for the life of the
process, their budgets and counters grew its memory by ~15 KiB per store, without end
(the hostile-input fuzzer's 50,000 stores: 331 MiB). A `SpecRegistry` keeps an object
while anything uses it (an open array's `StoreIO`, a caller holding it), plus the
``keep`` most recently looked up ones, so a store opened again after its last array
went (one URL opened per request, one after another) finds its adaptive limit and
counters as it left them; and, pinned, those `set_budget` configured, whatever else the
process opens.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from azarr.storage import StoreSpec

__all__ = ["SpecRegistry"]

T = TypeVar("T")


class SpecRegistry(Generic[T]):
    """Objects by store spec: alive while used, the ``keep`` most recently looked up, or pinned.

    Thread-safe (a lock per registry; `after_fork` renews it in a forked child).
    """

    def __init__(self, keep: int = 256) -> None:
        self.keep = keep
        self._live: weakref.WeakValueDictionary[StoreSpec, T] = weakref.WeakValueDictionary()
        self._recent: OrderedDict[StoreSpec, T] = OrderedDict()
        self._pinned: dict[StoreSpec, T] = {}
        self._lock = threading.Lock()

    def get(self, key: StoreSpec) -> T | None:
        """The object of ``key`` if one is kept (counted as a use)."""
        with self._lock:
            value = self._live.get(key)
            if value is not None:
                self._touch(key, value)
            return value

    def get_or_create(self, key: StoreSpec, create: Callable[[], T]) -> T:
        """The object of ``key``, made by ``create()`` (under the lock) if none is kept."""
        with self._lock:
            value = self._live.get(key)
            if value is None:
                value = self._live[key] = create()
            self._touch(key, value)
            return value

    def pin(self, key: StoreSpec, value: T) -> None:
        """Keep ``value`` for ``key`` for the life of the process."""
        with self._lock:
            self._live[key] = value
            self._pinned[key] = value

    def values(self) -> list[T]:
        """Every object kept now."""
        with self._lock:
            return list(self._live.values())

    def after_fork(self) -> None:
        """A new lock: another thread of the parent may have held this one at the fork."""
        self._lock = threading.Lock()

    def _touch(self, key: StoreSpec, value: T) -> None:
        recent = self._recent
        recent[key] = value
        recent.move_to_end(key)
        while len(recent) > self.keep:
            recent.popitem(last=False)
