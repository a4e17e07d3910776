"""``kill -9`` at random points of resize (shrink and grow), append, write, attribute updates
and ``azarr cp``, on Zarr v2 and v3 arrays, on a local directory and on SeaweedFS.

Each trial resets the data, starts the operation in a real child process
(`kill9_worker`: forked from a server that imported azarr once), sends ``SIGKILL``
after a random delay drawn over the operation's measured duration, and checks what
is left: no reader ever sees stale data -- neither after the kill nor while the
operation runs (a reader polls the array from this process meanwhile) -- and no
partial copy verifies clean. LocalStore temporary files the killed writers left
must all be swept by the next listing.

The default run makes ``TRIALS`` kill per operation on a local directory, for a Zarr
v3 array (and a v2 one for shrink and cp): about 15 s in all. The slow-marked variants
run every operation on both formats, on SeaweedFS too, and make the 20 kills of issue
#28 (``pytest -m slow tests/test_kill9.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kill9_worker import pattern
from util import plant_shape

import azarr
from azarr.storage import LocalStore, S3Store, Store

HERE = Path(__file__).resolve().parent
# Kills per operation in the default run, per store (the slow-marked variant: 20 each).
TRIALS = {"local": 1, "s3": 1}
FULL_TRIALS = 20
FILL = 0  # the pattern is > 0 and written values < 0: three kinds of element tell apart
# Store and format. SeaweedFS only in the slow run (about 5 s a test, 50 s in all).
KINDS = ["local-v2", "local-v3", "seaweedfs-v2", "seaweedfs-v3"]
# Per store: full shape, chunks, and the shape a shrink cuts to (rows cut inside a chunk).
SIZES = {"local": ((64, 64), (4, 4), (10, 64)), "s3": ((32, 32), (4, 4), (10, 32))}


# ---------------------------------------------------------------- the fork server
class ForkServer:
    """`kill9_worker` as a subprocess: runs operations in children a test may kill.

    One per test session (it takes about a second to import azarr, numpy and s3fs); the
    pipes are read in worker threads, so any test's event loop can drive it.
    """

    def __init__(self, log: Path) -> None:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "AWS_EC2_METADATA_DISABLED": "true"}
        self.log = log
        with log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(HERE / "kill9_worker.py")],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=HERE,
            )

    def _read_line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server ended:\n{self.log.read_text()[-3000:]}")
        result: dict[str, Any] = json.loads(line)
        return result

    async def run(
        self,
        command: dict[str, Any],
        kill_after: float | None,
        during: Callable[[list[int]], Awaitable[None]] | None = None,
    ) -> tuple[str, float, int]:
        """Run ``command`` in a child, ``SIGKILL`` it after ``kill_after`` seconds (None: never);
        ``during(counter)`` runs meanwhile, counting its checks in ``counter[0]``. Returns
        (done | killed, seconds the child ran, checks made meanwhile)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()
        pid = (await asyncio.to_thread(self._read_line))["pid"]
        ended = asyncio.ensure_future(asyncio.to_thread(self._read_line))
        checks = [0]
        watcher = asyncio.ensure_future(during(checks)) if during is not None else None
        if kill_after is not None:
            done, _ = await asyncio.wait({ended}, timeout=kill_after)
            if not done:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)  # the child this test had forked
        outcome = await asyncio.wait_for(ended, 120)
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher  # re-raises a failed check
        assert outcome["status"] != "failed", f"{command['op']} failed:\n{self.log.read_text()[-3000:]}"
        return outcome["status"], outcome["seconds"], checks[0]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # by PID: the fork server this test module started
            self.proc.wait()


@pytest.fixture(scope="session")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path_factory.mktemp("kill9") / "fork-server.log")
    try:
        yield server
    finally:
        server.close()


