"""The synchronous facade ``azarr.sync``: twin coverage, behaviour, threads, loops, fork, timeouts, pickling.

Network tests use SeaweedFS, through tests/fault_proxy.py where a test needs to
see (or stall) requests on the wire.
"""

from __future__ import annotations

import asyncio
import inspect
import multiprocessing
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from fault_proxy import CHUNK_KEYS, FaultProxy
from servers import S3Server

import azarr
import azarr.sync as zs
from azarr.core import accessors as async_accessors
from azarr.scheduler import set_budget
from azarr.storage import S3Store
from azarr.sync import _accessors as sync_accessors

# ---------------------------------------------------------------- twin coverage

PAIRS = [
    (azarr.AsyncArray, zs.Array),
    (azarr.AsyncGroup, zs.Group),
    (azarr.Attributes, zs.Attributes),
    (async_accessors._Accessor, sync_accessors._Accessor),
]
#: Public non-coroutine members that exist only on the async side, and why.
# Build from already-read documents; the crossing itself.
ASYNC_ONLY = {"from_documents", "from_node", "to_sync"}
#: Coroutines whose sync twin is a property that reads the store, as zarr-python 2 has them.
SYNC_PROPERTIES = {"nchunks_initialized", "nbytes_stored"}


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)


def _summary(fn: Any) -> str:
    return (inspect.getdoc(fn) or "").strip().splitlines()[0]


def _expected_params(async_fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    params = list(inspect.signature(async_fn).parameters.values())
    timeout = inspect.Parameter("timeout", inspect.Parameter.KEYWORD_ONLY, default=None)
    at = len(params) - 1 if params and params[-1].kind is inspect.Parameter.VAR_KEYWORD else len(params)
    params.insert(at, timeout)
    return [(p.name, p.kind, p.default, p.annotation if p.name != "timeout" else None) for p in params]


def _actual_params(sync_fn: Callable[..., Any]) -> list[tuple[str, Any, Any, Any]]:
    params = inspect.signature(sync_fn).parameters.values()
    return [(p.name, p.kind, p.default, p.annotation if p.name != "timeout" else None) for p in params]


def _check_twin(async_fn: Any, sync_fn: Any, where: str) -> None:
    assert getattr(sync_fn, "__azarr_async__", None) is not None, f"{where} is not a mirrored wrapper"
    assert _actual_params(sync_fn) == _expected_params(async_fn), f"{where}: signature differs"
    assert _summary(sync_fn) == _summary(async_fn), f"{where}: docstring summary differs"


@pytest.mark.parametrize(("async_cls", "sync_cls"), PAIRS, ids=lambda c: c.__name__)
def test_every_public_async_method_has_a_sync_twin(async_cls: type, sync_cls: type) -> None:
    checked = 0
    for name, member in inspect.getmembers(async_cls):
        if name.startswith("_") or name in ASYNC_ONLY:
            continue
        assert hasattr(sync_cls, name), f"{sync_cls.__name__} lacks {name!r} of {async_cls.__name__}"
        if name in SYNC_PROPERTIES:
            assert isinstance(inspect.getattr_static(sync_cls, name), property), f"{name} is not a property"
        elif _is_async(member):
            _check_twin(member, getattr(sync_cls, name), f"{sync_cls.__name__}.{name}")
            checked += 1
    assert checked >= 2


def test_every_api_coroutine_has_a_sync_twin() -> None:
    names = [n for n in azarr.api.__all__ if _is_async(getattr(azarr.api, n))]
    assert len(names) >= 17
    for name in names:
        assert name in zs.__all__, f"azarr.sync lacks {name}"
        _check_twin(getattr(azarr.api, name), getattr(zs, name), f"azarr.sync.{name}")


def test_twin_check_catches_a_drifted_signature() -> None:
    def drifted(selection: Any, *, timeout: float | None = None) -> Any:
        """Read a basic selection: ints, slices (any step) and Ellipsis."""

    drifted.__azarr_async__ = azarr.AsyncArray.get_basic_selection  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="signature differs"):
        _check_twin(azarr.AsyncArray.get_basic_selection, drifted, "drifted")


# ---------------------------------------------------------------- behaviour (memory store)


def test_array_matches_numpy() -> None:
    ref = np.arange(60, dtype="i4").reshape(6, 10)
    z = zs.array(ref, chunks=(4, 3))
    assert isinstance(z, zs.Array)
    np.testing.assert_array_equal(z[1:5, ::3], ref[1:5, ::3])
    np.testing.assert_array_equal(z.oindex[[0, 5], [1, 9]], ref[np.ix_([0, 5], [1, 9])])
    np.testing.assert_array_equal(z.vindex[[0, 5], [1, 9]], ref[[0, 5], [1, 9]])
    np.testing.assert_array_equal(z.blocks[1, 0], ref[4:, :3])
    np.testing.assert_array_equal(np.asarray(z), ref)
    assert z[2, 3] == 23 and len(z) == 6
    np.testing.assert_array_equal(np.stack(list(z)), ref)
    z[0] = -1
    z.oindex[[1, 2], [0]] = -2
    z.vindex[[3], [3]] = -3
    z.set_mask_selection(ref == 59, -4)
    ref[0] = -1
    ref[[1, 2], 0] = -2
    ref[3, 3] = -3
    ref[ref == 59] = -4
    np.testing.assert_array_equal(z[...], ref)
    assert z.append(np.zeros((2, 10), "i4")) == (8, 10)
    z.resize(3, 10)
    np.testing.assert_array_equal(z[:], ref[:3])
    assert z.nchunks_initialized == 4


