"""Build (once, cached) the Icechunk virtualenv: icechunk 2.3, zarr-python 3.4, xarray, h5netcdf,
and azarr itself (editable, from this checkout).

icechunk 2.x needs Python >= 3.12 while azarr's test environment may be 3.11, and
`azarr.storage.IcechunkStore` imports icechunk in azarr's own process: so the Icechunk tests
run azarr inside this venv (tests/interop/icechunk_scripts/). It lives at
``<repo>/.cache/ref-icechunk-<key>/venv``, keyed by ``requirements-icechunk.txt``, azarr's
declared dependencies and the base interpreter's version, built under a ``flock`` so parallel
sessions build it once (`refenv.venv_lock`). ``AZARR_ICECHUNK_PYTHON`` names a ready
interpreter instead.

Run ``python tests/interop/icechunkenv.py`` to build it outside pytest.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import archivalenv  # noqa: E402  (tests/interop is a directory of scripts as well as a package)
import refenv  # noqa: E402

REQUIREMENTS = HERE / "requirements-icechunk.txt"
ENV_VAR = "AZARR_ICECHUNK_PYTHON"
KEY_FILE = ".azarr-icechunk-key"
BUILD_TIMEOUT_S = 1200.0


class IcechunkEnvError(RuntimeError):
    """The Icechunk venv could not be built or does not import; the message says why."""


def cache_key(python: str) -> str:
    """Hash of the pins, azarr's dependencies and the base interpreter's version."""
    version = subprocess.run(
        [python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True, check=True
    ).stdout
    project = tomllib.loads((refenv.REPO_ROOT / "pyproject.toml").read_text())["project"]
    deps = json.dumps(project["dependencies"]).encode()
    return hashlib.sha256(REQUIREMENTS.read_bytes() + deps + version.encode()).hexdigest()[:16]


def check(python: Path | str) -> str:
    """``"icechunk X zarr Y ..."`` of ``python`` or raise `IcechunkEnvError`."""
    code = (
        "import importlib.metadata as md, icechunk, zarr, xarray, h5netcdf, azarr\n"
        "print(' '.join(f'{n} {md.version(n)}' for n in ('icechunk', 'zarr', 'xarray', 'h5netcdf')))\n"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        raise IcechunkEnvError(
            f"{python} cannot import icechunk, zarr, xarray, azarr:\n{proc.stderr[-3000:]}"
        )
    return proc.stdout.strip()


def ensure_icechunk_python(report: refenv.Reporter = refenv._stderr) -> Path:
    """The path of a python with icechunk and azarr, building the cached venv if needed.

    Raises
    ------
    IcechunkEnvError
        The venv could not be built or verified.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        return Path(override)
    try:
        base = archivalenv.base_python()
    except archivalenv.ArchivalEnvError as exc:
        raise IcechunkEnvError(str(exc)) from exc
    key = cache_key(base)
    cache = refenv.REPO_ROOT / ".cache" / f"ref-icechunk-{key}"
    venv = cache / "venv"
    with refenv.venv_lock(refenv.REPO_ROOT / ".cache" / ".ref-icechunk.lock", report, tag="[ref-icechunk]"):
        if (venv / KEY_FILE).is_file():
            return refenv.venv_python(venv)
        if cache.exists():
            shutil.rmtree(cache)
        cache.mkdir(parents=True)
        log = cache / "build.log"
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        start = time.monotonic()
        report(f"[ref-icechunk] building {venv} (icechunk, zarr 3.4, azarr editable; a few minutes) ...")
        python = str(refenv.venv_python(venv))
        try:
            refenv._run_logged([base, "-m", "venv", str(venv)], log, report, deadline, tag="[ref-icechunk]")
            refenv.pip_install(
                python,
                ["--only-binary=:all:", "-r", str(REQUIREMENTS)],
                log,
                report,
                deadline,
                tag="[ref-icechunk]",
            )
            refenv.pip_install(
                python, ["-e", str(refenv.REPO_ROOT)], log, report, deadline, tag="[ref-icechunk]"
            )
        except refenv.RefEnvError as exc:
            raise IcechunkEnvError(str(exc)) from exc
        versions = check(python)
        (venv / KEY_FILE).write_text(key + "\n")
        report(f"[ref-icechunk] ready in {time.monotonic() - start:.0f} s: {versions}")
    return refenv.venv_python(venv)


if __name__ == "__main__":
    try:
        print(ensure_icechunk_python())
    except IcechunkEnvError as exc:
        refenv._stderr(str(exc))
        sys.exit(1)
