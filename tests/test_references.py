"""ReferenceStore: kerchunk reference sets (JSON v0/v1, Parquet) over local, S3 and HTTP
targets, range coalescing, and hostile references.

The files are real HDF5 files written by h5py, referenced from HDF5's own chunk index
(tests/archival.py); kerchunk's and VirtualiZarr's sets are checked in tests/interop.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from archival import VARIABLES, hdf5_references, write_hdf5, write_parquet_references

import azarr
from azarr import config
from azarr.errors import (
    ByteRangeError,
    InvalidReferenceError,
    ReferenceSetNotFoundError,
    ReferenceTargetError,
)
from azarr.scheduler import StoreIO, stats_for
from azarr.scheduler._coalesce import coalesce_ranges
from azarr.storage import ByteRange, LocalStore, MemoryStore
from azarr.storage._reference import ReferenceStore


# ------------------------------------------------------------------ the coalescing rule
def test_coalesce_ranges_joins_neighbours_within_the_gap() -> None:
    ranges = [ByteRange(0, 10), ByteRange(10, 20), ByteRange(25, 30), ByteRange(100, 110)]
    runs = coalesce_ranges(ranges, max_gap=5, max_bytes=1000)
    assert [(r.start, r.end, r.members) for r in runs] == [(0, 30, (0, 1, 2)), (100, 110, (3,))]
    assert [r.members for r in coalesce_ranges(ranges, max_gap=0, max_bytes=1000)] == [(0, 1), (2,), (3,)]
    assert len(coalesce_ranges(ranges, max_gap=-1, max_bytes=1000)) == 4


def test_coalesce_ranges_caps_runs_orders_and_shares_overlaps() -> None:
    ranges = [ByteRange(40, 50), ByteRange(0, 30), ByteRange(30, 40), ByteRange(35, 45), ByteRange(7, 7)]
    runs = coalesce_ranges(ranges, max_gap=0, max_bytes=40)
    assert [(r.start, r.end, r.members) for r in runs] == [(0, 40, (1, 2)), (35, 50, (3, 0))]
    big = coalesce_ranges([ByteRange(0, 100)], max_gap=0, max_bytes=10)
    assert [(r.start, r.end) for r in big] == [(0, 100)]  # one range larger than the cap: its own run
    with pytest.raises(ValueError, match="suffix"):
        coalesce_ranges([ByteRange(-5)])


async def test_get_ranges_reads_runs_and_checks_lengths(tmp_path: Path) -> None:
    (tmp_path / "blob").write_bytes(bytes(range(200)))
    io = StoreIO(LocalStore(tmp_path))
    before = io.stats.requests
    parts = await io.get_ranges("blob", [ByteRange(50, 60), ByteRange(0, 10), ByteRange(12, 20)], max_gap=4)
    assert parts is not None
    assert [bytes(p) for p in parts] == [bytes(range(50, 60)), bytes(range(10)), bytes(range(12, 20))]
    assert io.stats.requests - before == 2
    with pytest.raises(ByteRangeError, match="blob"):
        await io.get_ranges("blob", [ByteRange(190, 210)])
    assert await io.get_ranges("missing", [ByteRange(0, 1)]) is None


# ------------------------------------------------------------------ reading HDF5 through references
@pytest.fixture
def hdf5_file(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray[Any, Any]]]:
    path = tmp_path / "data" / "file.nc"
    path.parent.mkdir()
    return path, write_hdf5(path)


def _write_refs(tmp_path: Path, refs: dict[str, Any]) -> Path:
    out = tmp_path / "refs.json"
    out.write_text(json.dumps(refs))
    return out


async def test_json_references_read_bit_identical_to_h5py(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    path, expected = hdf5_file
    refs_path = _write_refs(tmp_path, hdf5_references(path, str(path)))
    group = await azarr.open_group(str(refs_path), mode="r")
    assert group.store.resolves_references  # the consolidated overlay over the ReferenceStore
    assert group.attrs.asdict() == {"title": "t"}
    for name in VARIABLES:
        arr = await group.get(name)
        got = await arr.getitem(...)
        np.testing.assert_array_equal(got, expected[name])
        assert got.dtype == expected[name].dtype
    window = await (await group.get("temperature")).getitem((slice(3, 17), 5, slice(None, None, 7)))
    np.testing.assert_array_equal(window, expected["temperature"][3:17, 5, ::7])


async def test_whole_read_coalesces_one_request_per_run(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    path, expected = hdf5_file
    refs = hdf5_references(path, str(path))
    arr = await azarr.open_array(_write_refs(tmp_path, refs), path="counts", mode="r")
    target = LocalStore(path.parent)
    stats = stats_for(target)
    nchunks = sum(
        1 for k in refs["refs"] if k.startswith("counts/") and not k.endswith((".zarray", ".zattrs"))
    )
    before = stats.requests
    np.testing.assert_array_equal(await arr.getitem(...), expected["counts"])
    assert stats.requests - before == 1  # 16 chunks written back to back: one run
    with config.set(coalesce_max_gap=-1):
        before = stats.requests
        np.testing.assert_array_equal(await arr.getitem(...), expected["counts"])
        assert stats.requests - before == nchunks
    with config.set(coalesce_max_bytes=64 * 8 * 4):
        before = stats.requests
        np.testing.assert_array_equal(await arr.getitem(...), expected["counts"])
        assert stats.requests - before == nchunks // 4  # runs of four 512-byte chunks


async def test_version_0_templates_gen_and_inline_data(tmp_path: Path) -> None:
    blob = np.arange(64, dtype="<i4")
    (tmp_path / "blob.bin").write_bytes(blob.tobytes())
    zarray = {
        "zarr_format": 2, "shape": [64], "chunks": [16], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": 0, "order": "C",
    }  # fmt: skip
    v1 = {
        "version": 1,
        "templates": {"f": str(tmp_path / "blob.bin")},
        "gen": [
            {
                "key": "x/{{i}}",
                "url": "{{f}}",
                "offset": "{{i * 64}}",
                "length": "64",
                "dimensions": {"i": {"stop": 3}},
            }
        ],
        "refs": {
            ".zgroup": '{"zarr_format": 2}',
            "x/.zarray": json.dumps(zarray),
            "x/3": "base64:" + __import__("base64").b64encode(np.full(16, 7, "<i4").tobytes()).decode(),
        },
    }
    arr = await azarr.open_array(v1, path="x", mode="r")
    np.testing.assert_array_equal(await arr.getitem(...), np.concatenate([blob[:48], np.full(16, 7)]))
    v0 = {
        ".zgroup": '{"zarr_format": 2}',
        "x/.zarray": json.dumps(zarray),
        "x/1": [str(tmp_path / "blob.bin"), 0, 64],
    }
    arr0 = await azarr.open_array(v0, path="x", mode="r")
    np.testing.assert_array_equal(await arr0.getitem(slice(16, 32)), blob[:16])
    np.testing.assert_array_equal(await arr0.getitem(slice(0, 16)), np.zeros(16))  # not in the set: fill
    whole = {**v0, "x/2": [str(tmp_path / "blob.bin")]}
    zarray_whole = dict(zarray, chunks=[64], shape=[64])
    whole["x/.zarray"] = json.dumps(zarray_whole)
    whole["x/0"] = [str(tmp_path / "blob.bin")]
    arr_whole = await azarr.open_array(whole, path="x", mode="r")
    np.testing.assert_array_equal(await arr_whole.getitem(...), blob)


async def test_consolidated_open_costs_no_request_beyond_the_set(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    path, expected = hdf5_file
    refs_path = _write_refs(tmp_path, hdf5_references(path, str(path)))
    group = await azarr.open_consolidated(str(refs_path))
    assert sorted([name async for name in group.array_keys()]) == sorted(VARIABLES)
    np.testing.assert_array_equal(await (await group.get("level")).getitem(...), expected["level"])


def test_sync_api_and_xarray_engine(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    import xarray as xr

    import azarr.sync

    path, expected = hdf5_file
    refs_path = _write_refs(tmp_path, hdf5_references(path, str(path)))
    arr = azarr.sync.open_array(str(refs_path), path="temperature", mode="r")
    np.testing.assert_array_equal(arr[...], expected["temperature"])
    ds = xr.open_dataset(str(refs_path), engine="azarr", mask_and_scale=False)  # raw values, as h5py
    for name in VARIABLES:
        np.testing.assert_array_equal(ds[name].values, expected[name])
    assert ds["level"].dims == ("level",)
    assert ds["temperature"].dims == ("temperature_d0", "temperature_d1", "temperature_d2")
    chunked = xr.open_dataset(str(refs_path), engine="azarr", chunks={}, mask_and_scale=False)
    np.testing.assert_array_equal(chunked["temperature"].values, expected["temperature"])


async def test_parquet_references_load_lazily(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    path, expected = hdf5_file
    out = tmp_path / "refs.parq"
    write_parquet_references(hdf5_references(path, str(path)), out, record_size=7)
    store = ReferenceStore(str(out))
    group = await azarr.open_group(store, mode="r")
    for name in VARIABLES:
        np.testing.assert_array_equal(await (await group.get(name)).getitem(...), expected[name])
    with config.set(reference_parquet_cache=1):
        small = ReferenceStore(str(out))
        arr = await azarr.open_array(small, path="counts", mode="r")
        np.testing.assert_array_equal(await arr.getitem(...), expected["counts"])
        table = small._table.value
        assert table is not None and len(table._records) == 1  # type: ignore[union-attr]
    keys = [k async for k in store.list_prefix("counts")]
    assert len([k for k in keys if not k.endswith((".zarray", ".zattrs"))]) == 1000 // 64 + 1


# ------------------------------------------------------------------ remote targets
@pytest.mark.s3
async def test_targets_on_s3_share_the_bucket_budget(
    tmp_path: Path,
    hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]],
    seaweedfs: Any,
    s3_bucket: str,
) -> None:
    from azarr.storage import S3Store

    path, expected = hdf5_file
    bucket_store = S3Store(s3_bucket, storage_options=seaweedfs.storage_options)
    await bucket_store.set("nc/file.nc", path.read_bytes())
    refs = hdf5_references(path, f"s3://{s3_bucket}/nc/file.nc")
    await bucket_store.set("refs/refs.json", json.dumps(refs).encode())
    url = f"s3://{s3_bucket}/refs/refs.json"
    ds_store = azarr.storage.from_url(
        url, storage_options={**seaweedfs.storage_options, "remote_options": seaweedfs.storage_options}
    )
    group = await azarr.open_group(ds_store, mode="r")
    for name in VARIABLES:
        np.testing.assert_array_equal(await (await group.get(name)).getitem(...), expected[name])
    assert isinstance(ds_store, ReferenceStore)
    target, key = ds_store.target(f"s3://{s3_bucket}/nc/file.nc", "k")
    assert (
        key == "nc/file.nc"
        and target.spec == S3Store(s3_bucket, storage_options=seaweedfs.storage_options).spec
    )
    await bucket_store.close()


@pytest.mark.http
async def test_targets_over_http(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]], http_server: Any
) -> None:
    path, expected = hdf5_file
    folder = http_server.root / f"refs-{tmp_path.name}"
    folder.mkdir()
    shutil.copy(path, folder / "file.nc")
    refs = hdf5_references(path, f"{http_server.url}/{folder.name}/file.nc")
    (folder / "refs.json").write_text(json.dumps(refs))
    group = await azarr.open_group(f"{http_server.url}/{folder.name}/refs.json", mode="r")
    for name in VARIABLES:
        np.testing.assert_array_equal(await (await group.get(name)).getitem(...), expected[name])


# ------------------------------------------------------------------ hostile references
def _one_chunk_refs(entry: Any, **extra: Any) -> dict[str, Any]:
    zarray = {
        "zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": 0, "order": "C",
    }  # fmt: skip
    return {
        "version": 1,
        "refs": {".zgroup": '{"zarr_format": 2}', "x/.zarray": json.dumps(zarray), "x/0": entry},
        **extra,
    }


@pytest.mark.parametrize(
    ("entry", "error", "match"),
    [
        (["BLOB", -1, 16], InvalidReferenceError, "offset -1"),
        (["BLOB", 0, -16], InvalidReferenceError, "length -16"),
        (["BLOB", "0", 16], InvalidReferenceError, "integer"),
        (["BLOB", 2**62, 2**62], InvalidReferenceError, "out of range"),
        (["BLOB", 10, 16], ByteRangeError, "ends before byte 26"),
        (["BLOB", 1000, 16], ByteRangeError, "ends before"),
        (["BLOB", 0], InvalidReferenceError, r"\[url, offset, length\]"),
        (42, InvalidReferenceError, "expected data"),
        ("base64:!!!", InvalidReferenceError, "base64"),
        (["{{nope}}", 0, 16], InvalidReferenceError, "template"),
        # lengths far past the file: refused, not allocated (a MemoryError before)
        (["BLOB", 0, 2**40], ByteRangeError, "ends before"),
        (["BLOB", 8, 2**62], ByteRangeError, "ends before"),
        (["BLOB\x00", 0, 16], InvalidReferenceError, "NUL"),
        # a whole-object reference to nothing: an error as for a range, not fill_value
        (["MISSING"], InvalidReferenceError, "does not exist"),
        (["MISSING", 0, 16], InvalidReferenceError, "does not exist"),
    ],
)
async def test_hostile_entries_get_typed_errors(tmp_path: Path, entry: Any, error: type, match: str) -> None:
    (tmp_path / "blob").write_bytes(bytes(16))
    if isinstance(entry, list) and entry[0].rstrip("\x00") in ("BLOB", "MISSING"):
        entry = [str(tmp_path / entry[0].lower()), *entry[1:]]
    arr = await azarr.open_array(_one_chunk_refs(entry), path="x", mode="r")
    with pytest.raises(error, match=match):
        await arr.getitem(...)


def _parquet_set(
    folder: Path, columns: dict[str, list[Any]], *, patch: tuple[bytes, bytes] | None = None
) -> Path:
    """A Parquet reference directory of one 4-element int32 array ``x`` in one chunk, its
    record file holding ``columns`` (uncompressed, so ``patch`` can replace bytes in it)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    zarray = {
        "zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": 0, "order": "C",
    }  # fmt: skip
    (folder / "x").mkdir(parents=True)
    index = {"metadata": {".zgroup": {"zarr_format": 2}, "x/.zarray": zarray}, "record_size": 4}
    (folder / ".zmetadata").write_text(json.dumps(index))
    pq.write_table(pa.table(columns), folder / "x" / "refs.0.parq", compression="none")
    if patch is not None:
        record = folder / "x" / "refs.0.parq"
        data = record.read_bytes()
        assert patch[0] in data
        record.write_bytes(data.replace(*patch))
    return folder


