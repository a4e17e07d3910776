"""Bounded decoding: no codec step may produce more bytes than the chunk can hold.

A stored chunk is untrusted input. A 1 MB zlib stream can inflate to 1 GiB, a
Zstd frame without a content size to anything, and several numcodecs codecs
allocate from a count in the payload (``VLen*`` item counts, the ``shape`` and
``dtype`` trailer of ``json2``/``msgpack2``, Blosc/LZ4/Zstd size headers).
`decode_stage` runs one codec step with a byte limit known *before*
decoding (the chunk's ``shape x itemsize``, or a bound derived from the
filters) and fails as soon as the output would pass it:

* zlib, gzip, bz2, lzma and Zstd frames without a content size decode through
  the standard library's (or ``backports.zstd``'s) incremental decompressors
  with ``max_length`` = limit + 1, so at most limit + 1 bytes are ever produced;
* Blosc, LZ4 and Zstd frames with a content size have their declared size
  checked against the limit before numcodecs allocates it;
* ``vlen-*`` item counts and the ``json2``/``msgpack2`` shape trailer are
  checked against the chunk's element count before anything is allocated;
* any other codec runs as is and its output is checked afterwards (codecs such
  as Delta, AsType or Shuffle produce output proportional to their input).
"""

from __future__ import annotations

import bz2
import json
import lzma
import math
import sys
import warnings
import zlib
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from numcodecs.abc import Codec
    from numcodecs.astype import AsType
    from numcodecs.blosc import Blosc
    from numcodecs.bz2 import BZ2
    from numcodecs.categorize import Categorize
    from numcodecs.compat import ensure_contiguous_ndarray
    from numcodecs.delta import Delta
    from numcodecs.fixedscaleoffset import FixedScaleOffset
    from numcodecs.gzip import GZip
    from numcodecs.json import JSON
    from numcodecs.lz4 import LZ4
    from numcodecs.lzma import LZMA
    from numcodecs.packbits import PackBits
    from numcodecs.quantize import Quantize
    from numcodecs.shuffle import Shuffle
    from numcodecs.vlen import VLenArray, VLenBytes, VLenUTF8
    from numcodecs.zlib import Zlib
    from numcodecs.zstd import Zstd

if sys.version_info >= (3, 14):
    from compression.zstd import ZstdDecompressor
    from compression.zstd import get_frame_size as zstd_frame_size
else:  # pragma: no cover - depends on the interpreter
    from backports.zstd import ZstdDecompressor
    from backports.zstd import get_frame_size as zstd_frame_size

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"

__all__ = [
    "LimitExceeded",
    "check_blosc_frame",
    "compressed_bound",
    "decode_stage",
    "encoded_bound",
    "zstd_content_size",
    "zstd_frame_size",
    "zstd_size_header",
]


class LimitExceeded(ValueError):
    """A codec step would produce more than its limit (a corrupt or hostile chunk)."""


class _Decompressor(Protocol):
    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...

    def decompress(self, data: Any, max_length: int = ..., /) -> bytes: ...


def _stream(
    make: Callable[[], _Decompressor], data: Any, limit: int, *, multi_stream: bool, what: str
) -> bytes:
    """Decompress ``data`` with fresh decompressors from ``make``, producing at most ``limit`` bytes.

    ``multi_stream`` follows concatenated streams (gzip members, bz2/xz/zstd
    streams) as the one-shot stdlib functions do; leftover bytes that do not
    start a valid stream are ignored, as ``bz2.decompress`` ignores them.
    """
    parts: list[bytes] = []
    room = limit + 1  # one byte more than allowed: producing it proves the excess
    buf: Any = data
    first = True
    while True:
        decompressor = make()
        try:
            part = decompressor.decompress(buf, room)
        except Exception:
            if first:
                raise
            break  # trailing bytes that are not a stream
        room -= len(part)
        parts.append(part)
        if room <= 0:
            raise LimitExceeded(f"{what} data decompresses to more than {limit} bytes")
        if not decompressor.eof:
            raise ValueError(f"{what} data is truncated (the stream does not end)")
        first = False
        buf = decompressor.unused_data
        if not multi_stream or not buf:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _zlib_like(wbits: int) -> Callable[[], _Decompressor]:
    return lambda: zlib.decompressobj(wbits)


def zstd_size_header(view: memoryview) -> tuple[int, int] | None:
    """Frame_Content_Size of the first Zstd frame (RFC 8878 3.1.1.1) and the length of the
    frame's header up to the end of that field; None if absent or not Zstd. Frames that
    begin with the same bytes up to there declare the same size."""
    if len(view) < 6 or bytes(view[:4]) != _ZSTD_MAGIC:
        return None
    descriptor = view[4]
    fcs_flag, single_segment, dict_id_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_id_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(view) < start + width:
        return None
    size = int.from_bytes(view[start : start + width], "little")
    return size + 256 if width == 2 else size, start + width


