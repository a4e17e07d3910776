"""Build (once, cached) the archival-formats reference virtualenv: kerchunk, VirtualiZarr,
zarr-python 3.4, h5py, netCDF4, scipy, eccodes/cfgrib, h5netcdf + s3fs.

kerchunk 0.2.10 and VirtualiZarr 2.8 need zarr-python >= 3 (VirtualiZarr's newest >= 3.1,
and the benchmark's peer is zarr 3.4, which needs Python >= 3.12), so they cannot share
azarr's test environment. The venv lives at ``<repo>/.cache/ref-archival-<key>/venv``,
keyed by the SHA-256 of ``tests/interop/requirements-archival.txt`` and the base
interpreter's version, and is built under a ``flock`` (`refenv.venv_lock`) so parallel
sessions build it once. ``AZARR_ARCHIVAL_PYTHON`` points at an existing interpreter instead.

Run ``python tests/interop/archivalenv.py`` to build it outside pytest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import refenv  # noqa: E402  (tests/interop is a directory of scripts as well as a package)

REQUIREMENTS = HERE / "requirements-archival.txt"
BASE_PYTHONS = ("/root/.pyenv/versions/3.12.1/bin/python", "python3.12")
ENV_VAR = "AZARR_ARCHIVAL_PYTHON"
KEY_FILE = ".azarr-archival-key"
BUILD_TIMEOUT_S = 1200.0
MODULES = ("zarr", "kerchunk", "virtualizarr", "h5py", "netCDF4", "scipy", "fastparquet", "xarray")


class ArchivalEnvError(RuntimeError):
    """The archival venv could not be built or does not import; the message says why."""


def base_python() -> str:
    """A Python 3.12 interpreter to base the venv on."""
    for candidate in BASE_PYTHONS:
        found = (
            shutil.which(candidate)
            if "/" not in candidate
            else (candidate if Path(candidate).exists() else None)
        )
        if found:
            return found
    raise ArchivalEnvError(f"no Python 3.12 interpreter (looked for {', '.join(BASE_PYTHONS)})")


def cache_key(python: str) -> str:
    """Hash of the requirements and the base interpreter's version."""
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=True
    ).stdout
    return hashlib.sha256(REQUIREMENTS.read_bytes() + version.encode()).hexdigest()[:16]


def check(python: Path | str) -> str:
    """``"zarr X kerchunk Y ..."`` of ``python`` or raise `ArchivalEnvError`."""
    code = (
        "import importlib, importlib.metadata as md\n"
        f"for name in {list(MODULES)!r}:\n"
        "    mod = importlib.import_module(name)\n"
        "    print(name, getattr(mod, '__version__', None) or md.version(name))\n"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise ArchivalEnvError(f"{python} cannot import the archival packages:\n{proc.stderr[-3000:]}")
    return " ".join(proc.stdout.split())


def ensure_archival_python(report: refenv.Reporter = refenv._stderr) -> Path:
    """The path of a python with kerchunk, VirtualiZarr & co, building the cached venv if needed.

    Raises
    ------
    ArchivalEnvError
        The venv could not be built or verified.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    base = base_python()
    key = cache_key(base)
    cache = refenv.REPO_ROOT / ".cache" / f"ref-archival-{key}"
    venv = cache / "venv"
    with refenv.venv_lock(refenv.REPO_ROOT / ".cache" / ".ref-archival.lock", report, tag="[ref-archival]"):
        if (venv / KEY_FILE).is_file():
            return refenv.venv_python(venv)
        if cache.exists():
            shutil.rmtree(cache)
        cache.mkdir(parents=True)
        log = cache / "build.log"
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        start = time.monotonic()
        report(f"[ref-archival] building {venv} (kerchunk, VirtualiZarr, zarr 3.4; a few minutes) ...")
        try:
            refenv._run_logged([base, "-m", "venv", str(venv)], log, report, deadline)
            refenv.pip_install(
                refenv.venv_python(venv),
                ["--only-binary=:all:", "-r", str(REQUIREMENTS)],
                log,
                report,
                deadline,
                tag="[ref-archival]",
            )
        except refenv.RefEnvError as exc:
            raise ArchivalEnvError(str(exc)) from exc
        versions = check(refenv.venv_python(venv))
        (venv / KEY_FILE).write_text(key + "\n")
        report(f"[ref-archival] ready in {time.monotonic() - start:.0f} s: {versions}")
    return refenv.venv_python(venv)


if __name__ == "__main__":
    try:
        print(ensure_archival_python())
    except ArchivalEnvError as exc:
        refenv._stderr(str(exc))
        sys.exit(1)