@pytest.mark.parametrize(
    ("columns", "patch", "error", "match"),
    [
        # found by fuzzing record files: each raised a bare MemoryError, ValueError or UnicodeDecodeError
        ({"path": ["BLOB"], "offset": [0], "size": [2**63 - 1]}, None, ByteRangeError, "ends before"),
        ({"path": ["BLOB"], "offset": [2**62], "size": [2**62]}, None, InvalidReferenceError, "out of range"),
        ({"path": ["BLOB\x00"], "offset": [0], "size": [16]}, None, InvalidReferenceError, "NUL"),
        (
            {"path": ["BLOB"], "offset": [0], "size": [16]},
            (b"blob", b"bl\xb0b"),
            InvalidReferenceError,
            "columns",
        ),
        (
            {"path": ["BLOB"], "offset": [0], "size": [16]},
            (b"size", b"s\xb0ze"),
            InvalidReferenceError,
            "columns",
        ),
    ],
)
async def test_hostile_parquet_records_get_typed_errors(
    tmp_path: Path, columns: dict[str, list[Any]], patch: tuple[bytes, bytes] | None, error: type, match: str
) -> None:
    (tmp_path / "blob").write_bytes(bytes(16))
    columns = {k: [str(tmp_path / "blob") + v[4:] if v.startswith("BLOB") else v for v in values]
               if k == "path" else values for k, values in columns.items()}  # fmt: skip
    arr = await azarr.open_array(
        ReferenceStore(str(_parquet_set(tmp_path / "set", columns, patch=patch))), path="x"
    )
    with pytest.raises(error, match=match):
        await arr.getitem(...)


