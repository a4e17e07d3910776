"""Developer sessions: ``nox`` runs what CI runs (``tests-3.11``, ``core-3.12``, ``core-3.13``, ``lint``,
``typecheck``); ``nox -s tests-3.13`` the whole suite on another Python; ``bench`` is never run by default."""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox

#: The Pythons azarr supports (pyproject's classifiers).
PYTHONS = ["3.11", "3.12", "3.13"]
#: The one CI runs the whole suite on: torch's CPU wheel here is for 3.11 only (see the test extra).
FULL = "3.11"
#: The core tests CI runs on the other Pythons: the code whose behaviour depends on the interpreter
#: and on the library versions each Python gets (numcodecs 0.17 and newer NumPy from 3.12 on) --
#: asyncio fan-out, budgets, retries and cancellation, the sync facade's loop thread, codecs,
#: metadata, the read/write pipeline and atomic local writes, and the S3 transport (aiohttp,
#: SigV4) against SeaweedFS. Left out, to keep CI under its 25 minutes: indexing, arrays, groups
#: and convenience functions (NumPy selection logic and hierarchy walks over the same pipeline,
#: half of the set's time), the property-based selection tests, the interop venvs, CLI, docs and
#: integrations, which exercise the same core through more layers at many times the cost.
CORE = [
    "tests/test_fanout.py",
    "tests/test_scheduler.py",
    "tests/test_sync.py",
    "tests/test_codecs.py",
    "tests/test_metadata.py",
    "tests/test_pipeline.py",
    "tests/test_local_writes.py",
    "tests/test_s3_transport.py",
]

nox.options.sessions = [f"tests-{FULL}", *(f"core-{v}" for v in PYTHONS if v != FULL), "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True
#: uv when it is installed (the test extra brings it): a session's install takes seconds instead of
#: minutes (pip took 210 s for ``.[test]`` on 3.12 here, uv 5 s, the same packages); virtualenv + pip
#: otherwise.
nox.options.default_venv_backend = "uv|virtualenv"


def _select_pyenv_pythons() -> None:
    """pyenv's shims answer ``python3.12`` only for the versions selected: select every installed
    3.11-3.13 (3.11 first, so ``python3`` stays 3.11) so that nox finds each interpreter."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if "PYENV_VERSION" in os.environ or not root.is_dir():
        return
    versions = [p.name for p in root.iterdir() if re.fullmatch(r"3\.1[1-3]\.\d+", p.name)]
    if versions:
        os.environ["PYENV_VERSION"] = ":".join(sorted(versions, key=lambda v: [int(x) for x in v.split(".")]))


_select_pyenv_pythons()


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The default test suite (servers started by fixtures), as CI runs it on 3.11."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *session.posargs, env={"AWS_EC2_METADATA_DISABLED": "true"})


@nox.session(python=PYTHONS)
def core(session: nox.Session) -> None:
    """The core tests (``CORE``), as CI runs them on 3.12 and 3.13."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", *CORE, *session.posargs, env={"AWS_EC2_METADATA_DISABLED": "true"})


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff lint and format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "azarr", "tests", "examples", "noxfile.py")
    session.run("ruff", "format", "--check", "azarr", "tests", "examples", "noxfile.py")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """mypy --strict on azarr/."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session(python="3.11")
def interop(session: nox.Session) -> None:
    """Interop with zarr-python 2.18 / xarray in both directions.

    The reference implementation lives in its own venv (zarr 2.18 needs
    numcodecs < 0.16), built by the tests under ``.cache/ref-zarr218``.
    """
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/interop",
        "-m",
        "interop",
        *session.posargs,
        env={"AWS_EC2_METADATA_DISABLED": "true"},
    )


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Indexing overhead vs zarr-python 2.18, 3.1 and 3.4 (``benchmarks/results/indexing.md``), then read memory.

    Each peer runs in its own venv, built once and cached under
    ``.cache/bench-venvs`` (zarr 2.18 reuses the interop venv when present).
    Arguments after ``--`` go to ``python -m benchmarks.bench_indexing``
    (e.g. ``nox -s bench -- --rounds 1 --compressors none``).
    """
    session.install("-e", ".")
    session.run("python", "-m", "benchmarks.bench_indexing", *session.posargs)
    session.run("python", "-m", "benchmarks.bench_memory", "--gib", "1")


