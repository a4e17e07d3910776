"""Icechunk repositories made by icechunk + zarr-python 3.4, read by azarr: run in the Icechunk venv.

``python icechunk_cases.py OUT CONFIG_JSON`` writes ``OUT/results.json``: one entry per check,
``{"ok": bool, "detail": str}``. CONFIG_JSON gives ``{"s3": {"endpoint_url", "key", "secret",
"bucket"} | null}``. For each place (local disk; SeaweedFS when given) it writes:

* a NetCDF4 file (h5netcdf): ``temp`` float32 uncompressed, ``pres`` int16 zlib + shuffle-free,
  16x16 chunks, and a raw little-endian int32 file;
* a repository (icechunk 2.3, zarr-python 3.4) whose ``main`` branch holds native arrays
  (zstd, chunk files in ``chunks/``), inline chunks (small), virtual arrays pointing at the
  NetCDF4 chunks (offsets from h5py) and the raw file, and an xarray dataset; tag ``v1``;
  a second commit on ``main``; a branch ``dev`` from the first snapshot with its own change.

Then azarr reads every array (IcechunkStore, the ``icechunk://`` URL, xarray engine="azarr")
and compares it bit for bit with zarr-python reading the same session through icechunk's
own store, checks branch/tag/snapshot selection, typed errors, and counts requests.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5netcdf
import h5py
import icechunk as ic
import numpy as np
import xarray as xr
import zarr

import azarr
import azarr.sync
from azarr.errors import (
    CorruptRepositoryError,
    ReferenceTargetError,
    RefNotFoundError,
    RepositoryNotFoundError,
)
from azarr.scheduler import stats_for
from azarr.storage import IcechunkStore

warnings.simplefilter("ignore")
RESULTS: dict[str, dict[str, Any]] = {}


def check(name: str, fn: Callable[[], str | None]) -> None:
    try:
        detail = fn()
        RESULTS[name] = {"ok": True, "detail": detail or ""}
    except Exception:  # every failure is reported, not raised: the other checks still run
        RESULTS[name] = {"ok": False, "detail": traceback.format_exc()[-3000:]}


def expect(kind: type[Exception], fn: Callable[[], object], what: str) -> str:
    """The message of the ``kind`` error ``fn()`` raises; AssertionError naming ``what`` if none."""
    try:
        fn()
    except kind as exc:
        return str(exc)
    raise AssertionError(f"{what}: no {kind.__name__}")


def same(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> None:
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.tobytes() == b.tobytes(), "values differ"


# ---------------------------------------------------------------------- the data
def write_files(data_dir: Path) -> dict[str, Any]:
    """The NetCDF4 and raw files, and each virtual chunk's (offset, length) in them."""
    data_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(32)
    temp = rng.standard_normal((64, 48)).astype("<f4")
    pres = rng.integers(-3000, 3000, (64, 48)).astype("<i2")
    with h5netcdf.File(data_dir / "air.nc", "w") as f:
        f.dimensions = {"y": 64, "x": 48}
        f.create_variable("temp", ("y", "x"), "<f4", chunks=(16, 16), data=temp)
        f.create_variable("pres", ("y", "x"), "<i2", chunks=(16, 16), compression="gzip", data=pres)
    refs: dict[str, dict[tuple[int, int], tuple[int, int]]] = {}
    with h5py.File(data_dir / "air.nc", "r") as f:
        for name in ("temp", "pres"):
            ds = f[name]
            refs[name] = {}
            for i in range(4):
                for j in range(3):
                    info = ds.id.get_chunk_info_by_coord((i * 16, j * 16))
                    refs[name][(i, j)] = (int(info.byte_offset), int(info.size))
    raw = np.arange(1000, dtype="<i4")
    (data_dir / "raw.bin").write_bytes(b"HEADER--" + raw.tobytes())
    return {"temp": temp, "pres": pres, "raw": raw, "refs": refs}


