"""Zarr v3 arrays through azarr's other features: copy, digest, astype/view, save, dask, the CLI.

The consistency tests (no lost updates) run v3 in ``tests/test_consistency.py``, the loader
and the service in their own modules; metadata, codecs and the core paths in ``tests/test_v3.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import azarr
import azarr.sync
from azarr.cli import cli
from azarr.storage import LocalStore, MemoryStore

#: A chain with every v3 step: F-order chunks, big-endian elements, blosc, a checksum.
CODECS = [
    {"name": "transpose", "configuration": {"order": [1, 0]}},
    {"name": "bytes", "configuration": {"endian": "big"}},
    {
        "name": "blosc",
        "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "shuffle", "typesize": 8, "blocksize": 0},
    },
    {"name": "crc32c"},
]
DATA = np.arange(10 * 7, dtype="f8").reshape(10, 7)


async def _v3_array(store: Any, path: str = "a", **kwargs: Any) -> azarr.AsyncArray:
    kwargs = {"codecs": CODECS, "dimension_names": ["y", "x"], **kwargs}
    arr = await azarr.create(
        DATA.shape, chunks=(4, 3), dtype="f8", store=store, path=path, zarr_format=3, **kwargs
    )
    await arr.set_basic_selection(..., DATA)
    await arr.attrs.update(units="K")
    return arr


# ------------------------------------------------------------------ copy


async def test_copy_keeps_the_v3_chain_and_converts_between_formats() -> None:
    source = await _v3_array(MemoryStore(), chunk_key_encoding={"name": "v2", "separator": "."})
    v3 = await azarr.group(MemoryStore(), zarr_format=3)
    await azarr.copy(source, v3, name="c")
    copied = await v3.get("c")
    assert isinstance(copied, azarr.AsyncArray) and copied.zarr_format == 3
    assert copied.metadata.codecs == source.metadata.codecs
    assert copied.dimension_names == ("y", "x") and copied.metadata.chunk_key_encoding.name == "v2"
    assert dict(copied.attrs) == {"units": "K"}
    np.testing.assert_array_equal(await copied.get_basic_selection(), DATA)

    # Into a v2 group: a v2 array; the crc32c after blosc has no v2 spelling, so say the compressor.
    v2 = await azarr.group(MemoryStore())
    with pytest.raises(ValueError, match="cannot be stored in a Zarr v2 array"):
        await azarr.copy(source, v2, name="c")
    await azarr.copy(source, v2, name="c", compressor={"id": "zstd", "level": 1})
    as_v2 = await v2.get("c")
    assert isinstance(as_v2, azarr.AsyncArray)
    assert (as_v2.zarr_format, as_v2.order, as_v2.metadata.compressor) == (2, "F", {"id": "zstd", "level": 1})
    np.testing.assert_array_equal(await as_v2.get_basic_selection(), DATA)

    # And back: the v2 array's order and compressor as v3 codecs.
    back = await azarr.group(MemoryStore(), zarr_format=3)
    await azarr.copy_all(v2, back)
    again = await back.get("c")
    assert isinstance(again, azarr.AsyncArray) and again.zarr_format == 3
    assert [c["name"] for c in again.metadata.codecs] == ["transpose", "bytes", "zstd"]
    np.testing.assert_array_equal(await again.get_basic_selection(), DATA)


async def test_copy_store_of_a_v3_hierarchy_opens_alike(tmp_path: Path) -> None:
    source = LocalStore(tmp_path / "src")
    root = await azarr.group(source, zarr_format=3)
    await root.attrs.update(title="t")
    await _v3_array(source, "sub/a")
    await azarr.consolidate_metadata(source)
    result = await azarr.copy_store(source, LocalStore(tmp_path / "dst"))
    assert result.n_copied == sum(f.is_file() for f in (tmp_path / "src").rglob("*"))
    copied = await azarr.open_consolidated(LocalStore(tmp_path / "dst"))
    assert isinstance(copied, azarr.AsyncGroup) and copied.zarr_format == 3
    arr = await copied.get("sub/a")
    assert isinstance(arr, azarr.AsyncArray)
    np.testing.assert_array_equal(await arr.get_basic_selection(), DATA)


async def test_open_consolidated_reads_both_formats_documents_or_the_one_asked_for(tmp_path: Path) -> None:
    from util import RecordingStore

    v2 = LocalStore(tmp_path / "v2")
    await azarr.group(v2)
    await azarr.consolidate_metadata(v2)
    recording = RecordingStore(LocalStore(tmp_path / "v2"))
    await azarr.open_consolidated(recording)
    assert dict(recording.gets) == {".zmetadata": 1, "zarr.json": 1}  # one round trip
    recording = RecordingStore(LocalStore(tmp_path / "v2"))
    await azarr.open_consolidated(recording, zarr_format=2)
    assert dict(recording.gets) == {".zmetadata": 1}
    with pytest.raises(azarr.errors.ConsolidatedMetadataNotFoundError, match=r"inline in 'zarr\.json'"):
        await azarr.open_consolidated(LocalStore(tmp_path / "v2"), zarr_format=3)


# ------------------------------------------------------------------ digest


async def test_v3_digest_hashes_chunks_by_their_v3_keys_then_zarr_json() -> None:
    store = MemoryStore()
    arr = await _v3_array(store)
    expected = hashlib.sha256()
    for i in range(3):
        for j in range(3):
            expected.update(await store.get(f"a/c/{i}/{j}") or b"")
    expected.update(await store.get("a/zarr.json") or b"")
    assert await arr.digest("sha256") == expected.digest()
    before = await arr.hexdigest()
    await arr.set_basic_selection((0, 0), -1.0)
    assert await arr.hexdigest() != before
    scalar = await azarr.create((), dtype="i4", store=store, path="s", zarr_format=3, fill_value=3)
    assert await scalar.digest() == hashlib.sha1(await store.get("s/zarr.json") or b"").digest()
    await scalar.set_basic_selection((), 5)
    assert (
        await scalar.digest()
        == hashlib.sha1((await store.get("s/c") or b"") + (await store.get("s/zarr.json") or b"")).digest()
    )


# ------------------------------------------------------------------ astype / view


async def test_astype_and_view_filters_on_v3() -> None:
    store = MemoryStore()
    arr = await _v3_array(store)
    as_f4 = arr.astype("f4")
    assert as_f4.read_only and as_f4.dtype == np.float32 and as_f4.zarr_format == 3
    np.testing.assert_array_equal(await as_f4.get_basic_selection(), DATA.astype("f4"))
    # A v3 array written with a delta filter; a view without filters sees the stored deltas.
    codecs = [
        {"name": "numcodecs.delta", "configuration": {"dtype": "<i8"}},
        {"name": "bytes", "configuration": {"endian": "little"}},
    ]
    ramp = await azarr.create(
        (12,), chunks=(6,), dtype="i8", store=store, path="d", zarr_format=3, codecs=codecs
    )
    await ramp.set_basic_selection(..., np.arange(12) * 3)
    raw = ramp.view(filters=[])
    assert [c["name"] for c in raw.metadata.codecs] == ["bytes"]
    assert (await raw.get_basic_selection()).tolist() == [0, 3, 3, 3, 3, 3, 18, 3, 3, 3, 3, 3]
    with_delta = raw.view(filters=[{"id": "delta", "dtype": "<i8"}])
    assert (await with_delta.get_basic_selection()).tolist() == list(range(0, 36, 3))
    assert (await ramp.astype("f8").get_basic_selection()).tolist() == list(range(0, 36, 3))


# ------------------------------------------------------------------ save / load, dask


async def test_save_and_load_take_zarr_format(tmp_path: Path) -> None:
    saved = await azarr.save(str(tmp_path / "one"), DATA, zarr_format=3)
    assert saved.zarr_format == 3 and (tmp_path / "one" / "zarr.json").is_file()
    np.testing.assert_array_equal(await azarr.load(str(tmp_path / "one")), DATA)
    group = await azarr.save(str(tmp_path / "two"), DATA, b=np.ones(3), zarr_format=3)
    assert group.zarr_format == 3
    loaded = await azarr.load(str(tmp_path / "two"))
    assert isinstance(loaded, dict) and sorted(loaded) == ["arr_0", "b"]


def test_dask_reads_and_writes_v3(tmp_path: Path) -> None:
    dask_array = pytest.importorskip("dask.array")
    import azarr.dask

    arr = azarr.sync.open_array(
        str(tmp_path / "a"),
        mode="w",
        shape=DATA.shape,
        chunks=(4, 3),
        dtype="f8",
        zarr_format=3,
        codecs=CODECS,
    )
    arr[...] = DATA
    x = azarr.dask.from_azarr(str(tmp_path / "a"))
    assert x.chunks == ((4, 4, 2), (3, 3, 1))
    np.testing.assert_array_equal(x.compute(scheduler="threads"), DATA)
    azarr.dask.to_azarr(dask_array.from_array(DATA * 2, chunks=(4, 3)), str(tmp_path / "b"), zarr_format=3)
    out = azarr.sync.open_array(str(tmp_path / "b"), mode="r")
    assert out.zarr_format == 3
    np.testing.assert_array_equal(out[...], DATA * 2)


# ------------------------------------------------------------------ CLI


def _cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, result.output
    return result.output


@pytest.fixture
def v3_tree(tmp_path: Path) -> str:
    url = str(tmp_path / "h.zarr")
    root = azarr.sync.open_group(url, mode="w", zarr_format=3)
    a = root.create_dataset("a", shape=DATA.shape, chunks=(4, 3), dtype="f8", codecs=CODECS)
    a[...] = DATA
    root.create_group("g").create_dataset("b", shape=(5,), dtype="u1", chunk_key_encoding={"name": "v2"})
    azarr.sync.consolidate_metadata(url)
    return url


def test_cli_info_tree_and_verify_show_the_format_and_chain(v3_tree: str) -> None:
    info = json.loads(_cli("info", v3_tree, "--path", "a", "--json"))
    assert (info["zarr_format"], info["codecs"], info["dimension_names"]) == (3, CODECS, None)
    assert info["dtype"] == "float64" and info["compressor"] is None and info["order"] == "F"
    text = _cli("info", v3_tree, "--path", "a")
    assert "Zarr format        : 3" in text and "Codec [3]          : crc32c()" in text
    assert _cli("tree", v3_tree).splitlines() == [
        "/ (Zarr v3)",
        " ├── a (10, 7) float64 v3 transpose > bytes > blosc > crc32c",
        " └── g",
        "     └── b (5,) uint8 v3 bytes > zstd",
    ]
    assert _cli("consolidate", v3_tree, "--dry-run").splitlines() == [
        "a/zarr.json",
        "g/b/zarr.json",
        "g/zarr.json",
        "dry run: would write 3 documents to zarr.json",
    ]
    report = json.loads(_cli("verify", v3_tree, "--decode", "--json"))
    assert report["ok"] and (report["arrays"], report["groups"], report["chunks"]) == (
        ["a", "g/b"],
        ["", "g"],
        9,
    )
    assert report["formats"]["a"] == {"zarr_format": 3, "codecs": CODECS}
    assert _cli("verify", v3_tree).splitlines()[-1] == (
        "4 metadata documents, 2 arrays (Zarr v3), 2 groups, 9 chunks: ok"
    )


def test_cli_verify_finds_v3_problems(v3_tree: str) -> None:
    root = Path(v3_tree)
    chunk = root / "a" / "c" / "1" / "2"
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF  # the crc32c no longer matches
    chunk.write_bytes(bytes(data))
    (root / "a" / "c" / "9").write_bytes(b"x")  # not a key of a 2-d array
    (root / "g" / "b" / "7").write_bytes(b"x")  # outside the grid (v2 key encoding)
    (root / "stray").write_bytes(b"x")  # under no array
    azarr.sync.open_group(v3_tree, mode="a").create_dataset(
        "late", shape=(1,), dtype="i1"
    )  # not consolidated
    report = json.loads(_cli("verify", v3_tree, "--decode", "--json", code=1))
    problems = {p["key"]: p["error"] for p in report["problems"]}
    assert set(problems) == {"a/c/1/2", "a/c/9", "g/b/7", "stray", "zarr.json"}
    assert problems["a/c/1/2"].startswith("CodecError") and "crc32c checksum mismatch" in problems["a/c/1/2"]
    assert "chunk keys like 'c/0/0'" in problems["a/c/9"] and "outside the chunk grid" in problems["g/b/7"]
    assert "'late/zarr.json' is not in its consolidated_metadata" in problems["zarr.json"]


def test_cli_cp_then_verify_src_dst_finds_what_a_v3_copy_lacks(v3_tree: str, tmp_path: Path) -> None:
    dst = tmp_path / "copy.zarr"
    _cli("cp", v3_tree, str(dst))
    assert _cli("verify", v3_tree, str(dst)).splitlines()[-1] == (
        f"4 metadata documents, 2 arrays (Zarr v3), 2 groups, 9 chunks, 13 keys compared with {v3_tree}: ok"
    )
    (dst / "a" / "c" / "1" / "2").unlink()  # missing
    (dst / "a" / "c" / "0" / "1").write_bytes((dst / "a" / "c" / "0" / "0").read_bytes())  # differs, decodes
    (dst / "g" / "zarr.json").unlink()  # a copy stopped before the group's document
    (dst / "zarr.json").unlink()  # ... and the root's, which holds the consolidated metadata
    report = json.loads(_cli("verify", v3_tree, str(dst), "--json", code=1))
    problems = {p["key"]: p["error"] for p in report["problems"]}
    assert problems.keys() == {"a/c/1/2", "a/c/0/1", "g/zarr.json", "zarr.json"}
    assert problems["a/c/1/2"].startswith("missing") and problems["a/c/0/1"].startswith("differs")
    # without the source, the groups missing above their members still fail it
    report = json.loads(_cli("verify", str(dst), "--json", code=1))
    assert {p["key"]: p["error"][:8] for p in report["problems"]} == {
        "zarr.json": "missing:",
        "g/zarr.json": "missing:",
    }


# ------------------------------------------------------------------ partial reads, checksums


@pytest.mark.parametrize(
    "after",
    [
        pytest.param([], id="big-endian"),  # blosc's output is big-endian elements, not the chunk's memory
        pytest.param([{"name": "gzip", "configuration": {"level": 1}}], id="gzip-after-blosc"),
        pytest.param([{"name": "crc32c"}], id="crc32c-after-blosc"),  # a part cannot be verified
    ],
)
async def test_partial_decompress_reads_whole_chunks_unless_blosc_is_the_whole_chain(
    after: list[Any],
) -> None:
    blosc = {
        "name": "blosc",
        "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 4096},
    }
    endian = "big" if not after else "little"
    codecs = [{"name": "bytes", "configuration": {"endian": endian}}, blosc, *after]
    store = MemoryStore()
    values = np.arange(256 * 256, dtype="f8").reshape(256, 256)
    arr = await azarr.create(
        values.shape, chunks=values.shape, dtype="f8", store=store, zarr_format=3, codecs=codecs
    )
    await arr.set_basic_selection(..., values)
    partial = await azarr.open_array(store, mode="r", partial_decompress=True)
    np.testing.assert_array_equal(await partial.get_basic_selection((3, slice(10, 20))), values[3, 10:20])


async def test_a_checksum_alone_is_verified_and_cut_off() -> None:
    store = MemoryStore()
    arr = await azarr.create(
        (64,), chunks=(32,), dtype="<u2", store=store, zarr_format=3, compressors=["crc32c"]
    )
    await arr.set_basic_selection(..., np.arange(64, dtype="u2"))
    assert len(await store.get("c/0") or b"") == 32 * 2 + 4
    np.testing.assert_array_equal(await arr.get_basic_selection(), np.arange(64))
    stored = bytearray(await store.get("c/1") or b"")
    stored[0] ^= 1
    await store.set("c/1", bytes(stored))
    with pytest.raises(azarr.errors.CodecError, match=r"'c/1'.*crc32c checksum mismatch"):
        await arr.get_basic_selection()
