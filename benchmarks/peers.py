"""Peer implementations for the benchmarks, each in its own cached virtualenv.

zarr-python 2.18 needs numcodecs < 0.16 and zarr-python 3 (3.1.x on Python
3.11) wants a newer one, so neither can share azarr's environment: each peer
gets a venv under ``<repo>/.cache/bench-venvs/<name>``, built once with pip and
reused while its requirements and the base interpreter's ``major.minor`` are
unchanged (a key file records both; a ``flock`` serialises concurrent builds).

For zarr 2.18 the interop tests' reference venv (``.cache/ref-zarr218/venv``,
built by ``tests/interop/refenv.py``) is reused when it is present and
complete, so the same interpreter serves both. ``AZARR_BENCH_<NAME>_PYTHON``
(e.g. ``AZARR_BENCH_ZARR218_PYTHON``, ``AZARR_BENCH_ZARR3_S3_PYTHON``: dashes become
underscores) points at an existing interpreter instead. Besides the peers,
``plot`` is the interpreter that draws the charts (matplotlib is no azarr dependency).

Run ``python -m benchmarks.peers`` to build every peer and print the interpreters.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = REPO_ROOT / ".cache" / "bench-venvs"
KEY_FILE = ".azarr-bench-key"
BUILD_TIMEOUT_S = 900.0


def _load_refenv() -> ModuleType:
    """``tests/interop/refenv.py``, which builds the interop tests' zarr 2.18 venv: its
    location, key file and lock are reused here (loaded by path: ``tests`` is no package)."""
    path = REPO_ROOT / "tests" / "interop" / "refenv.py"
    spec = importlib.util.spec_from_file_location("azarr_bench_refenv", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


refenv = _load_refenv()
Reporter = refenv.Reporter
venv_python = refenv.venv_python


class PeerError(RuntimeError):
    """A peer venv could not be built or does not import; the message carries the details."""


@dataclass(frozen=True)
class Peer:
    """A reference implementation to benchmark against.

    Attributes
    ----------
    name : str
        Short name, also the venv's directory name (``zarr218``, ``zarr3``).
    label : str
        Column heading in result tables.
    requirements : tuple of str
        What ``pip install`` gets (pinned, so results are comparable between runs).
    expect_version : str
        Prefix the ``__version__`` of ``modules[0]`` must have.
    modules : tuple of str
        Modules the venv must import; `peer_versions` reports their versions
        (the first is the one ``expect_version`` checks).
    python : str, optional
        Python ``major.minor`` to build the venv on (zarr-python >= 3.2 needs 3.12),
        found by `base_interpreter`; None: the interpreter running this module.
    """

    name: str
    label: str
    requirements: tuple[str, ...]
    expect_version: str
    modules: tuple[str, ...] = ("zarr", "numcodecs", "numpy")
    python: str | None = None


PEERS: dict[str, Peer] = {
    "zarr218": Peer(
        name="zarr218",
        label="zarr 2.18",
        requirements=("zarr==2.18.7", "numcodecs==0.15.2", "numpy==2.2.6"),
        expect_version="2.18.",
    ),
    "zarr3": Peer(
        name="zarr3",
        label="zarr 3.1",
        requirements=("zarr==3.1.6", "numpy==2.2.6"),
        expect_version="3.1.",
    ),
    # Cloud peers (benchmarks/bench_cloud.py): the same libraries plus their S3 layers,
    # s3fs pinned to the version azarr's own venv uses so the fsspec paths compare alike.
    "zarr218-s3": Peer(
        name="zarr218-s3",
        label="zarr 2.18 + s3fs",
        requirements=("zarr==2.18.7", "numcodecs==0.15.2", "numpy==2.2.6", "s3fs==2026.9.0"),
        expect_version="2.18.",
        modules=("zarr", "numcodecs", "numpy", "s3fs", "aiobotocore", "botocore"),
    ),
    "zarr3-s3": Peer(
        name="zarr3-s3",
        label="zarr 3.1 + s3fs / obstore",
        requirements=("zarr==3.1.6", "numpy==2.2.6", "s3fs==2026.9.0", "obstore==0.12.1"),
        expect_version="3.1.",
        modules=("zarr", "numcodecs", "numpy", "s3fs", "aiobotocore", "botocore", "obstore"),
    ),
    # zarr-python's newest on Python 3.12 (3.2+ needs it), with obstore: the throttling
    # benchmark's peer (benchmarks/bench_throttle.py).
    "zarr34-obstore": Peer(
        name="zarr34-obstore",
        label="zarr 3.4 + obstore",
        requirements=("zarr==3.4.2", "numcodecs==0.17.1", "numpy==2.2.6", "obstore==0.12.1"),
        expect_version="3.4.",
        modules=("zarr", "numcodecs", "numpy", "obstore"),
        python="3.12",
    ),
    "zarr34-service": Peer(
        name="zarr34-service",
        label="zarr 3.4 + obstore, FastAPI",
        requirements=(
            "zarr==3.4.2",
            "numcodecs==0.17.1",
            "numpy==2.2.6",
            "obstore==0.12.1",
            "fastapi==0.165.0",
            "uvicorn==0.54.0",
        ),
        expect_version="3.4.",
        modules=("zarr", "numcodecs", "numpy", "obstore", "fastapi", "uvicorn"),
        python="3.12",
    ),
    "tensorstore": Peer(
        name="tensorstore",
        label="TensorStore",
        requirements=("tensorstore==0.1.86", "numpy==2.2.6"),
        expect_version="0.1.",
        modules=("tensorstore", "numpy"),
    ),
    # Zarr v3 cloud peers (benchmarks/bench_cloud.py --zarr-format 3): zarr-python 3.4 on
    # Python 3.12 with obstore, run with its default BatchedCodecPipeline, its FusedCodecPipeline
    # and the zarrs (Rust) codec pipeline, all from this one venv.
    "zarr34-zarrs": Peer(
        name="zarr34-zarrs",
        label="zarr 3.4 + obstore (+ zarrs)",
        requirements=("zarr==3.4.2", "numcodecs==0.17.1", "numpy==2.2.6", "obstore==0.12.1", "zarrs==0.2.3"),
        expect_version="3.4.",
        modules=("zarr", "numcodecs", "numpy", "obstore", "zarrs"),
        python="3.12",
    ),
    # Training-loader peers (benchmarks/bench_loader.py): torch DataLoader over map-style
    # datasets, and xbatcher over xarray (beside zarr 2.18, as TESTING-NOTES advises).
    "loader-zarr218": Peer(
        name="loader-zarr218",
        label="torch DataLoader + zarr 2.18 + s3fs",
        requirements=("zarr==2.18.7", "numcodecs==0.15.2", "numpy==2.2.6", "s3fs==2026.9.0", "torch==2.13.0"),
        expect_version="2.18.",
        modules=("zarr", "numcodecs", "numpy", "s3fs", "torch"),
    ),
    "loader-zarr3": Peer(
        name="loader-zarr3",
        label="torch DataLoader + zarr 3.1 + obstore",
        requirements=("zarr==3.1.6", "numpy==2.2.6", "obstore==0.12.1", "torch==2.13.0"),
        expect_version="3.1.",
        modules=("zarr", "numcodecs", "numpy", "obstore", "torch"),
    ),
    "loader-xbatcher": Peer(
        name="loader-xbatcher",
        label="xbatcher + xarray + zarr 2.18",
        requirements=(
            "zarr==2.18.7",
            "numcodecs==0.15.2",
            "numpy==2.2.6",
            "s3fs==2026.9.0",
            "xarray==2024.10.0",
            "xbatcher==0.4.0",
            "torch==2.13.0",
        ),
        expect_version="2.18.",
        modules=("zarr", "numcodecs", "numpy", "s3fs", "xarray", "xbatcher", "torch"),
    ),
    # Not a benchmark peer: zarr 2.18 with h5py, for the copy/copy_all interop test with HDF5 sources
    # (tests/interop/test_copy_nodes.py); the interop reference venv has no h5py.
    "zarr218-h5py": Peer(
        name="zarr218-h5py",
        label="zarr 2.18 + h5py",
        requirements=("zarr==2.18.7", "numcodecs==0.15.2", "numpy==2.2.6", "h5py==3.14.0"),
        expect_version="2.18.",
        modules=("zarr", "numcodecs", "numpy", "h5py"),
    ),
    # Not a peer: the plotting interpreter (matplotlib stays out of azarr's dependencies).
    "plot": Peer(
        name="plot",
        label="matplotlib",
        requirements=("matplotlib==3.10.8", "numpy==2.2.6"),
        expect_version="3.10.",
        modules=("matplotlib", "numpy"),
    ),
}


def run_worker_json(
    cmd: list[str],
    *,
    what: str,
    task: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 3600,
    stderr_chars: int | None = None,
    cwd: str | Path | None = None,
) -> dict[str, Any]:
    """Run a benchmark worker (``task`` as JSON on its stdin, if given) and return the JSON
    object on the last line of its stdout.

    Raises
    ------
    RuntimeError
        The worker exited non-zero: names ``what`` and the exit code, with its stderr
        (the last ``stderr_chars`` characters, if given).
    """
    proc = subprocess.run(
        cmd,
        input=None if task is None else json.dumps(task),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
        check=False,
    )
    if proc.returncode != 0:
        stderr = proc.stderr if stderr_chars is None else proc.stderr[-stderr_chars:]
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{stderr}")
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return report


#: The azarr worker run against ``$AZARR_BASELINE`` (a directory holding an older ``azarr/``,
#: e.g. a worktree of main): before/after in one run.
BASELINE = "azarr-baseline"


def worker_pythonpath(impl: str, local_impls: tuple[str, ...] | list[str]) -> str:
    """``PYTHONPATH`` of a benchmark worker: this repository for ``local_impls`` (azarr's own
    workers), the baseline's directory ahead of it for `BASELINE`, nothing for peers (their
    own venvs).

    Raises
    ------
    SystemExit
        `BASELINE` without ``$AZARR_BASELINE``.
    """
    if impl == BASELINE:
        baseline = os.environ.get("AZARR_BASELINE")
        if not baseline:
            raise SystemExit("azarr-baseline needs AZARR_BASELINE=<directory holding an older azarr/>")
        return os.pathsep.join([baseline, str(REPO_ROOT)])
    return str(REPO_ROOT) if impl in local_impls else ""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cache_key(peer: Peer) -> str:
    """Hash of the peer's requirements and the base interpreter's ``major.minor``."""
    h = hashlib.sha256()
    h.update("\n".join(peer.requirements).encode())
    h.update(f"python{peer.python or f'{sys.version_info.major}.{sys.version_info.minor}'}".encode())
    return h.hexdigest()


def base_interpreter(peer: Peer) -> str:
    """The interpreter ``peer``'s venv is built from: this one, or Python ``peer.python``
    (the newest pyenv ``3.12.x`` under ``$PYENV_ROOT``, else ``python3.12`` on ``PATH``;
    ``refenv.find_python``, which runs each candidate once, so pyenv shims of versions not
    selected globally are skipped).

    Raises
    ------
    PeerError
        No such interpreter on this machine.
    """
    if peer.python is None:
        return sys.executable
    try:
        return str(refenv.find_python(peer.python))
    except refenv.RefEnvError as exc:
        raise PeerError(f"{peer.label} needs Python {peer.python}: {exc}") from exc


def peer_versions(python: Path | str, modules: tuple[str, ...] = ("zarr", "numcodecs", "numpy")) -> str:
    """``"zarr X numcodecs Y numpy Z"`` of ``python`` (one ``name version`` pair per module).

    Raises
    ------
    PeerError
        The interpreter cannot import one of ``modules``.
    """
    code = (
        "import importlib, importlib.metadata as md\n"
        f"for name in {list(modules)!r}:\n"
        "    mod = importlib.import_module(name)\n"
        "    print(name, getattr(mod, '__version__', None) or md.version(name))\n"
    )
    try:
        proc = subprocess.run(
            [str(python), "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerError(f"interpreter {python} cannot run: {exc!r}") from exc
    if proc.returncode != 0:
        raise PeerError(f"interpreter {python} cannot import {'/'.join(modules)}:\n{proc.stderr}")
    return " ".join(proc.stdout.split())


def _check(peer: Peer, python: Path | str) -> str:
    versions = peer_versions(python, peer.modules)
    if not versions.split()[1].startswith(peer.expect_version):
        raise PeerError(
            f"{python} has {versions}; {peer.label} needs {peer.modules[0]} {peer.expect_version}x"
        )
    return versions


def _run(cmd: list[str], log: Path, deadline: float) -> None:
    remaining = max(1.0, deadline - time.monotonic())
    with log.open("a") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        try:
            proc = subprocess.run(
                cmd,
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=remaining,
                check=False,
                env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"},
            )
        except subprocess.TimeoutExpired as exc:
            raise PeerError(f"timed out: {' '.join(cmd)} (log: {log})") from exc
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-30:])
        raise PeerError(f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")


def _build(peer: Peer, venv: Path, key: str, report: Reporter) -> None:
    log = venv.parent / f"{peer.name}.build.log"
    log.write_text(f"building {peer.label} venv {venv} (key {key})\n")
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    if venv.exists():
        shutil.rmtree(venv)
    report(f"[bench] creating {venv} for {peer.label} (pip install {' '.join(peer.requirements)}) ...")
    # From inside a venv, `-m venv` bases the new venv on the real interpreter.
    _run([base_interpreter(peer), "-m", "venv", str(venv)], log, deadline)
    _run(
        [str(venv_python(venv)), "-m", "pip", "install", "--only-binary=:all:", *peer.requirements],
        log,
        deadline,
    )
    versions = _check(peer, venv_python(venv))
    (venv / KEY_FILE).write_text(key + "\n")
    report(f"[bench] {peer.label} ready: {versions}")


def _reusable_ref_zarr218(report: Reporter) -> Path | None:
    """The interop tests' zarr 2.18 interpreter, if it was built completely."""
    if not (refenv.VENV / refenv.KEY_FILE).is_file():
        return None
    python = venv_python(refenv.VENV)
    try:
        versions = _check(PEERS["zarr218"], python)
    except PeerError as exc:
        report(f"[bench] not reusing {refenv.VENV}: {exc}")
        return None
    report(f"[bench] zarr 2.18: reusing the interop reference venv ({versions})")
    return python


