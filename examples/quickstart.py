"""azarr quickstart: create, write, read and reopen Zarr v2 data asynchronously.

Runs on a local directory store (no server needed)::

    python examples/quickstart.py [DIRECTORY]

Point it at S3 instead by passing a URL and credentials through fsspec's
``storage_options``, e.g. ``azarr.open_group("s3://bucket/demo.zarr", storage_options={...})``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numcodecs
import numpy as np

import azarr


async def main(root: Path) -> None:
    store = azarr.LocalStore(root / "demo.zarr")
    print(f"store: {store.url}")

    # A group with attributes, and two arrays in it.
    grp = await azarr.group(store, overwrite=True)
    await grp.attrs.update(title="azarr quickstart", created_by="examples/quickstart.py")
    temps = await grp.zeros(
        "climate/temperature",
        shape=(365, 180, 360),
        chunks=(30, 90, 90),
        dtype="f4",
        compressor=numcodecs.Blosc(cname="zstd", clevel=3, shuffle=numcodecs.Blosc.BITSHUFFLE),
    )
    await temps.attrs.update(units="degC")
    names = await grp.array("stations", ["Oslo", "Lima", "Accra"], dtype=str)

    # Write the whole array: 156 chunks, encoded in the codec thread pool and written concurrently.
    rng = np.random.default_rng(0)
    data = (15 + 10 * rng.standard_normal(temps.shape)).astype("f4")
    t0 = time.perf_counter()
    await temps.set_basic_selection(..., data)
    print(
        f"wrote {temps.nbytes / 2**20:.1f} MiB in {temps.nchunks} chunks in {time.perf_counter() - t0:.2f} s"
    )

    # Read selections back: only the chunks they touch are fetched.
    day = await temps.get_basic_selection((100, slice(0, 90), slice(0, 90)))
    assert np.array_equal(day, data[100, :90, :90])
    points = await temps.get_orthogonal_selection(([0, 181, 364], 45, slice(None, None, 60)))
    print(f"orthogonal selection -> shape {points.shape}, first row {np.round(points[0], 1)}")
    print(f"stations: {list(await names.getitem(...))}")

    # Grow the array along time, then check its stored size.
    await temps.append(data[:5])
    print(f"after append: shape {temps.shape}, {await temps.nchunks_initialized()} chunks stored")

    # Consolidate the hierarchy's metadata, then reopen it with a single store read.
    await azarr.consolidate_metadata(store)
    reopened = await azarr.open_consolidated(store)
    assert isinstance(reopened, azarr.AsyncGroup)
    print(await reopened.tree())
    again = await reopened.get("climate/temperature")
    assert isinstance(again, azarr.AsyncArray)
    assert np.array_equal(await again.get_basic_selection(slice(0, 365)), data)
    print(f"reopened {again.name} {again.shape} {again.dtype} attrs={dict(again.attrs)}: data matches")
    print(again.info)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        asyncio.run(main(Path(sys.argv[1])))
    else:
        with tempfile.TemporaryDirectory(prefix="azarr-quickstart-") as tmp:
            asyncio.run(main(Path(tmp)))