def test_attrs_write_through() -> None:
    g = zs.group()
    g.attrs["units"] = "K"
    g.attrs.update({"a": 1}, b=2)
    del g.attrs["a"]
    reopened = zs.open_group(g.store, mode="r")
    assert dict(reopened.attrs) == {"units": "K", "b": 2}


def test_group_surface() -> None:
    g = zs.group()
    sub = g.create_group("sub")
    sub.zeros("x", shape=(5,), chunks=(2,))
    g["y"] = np.arange(3)
    g.require_dataset("y", shape=(3,), dtype="i8")
    assert sorted(g) == ["sub", "y"] and len(g) == 2
    assert "sub/x" in g and "nope" not in g
    assert isinstance(g["sub/x"], zs.Array) and isinstance(g["sub"], zs.Group)
    assert [n for n, _ in g.arrays()] == ["y"] and list(g.group_keys()) == ["sub"]
    assert "x (5,) float64" in g.tree()
    with pytest.raises(KeyError):
        g["missing"]


def test_crossing_between_async_and_sync() -> None:
    z = zs.zeros((4,), chunks=(2,))
    assert z.async_array.to_sync().async_array is z.async_array
    g = zs.group()
    assert g.async_group.to_sync().async_group is g.async_group
    like = zs.ones_like(z)  # a sync array passed in is unwrapped
    assert like.shape == (4,) and like[0] == 1


def test_pickle_roundtrip_in_process(tmp_path: Any) -> None:
    z = zs.array(np.arange(10), chunks=(3,), store=str(tmp_path / "a.zarr"), timeout=30)
    again = pickle.loads(pickle.dumps(z))
    assert again.timeout == 30
    np.testing.assert_array_equal(again[:], np.arange(10))
    g = zs.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.attrs["a"] = 1
    g.zeros("x", shape=(2,))
    g_again = pickle.loads(pickle.dumps(g))
    assert dict(g_again.attrs) == {"a": 1} and list(g_again) == ["x"]


# ---------------------------------------------------------------- loops and threads


async def test_works_inside_a_running_loop() -> None:
    """Jupyter and ``async def`` callers: the call runs on azarr's loop, not the caller's."""
    z = zs.array(np.arange(8), chunks=(2,))
    assert z[3] == 3
    assert asyncio.get_running_loop() is not zs.get_loop()


def test_call_on_the_io_thread_says_use_await() -> None:
    async def nested() -> None:
        zs.zeros((2,))

    with pytest.raises(zs.SyncError, match=r"(?i)use 'await'"):
        zs.run(nested())


# ---------------------------------------------------------------- network tests (SeaweedFS)


_OPEN_STORES: list[S3Store] = []


@pytest.fixture(autouse=True)
def _close_stores() -> Any:
    """Close the stores a test opened (their sessions live on the sync facade's loop)."""
    yield
    while _OPEN_STORES:
        zs.run(_OPEN_STORES.pop().close())


def _s3_store(server: S3Server, bucket: str, proxy: FaultProxy | None = None) -> S3Store:
    options = server.storage_options if proxy is None else proxy.storage_options(server.storage_options)
    store = S3Store(f"{bucket}/data", storage_options=options)
    _OPEN_STORES.append(store)
    return store