@nox.session(name="bench-cloud", python="3.11")
def bench_cloud(session: nox.Session) -> None:
    """azarr vs zarr-python 2.18 / 3.1 (s3fs, obstore) and TensorStore on S3 with 20 ms latency.

    Starts SeaweedFS (the test extras' ``weed``) and a delay proxy on 127.0.0.1,
    builds the peers' venvs under ``.cache/bench-venvs`` on first use, and writes
    ``benchmarks/results/cloud.{md,png,json}``. ~15 minutes (2 rounds); arguments after
    ``--`` go to ``python -m benchmarks.bench_cloud`` (e.g. ``nox -s bench-cloud -- --quick``).
    """
    session.install("-e", ".[test]", "trustme")  # trustme: the test CA of --https
    session.run(
        "python", "-m", "benchmarks.bench_cloud", *session.posargs, env={"AWS_EC2_METADATA_DISABLED": "true"}
    )


def _run_benchmark(session: nox.Session, module: str) -> None:
    """Install azarr with its test extras (the servers) and run ``benchmarks.<module>`` with the
    session's arguments."""
    session.install("-e", ".[test]")
    session.run(
        "python", "-m", f"benchmarks.{module}", *session.posargs, env={"AWS_EC2_METADATA_DISABLED": "true"}
    )


@nox.session(name="bench-references", python="3.11")
def bench_references(session: nox.Session) -> None:
    """A NetCDF4 file through kerchunk references on S3 with 20 ms latency: azarr vs fsspec's
    ReferenceFileSystem + zarr-python 3.4 and h5netcdf over s3fs.

    The file and its references are made in the archival venv (Python 3.12, built once under
    ``.cache/ref-archival-*``); writes ``benchmarks/results/references-<size>-<delay>ms.{md,json}``.
    Arguments after ``--`` go to ``python -m benchmarks.bench_references`` (``--size-mib 64``).
    """
    _run_benchmark(session, "bench_references")


@nox.session(name="bench-throttle", python="3.11")
def bench_throttle(session: nox.Session) -> None:
    """Six readers (one process with four event loops, two with one) behind a server that
    answers ``503 SlowDown`` beyond K requests at once or R per second: azarr against
    zarr-python 3.4 + obstore (a Python 3.12 venv) and TensorStore: failed reads, goodput,
    throttled share, retries. Writes ``benchmarks/results/throttle.{md,json}``; arguments
    after ``--`` go to ``python -m benchmarks.bench_throttle``.
    """
    _run_benchmark(session, "bench_throttle")


@nox.session(name="bench-icechunk", python="3.11")
def bench_icechunk(session: nox.Session) -> None:
    """Virtual chunks of an Icechunk repository on S3 with 20 ms latency: azarr's IcechunkStore
    vs zarr-python 3.4 on icechunk's own store.

    Both run in the Icechunk venv (Python 3.12, built once under ``.cache/ref-icechunk-*``);
    writes ``benchmarks/results/icechunk-<size>mib-<delay>ms.{md,json}``. Arguments after ``--``
    go to ``python -m benchmarks.bench_icechunk`` (``--size-mib 64``).
    """
    _run_benchmark(session, "bench_icechunk")


@nox.session(name="bench-integrations", python="3.11")
def bench_integrations(session: nox.Session) -> None:
    """xarray ``engine="azarr"`` vs xarray + zarr 3.1 (s3fs, obstore), dask ``from_azarr`` vs ``da.from_zarr``
    (zarr 2.18, 3.1) on a 2-process cluster, the sync facade's overhead, and xarray's I/O patterns
    (``open_datatree`` of 200 groups, ``compute=False`` + region writes on a cluster) against
    xarray + zarr 3.4 (obstore, s3fs), on S3 with 20 ms latency.

    Writes ``benchmarks/results/{xarray,dask,xarray-io}.json``. Arguments after ``--`` go to
    every script (e.g. ``nox -s bench-integrations -- --quick``).
    """
    session.install("-e", ".[test]")
    env = {"AWS_EC2_METADATA_DISABLED": "true"}
    session.run("python", "-m", "benchmarks.bench_xarray", *session.posargs, env=env)
    session.run("python", "-m", "benchmarks.bench_dask", *session.posargs, env=env)
    session.run("python", "-m", "benchmarks.bench_xarray_io", *session.posargs, env=env)


