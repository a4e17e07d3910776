"""Build (once, cached) the virtualenvs the interop tests run zarr-python 2.18 in.

``REFERENCE`` (``<repo>/.cache/ref-zarr218/venv``, pins in ``requirements-zarr218.txt``): zarr 2.18
and xarray 2024.10, the reference implementation the corpus and round-trip tests compare against.

``SHIM`` (``<repo>/.cache/zarr218-azarr/venv``, pins in ``requirements-zarr218-azarr.txt``): zarr 2.18
(whose wheel ships its own test suite as ``zarr.tests``) beside azarr's dependencies and pytest;
azarr itself is not installed there but put on ``PYTHONPATH`` from this checkout at run time, so
the venv does not go stale as azarr changes (``test_zarr2_suite.py``, ``test_zarr2_tutorial.py``).

Each venv is installed from exact pins (``--no-deps``: every transitive package is listed). Its
cache key is the SHA-256 of its requirements file plus the base interpreter's version, stored in
``venv/.azarr-ref-key`` once the build has been verified; a venv without a matching key (changed
pins, interrupted build) is deleted and rebuilt. A ``flock`` on ``<cache dir>/.lock`` serialises
parallel test sessions, so only one builds and the others wait and reuse it.

Set ``AZARR_REF_PYTHON`` (reference) or ``AZARR_SHIM_PYTHON`` (shim) to an existing interpreter with
those packages to skip the build.

Run ``python tests/interop/refenv.py [shim]`` to build a venv outside pytest; it prints the interpreter path.
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
from typing import NamedTuple

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
KEY_FILE = ".azarr-ref-key"
EXPECTED_ZARR = "2.18."


class VenvSpec(NamedTuple):
    """One cached venv: where it lives, what it installs, how it is checked.

    (A named tuple, not a dataclass: benchmarks/peers.py loads this file without registering it
    in ``sys.modules``, where dataclasses look up their string annotations.)
    """

    name: str  # the cache directory under <repo>/.cache, and the tag of progress lines
    requirements: Path
    env_var: str  # an interpreter given here is used instead of building
    imports: tuple[str, ...]  # imported to check the venv (zarr and numpy versions are printed)

    @property
    def cache_dir(self) -> Path:
        return REPO_ROOT / ".cache" / self.name

    @property
    def venv(self) -> Path:
        return self.cache_dir / "venv"

    @property
    def tag(self) -> str:
        return f"[{self.name}]"


REFERENCE = VenvSpec(
    "ref-zarr218",
    HERE / "requirements-zarr218.txt",
    "AZARR_REF_PYTHON",
    ("zarr", "numcodecs", "xarray", "numpy", "msgpack"),
)
SHIM = VenvSpec(
    "zarr218-azarr",
    HERE / "requirements-zarr218-azarr.txt",
    "AZARR_SHIM_PYTHON",
    ("zarr", "numcodecs", "numpy", "pytest", "aiohttp", "s3fs", "gcsfs", "msgpack"),
)
# The reference venv's paths under their historical names (benchmarks/peers.py reuses that venv).
REQUIREMENTS = REFERENCE.requirements
CACHE_DIR = REFERENCE.cache_dir
VENV = REFERENCE.venv
ENV_VAR = REFERENCE.env_var
# The build is uv (or pip) against PyPI plus local wheel mirrors; generous but bounded.
BUILD_TIMEOUT_S = 900.0

Reporter = Callable[[str], None]


class RefEnvError(RuntimeError):
    """The reference venv could not be built or does not work; the message carries the details."""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cache_key(spec: VenvSpec = REFERENCE) -> str:
    """Hash of the pinned requirements and the base interpreter's ``major.minor``."""
    h = hashlib.sha256()
    h.update(spec.requirements.read_bytes())
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