async def test_a_missing_reference_set_is_a_typed_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(ReferenceSetNotFoundError, match="no reference set") as raised:
        await azarr.open_group(ReferenceStore(str(tmp_path / "nothing")), mode="r")
    assert isinstance(raised.value, FileNotFoundError)  # fsspec's ReferenceFileSystem raises one


async def test_targets_outside_the_allowed_set_are_refused(tmp_path: Path, http_server: Any) -> None:
    (tmp_path / "blob").write_bytes(bytes(16))
    refs = _one_chunk_refs(["s3://someone-elses-bucket/secret", 0, 16])
    (tmp_path / "refs.json").write_text(json.dumps(refs))
    arr = await azarr.open_array(str(tmp_path / "refs.json"), path="x", mode="r")
    with pytest.raises(ReferenceTargetError, match="outside the allowed targets"):
        await arr.getitem(...)
    escaping = _one_chunk_refs([str(tmp_path / "sub" / ".." / "blob"), 0, 16])
    (tmp_path / "escape.json").write_text(json.dumps(escaping))
    arr = await azarr.open_array(str(tmp_path / "escape.json"), path="x", mode="r")
    with pytest.raises(ReferenceTargetError, match=r"'\.\.'"):
        await arr.getitem(...)
    # A mapping may name anything unless allowed_targets says otherwise.
    store = ReferenceStore(
        _one_chunk_refs([str(tmp_path / "blob"), 0, 16]), allowed_targets=["https://x.example/"]
    )
    arr = await azarr.open_array(store, path="x", mode="r")
    with pytest.raises(ReferenceTargetError):
        await arr.getitem(...)
    with config.set(reference_allowed_targets=[f"file://{tmp_path}"]):
        ok = await azarr.open_array(_one_chunk_refs([str(tmp_path / "blob"), 0, 16]), path="x", mode="r")
        np.testing.assert_array_equal(await ok.getitem(...), np.zeros(4))


