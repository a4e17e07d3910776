"""zarr-python 2.18's tutorial, run through ``azarr.sync``, prints what zarr 2.18 prints.

``docs/tutorial.rst`` comes from zarr 2.18.7's sdist (``pip download zarr==2.18.7 --no-binary :all:
--no-deps`` in the venv of ``refenv.SHIM``, cached under ``.cache/zarr218-azarr/``; never committed).
``zarr2_shim/run_tutorial.py`` runs every example twice in that venv: with zarr 2.18 as written, and
with its imports swapped to ``azarr.sync`` (``import azarr.sync as zarr``) and nothing else, and
records what each example printed. The two must be the same, except for the class names azarr
prints where zarr 2.18 prints its own (`TYPE_NAMES`) and the lines in `LISTED_LINES`, each of which
docs/parity.md explains. About 35 s (the tutorial fills several 400 MB arrays, twice).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

from .refenv import REPO_ROOT, SHIM, RefEnvError, cache_key, ensure_python, venv_lock

pytestmark = [pytest.mark.interop, pytest.mark.slow]  # and the venv of test_zarr2_suite.py

SDIST = "zarr==2.18.7"
TUTORIAL = SHIM.cache_dir / "tutorial-2.18.7.rst"
RUNNER = Path(__file__).resolve().parent / "zarr2_shim" / "run_tutorial.py"
RUN_TIMEOUT_S = 600.0

#: zarr 2.18's class names and azarr's, in reprs and in ``info``'s Type and Store type rows.
TYPE_NAMES = (
    ("azarr.sync.Array", "zarr.core.Array"),
    ("azarr.sync.Group", "zarr.hierarchy.Group"),
    ("Store type         : azarr.sync.MemoryStore", "Store type         : zarr.storage.KVStore"),
    ("Store type         : azarr.sync.MemoryStore", "Store type         : zarr.storage.MemoryStore"),
    ("Store type  : azarr.sync.MemoryStore", "Store type  : zarr.storage.MemoryStore"),
)

#: Tutorial lines whose output differs from run to run, and what of it is compared: the pattern
#: is replaced by ``…`` in both outputs.
VARYING: dict[int, str] = {1484: r"\d+\.\d+s,"}  # write times (the "objects stored" counts are compared)

_SQLITE = "azarr.sync has no SQLiteStore (docs/parity.md, stores)"
_SQLITE_AFTER = "the SQLiteStore line failed, so `store` is still the read-only ZipStore of the line before"
_ERROR_TEXT = "error messages are azarr's: its class and a message naming the store (docs/parity.md, errors)"

#: Tutorial lines (of ``docs/tutorial.rst`` in zarr 2.18.7's sdist) where azarr prints otherwise, and why.
LISTED_LINES: dict[int, str] = {
    837: _SQLITE,
    838: _SQLITE_AFTER,
    839: _SQLITE_AFTER,
    840: _SQLITE_AFTER,
    1521: _ERROR_TEXT,
    1522: _ERROR_TEXT,
    1529: _ERROR_TEXT,
}


@pytest.fixture(scope="module")
def shim_python() -> Path:
    try:
        return ensure_python(SHIM, lambda msg: print(msg, flush=True))
    except RefEnvError as exc:
        pytest.fail(f"zarr 2.18 + azarr venv unavailable:\n{exc}", pytrace=False)


@pytest.fixture(scope="module")
def tutorial(shim_python: Path) -> Path:
    """zarr 2.18.7's ``docs/tutorial.rst``, from its sdist (downloaded once, then cached)."""
    with venv_lock(SHIM.cache_dir / ".sdist.lock", lambda msg: print(msg, flush=True), SHIM.tag):
        if not TUTORIAL.is_file():
            download = SHIM.cache_dir / "sdist"
            subprocess.run(
                [
                    str(shim_python),
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    SDIST,
                    "--no-binary",
                    ":all:",
                    "--no-deps",
                    "-d",
                    str(download),
                ],
                check=True,
                timeout=300,
                capture_output=True,
            )
            (archive,) = download.glob("zarr-2.18.7.tar.gz")
            with tarfile.open(archive) as tar:
                member = tar.extractfile("zarr-2.18.7/docs/tutorial.rst")
                assert member is not None
                TUTORIAL.write_bytes(member.read())
    return TUTORIAL


def _run(python: Path, tutorial: Path, library: str, workdir: Path) -> list[dict[str, Any]]:
    workdir.mkdir()
    out = workdir / "examples.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(REPO_ROOT), PYTHONNOUSERSITE="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [str(python), "-s", str(RUNNER), str(tutorial), library, str(out)],
        cwd=workdir,  # the tutorial writes data/...
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, f"the tutorial runner failed with {library}:\n{proc.stderr[-4000:]}"
    records: list[dict[str, Any]] = json.loads(out.read_text())
    return records


def _zarr_records(python: Path, tutorial: Path, workdir: Path) -> list[dict[str, Any]]:
    """What the tutorial prints with zarr 2.18: run once per venv and runner, then read from the cache."""
    key = f"{cache_key(SHIM)}:{hashlib.sha256(RUNNER.read_bytes()).hexdigest()}"
    cached = SHIM.cache_dir / "tutorial-zarr-output.json"
    with venv_lock(SHIM.cache_dir / ".sdist.lock", lambda msg: print(msg, flush=True), SHIM.tag):
        if cached.is_file():
            stored = json.loads(cached.read_text())
            if stored["key"] == key:
                records: list[dict[str, Any]] = stored["records"]
                return records
        records = _run(python, tutorial, "zarr", workdir)
        cached.write_text(json.dumps({"key": key, "records": records}))
    return records


def _steady(line: int, got: str | None) -> str:
    return re.sub(VARYING[line], "…", got or "") if line in VARYING else got or ""


def _same(zarr_got: str, azarr_got: str) -> bool:
    """Line for line the same, once azarr's class names are read as zarr 2.18's (`TYPE_NAMES`)."""
    zarr_lines, azarr_lines = zarr_got.splitlines(), azarr_got.splitlines()
    return len(zarr_lines) == len(azarr_lines) and all(
        mine == theirs or any(mine.replace(a, z) == theirs for a, z in TYPE_NAMES)
        for mine, theirs in zip(azarr_lines, zarr_lines, strict=True)
    )


def test_tutorial_prints_what_zarr2_prints(shim_python: Path, tutorial: Path, tmp_path: Path) -> None:
    """Every example of zarr 2.18's tutorial prints the same through azarr.sync, but the listed lines."""
    zarr_records = _zarr_records(shim_python, tutorial, tmp_path / "zarr")
    azarr_records = _run(shim_python, tutorial, "azarr", tmp_path / "azarr")
    assert [r["line"] for r in zarr_records] == [r["line"] for r in azarr_records]
    ran = [(z, a) for z, a in zip(zarr_records, azarr_records, strict=True) if "skipped" not in z]
    assert len(ran) > 300, f"only {len(ran)} tutorial examples ran"
    differ = {
        z["line"]: (z["got"], a["got"])
        for z, a in ran
        if not _same(_steady(z["line"], z["got"]), _steady(a["line"], a["got"]))
    }
    unlisted = {line: got for line, got in differ.items() if line not in LISTED_LINES}
    assert not unlisted, "azarr.sync prints otherwise than zarr 2.18:\n" + "\n".join(
        f"line {line}:\n  zarr : {z!r}\n  azarr: {a!r}" for line, (z, a) in sorted(unlisted.items())
    )
    stale = sorted(set(LISTED_LINES) - set(differ))
    assert not stale, f"tutorial lines listed as different print the same now: {stale} (update LISTED_LINES)"
