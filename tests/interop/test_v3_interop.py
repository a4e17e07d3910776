"""Zarr v3 interop, both ways and bit-exact, with zarr-python 3.4 and TensorStore's zarr3 driver.

The corpus (``v3_scripts/v3_cases.py``: every data type x codec chains incl. ``transpose`` +
big-endian ``bytes`` + ``blosc`` + ``crc32c`` x both chunk key encodings x C/F layouts x edge
chunks and unwritten chunks) is written once per session by zarr-python 3.4 and TensorStore in
their venv (``refenv_v3.py``, Python 3.12) and read here; azarr writes the same cases and the
reference script reads them with both and validates every ``zarr.json`` with zarr-metadata.
Groups with attributes and inline consolidated metadata, and an xarray dataset written by
xarray + zarr-python 3.4 (``engine="azarr"`` against ``engine="zarr"``), go the same way.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
import azarr.sync
from tests.util import load_module

from .refenv import RefEnvError
from .refenv_v3 import ensure_v3_reference_python

pytestmark = pytest.mark.interop

SCRIPTS = Path(__file__).resolve().parent / "v3_scripts"


CASES = load_module(SCRIPTS / "v3_cases.py", "azarr_v3_cases")


@pytest.fixture(scope="session")
def zarr3_python() -> Path:
    try:
        return ensure_v3_reference_python(lambda msg: print(msg, file=sys.stderr, flush=True))
    except RefEnvError as exc:
        pytest.fail(f"Zarr v3 reference environment unavailable:\n{exc}", pytrace=False)


def _run(python: Path, *args: str | Path) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python), str(SCRIPTS / "ref_v3.py"), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="session")
def v3_exchange(zarr3_python: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """azarr writes its corpus, then one reference process writes the corpus with zarr-python 3.4
    and TensorStore and reads azarr's with both (one interpreter start, ~10 s)."""
    root = tmp_path_factory.mktemp("v3-corpus")
    _write_azarr_corpus(root)
    return {"root": root, **_run(zarr3_python, "both", root)}


@pytest.fixture(scope="session")
def v3_corpus(v3_exchange: dict[str, Any]) -> Iterator[Path]:
    """The corpus as zarr-python 3.4 and TensorStore wrote it."""
    assert v3_exchange["write"]["ts_refused"] == {}, v3_exchange["write"]["ts_refused"]
    yield v3_exchange["root"]


def _read_all(root: Path, writer: str) -> dict[str, str]:
    failures: dict[str, str] = {}
    for case in CASES.cases():
        if writer == "ts" and not case["ts"]:
            continue
        try:
            array = azarr.sync.open_array(str(root / writer / case["name"]), mode="r")
            got = array[...]
        except Exception as exc:
            failures[case["name"]] = f"{type(exc).__name__}: {exc}"
            continue
        if array.zarr_format != 3 or not CASES.same(got, CASES.expected(case)):
            failures[case["name"]] = f"differs: {np.asarray(got).ravel()[:6]!r}"
    return failures


def test_corpus_covers_the_matrix() -> None:
    cases = CASES.cases()
    names = {c["name"] for c in cases}
    assert len(cases) >= 150
    assert {c["dtype"] for c in cases} == set(CASES.DTYPES)
    assert {c["encoding"]["name"] for c in cases} == {"default", "v2"}
    assert {c["layout"] for c in cases} == {"C", "F"}
    assert "int16-big-blosc-crc-v2-F-2d" in names  # transpose + big-endian bytes + blosc + crc32c


def test_azarr_reads_what_zarr_python_wrote(v3_corpus: Path) -> None:
    assert _read_all(v3_corpus, "zarr") == {}


def test_azarr_reads_what_tensorstore_wrote(v3_corpus: Path) -> None:
    assert _read_all(v3_corpus, "ts") == {}


def _write_azarr_corpus(root: Path) -> None:
    for case in CASES.cases():
        shape, chunks = tuple(case["shape"]), tuple(case["chunks"])
        spec = CASES.DTYPES[case["dtype"]][0]
        dtype: Any = (
            {"str": str, "bytes": bytes}.get(spec)
            if isinstance(spec, str) and spec in ("str", "bytes")
            else CASES.numpy_dtype(case["dtype"])
        )
        array = azarr.sync.create(
            shape,
            chunks=chunks,
            dtype=dtype,
            fill_value=CASES.fill_value(case["dtype"]),
            store=str(root / "azarr" / case["name"]),
            zarr_format=3,
            codecs=case["codecs"],
            chunk_key_encoding=case["encoding"],
        )
        region = CASES.written(shape, chunks)
        array[region] = CASES.values(case["dtype"], shape)[region]
    group = azarr.sync.group(
        str(root / "azarr-group"), zarr_format=3, attributes={"title": "corpus", "n": [1, 2]}
    )
    sub = group.create_group("sub")
    sub.attrs.update({"level": 1})
    x = sub.create_dataset(
        "x", shape=(4, 3), chunks=(2, 2), dtype="<f4", dimension_names=["y", "x"], attributes={"units": "m"}
    )
    x[:] = np.arange(12, dtype="<f4").reshape(4, 3)
    group.create_dataset("flag", shape=(5,), dtype=bool, fill_value=True)
    azarr.sync.consolidate_metadata(str(root / "azarr-group"))


def test_zarr_python_and_tensorstore_read_what_azarr_wrote(v3_exchange: dict[str, Any]) -> None:
    results: dict[str, str] = v3_exchange["read"]
    failures = {k: v for k, v in results.items() if v != "ok"}
    assert failures == {}
    assert (
        sum(k.startswith("ts:") for k in results) >= 120
        and sum(k.startswith("zarr:") for k in results) >= 150
    )


