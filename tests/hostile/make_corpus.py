"""Write the hostile store corpus (tests/hostile/<case>/, a few KB each) and cases.json.

Run from the repository root: ``python tests/hostile/make_corpus.py``. Each case
is a directory store holding an array ``a`` (or a consolidated group ``g``)
that a stranger could publish; cases.json gives the error azarr must raise
(``error`` class name and a ``match`` regex), the key the message must name,
and any azarr.config settings the case runs under. test_hostile_corpus.py reads
them. The output is deterministic, so re-running it changes nothing in git.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import shutil
import sys
import zlib
from pathlib import Path
from typing import Any

import msgpack
import numcodecs
import numpy as np
from backports.zstd import ZstdCompressor

HERE = Path(__file__).parent
CHUNK = 16  # elements per chunk of the <i4 arrays: 64 bytes decoded
BOMB = 4 * 2**20  # what the compression bombs inflate to


def zarray(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "zarr_format": 2,
        "shape": [32],
        "chunks": [CHUNK],
        "dtype": "<i4",
        "compressor": None,
        "fill_value": 0,
        "order": "C",
        "filters": None,
        "dimension_separator": ".",
    }
    doc.update(changes)
    return doc


def zarr_json(**changes: Any) -> dict[str, Any]:
    """A Zarr v3 array document: 32 little-endian int32 in chunks of 16 (keys ``c/0``, ``c/1``)."""
    doc: dict[str, Any] = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [32],
        "data_type": "int32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [CHUNK]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [LE],
        "attributes": {},
    }
    doc.update(changes)
    return doc


LE = {"name": "bytes", "configuration": {"endian": "little"}}
BLOSC = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 4}}


def crc32c(data: bytes) -> bytes:
    """``data`` with its CRC-32C appended, as the v3 ``crc32c`` codec stores it."""
    return data + bytes(numcodecs.CRC32C().encode(data))[-4:]


def dumps(doc: Any) -> bytes:
    sys.set_int_max_str_digits(0)
    return json.dumps(doc, sort_keys=True).encode()


def stream(compressor: Any) -> bytes:
    block = bytes(2**16)
    return b"".join(compressor.compress(block) for _ in range(BOMB // 2**16)) + compressor.flush()


# A pickle that, if ever unpickled, sets AZARR_HOSTILE_PICKLE_RAN=1 in os.environ.
PICKLE_PAYLOAD = b'cbuiltins\nexec\n(S\'import os; os.environ["AZARR_HOSTILE_PICKLE_RAN"] = "1"\'\ntR.'


def blosc_header_lie() -> bytes:
    data = bytearray(numcodecs.Blosc("lz4").encode(np.zeros(CHUNK, "<i4")))
    data[4:8] = (2**31 - 1).to_bytes(4, "little")
    return bytes(data)


def lz4_header_lie() -> bytes:
    data = bytearray(numcodecs.LZ4().encode(np.zeros(CHUNK, "<i4")))
    data[:4] = (2**31 - 1).to_bytes(4, "little")
    return bytes(data)


def zstd_declared_huge() -> bytes:
    frame = numcodecs.Zstd().encode(np.zeros(CHUNK, "<i4"))
    return b"\x28\xb5\x2f\xfd\xe0" + (2**62).to_bytes(8, "little") + bytes(frame[6:])


def vlen_count_lie() -> bytes:
    data = bytearray(numcodecs.VLenUTF8().encode(np.array(["x"] * 4, dtype=object)))
    data[:4] = (2**28).to_bytes(4, "little")
    return bytes(data)


def corrupt_zip() -> bytes:
    """A zip whose deflated chunk member has an invalid deflate block (zlib.error in zipfile)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for key, value, method in (
            ("a/.zarray", dumps(zarray()), zipfile.ZIP_STORED),
            ("a/0", bytes(64), zipfile.ZIP_DEFLATED),
        ):
            info = zipfile.ZipInfo(key, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = method
            zf.writestr(info, value)
    data = bytearray(buf.getvalue())
    member = data.find(b"a/0", data.find(b"a/.zarray") + 9)  # the local header's name
    data[member + 3] = 0xFF  # first deflate byte: block type 3 (invalid)
    return bytes(data)


DELTA = [{"id": "delta", "dtype": "<i4"}]
OBJ = {"dtype": "|O", "shape": [4], "chunks": [4], "fill_value": None}

# name -> (files, expectation)
CASES: dict[str, tuple[dict[str, bytes], dict[str, Any]]] = {
    "zlib-bomb": (
        {
            "a/.zarray": dumps(zarray(compressor={"id": "zlib", "level": 1})),
            "a/0": zlib.compress(bytes(BOMB), 9),
        },
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/0"},
    ),
    "gzip-bomb": (
        {
            "a/.zarray": dumps(zarray(compressor={"id": "gzip", "level": 1})),
            "a/0": stream(zlib.compressobj(9, zlib.DEFLATED, 31)),
        },
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/0"},
    ),
    "bz2-bomb": (
        {"a/.zarray": dumps(zarray(compressor={"id": "bz2", "level": 1})), "a/0": bz2.compress(bytes(BOMB))},
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/0"},
    ),
    "lzma-bomb": (
        {"a/.zarray": dumps(zarray(compressor={"id": "lzma"})), "a/0": lzma.compress(bytes(BOMB))},
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/0"},
    ),
    "zstd-streamed-bomb": (
        {"a/.zarray": dumps(zarray(compressor={"id": "zstd"})), "a/0": stream(ZstdCompressor())},
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/0"},
    ),
    "zlib-bomb-under-filter": (
        {
            "a/.zarray": dumps(zarray(compressor={"id": "zlib"}, filters=DELTA)),
            "a/1": zlib.compress(bytes(BOMB), 9),
        },
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/1"},
    ),
    "blosc-header-2gib": (
        {
            "a/.zarray": dumps(zarray(compressor={"id": "blosc", "cname": "lz4"}, filters=DELTA)),
            "a/0": blosc_header_lie(),
        },
        {"error": "CodecError", "match": "declares 2147483647", "key": "a/0"},
    ),
    "lz4-header-2gib": (
        {"a/.zarray": dumps(zarray(compressor={"id": "lz4"}, filters=DELTA)), "a/0": lz4_header_lie()},
        {"error": "CodecError", "match": "declares 2147483647", "key": "a/0"},
    ),
    "zstd-content-size-2e62": (
        {"a/.zarray": dumps(zarray(compressor={"id": "zstd"}, filters=DELTA)), "a/0": zstd_declared_huge()},
        {"error": "CodecError", "match": "declares 4611686018427387904", "key": "a/0"},
    ),
    "vlen-count-2e28": (
        {"a/.zarray": dumps(zarray(**OBJ, filters=[{"id": "vlen-utf8"}])), "a/0": vlen_count_lie()},
        {"error": "CodecError", "match": "declares 268435456 items", "key": "a/0"},
    ),
    "json2-shape-2e34": (
        {
            "a/.zarray": dumps(zarray(**OBJ, filters=[{"id": "json2"}])),
            "a/0": dumps(["a", "b", "c", "d", "|O", [2**34]]),
        },
        {"error": "CodecError", "match": "declares 17179869184 elements", "key": "a/0"},
    ),
    "msgpack2-dtype-2gb": (
        {
            "a/.zarray": dumps(zarray(**OBJ, filters=[{"id": "msgpack2"}])),
            "a/0": msgpack.packb(["a", "b", "c", "d", "|V2000000000", [4]]),
        },
        {"error": "CodecError", "match": "exceeds", "key": "a/0"},
    ),
    "pickle-filter": (
        {"a/.zarray": dumps(zarray(**OBJ, filters=[{"id": "pickle"}])), "a/0": PICKLE_PAYLOAD},
        {"error": "UnsafeCodecError", "match": "pickle", "key": "a/0"},
    ),
    "chunk-2e34-elements": (
        {"a/.zarray": dumps(zarray(shape=[2**40], chunks=[2**34], dtype="<f8"))},
        {"error": "MetadataError", "match": "max_chunk_bytes", "key": "a/.zarray"},
    ),
    "shape-5000-digits": (
        {"a/.zarray": dumps(zarray()).replace(b'"shape": [32]', b'"shape": [' + b"9" * 5000 + b"]")},
        {"error": "MetadataError", "match": "not valid JSON.*digits", "key": "a/.zarray"},
    ),
    "shape-1e400": (
        {"a/.zarray": dumps(zarray(shape=[10**400], chunks=[10**399]))},
        {"error": "MetadataError", "match": "'shape' has an extent over", "key": "a/.zarray"},
    ),
    "shape-float-1e400": (
        {"a/.zarray": dumps(zarray()).replace(b'"shape": [32]', b'"shape": [1e400]')},
        {"error": "MetadataError", "match": "'shape' must be a list", "key": "a/.zarray"},
    ),
    "shape-nan": (
        {"a/.zarray": dumps(zarray()).replace(b'"shape": [32]', b'"shape": [NaN]')},
        {"error": "MetadataError", "match": "'shape'", "key": "a/.zarray"},
    ),
    "fill-nan-int": (
        {"a/.zarray": dumps(zarray()).replace(b'"fill_value": 0', b'"fill_value": NaN')},
        {"error": "MetadataError", "match": "'fill_value'", "key": "a/.zarray"},
    ),
    "deep-nesting-zarray": (
        {"a/.zarray": dumps(zarray())[:-1] + b', "x": ' + b"[" * 3000 + b"]" * 3000 + b"}"},
        {"error": "MetadataError", "match": "nested too deeply|deeper than", "key": "a/.zarray"},
    ),
    "deep-nesting-zattrs": (
        {"a/.zarray": dumps(zarray()), "a/.zattrs": b'{"x": ' + b"[" * 600 + b"]" * 600 + b"}"},
        {"error": "MetadataError", "match": "deeper than 128", "key": "a/.zattrs"},
    ),
    "dtype-subarray-overflow": (
        {"a/.zarray": dumps(zarray(dtype=[["a", "<i4", [2**40]]], fill_value=None))},
        {"error": "MetadataError", "match": "'dtype\\[0\\]' subarray shape", "key": "a/.zarray"},
    ),
    "dtype-element-over-limit": (
        {"a/.zarray": dumps(zarray(dtype=[["a", "<f8", [2**26]]], fill_value=None))},
        {
            "error": "MetadataError",
            "match": "'dtype' has elements of",
            "key": "a/.zarray",
            "config": {"max_chunk_bytes": 2**20},
        },
    ),
    "wrong-types": (
        {"a/.zarray": dumps(zarray(chunks="16", order=5))},
        {"error": "MetadataError", "match": "'chunks'", "key": "a/.zarray"},
    ),
    "metadata-over-size-cap": (
        {"a/.zarray": dumps(zarray(padding="x" * 3000))},
        {
            "error": "MetadataError",
            "match": "max_metadata_bytes",
            "key": "a/.zarray",
            "config": {"max_metadata_bytes": 2048},
        },
    ),
    "zip-invalid-deflate": (
        {"store.zip": corrupt_zip()},
        {"error": "StoreError", "match": "error", "key": "a/0", "zip": "store.zip"},
    ),
    "consolidated-hostile-entry": (
        {
            "g/.zgroup": dumps({"zarr_format": 2}),
            "g/.zmetadata": dumps(
                {
                    "zarr_consolidated_format": 1,
                    "metadata": {
                        ".zgroup": {"zarr_format": 2},
                        "a/.zarray": zarray(shape=[10**400], chunks=[1]),
                    },
                }
            ),
        },
        {"error": "MetadataError", "match": "extent over", "key": "a/.zarray", "path": "g"},
    ),
}


# Zarr v3: the same bombs and lies through v3 codec chains, and v3 metadata a stranger could write.
V3_CASES: dict[str, tuple[dict[str, bytes], dict[str, Any]]] = {
    "v3-gzip-bomb": (
        {
            "a/zarr.json": dumps(zarr_json(codecs=[LE, {"name": "gzip", "configuration": {"level": 1}}])),
            "a/c/0": stream(zlib.compressobj(9, zlib.DEFLATED, 31)),
        },
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/c/0"},
    ),
    "v3-zstd-bomb-under-crc32c": (
        {
            "a/zarr.json": dumps(
                zarr_json(
                    codecs=[
                        LE,
                        {"name": "zstd", "configuration": {"level": 1, "checksum": False}},
                        {"name": "crc32c"},
                    ]
                )
            ),
            "a/c/1": crc32c(stream(ZstdCompressor())),
        },
        {"error": "CodecError", "match": "more than 64 bytes", "key": "a/c/1"},
    ),
    "v3-gzip-bomb-after-blosc": (
        {
            "a/zarr.json": dumps(
                zarr_json(
                    codecs=[
                        LE,
                        BLOSC,
                        {"name": "gzip", "configuration": {"level": 1}},
                    ]
                )
            ),
            "a/c/0": stream(zlib.compressobj(9, zlib.DEFLATED, 31)),
        },
        {"error": "CodecError", "match": "decompresses to more than \\d+ bytes", "key": "a/c/0"},
    ),
    "v3-blosc-header-2gib": (
        {
            "a/zarr.json": dumps(
                zarr_json(
                    codecs=[
                        LE,
                        BLOSC,
                    ]
                )
            ),
            "a/c/0": blosc_header_lie(),
        },
        {"error": "CodecError", "match": "2147483647 bytes \\(declared in its header\\)", "key": "a/c/0"},
    ),
    "v3-crc32c-mismatch": (
        {
            "a/zarr.json": dumps(zarr_json(codecs=[LE, {"name": "crc32c"}])),
            "a/c/0": bytes(4 * CHUNK) + b"\x00\x00\x00\x01",
        },
        {"error": "CodecError", "match": "crc32c checksum mismatch", "key": "a/c/0"},
    ),
    "v3-vlen-count-2e28": (
        {
            "a/zarr.json": dumps(
                zarr_json(
                    shape=[4],
                    data_type="string",
                    fill_value="",
                    chunk_grid={"name": "regular", "configuration": {"chunk_shape": [4]}},
                    codecs=[{"name": "vlen-utf8"}],
                )
            ),
            "a/c/0": vlen_count_lie(),
        },
        {"error": "CodecError", "match": "declares 268435456 items", "key": "a/c/0"},
    ),
    "v3-shape-1e400": (
        {"a/zarr.json": dumps(zarr_json(shape=[10**400]))},
        {"error": "MetadataError", "match": "'shape' has an extent over", "key": "a/zarr.json"},
    ),
    "v3-chunk-2e34-elements": (
        {
            "a/zarr.json": dumps(
                zarr_json(
                    shape=[2**40],
                    data_type="float64",
                    fill_value=0.0,
                    chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2**34]}},
                )
            )
        },
        {"error": "MetadataError", "match": "max_chunk_bytes", "key": "a/zarr.json"},
    ),
    "v3-raw-bits-2e40-bytes": (
        {"a/zarr.json": dumps(zarr_json(data_type=f"r{2**43}", fill_value="AA=="))},
        {"error": "MetadataError", "match": "data_type", "key": "a/zarr.json"},
    ),
    "v3-must-understand-true": (
        {"a/zarr.json": dumps(zarr_json(spatial={"must_understand": True, "crs": "EPSG:4326"}))},
        {"error": "MetadataError", "match": "'spatial' is an extension", "key": "a/zarr.json"},
    ),
    "v3-extension-without-must-understand": (
        {"a/zarr.json": dumps(zarr_json(spatial={"crs": "EPSG:4326"}))},
        {"error": "MetadataError", "match": "'spatial' is an extension", "key": "a/zarr.json"},
    ),
    "v3-unknown-codec": (
        {"a/zarr.json": dumps(zarr_json(codecs=[LE, {"name": "lz5", "must_understand": False}]))},
        {"error": "MetadataError", "match": "unknown codec 'lz5'", "key": "a/zarr.json"},
    ),
    "v3-codecs-not-a-list": (  # found by the fuzzer at scale (2026-11-27): a bare TypeError
        {"a/zarr.json": dumps(zarr_json(codecs=0))},
        {"error": "MetadataError", "match": "'codecs' must be a non-empty list", "key": "a/zarr.json"},
    ),
    "v3-blosc-shuffle-not-a-name": (  # found by the fuzzer at scale (2026-11-27): a bare TypeError
        {
            "a/zarr.json": dumps(
                zarr_json(codecs=[LE, {"name": "blosc", "configuration": {"cname": "lz4", "shuffle": []}}])
            )
        },
        {"error": "MetadataError", "match": "'shuffle' must be one of", "key": "a/zarr.json"},
    ),
    "v3-storage-transformer": (
        {"a/zarr.json": dumps(zarr_json(storage_transformers=[{"name": "chunk-manifest-json"}]))},
        {"error": "MetadataError", "match": "storage_transformers", "key": "a/zarr.json"},
    ),
    "v3-fill-bad-hex": (
        {"a/zarr.json": dumps(zarr_json(data_type="float32", fill_value="0xZZ"))},
        {"error": "MetadataError", "match": "'fill_value'", "key": "a/zarr.json"},
    ),
    "v3-deep-nesting-attributes": (
        {"a/zarr.json": dumps(zarr_json())[:-1] + b', "x": ' + b"[" * 600 + b"]" * 600 + b"}"},
        {"error": "MetadataError", "match": "deeper than 128", "key": "a/zarr.json"},
    ),
    "v3-consolidated-hostile-entry": (
        {
            "g/zarr.json": dumps(
                {
                    "zarr_format": 3,
                    "node_type": "group",
                    "attributes": {},
                    "consolidated_metadata": {
                        "kind": "inline",
                        "must_understand": False,
                        "metadata": {"a": zarr_json(shape=[10**400])},
                    },
                }
            ),
        },
        {"error": "MetadataError", "match": "extent over", "key": "g/a/zarr.json", "path": "g"},
    ),
}
CASES.update(V3_CASES)


