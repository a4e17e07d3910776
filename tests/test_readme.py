"""The README as a new user follows it (issue #27): its first Python block runs as it is, its
service URLs answer on the example app's demo data, and what it says about the tools is true.

(``tests/test_docs.py`` runs every block of ``docs/``; the README's other blocks need a bucket
or a server and are illustrations.)
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import azarr

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.M | re.S)


def test_first_python_block_runs_as_it_is(tmp_path: Path) -> None:
    first = blocks("python")[0]
    assert "asyncio.run(main())" in first  # a complete script, as a user would paste it
    proc = subprocess.run(
        [sys.executable, "-c", first], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and "temperature (10000, 1000) float32" in proc.stdout


def test_illustrative_s3_block_is_set_apart() -> None:
    """The placeholder bucket appears only in blocks the text introduces as needing your bucket."""
    python = blocks("python")
    assert "s3://" not in python[0]
    s3_block = next(b for b in python if "my-bucket" in b)
    intro = README[: README.index(s3_block)].rsplit("```", 1)[0][-400:]
    assert "your" in intro and "bucket" in intro


def test_nox_is_said_to_come_with_dev_extra() -> None:
    sentence = next(s for s in re.split(r"(?<=\.)\s", README) if "nox -s tests" in s or "adds nox" in s)
    assert '.[dev]"' in sentence and "nox" in sentence
    dev = re.search(r"^dev = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), flags=re.M | re.S)
    assert dev and '"nox' in dev[1]


@pytest.fixture(scope="module")
def app_client() -> Iterator[Any]:
    """The example service in this process (its demo dataset), plus ``root``: a dataset whose
    root is a 2-D array."""
    pytest.importorskip("fastapi")
    with warnings.catch_warnings():  # starlette's note that its TestClient will move to httpx2
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from examples.service import app as service_app

    with TestClient(service_app.app) as client:

        async def root_array() -> azarr.MemoryStore:
            store = azarr.MemoryStore()
            arr = await azarr.zeros((300, 200), chunks=(100, 100), dtype="f4", store=store)
            await arr.set_basic_selection((0, slice(0, 3)), [1, 2, 3])
            return store

        service_app.datasets.add("root", client.portal.call(root_array))
        yield client


def test_readme_service_urls_answer(app_client: Any) -> None:
    urls = re.findall(r"curl[^']*'localhost:8000(/[^']+)'", README)
    assert any("/tile/" in u for u in urls) and any("/slice/" in u for u in urls)
    for url in urls:
        response = app_client.get(url)
        assert response.status_code == 200, (url, response.text)
        if "/tile/" in url:
            assert response.headers["content-type"] == "image/png"
    # Without lead= the 3-D demo array's tile says what to pass.
    missing = app_client.get("/tile/demo/temperature/0/0/0.png")
    assert missing.status_code == 400 and "?lead=0" in missing.json()["detail"]


def test_root_array_urls_need_no_empty_segment(app_client: Any) -> None:
    """README: a dataset whose root is an array has no node path in its URLs."""
    assert "/slice/era5?sel=0,0:4" in README and "/tile/era5/0/0/0.png" in README
    for url in ("/slice/root?sel=0,0:4", "/slice/root/?sel=0,0:4", "/slice/root//?sel=0,0:4"):
        assert app_client.get(url).json()["data"] == [1.0, 2.0, 3.0, 0.0], url
    assert app_client.get("/info/root").json()["shape"] == [300, 200]
    assert app_client.get("/timeseries/root", params={"at": "1"}).json()["data"][:2] == [2.0, 0.0]
    tile = app_client.get("/tile/root/0/0/0.png")
    assert tile.status_code == 200 and tile.headers["content-type"] == "image/png"
    # Nodes below the root keep their paths.
    assert app_client.get("/info/demo/temperature").json()["shape"] == [48, 512, 512]