async def test_too_many_references_are_refused_before_they_are_built(tmp_path: Path) -> None:
    gen = [{"key": "x/{{i}}", "url": "f", "offset": "0", "length": "1", "dimensions": {"i": {"stop": 10**8}}}]
    with pytest.raises(InvalidReferenceError, match="reference_max_refs"):
        await azarr.open_array({**_one_chunk_refs("abcd"), "gen": gen}, path="x", mode="r")
    (tmp_path / "big.json").write_text(json.dumps(_one_chunk_refs("a" * 5000)))
    with (
        config.set(reference_max_bytes=1000),
        pytest.raises(InvalidReferenceError, match="reference_max_bytes"),
    ):
        await azarr.open_array(str(tmp_path / "big.json"), path="x", mode="r")
    bad_gen = [
        {
            "key": "x/{{i}}",
            "url": "f",
            "offset": "{{__import__('os')}}",
            "length": "1",
            "dimensions": {"i": [0]},
        }
    ]
    with pytest.raises(InvalidReferenceError, match="gen expression"):
        await azarr.open_array({**_one_chunk_refs("abcd"), "gen": bad_gen}, path="x", mode="r")


def test_reference_store_is_read_only_and_pickles_as_its_spec(tmp_path: Path) -> None:
    import pickle

    (tmp_path / "r.json").write_text(json.dumps(_one_chunk_refs("abcd")))
    store = azarr.storage.from_url(str(tmp_path / "r.json"))
    assert isinstance(store, ReferenceStore) and store.read_only
    clone = pickle.loads(pickle.dumps(store))
    assert clone.spec == store.spec
    assert isinstance(azarr.storage.make_store({"a": b"1"}), MemoryStore)