def sharded_json(inner: int = 8, **changes: Any) -> dict[str, Any]:
    """`zarr_json` whose chunks (16 elements) are shards of inner chunks of ``inner``: index
    ``bytes`` + ``crc32c`` at the end."""
    sharding = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [inner],
            "codecs": changes.pop("inner_codecs", [LE]),
            "index_codecs": [LE, {"name": "crc32c"}],
            "index_location": "end",
        },
    }
    return zarr_json(codecs=[sharding], **changes)


def shard(chunks: list[bytes], entries: list[tuple[int, int]] | None = None) -> bytes:
    """A shard of ``chunks`` with an index at the end: their true places, or ``entries``."""
    if entries is None:
        entries, offset = [], 0
        for chunk in chunks:
            entries.append((offset, len(chunk)))
            offset += len(chunk)
    index = np.array(entries, dtype="<u8").tobytes()
    return b"".join(chunks) + crc32c(index)


_INNER = [np.arange(8, dtype="<i4").tobytes(), np.arange(8, 16, dtype="<i4").tobytes()]

# Zarr v3 sharding: an index that lies (past the object, over another chunk, 2^40 bytes, a bad
# checksum), an index too large to read, and a bomb inside a shard.
SHARD_CASES: dict[str, tuple[dict[str, bytes], dict[str, Any]]] = {
    "v3-shard-index-past-end": (
        {"a/zarr.json": dumps(sharded_json()), "a/c/0": shard(_INNER, [(0, 32), (4096, 32)])},
        {"error": "ShardIndexError", "match": "reaches past the shard's data", "key": "a/c/0"},
    ),
    "v3-shard-index-overlap": (
        {"a/zarr.json": dumps(sharded_json()), "a/c/0": shard(_INNER, [(0, 32), (16, 32)])},
        {"error": "ShardIndexError", "match": "overlap", "key": "a/c/0"},
    ),
    "v3-shard-index-2e40-bytes": (
        {"a/zarr.json": dumps(sharded_json()), "a/c/0": shard(_INNER, [(0, 32), (32, 2**40)])},
        {"error": "ShardIndexError", "match": "claims 1099511627776 bytes", "key": "a/c/0"},
    ),
    "v3-shard-index-crc32c-mismatch": (
        {"a/zarr.json": dumps(sharded_json()), "a/c/0": shard(_INNER)[:-1] + b"\x00"},
        {"error": "ShardIndexError", "match": "checksum mismatch", "key": "a/c/0"},
    ),
    "v3-shard-index-2e28-entries": (
        {
            "a/zarr.json": dumps(
                sharded_json(
                    inner=1,
                    shape=[2**28],
                    chunk_grid={"name": "regular", "configuration": {"chunk_shape": [2**28]}},
                )
            )
        },
        {"error": "MetadataError", "match": "an index of 4294967296 bytes", "key": "a/zarr.json"},
    ),
    "v3-shard-gzip-bomb": (
        {
            "a/zarr.json": dumps(
                sharded_json(inner_codecs=[LE, {"name": "gzip", "configuration": {"level": 1}}])
            ),
            # 4 MiB of zeros as the second inner chunk (32 bytes decoded): its decode stops
            # at the inner chunk's size.
            "a/c/1": shard(
                [gzip.compress(_INNER[0], mtime=0), stream(zlib.compressobj(9, zlib.DEFLATED, 31))]
            ),
        },
        {"error": "CodecError", "match": "inner chunk \\(3,\\).*more than 32 bytes", "key": "a/c/1"},
    ),
}
CASES.update(SHARD_CASES)


def main() -> None:
    manifest = {}
    for name, (files, expect) in CASES.items():
        folder = HERE / name
        if folder.exists():
            shutil.rmtree(folder)
        for key, value in files.items():
            path = folder.joinpath(*key.split("/"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(value)
        manifest[name] = expect
    (HERE / "cases.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
