"""Per-key locks for read-modify-writes in this process: they queue instead of fighting.

Two tasks of one process updating the same chunk (or shard) would otherwise both read,
both merge and then lose a conditional write to each other over the network; with one
lock per (event loop, store spec, key) they take turns. Entries vanish with their last
holder.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

__all__ = ["key_lock"]

_locks: weakref.WeakValueDictionary[tuple[Any, ...], asyncio.Lock] = weakref.WeakValueDictionary()


def key_lock(budget_key: Any, key: str) -> asyncio.Lock:
    """The lock of ``key`` in the store with ``budget_key`` (its spec), on the running loop."""
    ident = (asyncio.get_running_loop(), budget_key, key)
    lock = _locks.get(ident)
    if lock is None:
        lock = _locks[ident] = asyncio.Lock()
    return lock