def _write_reference(
    server: S3Server, bucket: str, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> np.ndarray:
    data = np.random.default_rng(0).standard_normal(shape)
    zs.array(data, chunks=chunks, store=_s3_store(server, bucket), path="a")
    return data


@pytest.mark.s3
def test_sixteen_threads_share_one_loop_and_budget(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    data = _write_reference(seaweedfs, s3_bucket, (64, 8), (4, 8))
    store = _s3_store(seaweedfs, s3_bucket, s3_fault_proxy)
    z = zs.open_array(store, mode="r", path="a")
    # Chunk reads are held until 8 are (fault_proxy's "Waves"): only overlapping calls release them.
    s3_fault_proxy.configure(wave=8, wave_path=CHUNK_KEYS)
    s3_fault_proxy.reset_counters()
    results: dict[int, np.ndarray] = {}

    def read(i: int) -> None:
        results[i] = z[4 * i : 4 * i + 4]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == list(range(16))
    np.testing.assert_array_equal(np.concatenate([results[i] for i in range(16)]), data)
    # Not serialised: the 16 calls overlap on the wire.
    assert s3_fault_proxy.counters().peak_in_flight >= 8

    set_budget(store, max_requests=3)
    z = zs.open_array(store, mode="r", path="a")  # arrays take the store's budget when opened
    s3_fault_proxy.configure(latency_ms=150)  # long enough that the 16 calls would overlap unbounded
    s3_fault_proxy.reset_counters()
    threads = [threading.Thread(target=read, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # One loop, one budget: three requests at most in flight across all 16 threads.
    assert s3_fault_proxy.counters().peak_in_flight <= 3
    np.testing.assert_array_equal(np.concatenate([results[i] for i in range(16)]), data)


def _stalled_read(server: S3Server, bucket: str, proxy: FaultProxy) -> zs.Array:
    _write_reference(server, bucket, (8,), (2,))
    z = zs.open_array(_s3_store(server, bucket, proxy), mode="r", path="a")
    proxy.configure(stall=1.0, path=CHUNK_KEYS, stall_seconds=1.2)
    proxy.reset_counters()
    return z


def _assert_requests_stopped(proxy: FaultProxy, started: float) -> None:
    """Every stalled chunk request was hung up on by the client and never reached SeaweedFS."""
    time.sleep(max(0.0, started + 1.8 - time.monotonic()))  # past the 1.2 s stall
    counters = proxy.counters()
    assert counters.injected.get("stall", 0) >= 1
    assert counters.stall_abandoned == counters.injected["stall"]
    assert counters.in_flight == 0


@pytest.mark.s3
def test_timeout_cancels_the_call_and_its_requests(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    z = _stalled_read(seaweedfs, s3_bucket, s3_fault_proxy)
    started = time.monotonic()
    with pytest.raises(zs.SyncTimeoutError, match=r"timeout=0\.3"):
        z.get_basic_selection(slice(None), timeout=0.3)
    assert time.monotonic() - started < 1.0
    _assert_requests_stopped(s3_fault_proxy, started)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler during the test, as a script or notebook has it: a
    handler another test left installed (an asyncio Runner's cancels its own task
    rather than raising) would make Ctrl-C mean something else."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.s3
@pytest.mark.usefixtures("default_sigint")
def test_ctrl_c_cancels_the_call_and_its_requests(
    seaweedfs: S3Server, s3_bucket: str, s3_fault_proxy: FaultProxy
) -> None:
    z = _stalled_read(seaweedfs, s3_bucket, s3_fault_proxy)
    main = threading.main_thread().ident
    assert threading.get_ident() == main
    timer = threading.Timer(0.3, signal.pthread_kill, args=(main, signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        z[:]
    assert time.monotonic() - started < 1.0
    _assert_requests_stopped(s3_fault_proxy, started)


def _read_in_child(array: zs.Array, queue: Any) -> None:
    try:
        queue.put(("ok", array[:]))
    except BaseException as exc:
        queue.put(("error", repr(exc)))


def _run_child(ctx_name: str, array: zs.Array) -> np.ndarray:
    ctx = multiprocessing.get_context(ctx_name)
    queue = ctx.Queue()
    proc = ctx.Process(target=_read_in_child, args=(array, queue))
    proc.start()
    status, value = queue.get(timeout=60)
    proc.join(30)
    assert status == "ok", value
    assert proc.exitcode == 0
    result: np.ndarray = value
    return result


@pytest.mark.s3
def test_fork_child_gets_its_own_loop(seaweedfs: S3Server, s3_bucket: str) -> None:
    data = _write_reference(seaweedfs, s3_bucket, (20,), (3,))
    z = zs.open_array(_s3_store(seaweedfs, s3_bucket), mode="r", path="a")
    np.testing.assert_array_equal(z[:], data)  # the parent's loop now holds an open session
    np.testing.assert_array_equal(_run_child("fork", z), data)
    np.testing.assert_array_equal(z[:], data)  # and the parent's still works


@pytest.mark.s3
def test_pickled_to_a_spawned_process(seaweedfs: S3Server, s3_bucket: str) -> None:
    data = _write_reference(seaweedfs, s3_bucket, (20,), (3,))
    z = zs.open_array(_s3_store(seaweedfs, s3_bucket), mode="r", path="a")
    np.testing.assert_array_equal(_run_child("spawn", z), data)


@pytest.mark.s3
def test_loop_is_stopped_and_sessions_closed_at_exit(seaweedfs: S3Server, s3_bucket: str) -> None:
    _write_reference(seaweedfs, s3_bucket, (6,), (2,))
    script = (
        "import sys, azarr.sync as zs\n"
        "from azarr.storage import S3Store\n"
        f"store = S3Store({f'{s3_bucket}/data'!r}, storage_options={seaweedfs.storage_options!r})\n"
        "z = zs.open_array(store, mode='r', path='a')\n"
        "print(float(z[:].sum()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-X", "dev", "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    # -X dev reports unclosed sessions, destroyed tasks and loop misuse on stderr: none of them.
    # Its slow-callback notes ("Executing <Task ...> took 0.122 seconds") measure the host's
    # load, not a misuse, and are left out.
    slow_callback = re.compile(r"^Executing <.*> took [0-9.]+ seconds$")
    reported = [line for line in proc.stderr.splitlines() if line.strip() and not slow_callback.match(line)]
    assert not reported, proc.stderr