# ---------------------------------------------------------------- stores
@dataclass
class Target:
    """Where a test's data lives, as this process opens it and as a child is told to."""

    kind: str
    root: str
    zarr_format: int
    options: dict[str, Any] = field(default_factory=dict)
    url: str = ""
    cli_options: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.kind}-v{self.zarr_format}"

    def document(self, path: str) -> str:
        """The key of the metadata document of the node at ``path``."""
        return f"{path}/{'zarr.json' if self.zarr_format == 3 else '.zarray'}".lstrip("/")

    def spec(self, name: str) -> dict[str, Any]:
        return {"kind": self.kind, "root": f"{self.root}/{name}", "storage_options": self.options}

    def store(self, name: str) -> Store:
        if self.kind == "local":
            return LocalStore(f"{self.root}/{name}")
        return S3Store(f"{self.root}/{name}", storage_options=self.options)

    def location(self, name: str) -> str:
        return f"{self.url}/{name}"


@pytest.fixture
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    kind, _, version = request.param.partition("-v")
    if kind == "local":
        return Target("local", str(tmp_path), int(version), url=str(tmp_path))
    server = request.getfixturevalue("seaweedfs")
    bucket = server.create_bucket()
    cli = ["--endpoint-url", server.endpoint_url, "-S", f"key={server.key}", "-S", f"secret={server.secret}"]
    return Target("s3", bucket, int(version), server.storage_options, f"s3://{bucket}", cli)


def _temp_files(target: Target) -> list[Path]:
    return [] if target.kind != "local" else list(Path(target.root).rglob("*.azarr-tmp-*"))


async def _swept(target: Target, name: str) -> int:
    """Temporary files killed writers left; a listing with no minimum age removes them all."""
    left = len(_temp_files(target))
    if left:
        with azarr.config.set(local_temp_max_age=0):
            await LocalStore(f"{target.root}/{name}").list_prefix("").__anext__()
        assert _temp_files(target) == [], "a listing left abandoned temporary files"
    return left


# ---------------------------------------------------------------- trials
async def _trials(
    operation: str,
    target: Target,
    full: bool,
    fork_server: ForkServer,
    setup: Callable[[int], Awaitable[dict[str, Any]]],
    check: Callable[[int, bool], Awaitable[None]],
    *,
    seed: int,
    found: Counter[str],
    watching: bool = True,
) -> dict[str, int]:
    """Calibrate the operation's duration, then runs killed after a random delay within it
    until `_count` kills landed before the operation ended. ``check(trial, during)`` checks
    the invariant (``during``: while the child runs, called over and over when
    ``watching``), and counts what it found after each run in ``found``."""
    name, trials = f"{operation}-{target.name}", _count(target, full)
    rng = random.Random(seed)
    # A whole run (the shortest of two in the full variant: the first child of a fork server
    # may run cold); this machine's load varies, so a run ending before its kill shortens it.
    duration = float("inf")
    for calibration in (-2, -1)[trials < FULL_TRIALS :]:
        command = await setup(calibration)
        duration = min(duration, (await fork_server.run(command, None))[1])
        await check(calibration, False)
    stats = {"trials": trials, "killed": 0, "completed": 0, "reads_during": 0}
    trial = 0
    # A run that ended before its kill counts, but does not replace a kill: until
    # ``trials`` kills landed inside the operation (a bounded number of runs).
    while stats["killed"] < trials and trial < 3 * trials + 3:
        command = await setup(trial)

        async def watch(counter: list[int], trial: int = trial) -> None:
            while True:
                await check(trial, True)
                counter[0] += 1
                await asyncio.sleep(0.002)

        status, seconds, reads = await fork_server.run(
            command, rng.uniform(0, duration), watch if watching else None
        )
        if status == "done":
            duration = min(duration, seconds)
        stats["killed" if status == "killed" else "completed"] += 1
        stats["reads_during"] += reads
        await check(trial, False)
        trial += 1
    # The figures docs/consistency.md quotes (pytest -s).
    print(f"kill -9 {name}: {stats | dict(sorted(found.items()))}")
    assert stats["killed"] == trials, f"too few kills landed inside the operation: {stats}"
    return stats


