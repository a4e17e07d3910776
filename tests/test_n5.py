"""``N5Store`` over any store (zarr-python 2's ``N5FSStore`` role); zarr 2.18 interop is tests/interop/test_n5.py."""

from __future__ import annotations

import json
from typing import Any

import numcodecs
import numpy as np
import pytest

import azarr
from azarr.api.n5 import N5ChunkCodec


@pytest.mark.parametrize("store_factory", ["memory", pytest.param("s3", marks=pytest.mark.s3)], indirect=True)
async def test_n5_hierarchy_on_any_store(store_factory: Any) -> None:
    inner = store_factory()
    store = azarr.N5Store(inner)
    g = await azarr.open_group(store, mode="w")
    sub = await g.create_group("sub")
    data = np.arange(60, dtype="<f8").reshape(3, 4, 5)
    z = await sub.create_dataset("v", data=data, chunks=(2, 2, 5), compressor=numcodecs.Zstd(level=1))
    assert isinstance(z.compressor, N5ChunkCodec)
    # N5 layout underneath: reversed dimensions and chunk paths
    attrs = json.loads(await inner.get("sub/v/attributes.json") or b"{}")
    assert attrs["dimensions"] == [5, 4, 3] and attrs["blockSize"] == [5, 2, 2]
    assert attrs["compression"] == {"type": "zstd", "level": 1, "checksum": False}
    assert await inner.exists("sub/v/0/1/1")  # chunk (1, 1, 0)
    assert json.loads(await inner.get("sub/attributes.json") or b"{}") == {"n5": "2.0.0"}
    again = await azarr.open_group(azarr.N5Store(inner), mode="r")
    assert await azarr.tree(again) == "/\n └── sub\n     └── v (3, 4, 5) float64"
    v = await again.get("sub/v")
    assert np.array_equal(await v.getitem(...), data)
    assert await v.nchunks_initialized() == v.nchunks == 4
    assert np.array_equal(
        await v.get_orthogonal_selection(([2], slice(None), [0, 4])), data[[2]][:, :, [0, 4]]
    )


def test_chunk_codec_round_trip_and_errors() -> None:
    codec = N5ChunkCodec("<u2", (2, 3), {"id": "zlib", "level": 1})
    chunk = np.arange(6, dtype="<u2").reshape(2, 3)
    encoded = codec.encode(chunk)
    assert encoded[:12] == bytes([0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2])  # mode 0, rank 2, dims reversed
    assert np.array_equal(codec.decode(encoded), chunk)
    assert numcodecs.get_codec(codec.get_config()).get_config() == codec.get_config()
    with pytest.raises(ValueError, match="mode"):
        codec.decode(b"\x00\x01" + encoded[2:])
    with pytest.raises(ValueError, match="larger than the chunk"):
        big = N5ChunkCodec("<u2", (4, 3), None).encode(np.zeros((4, 3), dtype="<u2"))
        N5ChunkCodec("<u2", (2, 3), None).decode(big)
