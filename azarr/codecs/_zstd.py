"""Zstd compression with one reused compression context per thread and configuration.

``numcodecs.Zstd.encode`` creates and frees a ``ZSTD_CCtx`` for every chunk: on this
project's benchmark host (64 KiB float32 inner chunks, level 1) that set-up cost about as
much as the compression itself (256 x 64 KiB: 66-103 ms per 16 MiB against 31-34 ms for one
16 MiB call; zarr-python 3's ``ZstdCodec`` calls the same numcodecs codec). The standard
library's ``compression.zstd`` (``backports.zstd`` before Python 3.14, already a dependency
for bounded decoding) keeps its context between frames. Each
``compress(..., FLUSH_FRAME)`` call with the whole chunk is ``ZSTD_compressStream2`` with
``ZSTD_e_end`` on a fresh frame, which zstd turns into a one-shot compression declaring the
content size, so the frames are those of ``ZSTD_compress2``: the same header, and the same
bytes for the same libzstd version (tested against numcodecs).

Contexts are per thread (a context serves one frame at a time; ``ZstdCompressor`` locks
per call) and per ``(level, checksum)``: a codec thread keeps one small context per
configuration it has used (level 1 on 64 KiB chunks: a few hundred KiB, which zstd shrinks
back after many calls on smaller inputs).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

if sys.version_info >= (3, 14):
    from compression.zstd import CompressionParameter, ZstdCompressor
else:  # pragma: no cover - depends on the interpreter
    from backports.zstd import CompressionParameter, ZstdCompressor

__all__ = ["zstd_compress"]

_LOCAL = threading.local()


def zstd_compress(data: Any, level: int, checksum: bool) -> bytes:
    """One Zstd frame of ``data`` (a C-contiguous buffer) at ``level``, with a content
    checksum if ``checksum``: what ``numcodecs.Zstd(level, checksum).encode`` returns.

    Raises
    ------
    compression.zstd.ZstdError
        zstd refused the parameters (a level out of range) or failed.
    """
    contexts: dict[tuple[int, bool], Any] | None = getattr(_LOCAL, "contexts", None)
    if contexts is None:
        contexts = _LOCAL.contexts = {}
    context = contexts.get((level, checksum))
    if context is None:
        options: dict[int, int] = {
            CompressionParameter.compression_level: level,
            CompressionParameter.checksum_flag: int(checksum),
        }
        context = contexts[(level, checksum)] = ZstdCompressor(options=options)
    try:
        result: bytes = context.compress(data, ZstdCompressor.FLUSH_FRAME)
    except BaseException:
        del contexts[(level, checksum)]  # a frame left unfinished: the next call starts afresh
        raise
    return result
