"""The driver registry: URL -> StoreSpec -> live store; third-party drivers via entry points."""

from __future__ import annotations

import pickle
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

import azarr
from azarr.scheduler import budget_for, stats_for
from azarr.storage import (
    LocalStore,
    MemoryStore,
    S3Store,
    Store,
    StoreSpec,
    driver_for,
    from_url,
    open_store,
    register_store,
    registered_schemes,
)
from azarr.testing.store import StoreTests

THIRD_PARTY = Path(__file__).parent / "third_party_driver"


@pytest.fixture(scope="module")
def third_party_on_path() -> Iterator[None]:
    """Put the third-party package (module + dist-info with its entry point) on sys.path."""
    sys.path.insert(0, str(THIRD_PARTY))
    try:
        yield
    finally:
        sys.path.remove(str(THIRD_PARTY))


def test_entry_point_driver_is_found_without_editing_azarr(third_party_on_path: None) -> None:
    assert "testkv" in registered_schemes()
    store = from_url("testkv://alpha")
    assert type(store).__name__ == "TestKVStore"
    assert store.spec == StoreSpec.create("testkv", "alpha")
    assert from_url("testkv://alpha") is store  # one live store per spec


async def test_entry_point_driver_serves_arrays(third_party_on_path: None) -> None:
    data = np.arange(100).reshape(10, 10)
    await azarr.array(data, chunks=(3, 3), store="testkv://arrays", path="a")
    arr = await azarr.open_array("testkv://arrays", mode="r", path="a")
    np.testing.assert_array_equal(await arr.get_basic_selection(), data)
    copy = pickle.loads(pickle.dumps(arr))
    np.testing.assert_array_equal(await copy.get_basic_selection(), data)


class TestThirdPartyDriverConformance(StoreTests):
    """The shipped suite runs on the third-party driver: one class, no other code."""

    @pytest.fixture
    def make_store(self, third_party_on_path: None) -> Callable[[], Store]:
        driver = driver_for("testkv")
        return lambda: driver.from_spec(StoreSpec.create("testkv", uuid.uuid4().hex))

    def reopen(self, store: Store, *, read_only: bool) -> Store:
        return open_store(store.spec, read_only=read_only)


def test_register_store_in_code() -> None:
    class Mem2(MemoryStore):
        pass

    register_store("mem2-test", Mem2)
    with pytest.raises(ValueError, match="already registered"):
        register_store("mem2-test", MemoryStore)
    assert driver_for("mem2-test") is Mem2
    with pytest.raises(TypeError):
        register_store("bad", object())  # type: ignore[arg-type]


def test_unknown_scheme_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="nosuchscheme"):
        driver_for("nosuchscheme")
    with pytest.raises(ValueError, match="nosuchscheme"):
        from_url("nosuchscheme://x")


def test_specs_are_equal_across_opens_and_hide_secrets(tmp_path: Path) -> None:
    options = {"endpoint_url": "http://127.0.0.1:9", "key": "AKIAEXAMPLE", "secret": "topsecretvalue"}
    a = from_url("s3://bucket/x.zarr", storage_options=options)
    b = S3Store("bucket/x.zarr", storage_options=options)
    assert isinstance(a, S3Store)
    assert a.spec == b.spec and hash(a.spec) == hash(b.spec)
    assert budget_for(a) is budget_for(b) and stats_for(a) is stats_for(b)
    shown = repr(a.spec)
    assert "topsecretvalue" not in shown and "AKIAEXAMPLE" not in shown and "bucket/x.zarr" in shown
    local = from_url(str(tmp_path / "d"))
    assert isinstance(local, LocalStore)
    assert local.spec == LocalStore(tmp_path / "d").spec
    assert from_url(f"file://{tmp_path}/d").spec == local.spec


def test_spec_round_trips_options() -> None:
    options = {
        "client_kwargs": {"region_name": "eu"},
        "config_kwargs": {"retries": {"max_attempts": 1}},
        "x": [1, 2],
    }
    spec = StoreSpec.create("s3", "b/p", options, {"transport": "s3fs"})
    assert spec.storage_options() == options
    assert spec.constructor_params() == {"transport": "s3fs"}
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert StoreSpec.from_url("s3://b/p", storage_options={"anon": True}).driver == "s3"


def test_a_spec_pickled_to_another_process_hashes_as_that_process_makes_it() -> None:
    # A spec keeps its hash once computed; string hashes differ between processes, so the
    # cached value must not travel with a pickled spec.
    import subprocess

    spec = StoreSpec.create("s3", "b/p", {"key": "k", "endpoint_url": "http://h"})
    hash(spec)
    code = (
        "import pickle, sys; from azarr.storage import StoreSpec; "
        "got = pickle.loads(sys.stdin.buffer.read()); "
        "made = StoreSpec.create('s3', 'b/p', {'endpoint_url': 'http://h', 'key': 'k'}); "
        "print(hash(got) == hash(made) and {made: 1}.get(got) == 1)"
    )
    answer = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(spec), capture_output=True, check=True
    )
    assert answer.stdout.strip() == b"True"
