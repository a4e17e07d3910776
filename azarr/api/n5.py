"""``N5Store``: N5 data read and written as a Zarr v2 hierarchy (zarr-python 2.10+ ``N5Store``).

N5 keeps one ``attributes.json`` per group or dataset instead of ``.zgroup`` /
``.zarray`` / ``.zattrs``, lists dimensions fastest-first (reversed from Zarr's
C order), stores chunk ``(i, j)`` of a 2-d dataset at ``j/i``, and gives every
chunk a big-endian header (mode, rank, the block's own shape) before its
big-endian, compressed bytes. `N5Store` wraps any azarr store and
translates on the fly, as zarr-python 2's ``N5Store`` does, so arrays and
groups above it see an ordinary Zarr v2 hierarchy:

* ``<path>/.zgroup``, ``.zarray``, ``.zattrs`` <-> ``<path>/attributes.json``
  (N5's ``dimensions``, ``blockSize``, ``dataType``, ``compression`` and, at a
  group or the root array, ``"n5": "2.0.0"``; everything else is attributes);
* chunk ``a/1.2`` <-> ``a/2/1``;
* the compressor becomes the ``n5_wrapper`` codec (`N5ChunkCodec`),
  which adds and checks the header, swaps byte order, and pads the truncated
  edge blocks other N5 writers produce.

N5 has no fill value (reads as 0), no filters and C order only: other values
raise `MetadataError` when the array is created. The data
types are N5's: (u)int8-64, float32/64.
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator
from typing import Any

import numcodecs
import numpy as np
from numcodecs.abc import Codec

from azarr.errors import MetadataError
from azarr.metadata import ZARRAY, ZATTRS, ZGROUP, encode_json
from azarr.storage import ByteRange, Store, WrapperStore

N5_FORMAT = "2.0.0"
N5_ATTRS = "attributes.json"
#: attributes.json keys that are N5 metadata, not user attributes.
N5_KEYWORDS = ("n5", "dataType", "dimensions", "blockSize", "compression")
_N5_DTYPES = frozenset(
    {"uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float32", "float64"}
)
_ZARR_DOCS = (ZGROUP, ZARRAY, ZATTRS)


# ------------------------------------------------------------------ the chunk codec
class N5ChunkCodec(Codec):  # type: ignore[misc]
    """N5 block framing around a numcodecs compressor (codec id ``n5_wrapper``, as zarr-python 2).

    Parameters
    ----------
    dtype : numpy dtype
        The array's (native byte order) dtype; blocks hold it big-endian.
    chunk_shape : sequence of int
        Zarr's chunk shape (C order).
    compressor_config : dict or None
        The inner compressor (None: N5's ``raw``).
    """

    codec_id = "n5_wrapper"

    def __init__(self, dtype: Any, chunk_shape: Any, compressor_config: dict[str, Any] | None = None) -> None:
        self.dtype = np.dtype(dtype)
        self.chunk_shape = tuple(int(n) for n in chunk_shape)
        self.compressor_config = None if compressor_config is None else dict(compressor_config)
        self._compressor = None if compressor_config is None else numcodecs.get_codec(dict(compressor_config))

    def get_config(self) -> dict[str, Any]:
        return {
            "id": self.codec_id,
            "compressor_config": self.compressor_config,
            "dtype": self.dtype.str,
            "chunk_shape": list(self.chunk_shape),
        }

    def encode(self, buf: Any) -> bytes:
        # np.asarray(order="C"), not np.ascontiguousarray, which makes a 0-d chunk 1-d.
        chunk = np.asarray(np.asarray(buf).view(self.dtype).reshape(self.chunk_shape), order="C")
        header = struct.pack(">HH", 0, chunk.ndim) + b"".join(struct.pack(">I", n) for n in chunk.shape[::-1])
        data = chunk.astype(self.dtype.newbyteorder(">"), copy=False).tobytes()
        body = data if self._compressor is None else bytes(self._compressor.encode(data))
        return header + body

    def decode(self, buf: Any, out: Any = None) -> Any:
        raw = memoryview(buf).cast("B")
        mode, ndim = struct.unpack(">HH", raw[:4])
        if mode != 0:
            raise ValueError(f"N5 block mode {mode} is not supported (only 0, the default block)")
        if ndim != len(self.chunk_shape):
            raise ValueError(f"N5 block has {ndim} dimensions, the array {len(self.chunk_shape)}")
        end = 4 + 4 * ndim
        shape = tuple(struct.unpack(f">{ndim}I", raw[4:end]))[::-1]
        body: Any = raw[end:]
        if self._compressor is not None:
            body = self._compressor.decode(body)
        block = np.frombuffer(bytes(body), dtype=self.dtype.newbyteorder(">"))
        if block.size != int(np.prod(shape)):
            raise ValueError(f"N5 block of shape {shape} holds {block.size} elements")
        block = block.reshape(shape).astype(self.dtype)
        if shape != self.chunk_shape:
            # other N5 writers truncate edge blocks: pad to the chunk with zeros (N5 has no fill value)
            if any(s > c for s, c in zip(shape, self.chunk_shape, strict=True)):
                raise ValueError(f"N5 block of shape {shape} is larger than the chunk {self.chunk_shape}")
            full = np.zeros(self.chunk_shape, dtype=self.dtype)
            full[tuple(slice(0, s) for s in shape)] = block
            block = full
        if out is not None:
            np.copyto(np.asarray(out).reshape(self.chunk_shape), block)
            return out
        return block


numcodecs.register_codec(N5ChunkCodec)


# ------------------------------------------------------------------ metadata translation
def _compression_to_n5(config: dict[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {"type": "raw"}
    if config.get("id") == N5ChunkCodec.codec_id:
        return _compression_to_n5(config.get("compressor_config"))
    codec_id = config["id"]
    if codec_id == "zlib":
        return {"type": "gzip", "level": config["level"], "useZlib": True}
    if codec_id == "gzip":
        return {"type": "gzip", "level": config["level"], "useZlib": False}
    if codec_id == "bz2":
        return {"type": "bzip2", "blockSize": config["level"]}
    if codec_id == "blosc":
        return {"type": "blosc", **{k: config[k] for k in ("cname", "clevel", "shuffle", "blocksize")}}
    # xz, lz4, zstd ...: N5 names them as numcodecs does, with the same parameters
    return {"type": codec_id, **{k: v for k, v in config.items() if k != "id"}}


def _compression_to_zarr(config: dict[str, Any]) -> dict[str, Any] | None:
    kind = config.get("type")
    rest = {k: v for k, v in config.items() if k != "type"}
    if kind == "raw":
        return None
    if kind == "gzip":
        return {"id": "zlib" if config.get("useZlib") else "gzip", "level": config.get("level", -1)}
    if kind == "bzip2":
        return {"id": "bz2", "level": config.get("blockSize", 9)}
    if kind == "xz":
        return {"id": "lzma", "format": 1, "check": -1, "preset": config.get("preset", 6), "filters": None}
    return {"id": kind, **rest}


def array_to_n5(document: dict[str, Any], *, top_level: bool, where: str) -> dict[str, Any]:
    """``.zarray`` -> N5 dataset attributes.

    Raises
    ------
    MetadataError
        Something N5 cannot express: a fill value other than 0/null, order F,
        filters, or a dtype N5 lacks.
    """
    dtype = np.dtype(document["dtype"])
    if dtype.name not in _N5_DTYPES:
        raise MetadataError(f"{where}: dtype {dtype} has no N5 dataType ({', '.join(sorted(_N5_DTYPES))})")
    if document.get("fill_value") not in (0, None):
        raise MetadataError(f"{where}: N5 has no fill value other than 0, got {document['fill_value']!r}")
    if document.get("order", "C") != "C":
        raise MetadataError(f"{where}: N5 stores C order only, got order {document['order']!r}")
    if document.get("filters"):
        raise MetadataError(f"{where}: N5 has no filters, got {document['filters']!r}")
    n5 = {
        "dimensions": list(document["shape"])[::-1],
        "blockSize": list(document["chunks"])[::-1],
        "dataType": dtype.name,
        "compression": _compression_to_n5(document.get("compressor")),
    }
    if top_level:
        n5["n5"] = N5_FORMAT
    return n5


def array_to_zarr(n5: dict[str, Any]) -> dict[str, Any]:
    """N5 dataset attributes -> ``.zarray`` (compressor wrapped in ``n5_wrapper``)."""
    dtype = np.dtype(n5["dataType"]).str
    chunks = list(n5["blockSize"])[::-1]
    return {
        "zarr_format": 2,
        "shape": list(n5["dimensions"])[::-1],
        "chunks": chunks,
        "dtype": dtype,
        "compressor": {
            "id": N5ChunkCodec.codec_id,
            "compressor_config": _compression_to_zarr(n5.get("compression", {"type": "raw"})),
            "dtype": dtype,
            "chunk_shape": chunks,
        },
        "fill_value": 0,
        "order": "C",
        "filters": None,
        "dimension_separator": ".",
    }


def _split(key: str) -> tuple[str, str]:
    head, _, last = key.rpartition("/")
    return head, last


def _is_chunk_name(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 0 and all(p.isdigit() for p in parts) and name != ""


def _n5_chunk_key(key: str) -> str:
    """``a/1.2`` -> ``a/2/1`` (N5 lists the fastest dimension first)."""
    head, last = _split(key)
    inverted = "/".join(last.split(".")[::-1])
    return f"{head}/{inverted}" if head else inverted


def _attrs_key(head: str) -> str:
    return f"{head}/{N5_ATTRS}" if head else N5_ATTRS


class N5Store(WrapperStore):
    """An N5 container seen as a Zarr v2 hierarchy (zarr-python 2 ``N5Store`` / ``N5FSStore``).

    Parameters
    ----------
    store : Store
        Where the N5 container lives (a `LocalStore` for an
        ``.n5`` directory, or any remote store: zarr-python 2's ``N5FSStore``).
    """

    #: ``.zarray`` reads back translated (compressor wrapped in ``n5_wrapper``):
    #: `azarr.create` uses the document read back, as zarr-python 2 reloads it.
    rewrites_metadata = True

    wrapper_name = "n5"

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        # Keys are translated in _get/_set; the inner store's conditional operations would
        # bypass that, so this wrapper offers none (writes through it are plain replaces).
        self.supports_conditional_writes = False
        self.supports_conditional_reads = False

    def __repr__(self) -> str:
        return f"N5Store({self.inner!r})"

    async def _load(self, head: str) -> dict[str, Any]:
        return await self._load_present(head) or {}

    async def _load_present(self, head: str) -> dict[str, Any] | None:
        """``head``'s ``attributes.json``, or None if there is none."""
        raw = await self.inner.get(_attrs_key(head))
        if raw is None:
            return None
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise MetadataError(f"{_attrs_key(head)!r} in {self.url} is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise MetadataError(f"{_attrs_key(head)!r} in {self.url} is not a JSON object")
        return value

    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        head, last = _split(key)
        if last in _ZARR_DOCS:
            document = self._to_zarr(last, await self._load_present(head))
            if document is None:
                return None
            data = encode_json(document)
            return data if byte_range is None else data[byte_range.slice()]
        if _is_chunk_name(last):
            return await self.inner.get(_n5_chunk_key(key), byte_range)
        return await self.inner.get(key, byte_range)

    @staticmethod
    def _to_zarr(name: str, attrs: dict[str, Any] | None) -> dict[str, Any] | None:
        if attrs is None:
            return None
        is_array = "dimensions" in attrs
        if name == ZARRAY:
            return array_to_zarr(attrs) if is_array else None
        if name == ZGROUP:
            # Every directory with an attributes.json that describes no dataset is a group
            # (N5 spec; its "n5" version key is only required at the root), as zarr-python 2 reads it.
            return None if is_array else {"zarr_format": 2}
        user = {k: v for k, v in attrs.items() if k not in N5_KEYWORDS}
        return user or None

    async def _set(self, key: str, value: bytes) -> None:
        head, last = _split(key)
        if last not in _ZARR_DOCS:
            target = _n5_chunk_key(key) if _is_chunk_name(last) else key
            await self.inner.set(target, value)
            return
        attrs = await self._load(head)
        document = json.loads(value)
        if last == ZGROUP:
            attrs["n5"] = N5_FORMAT  # zarr-python 2 marks every group, not only the root
        elif last == ZARRAY:
            attrs.update(array_to_n5(document, top_level=not head, where=repr(key)))
        else:
            attrs = {k: v for k, v in attrs.items() if k in N5_KEYWORDS}
            clashes = sorted(set(document) & set(N5_KEYWORDS))
            if clashes:
                raise MetadataError(f"{key!r}: attributes {clashes} are reserved N5 keywords")
            attrs.update(document)
        await self.inner.set(_attrs_key(head), json.dumps(attrs, indent=4, sort_keys=True).encode())

    async def _delete(self, key: str) -> None:
        head, last = _split(key)
        if last in _ZARR_DOCS:
            attrs = await self._load(head)
            if last == ZATTRS:
                kept = {k: v for k, v in attrs.items() if k in N5_KEYWORDS}
                await self.inner.set(_attrs_key(head), json.dumps(kept, indent=4, sort_keys=True).encode())
            elif attrs:
                await self.inner.delete(_attrs_key(head))
            return
        await self.inner.delete(_n5_chunk_key(key) if _is_chunk_name(last) else key)

    async def _exists(self, key: str) -> bool:
        head, last = _split(key)
        if last in _ZARR_DOCS:
            return self._to_zarr(last, await self._load_present(head)) is not None
        return await self.inner.exists(_n5_chunk_key(key) if _is_chunk_name(last) else key)

    async def _delete_prefix(self, prefix: str) -> None:
        await self.inner.delete_prefix(prefix)

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        keys = [k async for k in self.inner.list_prefix(prefix)]
        heads = {k[: -len(N5_ATTRS)].rstrip("/") for k in keys if _split(k)[1] == N5_ATTRS}
        ranks: dict[str, int] = {}
        for head in sorted(heads):
            attrs = await self._load(head)
            for name in _ZARR_DOCS:
                if self._to_zarr(name, attrs) is not None:
                    yield f"{head}/{name}" if head else name
            if "dimensions" in attrs:
                ranks[head] = len(attrs["dimensions"])
        for key in keys:
            if _split(key)[1] == N5_ATTRS:
                continue
            chunk = self._zarr_chunk_key(key, ranks)
            yield key if chunk is None else chunk

    @staticmethod
    def _zarr_chunk_key(key: str, ranks: dict[str, int]) -> str | None:
        """``a/2/1`` -> ``a/1.2`` when ``a`` is a dataset of rank 2, else None."""
        parts = key.split("/")
        for head_len in range(len(parts) - 1, -1, -1):
            head = "/".join(parts[:head_len])
            if head in ranks:
                coords = parts[head_len:]
                if len(coords) == ranks[head] and all(c.isdigit() for c in coords):
                    name = ".".join(coords[::-1])
                    return f"{head}/{name}" if head else name
                return None
        return None

    async def _list_dir(self, prefix: str) -> AsyncIterator[str]:
        head = prefix.rstrip("/")
        names = [n async for n in self.inner.list_dir(prefix)]
        if N5_ATTRS in names:
            attrs = await self._load(head)
            for name in _ZARR_DOCS:
                if self._to_zarr(name, attrs) is not None:
                    yield name
        for name in names:
            if name != N5_ATTRS:
                yield name