@nox.session(python="3.11")
def fuzz(session: nox.Session) -> None:
    """The hostile-input fuzzers at scale: 20,000 random mutated stores (tests/test_fuzz.py), 4,000 zip
    archives, 6,666 kerchunk reference documents (tests/test_fuzz_references.py), 5,000 hostile
    HTTP/S3 server answers (tests/test_fuzz_transport.py).

    ``nox -s fuzz -- 50000`` runs more. Writes its figures (cases, seconds, peak
    RSS growth, slowest case) to ``.cache/fuzz-report.json``.
    """
    session.install("-e", ".[test]")
    examples = session.posargs[0] if session.posargs else "20000"
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/test_fuzz.py",
        "tests/test_fuzz_zip.py",
        "tests/test_fuzz_references.py",
        "tests/test_hostile_corpus.py",
        "tests/test_fuzz_transport.py",
        "-q",
        "-p",
        "no:cacheprovider",
        env={
            "AZARR_FUZZ_EXAMPLES": examples,
            "AZARR_TRANSPORT_FUZZ_CASES": "5000",
            "AZARR_FUZZ_RANDOM": "1",
            "AZARR_FUZZ_REPORT": ".cache/fuzz-report.json",
        },
    )


@nox.session(name="bench-apps", python="3.11")
def bench_apps(session: nox.Session) -> None:
    """The two uses on S3 with 20 ms latency: the example FastAPI service and the training loader.

    ``benchmarks/results/service.{md,json}`` (requests/s, p50/p99 for 1-element, 1-chunk and
    16-chunk slices) and ``loader.{md,json}`` (samples/s vs torch map-style loaders over zarr
    2.18 + s3fs and zarr 3.1 + obstore, xbatcher, and raw GETs). Arguments after ``--`` go
    to both (e.g. ``nox -s bench-apps -- --quick``).
    """
    session.install("-e", ".[test]")
    env = {"AWS_EC2_METADATA_DISABLED": "true"}
    session.run("python", "-m", "benchmarks.bench_service", *session.posargs, env=env)
    session.run("python", "-m", "benchmarks.bench_loader", *session.posargs, env=env)


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """Build the documentation site strictly into ``site/`` (``nox -s docs -- serve`` to preview it)."""
    session.install("-e", ".[docs,cli]")
    env = {"NO_MKDOCS_2_WARNING": "1"}
    if session.posargs[:1] == ["serve"]:
        session.run("mkdocs", "serve", *session.posargs[1:], env=env)
    else:
        session.run("mkdocs", "build", "--strict", *session.posargs, env=env)


@nox.session(name="bench-cli", python="3.11")
def bench_cli(session: nox.Session) -> None:
    """``azarr cp`` against ``copy_store`` between two SeaweedFS buckets behind 20 ms latency.

    Writes ``benchmarks/results/cli-cp.md``; 1 GiB, 3 rounds by default (``-- --quick``: 128 MiB, 1 round).
    """
    session.install("-e", ".[test,cli]")
    session.run(
        "python", "-m", "benchmarks.bench_cli_cp", *session.posargs, env={"AWS_EC2_METADATA_DISABLED": "true"}
    )


@nox.session(name="bench-local", python="3.11")
def bench_local(session: nox.Session) -> None:
    """Local disk: azarr vs zarr-python 2.18 / 3.1 and TensorStore, 1 GiB read/write per codec.

    Writes ``benchmarks/results/local.{md,json}``. Arguments after ``--`` go to
    ``python -m benchmarks.bench_local`` (e.g. ``nox -s bench-local -- --mib 256 --rounds 1``;
    ``--drop-caches`` for cold reads, as root: it drops the page cache machine-wide).
    """
    session.install("-e", ".")
    session.run("python", "-m", "benchmarks.bench_local", *session.posargs)
