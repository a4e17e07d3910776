"""Build (once, cached) the zarr-python 2.18 reference virtualenv used by the interop tests.

The venv lives at ``<repo>/.cache/ref-zarr218/venv`` and is installed from the exact pins in
``tests/interop/requirements-zarr218.txt``. Its cache key is the SHA-256 of that file plus the base
interpreter's version, stored in ``venv/.azarr-ref-key`` once the build has been verified; a venv
without a matching key (changed pins, interrupted build) is deleted and rebuilt. A ``flock`` on
``.cache/ref-zarr218/.lock`` serialises parallel test sessions, so only one builds and the others
wait and reuse it.

Set ``AZARR_REF_PYTHON`` to an existing interpreter (with zarr 2.18 installed) to skip the build.

Run ``python tests/interop/refenv.py`` to build the venv outside pytest; it prints the interpreter path.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
REQUIREMENTS = HERE / "requirements-zarr218.txt"
CACHE_DIR = REPO_ROOT / ".cache" / "ref-zarr218"
VENV = CACHE_DIR / "venv"
ENV_VAR = "AZARR_REF_PYTHON"
KEY_FILE = ".azarr-ref-key"
EXPECTED_ZARR = "2.18."
# The build is pip against PyPI plus local wheel mirrors; generous but bounded.
BUILD_TIMEOUT_S = 900.0

Reporter = Callable[[str], None]


class RefEnvError(RuntimeError):
    """The reference venv could not be built or does not work; the message carries the details."""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cache_key() -> str:
    """Hash of the pinned requirements and the base interpreter's ``major.minor``."""
    h = hashlib.sha256()
    h.update(REQUIREMENTS.read_bytes())
    h.update(f"python{sys.version_info.major}.{sys.version_info.minor}".encode())
    return h.hexdigest()


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


@contextmanager
def venv_lock(lock_path: Path, report: Reporter, tag: str = "[ref-zarr218]") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_path`` while a cached venv is checked or built.

    Parallel sessions (pytest-xdist, a benchmark beside the tests) wait for the
    builder and then reuse its venv; ``benchmarks/peers.py`` uses it for its venvs too.
    """
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            report(f"{tag} another session holds {lock_path}; waiting for it ...")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def python_version(python: Path | str) -> str:
    """``"major.minor"`` of interpreter ``python``.

    Raises
    ------
    RefEnvError
        It does not run.
    """
    try:
        proc = subprocess.run(
            [str(python), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RefEnvError(f"{python} does not run: {exc!r}") from exc
    if proc.returncode != 0:
        raise RefEnvError(f"{python} does not run: {proc.stderr}")
    return proc.stdout.strip()


def find_python(version: str, *, env_var: str | None = None) -> Path:
    """An interpreter of Python ``version`` (``"3.12"``) that runs, for venvs of peers that need it.

    ``env_var`` (if set in the environment) names one; else pyenv's newest ``version.*``
    (``$PYENV_ROOT/versions``), else ``python<version>`` on ``PATH`` (pyenv's shims on
    ``PATH`` may point at nothing, so every candidate is run once).

    Raises
    ------
    RefEnvError
        None found.
    """
    if env_var and os.environ.get(env_var):
        return Path(os.environ[env_var])
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    installed = sorted(
        pyenv.glob(f"{version}.*/bin/python"),
        key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()],
        reverse=True,
    )
    on_path = shutil.which(f"python{version}")
    for python in [*installed, *([Path(on_path)] if on_path else [])]:
        try:
            if python_version(python) == version:
                return python
        except RefEnvError:
            continue
    raise RefEnvError(
        f"no Python {version} found (pyenv versions, python{version} on PATH)"
        + (f"; set {env_var}" if env_var else "")
    )


def check_interpreter(python: Path | str) -> str:
    """Return ``"zarr X numcodecs Y xarray Z numpy W"`` of ``python`` or raise `RefEnvError`."""
    code = (
        "import zarr, numcodecs, xarray, numpy, msgpack;"
        "print(zarr.__version__, numcodecs.__version__, xarray.__version__, numpy.__version__)"
    )
    try:
        proc = subprocess.run(
            [str(python), "-E", "-s", "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RefEnvError(f"reference interpreter {python} cannot run: {exc!r}") from exc
    if proc.returncode != 0:
        raise RefEnvError(f"reference interpreter {python} cannot import zarr & co:\n{proc.stderr}")
    zarr_v, numcodecs_v, xarray_v, numpy_v = proc.stdout.split()
    if not zarr_v.startswith(EXPECTED_ZARR):
        raise RefEnvError(f"reference interpreter {python} has zarr {zarr_v}, need {EXPECTED_ZARR}x")
    return f"zarr {zarr_v} numcodecs {numcodecs_v} xarray {xarray_v} numpy {numpy_v}"


def _clean_env() -> dict[str, str]:
    """The environment for build commands: nothing from the caller's Python setup may leak in.

    With PYTHONPATH pointing at azarr's site-packages, pip would see packages there as installed
    and skip them, leaving the reference venv incomplete.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _run_logged(
    cmd: list[str], log: Path, report: Reporter, deadline: float, *, tag: str = "[ref-zarr218]"
) -> None:
    """Run ``cmd``, streaming its output to ``log`` and a short progress line per pip step
    (prefixed by ``tag``, the venv's name)."""
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            env=_clean_env(),
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            fh.write(line)
            stripped = line.strip()
            if stripped.startswith(("Collecting", "Processing", "Installing", "Successfully", "ERROR")):
                report(f"{tag}   {stripped}")
            if time.monotonic() > deadline:
                proc.kill()
                break
        rc = proc.wait()
    if time.monotonic() > deadline:
        raise RefEnvError(f"{tag} timed out: {' '.join(cmd)}; log: {log}")
    if rc != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-40:])
        raise RefEnvError(f"command failed (exit {rc}): {' '.join(cmd)}\n--- last lines of {log} ---\n{tail}")


