"""Large arrays allocated without NumPy's transparent huge-page advice.

Why: NumPy asks the kernel (``madvise(MADV_HUGEPAGE)``) to back every allocation of 4 MiB
or more with 2 MiB pages. With the kernel's THP ``defrag`` setting at ``madvise`` (the
common default), a fault on such memory compacts memory on the spot when no free huge
page is at hand, as in a fresh process on a host that has run for a while. A read fills
its result once, front to back, so huge pages save it little TLB work and the compaction
is paid in full: a full 1 GiB read of a sharded array from memory took 5.9-6.3 CPU-s in a
fresh process with the advice and 2.9 without it, and 3.2-3.7 against 2.9-3.1 on later
reads in the same process (``benchmarks/README.md``, "Sharding"). TensorStore allocates
without the advice.

So a read's result and the pipeline's receive buffers are allocated with NumPy's advice
off (the ``huge_pages`` setting turns it back on), by switching NumPy's own toggle
(``_set_madvise_hugepage``, what ``NUMPY_MADVISE_HUGEPAGE=0`` sets at import) off around
the allocation. The toggle is process-wide: another thread's allocation in that window
goes without the advice too, which costs it nothing but the hint.
"""

from __future__ import annotations

import importlib
import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from azarr import config

__all__ = ["empty"]

#: NumPy gives the advice from this many bytes (``numpy/_core/src/multiarray/alloc.c``).
_ADVICE_FROM = 4 << 20


def _find_toggle() -> Callable[[bool], bool] | None:
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        toggle = getattr(module, "_set_madvise_hugepage", None)
        if callable(toggle):
            return toggle  # type: ignore[no-any-return]
    return None  # a NumPy without it (or not on Linux, where it is a no-op): plain allocations


_toggle = _find_toggle()
_lock = threading.Lock()


def empty(shape: tuple[int, ...] | int, dtype: Any, order: Any = "C") -> np.ndarray[Any, Any]:
    """``np.empty(shape, dtype, order)``; from 4 MiB, without NumPy's huge-page advice
    unless ``azarr.config`` ``huge_pages`` is True (see the module docstring)."""
    dtype = np.dtype(dtype)
    count = shape if isinstance(shape, int) else math.prod(shape)
    if _toggle is None or count * dtype.itemsize < _ADVICE_FROM or config.get("huge_pages"):
        return np.empty(shape, dtype=dtype, order=order)
    with _lock:
        previous = _toggle(False)
        try:
            return np.empty(shape, dtype=dtype, order=order)
        finally:
            _toggle(previous)
