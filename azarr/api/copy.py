"""``copy_store``: copy every key of a hierarchy between any two stores."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import IO, Any, Literal, NamedTuple

from azarr.api.creation import resolve_store
from azarr.core._paths import node_key, normalize_path
from azarr.errors import CopyKeyExistsError, StoreError
from azarr.metadata import ZARRAY, ZATTRS, ZGROUP, ZMETADATA
from azarr.scheduler import ProgressCallback, ProgressTracker, StoreIO, bounded_map
from azarr.storage import Store, StoreLike


class CopyResult(NamedTuple):
    """What `copy_store`, `copy` and `copy_all` did: zarr-python 2's ``(n_copied, n_skipped, n_bytes_copied)``.

    A named tuple, so it unpacks, prints and compares equal as the tuple zarr-python 2 returns.

    Attributes
    ----------
    n_copied, n_skipped : int
        Keys (or nodes) copied, and those left alone because they existed (``if_exists="skip"``).
    n_bytes_copied : int
        Bytes written to the destination.
    """

    n_copied: int
    n_skipped: int
    n_bytes_copied: int

    def __repr__(self) -> str:
        return tuple.__repr__(self)  # ``(3, 0, 800)``, as zarr-python 2 prints its result


async def copy_store(
    source: StoreLike,
    dest: StoreLike,
    *,
    source_path: str = "",
    dest_path: str = "",
    excludes: str | Sequence[str] | None = None,
    includes: str | Sequence[str] | None = None,
    flags: int = 0,
    if_exists: Literal["raise", "replace", "skip"] = "raise",
    progress: ProgressCallback | None = None,
    source_storage_options: dict[str, Any] | None = None,
    dest_storage_options: dict[str, Any] | None = None,
    dry_run: bool = False,
    log: Callable[[str], Any] | str | IO[str] | None = None,
) -> CopyResult:
    """Copy every key under ``source_path`` to ``dest_path`` in another store.

    The cloud-to-cloud migration tool of zarr-python 2's ``copy_store``:
    keys are copied as stored bytes (no decoding), concurrently under both
    stores' I/O budgets, with retries of transient errors. Metadata documents
    are written last (`_publication_waves`): a copy killed part-way leaves a
    destination whose incomplete nodes do not open, and ``azarr verify DST
    --against SRC`` lists what is missing (``docs/consistency.md``).

    Parameters
    ----------
    source, dest : Store, str, os.PathLike or MutableMapping
    source_path, dest_path : str
        Hierarchy paths to copy from and to.
    excludes : str or sequence of str, optional
        Regular expressions; keys (relative to ``source_path``) matching any are skipped.
    includes : str or sequence of str, optional
        Regular expressions; keys matching any are copied even if an ``excludes``
        pattern matches them too (zarr-python 2).
    flags : int
        `re` flags for the ``excludes`` and ``includes`` patterns.
    if_exists : {"raise", "replace", "skip"}
        What to do with keys that already exist in the destination. With
        ``"raise"`` the check happens before anything is copied.
    progress : callable, optional
        Called with a `Progress` after each key.
    dry_run : bool
        List and decide, but read and write nothing: the result counts the keys a
        real run would copy and skip (``n_bytes_copied`` is 0), as zarr-python 2's ``dry_run``.
    log : callable, str or file-like, optional
        Where to report each key: a callable taking one line, a file path (opened
        for writing) or an open text file. Lines follow zarr-python 2's
        ``copy_store``: ``"copy <key>"`` / ``"skip <key>"`` (``"<src> -> <dest>"``
        when the keys differ), then ``"all done: N copied, M skipped, B bytes copied"``
        or ``"dry run: N copied, M skipped"``. Copies run concurrently, so a real
        run logs keys as they finish, not in sorted order.

    Returns
    -------
    CopyResult
        ``(n_copied, n_skipped, n_bytes_copied)``.

    Raises
    ------
    CopyKeyExistsError
        ``if_exists="raise"`` and a destination key exists (nothing is copied).
    ValueError
        Unknown ``if_exists``.
    TypeError
        ``log`` is none of a callable, a path or a file.
    """
    if if_exists not in ("raise", "replace", "skip"):
        raise ValueError(f"if_exists must be 'raise', 'replace' or 'skip', got {if_exists!r}")
    with _LogWriter(log) as write_log:
        src = resolve_store(source, source_storage_options, read_only=True)
        dst = resolve_store(dest, dest_storage_options)
        src_root, dst_root = normalize_path(source_path), normalize_path(dest_path)
        keep = _key_filter(excludes, includes, flags)
        relative, existing = await _plan(src, dst, src_root, dst_root, keep, if_exists)
        describe = _describer(src_root, dst_root)
        if dry_run:
            for rel in sorted(relative):
                write_log(f"{'skip' if rel in existing else 'copy'} {describe(rel)}")
            n_skipped = len(existing.intersection(relative))
            write_log(f"dry run: {len(relative) - n_skipped:,} copied, {n_skipped:,} skipped")
            return CopyResult(len(relative) - n_skipped, n_skipped, 0)
        result = await _copy_keys(src, dst, src_root, dst_root, relative, existing, progress, write_log)
        write_log(
            f"all done: {result.n_copied:,} copied, {result.n_skipped:,} skipped, "
            f"{result.n_bytes_copied:,} bytes copied"
        )
        return result


def _key_filter(
    excludes: str | Sequence[str] | None, includes: str | Sequence[str] | None, flags: int
) -> Callable[[str], bool]:
    """Whether to copy a key: unless an ``excludes`` pattern matches it and no ``includes`` pattern does."""

    def compiled(patterns: str | Sequence[str] | None) -> list[re.Pattern[str]]:
        return [re.compile(p, flags) for p in ([patterns] if isinstance(patterns, str) else patterns or [])]

    excluded, included = compiled(excludes), compiled(includes)

    def keep(key: str) -> bool:
        return not any(p.search(key) for p in excluded) or any(p.search(key) for p in included)

    return keep


async def _plan(
    src: Store,
    dst: Store,
    src_root: str,
    dst_root: str,
    keep: Callable[[str], bool],
    if_exists: str,
) -> tuple[list[str], set[str]]:
    """The keys to copy (relative to ``src_root``, those ``keep`` accepts) and those already in the destination."""
    src_prefix = node_key(src_root, "")
    src_io, dst_io = StoreIO(src), StoreIO(dst)
    relative = [rel for key in await src_io.list_prefix(src_root) if keep(rel := key[len(src_prefix) :])]
    existing: set[str] = set()
    if if_exists != "replace":
        dst_prefix = node_key(dst_root, "")
        existing = {k[len(dst_prefix) :] for k in await dst_io.list_prefix(dst_root)}
        clashes = sorted(existing.intersection(relative))
        if clashes and if_exists == "raise":
            raise CopyKeyExistsError(
                f"{len(clashes)} keys already exist in {dst.url} (e.g. {node_key(dst_root, clashes[0])!r}); "
                "pass if_exists='replace' or 'skip'"
            )
    return relative, existing


async def _copy_keys(
    src: Store,
    dst: Store,
    src_root: str,
    dst_root: str,
    relative: list[str],
    existing: set[str],
    progress: ProgressCallback | None,
    write_log: Callable[[str], None],
) -> CopyResult:
    src_io, dst_io = StoreIO(src), StoreIO(dst)
    tracker = ProgressTracker(len(relative), progress)
    describe = _describer(src_root, dst_root)

    async def copy_one(rel: str) -> tuple[int, int]:
        if rel in existing:
            tracker.advance()
            write_log(f"skip {describe(rel)}")
            return 0, 0
        value = await src_io.get(node_key(src_root, rel))
        if value is None:
            raise StoreError(f"{node_key(src_root, rel)!r} vanished from {src.url} during the copy")
        async with dst_io.budget.reserve(len(value)):
            await dst_io.set(node_key(dst_root, rel), value)
        tracker.advance(len(value))
        write_log(f"copy {describe(rel)}")
        return 1, len(value)

    limit = min(src_io.budget.max_requests, dst_io.budget.max_requests)
    results: list[tuple[int, int]] = []
    for wave in _publication_waves(relative):
        results += await bounded_map(copy_one, wave, limit)
    copied = sum(c for c, _ in results)
    return CopyResult(copied, len(relative) - copied, sum(n for _, n in results))


#: Documents that make a node (or a whole hierarchy, ``.zmetadata``) open: written last.
_NODE_DOCUMENTS = frozenset({ZARRAY, ZGROUP, "zarr.json"})


def _publication_waves(keys: Sequence[str]) -> list[list[str]]:
    """``keys`` in the order a copy publishes them, as waves copied one after another.

    Chunks (and any other key) first; then the metadata documents node by node,
    deepest first, each node's ``.zattrs`` before its ``.zarray``/``.zgroup``; every
    ``.zmetadata`` last. A copy killed part-way then leaves no node that opens
    without all its chunks, no group that opens without its members, and no
    consolidated hierarchy that opens at all: a partial copy does not pass for a
    complete one (what zarr-python 2's ``copy_store``, copying in listing order, left).
    """

    def rank(key: str) -> tuple[int, int, int]:
        name = key.rpartition("/")[2]
        depth = key.count("/")
        if name == ZMETADATA:
            return 2, -depth, 0
        if name in _NODE_DOCUMENTS:
            return 1, -depth, 1
        if name == ZATTRS:
            return 1, -depth, 0
        return 0, 0, 0

    waves: dict[tuple[int, int, int], list[str]] = {}
    for key in keys:
        waves.setdefault(rank(key), []).append(key)
    return [waves[r] for r in sorted(waves)]


def _describer(src_root: str, dst_root: str) -> Callable[[str], str]:
    """zarr-python 2's label of one key: ``"src"``, or ``"src -> dest"`` when the keys differ."""

    def describe(rel: str) -> str:
        src_key, dst_key = node_key(src_root, rel), node_key(dst_root, rel)
        return src_key if src_key == dst_key else f"{src_key} -> {dst_key}"

    return describe


class _LogWriter:
    """``log=`` of `copy_store`: a callable, a path to open, or a text file; flushed per line."""

    def __init__(self, log: Callable[[str], Any] | str | IO[str] | None) -> None:
        self._file: IO[str] | None = None
        self._func: Callable[[str], Any] | None = None
        self._owned = False
        if log is None:
            pass
        elif isinstance(log, str):
            self._file, self._owned = open(log, "w"), True  # noqa: SIM115 - closed by __exit__
        elif callable(log):
            self._func = log
        elif hasattr(log, "write"):
            self._file = log
        else:
            raise TypeError(f"log must be a callable, a file path or a text file, got {type(log).__name__}")

    def __enter__(self) -> Callable[[str], None]:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._owned and self._file is not None:
            self._file.close()

    def __call__(self, line: str) -> None:
        if self._file is not None:
            print(line, file=self._file, flush=True)
        elif self._func is not None:
            self._func(line)