def zstd_content_size(view: memoryview) -> int | None:
    """Frame_Content_Size of the first Zstd frame (RFC 8878 3.1.1.1), None if absent or not Zstd."""
    found = zstd_size_header(view)
    return None if found is None else found[0]


def check_blosc_frame(view: memoryview) -> None:
    """Reject frames shorter than their header claims.

    numcodecs' Blosc trusts the header's ``cbytes`` and reads that many bytes,
    so a truncated chunk would be decoded from memory past the buffer.
    """
    if len(view) < 16:
        raise ValueError(f"blosc frame of {len(view)} bytes is shorter than the 16-byte header")
    cbytes = int.from_bytes(view[12:16], "little")
    if cbytes > len(view):
        raise ValueError(f"blosc frame is truncated: its header says {cbytes} bytes, got {len(view)}")


def _check_declared(declared: int, limit: int, what: str) -> None:
    if declared > limit:
        raise LimitExceeded(f"{what} header declares {declared} decompressed bytes, more than {limit}")


def _bytes_view(buf: Any) -> memoryview:
    view = memoryview(ensure_contiguous_ndarray(buf))
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _vlen_count(view: memoryview) -> int:
    if len(view) < 4:
        raise ValueError(f"vlen buffer of {len(view)} bytes is shorter than its 4-byte header")
    return int.from_bytes(view[:4], "little")


def _check_items(items: Any, count: int, limit: int, what: str) -> tuple[Any, np.dtype[Any]]:
    """Validate the ``[*values, dtype, shape]`` list of json2/msgpack2 before allocating."""
    if not isinstance(items, list) or len(items) < 2:
        raise ValueError(f"{what} payload must be a list ending in dtype and shape")
    shape, dtype_str = items[-1], items[-2]
    dims = shape if isinstance(shape, list) else [shape]
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in dims):
        raise ValueError(f"{what} payload has an invalid shape {str(shape)[:80]}")
    n = math.prod(dims)
    if n != count:
        raise LimitExceeded(f"{what} payload declares {n} elements, the chunk has {count}")
    if not isinstance(dtype_str, str):
        raise ValueError(f"{what} payload has an invalid dtype {str(dtype_str)[:80]}")
    dtype = np.dtype(dtype_str)
    if dtype.itemsize * n > limit:
        raise LimitExceeded(f"{what} payload of {n} x {dtype} exceeds {limit} bytes")
    values = len(items) - 2  # nested lists: one per index of the first dimension
    if values != (dims[0] if dims else 1):
        raise ValueError(f"{what} payload holds {values} values for shape {shape}")
    return dims, dtype


def _from_items(items: list[Any], dims: Any, dtype: np.dtype[Any]) -> Any:
    out = np.empty(dims, dtype=dtype)
    if not dims:
        out[...] = items[0]
    else:
        out[:] = items[:-2]
    return out


def _decode_json(codec: Any, buf: Any, count: int, limit: int) -> Any:
    text = bytes(_bytes_view(buf)).decode(getattr(codec, "_text_encoding", "utf-8"))
    decoder = getattr(codec, "_decoder", None) or json.JSONDecoder()
    items = decoder.decode(text)
    dims, dtype = _check_items(items, count, limit, "json2")
    return _from_items(items, dims, dtype)


def _decode_msgpack(codec: Any, buf: Any, count: int, limit: int) -> Any:
    import msgpack  # numcodecs' MsgPack itself needs it, so it is there when this runs

    # msgpack >= 1.0 caps every container and string at the buffer's length.
    items = msgpack.unpackb(_bytes_view(buf), raw=getattr(codec, "raw", False))
    dims, dtype = _check_items(items, count, limit, "msgpack2")
    return _from_items(items, dims, dtype)


