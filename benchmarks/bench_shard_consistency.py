"""Concurrent writers into shared shards: how many updates survive, azarr against zarr-python 3.4.

The setup of ``tests/test_consistency.py``'s sharded test, run with each library: a Zarr v3
int32 array of ``--elements`` (4,096) in 4 shards of 16 inner chunks; 4 processes x 8
asyncio tasks each set disjoint single elements (element ``i`` gets ``i + 1``, one
element per call, so every call is a partial-shard write); afterwards every element is read
back and the ones still at the fill value are counted as lost. On a local directory and on
SeaweedFS (directly, no faults). azarr makes each partial-shard write a read-modify-write
conditional on the shard's generation; zarr-python 3.4 reads, merges and writes the shard
unconditionally (zarr-python issue #3682).

    /work/heavy bench python -m benchmarks.bench_shard_consistency

Results: ``benchmarks/results/shard-consistency.{json,md}``. The worker side runs in each
library's interpreter (``--worker``: a task as JSON on stdin; only the standard library and
NumPy at module level).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
PROCS, TASKS, SHARDS = 4, 8, 4


# ---------------------------------------------------------------------- worker side
def _open(task: dict[str, Any], mode: str) -> Any:
    """The array (async API) of ``task``'s library and store."""
    if task["impl"] == "azarr":
        import azarr

        if task["store"] == "local":
            return azarr.open_array(task["path"], mode=mode)
        options = {"endpoint_url": task["endpoint"], "key": task["key"], "secret": task["secret"]}
        return azarr.open_array(f"s3://{task['bucket']}/{task['prefix']}", mode=mode, storage_options=options)
    import zarr.api.asynchronous as za

    return za.open_array(store=_zarr_store(task), mode=mode, zarr_format=3)


def _zarr_store(task: dict[str, Any]) -> Any:
    if task["store"] == "local":
        from zarr.storage import LocalStore

        return LocalStore(task["path"])
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cloud_workers import zarr_obstore

    return zarr_obstore(task, task["bucket"], task["prefix"], read_only=False)


async def _create(task: dict[str, Any]) -> None:
    n, shard = task["elements"], task["elements"] // SHARDS
    inner = shard // 16
    if task["impl"] == "azarr":
        import azarr

        if task["store"] == "local":
            store: Any = task["path"]
            options = None
        else:
            store = f"s3://{task['bucket']}/{task['prefix']}"
            options = {"endpoint_url": task["endpoint"], "key": task["key"], "secret": task["secret"]}
        await azarr.create(
            (n,),
            chunks=(inner,),
            shards=(shard,),
            dtype="i4",
            store=store,
            storage_options=options,
            zarr_format=3,
            fill_value=0,
            overwrite=True,
        )
        return
    import zarr.api.asynchronous as za

    await za.create_array(
        store=_zarr_store(task), shape=(n,), chunks=(inner,), shards=(shard,), dtype="i4", fill_value=0
    )


async def _write(task: dict[str, Any]) -> None:
    arr = await _open(task, "r+")
    n, writers = task["elements"], PROCS * TASKS

    async def one(writer: int) -> None:
        for i in range(writer, n, writers):
            if task["impl"] == "azarr":
                await arr.set_basic_selection(i, i + 1)
            else:
                await arr.setitem(i, i + 1)

    await asyncio.sleep(max(0.0, task["start_at"] - time.time()))
    await asyncio.gather(*(one(task["writer_base"] + t) for t in range(TASKS)))


async def _lost(task: dict[str, Any]) -> int:
    import numpy as np

    arr = await _open(task, "r")
    got = await (arr.get_basic_selection(...) if task["impl"] == "azarr" else arr.getitem(slice(None)))
    return int(np.count_nonzero(np.asarray(got) != np.arange(1, task["elements"] + 1)))


def worker() -> None:
    task = json.loads(sys.stdin.read())
    action = {"create": _create, "write": _write, "lost": _lost}[task["action"]]
    print(json.dumps({"result": asyncio.run(action(task))}))


# ---------------------------------------------------------------------- driver
def _python(impl: str) -> str:
    if impl == "azarr":
        return sys.executable
    from benchmarks.peers import ensure_peer_python

    return str(ensure_peer_python("zarr34-zarrs"))


def _run(impl: str, task: dict[str, Any]) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONPATH": str(REPO_ROOT) if impl == "azarr" else "",
    }
    proc = subprocess.Popen(
        [_python(impl), __file__, "--worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({**task, "impl": impl}))
    proc.stdin.close()
    return proc


def _result(proc: subprocess.Popen[str]) -> Any:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    if proc.wait() != 0:
        raise RuntimeError(f"worker failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])["result"]


def one_case(impl: str, base: dict[str, Any]) -> dict[str, Any]:
    _result(_run(impl, {**base, "action": "create"}))
    start_at = time.time() + 6.0  # interpreters import numpy and the library before the common start
    procs = [
        _run(impl, {**base, "action": "write", "writer_base": p * TASKS, "start_at": start_at})
        for p in range(PROCS)
    ]
    for proc in procs:
        _result(proc)
    seconds = time.time() - start_at
    lost = _result(_run(impl, {**base, "action": "lost"}))
    return {
        "impl": impl,
        "store": base["store"],
        "elements": base["elements"],
        "lost": lost,
        "seconds": seconds,
    }


def markdown(rows: list[dict[str, Any]], versions: dict[str, str]) -> str:
    lines = [
        "# Concurrent partial-shard writers: updates lost",
        "",
        f"{PROCS} processes x {TASKS} asyncio tasks set disjoint single elements of one int32 array in "
        f"{SHARDS} shards of 16 inner chunks (every shard written by all {PROCS * TASKS} writers); lost = "
        f"elements not holding their value afterwards. Versions: {json.dumps(versions)}.",
        "",
        "| library | store | elements | lost | lost % | seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['impl']} | {r['store']} | {r['elements']} | {r['lost']} | "
            f"{100 * r['lost'] / r['elements']:.1f} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--elements", type=int, default=4096)
    parser.add_argument("--stores", default="local,seaweedfs")
    parser.add_argument("--impls", default="azarr,zarr34")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO_ROOT / "tests"))
    sys.path.insert(0, str(REPO_ROOT))
    from servers import start_seaweedfs

    rows = []
    server = start_seaweedfs() if "seaweedfs" in args.stores else None
    try:
        for store in args.stores.split(","):
            for impl in args.impls.split(","):
                base: dict[str, Any] = {"store": store, "elements": args.elements}
                if store == "local":
                    base["path"] = tempfile.mkdtemp(prefix=f"azarr-shard-consistency-{impl}-")
                else:
                    assert server is not None
                    base.update(
                        endpoint=server.endpoint_url,
                        key=server.key,
                        secret=server.secret,
                        bucket=server.create_bucket(f"consistency-{impl}"),
                        prefix="tokens",
                    )
                row = one_case(impl, base)
                print(f"[bench-shard-consistency] {row}", file=sys.stderr, flush=True)
                rows.append(row)
    finally:
        if server is not None:
            server.stop()
    from benchmarks.peers import peer_versions

    versions = {
        "azarr": peer_versions(sys.executable, ("azarr",)),
        "zarr34": peer_versions(_python("zarr34"), ("zarr",)),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "shard-consistency.json").write_text(
        json.dumps({"rows": rows, "versions": versions}, indent=1)
    )
    (RESULTS / "shard-consistency.md").write_text(markdown(rows, versions))
    print(markdown(rows, versions))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        sys.exit(main())
