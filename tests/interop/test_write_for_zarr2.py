"""zarr-python 2.18 reads what azarr wrote: the corpus matrix replayed through ``azarr.create``.

``write_corpus.declare_corpus()`` gives the same array declarations the reference corpus was written
from (exact ``zarr.create`` arguments, writes, expected values). azarr replays them into a
``LocalStore`` (every array, creating parent groups implicitly; then group attributes; then
``consolidate_metadata``), and ``ref_scripts/read_and_check.py`` checks the result in the zarr 2.18
venv. A CF dataset written by azarr is also opened with xarray 2024.10 (``ref_scripts/check_xarray.py``).

What zarr 2.18 must see is taken from the reference corpus written by zarr 2.18 from the *same*
declarations: the metadata (shape, chunks, dtype, order, fill_value, compressor, filters, attributes,
the whole ``.zarray`` document) and the exact set of chunk files. The data must equal the
declaration's intended values (for lossy filters: the numcodecs encode/decode round trip).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
import azarr.sync
from azarr.storage import LocalStore

from .conftest import RefCorpus, RefResult, RunRef
from .ref_scripts import creation_documents
from .ref_scripts.compare import MANIFEST, expected_file_name, save_npy
from .ref_scripts.write_corpus import CORPUS, ArraySpec, declare_corpus

pytestmark = pytest.mark.interop

DECLARED = declare_corpus()
CASES = [f"corpus/{spec.path}" for spec in DECLARED.specs]
GROUPS = [f"{CORPUS}/{path}" for path, _ in DECLARED.groups]


@dataclass(frozen=True)
class Written:
    """What azarr wrote and what zarr 2.18 said about it."""

    root: Path
    write_errors: dict[str, str]  # case id -> traceback of the azarr call that failed
    result: RefResult
    report: dict[str, list[str]] | None  # read_and_check's --json report (failures only)

    def problems(self, name: str) -> list[str]:
        if self.report is None:
            return [f"read_and_check.py produced no report:\n{self.result.report}"]
        return self.report.get(name, [])


def lossless_expected(spec: ArraySpec) -> np.ndarray:
    """The values a reader must see: declared, or for lossy filters the numcodecs round trip."""
    if spec.intended is not None:
        return spec.intended
    ((_, data),) = spec.writes
    encoded: Any = data
    filters = spec.create_kwargs.get("filters") or []
    for codec in filters:
        encoded = codec.encode(encoded)
    for codec in reversed(filters):
        encoded = codec.decode(encoded)
    return np.asarray(encoded).reshape(data.shape).astype(data.dtype, copy=False)


async def write_with_azarr(store_dir: Path) -> dict[str, str]:
    """Replay the declarations through azarr; returns the failures by case id."""
    errors: dict[str, str] = {}
    store = LocalStore(store_dir)
    try:
        await azarr.group(store, overwrite=True)
        # arrays first: azarr.create must add the .zgroup of missing ancestors (as zarr 2.18 does)
        for spec in DECLARED.specs:
            try:
                arr = await azarr.create(
                    store=store, path=spec.path, overwrite=True, allow_pickle=spec.needs_pickle or None,
                    **spec.create_kwargs,
                )  # fmt: skip
                for selection, values in spec.writes:
                    await arr.setitem(selection, values)
                if spec.attrs:
                    await arr.attrs.update(spec.attrs)
            except Exception:
                errors[f"corpus/{spec.path}"] = traceback.format_exc()
        for path, attrs in DECLARED.groups:
            grp = await azarr.open_group(store, mode="a", path=path or None)
            if attrs:
                await grp.attrs.update(attrs)
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()
    return errors


def build_manifest(target: Path, corpus: RefCorpus, written: set[str]) -> dict[str, Any]:
    """Expected values from the declarations, expected metadata from zarr 2.18's own corpus."""
    (target / "expected").mkdir()
    arrays = []
    for spec in DECLARED.specs:
        case = f"corpus/{spec.path}"
        if case not in written:
            continue
        entry = corpus.array(case)
        data_file = expected_file_name(CORPUS, spec.path, "data")
        save_npy(target / "expected" / data_file, lossless_expected(spec))
        entry["expected"] = f"expected/{data_file}"
        if entry["fill"] is not None:
            fill_file = Path(entry["fill"]).name
            shutil.copyfile(corpus.root / entry["fill"], target / "expected" / fill_file)
            entry["fill"] = f"expected/{fill_file}"
        arrays.append(entry)
    groups = [g for g in corpus.groups if g["store"] == CORPUS]
    return {"format": 1, "stores": {CORPUS: {"consolidated": True}}, "arrays": arrays, "groups": groups}