# ------------------------------------------------------------------ dask, the loader and the CLI
def test_dask_loader_and_cli_on_a_reference_set(
    tmp_path: Path, hdf5_file: tuple[Path, dict[str, np.ndarray[Any, Any]]]
) -> None:
    import dask
    from click.testing import CliRunner

    from azarr.cli import cli as azarr_cli
    from azarr.dask import from_azarr

    path, expected = hdf5_file
    refs_path = _write_refs(tmp_path, hdf5_references(path, str(path)))
    darr = from_azarr(str(refs_path), path="temperature")
    with dask.config.set(scheduler="threads"):
        np.testing.assert_array_equal(darr.compute(), expected["temperature"])
        assert float(darr.sum().compute()) == pytest.approx(float(expected["temperature"].sum()), rel=1e-5)

    async def one_epoch() -> np.ndarray[Any, Any]:
        from azarr.loader import BatchLoader

        arr = await azarr.open_array(str(refs_path), path="counts", mode="r")
        loader = BatchLoader(arr, batch_size=100, shuffle=True, seed=1)
        return np.concatenate([batch async for batch in loader])

    samples = __import__("asyncio").run(one_epoch())
    np.testing.assert_array_equal(np.sort(samples), np.sort(expected["counts"]))

    def cli(*args: str) -> str:
        result = CliRunner().invoke(azarr_cli, list(args))
        assert result.exit_code == 0, result.output
        return result.output

    assert "temperature (40, 30, 50) float32" in cli("tree", str(refs_path))
    assert json.loads(cli("info", str(refs_path), "--json"))["kind"] == "group"
    assert "48 chunks: ok" in cli("verify", str(refs_path))


