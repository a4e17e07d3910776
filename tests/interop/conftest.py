"""Fixtures for the zarr-python 2.18 interop tests.

``zarr2_python``  the reference interpreter (cached venv, see ``refenv.py``; ``AZARR_REF_PYTHON`` overrides).
``zarr2_corpus``  a corpus written by zarr 2.18 (``ref_scripts/write_corpus.py``), once per session.
``run_ref_script``  run a ``ref_scripts/*.py`` file with the reference interpreter.
``s3_corpus``  the corpus stores uploaded to a SeaweedFS bucket (``seaweedfs`` from tests/conftest.py).
``gcs_corpus``  the same on fake-gcs-server (``fake_gcs``).
``azure_corpus``  the same on Azurite (``azurite``), uploaded with the Azure SDK.
``http_corpus``  the corpus stores published by the static-file server (``http_server``).

A reference environment that cannot be built FAILS the tests: CI must run them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .refenv import RefEnvError, Reporter, ensure_reference_python

T = TypeVar("T")

REF_SCRIPTS = Path(__file__).resolve().parent / "ref_scripts"
SCRIPT_TIMEOUT_S = 180.0


def _uncaptured(config: pytest.Config) -> AbstractContextManager[Any]:
    """Let progress lines through pytest's output capture (the venv build takes a while)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    return capman.global_and_fixture_disabled() if capman is not None else nullcontext()


def built_or_fail(config: pytest.Config, build: Callable[[Reporter], T], what: str) -> T:
    """``build(report)`` with its progress lines shown live; a `RefEnvError` fails the test
    (no traceback: the message has the build log's tail)."""

    def report(msg: str) -> None:
        with _uncaptured(config):
            print(msg, flush=True)

    try:
        return build(report)
    except RefEnvError as exc:
        error = str(exc)
    pytest.fail(f"{what} unavailable:\n{error}", pytrace=False)


@pytest.fixture(scope="session")
def zarr2_python(pytestconfig: pytest.Config) -> Path:
    """Path of a python interpreter with zarr 2.18 (built on first use, then cached)."""
    return built_or_fail(pytestconfig, ensure_reference_python, "zarr 2.18 reference environment")


@dataclass(frozen=True)
class RefResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def report(self) -> str:
        return (
            f"exit {self.returncode} after {self.seconds:.1f} s\n"
            f"--- stdout ---\n{self.stdout}\n--- stderr ---\n{self.stderr}"
        )


RunRef = Callable[..., RefResult]


@pytest.fixture(scope="session")
def run_ref_script(zarr2_python: Path) -> RunRef:
    """``run_ref_script("write_corpus.py", target)`` runs a reference script and returns its result."""

    def run(script: str, *args: str | Path, timeout: float = SCRIPT_TIMEOUT_S) -> RefResult:
        start = time.monotonic()
        proc = subprocess.run(
            # -E -s: ignore PYTHONPATH & co and the user site, so nothing of azarr's env leaks in
            [str(zarr2_python), "-E", "-s", str(REF_SCRIPTS / script), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=REF_SCRIPTS,
            stdin=subprocess.DEVNULL,
        )
        return RefResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)

    return run


@dataclass(frozen=True)
class RefCorpus:
    """A directory written by ``write_corpus.py``: stores, ``expected/*.npy`` and ``manifest.json``."""

    root: Path
    manifest: dict[str, Any]

    @property
    def arrays(self) -> list[dict[str, Any]]:
        return list(self.manifest["arrays"])

    @property
    def groups(self) -> list[dict[str, Any]]:
        return list(self.manifest["groups"])

    def array(self, case_id: str) -> dict[str, Any]:
        for entry in self.manifest["arrays"]:
            if entry["id"] == case_id:
                return dict(entry)
        raise KeyError(f"no array {case_id!r} in the corpus manifest")


@pytest.fixture(scope="session")
def zarr2_corpus(run_ref_script: RunRef, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefCorpus]:
    """The zarr 2.18 corpus, written once per session into a temporary directory."""
    target = tmp_path_factory.mktemp("zarr218-corpus") / "corpus"
    result = run_ref_script("write_corpus.py", target)
    if result.returncode != 0:
        pytest.fail(f"write_corpus.py failed:\n{result.report}", pytrace=False)
    yield RefCorpus(target, json.loads((target / "manifest.json").read_text()))


