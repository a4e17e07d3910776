"""`CodecChain`: one chunk's codecs, as both Zarr formats describe them.

A chunk is encoded by array -> array codecs, one array -> bytes codec, then bytes
-> bytes codecs (the Zarr v3 spec's "codecs" list, zarr-python 3's
``CodecPipeline``). A Zarr v2 ``.zarray`` says the same with other words: its
``order`` is the array -> array step (``"F"`` is v3's ``transpose`` reversing the
axes), its ``filters`` run on the chunk laid out in that order, the chunk's memory
(in the dtype's own byte order) is the array -> bytes step, and its
``compressor`` is the one bytes -> bytes codec. `CodecChain` holds those steps
as numcodecs configurations; `ChunkCodec` runs any chain, so the chunk
pipeline never learns which format a chain came from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["CodecChain", "v2_chain"]


@dataclass(frozen=True)
class CodecChain:
    """A chunk's codecs in encoding order, as numcodecs configurations.

    Attributes
    ----------
    order : {"C", "F"}
        Layout of the chunk before ``filters``: C order, or F order (v2 ``order="F"``,
        a v3 ``transpose`` reversing the axes).
    permutation : tuple of int or None
        A v3 ``transpose`` that is neither: the chunk is laid out as
        ``numpy.transpose(chunk, permutation)`` in C order. ``order`` is then ``"C"``.
    filters : tuple of dict
        numcodecs configurations run on the laid-out chunk, flattened, in order:
        v2 ``filters`` (an object codec first for object dtypes); v3 ``numcodecs.*``
        array -> array codecs and a ``vlen-utf8``/``vlen-bytes`` serializer.
    endian : {"little", "big"} or None
        Byte order of the serialized elements (v3 ``bytes`` codec); None keeps the
        dtype's own byte order (v2, and v3 single-byte types).
    compressors : tuple of dict
        numcodecs configurations of the bytes -> bytes codecs, in encoding order
        (v2: the ``compressor``, if any; v3: ``blosc``, ``zstd``, ``gzip``, ``crc32c``...).
    """

    order: Literal["C", "F"] = "C"
    permutation: tuple[int, ...] | None = None
    filters: tuple[dict[str, Any], ...] = ()
    endian: Literal["little", "big"] | None = None
    compressors: tuple[dict[str, Any], ...] = ()


def v2_chain(
    order: Literal["C", "F"],
    compressor: Mapping[str, Any] | None,
    filters: Sequence[Mapping[str, Any]] | None,
) -> CodecChain:
    """The chain of a ``.zarray``'s ``order``, ``compressor`` and ``filters``."""
    return CodecChain(
        order=order,
        filters=tuple(dict(f) for f in filters or ()),
        compressors=() if compressor is None else (dict(compressor),),
    )
