"""Build (once, cached) the Zarr v3 reference virtualenv: zarr-python 3.4, TensorStore, xarray.

Lives at ``<repo>/.cache/ref-zarr3/venv``, installed from the pins of
``tests/interop/requirements-zarr3.txt`` on a Python >= 3.12 interpreter (zarr >= 3.2 needs
it): ``AZARR_REF3_BASE``, else the newest 3.12 (``refenv.find_python``). The cache
key is the SHA-256 of the pins plus the base interpreter's version; locking, logging and the
build steps are ``refenv.py``'s. ``AZARR_REF3_PYTHON`` names a ready interpreter instead.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

from .refenv import (
    REPO_ROOT,
    RefEnvError,
    Reporter,
    _stderr,
    build_pinned_venv,
    find_python,
    python_version,
    venv_lock,
    venv_python,
)

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-zarr3.txt"
CACHE_DIR = REPO_ROOT / ".cache" / "ref-zarr3"
VENV = CACHE_DIR / "venv"
KEY_FILE = ".azarr-ref-key"
BUILD_TIMEOUT_S = 900.0


def _base() -> Path:
    return find_python("3.12", env_var="AZARR_REF3_BASE")


def check_interpreter(python: Path | str) -> str:
    """``"zarr X tensorstore Y xarray Z"`` of ``python``, or `RefEnvError`."""
    code = (
        "import importlib.metadata as m, zarr, tensorstore, xarray, zarr_metadata;"
        "print(zarr.__version__, m.version('tensorstore'), xarray.__version__)"
    )
    proc = subprocess.run(
        [str(python), "-E", "-s", "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0 or not proc.stdout.startswith("3.4."):
        raise RefEnvError(f"{python} lacks zarr 3.4 / tensorstore / xarray:\n{proc.stdout}{proc.stderr}")
    zarr_v, ts_v, xr_v = proc.stdout.split()
    return f"zarr {zarr_v} tensorstore {ts_v} xarray {xr_v}"


def ensure_v3_reference_python(report: Reporter = _stderr) -> Path:
    """The interpreter with zarr-python 3.4, TensorStore and xarray, built on first use."""
    override = os.environ.get("AZARR_REF3_PYTHON")
    if override:
        check_interpreter(override)
        return Path(override)
    base = _base()
    key = hashlib.sha256(REQUIREMENTS.read_bytes() + f"python{python_version(base)}".encode()).hexdigest()
    key_file = VENV / KEY_FILE
    with venv_lock(CACHE_DIR / ".lock", report, tag="[ref-zarr3]"):
        if key_file.is_file() and key_file.read_text().strip() == key:
            return venv_python(VENV)
        start = time.monotonic()
        deadline = start + BUILD_TIMEOUT_S
        log = CACHE_DIR / "build.log"
        log.write_text(f"building {VENV} (key {key})\n")
        python = build_pinned_venv(base, VENV, REQUIREMENTS, log, report, deadline, tag="[ref-zarr3]")
        versions = check_interpreter(python)
        key_file.write_text(key + "\n")
        report(f"[ref-zarr3] ready in {time.monotonic() - start:.1f} s: {versions}")
    return venv_python(VENV)


def v3_reference_python_or_fail() -> Path:
    """`ensure_v3_reference_python` for a test fixture: progress on stderr, and a test failure
    (not an error) naming what is missing when the environment cannot be built."""
    import pytest

    try:
        return ensure_v3_reference_python(_stderr)
    except RefEnvError as exc:
        pytest.fail(f"Zarr v3 reference environment unavailable:\n{exc}", pytrace=False)


if __name__ == "__main__":
    print(ensure_v3_reference_python())
