"""Partial chunk reads for Blosc: fetch and decode only the blocks a selection needs.

zarr-python 2's ``partial_decompress=True`` (``zarr.core.Array._chunk_getitems``
with ``zarr.util.PartialReadBuffer``): a Blosc chunk is a 16-byte header, a
table of block starts, then independently compressed blocks of ``blocksize``
decoded bytes each. A read touching part of a chunk can so fetch the header and
table with byte-range reads, then only the compressed blocks holding the
selected elements (ranges merged when adjacent), and decode only those.

numcodecs 0.16 dropped ``blosc.decompress_partial``; each wanted block is
decoded here on its own, through numcodecs' ordinary ``decompress``, as a
one-block Blosc buffer: the original header with its sizes rewritten and a
one-entry start table. A last, short block is a "leftover" block, which Blosc
never splits into per-byte streams; it is rewritten as a full block of its own
size with the "don't split" flag set, which Blosc decodes the same way.
Memcpy'd chunks (stored uncompressed behind the header) need no decoding: only
the selected bytes are read.

Anything else -- other compressors, filters, ``order="F"``, object dtypes,
structured field reads, complete chunks, small chunks, one-block chunks,
selections needing most of a chunk -- is read whole, as without the option.
All reads go through `StoreIO` (budget, retries,
timeouts). The parts of one chunk are separate requests: a chunk replaced
between them can mix two versions, and is then most likely reported as a
`CodecError` (Blosc has no checksum), as with zarr-python 2.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from azarr.codecs import ChunkCodec  # first: it imports numcodecs with its import warnings silenced
from azarr.errors import CodecError
from azarr.indexing import ChunkProjection, Fields
from azarr.scheduler import StoreIO
from azarr.storage import ByteRange

from numcodecs.blosc import Blosc, decompress  # isort: skip

__all__ = ["PartialChunk", "PartialReader"]

#: Blosc 1 header: version, versionlz, flags, typesize, then little-endian int32
#: nbytes (decoded), blocksize (decoded bytes per block), cbytes (whole buffer).
_HEADER = 16
_MEMCPYED = 0x02
_DONT_SPLIT = 0x10
#: Chunks smaller than this (decoded bytes) are read whole: one request beats
#: the two or three a partial read makes.
MIN_CHUNK_BYTES = 128 << 10
#: Block starts a first read of the header fetches, assuming blocks of at least
#: this many decoded bytes (Blosc's automatic block sizes are larger); more
#: blocks cost a second read for the rest of the table.
_GUESS_BLOCK_BYTES = 16 << 10
#: The first read takes at least this many bytes (costing no more time than a
#: header's 16): a well-compressed chunk comes whole with it, and its first
#: bytes serve the parts they hold.
_MIN_PREFIX = 4096
#: Ranges closer than this (bytes) are fetched as one: a request costs more
#: than that many bytes of transfer.
_MERGE_GAP = 16 << 10
#: A partial read that would fetch more than this fraction of a chunk's bytes
#: reads it whole instead.
_MAX_FRACTION = 0.5

Fetch = Callable[[str], Awaitable[bytes | None]]


def is_partial_blosc(codec: ChunkCodec) -> bool:
    """Whether chunks of ``codec`` can be read in part: Blosc alone (no filters, and for Zarr v3
    no checksum or other codec after it, no byte swap), C order, fixed-size items."""
    return (
        isinstance(codec.compressor, Blosc)
        and codec.compressor_yields_chunk
        and codec.order == "C"
        and codec.nbytes >= MIN_CHUNK_BYTES
    )


def element_spans(chunk_selection: tuple[Any, ...], chunks: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """The C-order element runs ``[start, stop)`` a chunk selection touches, shape ``(k, 2)``, sorted.

    Each dimension's flat offsets are a zero-stride, chunk-shaped view indexed with
    the selection itself, so slices, steps, integers, orthogonal (``np.ix_``-shaped)
    and coordinate index arrays all select exactly what they select from the chunk.
    """
    flat: np.ndarray[Any, Any] = np.zeros((), dtype=np.int64)
    stride = 1
    for dim in range(len(chunks) - 1, -1, -1):
        n = chunks[dim]
        offsets = (np.arange(n, dtype=np.int64) * stride).reshape(
            [n if d == dim else 1 for d in range(len(chunks))]
        )
        flat = flat + np.broadcast_to(offsets, chunks)[chunk_selection]
        stride *= n
    flat = flat.reshape(-1)
    if flat.size > 1 and not bool(np.all(flat[1:] > flat[:-1])):
        flat = np.unique(flat)
    if flat.size == 0:
        return np.empty((0, 2), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(flat) != 1) + 1
    starts = flat[np.concatenate(([0], breaks))]
    stops = flat[np.concatenate((breaks - 1, [flat.size - 1]))] + 1
    return np.stack([starts, stops], axis=1)


def merge_ranges(ranges: np.ndarray[Any, Any], gap: int = _MERGE_GAP) -> list[tuple[int, int]]:
    """Sorted ``[start, stop)`` byte ranges joined where less than ``gap`` bytes apart."""
    merged: list[tuple[int, int]] = []
    for start, stop in sorted((int(a), int(b)) for a, b in ranges):
        if merged and start - merged[-1][1] < gap:
            merged[-1] = (merged[-1][0], max(merged[-1][1], stop))
        else:
            merged.append((start, stop))
    return merged


@dataclass(frozen=True, slots=True)
class BloscHeader:
    """The 16-byte header of a Blosc 1 buffer (c-blosc's ``blosc_cbuffer_sizes``/``metainfo``)."""

    raw: bytes
    flags: int
    nbytes: int
    blocksize: int
    cbytes: int

    @classmethod
    def parse(cls, data: bytes, key: str, expected_nbytes: int) -> BloscHeader:
        """Read and check the header at the start of ``data``.

        Raises
        ------
        CodecError
            ``data`` is shorter than a header, or its sizes cannot belong to this chunk.
        """
        if len(data) < _HEADER:
            raise CodecError(f"cannot decode chunk {key!r}: {len(data)} bytes is shorter than a Blosc header")
        nbytes, blocksize, cbytes = (int.from_bytes(data[i : i + 4], "little") for i in (4, 8, 12))
        header = cls(bytes(data[:_HEADER]), data[2], nbytes, blocksize, cbytes)
        if nbytes != expected_nbytes or blocksize < 1 or data[3] < 1 or cbytes < _HEADER + header.table_bytes:
            raise CodecError(
                f"cannot decode chunk {key!r}: its Blosc header (nbytes={nbytes}, blocksize={blocksize}, "
                f"typesize={data[3]}, cbytes={cbytes}) does not fit a chunk of {expected_nbytes} bytes"
            )
        if header.memcpyed and cbytes < _HEADER + nbytes:
            raise CodecError(
                f"cannot decode chunk {key!r}: memcpy'd Blosc chunk has cbytes={cbytes} < {16 + nbytes}"
            )
        return header

    @property
    def memcpyed(self) -> bool:
        """The data follows the header uncompressed (no block table)."""
        return bool(self.flags & _MEMCPYED)

    @property
    def nblocks(self) -> int:
        return -(-self.nbytes // self.blocksize)

    @property
    def table_bytes(self) -> int:
        """Bytes of the block-start table after the header (none when memcpy'd)."""
        return 0 if self.memcpyed else 4 * self.nblocks

    def one_block(self, block: int, payload: bytes) -> bytes:
        """A Blosc buffer holding only compressed ``block`` (its bytes ``payload``)."""
        size = min(self.blocksize, self.nbytes - block * self.blocksize)
        flags = self.flags | (_DONT_SPLIT if size < self.blocksize else 0)  # see the module docstring
        head = self.raw[:2] + bytes((flags, self.raw[3]))
        sizes = (
            size,
            size if size < self.blocksize else self.blocksize,
            _HEADER + 4 + len(payload),
            _HEADER + 4,
        )
        return head + b"".join(v.to_bytes(4, "little") for v in sizes) + payload


@dataclass(slots=True)
class PartialChunk:
    """The fetched parts of one chunk, decoded and scattered in the codec pool.

    ``raw`` pieces are decoded bytes already (memcpy'd chunks): ``(offset, bytes)``;
    ``blocks`` are compressed Blosc blocks: ``(block index, bytes)``.
    """

    header: BloscHeader
    codec: ChunkCodec
    raw: list[tuple[int, bytes]]
    blocks: list[tuple[int, bytes]]

    def __len__(self) -> int:
        """Bytes of the parts used, header included (for progress; the first read may have fetched more)."""
        return _HEADER + sum(len(p) for _, p in self.raw) + sum(len(p) for _, p in self.blocks)

    def scatter(self, key: str, out: np.ndarray[Any, Any], projection: ChunkProjection) -> None:
        """``out[out_selection] = chunk[chunk_selection]`` from the fetched parts only (codec pool).

        Raises
        ------
        CodecError
            A block failed to decode (the message names the key and block).
        """
        codec, header = self.codec, self.header
        buffer = np.empty(codec.nbytes, dtype=np.uint8)  # only the fetched parts are ever read back
        for offset, piece in self.raw:
            buffer[offset : offset + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
        for block, payload in self.blocks:
            start = block * header.blocksize
            target = buffer[start : min(start + header.blocksize, header.nbytes)]
            try:
                decompress(header.one_block(block, payload), target)
            except (RuntimeError, ValueError) as exc:
                raise CodecError(
                    f"cannot decode chunk {key!r}: Blosc block {block} is corrupt ({exc})"
                ) from exc
        chunk = buffer.view(codec.dtype).reshape(codec.chunks)
        out[projection.out_selection] = chunk[projection.chunk_selection]


class PartialReader:
    """Plans and runs partial reads of one array's Blosc chunks through its ``StoreIO``.

    Parameters
    ----------
    io : StoreIO
        The managed path to the store.
    codec : ChunkCodec
        The array's codec; see `is_partial_blosc`.
    """

    def __init__(self, io: StoreIO, codec: ChunkCodec) -> None:
        self.io = io
        self.codec = codec

    async def fetch(
        self, key: str, projection: ChunkProjection, fields: Fields, whole: Fetch
    ) -> bytes | PartialChunk | None:
        """Read what ``projection`` needs of chunk ``key``.

        Returns
        -------
        PartialChunk, bytes or None
            The fetched blocks; or the whole chunk's bytes (read with ``whole``)
            when a partial read would not pay; None if the chunk is not stored.

        Raises
        ------
        CodecError
            The chunk's header or block table is short or corrupt, or a part is missing.
        StoreError
            From the store, after retries.
        """
        if projection.is_complete_chunk or fields is not None:
            return await whole(key)
        codec = self.codec
        # How many elements, counted on a zero-stride view (no copy for slices): planning a
        # selection of most of the chunk would cost more than it could save.
        count = np.broadcast_to(np.empty((), dtype=np.bool_), codec.chunks)[projection.chunk_selection].size
        if count == 0 or count > _MAX_FRACTION * codec.size:
            return await whole(key)
        spans = element_spans(projection.chunk_selection, codec.chunks) * codec.dtype.itemsize
        guess = max(_HEADER + 4 * -(-codec.nbytes // _GUESS_BLOCK_BYTES), _MIN_PREFIX)
        prefix = await self.io.get(key, ByteRange(0, guess))
        if prefix is None:
            return None
        header = BloscHeader.parse(prefix, key, codec.nbytes)
        if len(prefix) >= header.cbytes:
            return prefix[: header.cbytes]  # the whole chunk came with the header
        if len(prefix) < guess:
            raise CodecError(
                f"cannot decode chunk {key!r}: {len(prefix)} bytes stored, its Blosc header says {header.cbytes}"
            )
        if header.memcpyed:
            ranges = merge_ranges(spans + _HEADER)
            if sum(b - a for a, b in ranges) > _MAX_FRACTION * header.nbytes:
                return await whole(key)  # scattered elements: the merged ranges cover most of it
            parts = await self._get_all(key, ranges, prefix)
            if parts is None:
                return None
            pieces = [(a - _HEADER, p) for (a, _), p in zip(ranges, parts, strict=True)]
            return PartialChunk(header, codec, pieces, [])
        if header.nblocks == 1:
            return await whole(key)
        starts = await self._block_starts(key, header, prefix)
        return await self._fetch_blocks(key, header, starts, spans, whole, prefix)

    async def _block_starts(self, key: str, header: BloscHeader, prefix: bytes) -> np.ndarray[Any, Any]:
        end = _HEADER + header.table_bytes
        table = prefix[_HEADER:end]
        if len(table) < header.table_bytes:
            rest = await self.io.get(key, ByteRange(_HEADER + len(table), end))
            table += rest or b""
        if len(table) < header.table_bytes:
            raise CodecError(f"cannot decode chunk {key!r}: its Blosc block table is truncated")
        starts = np.frombuffer(table, dtype="<i4").astype(np.int64)
        if starts.min() < end or starts.max() >= header.cbytes:
            raise CodecError(f"cannot decode chunk {key!r}: its Blosc block table points outside the chunk")
        return starts

    async def _fetch_blocks(
        self,
        key: str,
        header: BloscHeader,
        starts: np.ndarray[Any, Any],
        spans: np.ndarray[Any, Any],
        whole: Fetch,
        prefix: bytes,
    ) -> bytes | PartialChunk | None:
        # Blocks a span touches: a +1/-1 difference array over block indices.
        marks = np.zeros(header.nblocks + 1, dtype=np.int64)
        np.add.at(marks, spans[:, 0] // header.blocksize, 1)
        np.add.at(marks, (spans[:, 1] - 1) // header.blocksize + 1, -1)
        wanted = np.flatnonzero(np.cumsum(marks[:-1]) > 0)
        # Threads may store blocks out of order: a block ends where the next-higher start begins.
        ordered = np.unique(np.append(starts, header.cbytes))
        ends = ordered[np.searchsorted(ordered, starts, side="right")]
        extents = np.stack([starts[wanted], ends[wanted]], axis=1)
        if int((extents[:, 1] - extents[:, 0]).sum()) > _MAX_FRACTION * header.cbytes:
            return await whole(key)
        ranges = merge_ranges(extents)
        parts = await self._get_all(key, ranges, prefix)
        if parts is None:
            return None
        bases = np.array([a for a, _ in ranges])
        blocks = []
        for block, start, end in zip(
            wanted.tolist(), starts[wanted].tolist(), ends[wanted].tolist(), strict=True
        ):
            i = int(np.searchsorted(bases, start, side="right")) - 1  # the merged range holding it
            base = ranges[i][0]
            blocks.append((block, parts[i][start - base : end - base]))
        return PartialChunk(header, self.codec, [], blocks)

    async def _get_all(self, key: str, ranges: list[tuple[int, int]], prefix: bytes) -> list[bytes] | None:
        """The byte ranges of ``key``, concurrently (those inside ``prefix``, its first bytes,
        from there); None if the chunk vanished meanwhile."""

        async def get(a: int, b: int) -> bytes | None:
            return prefix[a:b] if b <= len(prefix) else await self.io.get(key, ByteRange(a, b))

        parts = await asyncio.gather(*(get(a, b) for a, b in ranges))
        if any(p is None for p in parts):
            return None
        for (a, b), part in zip(ranges, parts, strict=True):
            if part is not None and len(part) != b - a:
                raise CodecError(
                    f"cannot decode chunk {key!r}: bytes [{a}, {b}) of it are missing (stored value too short)"
                )
        return [p for p in parts if p is not None]
