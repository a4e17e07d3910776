"""How many bytes a response body may hold before it is refused: the bound of every read.

A store is asked for a value whose size the caller can bound: a chunk by its
codec's largest encoded size, a metadata document by ``max_metadata_bytes``, a
byte range by its length. The bound travels with the request as a context
variable set by `StoreIO` (`expected_body`), so every driver's transport
(the S3 aiohttp transport, `HTTPStore`) reads it without a new argument on
every ``Store`` method; a read with no bound set gets `default_body_limit`.
Error bodies are read up to `ERROR_BODY_BYTES` whatever the bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from azarr import config

__all__ = ["ERROR_BODY_BYTES", "body_limit", "default_body_limit", "expected_body"]

#: Most bytes of an error response's body read (S3's XML error documents are < 1 KiB).
ERROR_BODY_BYTES = 8 * 1024

_EXPECTED: ContextVar[int | None] = ContextVar("azarr_expected_body", default=None)


def default_body_limit() -> int:
    """The bound of a read that set none: the largest value azarr reads at all (bytes)."""
    return max(int(config.get("max_chunk_bytes")), int(config.get("max_metadata_bytes")))


def body_limit() -> int:
    """The bound of the read in progress (bytes): the innermost `expected_body`, else the default."""
    limit = _EXPECTED.get()
    return default_body_limit() if limit is None else limit


@contextmanager
def expected_body(nbytes: int | None) -> Iterator[None]:
    """Bound every body read inside the block to ``nbytes`` bytes (None: the default bound).

    Tasks created inside the block inherit it (context variables are copied into
    new tasks), so hedged and ranged reads are bounded too.
    """
    token = _EXPECTED.set(None if nbytes is None else max(0, int(nbytes)))
    try:
        yield
    finally:
        _EXPECTED.reset(token)
