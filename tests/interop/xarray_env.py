"""Build (once, cached) what ``test_xarray_suite.py`` runs xarray's own Zarr backend tests with.

* a Python 3.12 venv at ``<repo>/.cache/xarray-suite/venv`` from the exact pins in
  ``requirements-xarray-suite.txt`` (zarr-python 3.4, which xarray's tests import and
  check azarr's output with, needs Python >= 3.12; azarr itself is not installed
  there but put on ``PYTHONPATH`` from this worktree, so the venv does not depend on
  the code under test);
* xarray's sdist, downloaded with pip into ``.cache/xarray-suite/sdist`` and unpacked
  beside it: its ``xarray/tests`` and the top-level ``conftest.py`` (which applies the
  ``skip_if_param`` marks the Zarr tests use) are run from there, never copied into
  this repository.

The cache key is the SHA-256 of the pins file plus the interpreter's version, written to
``.cache/xarray-suite/.azarr-suite-key`` once both are verified; a mismatch (changed
pins, interrupted build) rebuilds. An ``flock`` on ``.cache/xarray-suite/.lock``
serialises parallel sessions (as ``refenv.py`` does for the zarr 2.18 venv).

The base interpreter is ``AZARR_SUITE_PYTHON`` if set, else pyenv's newest 3.12, else
``python3.12`` on ``PATH``. ``AZARR_SUITE_VENV_PYTHON`` points at a ready interpreter
instead (with the pins installed), skipping the venv build.

Run ``python -m tests.interop.xarray_env`` to build it outside pytest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from .refenv import (
    REPO_ROOT,
    RefEnvError,
    Reporter,
    _run_logged,
    build_pinned_venv,
    find_python,
    python_version,
    venv_lock,
    venv_python,
)

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements-xarray-suite.txt"
CACHE_DIR = REPO_ROOT / ".cache" / "xarray-suite"
VENV = CACHE_DIR / "venv"
SDIST_DIR = CACHE_DIR / "sdist"
KEY_FILE = CACHE_DIR / ".azarr-suite-key"
XARRAY_VERSION = "2026.9.0"
BUILD_TIMEOUT_S = 900.0
TAG = "[xarray-suite]"


@dataclass(frozen=True)
class SuiteEnv:
    """Where the suite runs: the venv's python and the unpacked sdist (its rootdir)."""

    python: Path
    sdist: Path


def base_python() -> Path:
    """The Python 3.12 interpreter to base the venv on (``AZARR_SUITE_PYTHON``, else found).

    Raises
    ------
    RefEnvError
        None found.
    """
    return find_python("3.12", env_var="AZARR_SUITE_PYTHON")


def cache_key(python: Path) -> str:
    h = hashlib.sha256()
    h.update(REQUIREMENTS.read_bytes())
    h.update(f"python{python_version(python)} xarray{XARRAY_VERSION}".encode())
    return h.hexdigest()


def sdist_root() -> Path:
    return SDIST_DIR / f"xarray-{XARRAY_VERSION}"


def _fetch_sdist(python: Path, log: Path, deadline: float) -> Path:
    """Download xarray's sdist with pip (the configured indexes) and unpack it."""
    if SDIST_DIR.exists():
        shutil.rmtree(SDIST_DIR)
    SDIST_DIR.mkdir(parents=True)
    _run_logged(
        [
            str(python),
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary=:all:",  # pip reads its metadata with setuptools in an isolated build env
            f"xarray=={XARRAY_VERSION}",
            "-d",
            str(SDIST_DIR),
        ],
        log,
        lambda _: None,
        deadline,
        tag=TAG,
    )
    archive = SDIST_DIR / f"xarray-{XARRAY_VERSION}.tar.gz"
    with tarfile.open(archive) as tar:
        tar.extractall(SDIST_DIR, filter="data")
    root = sdist_root()
    for needed in ("conftest.py", "xarray/tests/test_backends.py", "xarray/tests/test_backends_datatree.py"):
        if not (root / needed).is_file():
            raise RefEnvError(f"xarray's sdist has no {needed} (unpacked at {root})")
    return root


def _build(base: Path, key: str, report: Reporter) -> None:
    log = CACHE_DIR / "build.log"
    log.write_text(f"building the xarray suite env (key {key})\n")
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    python = build_pinned_venv(base, VENV, REQUIREMENTS, log, report, deadline, tag=TAG)
    report(f"{TAG} downloading xarray {XARRAY_VERSION}'s sdist ...")
    _fetch_sdist(python, log, deadline)


def ensure_suite_env(report: Reporter = lambda msg: print(msg, file=sys.stderr, flush=True)) -> SuiteEnv:
    """The suite's interpreter and unpacked sdist, building them on first use.

    Raises
    ------
    RefEnvError
        They could not be built or verified (the message has the log's tail).
    """
    ready = os.environ.get("AZARR_SUITE_VENV_PYTHON")
    with venv_lock(CACHE_DIR / ".lock", report, tag=TAG):
        if ready:
            python = Path(ready)
            if not sdist_root().is_dir():
                CACHE_DIR.mkdir(parents=True, exist_ok=True)
                _fetch_sdist(python, CACHE_DIR / "build.log", time.monotonic() + BUILD_TIMEOUT_S)
            return SuiteEnv(python, sdist_root())
        base = base_python()
        key = cache_key(base)
        if not (KEY_FILE.is_file() and KEY_FILE.read_text().strip() == key and sdist_root().is_dir()):
            CACHE_DIR.mkdir(parents=True, exist_ok=True)
            start = time.monotonic()
            _build(base, key, report)
            KEY_FILE.write_text(key + "\n")
            report(f"{TAG} built in {time.monotonic() - start:.0f} s")
    return SuiteEnv(venv_python(VENV), sdist_root())


if __name__ == "__main__":
    try:
        print(ensure_suite_env())
    except RefEnvError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
