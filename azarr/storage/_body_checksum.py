"""The CRC-32C of a body to be written, computed where the body was made.

An S3 ``PUT`` carries ``x-amz-checksum-crc32c`` (`S3Transport`, botocore's
``request_checksum_calculation="when_supported"``): 43 us of CPU per MiB of data in
cache, 80-100 us out of it (measured). Computed by the transport, that is event-loop
time per request; the write pipelines compute it in the codec thread that encoded the
chunk or assembled the shard, on data still in cache (`body_crc32c`), and hand it to the
store call that sends the body with `crc32c_known`: a context variable, since the store
call (retries included) runs in the caller's task. The value is tied to the body object
by identity, so a body nobody checksummed beforehand (metadata, a direct ``store.set``,
a read-modify-write) is checksummed by the transport itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import crc32c

__all__ = ["body_crc32c", "crc32c_known", "known_crc32c"]

_KNOWN: ContextVar[tuple[object, int] | None] = ContextVar("azarr_body_crc32c", default=None)


def body_crc32c(body: bytes | bytearray | memoryview | None) -> int:
    """CRC-32C (Castagnoli) of ``body`` (``crc32c`` package: SSE 4.2 / ARMv8, the GIL released)."""
    return crc32c.crc32c(body or b"")


@contextlib.contextmanager
def crc32c_known(body: object, crc: int | None) -> Iterator[None]:
    """Within the block (this task and the tasks it starts), `known_crc32c` of ``body`` is ``crc``."""
    if crc is None:
        yield
        return
    token = _KNOWN.set((body, crc))
    try:
        yield
    finally:
        _KNOWN.reset(token)


def known_crc32c(body: object) -> int | None:
    """The CRC-32C `crc32c_known` recorded for this very object, else None."""
    known = _KNOWN.get()
    return known[1] if known is not None and known[0] is body else None
