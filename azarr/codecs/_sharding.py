"""The Zarr v3 ``sharding_indexed`` codec's format: its configuration, the shard index, shard bytes.

A shard is one stored object holding a grid of *inner chunks* (the spec's "Sharding
codec" section; zarr-python 3's ``ShardingCodec``, TensorStore's
``zarr3_sharding_indexed``). Each inner chunk is encoded by the inner ``codecs`` (an
ordinary `CodecChain`) and the encoded chunks are concatenated; the *index* says where
each one is: ``(offset, nbytes)`` per inner chunk as little- (or big-) endian ``uint64``,
in C order of the inner chunk grid, both ``2^64-1`` for an inner chunk that is not
stored, encoded by ``index_codecs`` (``bytes``, optionally ``crc32c``) and placed at the
``start`` or the ``end`` of the shard.

This module is the format only -- parsing the configuration, encoding and checking an
index, assembling a shard -- with no I/O. Reading and writing shards (index cache,
coalesced ranged reads, the conditional read-modify-write) is `azarr.pipeline._shards`'
job; the chunk pipeline decodes and encodes inner chunks with the inner chain as it does
any chunk.

Decisions:

* **Only ``codecs: [sharding_indexed]``.** The sharding codec must be the array's one
  codec (what zarr-python 3 and TensorStore write); codecs around it, and nested sharding
  (a ``sharding_indexed`` among the inner codecs), are refused by name.
* **Inner chunks are written in C order** of the inner grid (TensorStore's order; zarr-python
  3.4 writes Morton order by default). Readers find chunks through the index, so any order
  reads; C order makes a row-major slab of a shard one contiguous run.
* **Indexes are checked before they are used**: size, checksum, half-empty entries, an
  inner chunk claiming more bytes than its codecs can produce (so no read or buffer is
  sized from a hostile number), entries pointing into the index, past the shard's end
  (when its size is known) or over each other: `ShardIndexError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import crc32c
import numpy as np

from azarr import config as azarr_config
from azarr.codecs._chain import CodecChain
from azarr.errors import MetadataError, ShardIndexError
from azarr.storage import ByteRange

__all__ = [
    "MISSING",
    "SHARDING_CODEC",
    "ShardIndex",
    "ShardingSpec",
    "default_index_codecs",
    "parse_sharding",
]

#: The sharding codec's name (Zarr v3 spec, "Sharding codec").
SHARDING_CODEC = "sharding_indexed"
#: An index entry's offset and nbytes for an inner chunk that is not stored.
MISSING = 2**64 - 1
_ENTRY_BYTES = 16
_CHECKSUM_BYTES = 4


def default_index_codecs() -> list[dict[str, Any]]:
    """zarr-python 3's and TensorStore's default ``index_codecs``: little-endian ``bytes`` + ``crc32c``."""
    return [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]


@dataclass(frozen=True)
class ShardingSpec:
    """A parsed ``sharding_indexed`` configuration.

    Attributes
    ----------
    chunk_shape : tuple of int
        The inner chunks' shape (each divides the shard shape).
    codecs : tuple of dict
        The inner ``codecs`` list as given (v3 entries).
    chain : CodecChain
        The inner chunks' chain (what `ChunkCodec` runs on them).
    index_codecs : tuple of dict
        The ``index_codecs`` list as given.
    index_location : {"start", "end"}
    index_endian : {"little", "big"}
        Byte order of the index entries (the index ``bytes`` codec's ``endian``).
    index_checksum : bool
        Whether a ``crc32c`` of the entries follows them.
    """

    chunk_shape: tuple[int, ...]
    codecs: tuple[dict[str, Any], ...]
    chain: CodecChain
    index_codecs: tuple[dict[str, Any], ...]
    index_location: Literal["start", "end"] = "end"
    index_endian: Literal["little", "big"] = "little"
    index_checksum: bool = True
    _dtype: np.dtype[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_dtype", np.dtype("<u8" if self.index_endian == "little" else ">u8"))

    def chunks_per_shard(self, shard_shape: Sequence[int]) -> tuple[int, ...]:
        """Inner chunks along each dimension of a shard of ``shard_shape``."""
        return tuple(s // c for s, c in zip(shard_shape, self.chunk_shape, strict=True))

    def index_nbytes(self, count: int) -> int:
        """Bytes of the encoded index of a shard of ``count`` inner chunks."""
        return count * _ENTRY_BYTES + (_CHECKSUM_BYTES if self.index_checksum else 0)

    def index_range(self, count: int) -> ByteRange:
        """Where the index of a shard of ``count`` inner chunks is: its first bytes, or a
        suffix range (``Range: bytes=-N``) for ``index_location="end"``."""
        size = self.index_nbytes(count)
        return ByteRange(0, size) if self.index_location == "start" else ByteRange(-size)

    def to_json(self) -> dict[str, Any]:
        """The codec entry, as zarr-python 3 writes it."""
        return {
            "name": SHARDING_CODEC,
            "configuration": {
                "chunk_shape": list(self.chunk_shape),
                "codecs": [dict(c) for c in self.codecs],
                "index_codecs": [dict(c) for c in self.index_codecs],
                "index_location": self.index_location,
            },
        }

    # ---------------------------------------------------------------- the index
    def decode_index(self, data: bytes | memoryview, count: int, *, key: str) -> ShardIndex:
        """The index of a shard of ``count`` inner chunks from its encoded bytes (not yet
        checked against the shard: `ShardIndex.check`).

        Raises
        ------
        ShardIndexError
            The wrong size, or a checksum that does not match.
        """
        view = memoryview(data).cast("B")
        expected = self.index_nbytes(count)
        if len(view) != expected:
            raise ShardIndexError(
                f"shard {key!r}: its index is {len(view)} bytes, not the {expected} bytes of "
                f"{count} inner chunks{' and a crc32c' if self.index_checksum else ''} "
                "(a shard shorter than its index, or another layout)"
            )
        payload = view
        if self.index_checksum:
            payload = view[:-_CHECKSUM_BYTES]
            stored = int.from_bytes(view[-_CHECKSUM_BYTES:], "little")
            computed = crc32c.crc32c(payload)
            if stored != computed:
                raise ShardIndexError(
                    f"shard {key!r}: index checksum mismatch (stored {stored:#010x}, computed "
                    f"{computed:#010x}): the shard is corrupt"
                )
        entries = np.frombuffer(payload, dtype=self._dtype).reshape(count, 2).astype(np.uint64)
        return ShardIndex(entries)

    def encode_index(self, index: ShardIndex) -> bytes:
        """The index's stored bytes (entries in this spec's byte order, then the crc32c)."""
        payload = index.entries.astype(self._dtype, copy=False).tobytes()
        if self.index_checksum:
            payload += crc32c.crc32c(payload).to_bytes(_CHECKSUM_BYTES, "little")
        return payload

    def index_of_shard(self, shard: bytes | memoryview, count: int, *, key: str, bound: int) -> ShardIndex:
        """The checked index of a whole shard's bytes (wherever this spec keeps it).

        Raises
        ------
        ShardIndexError
            The shard is shorter than its index, or the index is corrupt or hostile
            (`ShardIndex.check`, against the shard's known size).
        """
        view = memoryview(shard).cast("B")
        size = self.index_nbytes(count)
        if len(view) < size:
            raise ShardIndexError(f"shard {key!r} is {len(view)} bytes, shorter than its {size}-byte index")
        if self.index_location == "start":
            index = self.decode_index(view[:size], count, key=key)
            index.check(key=key, bound=bound, data_start=size, data_end=len(view))
        else:
            index = self.decode_index(view[len(view) - size :], count, key=key)
            index.check(key=key, bound=bound, data_start=0, data_end=len(view) - size)
        return index

    def assemble(self, parts: Sequence[bytes | memoryview | None]) -> bytes | None:
        """A shard's bytes from its encoded inner chunks (one per inner chunk, in C order of the
        inner grid; None or empty for those not stored); None when none is stored.

        The chunks are laid out in the order given, after the index or before it.
        """
        count = len(parts)
        entries = np.full((count, 2), MISSING, dtype=np.uint64)
        start = self.index_nbytes(count) if self.index_location == "start" else 0
        offset = start
        chunks: list[bytes | memoryview] = []
        for i, part in enumerate(parts):
            if part is None:
                continue
            n = len(part) if isinstance(part, bytes) else memoryview(part).nbytes
            if n == 0:
                continue
            entries[i, 0] = offset
            entries[i, 1] = n
            offset += n
            chunks.append(part)
        if not chunks:
            return None
        index = self.encode_index(ShardIndex(entries))
        if self.index_location == "start":
            return b"".join([index, *chunks])
        chunks.append(index)
        return b"".join(chunks)


class ShardIndex:
    """One shard's index: ``(offset, nbytes)`` per inner chunk, C order of the inner grid.

    Attributes
    ----------
    entries : numpy.ndarray
        ``uint64`` of shape ``(count, 2)``; both ``MISSING`` for an inner chunk not stored.
    """

    __slots__ = ("_spans", "entries")

    def __init__(self, entries: np.ndarray[Any, Any]) -> None:
        self.entries = entries
        self._spans: list[tuple[int, int] | None] | None = None

    @property
    def nbytes(self) -> int:
        """Memory the index holds (what a cache of indexes counts)."""
        return int(self.entries.nbytes) + 64

    @property
    def count(self) -> int:
        """Inner chunks of the shard."""
        return int(self.entries.shape[0])

    def is_empty(self) -> bool:
        """Whether no inner chunk is stored."""
        return bool((self.entries[:, 1] == MISSING).all())

    def range_of(self, local: int) -> tuple[int, int] | None:
        """``(start, end)`` of the inner chunk numbered ``local`` (C order), None if not stored
        (or stored as zero bytes, which zarr-python 3 reads as not stored too)."""
        return self.spans()[local]

    def spans(self) -> list[tuple[int, int] | None]:
        """`range_of` of every inner chunk, in C order: one list of Python ints, made on first
        use (one ``tolist`` of the entries) and kept, as a cached index serves many reads
        (indexing the NumPy entries per inner chunk cost ~5 µs of event-loop time each)."""
        spans = self._spans
        if spans is None:
            spans = [None if n == MISSING or n == 0 else (o, o + n) for o, n in self.entries.tolist()]
            self._spans = spans
        return spans

    def check(self, *, key: str, bound: int, data_start: int = 0, data_end: int | None = None) -> None:
        """Refuse an index no well-formed shard has.

        Parameters
        ----------
        key : str
            The shard's key, for messages.
        bound : int
            Most bytes one stored inner chunk can hold (`ChunkCodec.stored_bound`).
        data_start : int
            First byte inner chunks may use (the index's size when it is at the start).
        data_end : int, optional
            One past the last byte they may use (the shard's size, less an index at the
            end), when the shard's size is known.

        Raises
        ------
        ShardIndexError
            An entry with one of offset and nbytes empty; an inner chunk larger than
            ``bound``, starting before ``data_start``, ending after ``data_end`` (or past
            2^64), or overlapping another one.
        """
        offsets, nbytes = self.entries[:, 0], self.entries[:, 1]
        empty_offset, empty_nbytes = offsets == MISSING, nbytes == MISSING
        half = np.flatnonzero(empty_offset != empty_nbytes)
        if half.size:
            raise ShardIndexError(
                f"shard {key!r}: index entry {int(half[0])} has only one of offset and nbytes set "
                "to 2^64-1 (the empty marker needs both)"
            )
        stored = np.flatnonzero(~empty_nbytes & (nbytes > 0))
        if not stored.size:
            return
        lengths = nbytes[stored]
        big = np.flatnonzero(lengths > np.uint64(bound))
        if big.size:
            i = int(stored[big[0]])
            raise ShardIndexError(
                f"shard {key!r}: inner chunk {i} claims {int(nbytes[i])} bytes, more than its codecs can "
                f"produce ({bound} bytes)"
            )
        starts = offsets[stored]
        # offset + nbytes must not wrap past 2^64 (lengths are bounded above, offsets are not).
        wraps = np.flatnonzero(starts > np.uint64(MISSING) - lengths)
        if wraps.size:
            i = int(stored[wraps[0]])
            raise ShardIndexError(
                f"shard {key!r}: inner chunk {i} at offset {int(offsets[i])} ends past 2^64"
            )
        ends = starts + lengths
        early = np.flatnonzero(starts < np.uint64(data_start))
        if early.size:
            i = int(stored[early[0]])
            raise ShardIndexError(
                f"shard {key!r}: inner chunk {i} at offset {int(offsets[i])} lies inside the index "
                f"(data starts at byte {data_start})"
            )
        if data_end is not None:
            late = np.flatnonzero(ends > np.uint64(data_end))
            if late.size:
                i = int(stored[late[0]])
                raise ShardIndexError(
                    f"shard {key!r}: inner chunk {i} at bytes [{int(offsets[i])}, {int(ends[late[0]])}) "
                    f"reaches past the shard's data, which ends at byte {data_end}"
                )
        order = np.argsort(starts, kind="stable")
        overlap = np.flatnonzero(starts[order][1:] < ends[order][:-1])
        if overlap.size:
            first, second = int(stored[order[overlap[0]]]), int(stored[order[overlap[0] + 1]])
            raise ShardIndexError(
                f"shard {key!r}: inner chunks {first} and {second} overlap (bytes from offset "
                f"{int(offsets[second])}); a shard's inner chunks are disjoint"
            )


# ---------------------------------------------------------------------- parsing
def _error(where: str, field_name: str, problem: str) -> MetadataError:
    return MetadataError(f"{where}: {field_name!r} {problem}")


def parse_sharding(
    entry: Any,
    *,
    dtype: np.dtype[Any],
    shard_shape: tuple[int, ...],
    where: str,
    field_name: str = "codecs[0]",
) -> ShardingSpec:
    """Validate a ``sharding_indexed`` codec entry of an array with chunks (shards) of ``shard_shape``.

    ``index_codecs`` and ``index_location`` default to zarr-python 3's (``bytes``
    little-endian + ``crc32c``, ``"end"``) when absent.

    Raises
    ------
    MetadataError
        Not an object with a configuration; ``chunk_shape`` not one positive integer per
        dimension dividing the shard shape; inner ``codecs`` invalid (as `parse_v3_codecs`
        says) or holding another ``sharding_indexed`` (nested sharding is not supported);
        ``index_codecs`` other than ``bytes`` with an optional ``crc32c`` after it;
        ``index_location`` other than ``"start"``/``"end"``; an unknown configuration key;
        more than 2^31 inner chunks per shard, or an index larger than ``azarr.config``
        ``max_chunk_bytes``.
    """
    from azarr.codecs._v3 import codec_name, parse_v3_codecs  # _v3 imports this module

    if not isinstance(entry, Mapping) or not isinstance(entry.get("configuration"), Mapping):
        raise _error(where, field_name, f"(sharding_indexed) needs a configuration object, got {entry!r}")
    extra = set(entry) - {"name", "configuration", "must_understand"}
    if extra:
        raise _error(where, field_name, f"has unknown member(s) {sorted(extra)}")
    config = entry["configuration"]
    unknown = set(config) - {"chunk_shape", "codecs", "index_codecs", "index_location"}
    if unknown:
        raise _error(
            where, field_name, f"(sharding_indexed) has unknown configuration key(s) {sorted(unknown)}"
        )
    ndim = len(shard_shape)
    inner = config.get("chunk_shape")
    if (
        not isinstance(inner, list | tuple)
        or len(inner) != ndim
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in inner)
    ):
        raise _error(
            where,
            field_name,
            f"(sharding_indexed) configuration 'chunk_shape' must be {ndim} positive integers, got {inner!r}",
        )
    chunk_shape = tuple(int(c) for c in inner)
    if any(s % c for s, c in zip(shard_shape, chunk_shape, strict=True)):
        raise _error(
            where,
            field_name,
            f"(sharding_indexed) inner chunk_shape {list(chunk_shape)} does not divide the shard shape "
            f"{list(shard_shape)} (the chunk grid's chunk_shape)",
        )
    codecs = config.get("codecs")
    if isinstance(codecs, list | tuple):
        for i, inner_entry in enumerate(codecs):
            if codec_name(inner_entry) == SHARDING_CODEC:
                raise _error(
                    where,
                    f"{field_name}.configuration.codecs[{i}]",
                    "is a nested sharding_indexed codec, which azarr does not support (one level of "
                    "shards; zarr-python 3.4 and TensorStore write one level)",
                )
    inner_codecs, chain = parse_v3_codecs(
        codecs, dtype=dtype, ndim=ndim, where=f"{where} {field_name}.configuration"
    )
    index_codecs = config.get("index_codecs", default_index_codecs())
    endian, checksum = _parse_index_codecs(index_codecs, where, f"{field_name}.configuration.index_codecs")
    location = config.get("index_location", "end")
    if location not in ("start", "end"):
        raise _error(
            where,
            field_name,
            f"(sharding_indexed) configuration 'index_location' must be 'start' or 'end', got {location!r}",
        )
    count = math.prod(shard_shape) // math.prod(chunk_shape)
    if count > 2**31:
        raise _error(where, field_name, "(sharding_indexed) has more than 2^31 inner chunks per shard")
    limit = int(azarr_config.get("max_chunk_bytes"))
    if count * _ENTRY_BYTES > limit:
        # An index is read and decoded whole: it is held to the bound of any decoded chunk.
        raise _error(
            where,
            field_name,
            f"(sharding_indexed) has {count} inner chunks per shard, an index of {count * _ENTRY_BYTES} "
            f"bytes, more than max_chunk_bytes ({limit} bytes); if this data is trusted, raise the "
            "limit with azarr.config.set(max_chunk_bytes=...)",
        )
    return ShardingSpec(
        chunk_shape=chunk_shape,
        codecs=tuple(dict(c) if isinstance(c, Mapping) else {"name": c} for c in inner_codecs),
        chain=chain,
        index_codecs=tuple(dict(c) if isinstance(c, Mapping) else {"name": c} for c in index_codecs),
        index_location=location,
        index_endian=endian,
        index_checksum=checksum,
    )


def _parse_index_codecs(codecs: Any, where: str, field_name: str) -> tuple[Literal["little", "big"], bool]:
    """(endian, checksum) of ``index_codecs``: ``[bytes]`` or ``[bytes, crc32c]``."""
    from azarr.codecs._v3 import codec_name

    names = [codec_name(c) for c in codecs] if isinstance(codecs, list | tuple) else None
    if names not in (["bytes"], ["bytes", "crc32c"]):
        raise _error(
            where,
            field_name,
            f"must be [bytes] or [bytes, crc32c] (the fixed-size index codecs azarr reads), got {codecs!r}",
        )
    first = codecs[0]
    config = first.get("configuration", {}) if isinstance(first, Mapping) else {}
    if not isinstance(config, Mapping) or set(config) - {"endian"}:
        raise _error(where, field_name, f"has an invalid bytes configuration {config!r}")
    endian = config.get("endian", "little")
    if endian not in ("little", "big"):
        raise _error(where, field_name, f"bytes 'endian' must be 'little' or 'big', got {endian!r}")
    second = codecs[1] if len(codecs) > 1 else None
    if isinstance(second, Mapping) and second.get("configuration") not in (None, {}):
        raise _error(where, field_name, f"crc32c takes no configuration, got {second.get('configuration')!r}")
    return endian, len(codecs) == 2
