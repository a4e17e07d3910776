"""Local reads ahead: files opened early and handed to the kernel's readahead.

`LocalStore.read_ahead_blocking` opens the files a thread reads next and keeps them open for
that thread's next reads of those keys (the chunk pipeline's batched jobs call it). These
tests pin down what it must not change: the values read, missing keys, key validation,
``confine_reads`` (no read ahead through the plain path, symbolic links still refused), no
descriptor outliving the job, and a file replaced after its job read the new value.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import azarr
from azarr.errors import InvalidKeyError, PermissionDeniedError
from azarr.pipeline import _batched
from azarr.storage import LocalStore, MemoryStore


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


pytestmark = pytest.mark.skipif(
    not LocalStore.reads_ahead or not os.path.isdir("/proc/self/fd"),
    reason="needs posix_fadvise and /proc/self/fd (Linux)",
)


def test_reads_ahead_then_reads_the_same_values(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    values = {f"c/{i}": bytes([i]) * (100 + i) for i in range(20)}
    for key, value in values.items():
        store.set_blocking(key, value)
    before = _open_fds()
    store.read_ahead_blocking([*values, "c/missing"])
    assert _open_fds() == before + len(values)  # the missing key is skipped
    buffer = bytearray(len(values["c/1"]))
    assert store.readinto_blocking("c/1", [buffer], len(buffer)) is True
    assert bytes(buffer) == values["c/1"]
    for key in list(values)[2:]:
        assert store.get_blocking(key) == values[key]
    assert store.get_blocking("c/missing") is None
    assert _open_fds() == before + 1  # c/0 was read ahead and not read yet
    store.end_read_ahead_blocking()
    assert _open_fds() == before
    assert store.get_blocking("c/0") == values["c/0"]  # read without the descriptor, opened again
    store.end_read_ahead_blocking()  # nothing left: a no-op


def test_read_ahead_is_per_thread(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.set_blocking("k", b"old")
    store.read_ahead_blocking(["k"])
    found: list[bytes | None] = []
    store.set_blocking("k", b"new")  # replaced by rename: another thread reads the new file
    worker = threading.Thread(target=lambda: found.append(store.get_blocking("k")))
    worker.start()
    worker.join()
    assert found == [b"new"]
    # This thread reads the file it opened ahead, as a read started then would have.
    assert store.get_blocking("k") == b"old"
    assert store.get_blocking("k") == b"new"


def test_ended_read_ahead_reads_nothing_stale(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.set_blocking("k", b"old")
    store.read_ahead_blocking(["k"])
    store.end_read_ahead_blocking()
    store.set_blocking("k", b"new")
    assert store.get_blocking("k") == b"new"


def test_read_ahead_validates_keys(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    before = _open_fds()
    with pytest.raises(InvalidKeyError):
        store.read_ahead_blocking(["ok", "../outside"])
    assert _open_fds() == before


def test_read_ahead_keeps_confined_reads_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "0").write_bytes(b"secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "c").symlink_to(outside)
    store = LocalStore(root, confine_reads=True)
    before = _open_fds()
    store.read_ahead_blocking(["c/0"])
    assert _open_fds() == before  # the checked path does not read ahead
    with pytest.raises(PermissionDeniedError):
        store.get_blocking("c/0")


def test_stores_without_read_ahead_ignore_it() -> None:
    store = MemoryStore()
    assert not store.reads_ahead
    store.read_ahead_blocking(["a", "b"])
    store.end_read_ahead_blocking()


@pytest.mark.parametrize("compressor", ["default", None])
async def test_batched_reads_leave_no_descriptor_open(
    tmp_path: Path, compressor: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    advised: list[str] = []
    read_ahead = LocalStore._read_ahead_blocking

    def spy(self: LocalStore, keys: Sequence[str]) -> None:
        advised.extend(keys)
        read_ahead(self, keys)

    monkeypatch.setattr(LocalStore, "_read_ahead_blocking", spy)
    monkeypatch.setattr(_batched, "_COLD_READ_SECONDS", -1.0)  # every read "from the disk": hints at once
    arr = await azarr.create((40, 60), chunks=(4, 6), dtype="i4", compressor=compressor, store=store)
    values = np.arange(40 * 60, dtype="i4").reshape(40, 60)
    await arr.setitem(..., values)
    store.delete_blocking("0.0")  # a missing chunk: read as the fill value
    values[:4, :6] = 0
    before = _open_fds()
    np.testing.assert_array_equal(await arr.getitem(...), values)
    np.testing.assert_array_equal(await arr.getitem((slice(3, 37), slice(5, 55))), values[3:37, 5:55])
    assert _open_fds() == before
    assert "1.1" in advised  # the jobs did read ahead


async def test_small_chunks_read_without_hints_while_reads_are_fast(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    advised: list[str] = []
    monkeypatch.setattr(LocalStore, "_read_ahead_blocking", lambda self, keys: advised.extend(keys))
    monkeypatch.setattr(_batched, "_COLD_READ_SECONDS", 60.0)  # no read counts as one from the disk
    values = np.arange(40 * 60, dtype="i4").reshape(40, 60)
    arr = await azarr.array(values, chunks=(4, 6), store=store, path="small")
    np.testing.assert_array_equal(await arr.getitem(...), values)
    assert advised == []
    large = await azarr.array(np.ones((64, 8192)), chunks=(1, 8192), store=store, path="large")
    np.testing.assert_array_equal(await large.getitem(...), 1.0)
    # 64 KiB chunks: hinted from the start, whatever the reads take.
    assert len(set(advised)) > 32 and all(key.startswith("large/") for key in advised)


def test_read_ahead_holds_at_most_its_descriptor_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from azarr.storage import _local

    budget = _local._DescriptorBudget()
    budget.free = 3
    monkeypatch.setattr(_local, "_AHEAD_BUDGET", budget)
    store = LocalStore(tmp_path)
    for i in range(6):
        store.set_blocking(f"k{i}", b"v%d" % i)
    before = _open_fds()
    store.read_ahead_blocking([f"k{i}" for i in range(6)])
    assert _open_fds() == before + 3 and budget.free == 0
    assert store.get_blocking("k0") == b"v0"  # one consumed: back to the budget at the next call
    store.read_ahead_blocking(["k3", "k4"])
    assert _open_fds() == before + 3 and budget.free == 0
    assert [store.get_blocking(f"k{i}") for i in range(6)] == [b"v%d" % i for i in range(6)]
    store.end_read_ahead_blocking()
    assert _open_fds() == before and budget.free == 3


async def test_jobs_of_large_chunks_read_ahead_into_the_next_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path)
    calls: list[list[str]] = []
    read_ahead = LocalStore._read_ahead_blocking

    def spy(self: LocalStore, keys: Sequence[str]) -> None:
        calls.append(list(keys))
        read_ahead(self, keys)

    monkeypatch.setattr(LocalStore, "_read_ahead_blocking", spy)
    values = np.arange(64 * 8192, dtype="f8").reshape(64, 8192)
    with azarr.config.set(codec_threads=2):
        # 64 chunks of 64 KiB: 8 jobs of 8 on two threads, each job's window past its end.
        arr = await azarr.array(values, chunks=(8, 1024), store=store, compressor=None)
        before = _open_fds()
        np.testing.assert_array_equal(await arr.getitem(...), values)
    assert _open_fds() == before
    hinted = [key for keys in calls for key in keys]
    # Each job hints its own files (but a chunk a thread out of work steals alone: it reads
    # it at once); all but the last also hint an upcoming job's, which that job hints again
    # when it starts (without the window running on: 64 hints in 8 calls), and no thief hints
    # again what a job hinted.
    assert {f"{row}.0" for row in range(8)} <= set(hinted) and len(set(hinted)) > 48
    assert len(calls) > 8 and len(hinted) > 64
    assert max(hinted.count(key) for key in hinted) == 2


def test_upcoming_jobs_are_claimed_once_in_order() -> None:
    from azarr.pipeline._batched import UpcomingJobs

    upcoming = UpcomingJobs()
    jobs: list[list[int]] = [[1], [2], [3], [4]]
    drawn = upcoming.drawn(jobs)  # type: ignore[arg-type]
    first, second, third = next(drawn), next(drawn), next(drawn)
    upcoming.started(first)
    assert upcoming.claim() is second  # the first not started, and no longer upcoming
    upcoming.started(second)  # already claimed: nothing to forget
    assert upcoming.claim() is third
    assert upcoming.claim() is None  # the fourth is not drawn yet
    assert next(drawn) == [4] and upcoming.claim() == [4]