@pytest.fixture(scope="module")
def azarr_written(
    zarr2_corpus: RefCorpus, run_ref_script: RunRef, tmp_path_factory: pytest.TempPathFactory
) -> Written:
    target = tmp_path_factory.mktemp("azarr-written")
    errors = asyncio.run(write_with_azarr(target / CORPUS))
    manifest = build_manifest(target, zarr2_corpus, set(CASES) - set(errors))
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1))
    report_file = target / "report.json"
    result = run_ref_script("read_and_check.py", target, "--json", report_file)
    report = json.loads(report_file.read_text()) if report_file.is_file() else None
    return Written(target, errors, result, report)


def test_zarr2_reads_everything_azarr_wrote(azarr_written: Written) -> None:
    """The whole-run verdict: azarr wrote every case and read_and_check.py exits 0 (else the report)."""
    messages = []
    if azarr_written.write_errors:
        lines = [
            f"  {case}: {tb.strip().splitlines()[-1]}" for case, tb in azarr_written.write_errors.items()
        ]
        messages.append(f"azarr failed to write {len(lines)} case(s):\n" + "\n".join(lines))
    if azarr_written.result.returncode != 0:
        messages.append(f"read_and_check.py (zarr 2.18) found problems: {azarr_written.result.report}")
    if messages:
        pytest.fail("\n\n".join(messages), pytrace=False)


@pytest.mark.parametrize("case", CASES)
def test_array_readable_by_zarr2(case: str, azarr_written: Written) -> None:
    if case in azarr_written.write_errors:
        pytest.fail(f"azarr could not write {case}:\n{azarr_written.write_errors[case]}", pytrace=False)
    problems = azarr_written.problems(f"{CORPUS}/{case.removeprefix('corpus/')}")
    assert not problems, f"zarr 2.18 on azarr's {case}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("group", GROUPS)
def test_group_readable_by_zarr2(group: str, azarr_written: Written) -> None:
    problems = azarr_written.problems(group)
    assert not problems, f"zarr 2.18 on azarr's group {group}:\n  " + "\n  ".join(problems)


def test_consolidated_metadata_readable_by_zarr2(azarr_written: Written) -> None:
    problems = azarr_written.problems(f"{CORPUS}/.zmetadata")
    assert not problems, "zarr 2.18 on azarr's .zmetadata:\n  " + "\n  ".join(problems)


CF_ENCODING_ATTRS = {"time": ("units", "calendar"), "precip": ("scale_factor",)}


