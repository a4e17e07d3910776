"""A rich progress bar fed by azarr's progress callbacks: chunks, bytes, rate and ETA."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from azarr.cli._format import human_bytes
from azarr.scheduler import Progress as Report
from azarr.scheduler import ProgressCallback


def _ignore(report: Report) -> None:
    """The callback when no bar is shown."""


@contextmanager
def progress_bar(description: str, *, show: bool | None, unit: str = "chunks") -> Iterator[ProgressCallback]:
    """Yield a `ProgressCallback` drawing a bar on stderr.

    Parameters
    ----------
    description : str
        Label left of the bar.
    show : bool or None
        True: always draw (also when stderr is not a terminal); False: never;
        None: only when stderr is a terminal.
    unit : str
        What the callback counts (``"chunks"``, ``"keys"``).
    """
    if show is False or (show is None and not sys.stderr.isatty()):
        yield _ignore
        return
    # An explicit --progress draws into pipes and log files too (force_terminal=True); by default
    # rich decides from the stream. force_terminal=False would mean "never a terminal": rich
    # would then print nothing live even on a real terminal.
    console = Console(file=sys.stderr, force_terminal=True if show else None)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TextColumn("{task.fields[nbytes]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    start = time.monotonic()
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task(description, total=None, nbytes="0 B", rate="")

        def update(report: Report) -> None:
            elapsed = max(time.monotonic() - start, 1e-9)
            bar.update(
                task,
                completed=report.done,
                total=report.total,
                nbytes=human_bytes(report.nbytes),
                rate=f"{human_bytes(report.nbytes / elapsed)}/s",
            )

        yield update
