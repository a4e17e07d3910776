"""``AsyncArray.digest``/``hexdigest`` equal zarr-python 2.18's on every array of the reference corpus."""

from __future__ import annotations

import json

import pytest

import azarr
from azarr.storage import LocalStore

from .conftest import RefCorpus, RunRef

pytestmark = pytest.mark.interop


async def test_hexdigest_matches_zarr2(zarr2_corpus: RefCorpus, run_ref_script: RunRef) -> None:
    result = run_ref_script("digests.py", zarr2_corpus.root)
    assert result.returncode == 0, result.report
    expected: dict[str, dict[str, str]] = json.loads(result.stdout)
    assert len(expected) == len(zarr2_corpus.arrays) > 10
    mismatches = []
    for entry in zarr2_corpus.arrays:
        store = LocalStore(zarr2_corpus.root / entry["store"], read_only=True)
        arr = await azarr.open_array(store, mode="r", path=entry["path"])
        for name, want in expected[entry["id"]].items():
            got = await arr.hexdigest(name)
            if got != want:
                mismatches.append(f"{entry['id']} {name}: azarr {got} != zarr 2.18 {want}")
    assert not mismatches, "\n".join(mismatches)


async def test_digest_is_raw_hexdigest(zarr2_corpus: RefCorpus) -> None:
    entry = zarr2_corpus.arrays[0]
    arr = await azarr.open_array(LocalStore(zarr2_corpus.root / entry["store"]), mode="r", path=entry["path"])
    assert (await arr.digest()).hex() == await arr.hexdigest()
    with pytest.raises(ValueError):
        await arr.digest("no-such-hash")
