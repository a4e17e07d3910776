"""Per-chunk CPU of decoding one 1 MiB Zstd chunk, in process (issue #29).

Which library call decodes a Zstd frame cheapest, and what landing the result in a
fresh output array costs beside it: the chunk `bench_cloud` writes (float32, level 1,
512 x 512), decoded on this thread, ``time.thread_time`` per call, medians of
interleaved rounds. ``zstandard`` is measured when it is installed (it is not an azarr
dependency)::

    python -m benchmarks.bench_zstd_decode [--rounds 25]

What it showed is in ``benchmarks/README.md`` ("Zstd chunks and uncompressed bodies at 0 ms").
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numcodecs.zstd import Zstd
from numcodecs.zstd import decompress as numcodecs_decompress

from azarr.pipeline._pages import empty
from benchmarks.cloud_workers import make_data

try:
    from compression import zstd as stdlib_zstd  # type: ignore[import-not-found,unused-ignore]
except ImportError:
    from backports import zstd as stdlib_zstd  # type: ignore[no-redef,unused-ignore]

CHUNK = (512, 512)


def _calls(frame: bytes, out: np.ndarray[Any, Any]) -> dict[str, Callable[[], object]]:
    flat = out.reshape(-1).view(np.uint8)
    codec = Zstd()
    calls: dict[str, Callable[[], object]] = {
        "numcodecs zstd.decompress(frame, out)": lambda: numcodecs_decompress(frame, out),
        "numcodecs Zstd().decode(frame, out)": lambda: codec.decode(frame, out),
        "numcodecs zstd.decompress(frame) (new bytes)": lambda: numcodecs_decompress(frame),
        "backports/compression.zstd decompress + copy": lambda: np.copyto(
            flat, np.frombuffer(stdlib_zstd.decompress(frame), np.uint8)
        ),
    }
    try:
        import zstandard
    except ImportError:
        return calls
    dctx = zstandard.ZstdDecompressor()  # one context, reused
    calls["zstandard stream_reader().readinto(out)"] = lambda: dctx.stream_reader(frame).readinto(flat)
    calls["zstandard decompress + copy"] = lambda: np.copyto(
        flat, np.frombuffer(dctx.decompress(frame), np.uint8)
    )
    return calls


def _landing(frame: bytes, chunks_per_row: int, n: int) -> dict[str, tuple[float, float]]:
    """CPU µs and page faults per chunk of decoding into a reused scratch chunk and copying
    into a fresh result (4 KiB pages, as azarr allocates results), against each part alone."""
    scratch = np.empty(CHUNK, dtype="<f4")
    rows, cols = CHUNK

    def decode_copy(region: np.ndarray[Any, Any]) -> None:
        numcodecs_decompress(frame, scratch)
        region[...] = scratch

    def decode(region: np.ndarray[Any, Any]) -> None:
        numcodecs_decompress(frame, scratch)

    def copy(region: np.ndarray[Any, Any]) -> None:
        region[...] = scratch

    def touch(region: np.ndarray[Any, Any]) -> None:
        region[:, :: 4096 // 4] = 0  # one write per 4 KiB page

    found = {}
    for label, step in (
        ("decode into scratch, copy into a fresh result", decode_copy),
        ("decode into scratch only", decode),
        ("copy scratch into a fresh result", copy),
        ("first touch of a fresh result's pages only", touch),
    ):
        out = empty((rows * n // chunks_per_row, cols * chunks_per_row), "<f4")
        before = resource.getrusage(resource.RUSAGE_THREAD)
        started = time.thread_time()
        for i in range(n):
            r, c = divmod(i, chunks_per_row)
            step(out[r * rows : (r + 1) * rows, c * cols : (c + 1) * cols])
        cpu = (time.thread_time() - started) / n * 1e6
        faults = (resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before.ru_minflt) / n
        found[label] = (cpu, faults)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    data = np.ascontiguousarray(make_data((8 * CHUNK[0], 2 * CHUNK[1]))[CHUNK[0] : 2 * CHUNK[0], : CHUNK[1]])
    frame = bytes(Zstd(level=1).encode(data))
    out = np.empty(CHUNK, dtype="<f4")
    calls = _calls(frame, out)
    for call in calls.values():
        call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.rounds):
        for name, call in calls.items():
            started = time.thread_time()
            for _ in range(8):
                call()
            samples[name].append((time.thread_time() - started) / 8 * 1e6)
    print(f"one Zstd frame of {len(frame)} bytes -> {data.nbytes} bytes (float32 {CHUNK}, level 1)\n")
    print("| decode call | CPU µs per chunk, median | p25 |\n| --- | ---: | ---: |")
    for name, values in samples.items():
        print(f"| {name} | {statistics.median(values):.0f} | {np.percentile(values, 25):.0f} |")
    print("\n| landing in a 128 MiB result (16 chunks a row) | CPU µs per chunk | page faults per chunk |")
    print("| --- | ---: | ---: |")
    for name, (cpu, faults) in _landing(frame, 16, 128).items():
        print(f"| {name} | {cpu:.0f} | {faults:.0f} |")


if __name__ == "__main__":
    main()
