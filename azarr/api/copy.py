"""``copy_store``: copy every key of a hierarchy between any two stores."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from azarr.api.creation import resolve_store
from azarr.core._paths import node_key, normalize_path
from azarr.errors import KeyExistsError, StoreError
from azarr.scheduler import ProgressCallback, ProgressTracker, StoreIO, bounded_map
from azarr.storage import StoreLike


@dataclass(frozen=True)
class CopyResult:
    """What :func:`copy_store` did.

    Attributes
    ----------
    n_copied, n_skipped : int
        Keys copied, and keys left alone because they existed (``if_exists="skip"``).
    n_bytes_copied : int
        Bytes written to the destination.
    """

    n_copied: int
    n_skipped: int
    n_bytes_copied: int

    def __iter__(self) -> Any:
        # Unpacks like zarr-python 2's (n_copied, n_skipped, n_bytes_copied) tuple.
        return iter((self.n_copied, self.n_skipped, self.n_bytes_copied))


async def copy_store(
    source: StoreLike,
    dest: StoreLike,
    *,
    source_path: str = "",
    dest_path: str = "",
    excludes: str | Sequence[str] | None = None,
    if_exists: Literal["raise", "replace", "skip"] = "raise",
    progress: ProgressCallback | None = None,
    source_storage_options: dict[str, Any] | None = None,
    dest_storage_options: dict[str, Any] | None = None,
) -> CopyResult:
    """Copy every key under ``source_path`` to ``dest_path`` in another store.

    The cloud-to-cloud migration tool of zarr-python 2's ``copy_store``:
    keys are copied as stored bytes (no decoding), concurrently under both
    stores' I/O budgets, with retries of transient errors.

    Parameters
    ----------
    source, dest : Store, str, os.PathLike or MutableMapping
    source_path, dest_path : str
        Hierarchy paths to copy from and to.
    excludes : str or sequence of str, optional
        Regular expressions; keys (relative to ``source_path``) matching any are skipped.
    if_exists : {"raise", "replace", "skip"}
        What to do with keys that already exist in the destination. With
        ``"raise"`` the check happens before anything is copied.
    progress : callable, optional
        Called with a :class:`~azarr.scheduler.Progress` after each key.

    Returns
    -------
    CopyResult
        ``(n_copied, n_skipped, n_bytes_copied)``.

    Raises
    ------
    KeyExistsError
        ``if_exists="raise"`` and a destination key exists (nothing is copied).
    ValueError
        Unknown ``if_exists``.
    """
    if if_exists not in ("raise", "replace", "skip"):
        raise ValueError(f"if_exists must be 'raise', 'replace' or 'skip', got {if_exists!r}")
    src = resolve_store(source, source_storage_options, read_only=True)
    dst = resolve_store(dest, dest_storage_options)
    src_root, dst_root = normalize_path(source_path), normalize_path(dest_path)
    src_prefix = node_key(src_root, "")
    patterns = [re.compile(p) for p in ([excludes] if isinstance(excludes, str) else excludes or [])]
    src_io, dst_io = StoreIO(src), StoreIO(dst)
    relative = [
        key[len(src_prefix) :]
        for key in await src_io.list_prefix(src_root)
        if not any(p.search(key[len(src_prefix) :]) for p in patterns)
    ]
    existing: set[str] = set()
    if if_exists != "replace":
        dst_prefix = node_key(dst_root, "")
        existing = {k[len(dst_prefix) :] for k in await dst_io.list_prefix(dst_root)}
        clashes = sorted(existing.intersection(relative))
        if clashes and if_exists == "raise":
            raise KeyExistsError(
                f"{len(clashes)} keys already exist in {dst.url} (e.g. {node_key(dst_root, clashes[0])!r}); "
                "pass if_exists='replace' or 'skip'"
            )
    tracker = ProgressTracker(len(relative), progress)

    async def copy_one(rel: str) -> tuple[int, int]:
        if rel in existing:
            tracker.advance()
            return 0, 0
        value = await src_io.get(node_key(src_root, rel))
        if value is None:
            raise StoreError(f"{node_key(src_root, rel)!r} vanished from {src.url} during the copy")
        async with dst_io.budget.reserve(len(value)):
            await dst_io.set(node_key(dst_root, rel), value)
        tracker.advance(len(value))
        return 1, len(value)

    limit = min(src_io.budget.max_requests, dst_io.budget.max_requests)
    results = await bounded_map(copy_one, relative, limit)
    copied = sum(c for c, _ in results)
    return CopyResult(copied, len(relative) - copied, sum(n for _, n in results))
