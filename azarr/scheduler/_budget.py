"""Per-store request budget: how many requests may be in flight on one store.

The budget belongs to the store, not to a call: every array, group and
concurrent task using the same store shares it, so ten dask tasks reading ten
arrays never open more than ``max_requests`` connections between them (the
zarr-python 3 failure mode where each call builds its own semaphore).
asyncio primitives are bound to one event loop, so the semaphore is kept per
running loop; the limit itself is shared.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType

from azarr import config
from azarr.storage import Store


class RequestBudget:
    """Limit of concurrent store requests, shared by every user of one store.

    Parameters
    ----------
    max_requests : int
        Requests in flight at most (>= 1).
    """

    def __init__(self, max_requests: int) -> None:
        if max_requests < 1:
            raise ValueError(f"max_requests must be >= 1, got {max_requests}")
        self.max_requests = max_requests
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.max_requests)
        return sem

    async def __aenter__(self) -> None:
        await self._semaphore().acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._semaphore().release()

    def __repr__(self) -> str:
        return f"RequestBudget(max_requests={self.max_requests})"


_budgets: weakref.WeakKeyDictionary[Store, RequestBudget] = weakref.WeakKeyDictionary()


def budget_for(store: Store) -> RequestBudget:
    """The request budget of ``store``, created on first use.

    Its size is ``store.max_concurrency`` if the store sets one, else
    ``azarr.config`` ``max_concurrency_local`` for local/memory stores and
    ``max_concurrency`` for remote ones.
    """
    store = store.budget_owner
    budget = _budgets.get(store)
    if budget is None:
        limit = getattr(store, "max_concurrency", None)
        if limit is None:
            limit = config.get("max_concurrency_local" if store.is_local else "max_concurrency")
        budget = _budgets[store] = RequestBudget(int(limit))
    return budget