def _trials_param(*default: str) -> Callable[[Any], Any]:
    """Run a test on every store and format of `KINDS`, with ``TRIALS`` kills and with
    ``FULL_TRIALS``; the default run only the ``TRIALS`` on the kinds in ``default``
    (Zarr v2 is also stopped at every write in tests/test_crash_windows.py)."""

    def kind(name: str) -> Any:
        marks = [pytest.mark.s3] if name.startswith("seaweedfs") else []
        return pytest.param(name, marks=marks if name in default else [*marks, pytest.mark.slow])

    def decorate(test: Any) -> Any:
        test = pytest.mark.parametrize("target", [kind(name) for name in KINDS], indirect=True)(test)
        return pytest.mark.parametrize("full", [False, pytest.param(True, marks=pytest.mark.slow)])(test)

    return decorate


def _count(target: Target, full: bool) -> int:
    return FULL_TRIALS if full else TRIALS[target.kind]


async def _reset_array(
    target: Target, store: Store, shape: tuple[int, int], chunks: tuple[int, int]
) -> azarr.AsyncArray:
    arr = await azarr.create(
        shape,
        chunks=chunks,
        dtype="i4",
        fill_value=FILL,
        store=store,
        path="a",
        overwrite=True,
        zarr_format=target.zarr_format,
    )
    await arr.set_basic_selection(..., pattern(shape))
    return arr


