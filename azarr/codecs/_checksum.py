"""Checksum codecs undone without a copy: the v3 ``crc32c`` codec on read.

numcodecs' ``CRC32C`` appends the CRC-32C of the encoded bytes, little-endian, as the
Zarr v3 spec's ``crc32c`` codec does (encoding goes through it). Its ``decode``
verifies and then copies the payload; a chunk pipeline only needs the payload as a
view, so `strip_checksum` verifies with the ``crc32c`` package (SSE 4.2 / ARMv8
instructions, any buffer, the GIL released) and returns ``view[:-4]``: the checksum
costs one pass over the bytes and no allocation, and a chunk read from a pooled
receive buffer stays in it.
"""

from __future__ import annotations

import warnings
from typing import Any

import crc32c

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from numcodecs.checksum32 import CRC32C

__all__ = ["is_checksum", "strip_checksum"]

_SIZE = 4


def is_checksum(codec: Any) -> bool:
    """Whether ``codec`` is a checksum `strip_checksum` undoes (CRC-32C at the end)."""
    return isinstance(codec, CRC32C) and getattr(codec, "location", "end") == "end"


def strip_checksum(codec: Any, view: memoryview) -> memoryview:
    """The payload of ``view`` once its trailing CRC-32C matches.

    Raises
    ------
    ValueError
        ``view`` is shorter than the checksum, or the stored and computed checksums
        differ (the caller names the chunk: a `CodecError`).
    """
    if len(view) < _SIZE:
        raise ValueError(f"{len(view)} bytes cannot hold a {_SIZE}-byte crc32c checksum")
    payload = view[:-_SIZE]
    stored = int.from_bytes(view[-_SIZE:], "little")
    computed = crc32c.crc32c(payload)
    if stored != computed:
        raise ValueError(
            f"crc32c checksum mismatch: stored {stored:#010x}, computed {computed:#010x} (the chunk is corrupt)"
        )
    return payload