def _upload_corpus(corpus: RefCorpus, fs: Any, prefix: str, server: str) -> None:
    """Copy the corpus stores (not the expected files) to ``prefix/<store name>/`` with fsspec ``fs``."""
    files: dict[str, bytes] = {}
    for store_name in corpus.manifest["stores"]:
        store_dir = corpus.root / store_name
        for file in store_dir.rglob("*"):
            if file.is_file():
                files[f"{prefix}/{store_name}/{file.relative_to(store_dir).as_posix()}"] = file.read_bytes()
    try:
        fs.pipe(files)
        missing = sorted(set(files) - set(fs.find(prefix)))
    finally:
        # Close its session on its own loop now: left to garbage collection, gcsfs's and
        # s3fs's finalizers close it from whichever thread collects it (unsafe, and
        # reported by pytest in whatever test runs then).
        import fsspec.asyn

        from azarr.storage import FsspecStore

        fsspec.asyn.sync(fs.loop, FsspecStore._close_fs, fs)
    assert not missing, f"upload to {server} lost {len(missing)} objects, e.g. {missing[:5]}"


@dataclass(frozen=True)
class S3Corpus:
    """The corpus stores under ``s3://{prefix}/<store name>`` on SeaweedFS."""

    prefix: str  # "bucket/corpus"
    storage_options: dict[str, Any]


@pytest.fixture(scope="session")
def s3_corpus(zarr2_corpus: RefCorpus, seaweedfs: Any) -> S3Corpus:
    """Upload the zarr 2.18 stores (not the expected files) to a fresh bucket, once per session."""
    import s3fs

    prefix = f"{seaweedfs.create_bucket()}/corpus"
    fs = s3fs.S3FileSystem(**seaweedfs.storage_options, skip_instance_cache=True)
    _upload_corpus(zarr2_corpus, fs, prefix, "SeaweedFS")
    return S3Corpus(prefix, dict(seaweedfs.storage_options))


@dataclass(frozen=True)
class GCSCorpus:
    """The corpus stores under ``gs://{prefix}/<store name>`` on fake-gcs-server."""

    prefix: str  # "bucket/corpus"
    storage_options: dict[str, Any]


@pytest.fixture(scope="session")
def gcs_corpus(zarr2_corpus: RefCorpus, fake_gcs: Any) -> GCSCorpus:
    """Upload the zarr 2.18 stores (not the expected files) to a fresh fake-gcs bucket, once per session."""
    prefix = f"{fake_gcs.create_bucket()}/corpus"
    _upload_corpus(zarr2_corpus, fake_gcs.filesystem(), prefix, "fake-gcs-server")
    return GCSCorpus(prefix, dict(fake_gcs.storage_options))


@dataclass(frozen=True)
class AzureCorpus:
    """The corpus stores under ``az://{prefix}/<store name>`` on Azurite."""

    prefix: str  # "container/corpus"
    storage_options: dict[str, Any]


@pytest.fixture(scope="session")
def azure_corpus(zarr2_corpus: RefCorpus, azurite: Any) -> AzureCorpus:
    """Upload the zarr 2.18 stores to a fresh Azurite container with the Azure SDK, once per session."""
    from concurrent.futures import ThreadPoolExecutor

    from azure.storage.blob import ContainerClient

    container = azurite.create_container()
    uploads = []
    for store_name in zarr2_corpus.manifest["stores"]:
        store_dir = zarr2_corpus.root / store_name
        for file in store_dir.rglob("*"):
            if file.is_file():
                uploads.append((f"corpus/{store_name}/{file.relative_to(store_dir).as_posix()}", file))
    with ContainerClient.from_connection_string(azurite.connection_string, container) as client:

        def upload(item: tuple[str, Path]) -> None:
            client.upload_blob(item[0], item[1].read_bytes(), overwrite=True)

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(upload, uploads))
        stored = {blob.name for blob in client.list_blobs(name_starts_with="corpus/")}
    missing = sorted({name for name, _ in uploads} - stored)
    assert not missing, f"upload to Azurite lost {len(missing)} objects, e.g. {missing[:5]}"
    return AzureCorpus(f"{container}/corpus", dict(azurite.storage_options))


@dataclass(frozen=True)
class HTTPCorpus:
    """The corpus stores published by the static-file server (tests/http_server.py)."""

    server_url: str
    directory: str  # below the served root

    def url(self, store_name: str, *, listings: bool = True) -> str:
        """URL of a corpus store; ``listings=False`` serves it without directory indexes."""
        via = "" if listings else "/_nolist"
        return f"{self.server_url}{via}/{self.directory}/{store_name}"


@pytest.fixture(scope="session")
def http_corpus(zarr2_corpus: RefCorpus, http_server: Any) -> HTTPCorpus:
    """Copy the zarr 2.18 stores into the HTTP server's directory, once per session."""
    directory = "zarr218-corpus"
    for store_name in zarr2_corpus.manifest["stores"]:
        shutil.copytree(zarr2_corpus.root / store_name, http_server.root / directory / store_name)
    return HTTPCorpus(http_server.url, directory)
