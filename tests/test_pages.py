"""Large read results and receive buffers without NumPy's huge-page advice (``pipeline/_pages.py``).

The kernel records ``madvise(MADV_HUGEPAGE)`` as the ``hg`` flag of the mapping
(``/proc/self/smaps`` ``VmFlags``): these tests read it back for arrays from
`azarr.pipeline._pages.empty`, a full read's result and a pooled receive buffer. Every
array is 64 MiB: above glibc's largest dynamic ``mmap`` threshold (32 MiB), so in a fresh
interpreter each is a mapping of its own. Each check runs in a new interpreter
(`_in_a_fresh_process`): in the test process, glibc serves a 64 MiB request from a free
chunk of the heap when an earlier test grew it that far, and that heap memory may carry
the advice NumPy gave an earlier allocation there.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.pipeline import _pages
from azarr.pipeline._buffers import BufferPool
from azarr.storage import MemoryStore

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or _pages._toggle is None or not Path("/proc/self/smaps").exists(),
    reason="NumPy's huge-page advice exists on Linux only",
)

MIB = 1 << 20
BIG = 64 * MIB


def _advised(arr: Any) -> bool:
    """Whether the mapping holding the middle of ``arr``'s memory has the huge-page advice."""
    address = np.asarray(arr).ctypes.data + np.asarray(arr).nbytes // 2
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(" ", 1)[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and line.startswith("VmFlags:"):
            return "hg" in line.split()[1:]
    raise AssertionError(f"no mapping holds address {address:#x}")


def _numpy_advises() -> bool:
    """Whether NumPy currently gives the advice (``NUMPY_MADVISE_HUGEPAGE``, its toggle)."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):
        getter = getattr(sys.modules.get(name), "_get_madvise_hugepage", None)
        if getter is not None:
            return bool(getter())
    return False


def _in_a_fresh_process(call: str) -> None:
    """Run ``call`` (an expression using this module's names) in a new interpreter."""
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
        import test_pages
        {call}
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]


def test_large_arrays_without_advice_small_ones_untouched() -> None:
    _in_a_fresh_process("test_pages.check_large_arrays_without_advice()")


def test_huge_pages_setting_keeps_the_advice() -> None:
    if not _numpy_advises():
        pytest.skip("NumPy's huge-page advice is off in this process (NUMPY_MADVISE_HUGEPAGE=0)")
    _in_a_fresh_process("test_pages.check_huge_pages_setting()")


def test_read_result_and_receive_buffer() -> None:
    _in_a_fresh_process("asyncio.run(test_pages.check_read_result_and_receive_buffer())")


def check_large_arrays_without_advice() -> None:
    big = _pages.empty((64, MIB), np.uint8)
    assert big.shape == (64, MIB) and big.dtype == np.uint8 and big.flags.c_contiguous
    assert not _advised(big)
    f_order = _pages.empty((2048, 4096), "<f8", "F")
    assert f_order.flags.f_contiguous and not _advised(f_order)
    assert _pages.empty(16, "i4").shape == (16,)
    # NumPy's own toggle is back as it was: plain np.empty still gets the advice.
    if _numpy_advises():
        assert _advised(np.empty(BIG, np.uint8))


def check_huge_pages_setting() -> None:
    with azarr.config.set(huge_pages=True):
        assert _advised(_pages.empty(BIG, np.uint8))
    assert not _advised(_pages.empty(BIG, np.uint8))


async def check_read_result_and_receive_buffer() -> None:
    arr = await azarr.create(
        (4096, 4096), chunks=(512, 512), shards=(2048, 2048), dtype="f4", store=MemoryStore(), zarr_format=3
    )
    await arr.set_basic_selection((slice(0, 512), slice(0, 512)), 1.0)
    result = await arr.get_basic_selection(...)  # one inner chunk stored, the rest fill value
    assert result.shape == (4096, 4096) and result[0, 0] == 1.0 and result[-1, -1] == 0.0
    assert not _advised(result)
    pool = BufferPool()
    view = pool.acquire(BIG)
    assert not _advised(np.frombuffer(view, dtype=np.uint8))
    pool.release(view)