def decode_stage(codec: Codec, buf: Any, limit: int, *, count: int | None = None) -> Any:
    """Decode ``buf`` with ``codec``, producing at most ``limit`` bytes.

    Parameters
    ----------
    codec : numcodecs.abc.Codec
        One step of the pipeline (the compressor or a filter); never a pickle codec.
    buf : bytes-like or numpy.ndarray
        The step's encoded input.
    limit : int
        Bytes the decoded output may have at most.
    count : int, optional
        For an object codec (``vlen-*``, ``json2``, ``msgpack2``): the number of
        elements the chunk has; the payload's own count must equal it.

    Returns
    -------
    bytes or numpy.ndarray
        The decoded output, never larger than ``limit`` bytes (for object
        arrays: ``count`` elements).

    Raises
    ------
    LimitExceeded
        The output would exceed ``limit`` (detected before the excess is
        allocated for every codec listed in the module docstring).
    Exception
        Whatever the codec raises on corrupt input (the caller wraps it).
    """
    if isinstance(codec, Zlib):
        return _stream(_zlib_like(15), buf, limit, multi_stream=False, what="zlib")
    if isinstance(codec, GZip):
        return _stream(_zlib_like(31), buf, limit, multi_stream=True, what="gzip")
    if isinstance(codec, BZ2):
        return _stream(bz2.BZ2Decompressor, _bytes_view(buf), limit, multi_stream=True, what="bz2")
    if isinstance(codec, LZMA):
        fmt, filters = codec.format, codec.filters

        def make_lzma() -> _Decompressor:
            return lzma.LZMADecompressor(format=fmt, filters=filters)

        return _stream(make_lzma, _bytes_view(buf), limit, multi_stream=fmt != lzma.FORMAT_RAW, what="lzma")
    if isinstance(codec, Zstd):
        view = _bytes_view(buf)
        declared = zstd_content_size(view)
        if declared is None:
            return _stream(ZstdDecompressor, view, limit, multi_stream=True, what="zstd")
        _check_declared(declared, limit, "zstd")
    elif isinstance(codec, Blosc):
        view = _bytes_view(buf)
        check_blosc_frame(view)
        _check_declared(int.from_bytes(view[4:8], "little"), limit, "blosc")
    elif isinstance(codec, LZ4):
        view = _bytes_view(buf)
        if len(view) >= 4:
            _check_declared(int.from_bytes(view[:4], "little"), limit, "lz4")
    elif count is not None and isinstance(codec, VLenUTF8 | VLenBytes | VLenArray):
        n = _vlen_count(_bytes_view(buf))
        if n != count:
            raise LimitExceeded(f"vlen payload declares {n} items, the chunk has {count}")
    elif count is not None and isinstance(codec, JSON):
        return _decode_json(codec, buf, count, limit)
    elif count is not None and getattr(codec, "codec_id", None) == "msgpack2":
        return _decode_msgpack(codec, buf, count, limit)
    out = codec.decode(buf)
    nbytes = out.nbytes if isinstance(out, np.ndarray) else len(memoryview(out).cast("B"))
    if nbytes > limit:
        raise LimitExceeded(f"{type(codec).__name__} decoded to {nbytes} bytes, more than {limit}")
    return out


def encoded_bound(codec: Codec, nbytes: int, count: int) -> int | None:
    """Bytes ``codec.encode`` produces from ``count`` elements of ``nbytes`` bytes, if known.

    Exact for the element-wise filters (Delta, AsType, FixedScaleOffset,
    Quantize, Categorize: ``count x`` the encoded dtype's itemsize; Shuffle:
    ``nbytes``; PackBits: one bit per element plus a header byte). ``None``
    for anything else (compressors used as filters, object codecs, unknown
    codecs), where the caller falls back to ``max_chunk_bytes``.
    """
    if isinstance(codec, Shuffle):
        return nbytes
    if isinstance(codec, PackBits):
        return -(-count // 8) + 1
    if isinstance(codec, AsType):
        return count * int(np.dtype(codec.encode_dtype).itemsize)
    if isinstance(codec, Delta | FixedScaleOffset | Quantize | Categorize):
        return count * int(np.dtype(codec.astype).itemsize)
    return None


#: Codecs whose output is their input plus a few bytes (checksums), and that many bytes.
_CHECKSUM_BYTES = {"crc32": 4, "crc32c": 4, "adler32": 4, "fletcher32": 4, "jenkins_lookup3": 4}


def compressed_bound(codec: Codec, nbytes: int) -> int | None:
    """Most bytes a bytes -> bytes ``codec`` encodes ``nbytes`` bytes to, if known.

    For a v3 chain's outer codecs (a ``crc32c`` after ``blosc``, a ``gzip`` after
    ``zstd``): decoding one of them yields what the codec before it encoded, which is
    at most this. Checksums add their few bytes; the compressors' worst cases (zlib's
    ``deflateBound``, ``ZSTD_compressBound``, LZ4's, Blosc's 16-byte header, bz2's and
    xz's) all stay under ``nbytes + nbytes / 64 + 4 KiB``. ``None`` for other codecs.
    """
    codec_id = getattr(codec, "codec_id", None)
    if codec_id in _CHECKSUM_BYTES:
        return nbytes + _CHECKSUM_BYTES[codec_id]
    if isinstance(codec, Zlib | GZip | BZ2 | LZMA | Zstd | Blosc | LZ4):
        return nbytes + nbytes // 64 + 4096
    if isinstance(codec, Shuffle):
        return nbytes
    return None