def make_repository(
    storage: Any, container: Any, credentials: Any, files: dict[str, Any], data_url: str
) -> dict[str, Any]:
    """The repository: snapshots, tag v1, branch dev; returns what was written where."""
    config = ic.RepositoryConfig.default()
    config.inline_chunk_threshold_bytes = 40  # "small" chunks inline, the rest chunk files
    config.set_virtual_chunk_container(container)
    repo = ic.Repository.create(
        storage,
        config=config,
        authorize_virtual_chunk_access=ic.containers_credentials({container.url_prefix: credentials}),
    )
    session = repo.writable_session("main")
    root = zarr.open_group(session.store, mode="w", zarr_format=3)
    root.attrs["title"] = "azarr icechunk test"
    rng = np.random.default_rng(7)
    native = rng.standard_normal((100, 80))
    a = root.create_array(
        "native", shape=native.shape, chunks=(25, 20), dtype="f8", dimension_names=["y", "x"]
    )
    a[:] = native
    small = np.arange(12, dtype="<i2")
    s = root.create_array("small", shape=(12,), chunks=(4,), dtype="<i2", compressors=None)
    s[:] = small
    grid = root.create_group("grid")
    part = grid.create_array(
        "partial", shape=(30, 30), chunks=(10, 10), dtype="u1", fill_value=9, compressors=None
    )
    part[:10, :10] = 1  # one written chunk, eight at the fill value
    virtual = root.create_group("virtual")
    virtual.create_array(
        "temp",
        shape=(64, 48),
        chunks=(16, 16),
        dtype="<f4",
        compressors=None,
        fill_value=0,
        dimension_names=["y", "x"],
    )
    virtual.create_array(
        "pres",
        shape=(64, 48),
        chunks=(16, 16),
        dtype="<i2",
        compressors=[zarr.codecs.numcodecs.Zlib()],
        fill_value=0,
        dimension_names=["y", "x"],
    )
    virtual.create_array(
        "raw",
        shape=(1000,),
        chunks=(100,),
        dtype="<i4",
        compressors=None,
        fill_value=0,
        dimension_names=["n"],
    )
    for name in ("temp", "pres"):
        for (i, j), (offset, length) in files["refs"][name].items():
            session.store.set_virtual_ref(
                f"virtual/{name}/c/{i}/{j}", f"{data_url}/air.nc", offset=offset, length=length
            )
    for i in range(10):
        session.store.set_virtual_ref(
            f"virtual/raw/c/{i}", f"{data_url}/raw.bin", offset=8 + 400 * i, length=400
        )
    # Hostile references: another scheme than the repository's, and '..' out of the data folder.
    foreign = "s3://elsewhere/secret.bin" if data_url.startswith("file:") else "file:///etc/hostname"
    for name, target in (("escape", foreign), ("dotdot", f"{data_url}/../../../etc/hostname")):
        grid.create_array(name, shape=(4,), chunks=(4,), dtype="u1", compressors=None, fill_value=0)
        session.store.set_virtual_ref(
            f"grid/{name}/c/0", target, offset=0, length=4, validate_container=False
        )
    first = session.commit("first")
    repo.create_tag("v1", first)
    ds = xr.Dataset(
        {"t2m": (("time", "lat"), np.arange(40, dtype="f4").reshape(8, 5))},
        coords={"time": np.arange(8, dtype="i8"), "lat": np.linspace(-10, 10, 5)},
        attrs={"source": "xarray"},
    )
    session = repo.writable_session("main")
    ds.to_zarr(session.store, group="ds", zarr_format=3, consolidated=False, mode="w")
    z = zarr.open_array(session.store, path="native", mode="r+")
    z[:] = native + 1
    second = session.commit("second")
    repo.create_branch("dev", first)
    session = repo.writable_session("dev")
    z = zarr.open_array(session.store, path="native", mode="r+")
    z[0, 0] = -1.0
    dev = session.commit("dev change")
    return {
        "repo": repo,
        "first": first,
        "second": second,
        "dev": dev,
        "native": native,
        "small": small,
        "ds": ds,
    }


def zarr_read(session: Any, path: str) -> np.ndarray[Any, Any]:
    return np.asarray(zarr.open_array(session.store, path=path, mode="r")[...])