def _cut_rows(small: tuple[int, ...], chunks: tuple[int, ...]) -> int:
    """Rows of the chunks a shrink to ``small`` keeps: they hold their data past the new edge
    (zarr-python's resize), so a regrow shows rows up to here again."""
    return -(-small[0] // chunks[0]) * chunks[0]


async def _read(store: Store) -> tuple[tuple[int, ...], np.ndarray[Any, Any]]:
    arr = await azarr.open_array(store, mode="r", path="a")
    return arr.shape, await arr.get_basic_selection()


@_trials_param("local-v2", "local-v3")
async def test_kill_shrink(target: Target, fork_server: ForkServer, full: bool) -> None:
    whole, chunks, small = SIZES[target.kind]
    store, data = target.store("shrink.zarr"), pattern(whole)
    kept = data[: small[0], : small[1]]
    edge = _cut_rows(small, chunks)

    async def setup(_trial: int) -> dict[str, Any]:
        await _reset_array(target, store, whole, chunks)
        return {"op": "resize", "store": target.spec("shrink.zarr"), "shape": small}

    async def check(_trial: int, during: bool) -> None:
        shape, got = await _read(store)
        if shape == whole:  # not published yet: the region being removed is old data or fill
            np.testing.assert_array_equal(got[: small[0], : small[1]], kept)
            assert ((got == data) | (got == FILL)).all()
        else:
            assert shape == tuple(small)
            np.testing.assert_array_equal(got, kept)
        if during:
            return
        found["left the old shape" if shape == whole else "left the new shape"] += 1
        # the shrink run to its end, then the array grown back: as if nothing had stopped it
        # (the chunks cut by the edge keep their data, as in zarr-python; the rest is gone)
        arr = await azarr.open_array(store, mode="r+", path="a")
        await arr.resize(*small)
        await arr.resize(*whole)
        got = await arr.get_basic_selection()
        np.testing.assert_array_equal(got[:edge], data[:edge])
        assert (got[edge:] == FILL).all(), "stale rows exposed by the regrow"
        found["temporary files swept"] += await _swept(target, "shrink.zarr")

    found: Counter[str] = Counter()
    await _trials("shrink", target, full, fork_server, setup, check, seed=1, found=found)


@_trials_param("local-v3")
async def test_kill_grow(target: Target, fork_server: ForkServer, full: bool) -> None:
    """The array is first left as a shrink killed by older code leaves it (the smaller shape
    written, every chunk still there); the grow must expose only what a finished shrink kept."""
    whole, chunks, small = SIZES[target.kind]
    store, data = target.store("grow.zarr"), pattern(whole)
    edge = _cut_rows(small, chunks)

    async def setup(_trial: int) -> dict[str, Any]:
        await _reset_array(target, store, whole, chunks)
        await plant_shape(store, target.document("a"), small)
        return {"op": "resize", "store": target.spec("grow.zarr"), "shape": whole}

    async def check(_trial: int, during: bool) -> None:
        shape, got = await _read(store)
        np.testing.assert_array_equal(got[: small[0], : small[1]], data[: small[0], : small[1]])
        if shape == whole:
            np.testing.assert_array_equal(got[:edge], data[:edge])
            assert (got[edge:] == FILL).all(), "stale rows exposed by the grow"
        else:
            assert shape == tuple(small)
        if not during:
            found["left the old shape" if shape != whole else "left the new shape"] += 1
            found["temporary files swept"] += await _swept(target, "grow.zarr")

    found: Counter[str] = Counter()
    await _trials("grow", target, full, fork_server, setup, check, seed=2, found=found)


@_trials_param("local-v3")
async def test_kill_append(target: Target, fork_server: ForkServer, full: bool) -> None:
    whole, chunks, small = SIZES[target.kind]
    store, data = target.store("append.zarr"), pattern(whole)
    rows = whole[0] - small[0]
    edge = _cut_rows(small, chunks)

    async def setup(_trial: int) -> dict[str, Any]:
        await _reset_array(target, store, whole, chunks)
        await plant_shape(store, target.document("a"), small)
        return {"op": "append", "store": target.spec("append.zarr"), "value": [[-7] * whole[1]] * rows}

    async def check(_trial: int, during: bool) -> None:
        shape, got = await _read(store)
        np.testing.assert_array_equal(got[: small[0]], data[: small[0]])
        assert shape in (tuple(small), tuple(whole))
        # published but not yet written: the cut chunks' rows as a finished resize shows them
        cut = got[small[0] : edge]
        assert ((cut == -7) | (cut == data[small[0] : small[0] + len(cut)])).all(), "the cut chunks changed"
        assert ((got[edge:] == -7) | (got[edge:] == FILL)).all(), "stale rows exposed"
        if not during:
            found["left the old shape" if shape != whole else "left the new shape"] += 1
            found["left rows of fill_value"] += shape == whole and bool((got[small[0] :] == FILL).any())
            found["temporary files swept"] += await _swept(target, "append.zarr")

    found: Counter[str] = Counter()
    await _trials("append", target, full, fork_server, setup, check, seed=3, found=found)


@_trials_param("local-v3")
async def test_kill_write(target: Target, fork_server: ForkServer, full: bool) -> None:
    whole, chunks, _ = SIZES[target.kind]
    store, data = target.store("write.zarr"), pattern(whole)
    region = ((1, whole[0] - 2), (2, whole[1] - 1))  # partial chunks on every edge
    sel = tuple(slice(*r) for r in region)
    inside = np.zeros(whole, dtype=bool)
    inside[sel] = True

    async def setup(_trial: int) -> dict[str, Any]:
        await _reset_array(target, store, whole, chunks)
        return {"op": "write", "store": target.spec("write.zarr"), "region": region}

    async def check(_trial: int, during: bool) -> None:
        shape, got = await _read(store)
        assert shape == whole
        np.testing.assert_array_equal(got[~inside], data[~inside])
        # each chunk is wholly old or wholly new: values are replaced a whole chunk at a time
        for r in range(0, whole[0], chunks[0]):
            for c in range(0, whole[1], chunks[1]):
                block = (slice(r, r + chunks[0]), slice(c, c + chunks[1]))
                part, mask = got[block][inside[block]], inside[block]
                old, new = data[block][mask], -data[block][mask]
                assert (part == old).all() or (part == new).all(), f"chunk at {r},{c} is torn"
        if not during:
            found["left a part written"] += bool((got[inside] < 0).any() and (got[inside] > 0).any())
            found["temporary files swept"] += await _swept(target, "write.zarr")

    found: Counter[str] = Counter()
    await _trials("write", target, full, fork_server, setup, check, seed=4, found=found)


@_trials_param("local-v3")
async def test_kill_attrs_update(target: Target, fork_server: ForkServer, full: bool) -> None:
    store = target.store("attrs.zarr")
    updates, pad = (150, 20_000) if target.kind == "local" else (40, 20_000)

    async def setup(_trial: int) -> dict[str, Any]:
        arr = await azarr.create(
            (4,),
            chunks=(2,),
            dtype="i4",
            store=store,
            path="a",
            overwrite=True,
            zarr_format=target.zarr_format,
        )
        await arr.attrs.put({"n": 0, "keep": True})
        return {"op": "attrs", "store": target.spec("attrs.zarr"), "updates": updates, "pad": pad}

    async def check(_trial: int, during: bool) -> None:
        if target.zarr_format == 3:  # the attributes live in zarr.json, beside the shape
            document = json.loads(await store.get("a/zarr.json") or b"")  # a whole one, never a part
            assert document["shape"] == [4] and document["node_type"] == "array"
            attrs = document["attributes"]
        else:
            attrs = json.loads(await store.get("a/.zattrs") or b"")  # a whole document, never part of one
        assert attrs["keep"] is True and 0 <= attrs["n"] <= updates
        assert attrs["n"] == 0 or attrs["pad"] == "x" * pad
        if not during:
            found["temporary files swept"] += await _swept(target, "attrs.zarr")

    found: Counter[str] = Counter()
    await _trials("attrs", target, full, fork_server, setup, check, seed=5, found=found)


async def _source_hierarchy(
    target: Target, store: Store, whole: tuple[int, int], chunks: tuple[int, int]
) -> None:
    root = await azarr.group(store=store, overwrite=True, zarr_format=target.zarr_format)
    await root.attrs.update(title="source")
    t = await root.create_dataset("t", shape=whole, chunks=chunks, dtype="i4")
    await t.set_basic_selection(..., pattern(whole))
    sub = await root.create_group("sub")
    b = await sub.create_dataset("b", shape=(40,), chunks=(3,), dtype="f8")
    await b.set_basic_selection(..., np.linspace(0, 1, 40))
    await azarr.consolidate_metadata(store)  # v3: inline, in the root's zarr.json


def _verify(*argv: str) -> int:
    """``azarr verify`` as the command line runs it (in a thread: it runs its own event loop)."""
    from click.testing import CliRunner

    from azarr.cli import cli

    return CliRunner().invoke(cli, list(argv)).exit_code


@_trials_param("local-v2", "local-v3")
async def test_kill_cp(target: Target, fork_server: ForkServer, full: bool) -> None:
    whole, chunks, _ = SIZES[target.kind]
    source = target.store("src.zarr")
    await _source_hierarchy(target, source, whole, chunks)
    src_keys = {k: await source.get(k) async for k in source.list_prefix("")}
    found: Counter[str] = Counter()

    def dest_name(trial: int) -> str:
        return f"dst-{trial + 1}.zarr"

    async def setup(trial: int) -> dict[str, Any]:
        argv = ["cp", target.location("src.zarr"), target.location(dest_name(trial)), *target.cli_options]
        return {"op": "cp", "argv": argv}

    async def check(trial: int, during: bool) -> None:
        if during:
            return
        dest = target.store(dest_name(trial))
        copied = {k: await dest.get(k) async for k in dest.list_prefix("")}
        complete = copied == src_keys
        src, dst = target.location("src.zarr"), target.location(dest_name(trial))
        verified = await asyncio.to_thread(_verify, "verify", src, dst, *target.cli_options) == 0
        assert verified == complete, (
            f"verify said {verified} of a copy with {len(copied)}/{len(src_keys)} keys"
        )
        # without the source: only a copy lacking nothing but v2's .zmetadata passes
        alone = await asyncio.to_thread(_verify, "verify", dst, *target.cli_options) == 0
        assert alone == (set(src_keys) - set(copied) <= {".zmetadata"}), f"verify DST said {alone}"
        found["complete copies (verify ok)" if complete else "partial copies (verify failed)"] += 1
        try:
            await azarr.open_consolidated(dest)
            opens = True
        except (azarr.errors.ConsolidatedMetadataNotFoundError, azarr.errors.GroupNotFoundError):
            opens = False
        assert opens == complete, "a partial copy opens as a consolidated hierarchy"
        root = ".zgroup" if target.zarr_format == 2 else "zarr.json"
        if root in copied:  # the root opens: every array and group below is whole
            assert set(src_keys) - set(copied) <= {".zmetadata"}
        found["temporary files swept"] += await _swept(target, dest_name(trial))

    await _trials(
        "cp",
        target,
        full,
        fork_server,
        setup,
        check,
        seed=6,
        found=found,
        watching=False,
    )
