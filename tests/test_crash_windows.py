"""Crash-safe ``resize``/``append`` (azarr/core/_shape_change.py): the store is made ready
before the new shape is published, so a writer stopped at any point leaves what a finished
or a never-started change would. What a resize keeps is zarr-python 2's and 3's: stored
objects wholly outside the new shape go, an object cut by the new edge stays as it is (a
later grow shows what it held beyond the edge).

Stops are simulated here by a store that raises at the n-th write (every n, so every
point between two requests is tried); tests/test_kill9.py kills real processes. Each
runs on both formats and on every chunk key encoding (`LAYOUTS`): v2 ``1.0`` and
``1/0``, v3 ``c/1/0`` and v3's ``v2`` encoding ``1.0``, the metadata document being
``.zarray`` or ``zarr.json``; and on a sharded v3 array, whose stored objects are
shards of 2 x 2 inner chunks.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from util import RecordingStore, plant_shape

import azarr
from azarr.storage import ByteRange, Generation, LocalStore, MemoryStore, S3Store, Store

SHAPE, CHUNKS, FILL = (40, 24), (8, 8), -1
DATA = np.arange(1, 40 * 24 + 1, dtype="i4").reshape(SHAPE)


@dataclass(frozen=True)
class Layout:
    """How an array is stored: its format and chunk key encoding."""

    name: str
    create: dict[str, Any]
    document: str  # the metadata document's key
    separator: str
    prefix: str = ""

    def key(self, *coords: int) -> str:
        """The key of the stored object (chunk or shard) at grid ``coords``."""
        return self.prefix + self.separator.join(map(str, coords))

    @property
    def unit(self) -> tuple[int, ...]:
        """Shape of the stored objects: shards of a sharded array, else chunks."""
        return tuple(self.create.get("shards", CHUNKS))

    def grid(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(-(-n // u) for n, u in zip(shape, self.unit, strict=True))


LAYOUTS = {
    layout.name: layout
    for layout in (
        Layout("v2", {"zarr_format": 2}, ".zarray", "."),
        Layout("v2-nested", {"zarr_format": 2, "dimension_separator": "/"}, ".zarray", "/"),
        Layout("v3", {"zarr_format": 3}, "zarr.json", "/", "c/"),
        Layout("v3-v2keys", {"zarr_format": 3, "chunk_key_encoding": {"name": "v2"}}, "zarr.json", "."),
        Layout("v3-sharded", {"zarr_format": 3, "shards": (16, 16)}, "zarr.json", "/", "c/"),
    )
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest) -> Layout:
    return LAYOUTS[request.param]


class Stopped(Exception):
    """The simulated end of a killed writer (no azarr error: nothing retries it)."""


class StoppingStore(RecordingStore):
    """Records every write and delete in order; raises `Stopped` at write number ``stop_at``."""

    def __init__(self, inner: Store, stop_at: int | None = None) -> None:
        super().__init__(inner)
        self.log: list[tuple[str, str]] = []
        self.stop_at = stop_at

    def _record(self, op: str, key: str) -> None:
        if self.stop_at is not None and len(self.log) == self.stop_at:
            raise Stopped
        self.log.append((op, key))

    async def _set(self, key: str, value: bytes) -> None:
        self._record("set", key)
        await super()._set(key, value)

    async def _set_if(self, key: str, value: bytes, generation: Generation | None) -> None:
        self._record("set", key)
        await super()._set_if(key, value, generation)

    async def _delete(self, key: str) -> None:
        self._record("delete", key)
        await super()._delete(key)

    async def _delete_if(self, key: str, generation: Generation) -> None:
        self._record("delete", key)
        await super()._delete_if(key, generation)

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await super()._get(key, byte_range)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        async for key in super()._list_prefix(prefix):
            yield key


async def _filled(store: Store, layout: Layout) -> azarr.AsyncArray:
    arr = await azarr.create(
        SHAPE, chunks=CHUNKS, dtype="i4", store=store, fill_value=FILL, overwrite=True, **layout.create
    )
    await arr.set_basic_selection(..., DATA)
    return arr


async def _each_stop(
    prepare: Callable[[Store], Awaitable[None]], operation: Callable[[azarr.AsyncArray], Awaitable[Any]]
) -> AsyncIterator[tuple[StoppingStore, bool]]:
    r"""Run ``operation`` on a freshly ``prepare``\ d store stopped at its first, second, ... write,
    until it finishes; yields the store and whether the operation finished, for checking."""
    stop_at = 0
    while True:
        store = StoppingStore(MemoryStore())
        await prepare(store)
        store.log.clear()
        store.stop_at = stop_at
        arr = await azarr.open_array(store, mode="r+")
        try:
            await operation(arr)
            finished = True
        except Stopped:
            finished = False
        store.stop_at = None
        yield store, finished
        if finished:
            assert stop_at >= 2, "the operation made fewer writes than expected"
            return
        stop_at += 1


def _expected(shape: tuple[int, ...], kept: tuple[int, ...], unit: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """``DATA`` resized to ``kept`` and then to ``shape``: the stored objects (of shape ``unit``)
    that ``kept`` cuts keep all their data, the ones wholly outside it read ``fill_value``."""
    out = np.full(shape, FILL, dtype="i4")
    region = tuple(slice(0, min(-(-k // u) * u, n)) for k, u, n in zip(kept, unit, shape, strict=True))
    out[region] = DATA[region]
    return out


async def _finished(
    layout: Layout, operation: Callable[[azarr.AsyncArray], Awaitable[Any]]
) -> np.ndarray[Any, Any]:
    """What ``operation`` leaves when nothing stops it, on a freshly filled array."""
    arr = await _filled(MemoryStore(), layout)
    await operation(arr)
    return await arr.get_basic_selection()


@pytest.fixture
def base_store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "local":
        return LocalStore(tmp_path / "a.zarr")
    server = request.getfixturevalue("seaweedfs")
    return S3Store(f"{server.create_bucket()}/a.zarr", storage_options=server.storage_options)


@pytest.mark.parametrize(
    ("base_store", "layout"),
    [
        *((kind, name) for kind in ("memory", "local") for name in LAYOUTS),
        *(pytest.param("seaweedfs", name, marks=pytest.mark.s3) for name in ("v2", "v3")),
    ],
    indirect=True,
)
async def test_grow_deletes_what_a_killed_shrink_left(base_store: Store, layout: Layout) -> None:
    """A shrink killed by code that publishes first (zarr-python, older azarr), then a grow:
    the same as a shrink that finished, then the grow."""
    await _filled(base_store, layout)
    await plant_shape(base_store, layout.document, (13, 24))  # objects of rows 16.. stay stored
    arr = await azarr.open_array(base_store, mode="r+")
    await arr.resize(*SHAPE)
    got = await arr.get_basic_selection()
    np.testing.assert_array_equal(got, _expected(SHAPE, (13, 24), layout.unit))

    async def shrink_and_grow(arr: azarr.AsyncArray) -> None:
        await arr.resize(13, 24)
        await arr.resize(*SHAPE)

    np.testing.assert_array_equal(got, await _finished(layout, shrink_and_grow))
    # on two axes at once, and through append
    await arr.set_basic_selection(..., DATA)
    await plant_shape(base_store, layout.document, (13, 5))
    arr = await azarr.open_array(base_store, mode="r+")
    await arr.append(np.zeros((27, 5), dtype="i4") + 9)
    got = await arr.get_basic_selection()
    assert got.shape == (40, 5)
    np.testing.assert_array_equal(got[:13], DATA[:13, :5])
    assert (got[13:] == 9).all()
    await arr.resize(*SHAPE)

    async def finished(arr: azarr.AsyncArray) -> None:
        await arr.resize(13, 5)
        await arr.append(np.zeros((27, 5), dtype="i4") + 9)
        await arr.resize(*SHAPE)

    np.testing.assert_array_equal(await arr.get_basic_selection(), await _finished(layout, finished))


async def test_shrink_deletes_before_publishing(layout: Layout) -> None:
    store = StoppingStore(MemoryStore())
    await _filled(store, layout)
    store.log.clear()
    arr = await azarr.open_array(store, mode="r+")
    await arr.resize(13, 24)
    assert store.log[-1] == ("set", layout.document), store.log
    chunk_ops = store.log[:-1]
    # the chunks (or shards) of the row cut at row 13 stay as they are; the rows below go
    rows, columns = layout.grid(SHAPE)
    cut = 13 // layout.unit[0]
    assert all(op == "delete" for op, _ in chunk_ops), chunk_ops
    deleted = sorted(k for _, k in chunk_ops)
    assert deleted == sorted(layout.key(r, c) for r in range(cut + 1, rows) for c in range(columns))
    # nothing wholly outside the shape is left: a later grow finds nothing to delete
    store.log.clear()
    await arr.resize(*SHAPE)
    assert store.log == [("set", layout.document)]
    np.testing.assert_array_equal(await arr.get_basic_selection(), _expected(SHAPE, (13, 24), layout.unit))


@pytest.mark.parametrize(
    ("layout_name", "new_shape"),
    [
        *((name, shape) for name in ("v2", "v3") for shape in [(13, 24), (40, 5), (3, 3), (0, 24)]),
        ("v2-nested", (13, 5)),
        ("v3-v2keys", (13, 5)),
        # shards cut by the new edge stay as they are
        *(("v3-sharded", shape) for shape in [(13, 24), (13, 5), (3, 3), (20, 20)]),
    ],
)
async def test_shrink_stopped_at_any_write_never_exposes_old_data(
    layout_name: str, new_shape: tuple[int, int]
) -> None:
    """Stop the shrink at each of its writes; run it again and grow back: the same as a shrink
    and grow that nothing stopped (stopped before publishing, the region being removed is old
    data or fill)."""
    layout = LAYOUTS[layout_name]

    async def prepare(store: Store) -> None:
        await _filled(store, layout)

    async for store, finished in _each_stop(prepare, lambda arr: arr.resize(*new_shape)):
        if finished:
            assert store.log[-1] == ("set", layout.document)
        reader = await azarr.open_array(store, mode="r+")
        got = await reader.get_basic_selection()
        if reader.shape == SHAPE:  # not published: the region being removed is old data or fill
            kept = tuple(slice(0, n) for n in new_shape)
            np.testing.assert_array_equal(got[kept], DATA[kept])
            assert ((got == DATA) | (got == FILL)).all()
        else:
            assert reader.shape == new_shape
            np.testing.assert_array_equal(got, DATA[: new_shape[0], : new_shape[1]])
        await reader.resize(*new_shape)  # the shrink run again, then grown back
        await reader.resize(*SHAPE)
        np.testing.assert_array_equal(
            await reader.get_basic_selection(), _expected(SHAPE, new_shape, layout.unit)
        )


async def test_grow_stopped_at_any_write_never_exposes_old_data(layout: Layout) -> None:
    async def prepare(store: Store) -> None:
        await _filled(store, layout)
        await plant_shape(store, layout.document, (13, 5))

    async for store, finished in _each_stop(prepare, lambda arr: arr.resize(*SHAPE)):
        reader = await azarr.open_array(store, mode="r")
        got = await reader.get_basic_selection()
        assert reader.shape in {SHAPE, (13, 5)}
        np.testing.assert_array_equal(got, _expected(reader.shape, (13, 5), layout.unit))
        if finished:
            assert store.log[-1] == ("set", layout.document)


async def test_append_stopped_after_publishing_shows_fill_not_old_data(layout: Layout) -> None:
    """The window between claiming the rows and writing them: what a finished resize shows."""
    store = StoppingStore(MemoryStore())
    await _filled(store, layout)
    await plant_shape(store, layout.document, (13, 24))
    arr = await azarr.open_array(store, mode="r+")
    store.log.clear()
    # writes: the deleted stale objects (rows 16..), .zarray; then stop
    rows, columns = layout.grid(SHAPE)
    store.stop_at = (rows - layout.grid((13, 24))[0]) * columns + 1
    with pytest.raises(Stopped):
        await arr.append(np.full((20, 24), 5, dtype="i4"))
    assert store.log[-1] == ("set", layout.document)
    store.stop_at = None
    reader = await azarr.open_array(store, mode="r")
    assert reader.shape == (33, 24)
    np.testing.assert_array_equal(
        await reader.get_basic_selection(), _expected((33, 24), (13, 24), layout.unit)
    )


async def test_append_to_a_clean_array_costs_no_extra_write(layout: Layout) -> None:
    store = StoppingStore(MemoryStore())
    arr = await azarr.create(
        (0, 24), chunks=CHUNKS, dtype="i4", store=store, fill_value=FILL, **layout.create
    )
    for _ in range(3):
        store.log.clear()
        await arr.append(np.ones((12, 24), dtype="i4"))
        # the metadata document, then the chunks of the block: nothing cleared
        assert store.log[0] == ("set", layout.document) and all(op == "set" for op, _ in store.log)
    assert (await arr.get_basic_selection() == 1).all()


# ---------------------------------------------------------------- copy_store / azarr cp
async def _hierarchy(store: Store, zarr_format: int = 2) -> None:
    root = await azarr.group(store=store, zarr_format=zarr_format)
    await root.attrs.update(title="source")
    t = await root.zeros("t", shape=(20, 12), chunks=(5, 4), dtype="i4")
    await t.set_basic_selection(..., np.arange(240, dtype="i4").reshape(20, 12) + 1)
    await t.attrs.update(units="K")
    sub = await root.create_group("sub")
    b = await sub.zeros("b", shape=(9,), chunks=(2,), dtype="f8")
    await b.set_basic_selection(..., np.linspace(1, 2, 9))
    # listed after the root's zarr.json: a copy in listing order publishes v3's root before it
    zeta = await root.zeros("zeta", shape=(6,), chunks=(4,), dtype="u1")
    await zeta.set_basic_selection(..., np.arange(1, 7, dtype="u1"))
    if zarr_format == 3:  # shards are copied as chunks are: before any zarr.json
        sharded = await root.zeros("sh", shape=(10, 6), chunks=(2, 3), shards=(4, 6), dtype="i2")
        await sharded.set_basic_selection(..., np.arange(60, dtype="i2").reshape(10, 6))
    await azarr.consolidate_metadata(store)  # v3: inline, in the root's zarr.json


def test_publication_waves_put_documents_last_deepest_first() -> None:
    from azarr.api.copy import _publication_waves

    keys = [".zattrs", ".zgroup", ".zmetadata", "t/.zarray", "t/.zattrs", "t/0.0", "sub/.zgroup",
            "sub/b/.zarray", "sub/b/0", "sub/.zmetadata"]  # fmt: skip
    assert _publication_waves(keys) == [
        ["t/0.0", "sub/b/0"],
        ["sub/b/.zarray"],
        ["t/.zattrs"],
        ["t/.zarray", "sub/.zgroup"],
        [".zattrs"],
        [".zgroup"],
        ["sub/.zmetadata"],
        [".zmetadata"],
    ]


def test_publication_waves_of_zarr_v3_put_each_zarr_json_last_the_root_s_at_the_end() -> None:
    """A v3 node is its ``zarr.json`` (attributes inside); the root's holds the inline
    consolidated metadata: it is the last key written."""
    from azarr.api.copy import _publication_waves

    keys = ["zarr.json", "t/zarr.json", "t/c/0/0", "t/c/3/2", "sub/zarr.json", "sub/b/zarr.json",
            "sub/b/c/0", "v/zarr.json", "v/1.0"]  # fmt: skip
    assert _publication_waves(keys) == [
        ["t/c/0/0", "t/c/3/2", "sub/b/c/0", "v/1.0"],
        ["sub/b/zarr.json"],
        ["t/zarr.json", "sub/zarr.json", "v/zarr.json"],
        ["zarr.json"],
    ]


@pytest.mark.parametrize("zarr_format", [2, 3])
async def test_copy_stopped_at_any_write_never_passes_for_complete(zarr_format: int) -> None:
    """Stop ``copy_store`` at each of its writes: every node that opens has all its chunks and
    members, the consolidated hierarchy opens only when whole, the comparison with the
    source finds every missing key, and ``verify`` without the source fails too."""
    from azarr.cli._against import compare_stores
    from azarr.cli._verify import Report, check_hierarchy

    source = MemoryStore()
    await _hierarchy(source, zarr_format)
    src_keys = {k async for k in source.list_prefix("")}
    if zarr_format == 2:
        documents = {"t": ".zarray", "sub/b": ".zarray", "zeta": ".zarray", "sub": ".zgroup", "": ".zgroup"}
        consolidated = ".zmetadata"
    else:
        documents = dict.fromkeys(("t", "sub/b", "zeta", "sh", "sub", ""), "zarr.json")
        consolidated = "zarr.json"  # the root's, with the hierarchy's metadata inline
    for stop_at in range(len(src_keys) + 1):
        dest = StoppingStore(MemoryStore(), stop_at=stop_at)
        try:
            await azarr.copy_store(source, dest)
        except Stopped:
            pass
        dest.stop_at = None
        copied = {k async for k in dest.list_prefix("")}
        problems: list[str] = []
        compared = await compare_stores(source, dest, "", lambda key, _text, seen=problems: seen.append(key))
        assert compared == len(copied) and len(problems) == len(src_keys - copied)
        for node, doc in documents.items():
            if f"{node}/{doc}".lstrip("/") not in copied:
                continue
            below = {k for k in src_keys if k.startswith(f"{node}/")} if node else src_keys - {".zmetadata"}
            assert below <= copied, f"{node or '/'} opens without {below - copied}"
        # azarr verify DST, without the source: only a copy lacking nothing but .zmetadata passes
        report = Report()
        await check_hierarchy(dest, "", report)
        verified = bool(copied) and not report.problems  # (no key at all is a problem of its own)
        assert verified == (src_keys - copied <= {".zmetadata"}), (src_keys - copied, report.problems)
        if consolidated in copied:
            assert copied == src_keys
            arrays = [k async for k in (await azarr.open_consolidated(dest)).array_keys()]
            assert arrays == ["t", "zeta"] if zarr_format == 2 else ["sh", "t", "zeta"]
        else:
            with pytest.raises(
                (azarr.errors.ConsolidatedMetadataNotFoundError, azarr.errors.GroupNotFoundError)
            ):
                await azarr.open_consolidated(dest)


# ---------------------------------------------------------------- LocalStore temporary files
def _temp(directory: Path, name: str, age: float) -> Path:
    path = directory / f".{name}.azarr-tmp-{os.urandom(16).hex()}"
    path.write_bytes(b"partial")
    stamp = time.time() - age
    os.utime(path, (stamp, stamp))
    return path


async def test_abandoned_temp_files_are_swept_live_ones_never(tmp_path: Path) -> None:
    root = tmp_path / "s"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    old = _temp(root / "a", "k", 3600)
    young = _temp(root / "a", "k", 5)
    live = _temp(root / "a", "j", 3600)
    nested = _temp(root / "b", "x", 3600)
    held = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a writer still writing holds it
        reader = LocalStore(root, read_only=True)
        assert [k async for k in reader.list_prefix("")] == []
        assert old.exists() and nested.exists(), "a read-only store removed files"
        store = LocalStore(root)
        await store.set("a/k", b"v")  # the first write into a/ sweeps it
        assert not old.exists() and young.exists() and live.exists()
        assert [k async for k in store.list_prefix("")] == ["a/k"]  # the listing sweeps b/
        assert not nested.exists() and not (root / "b").exists(), "the emptied directory stays"
        with azarr.config.set(local_temp_max_age=0):
            assert [k async for k in store.list_dir("a")] == ["k"]
            assert not young.exists() and live.exists()
    finally:
        os.close(held)
    with azarr.config.set(local_temp_max_age=0):
        assert [k async for k in LocalStore(root).list_prefix("a")] == ["a/k"]
    assert not live.exists()  # its writer is gone
    with pytest.raises(ValueError, match="local_temp_max_age"):
        azarr.config.set(local_temp_max_age=-1)