# ---------------------------------------------------------------------- the checks
ARRAYS = ["native", "small", "grid/partial", "virtual/temp", "virtual/pres", "virtual/raw"]


def run_place(
    place: str,
    url: str,
    options: dict[str, Any],
    made: dict[str, Any],
    files: dict[str, Any],
    remote: dict[str, Any],
) -> None:
    repo = made["repo"]
    kw = {"storage_options": options, "remote_options": remote}

    def reads_every_array() -> str:
        session = repo.readonly_session("main")
        store = IcechunkStore(url, branch="main", **kw)

        async def go() -> dict[str, np.ndarray[Any, Any]]:
            group = await azarr.open_group(store, mode="r")
            out = {}
            for path in ARRAYS:
                arr = (
                    await group.get(path)
                    if "/" not in path
                    else await azarr.open_array(store, path=path, mode="r")
                )
                out[path] = await arr.get_basic_selection(...)
            return out

        got = asyncio.run(go())
        for path in ARRAYS:
            same(got[path], zarr_read(session, path))
        same(got["native"], made["native"] + 1)
        same(got["small"], made["small"])
        same(got["virtual/temp"], files["temp"])
        same(got["virtual/pres"], files["pres"])
        same(got["virtual/raw"], files["raw"])
        expected = np.full((30, 30), 9, "u1")
        expected[:10, :10] = 1
        same(got["grid/partial"], expected)
        return f"{len(ARRAYS)} arrays, snapshot {store.snapshot_id}"

    check(f"{place}/reads_every_array", reads_every_array)

    def selections() -> str:
        session = repo.readonly_session("main")
        z = zarr.open_array(session.store, path="virtual/temp", mode="r")
        a = azarr.sync.open_array(IcechunkStore(url, **kw), path="virtual/temp", mode="r")
        for sel in [(slice(5, 40), slice(3, 47, 2)), (7, slice(None)), (slice(60, 64), 47)]:
            same(np.asarray(a[sel]), np.asarray(z[sel]))
        idx = [0, 17, 33, 63]
        same(np.asarray(a.oindex[idx, [1, 40]]), np.asarray(z.oindex[idx, [1, 40]]))
        return "basic and orthogonal selections"

    check(f"{place}/selections", selections)

    def url_form() -> str:
        opts = {**options, "tag": "v1", "remote_options": remote}
        a = azarr.sync.open_array(f"icechunk://{url}", path="native", mode="r", storage_options=opts)
        same(np.asarray(a[...]), made["native"])
        g = azarr.sync.open_group(
            f"icechunk://{url}", mode="r", storage_options={**options, "branch": "main"}
        )
        assert g.attrs["title"] == "azarr icechunk test"
        assert sorted(g.group_keys()) == ["ds", "grid", "virtual"], sorted(g.group_keys())
        assert sorted(g.array_keys()) == ["native", "small"], sorted(g.array_keys())
        return "icechunk:// URL, tag v1"

    check(f"{place}/url_form", url_form)

    def refs() -> str:
        for sel, expected in [
            ({"tag": "v1"}, made["native"]),
            ({"snapshot_id": made["first"]}, made["native"]),
            ({"branch": "main"}, made["native"] + 1),
            ({}, made["native"] + 1),
        ]:
            a = azarr.sync.open_array(IcechunkStore(url, **sel, **kw), path="native", mode="r")
            same(np.asarray(a[...]), expected)
        dev = azarr.sync.open_array(IcechunkStore(url, branch="dev", **kw), path="native", mode="r")
        expected = made["native"].copy()
        expected[0, 0] = -1.0
        same(np.asarray(dev[...]), expected)
        assert dev.store.snapshot_id == made["dev"], dev.store.snapshot_id
        same(np.asarray(dev[...]), zarr_read(repo.readonly_session("dev"), "native"))
        # ds only exists from the second snapshot on
        open_ds = lambda: azarr.sync.open_group(IcechunkStore(url, tag="v1", **kw), path="ds", mode="r")  # noqa: E731
        expect(FileNotFoundError, open_ds, "ds at tag v1")
        return "tag, snapshot, branch main/dev, default main"

    check(f"{place}/branch_tag_snapshot", refs)

    def xarray_engine() -> str:
        session = repo.readonly_session("main")
        expected = xr.open_dataset(
            session.store, engine="zarr", group="ds", consolidated=False, zarr_format=3
        )
        got = xr.open_dataset(IcechunkStore(url, **kw), engine="azarr", group="ds")
        xr.testing.assert_identical(got.load(), expected.load())
        via_url = xr.open_dataset(
            f"icechunk://{url}",
            engine="azarr",
            group="virtual",
            storage_options={**options, "remote_options": remote},
        )
        same(via_url["temp"].values, files["temp"])
        same(via_url["pres"].values, files["pres"])
        assert via_url["temp"].dims == ("y", "x"), via_url["temp"].dims
        return "dataset identical to engine='zarr'; virtual group through the URL"

    check(f"{place}/xarray_engine", xarray_engine)

    def requests_counted() -> str:
        store = IcechunkStore(url, **kw)
        a = azarr.sync.open_array(store, path="virtual/temp", mode="r")
        data_store, _ = store._targets.resolve(f"{_REMOTE_DATA[place]}/air.nc", "test")
        stats = stats_for(data_store)
        stats.reset()
        same(np.asarray(a[...]), files["temp"])
        virtual_requests = stats.requests
        # The 12 chunks of temp are laid out one after another in air.nc: a handful of runs.
        assert 1 <= virtual_requests <= 3, virtual_requests
        raw = azarr.sync.open_array(store, path="virtual/raw", mode="r")
        stats.reset()
        same(np.asarray(raw[...]), files["raw"])
        raw_requests = stats.requests
        assert raw_requests == 1, raw_requests  # 10 adjacent ranges of raw.bin: one request
        native = azarr.sync.open_array(store, path="native", mode="r")
        repo_stats = stats_for(store.repository_store())
        repo_stats.reset()
        native[...]
        native_requests = repo_stats.requests
        assert native_requests == 16, native_requests  # one chunk file per chunk
        return f"virtual temp 12 chunks: {virtual_requests} requests; raw 10 chunks: {raw_requests}; native 16 chunks: {native_requests}"

    check(f"{place}/requests_counted", requests_counted)

    def typed_errors() -> str:
        for sel in (
            {"branch": "nope"},
            {"tag": "nope"},
            {"snapshot_id": "AAAAAAAAAAAAAAAAAAAA"},
            {"snapshot_id": "bad"},
        ):
            store = IcechunkStore(url, **sel, **kw)
            message = expect(RefNotFoundError, lambda s=store: azarr.sync.open_group(s, mode="r"), str(sel))
            assert url.split("://")[-1].split("/")[0] in message, message
        missing = IcechunkStore(url + "-missing", **kw)
        message = expect(RepositoryNotFoundError, lambda: azarr.sync.open_group(missing, mode="r"), "missing")
        assert "-missing" in message, message

        def read(path: str, **extra: Any) -> np.ndarray[Any, Any]:
            return np.asarray(
                azarr.sync.open_array(IcechunkStore(url, **extra, **kw), path=path, mode="r")[...]
            )

        message = expect(ReferenceTargetError, lambda: read("virtual/raw", allowed_targets=["gs"]), "gs only")
        assert "raw.bin" in message, message
        # icechunk resolves '..' in a file:// virtual URL before azarr sees it (file:///etc/hostname):
        # a prefix in allowed_targets keeps references inside the data folder.
        inside = {"allowed_targets": [_REMOTE_DATA[place] + "/"]}
        for name, extra in (("escape", {}), ("dotdot", inside)):
            message = expect(ReferenceTargetError, lambda n=name, e=extra: read(f"grid/{n}", **e), name)
            # file:// URLs arrive with '..' resolved (outside the prefix); s3:// ones keep it
            assert "outside the allowed targets" in message or "'..' segments" in message, message
            assert f"grid/{name}/c/0" in message, message
        same(read("virtual/raw", **inside), files["raw"])  # what the prefix allows still reads
        expect(ValueError, lambda: IcechunkStore(url, branch="main", tag="v1"), "branch and tag")
        return "missing branch/tag/snapshot, bad snapshot id, missing repository, disallowed and escaping targets"

    check(f"{place}/typed_errors", typed_errors)

    def pickled_branch_pins_snapshot() -> str:
        import pickle

        store = IcechunkStore(url, branch="dev", **kw)
        a = azarr.sync.open_array(store, path="native", mode="r")
        a[0, 0]
        copy = pickle.loads(pickle.dumps(store))
        assert isinstance(copy, IcechunkStore)
        b = azarr.sync.open_array(copy, path="native", mode="r")
        assert float(b[0, 0]) == -1.0
        assert copy.snapshot_id == made["dev"], copy.snapshot_id
        return "a pickled store reads the snapshot its branch had"

    check(f"{place}/pickle", pickled_branch_pins_snapshot)


