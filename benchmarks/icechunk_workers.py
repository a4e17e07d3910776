"""Workers for `benchmarks.bench_icechunk`: one implementation reading a virtual Icechunk array
on S3, timed operations, JSON out. Runs in the Icechunk venv (tests/interop/icechunkenv.py).

    python benchmarks/icechunk_workers.py < task.json > result.json

Implementations (``impl``):

``azarr``
    `azarr.storage.IcechunkStore` on the repository: icechunk resolves the branch and lists
    the chunk references, azarr reads the NetCDF4 file's ranges through its S3 store,
    neighbouring ranges coalesced.
``zarr34-icechunk``
    zarr-python 3.4 on icechunk's own store (``Repository.open(...).readonly_session("main")
    .store``), icechunk fetching each virtual chunk: what icechunk's docs show.

Operations: ``whole`` (a cold open and ``arr[...]``), ``slab`` (``arr[:stop]``) and ``subset``
(a cold open, then the given chunks, one selection each, ``concurrency`` at a time). Each
records wall seconds, the worker's CPU seconds and the HTTP requests the delay proxy counted;
an MD5 of what was read lets the driver check both read the same bytes.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.metadata
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from delay_proxy import admin_command
from reference_workers import digest_parts, s3_options
from reference_workers import limited_op as run_op


async def azarr_op(task: dict[str, Any], op: dict[str, Any]) -> list[Any]:
    import azarr
    from azarr.storage import IcechunkStore

    options = s3_options(task)
    store = IcechunkStore(
        f"s3://{task['bucket']}/{task['repo']}", storage_options=options, remote_options=options
    )
    arr = await azarr.open_array(store, path=task["var"], mode="r")
    try:
        return await run_op(arr, op)
    finally:
        await store.close()


async def zarr_icechunk_op(task: dict[str, Any], op: dict[str, Any]) -> list[Any]:
    import icechunk as ic
    import zarr

    endpoint = task["endpoint"]
    s3 = {"region": "us-east-1", "endpoint_url": endpoint, "allow_http": True, "force_path_style": True}
    storage = ic.s3_storage(
        bucket=task["bucket"],
        prefix=task["repo"],
        access_key_id=task["key"],
        secret_access_key=task["secret"],
        **s3,
    )
    config = ic.RepositoryConfig.default()
    prefix = f"s3://{task['bucket']}/"
    config.set_virtual_chunk_container(ic.VirtualChunkContainer(prefix, ic.s3_store(**s3)))
    credentials = ic.containers_credentials(
        {prefix: ic.s3_credentials(access_key_id=task["key"], secret_access_key=task["secret"])}
    )
    repo = await ic.Repository.open_async(storage, config=config, authorize_virtual_chunk_access=credentials)
    session = await repo.readonly_session_async("main")
    arr = await zarr.api.asynchronous.open_array(store=session.store, path=task["var"], mode="r")
    return await run_op(arr, op)


IMPLS: dict[str, Callable[..., Any]] = {"azarr": azarr_op, "zarr34-icechunk": zarr_icechunk_op}
MODULES = {
    "azarr": ("azarr", "icechunk", "zarr", "numpy", "azarr.storage._s3_transport", "s3fs", "aiohttp"),
    "zarr34-icechunk": ("icechunk", "zarr", "numpy"),
}


def main() -> None:
    task = json.loads(sys.stdin.read())
    impl = task["impl"]
    for module in MODULES[impl]:  # imports are not part of any operation's time
        importlib.import_module(module)
    reports = []
    for op in task["ops"]:
        admin_command(task["admin_port"], "reset")
        cpu0, t0 = time.process_time(), time.perf_counter()
        result = asyncio.run(IMPLS[impl](task, op))
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        counters = admin_command(task["admin_port"], "counters")
        reports.append(
            {**{k: v for k, v in op.items() if k != "chunks"}, "nchunks": len(op.get("chunks", [])),
             "seconds": seconds, "cpu_seconds": cpu, "requests": counters["requests"],
             "md5": digest_parts(result)}
        )  # fmt: skip
    versions = {m: importlib.metadata.version(m) for m in MODULES[impl] if "." not in m}
    print(json.dumps({"impl": impl, "versions": versions, "ops": reports}))


if __name__ == "__main__":
    main()
