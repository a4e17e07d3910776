"""Write Blosc arrays with zarr-python 2.18 and read selections with its ``partial_decompress=True``.

Usage: ``python partial_read.py OUT_DIR FSSPEC_DIR`` (run with the reference python). ``FSSPEC_DIR``
holds fsspec (installed there by the test fixture, not into the reference venv): zarr 2.18's partial
reads work only through ``FSStore`` (``zarr.util.PartialReadBuffer`` needs its ``fs``), and its
``open_array`` accepts ``partial_decompress`` without passing it on, so arrays are opened as
``zarr.Array(FSStore(...), partial_decompress=True)``. Writes ``OUT_DIR/data.zarr`` (one array per
case), ``OUT_DIR/<case>-<n>.npy`` (each selection's partial read, checked equal to a whole read) and
prints ``{"cases": [{"id", "path", "selections": [[...], ...]}]}``; a selection is a list of ints
and ``[start, stop, step]`` slices.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

SHAPE = (300, 700)
CHUNKS = (256, 512)
# (id, dtype, cname, shuffle, blocksize). zarr 2.18's partial path reads a memcpy'd chunk's data as a
# block table (OSError from a seek to a garbage offset): that case is checked against its whole read.
CASES = [
    ("f4-lz4-shuffle", "<f4", "lz4", 1, 4096),
    ("u1-zstd-noshuffle", "|u1", "zstd", 0, 2048),
    ("i2-blosclz-bitshuffle", "<i2", "blosclz", 2, 10_000),
    ("f8-zlib-auto", ">f8", "zlib", 1, 0),
    ("S7-lz4-memcpyd", "|S7", "lz4", 0, 8192),
]
MEMCPYD = "S7-lz4-memcpyd"
# zarr 2.18's partial path raises for some 2-d windows (e.g. [250:300, 500:700]: "cannot reshape array
# of size 12 into shape (1,0)" in PartialChunkIterator); these are ones it reads right.
SELECTIONS: list[list[Any]] = [
    [5, 7],
    [[10, 20, 1], [100, 130, 1]],
    [[0, 300, 37], 3],
    [17, [0, 700, 1]],
    [[0, 300, 1], 600],
    [299, [600, 700, 1]],
    [[256, 300, 1], 5],
]


def selection(spec: list[Any]) -> tuple[Any, ...]:
    return tuple(slice(*s) if isinstance(s, list) else s for s in spec)


def values(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "S":  # incompressible: Blosc stores the chunks memcpy'd
        return rng.integers(0, 256, int(np.prod(SHAPE)) * dt.itemsize, dtype=np.uint8).view(dt).reshape(SHAPE)
    return rng.integers(0, 60, SHAPE).astype(dt)


def main(out: Path, fsspec_dir: Path) -> None:
    sys.path.insert(0, str(fsspec_dir))
    warnings.simplefilter("ignore")  # zarr 2.18 deprecates partial_decompress
    import numcodecs
    import zarr

    url = str(out / "data.zarr")
    cases = []
    for seed, (case_id, dtype, cname, shuffle, blocksize) in enumerate(CASES):
        compressor = numcodecs.Blosc(cname=cname, clevel=5, shuffle=shuffle, blocksize=blocksize)
        z = zarr.open_array(
            zarr.storage.FSStore(url),
            mode="w",
            path=case_id,
            shape=SHAPE,
            chunks=CHUNKS,
            dtype=dtype,
            compressor=compressor,
        )
        z[...] = values(dtype, seed)
        partial = zarr.Array(
            zarr.storage.FSStore(url), path=case_id, read_only=True, partial_decompress=case_id != MEMCPYD
        )
        for n, spec in enumerate(SELECTIONS):
            got = partial[selection(spec)]
            np.testing.assert_array_equal(got, z[selection(spec)])
            np.save(out / f"{case_id}-{n}.npy", np.asarray(got))
        cases.append(
            {"id": case_id, "path": case_id, "selections": SELECTIONS, "zarr_partial": case_id != MEMCPYD}
        )
    print(json.dumps({"cases": cases}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