def test_groups_with_attributes_and_consolidated_metadata(v3_corpus: Path) -> None:
    for consolidated in (True, False):
        group = azarr.sync.open_group(str(v3_corpus / "zarr-group"), mode="r", use_consolidated=consolidated)
        assert group.zarr_format == 3
        assert dict(group.attrs) == {"title": "corpus", "n": [1, 2]}
        assert dict(group["sub"].attrs) == {"level": 1}
        x = group["sub/x"]
        assert dict(x.attrs) == {"units": "m"} and x.dimension_names == ("y", "x")
        np.testing.assert_array_equal(x[:], np.arange(12, dtype="<f4").reshape(4, 3))
        assert group["flag"][:].all()
        assert sorted(name for name, _ in group.members(max_depth=None)) == ["flag", "sub", "sub/x"]
    consolidated_group = azarr.sync.open_consolidated(str(v3_corpus / "zarr-group"))
    # azarr.sync shows it as zarr 2's ConsolidatedMetadataStore; the async store is azarr's overlay.
    assert isinstance(consolidated_group.async_group.store, azarr.ConsolidatedStore)


def test_xarray_dataset_opens_with_the_azarr_engine_as_with_zarr(v3_corpus: Path) -> None:
    xr = pytest.importorskip("xarray")
    expected = json.loads((v3_corpus / "xr-expected.json").read_text())
    arrays = np.load(v3_corpus / "xr-expected.npz")
    ds = xr.open_dataset(v3_corpus / "xr.zarr", engine="azarr").load()
    assert sorted(ds.coords) == expected["coords"] and sorted(ds.data_vars) == expected["data_vars"]
    assert {k: list(v.dims) for k, v in ds.variables.items()} == expected["dims"]
    assert {k: {a: str(b) for a, b in v.attrs.items()} for k, v in ds.variables.items()} == expected["attrs"]
    assert {a: str(b) for a, b in ds.attrs.items()} == expected["global"]
    # Strings: zarr-python 3 hands xarray NumPy's StringDType, azarr object arrays of str (as
    # for v2); the values are the same (checked below), and Dataset.identical holds.
    strings = {"StringDType()": "object"}
    assert {k: str(v.dtype) for k, v in ds.variables.items()} == {
        k: strings.get(v, v) for k, v in expected["dtypes"].items()
    }
    for name, var in ds.variables.items():
        if var.dtype == object:
            assert [str(x) for x in var.values.ravel()] == expected["strings"][name]
        else:
            np.testing.assert_array_equal(var.values, arrays[f"var/{name}"], strict=True)


#: Run by zarr-python 3.4 on what zarr-python 2 code edited through azarr.sync (argv: the array,
#: the group, azarr's read of the array as .npy).
_READ_EDITED = """
import json, sys
import numpy as np, zarr
from zarr.storage import LocalStore
from zarr_metadata.model import ZarrV3ArrayMetadata, ZarrV3GroupMetadata
a = zarr.open_array(LocalStore(sys.argv[1], read_only=True), mode="r")
g = zarr.open_group(LocalStore(sys.argv[2], read_only=True), mode="r")
ZarrV3ArrayMetadata.from_json(json.load(open(sys.argv[1] + "/zarr.json")))
ZarrV3GroupMetadata.from_json(json.load(open(sys.argv[2] + "/zarr.json")))
print(json.dumps({
    "shape": list(a.shape), "fill_value": int(a.fill_value), "attrs": dict(a.attrs),
    "same": bool(np.array_equal(a[...], np.load(sys.argv[3]))), "group_attrs": dict(g.attrs),
    "members": sorted(g.metadata.consolidated_metadata.flattened_metadata),
}))
"""


def test_zarr2_code_on_zarr34_data_through_azarr_sync(
    v3_corpus: Path, zarr3_python: Path, tmp_path: Path
) -> None:
    """zarr-python 2 code (azarr.sync) on arrays and groups zarr-python 3.4 wrote: the properties
    read the store, the setters write ``zarr.json``, and zarr-python 3.4 reads what they wrote."""
    array_dir, group_dir = tmp_path / "a", tmp_path / "g"
    shutil.copytree(v3_corpus / "zarr" / "int16-big-blosc-crc-v2-F-2d", array_dir)
    shutil.copytree(v3_corpus / "zarr-group", group_dir)
    z = azarr.sync.open_array(str(array_dir))
    files = [p for p in array_dir.rglob("*") if p.is_file()]
    assert z.zarr_format == 3 and z.nchunks_initialized == len(files) - 1  # all but zarr.json
    assert z.nbytes_stored == sum(p.stat().st_size for p in files)
    assert "Zarr format        : 3" in str(z.info) and "crc32c" in str(z.info)
    z.shape = tuple(n + 3 for n in z.shape)
    z.fill_value = 5
    z.attrs = {"edited": True}
    np.save(tmp_path / "azarr.npy", z[...])
    group = azarr.sync.open_group(str(group_dir))
    group.attrs["note"] = "sync"
    assert group.tree() == "/\n ├── flag (5,) bool\n └── sub\n     └── x (4, 3) float32"
    proc = subprocess.run(
        [str(zarr3_python), "-c", _READ_EDITED, str(array_dir), str(group_dir), str(tmp_path / "azarr.npy")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {
        "shape": list(z.shape),
        "fill_value": 5,
        "attrs": {"edited": True},
        "same": True,
        "group_attrs": {"title": "corpus", "n": [1, 2], "note": "sync"},
        "members": ["flag", "sub", "sub/x"],
    }