async def write_cf_dataset(store_dir: Path, expected_dir: Path) -> dict[str, Any]:
    """Write an xarray-style dataset with azarr; return check_xarray.py's expectations."""
    rng = np.random.default_rng(7)
    temperature = (rng.standard_normal((4, 5, 8)) * 5 + 280).astype("<f4")
    temperature[1, 2, 3] = np.nan
    precip = rng.integers(0, 2000, size=(4, 5)).astype("<i2")
    precip[0, 0] = -9999  # the fill value: decodes to NaN
    variables: dict[str, tuple[np.ndarray, list[str], dict[str, Any], dict[str, Any]]] = {
        "time": (np.arange(4, dtype="<i8"), ["time"], {"fill_value": None},
                 {"units": "days since 2024-01-01", "calendar": "proleptic_gregorian", "standard_name": "time"}),
        "lat": (np.linspace(-30.0, 30.0, 5), ["lat"], {"fill_value": np.nan},
                {"units": "degrees_north", "standard_name": "latitude"}),
        "lon": (np.linspace(0.0, 350.0, 8), ["lon"], {"fill_value": np.nan},
                {"units": "degrees_east", "standard_name": "longitude"}),
        "temperature": (temperature, ["time", "lat", "lon"],
                        {"chunks": (2, 3, 4), "fill_value": np.nan, "compressor": numcodecs.Blosc("zstd", 3, 2)},
                        {"units": "K", "standard_name": "air_temperature", "long_name": "Air temperature"}),
        "precip": (precip, ["time", "lat"], {"chunks": (3, 5), "fill_value": -9999},
                   {"units": "mm", "long_name": "Precipitation", "scale_factor": 0.01}),
    }  # fmt: skip
    dataset_attrs = {"Conventions": "CF-1.8", "title": "written by azarr"}
    store = LocalStore(store_dir)
    try:
        root = await azarr.group(store, overwrite=True)
        await root.attrs.update(dataset_attrs)
        for name, (data, dims, create_kwargs, attrs) in variables.items():
            arr = await azarr.create(data.shape, dtype=data.dtype, store=store, path=name, **create_kwargs)
            await arr.setitem(Ellipsis, data)
            await arr.attrs.update({**attrs, "_ARRAY_DIMENSIONS": dims})
        await azarr.consolidate_metadata(store)
    finally:
        await store.close()
    decoded = {
        "time": np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], dtype="M8[ns]"),
        "lat": variables["lat"][0],
        "lon": variables["lon"][0],
        "temperature": temperature,
        "precip": np.where(precip == -9999, np.nan, precip * 0.01),
    }
    expectations: dict[str, Any] = {"attrs": dataset_attrs, "coords": ["time", "lat", "lon"], "variables": {}}
    for name, (_, dims, _, attrs) in variables.items():
        np.save(expected_dir / f"xr_{name}.npy", decoded[name])
        # xarray moves CF encoding attributes (time units/calendar, scale_factor) into .encoding
        kept = {k: v for k, v in attrs.items() if k not in CF_ENCODING_ATTRS.get(name, ())}
        expectations["variables"][name] = {
            "dims": dims,
            "attrs": kept,
            "values": f"xr_{name}.npy",
            "rtol": 1e-6 if name == "precip" else 0.0,  # xarray may decode scale_factor in float32
        }
    return expectations


def test_xarray_opens_azarr_dataset(run_ref_script: RunRef, tmp_path: Path) -> None:
    """xarray 2024.10 (zarr 2.18) opens a CF dataset azarr wrote and decodes it: dims, coords, attrs, values."""
    expectations = asyncio.run(write_cf_dataset(tmp_path / "xarray.zarr", tmp_path))
    (tmp_path / "expectations.json").write_text(json.dumps(expectations))
    result = run_ref_script("check_xarray.py", tmp_path / "xarray.zarr", tmp_path / "expectations.json")
    assert result.returncode == 0, result.report


def test_documents_and_chunks_are_zarr2s_bytes(run_ref_script: RunRef) -> None:
    """For the same zarr-python 2 call, every key ``azarr.sync`` stores holds the bytes zarr 2.18
    stores (``.zarray``, ``.zgroup``, ``.zattrs`` and chunks), so ``digest()``/``nbytes_stored``
    agree with zarr 2's (``ref_scripts/creation_documents.py`` makes the calls with both)."""
    result = run_ref_script("creation_documents.py")
    assert result.returncode == 0, result.stderr[-4000:]
    theirs = json.loads(result.stdout)
    ours = creation_documents.documents(azarr.sync, azarr.sync.MemoryStore)
    assert ours.keys() == theirs.keys()
    differ = {
        call: sorted(
            k for k in ours[call].keys() | theirs[call].keys() if ours[call].get(k) != theirs[call].get(k)
        )
        for call in ours
    }
    assert {call: keys for call, keys in differ.items() if keys} == {}
