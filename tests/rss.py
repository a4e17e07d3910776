"""Peak resident-set-size measurement for the hardening tests (Linux /proc).

``VmHWM`` in ``/proc/self/status`` is the process's peak RSS; writing ``5`` to
``/proc/self/clear_refs`` resets it to the current RSS (Linux >= 4.0), so the
growth of the peak over a block of code can be measured without psutil.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

MiB = 2**20


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """The process's peak RSS so far, in bytes (VmHWM, else ru_maxrss)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib * 1024


@dataclass
class RssGrowth:
    """Peak RSS growth (bytes) over a ``with measure_rss()`` block; set when the block ends."""

    bytes: int = 0


@contextmanager
def measure_rss() -> Iterator[RssGrowth]:
    """Measure how far peak RSS rose above the RSS at entry during the block."""
    gc.collect()
    reset = _reset_peak()
    start_kib = _status_kib("VmRSS") if reset else None
    start = start_kib * 1024 if start_kib is not None else peak_rss_bytes()
    growth = RssGrowth()
    try:
        yield growth
    finally:
        growth.bytes = max(0, peak_rss_bytes() - start)