def ensure_peer_python(name: str, *, report: Reporter = _stderr, cache_root: Path = CACHE_ROOT) -> Path:
    """Return an interpreter with peer ``name`` installed, building its cached venv if needed.

    Parameters
    ----------
    name : str
        A key of `PEERS`.
    report : callable, optional
        Receives progress lines (default: stderr).
    cache_root : Path, optional
        Where venvs are kept (default ``<repo>/.cache/bench-venvs``).

    Returns
    -------
    Path
        The peer's python.

    Raises
    ------
    KeyError
        Unknown peer.
    PeerError
        The venv could not be built or verified.
    """
    peer = PEERS[name]
    override = os.environ.get(f"AZARR_BENCH_{name.upper().replace('-', '_')}_PYTHON")
    if override:
        report(f"[bench] {peer.label}: using {override} ({_check(peer, override)})")
        return Path(override)
    if name == "zarr218":
        ref = _reusable_ref_zarr218(report)
        if ref is not None:
            return ref
    venv = cache_root / name
    key = cache_key(peer)
    with refenv.venv_lock(cache_root / f".{name}.lock", report, tag="[bench]"):
        key_file = venv / KEY_FILE
        if key_file.is_file() and key_file.read_text().strip() == key:
            return venv_python(venv)
        start = time.monotonic()
        _build(peer, venv, key, report)
        report(f"[bench] built {peer.label} in {time.monotonic() - start:.0f} s")
    return venv_python(venv)


if __name__ == "__main__":
    try:
        for peer_name in PEERS:
            print(peer_name, ensure_peer_python(peer_name))
    except PeerError as exc:
        _stderr(str(exc))
        sys.exit(1)
