"""xarray 2026.9's own Zarr backend tests, run against ``engine="azarr"`` and ``azarr.xarray.to_zarr``.

xarray's test classes (``test_backends.py``: ``TestZarrDictStore``,
``TestZarrDirectoryStore``, ``TestZarrWriteEmpty``; ``test_backends_datatree.py``:
``TestZarrDatatreeIO``) run from xarray's sdist in their own Python 3.12 venv
(``xarray_env.py``), with the shim ``xarray_suite/azarr_xarray_shim.py`` pointing
their write and open hooks at azarr, once per Zarr format (the tests' Zarr format 2
and 3 variants). Nothing of xarray's tests is copied here.

Every failure must be listed with its reason and format in ``docs/integrations.md``
(section "Where azarr differs from xarray's zarr engine"), every listed test must
still fail in the formats it is listed for (else the list is stale), and at most 3 %
of the selected tests may fail.

Both runs are ``@pytest.mark.slow``: each takes about 140 s on this 2-core machine
(585 tests), and the first builds the suite's venv (1-11 minutes). What the
default run keeps of xarray fidelity is azarr's own tests (``tests/test_xarray*.py``,
``test_xarray_engine.py``, ``test_xarray_v3_interop.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import built_or_fail
from .xarray_env import REPO_ROOT, SuiteEnv, ensure_suite_env

pytestmark = pytest.mark.interop

SHIM_DIR = Path(__file__).resolve().parent / "xarray_suite"
DOC = REPO_ROOT / "docs" / "integrations.md"
DOC_SECTION = "### Where azarr differs from xarray's zarr engine"
MAX_FAILING = 0.03
SUITE_TIMEOUT_S = 1500.0

CLASSES = (
    "xarray/tests/test_backends.py::TestZarrDictStore",
    "xarray/tests/test_backends.py::TestZarrDirectoryStore",
    "xarray/tests/test_backends.py::TestZarrWriteEmpty",
    "xarray/tests/test_backends_datatree.py::TestZarrDatatreeIO",
)


@dataclass(frozen=True)
class SuiteResult:
    """Outcome per test id (``Class::test[params]``), and the run's wall time."""

    outcomes: dict[str, str]
    seconds: float
    output: str

    def ids(self, outcome: str) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o == outcome)

    @property
    def counts(self) -> Counter[str]:
        return Counter(self.outcomes.values())


@pytest.fixture(scope="session")
def suite_env(pytestconfig: pytest.Config) -> SuiteEnv:
    return built_or_fail(pytestconfig, ensure_suite_env, "the xarray suite environment")


def run_suite(env: SuiteEnv, classes: tuple[str, ...], zarr_format: int, junit: Path) -> SuiteResult:
    """Run the ``zarr_format`` variants of xarray's ``classes`` through the shim; outcomes from
    the JUnit report."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    environ["PYTHONPATH"] = os.pathsep.join([str(SHIM_DIR), str(REPO_ROOT)])
    environ["AZARR_SUITE_ZARR_FORMATS"] = str(zarr_format)
    start = time.monotonic()
    proc = subprocess.run(
        [
            str(env.python),
            "-m",
            "pytest",
            "-o",
            "addopts=",  # xarray's addopts need pytest-mypy-plugins
            "-p",
            "no:cacheprovider",
            "-p",
            "azarr_xarray_shim",
            "-q",
            "-rN",
            "--timeout",
            "300",
            f"--junitxml={junit}",
            *classes,
        ],
        cwd=env.sdist,
        env=environ,
        capture_output=True,
        text=True,
        timeout=SUITE_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - start
    output = proc.stdout[-6000:] + proc.stderr[-4000:]
    if not junit.is_file():
        pytest.fail(f"xarray's tests did not run (exit {proc.returncode}):\n{output}", pytrace=False)
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = next((k for k in ("failure", "error", "skipped") if k in kinds), "passed")
        outcomes[f"{case.attrib['classname'].rsplit('.', 1)[-1]}::{case.attrib['name']}"] = outcome
    return SuiteResult(outcomes, seconds, output)


def documented_failures(zarr_format: int) -> dict[str, str]:
    """Test name -> reason, for the tests the table in ``docs/integrations.md``'s section on
    differences lists as failing in ``zarr_format`` (its "Formats" column: ``2``, ``3``, ``2, 3``)."""
    text = DOC.read_text()
    assert DOC_SECTION in text, f"{DOC} has no section {DOC_SECTION!r}"
    section = text.split(DOC_SECTION, 1)[1].split("\n#", 1)[0]
    rows = re.findall(
        r"^\|\s*`(test_\w+)`\s*\|\s*([23, ]+?)\s*\|[^|]*\|\s*(.+?)\s*\|\s*$", section, flags=re.MULTILINE
    )
    assert rows, f"no failure rows in {DOC.name} ({DOC_SECTION!r})"
    return {
        name: why for name, formats, why in rows if str(zarr_format) in formats.replace(" ", "").split(",")
    }


def _name(test_id: str) -> str:
    return test_id.split("::", 1)[1].split("[", 1)[0]


def check(result: SuiteResult, zarr_format: int) -> None:
    failing = result.ids("failure") + result.ids("error")
    selected = len(result.outcomes)
    counts = result.counts
    summary = (
        f"Zarr format {zarr_format}: {counts['passed']} passed, {len(failing)} failed, "
        f"{counts['skipped']} skipped of {selected} selected in {result.seconds:.0f} s"
    )
    print(summary)
    documented = documented_failures(zarr_format)
    undocumented = [t for t in failing if _name(t) not in documented]
    assert not undocumented, (
        f"{summary}; failures not listed in {DOC.name} ({DOC_SECTION!r}):\n"
        + "\n".join(undocumented)
        + f"\n{result.output}"
    )
    ran = {_name(t) for t in result.outcomes}
    failed = {_name(t) for t in failing}
    stale = sorted(name for name in documented if name in ran and name not in failed)
    assert not stale, f"listed in {DOC.name} as failing but passing now, remove them: {stale}"
    assert len(failing) <= MAX_FAILING * selected, summary


@pytest.mark.slow
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_xarray_zarr_backend_tests(suite_env: SuiteEnv, tmp_path: Path, zarr_format: int) -> None:
    check(run_suite(suite_env, CLASSES, zarr_format, tmp_path / "junit.xml"), zarr_format)