_REMOTE_DATA: dict[str, str] = {}


def corrupt_local(path: Path, url_options: dict[str, Any]) -> None:
    def corrupt() -> str:
        broken = path.parent / "broken-repo"
        if broken.exists():
            shutil.rmtree(broken)
        shutil.copytree(path, broken)
        for snapshot in (broken / "snapshots").iterdir():
            snapshot.write_bytes(b"ICE" + b"\x00garbage" * 10)
        store = IcechunkStore(str(broken), **url_options)
        message = expect(CorruptRepositoryError, lambda: azarr.sync.open_group(store, mode="r"), "garbage")
        assert "broken-repo" in message, message
        return message.splitlines()[0][:200]

    check("local/corrupt_repository", corrupt)


def main() -> None:
    out = Path(sys.argv[1])
    cfg = json.loads(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    # ---- local disk
    data_dir = out / "data"
    files = write_files(data_dir)
    data_url = f"file://{data_dir}"
    _REMOTE_DATA["local"] = data_url
    container = ic.VirtualChunkContainer(data_url + "/", ic.local_filesystem_store(str(data_dir)))
    local_access = ic.credentials.LocalFileSystemAccess
    made = make_repository(
        ic.local_filesystem_storage(str(out / "repo")), container, local_access, files, data_url
    )
    run_place("local", str(out / "repo"), {}, made, files, {})
    corrupt_local(out / "repo", {})
    # ---- S3 (SeaweedFS)
    s3 = cfg.get("s3")
    if s3:
        import s3fs

        fs = s3fs.S3FileSystem(
            key=s3["key"], secret=s3["secret"], client_kwargs={"endpoint_url": s3["endpoint_url"]}
        )
        bucket = s3["bucket"]
        for name in ("air.nc", "raw.bin"):
            fs.put_file(str(data_dir / name), f"{bucket}/data/{name}")
        data_url = f"s3://{bucket}/data"
        _REMOTE_DATA["s3"] = data_url
        store_cfg = ic.s3_store(
            region="us-east-1", endpoint_url=s3["endpoint_url"], allow_http=True, force_path_style=True
        )
        container = ic.VirtualChunkContainer(f"s3://{bucket}/data/", store_cfg)
        credentials = ic.s3_credentials(access_key_id=s3["key"], secret_access_key=s3["secret"])
        storage = ic.s3_storage(
            bucket=bucket,
            prefix="repo",
            region="us-east-1",
            endpoint_url=s3["endpoint_url"],
            allow_http=True,
            force_path_style=True,
            access_key_id=s3["key"],
            secret_access_key=s3["secret"],
        )
        made = make_repository(storage, container, credentials, files, data_url)
        options = {"endpoint_url": s3["endpoint_url"], "key": s3["key"], "secret": s3["secret"]}
        run_place("s3", f"s3://{bucket}/repo", options, made, files, options)
    versions = {"icechunk": ic.__version__, "zarr": zarr.__version__, "python": sys.version.split()[0]}
    (out / "results.json").write_text(json.dumps({"versions": versions, "checks": RESULTS}, indent=1))


if __name__ == "__main__":
    main()