def build_pinned_venv(
    base: Path | str,
    venv: Path,
    requirements: Path,
    log: Path,
    report: Reporter,
    deadline: float,
    *,
    tag: str,
) -> Path:
    """A fresh venv at ``venv`` on interpreter ``base`` with every pin of ``requirements`` (wheels
    only, ``--no-deps``: the file pins every transitive dependency), checked by ``pip check``;
    returns its python. What the reference venvs share (zarr 2.18, Zarr v3, the xarray suite).

    Raises
    ------
    RefEnvError
        A step failed or ``deadline`` passed (the message has the log's tail).
    """
    if venv.exists():
        shutil.rmtree(venv)
    report(f"{tag} creating {venv} on {base}, pip install -r {requirements.name} (about a minute) ...")
    # base may itself be a venv's python; `-m venv` bases the new venv on the real interpreter.
    _run_logged([str(base), "-m", "venv", str(venv)], log, report, deadline, tag=tag)
    python = venv_python(venv)
    pip = [str(python), "-m", "pip", "install", "--only-binary=:all:", "--no-deps", "-r", str(requirements)]
    _run_logged(pip, log, report, deadline, tag=tag)
    _run_logged([str(python), "-m", "pip", "check"], log, report, deadline, tag=tag)
    return python


def _build(venv: Path, key: str, report: Reporter) -> None:
    log = CACHE_DIR / "build.log"
    log.write_text(f"building reference venv {venv} (key {key})\n")
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    python = build_pinned_venv(sys.executable, venv, REQUIREMENTS, log, report, deadline, tag="[ref-zarr218]")
    versions = check_interpreter(python)
    (venv / KEY_FILE).write_text(key + "\n")
    report(f"[ref-zarr218] ready: {versions}")


def ensure_reference_python(report: Reporter = _stderr) -> Path:
    """Return the path of a python with zarr 2.18, building the cached venv if needed.

    Raises `RefEnvError` if the environment cannot be built or verified.
    """
    override = os.environ.get(ENV_VAR)
    if override:
        report(f"[ref-zarr218] using {ENV_VAR}={override}: {check_interpreter(override)}")
        return Path(override)
    venv = VENV
    key = cache_key()
    key_file = venv / KEY_FILE
    with venv_lock(CACHE_DIR / ".lock", report):
        if key_file.is_file() and key_file.read_text().strip() == key:
            return venv_python(venv)
        if venv.exists():
            report("[ref-zarr218] cached venv is stale or incomplete; rebuilding")
        start = time.monotonic()
        _build(venv, key, report)
        report(f"[ref-zarr218] built in {time.monotonic() - start:.1f} s")
    return venv_python(venv)


if __name__ == "__main__":
    try:
        print(ensure_reference_python())
    except RefEnvError as exc:
        _stderr(str(exc))
        sys.exit(1)
