"""Icechunk repositories read by azarr, bit-identical to icechunk + zarr-python 3.4.

icechunk 2.x needs Python >= 3.12, and `azarr.storage.IcechunkStore` runs icechunk in
azarr's own process, so these checks run azarr inside the Icechunk venv
(tests/interop/icechunkenv.py): ``icechunk_scripts/icechunk_cases.py`` makes the
repositories (on local disk and on SeaweedFS, native, inline and virtual chunks, a tag, a
second commit, a branch), reads them with azarr and with zarr-python through icechunk's own
store, and reports each check; each test here asserts one of them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .icechunkenv import IcechunkEnvError, ensure_icechunk_python

pytestmark = pytest.mark.interop

SCRIPT = Path(__file__).resolve().parent / "icechunk_scripts" / "icechunk_cases.py"
CHECKS = [
    "reads_every_array",
    "selections",
    "url_form",
    "branch_tag_snapshot",
    "xarray_engine",
    "requests_counted",
    "typed_errors",
    "pickle",
]
PLACES = ["local", pytest.param("s3", marks=pytest.mark.s3)]


@pytest.fixture(scope="module")
def icechunk_results(tmp_path_factory: pytest.TempPathFactory, seaweedfs: Any) -> dict[str, Any]:
    """Every check's outcome, from one run of the case script in the Icechunk venv."""
    try:
        python = ensure_icechunk_python()
    except IcechunkEnvError as exc:
        pytest.fail(f"the Icechunk venv cannot be built: {exc}")
    out = tmp_path_factory.mktemp("icechunk")
    config = {
        "s3": {
            "endpoint_url": seaweedfs.endpoint_url,
            "key": seaweedfs.key,
            "secret": seaweedfs.secret,
            "bucket": seaweedfs.create_bucket(),
        }
    }
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "RUST_LOG": "error"}
    proc = subprocess.run(
        [str(python), str(SCRIPT), str(out), json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env=env,
    )
    # icechunk logs warnings (local storage and concurrent commits) to stderr: keep Python's part
    errors = proc.stderr[proc.stderr.find("Traceback") :] if "Traceback" in proc.stderr else proc.stderr
    assert proc.returncode == 0, errors[-4000:]
    results: dict[str, Any] = json.loads((out / "results.json").read_text())
    return results


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("name", CHECKS)
def test_icechunk(name: str, place: str, icechunk_results: dict[str, Any]) -> None:
    result = icechunk_results["checks"].get(f"{place}/{name}")
    assert result is not None, f"{place}/{name} did not run"
    assert result["ok"], result["detail"]


def test_corrupt_repository_is_a_typed_error(icechunk_results: dict[str, Any]) -> None:
    result = icechunk_results["checks"]["local/corrupt_repository"]
    assert result["ok"], result["detail"]
