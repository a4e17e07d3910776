"""``azarr verify DST --against SRC`` (or ``azarr verify SRC DST``): is DST a whole copy of SRC?

Every key under the path in SRC must be in DST with the same bytes, and DST must
hold no key SRC lacks. A copy killed part-way (``azarr cp``, `azarr.copy_store`)
therefore never verifies clean, even when what it copied so far opens and
parses. Values are compared as stored (no decoding), concurrently under both
stores' budgets, each pair's bytes reserved in DST's byte budget while compared.
"""

from __future__ import annotations

from collections.abc import Callable

from azarr.scheduler import ProgressCallback, ProgressTracker, StoreIO, bounded_map
from azarr.storage import Store


async def compare_stores(
    source: Store,
    dest: Store,
    path: str,
    problem: Callable[[str, str], None],
    progress: ProgressCallback | None = None,
) -> int:
    """Report, through ``problem(key, text)``, each key missing from ``dest``, differing, or extra.

    Parameters
    ----------
    source, dest : Store
        The original and its copy.
    path : str
        Hierarchy path compared (the same in both).
    problem : callable
        Called with the destination key and what is wrong with it.
    progress : callable, optional
        Called with a `Progress` after each key compared.

    Returns
    -------
    int
        Keys compared (present in both).
    """
    src_io, dst_io = StoreIO(source), StoreIO(dest)
    src_keys = set(await src_io.list_prefix(path))
    dst_keys = set(await dst_io.list_prefix(path))
    for key in sorted(src_keys - dst_keys):
        problem(key, f"missing: in {source.url} but not in {dest.url}")
    for key in sorted(dst_keys - src_keys):
        problem(key, f"extra: in {dest.url} but not in {source.url}")
    both = sorted(src_keys & dst_keys)
    tracker = ProgressTracker(len(both), progress)

    async def compare(key: str) -> None:
        original = await src_io.get(key)
        size = 0 if original is None else len(original)
        async with dst_io.budget.reserve(size):
            copied = await dst_io.get(key)
            if original is None or copied is None:
                problem(key, "vanished while it was compared")
            elif copied != original:
                problem(key, f"differs: {len(copied)} bytes here, {len(original)} in {source.url}")
        tracker.advance(size)

    limit = min(src_io.budget.max_requests, dst_io.budget.max_requests)
    await bounded_map(compare, both, limit)
    return len(both)
