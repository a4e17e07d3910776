"""`azarr.sync` against zarr-python 2.18 on random operation sequences (``ref_scripts/replay_ops.py``).

`SEQUENCES` seeded sequences of ``z[...]`` reads and writes (slices, integers, out-of-bounds
indices), ``oindex`` reads and writes, ``vindex`` reads, resizes, appends along any axis,
attribute updates and metadata, on 1-3-d arrays of five dtypes in C and F order, run in the
reference interpreter with zarr-python 2.18 and here with `azarr.sync`. Every operation must
give the same trace: the values, shape, dtype and type of a read, the shape after a resize
or append, the attributes, or the built-in class of the error raised.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import azarr.sync

from .conftest import RunRef
from .ref_scripts import replay_ops

pytestmark = pytest.mark.interop

SEQUENCES = int(os.environ.get("AZARR_REPLAY_SEQUENCES", "1500"))


def test_sync_replays_zarr_python_2_operation_for_operation(tmp_path: Path, run_ref_script: RunRef) -> None:
    sequences = replay_ops.cases(seed=20261127, count=SEQUENCES)
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(sequences))
    ran = run_ref_script("replay_ops.py", path)
    assert ran.returncode == 0, ran.report
    reference = json.loads(ran.stdout.strip().splitlines()[-1])
    ours = json.loads(json.dumps(replay_ops.replay(azarr.sync, sequences), default=str))
    different = []
    for i, (theirs, mine) in enumerate(zip(reference, ours, strict=True)):
        for step, (a, b) in enumerate(zip(theirs, mine, strict=True)):
            if a != b:
                op = sequences[i]["ops"][step] if step < len(sequences[i]["ops"]) else "create"
                different.append(f"sequence {i} {sequences[i]['create']}, {op}: zarr 2.18 {a} / azarr {b}")
                break
    assert not different, "\n".join(different[:10])