def check_interpreter(python: Path | str, spec: VenvSpec = REFERENCE) -> str:
    """Return ``"zarr X numcodecs Y numpy W ..."`` of ``python`` or raise `RefEnvError`."""
    shown = [name for name in spec.imports if name in ("zarr", "numcodecs", "xarray", "numpy")]
    code = f"import {', '.join(spec.imports)}; print({', '.join(f'{n}.__version__' for n in shown)})"
    try:
        proc = subprocess.run(
            [str(python), "-E", "-s", "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RefEnvError(f"reference interpreter {python} cannot run: {exc!r}") from exc
    if proc.returncode != 0:
        raise RefEnvError(
            f"reference interpreter {python} cannot import {', '.join(spec.imports)}:\n{proc.stderr}"
        )
    versions = dict(zip(shown, proc.stdout.split(), strict=True))
    if not versions["zarr"].startswith(EXPECTED_ZARR):
        raise RefEnvError(
            f"reference interpreter {python} has zarr {versions['zarr']}, need {EXPECTED_ZARR}x"
        )
    return " ".join(f"{name} {version}" for name, version in versions.items())


def _clean_env() -> dict[str, str]:
    """The environment for build commands: nothing from the caller's Python setup may leak in.

    With PYTHONPATH pointing at azarr's site-packages, pip would see packages there as installed
    and skip them, leaving the reference venv incomplete.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONNOUSERSITE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}


def _run_logged(
    cmd: list[str], log: Path, report: Reporter, deadline: float, *, tag: str = REFERENCE.tag
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
            if stripped.startswith(
                (
                    "Collecting",
                    "Processing",
                    "Installing",
                    "Successfully",
                    "ERROR",
                    "Resolved",
                    "Installed",
                    "error",
                )
            ):
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


def _uv() -> str | None:
    """uv's binary: the one the test extra installs beside this interpreter, else one on PATH."""
    try:
        from uv import find_uv_bin

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


def pip_install(
    python: Path | str, args: list[str], log: Path, report: Reporter, deadline: float, *, tag: str
) -> None:
    """``pip install *args`` into the venv of ``python``: with uv when it is installed (the same
    packages in seconds instead of a minute or two each, which CI's time budget needs), with pip
    when uv is absent or fails (its output stays in ``log``). uv reads no pip.conf: `.ci/run`
    passes pip's find-links to it as ``UV_FIND_LINKS``."""
    uv = _uv()
    if uv is not None:
        try:
            _run_logged(
                [uv, "pip", "install", "--python", str(python), *args], log, report, deadline, tag=tag
            )
            return
        except RefEnvError as exc:
            report(f"{tag} uv could not install ({str(exc).splitlines()[0]}); trying pip")
    _run_logged([str(python), "-m", "pip", "install", *args], log, report, deadline, tag=tag)


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
    report(f"{tag} creating {venv} on {base}, installing -r {requirements.name} ...")
    # base may itself be a venv's python; `-m venv` bases the new venv on the real interpreter.
    _run_logged([str(base), "-m", "venv", str(venv)], log, report, deadline, tag=tag)
    python = venv_python(venv)
    pip_install(
        python, ["--only-binary=:all:", "--no-deps", "-r", str(requirements)], log, report, deadline, tag=tag
    )
    _run_logged([str(python), "-m", "pip", "check"], log, report, deadline, tag=tag)
    return python


def _build(spec: VenvSpec, key: str, report: Reporter) -> None:
    log = spec.cache_dir / "build.log"
    log.write_text(f"building venv {spec.venv} (key {key})\n")
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    python = build_pinned_venv(
        sys.executable, spec.venv, spec.requirements, log, report, deadline, tag=spec.tag
    )
    versions = check_interpreter(python, spec)
    (spec.venv / KEY_FILE).write_text(key + "\n")
    report(f"{spec.tag} ready: {versions}")


def ensure_python(spec: VenvSpec, report: Reporter = _stderr) -> Path:
    """Return the path of ``spec``'s python, building its cached venv if needed.

    Raises `RefEnvError` if the environment cannot be built or verified.
    """
    override = os.environ.get(spec.env_var)
    if override:
        report(f"{spec.tag} using {spec.env_var}={override}: {check_interpreter(override, spec)}")
        return Path(override)
    venv = spec.venv
    key = cache_key(spec)
    key_file = venv / KEY_FILE
    with venv_lock(spec.cache_dir / ".lock", report, spec.tag):
        if key_file.is_file() and key_file.read_text().strip() == key:
            return venv_python(venv)
        if venv.exists():
            report(f"{spec.tag} cached venv is stale or incomplete; rebuilding")
        start = time.monotonic()
        _build(spec, key, report)
        report(f"{spec.tag} built in {time.monotonic() - start:.1f} s")
    return venv_python(venv)


def ensure_reference_python(report: Reporter = _stderr) -> Path:
    """Return the path of a python with zarr 2.18 and xarray 2024.10, building the cached venv if needed.

    Raises `RefEnvError` if the environment cannot be built or verified.
    """
    return ensure_python(REFERENCE, report)


if __name__ == "__main__":
    try:
        print(ensure_python(SHIM if sys.argv[1:] == ["shim"] else REFERENCE))
    except RefEnvError as exc:
        _stderr(str(exc))
        sys.exit(1)
