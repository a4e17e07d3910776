"""``partial_decompress=True`` on Blosc arrays zarr-python 2.18 wrote: azarr's partial reads equal zarr
2.18's partial reads (``ref_scripts/partial_read.py``), from a local directory and from SeaweedFS S3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.scheduler import stats_for
from azarr.storage import LocalStore, S3Store, Store

from .conftest import RunRef
from .refenv import REPO_ROOT, venv_lock

pytestmark = pytest.mark.interop

# zarr 2.18 reads in part only through FSStore, so its script needs fsspec, which the reference venv
# does not hold: installed (pure Python, pinned) into a directory of its own, never into that venv.
FSSPEC_PIN = "fsspec==2024.10.0"
FSSPEC_DIR = REPO_ROOT / ".cache" / "ref-zarr218-fsspec"


def _fsspec_dir() -> Path:
    target = FSSPEC_DIR / "site"
    marker = FSSPEC_DIR / "installed"
    with venv_lock(FSSPEC_DIR.with_suffix(".lock"), lambda msg: print(msg, file=sys.stderr)):
        if not (marker.exists() and marker.read_text() == FSSPEC_PIN):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    str(target),
                    FSSPEC_PIN,
                ],
                check=True,
                timeout=300,
            )
            marker.write_text(FSSPEC_PIN)
    return target


@pytest.fixture(scope="module")
def zarr2_partial(run_ref_script: RunRef, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    out = tmp_path_factory.mktemp("partial-zarr2")
    result = run_ref_script("partial_read.py", out, _fsspec_dir())
    assert result.returncode == 0, result.report
    return out, json.loads(result.stdout)["cases"]


def _selection(spec: list[Any]) -> tuple[Any, ...]:
    return tuple(slice(*s) if isinstance(s, list) else s for s in spec)


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
async def test_reads_equal_zarr2_partial_reads(
    zarr2_partial: tuple[Path, list[Any]], where: str, request: pytest.FixtureRequest
) -> None:
    out, cases = zarr2_partial
    store: Store = LocalStore(out / "data.zarr", read_only=True)
    if where == "s3":
        server = request.getfixturevalue("seaweedfs")
        store = S3Store(f"{server.create_bucket()}/data.zarr", storage_options=server.storage_options)
        await azarr.copy_store(LocalStore(out / "data.zarr", read_only=True), store)
    assert len(cases) == 5 and sum(case["zarr_partial"] for case in cases) == 4
    stats = stats_for(store)
    for case in cases:
        part = await azarr.open_array(store, mode="r", path=case["path"], partial_decompress=True)
        whole = await azarr.open_array(store, mode="r", path=case["path"])
        for n, spec in enumerate(case["selections"]):
            want = np.load(out / f"{case['id']}-{n}.npy")
            stats.reset()
            got = await part.getitem(_selection(spec))
            partial_bytes = stats.bytes_read
            stats.reset()
            for read in (got, await whole.getitem(_selection(spec))):
                value = np.asarray(read)
                assert value.dtype == want.dtype and value.tobytes() == want.tobytes(), (case["id"], spec)
            if n == 0 and case["id"] != "f8-zlib-auto":  # one element; blocks much smaller than the chunk
                assert partial_bytes * 2 < stats.bytes_read, (case["id"], partial_bytes, stats.bytes_read)
