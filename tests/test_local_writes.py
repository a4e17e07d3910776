"""Local-disk writes from a caller's buffer: no aliasing, no partial files, atomic replaces.

``LocalStore.set_blocking`` (the batched write path's store call) writes a memoryview
straight to its temporary file, and chunks with no compressor or filters reach it as a view
of the caller's values. These tests pin down what that must not change: a later change to
the caller's buffer changes nothing stored (a memory store still copies), a failed write
leaves neither a partial value nor a temporary file, and a reader never sees half a value.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import StoreError
from azarr.storage import LocalStore, MemoryStore, Store, _local


def _stores(tmp_path: Path) -> dict[str, Store]:
    return {"local": LocalStore(tmp_path / "store"), "memory": MemoryStore()}


@pytest.mark.parametrize("kind", ["local", "memory"])
def test_set_blocking_keeps_no_reference_to_the_callers_buffer(tmp_path: Path, kind: str) -> None:
    store = _stores(tmp_path)[kind]
    buf = bytearray(b"a" * 4096)
    store.set_blocking("k", memoryview(buf))
    store.set_blocking("n/k", memoryview(np.arange(6, dtype="<i4")).cast("B"))
    buf[:] = b"b" * 4096
    assert store.get_blocking("k") == b"a" * 4096
    assert store.get_blocking("n/k") == np.arange(6, dtype="<i4").tobytes()


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize("order", ["C", "F"])
async def test_uncompressed_chunks_do_not_alias_the_written_values(
    tmp_path: Path, kind: str, order: str
) -> None:
    store = _stores(tmp_path)[kind]
    # Chunks spanning whole rows (C) or columns (F) are contiguous regions of the values:
    # the encoder hands the store a view of them, not a copy.
    chunks = (4, 6) if order == "C" else (8, 3)
    arr = await azarr.create((8, 6), chunks=chunks, dtype="f8", compressor=None, order=order, store=store)
    values = (
        np.asfortranarray(np.arange(48.0).reshape(8, 6)) if order == "F" else np.arange(48.0).reshape(8, 6)
    )
    expected = values.copy()
    await arr.setitem(..., values)
    values[...] = -1.0
    np.testing.assert_array_equal(await arr.getitem(...), expected)


@pytest.mark.parametrize(
    "dtype",
    ["<i2", ">f8", "M8[ns]", "|b1", [("a", "<i4"), ("b", "u1")], "<U3"],
    ids=["i2", "f8-big-endian", "datetime64", "bool", "structured", "unicode"],
)
@pytest.mark.parametrize("order", ["C", "F"])
async def test_uncompressed_chunk_files_hold_the_chunk_bytes_in_order(
    tmp_path: Path, dtype: Any, order: str
) -> None:
    """What the view-based encoder writes is what ``tobytes(order)`` would have: whole
    chunks from C and F values, contiguous or not, and the edge chunks (padded copies)."""
    store = LocalStore(tmp_path / "a")
    dt = np.dtype(dtype)
    arr = await azarr.create((7, 5), chunks=(4, 3), dtype=dt, compressor=None, order=order, store=store)
    rng = np.random.default_rng(0)
    values = np.frombuffer(
        rng.integers(0, 200, 35 * dt.itemsize, dtype=np.uint8).tobytes(), dtype=dt
    ).reshape(7, 5)
    if dt.kind == "M":
        values = values.view("i8").clip(-(10**18), 10**18).view(dt)
    if dt.kind == "U":
        values = np.array([["xy"[i % 2] * (1 + j % 3) for j in range(5)] for i in range(7)], dtype=dt)
    if dt.kind == "b":
        values = values.view("u1") % 2 == 1
    for source in (values, np.asfortranarray(values), values[:, ::-1][:, ::-1]):
        await arr.setitem(..., source)
        chunk = await store.get("0.0")
        assert chunk == values[:4, :3].tobytes(order=order)
        edge = np.zeros((4, 3), dtype=dt)
        edge[:3, :2] = values[4:, 3:]
        assert await store.get("1.1") == edge.tobytes(order=order)
        np.testing.assert_array_equal(await arr.getitem(...), values)


_FSIZE_SCRIPT = textwrap.dedent(
    """
    import os, resource, signal, sys
    import numpy as np
    from azarr.errors import StoreError
    from azarr.storage import LocalStore

    root = sys.argv[1]
    store = LocalStore(root)
    store.set_blocking("c/0.0", b"old value")
    # Files may grow to 64 KiB: a larger write fails part-way (EFBIG, with SIGXFSZ ignored).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    contiguous = np.ones(1 << 20, dtype=np.uint8).data
    rows = np.ones((64, 32768), dtype=np.uint8)[:, : 1 << 14].data  # strided: written by writev
    for value in (contiguous, rows):
        try:
            store.set_blocking("c/0.0", value)
        except StoreError as exc:
            print("raised:", exc)
        else:
            print("no error")
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE/SIGXFSZ as on Linux")
def test_a_write_failing_part_way_leaves_the_old_value_and_no_partial_file(tmp_path: Path) -> None:
    """A real short write: the file-size limit stops ``write()`` (and ``writev()``, for a
    strided view) after 64 KiB of 1 MiB."""
    root = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(azarr.__file__).parent.parent), *sys.path])}
    proc = subprocess.run(
        [sys.executable, "-c", _FSIZE_SCRIPT, str(root)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("raised:") for line in lines), proc.stdout
    assert all("'c/0.0'" in line for line in lines)  # the error names the key
    assert sorted(os.listdir(root / "c")) == ["0.0"]  # no temporary file left behind
    assert (root / "c" / "0.0").read_bytes() == b"old value"


async def test_a_write_into_a_file_where_a_directory_should_be_fails_cleanly(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    await store.set("a", b"a file")
    with pytest.raises(StoreError, match=r"'a/0\.0'"):
        store.set_blocking("a/0.0", memoryview(b"x" * 100))
    assert await store.get("a") == b"a file"
    assert sorted(os.listdir(tmp_path / "store")) == ["a"]


def test_a_reader_never_sees_part_of_a_value(tmp_path: Path) -> None:
    """Values of 4 MiB, each one byte repeated, replaced 40 times while another store object
    reads the key: every read is one whole value. An in-place write (truncate, then write)
    shows readers short or mixed values within a few rounds."""
    writer, reader = LocalStore(tmp_path / "s"), LocalStore(tmp_path / "s")
    size = 4 << 20
    writer.set_blocking("k", bytes(size))
    done = threading.Event()
    bad: list[str] = []
    reads = 0

    def read() -> None:
        nonlocal reads
        while not done.is_set():
            value = reader.get_blocking("k")
            reads += 1
            assert value is not None
            if len(value) != size or value.count(value[:1]) != size:
                bad.append(f"read {reads}: {len(value)} bytes, first {value[:1]!r}")

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for i in range(1, 41):
            writer.set_blocking("k", np.full(size, i, dtype=np.uint8).data)
    finally:
        done.set()
        thread.join()
    assert not bad, bad[:3]
    assert reads > 1
    assert reader.get_blocking("k") == bytes([40]) * size
    assert os.listdir(tmp_path / "s") == ["k"]


async def test_whole_chunk_writes_of_one_array_are_atomic_per_chunk(tmp_path: Path) -> None:
    """The same through the array API: uncompressed 1 MiB chunks written from the caller's
    values (views, no copy) while a second array object reads them at the same time."""
    import asyncio

    store = LocalStore(tmp_path / "a")
    arr = await azarr.create((4, 1 << 20), chunks=(1, 1 << 20), dtype="u1", compressor=None, store=store)
    await arr.setitem(..., np.zeros((4, 1 << 20), dtype=np.uint8))
    reader = await azarr.open_array(LocalStore(tmp_path / "a"), mode="r")
    writing = True
    seen: set[int] = set()

    async def write() -> None:
        nonlocal writing
        for i in range(1, 13):
            await arr.setitem(..., np.full((4, 1 << 20), i, dtype=np.uint8))
        writing = False

    async def read() -> None:
        while writing:
            for row in await reader.getitem(...):
                assert np.all(row == row[0]), "a chunk mixed two values"
                seen.add(int(row[0]))

    await asyncio.gather(write(), read())
    assert seen
    np.testing.assert_array_equal(await reader.getitem(...), np.full((4, 1 << 20), 12, dtype=np.uint8))


@pytest.mark.parametrize("order", ["C", "F"])
def test_encode_buffer_views_plain_chunks_and_copies_otherwise(order: str) -> None:
    from azarr.codecs import ChunkCodec

    plain = ChunkCodec("<f8", (3, 4), order, None, None)
    chunk = np.asarray(np.arange(12.0).reshape(3, 4), order=order)
    view = plain.encode_buffer(chunk, key="c/0.0")
    assert isinstance(view, memoryview) and view.ndim == 1 and view.format == "B" and len(view) == 96
    assert np.shares_memory(np.frombuffer(view, dtype=np.uint8), chunk)  # no copy
    assert bytes(view) == plain.encode(chunk, key="c/0.0") == chunk.tobytes(order=order)
    # Laid out in the other order: a copy in the codec's order, as encode() gives.
    other = np.asarray(chunk, order="F" if order == "C" else "C")
    assert plain.encode_buffer(other, key="c/0.0") == chunk.tobytes(order=order)
    blosc = ChunkCodec("<f8", (3, 4), order, {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1}, None)
    encoded = blosc.encode_buffer(chunk, key="c/0.0")
    assert type(encoded) is bytes and encoded == blosc.encode(chunk, key="c/0.0")


@pytest.mark.parametrize("kind", ["local", "memory"])
@pytest.mark.parametrize(
    ("order", "shape", "chunks", "layout"),
    [
        ("C", (64, 4096), (32, 2048), "C"),  # rows of 16 KiB: written as a row view
        ("F", (4096, 64), (2048, 32), "F"),  # columns of 16 KiB, F order: the same, transposed
        ("C", (4, 16, 4096), (2, 8, 2048), "C"),  # outer axes merge: one row view
        ("C", (4, 16, 4096), (4, 8, 2048), "C"),  # outer axes do not merge: a copy
        ("C", (64, 4096), (32, 2048), "F"),  # rows not contiguous: a copy
    ],
)
async def test_regions_of_wider_values_store_the_chunk_bytes(
    tmp_path: Path, kind: str, order: str, shape: tuple[int, ...], chunks: tuple[int, ...], layout: str
) -> None:
    """Whole chunks that are strided regions of the values (the common case: chunks narrower
    than the array) store exactly the chunk's bytes in ``order``, and no reference to them."""
    store = _stores(tmp_path)[kind]
    arr = await azarr.create(shape, chunks=chunks, dtype="<f8", compressor=None, order=order, store=store)
    values = np.asarray(np.random.default_rng(1).standard_normal(shape), order=layout)
    expected = values.copy()
    await arr.setitem(..., values)
    values[...] = 0.0
    first = tuple(slice(0, c) for c in chunks)
    key = ".".join("0" * len(shape))
    assert await store.get(key) == expected[first].tobytes(order=order)
    np.testing.assert_array_equal(await arr.getitem(...), expected)


def test_encode_buffer_views_the_rows_of_a_large_strided_region() -> None:
    from azarr.codecs import ChunkCodec

    codec = ChunkCodec("<f4", (64, 1024), "C", None, None)
    values = np.arange(64 * 4096, dtype="<f4").reshape(64, 4096)
    region = values[:, 1024:2048]
    rows = codec.encode_buffer(region, key="c/0.1")
    assert isinstance(rows, memoryview) and rows.shape == (64, 4096) and rows.nbytes == 64 * 4096
    assert np.shares_memory(np.asarray(rows), values)  # no copy
    assert bytes(rows) == region.tobytes() == codec.encode(region, key="c/0.1")
    small = ChunkCodec("<f4", (4, 8), "C", None, None)  # below the row-view threshold: a copy
    assert small.encode_buffer(values[:4, :8], key="c/0.0") == values[:4, :8].tobytes()


def test_a_subclass_overriding_set_blocking_gets_bytes(tmp_path: Path) -> None:
    """A subclass may keep what it is given: unless it declares otherwise, its
    ``_set_blocking`` receives an immutable copy, not the caller's buffer."""
    kept: list[object] = []

    class KeepingStore(LocalStore):
        def _set_blocking(self, key: str, value: bytes | memoryview) -> None:
            kept.append(value)
            super()._set_blocking(key, value)

    store = KeepingStore(tmp_path / "s")
    buf = bytearray(b"abc")
    store.set_blocking("k", memoryview(buf))
    buf[:] = b"xyz"
    assert kept == [b"abc"] and type(kept[0]) is bytes
    assert store.get_blocking("k") == b"abc"


def _watch_anonymous_opens(monkeypatch: pytest.MonkeyPatch, *, refuse: bool = False) -> list[int]:
    """Record each ``os.open`` of a file without a name (``O_TMPFILE``); ``refuse``: fail
    it as a file system without such files does (EOPNOTSUPP)."""
    seen: list[int] = []
    real_open = os.open

    def watch(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            seen.append(flags)
            if refuse:
                raise OSError(errno.EOPNOTSUPP, "Operation not supported")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", watch)
    return seen


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
def test_a_new_key_is_linked_into_place_without_a_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key that does not exist is written to a file without a name and linked to the key:
    no rename, and no temporary name ever appears in the directory."""
    store = LocalStore(tmp_path / "store")
    renamed: list[str] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        renamed.append(os.fspath(dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    for i in range(5):
        store.set_blocking(f"a/{i}", memoryview(bytes([i]) * 3000))
    assert renamed == []
    assert sorted(os.listdir(tmp_path / "store" / "a")) == [str(i) for i in range(5)]
    assert [store.get_blocking(f"a/{i}") for i in range(5)] == [bytes([i]) * 3000 for i in range(5)]
    mode = os.stat(tmp_path / "store" / "a" / "0").st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # as a file created by name


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
def test_an_existing_key_is_replaced_and_later_writes_go_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path / "store")
    store.set_blocking("k", b"old")
    store.set_blocking("k", memoryview(b"new value"))  # links under a temporary name, replaces
    assert store.get_blocking("k") == b"new value"
    assert store._named_writes == _local._NAMED_WRITES
    anonymous = _watch_anonymous_opens(monkeypatch)
    store.set_blocking("k", b"newer")
    assert anonymous == [] and store._named_writes == _local._NAMED_WRITES - 1
    store._named_writes = 0
    store.set_blocking("j", b"fresh")  # tries a file without a name again
    assert len(anonymous) == 1
    assert store.get_blocking("k") == b"newer" and store.get_blocking("j") == b"fresh"
    assert sorted(os.listdir(tmp_path / "store")) == ["j", "k"]


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
def test_a_failed_replace_of_an_existing_key_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalStore(tmp_path / "store")
    store.set_blocking("d/k", b"old")

    def crash(src: Any, dst: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StoreError, match=r"'d/k'.*No space left"):
        store.set_blocking("d/k", b"new")
    monkeypatch.undo()
    assert store.get_blocking("d/k") == b"old"
    assert os.listdir(tmp_path / "store" / "d") == ["k"]


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
def test_a_file_system_without_anonymous_files_gets_named_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``open(O_TMPFILE)`` is refused (file systems without it say EOPNOTSUPP), the
    store writes through a named temporary file from then on."""
    store = LocalStore(tmp_path / "store")
    refused = _watch_anonymous_opens(monkeypatch, refuse=True)
    store.set_blocking("a/0", b"zero")
    store.set_blocking("a/1", b"one")
    assert len(refused) == 1 and not store._anonymous
    assert store.get_blocking("a/0") == b"zero" and store.get_blocking("a/1") == b"one"
    assert sorted(os.listdir(tmp_path / "store" / "a")) == ["0", "1"]


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
@pytest.mark.parametrize("error", [errno.EXDEV, errno.ENOENT])
def test_a_proc_that_cannot_name_anonymous_files_gets_named_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: int
) -> None:
    """Where linking through ``/proc/self/fd`` fails (a sandbox's /proc), the value is
    written again under a temporary name, and later writes go that way directly."""
    store = LocalStore(tmp_path / "store")
    real_link = os.link
    refused: list[str] = []

    def link(src: Any, dst: Any, **kwargs: Any) -> None:
        if str(src).startswith("self/fd/"):
            refused.append(str(dst))
            raise OSError(error, os.strerror(error))
        real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", link)
    store.set_blocking("a/0", memoryview(b"zero" * 100))
    store.set_blocking("a/1", b"one")
    assert len(refused) == 1 and not store._anonymous
    assert store.get_blocking("a/0") == b"zero" * 100 and store.get_blocking("a/1") == b"one"
    assert sorted(os.listdir(tmp_path / "store" / "a")) == ["0", "1"]


@pytest.mark.skipif(not _local._ANONYMOUS_FILES, reason="no O_TMPFILE (Linux) here")
def test_anonymous_writes_in_a_forked_child_link_the_childs_file(tmp_path: Path) -> None:
    """``/proc`` is opened once per process; ``self/fd/N`` under it must be the child's own
    descriptor after a fork, not the parent's."""
    store = LocalStore(tmp_path / "store")
    store.set_blocking("parent", b"p")  # opens /proc in the parent
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            store.set_blocking("child", b"c" * 100)
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get_blocking("child") == b"c" * 100