async def test_parquet_sets_of_10_8_chunks_load_only_what_is_read(tmp_path: Path) -> None:
    """An array of 10^8 chunks (record files of 10^4 references): reading a few chunks reads
    their record files only, and a hostile record file gets a typed error."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    blob = np.arange(4, dtype="<i4")
    (tmp_path / "blob").write_bytes(blob.tobytes())
    root = tmp_path / "huge.parq"
    (root / "x").mkdir(parents=True)
    zarray = {
        "zarr_format": 2, "shape": [10**8 * 4], "chunks": [4], "dtype": "<i4",
        "compressor": None, "filters": None, "fill_value": -1, "order": "C",
    }  # fmt: skip
    (root / ".zmetadata").write_text(
        json.dumps({"metadata": {".zgroup": {"zarr_format": 2}, "x/.zarray": zarray}, "record_size": 10**4})
    )
    rows = 10**4
    table = pa.table(
        {
            "path": pa.array([str(tmp_path / "blob")] * rows, pa.string()),
            "offset": pa.array([0] * rows, pa.int64()),
            "size": pa.array([16] * rows, pa.int64()),
            "raw": pa.array([None] * rows, pa.binary()),
        }
    )
    for number in (0, 5000):
        pq.write_table(table, root / "x" / f"refs.{number}.parq")
    store = ReferenceStore(f"{root}")
    arr = await azarr.open_array(store, path="x", mode="r")
    np.testing.assert_array_equal(await arr.getitem(slice(0, 8)), np.tile(blob, 2))
    far = 5000 * rows * 4
    np.testing.assert_array_equal(await arr.getitem(slice(far, far + 4)), blob)
    np.testing.assert_array_equal(await arr.getitem(slice(4 * rows, 4 * rows + 4)), np.full(4, -1))  # no file
    table_ = store._table.value
    assert table_ is not None and len(table_._records) == 2  # type: ignore[union-attr]
    bad = pa.table({"path": pa.array(["x"] * (rows + 1), pa.string())})
    pq.write_table(bad, root / "x" / "refs.7.parq")
    with pytest.raises(InvalidReferenceError, match="more than the record_size"):
        await arr.getitem(slice(7 * rows * 4, 7 * rows * 4 + 4))
    (root / ".zmetadata").write_text(json.dumps({"metadata": {}, "record_size": 10**9}))
    with pytest.raises(InvalidReferenceError, match="record_size"):
        await azarr.open_group(ReferenceStore(f"{root}"), mode="r")
