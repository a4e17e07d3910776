"""A fork server for tests/test_kill9.py: imports azarr once, then forks one child per operation.

Protocol (JSON lines): the test writes ``{"op": ..., "store": {...}, ...}`` to stdin; this
process forks a child that runs the operation and ``os._exit``\\ s, answers
``{"pid": PID}`` at once (the test may ``SIGKILL`` that PID whenever it likes), then
``{"pid": PID, "status": "done" | "killed" | "failed", "seconds": ...}`` once the child
is gone. Forking from an interpreter that already imported numpy, aiohttp and azarr (and
ran no event loop or thread pool yet) makes a child start in a few milliseconds instead
of the ~0.5 s of a fresh interpreter, so a test can afford many kills.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
import traceback
from typing import Any

import aiobotocore.session  # noqa: F401 - imported once here, not by every child (~0.5 s)
import numpy as np
import s3fs  # noqa: F401

import azarr
import azarr.cli
import azarr.storage._s3_transport
from azarr.storage import LocalStore, S3Store, Store


def pattern(shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """The data the test writes first: every element distinct, none equal to the fill value."""
    return np.arange(1, int(np.prod(shape)) + 1, dtype="i4").reshape(shape)


def open_store(spec: dict[str, Any]) -> Store:
    if spec["kind"] == "local":
        return LocalStore(spec["root"])
    return S3Store(spec["root"], storage_options=spec["storage_options"])


async def _run(command: dict[str, Any]) -> None:
    op = command["op"]
    if op == "cp":
        # The command line itself, as a user runs it (it runs its own event loop: see main).
        raise AssertionError("cp runs outside the event loop")
    store = open_store(command["store"])
    arr = await azarr.open_array(store, mode="r+", path="a")
    if op == "resize":
        await arr.resize(*command["shape"])
    elif op == "append":
        await arr.append(np.asarray(command["value"], dtype=arr.dtype))
    elif op == "write":
        region = tuple(slice(*s) for s in command["region"])
        await arr.set_basic_selection(region, -pattern(arr.shape)[region])
    elif op == "attrs":
        for n in range(1, command["updates"] + 1):
            await arr.attrs.update(n=n, pad="x" * command["pad"])
    else:
        raise ValueError(f"unknown op {op!r}")
    await store.close()


def _child(command: dict[str, Any]) -> None:
    os.dup2(2, 1)  # what the child prints (azarr cp's summary) goes to the log, not the protocol
    try:
        if command["op"] == "cp":
            azarr.cli.cli.main(args=command["argv"], prog_name="azarr", standalone_mode=False)
        else:
            asyncio.run(_run(command))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def main() -> None:
    out = os.fdopen(os.dup(1), "w")  # the protocol's own descriptor: children take over fd 1
    for line in sys.stdin:
        command = json.loads(line)
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(command)
        out.write(json.dumps({"pid": pid}) + "\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            outcome = "killed"
        else:
            outcome = "done" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else "failed"
        out.write(json.dumps({"pid": pid, "status": outcome, "seconds": time.monotonic() - start}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
