"""Progress reporting for reads, writes and copies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Progress:
    """One progress report.

    Attributes
    ----------
    done : int
        Chunks (or keys, for copies) finished so far.
    total : int
        Chunks (or keys) in the operation.
    nbytes : int
        Stored bytes moved so far (compressed chunk bytes read or written).
    """

    done: int
    total: int
    nbytes: int


ProgressCallback = Callable[[Progress], Any]
"""Called with a `Progress` after every finished chunk (on stores with blocking access,
memory and local files, after every finished batch of chunks); must be cheap and never raise."""


class ProgressTracker:
    """Counts finished units of an operation and reports to a callback."""

    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.done = 0
        self.nbytes = 0
        self._callback = callback
        self._lock = threading.Lock()

    def advance(self, nbytes: int = 0) -> None:
        """Count one finished unit that moved ``nbytes`` stored bytes."""
        if self._callback is None:
            return
        with self._lock:
            self.done += 1
            self.nbytes += nbytes
            report = Progress(self.done, self.total, self.nbytes)
        self._callback(report)

    def advance_many(self, count: int, nbytes: int = 0) -> None:
        """Count ``count`` finished units that moved ``nbytes`` stored bytes in all; one report."""
        if self._callback is None or count == 0:
            return
        with self._lock:
            self.done += count
            self.nbytes += nbytes
            report = Progress(self.done, self.total, self.nbytes)
        self._callback(report)


def tqdm_progress(**tqdm_kwargs: Any) -> ProgressCallback:
    """A progress callback drawing a tqdm bar (``pip install tqdm``).

    Examples
    --------
    >>> data = await arr.get_basic_selection(..., progress=tqdm_progress(desc="read"))  # doctest: +SKIP

    Parameters
    ----------
    **tqdm_kwargs
        Passed to ``tqdm.tqdm`` (``desc``, ``unit``, ``leave``, ...).

    Raises
    ------
    ImportError
        tqdm is not installed.
    """
    from tqdm.auto import tqdm

    bar: Any = None

    def update(report: Progress) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=report.total, unit="chunk", **tqdm_kwargs)
        bar.update(report.done - bar.n)
        bar.set_postfix(MiB=f"{report.nbytes / 2**20:.1f}", refresh=False)
        if report.done >= report.total:
            bar.close()

    return update
