"""The chunk codec pipeline: stored bytes <-> chunk-shaped NumPy arrays.

A `ChunkCodec` is built once per array from the ``.zarray`` fields
(``dtype``, ``chunks``, ``order``, ``compressor``, ``filters``) and then used
from the codec pool to decode and encode every chunk, with zarr-python 2
semantics:

* decoding runs the compressor, then the filters in reverse order, and
  reinterprets the bytes as ``chunks`` in ``order`` (for ``order="F"`` the bytes
  are the Fortran-order layout of the chunk);
* encoding runs the filters in order, then the compressor, always on the full
  chunk shape (edge chunks are padded by the caller);
* object arrays need an object codec as the first filter.

Its methods are synchronous and CPU-bound: call them through
`decode_chunk_async` / `encode_chunk_async` (which run them in the
codec pool), never directly on an event loop.
"""

from __future__ import annotations

import copy
import functools
import math
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from azarr import config
from azarr.codecs._bounded import (
    LimitExceeded,
    check_blosc_frame,
    compressed_bound,
    decode_stage,
    encoded_bound,
    zstd_content_size,
    zstd_frame_size,
    zstd_size_header,
)
from azarr.codecs._chain import CodecChain
from azarr.codecs._checksum import is_checksum, strip_checksum
from azarr.codecs._object import is_unpickling_codec, object_all_equal, unpickle, values_equal
from azarr.codecs._pool import run_in_codec_pool
from azarr.codecs._zstd import zstd_compress
from azarr.errors import CodecError, MetadataError, UnsafeCodecError

with warnings.catch_warnings():
    # numcodecs 0.16 warns at import about its optional crc32c backend; the
    # warning is not actionable for azarr users.
    warnings.simplefilter("ignore", DeprecationWarning)
    import numcodecs
    from numcodecs.abc import Codec
    from numcodecs.blosc import Blosc
    from numcodecs.blosc import compress as blosc_compress
    from numcodecs.blosc import decompress as blosc_decompress
    from numcodecs.compat import ensure_bytes, ensure_ndarray_like
    from numcodecs.lz4 import LZ4
    from numcodecs.zstd import Zstd
    from numcodecs.zstd import decompress as zstd_decompress

    try:
        from numcodecs.errors import UnsafeDecodeError
    except ImportError:  # numcodecs < 0.16 has no pickle gate of its own

        class UnsafeDecodeError(RuntimeError):  # type: ignore[no-redef]
            """Placeholder so ``except UnsafeDecodeError`` works on old numcodecs."""


__all__ = ["ChunkCodec", "decode_chunk_async", "encode_chunk_async"]

#: Anything exporting the buffer protocol as bytes: what stores return.
BytesLike: TypeAlias = bytes | bytearray | memoryview
Order: TypeAlias = Literal["C", "F"]
NDArray: TypeAlias = npt.NDArray[Any]


# decode_for_copy's per-thread chunk buffers: big enough chunks only (small ones come from
# malloc's free lists, no page faults), and not so big that a thread keeps much memory.
_SCRATCH_MIN_BYTES = 64 * 1024
_SCRATCH_MAX_BYTES = 16 * 2**20
_scratch = threading.local()


#: Most bytes `ChunkCodec.scratch_run_decoder` decodes in one call (its per-thread buffer).
_RUN_MAX_BYTES = 4 * 2**20


def _scratch_run(nbytes: int) -> NDArray:
    """``nbytes`` bytes of a buffer this thread reuses (contents undefined)."""
    buffer: NDArray | None = getattr(_scratch, "run", None)
    if buffer is None or len(buffer) < nbytes:
        buffer = _scratch.run = np.empty(max(nbytes, 1 << 20), dtype=np.uint8)
    return buffer[:nbytes]


@functools.cache
def _zstd_decodes_frames_in_one_call() -> bool:
    """numcodecs' ``zstd.decompress`` decodes concatenated frames into one buffer, sized
    from all their declared sizes (numcodecs 0.16 does; older ones sized it from the first
    frame alone, and with them runs are decoded one by one)."""
    frame = numcodecs.Zstd(level=1).encode(bytes(8))
    out = np.empty(16, dtype=np.uint8)
    try:
        zstd_decompress(frame + frame, out)
    except Exception:
        return False
    return True


def _scratch_chunk(dtype: np.dtype[Any], chunks: tuple[int, ...], order: str) -> NDArray:
    """A chunk-shaped array this thread reuses (contents undefined; two shapes kept at most)."""
    cache: dict[Any, NDArray] | None = getattr(_scratch, "chunks", None)
    if cache is None:
        cache = _scratch.chunks = {}
    key = (dtype, chunks, order)
    buffer = cache.get(key)
    if buffer is None:
        if len(cache) >= 2:
            cache.clear()
        buffer = cache[key] = np.empty(chunks, dtype=dtype, order=order)  # type: ignore[call-overload]
    return buffer


class ChunkCodec:
    """Decode and encode the chunks of one Zarr v2 array.

    The equivalent of zarr-python 2's ``Array._decode_chunk`` /
    ``Array._encode_chunk`` plus the codec setup in ``Array._load_metadata``,
    as an object that can be shared by codec threads (it holds no mutable
    state after construction).

    Parameters
    ----------
    dtype : numpy.dtype or str
        The array's data type (``.zarray`` ``"dtype"``, already parsed).
    chunks : tuple of int
        The chunk shape; every length >= 1. ``()`` for 0-d arrays.
    order : {"C", "F"}
        Memory layout of the chunk bytes (``.zarray`` ``"order"``).
    compressor : dict or None
        The ``"compressor"`` JSON config, e.g. ``{"id": "blosc", "cname": "lz4",
        "clevel": 5, "shuffle": 1, "blocksize": 0}``; ``None`` stores raw bytes.
    filters : sequence of dict or None
        The ``"filters"`` JSON configs, in encoding order. For object dtypes the
        first is the object codec (``vlen-utf8``, ``vlen-bytes``, ``vlen-array``,
        ``json2``, ``msgpack2``, ``categorize``, ``pickle``).
    allow_pickle : bool or None, keyword-only
        Let `decode` run a pickle-based codec. ``None`` (default) reads
        ``azarr.config.get("allow_pickle")`` at each decode.
    source : str or None, keyword-only
        The metadata key the configs came from (``"a/.zarray"``), for error messages.

    Attributes
    ----------
    dtype : numpy.dtype
    chunks : tuple of int
    order : {"C", "F"}
    compressor : numcodecs.abc.Codec or None
    filters : tuple of numcodecs.abc.Codec
    size : int
        Elements per chunk (``prod(chunks)``).
    nbytes : int
        Bytes of a decoded chunk in memory (``size * dtype.itemsize``; for
        object dtypes that counts pointers, not the objects).
    is_object : bool
        The dtype holds Python objects, so an object codec does the (de)serialising.
    uses_pickle : bool
        A codec in the pipeline unpickles when decoding (see `decode`).

    Raises
    ------
    CodecError
        A config is not a JSON object with a string ``"id"``, names a codec
        numcodecs does not know (``"unknown codec id 'foo' in compressor of
        'a/.zarray'"``), or has parameters the codec rejects.
    MetadataError
        A decoded chunk (``prod(chunks) x itemsize``) would be larger than
        ``azarr.config`` ``max_chunk_bytes`` (default 2 GiB); the message says
        how to raise the limit.
    ValueError
        ``order`` is not ``"C"``/``"F"`` or a chunk length is < 1.

    Notes
    -----
    Decoding is bounded (`azarr.codecs._bounded`, ``docs/security.md``):
    every codec step has a byte limit fixed here, from `nbytes` and the
    filters, and no step produces more than its limit + 1 bytes.

    Configs are deep-copied before numcodecs sees them, so the caller's
    metadata is never mutated (old numcodecs ``get_codec`` popped ``"id"``).
    """

    __slots__ = (
        "_allow_pickle",
        "_blosc_compress_args",
        "_blosc_direct",
        "_buffer_dtype",
        "_declared_size",
        "_inverse",
        "_layout_shape",
        "_limits",
        "_outer",
        "_outer_base",
        "_perm",
        "_plain",
        "_swap",
        "_zstd_args",
        "_zstd_direct",
        "chunks",
        "compressor",
        "compressors",
        "dtype",
        "filters",
        "is_object",
        "nbytes",
        "order",
        "size",
        "source",
        "stored_bound",
        "uses_pickle",
    )

    dtype: np.dtype[Any]
    chunks: tuple[int, ...]
    order: Order
    compressor: Codec | None
    compressors: tuple[Codec, ...]
    filters: tuple[Codec, ...]
    source: str | None
    size: int
    nbytes: int
    is_object: bool
    stored_bound: int
    uses_pickle: bool
    _allow_pickle: bool | None
    _declared_size: Callable[[memoryview], int | None] | None
    _limits: tuple[int, ...]
    _buffer_dtype: np.dtype[Any] | None

    def __init__(
        self,
        dtype: npt.DTypeLike,
        chunks: Sequence[int],
        order: Order,
        compressor: Mapping[str, Any] | None,
        filters: Sequence[Mapping[str, Any]] | None,
        *,
        allow_pickle: bool | None = None,
        source: str | None = None,
        chain: CodecChain | None = None,
    ) -> None:
        self.dtype = np.dtype(dtype)
        self.chunks = tuple(int(c) for c in chunks)
        if any(c < 1 for c in self.chunks):
            raise ValueError(f"chunk lengths must be >= 1, got {self.chunks}")
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', got {order!r}")
        self.order = order
        self.source = source
        if chain is None:
            self.compressors = () if compressor is None else (_resolve(compressor, "compressor", source),)
            self.filters = tuple(_resolve(f, f"filters[{i}]", source) for i, f in enumerate(filters or ()))
            self._perm: tuple[int, ...] | None = None
            self._swap: np.dtype[Any] | None = None
        else:
            # A chain of either format (azarr.codecs._chain): filters, then bytes -> bytes codecs.
            self.compressors = tuple(_resolve(c, f"codec {c.get('id')!r}", source) for c in chain.compressors)
            self.filters = tuple(_resolve(f, f"codec {f.get('id')!r}", source) for f in chain.filters)
            self._perm = chain.permutation
            self._swap = _stored_dtype(self.dtype, self.filters, chain.endian)
        # The innermost bytes -> bytes codec (v2's compressor), the only one the direct
        # decode paths know; outer ones (a v3 crc32c after blosc) are undone before it. A
        # checksum is never the compressor: a v3 [bytes, crc32c] chain is verified and cut
        # off as a view (then decoded as uncompressed), not copied by numcodecs' CRC32C.
        inner = 1 if self.compressors and not is_checksum(self.compressors[0]) else 0
        self.compressor = self.compressors[0] if inner else None
        self._outer = self.compressors[inner:]
        self._outer_base = len(self.filters) + inner  # _limits index of _outer[0]'s output
        self._layout_shape = self.chunks if self._perm is None else tuple(self.chunks[p] for p in self._perm)
        self._inverse = None if self._perm is None else tuple(int(i) for i in np.argsort(self._perm))
        self.size = math.prod(self.chunks)
        self.nbytes = self.size * self.dtype.itemsize
        self.is_object = self.dtype.hasobject
        self._check_chunk_size()
        self._limits = self._stage_limits()
        # The largest stored chunk this pipeline can have written: what the last stage
        # before the outermost bytes -> bytes codec makes, plus that codec's growth on
        # incompressible input (a checksum's few bytes; zlib/gzip 0.03 %, LZ4 0.4 %, bz2
        # 1.25 % + 600 B, Blosc/Zstd a header and a few bytes per block: 1/64 + 64 KiB
        # covers every compressor, known or not). The bound of a chunk's response body.
        self.stored_bound = self._stored_bound(self._limits[-1])
        self.uses_pickle = any(is_unpickling_codec(c) for c in self._codecs())
        self._allow_pickle = allow_pickle
        # ml_dtypes types (bfloat16, float8_*, int4) cannot export a buffer, which
        # numcodecs needs: codecs see them as unsigned ints of the same item size.
        self._buffer_dtype = (
            np.dtype(f"u{self.dtype.itemsize}")
            if self.dtype.fields is None
            and str(getattr(self.dtype.type, "__module__", "")).startswith("ml_dtypes")
            else None
        )
        # Direct decoding needs the compressor's output to be the chunk's bytes
        # exactly: no filters in between, no object codec, the chunk's own layout, and
        # a byte order that is the memory's or swaps in place (plain numbers).
        self._declared_size = (
            _declared_size_reader(self.compressor)
            if not self.filters
            and not self.is_object
            and self._perm is None
            and (self._swap is None or _swaps_in_place(self.dtype))
            else None
        )
        # No compressor, no filters: a stored chunk is the chunk's memory as is (the common
        # uncompressed case), decoded and encoded without the generic steps.
        self._blosc_direct = self._declared_size is not None and isinstance(self.compressor, Blosc)
        self._zstd_direct = self._declared_size is not None and type(self.compressor) is Zstd
        self._blosc_compress_args = _blosc_compress_args(self.compressor, self.dtype, self.filters)
        # numcodecs' own Zstd (not a subclass): encoded with a reused context (`_zstd` says why).
        # Only for an integer level: a stored "level": null, NaN or Infinity still opens (reads
        # never use it, as in zarr-python 2); writing then fails in numcodecs' own encode.
        zstd: Any = self.compressor if type(self.compressor) is Zstd else None
        level = getattr(zstd, "level", None)
        self._zstd_args = (
            (level, bool(zstd.checksum)) if isinstance(level, int) and not isinstance(level, bool) else None
        )
        self._plain = (
            self.compressor is None
            and not self._outer
            and not self.filters
            and not self.is_object
            and self.nbytes > 0
            and self._perm is None
            and self._swap is None
        )

    @classmethod
    def from_chain(
        cls,
        dtype: npt.DTypeLike,
        chunks: Sequence[int],
        chain: CodecChain,
        *,
        allow_pickle: bool | None = None,
        source: str | None = None,
    ) -> ChunkCodec:
        """The codec of a `CodecChain` (either format's; see ``azarr.codecs._chain``).

        Raises as the constructor; a chain's codecs are named by their numcodecs id.
        """
        return cls(
            dtype, chunks, chain.order, None, None, allow_pickle=allow_pickle, source=source, chain=chain
        )

    def _check_chunk_size(self) -> None:
        limit = int(config.get("max_chunk_bytes"))
        if self.nbytes > limit:
            of = f"{self.source!r}: " if self.source else ""
            raise MetadataError(
                f"{of}'chunks' {list(self.chunks)} of dtype {self.dtype} make chunks of {self.nbytes} "
                f"bytes, more than max_chunk_bytes ({limit} bytes); if this data is trusted, raise the "
                f"limit with azarr.config.set(max_chunk_bytes={self.nbytes})"
            )

    def _stored_bound(self, stage_in: int) -> int:
        if not self.compressors:
            return stage_in
        outermost = self.compressors[-1]
        if is_checksum(outermost):
            return compressed_bound(outermost, stage_in) or stage_in + 4
        return stage_in + stage_in // 64 + 65536

    def _stage_limits(self) -> tuple[int, ...]:
        """Bytes each decode step may produce: ``[filters[0], ..., filters[-1], compressors[0], ...]``.

        The last filter's decode yields the chunk (`nbytes`); each earlier
        step's output is what the next filter encodes to, exact for element-wise
        filters (`encoded_bound`) and ``max_chunk_bytes`` otherwise (object
        codecs, whose byte size depends on the values, and unknown codecs). An outer
        bytes -> bytes codec (a v3 chain's second and later) decodes to what the one
        before it encodes to: at most its worst-case expansion (`compressed_bound`).
        """
        cap = int(config.get("max_chunk_bytes"))
        limits = [self.nbytes]
        for codec in self.filters:
            bound = encoded_bound(codec, limits[-1], self.size)
            limits.append(cap if bound is None else min(bound, cap))
        for codec in self.compressors[:-1]:
            bound = compressed_bound(codec, limits[-1])
            limits.append(cap if bound is None else min(bound, cap))
        return tuple(limits)

    def _codecs(self) -> tuple[Codec, ...]:
        return (*self.filters, *self.compressors)

    @property
    def pickle_allowed(self) -> bool:
        """Whether `decode` may run pickle-based codecs right now.

        The constructor's ``allow_pickle`` if given, else ``azarr.config.get("allow_pickle")``
        (read at each call, so ``config.set`` applies to existing codecs).
        """
        if self._allow_pickle is not None:
            return self._allow_pickle
        return bool(config.get("allow_pickle"))

    @property
    def compressor_yields_chunk(self) -> bool:
        """Whether the stored value is just the compressor's output and that output the chunk's
        memory (C or F order, this machine's byte order): no filters, no object codec, no outer
        bytes -> bytes codec (a v3 ``crc32c``), no other ``transpose``, no byte swap. What reading
        parts of a compressed chunk (`azarr.pipeline._partial`) needs."""
        return (
            self.compressor is not None
            and not self._outer
            and not self.filters
            and not self.is_object
            and self._perm is None
            and self._swap is None
        )

    @property
    def stores_raw(self) -> bool:
        """Whether a stored chunk is the chunk's memory as it is (C or F order, this machine's
        byte order): no compressor, filters, checksum, transpose or byte swap, a fixed-size
        dtype that exports a buffer. Decoding such a chunk is copying it, so a reader can read
        it straight into its destination (`azarr.pipeline._batched`, `Store.readinto_blocking`)."""
        return self._plain and self._buffer_dtype is None and _exports_buffer(self.dtype)

    @property
    def direct_decode(self) -> bool:
        """Whether `decode` can decompress straight into the chunk array.

        True when there are no filters, the dtype is fixed-size, and the
        compressor is Blosc, Zstd or LZ4: their headers state the decompressed
        size (checked against `nbytes` before decoding) and their
        ``decode(buf, out=...)`` writes into ``out`` with no intermediate buffer.
        """
        return self._declared_size is not None

    def __repr__(self) -> str:
        outer = f", outer={list(self._outer)!r}" if self._outer else ""
        layout = f", permutation={self._perm}" if self._perm is not None else ""
        stored = f", stored={self._swap.str}" if self._swap is not None else ""
        return (
            f"ChunkCodec(dtype={self.dtype.str if self.dtype.names is None else self.dtype.descr!r}, "
            f"chunks={self.chunks}, order={self.order!r}, compressor={self.compressor!r}, "
            f"filters={list(self.filters)!r}{outer}{layout}{stored})"
        )

    # ------------------------------------------------------------------ decode

    def decode(
        self, data: BytesLike, *, key: str, out: NDArray | None = None, writable: bool = True
    ) -> NDArray:
        """Decode one stored chunk (zarr-python 2: ``Array._decode_chunk``).

        Parameters
        ----------
        data : bytes-like
            The stored value of the chunk key.
        key : str
            The chunk's store key (``"a/0.0"``), named in every error.
        out : numpy.ndarray, optional
            Where to put the chunk: shape ``chunks``, dtype ``dtype``, writable,
            contiguous in ``order``. When `direct_decode` holds, the
            compressor writes into it directly (no intermediate buffer, no
            copy); otherwise the decoded chunk is copied in once.
        writable : bool, default True
            False lets the result be a read-only view of ``data`` (or of a
            codec's immutable output) instead of a copy: for callers that only
            copy out of it, as reads scatter each chunk into the selection's
            output. Saves one allocation and copy per chunk when there is no
            compressor. Ignored with ``out``.

        Returns
        -------
        numpy.ndarray
            ``out`` if given; else an array of shape ``chunks``, dtype ``dtype``,
            contiguous in ``order``: new and writable, or with ``writable=False``
            possibly a read-only view. Object dtypes give an object array.

        Raises
        ------
        UnsafeCodecError
            The pipeline contains a pickle codec and pickle is not allowed
            (checked before any byte is decoded).
        CodecError
            The bytes are corrupt or truncated, a codec failed, a codec step
            would produce more bytes than the chunk can hold (detected before
            the excess is allocated: bounded decompressors, size headers and
            object-codec counts checked first), or the result is not one chunk
            (wrong byte count for fixed-size dtypes, wrong element count or no
            object codec for object dtypes). The message names
            ``key`` and the codec; the codec's exception is chained. If ``out``
            was given its contents are then unspecified.
        ValueError
            ``out`` does not fit the chunk (a caller bug, not a data problem).

        Notes
        -----
        Deviations from zarr-python 2, all on data it mishandles:

        * Blosc frames are checked against their header before decoding: a
          truncated frame raises instead of reading past the buffer.
        * A ``json2``/``msgpack2``/``pickle`` codec that decodes to the full
          chunk shape already holds the chunk in logical order; it is used as is.
          zarr-python 2 re-flattens it in memory order, which transposes
          ``order="F"`` object chunks written by ``json2``/``msgpack2``.
        """
        if self.uses_pickle and not self.pickle_allowed:
            raise UnsafeCodecError(
                f"chunk {key!r} is encoded with the pickle codec, which can execute arbitrary code "
                "when decoding; pass allow_pickle=True (or azarr.config.set(allow_pickle=True)) "
                "if you trust this data"
            )
        if out is not None:
            self._check_out(out)
        if self._outer:
            data = self._decode_outer(data, key)
        elif (
            out is None and not writable and self._blosc_direct and type(data) is bytes and self._swap is None
        ):
            # The scatter-only read of a plain Blosc chunk (every small chunk of a read): the
            # frame and size checks below in one look at the header, then the C call. Any
            # frame that fails them takes the general path, which says what is wrong.
            size = len(data)
            if (
                size >= 16
                and int.from_bytes(data[12:16], "little") <= size
                and int.from_bytes(data[4:8], "little") == self.nbytes
            ):
                try:
                    raw = blosc_decompress(data)
                except Exception:
                    pass  # the general path decodes it again and raises with the stage named
                else:
                    return np.frombuffer(raw, dtype=self.dtype).reshape(self.chunks, order=self.order)
        if self._plain and type(data) in (bytes, memoryview) and len(data) == self.nbytes:
            plain = np.frombuffer(data, dtype=self.dtype).reshape(self.chunks, order=self.order)
            if out is not None:
                np.copyto(out, plain)
                return out
            return plain.copy(order=self.order) if writable else plain
        stage = "reading the chunk bytes"
        try:
            view = _byte_view(data)
            if self.compressor is not None:
                stage = f"compressor {self.compressor!r}"
                if isinstance(self.compressor, Blosc):
                    check_blosc_frame(view)
                if self._declared_size is not None:
                    declared = self._declared_size(view)
                    if declared is not None:
                        if declared != self.nbytes:
                            raise CodecError(self._size_message(key, declared, "declared in its header"))
                        if self._blosc_direct:
                            # numcodecs.blosc.decompress, the C call under Blosc.decode without its
                            # buffer normalisation: half the time on small chunks (the frame was
                            # checked above: decompress itself reads past a truncated one).
                            if out is None and not writable and self._swap is None:
                                raw = blosc_decompress(view)
                                return np.frombuffer(raw, dtype=self.dtype).reshape(
                                    self.chunks, order=self.order
                                )
                            target = out if out is not None else self._empty()
                            flat = target.reshape(-1, order="A")  # a view: target is contiguous
                            blosc_decompress(
                                view, flat if self._buffer_dtype is None else flat.view(self._buffer_dtype)
                            )
                            return target if self._swap is None else _to_native(target)
                        target = out if out is not None else self._empty()
                        buffer = target if self._buffer_dtype is None else target.view(self._buffer_dtype)
                        if self._zstd_direct:
                            # numcodecs.zstd.decompress, the C call under Zstd.decode without its
                            # two buffer normalisations (~8 us of a 64 KiB inner chunk's ~80).
                            zstd_decompress(view, buffer)
                        else:
                            self.compressor.decode(data, out=buffer)
                        return target if self._swap is None else _to_native(target)
                chunk: Any = self._decode_step(self.compressor, data, len(self.filters))
            else:
                chunk = data
            if self._swap is not None:
                stage = f"reading {self._swap.str} elements"
                chunk = self._from_stored_order(chunk, key)
            for i in reversed(range(len(self.filters))):
                stage = f"filters[{i}] {self.filters[i]!r}"
                chunk = self._decode_step(self.filters[i], chunk, i)
            stage = "reshaping the decoded data to the chunk"
            arr = self._as_object_chunk(chunk, key) if self.is_object else self._as_fixed_chunk(chunk, key)
        except CodecError:
            raise
        except LimitExceeded as exc:
            raise CodecError(
                f"cannot decode chunk {key!r}: {stage} refused: {exc} (chunk shape {self.chunks}, "
                f"dtype {self.dtype}: {self.nbytes} bytes decoded; limits come from the chunk shape "
                "and azarr.config 'max_chunk_bytes')"
            ) from exc
        except UnsafeDecodeError as exc:  # a third-party codec with its own gate
            raise UnsafeCodecError(f"chunk {key!r}: {stage} refused to decode: {exc}") from exc
        except Exception as exc:
            raise CodecError(
                f"cannot decode chunk {key!r}: {stage} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if out is not None:
            np.copyto(out, arr)
            return out
        if writable and not arr.flags.writeable:  # e.g. a view of immutable decompressed bytes
            arr = arr.copy(order=self.order)
        return arr

    def _decode_outer(self, data: BytesLike, key: str) -> BytesLike:
        """Undo the bytes -> bytes codecs after the innermost one (a v3 chain's), last first:
        checksums are verified and cut off without a copy; others decode within their limit."""
        stage = "reading the chunk bytes"
        try:
            buf: Any = data
            base = self._outer_base
            for i in reversed(range(len(self._outer))):
                codec = self._outer[i]
                stage = f"codec {codec!r}"
                if is_checksum(codec):
                    buf = strip_checksum(codec, _byte_view(buf))
                else:
                    buf = self._decode_step(codec, buf, base + i)
        except LimitExceeded as exc:
            raise CodecError(
                f"cannot decode chunk {key!r}: {stage} refused: {exc} (limits come from the chunk "
                "shape and azarr.config 'max_chunk_bytes')"
            ) from exc
        except Exception as exc:
            raise CodecError(
                f"cannot decode chunk {key!r}: {stage} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return buf if isinstance(buf, bytes | memoryview) else _byte_view(buf)

    def _from_stored_order(self, data: Any, key: str) -> NDArray:
        """Elements serialized in another byte order (a v3 ``bytes`` codec's ``endian``), in
        this machine's order: what the filters, or the chunk, hold in memory."""
        assert self._swap is not None
        view = _byte_view(data)
        if len(view) % self._swap.itemsize:
            raise CodecError(
                f"cannot decode chunk {key!r}: {len(view)} bytes are not a whole number of "
                f"{self._swap.itemsize}-byte {self._swap} elements"
            )
        return np.frombuffer(view, dtype=self._swap).astype(self._swap.newbyteorder("="))

    def _decode_step(self, codec: Codec, buf: Any, stage: int) -> Any:
        """Decode one step producing at most ``_limits[stage]`` bytes (see `._bounded`)."""
        if is_unpickling_codec(codec):
            # Only reached when pickle is allowed (checked in decode()): trusted data.
            return unpickle(buf)
        return decode_stage(codec, buf, self._limits[stage], count=self.size if stage == 0 else None)

    def _check_out(self, out: NDArray) -> None:
        if not isinstance(out, np.ndarray):
            raise ValueError(f"out must be a numpy.ndarray, got {type(out).__name__}")
        if out.shape != self.chunks or out.dtype != self.dtype:
            raise ValueError(
                f"out must have the chunk shape {self.chunks} and dtype {self.dtype}, "
                f"got shape {out.shape} and dtype {out.dtype}"
            )
        if not out.flags.writeable:
            raise ValueError("out must be writable")
        contiguous = out.flags.c_contiguous if self.order == "C" else out.flags.f_contiguous
        if not contiguous:
            raise ValueError(f"out must be {self.order}-contiguous (the chunk's order)")

    def decode_for_copy(self, data: BytesLike, *, key: str) -> NDArray:
        """`decode` for a caller that only copies out of the result, before its next
        call on this thread: compressed chunks of 64 KiB to 16 MiB are decoded into a
        chunk buffer the thread reuses, instead of fresh memory each time (a new chunk-sized
        allocation is page-faulted in, 4 KiB at a time, on every call).

        Raises as `decode`.
        """
        if self._declared_size is not None and _SCRATCH_MIN_BYTES <= self.nbytes <= _SCRATCH_MAX_BYTES:
            return self.decode(data, key=key, out=_scratch_chunk(self.dtype, self.chunks, self.order))
        return self.decode(data, key=key, writable=False)

    def scratch_decoder(self) -> Callable[[BytesLike], NDArray | None] | None:
        """`decode_for_copy` for many chunks in a row on this thread, its checks made once.

        For a chain whose stored chunk is one Zstd frame of the chunk's bytes in memory order
        (no filters, no checksum or other outer codec, no byte swap: the usual inner chunk of
        a shard), a function ``decode(data)`` returning the chunk decoded into this thread's
        scratch chunk (valid until the next call on this thread), or None when ``data`` needs
        the general path (its frame does not declare exactly `nbytes`, or Zstd fails on it):
        `decode_for_copy` then decodes it again and raises what is wrong. None for other chains.
        About 15 µs less per 64 KiB inner chunk than `decode_for_copy` (its checks of ``out``,
        the codec chain and the buffers, per call).
        """
        if not (
            self._zstd_direct
            and not self._outer
            and self._swap is None
            and self._buffer_dtype is None
            and not self.uses_pickle
            and _SCRATCH_MIN_BYTES <= self.nbytes <= _SCRATCH_MAX_BYTES
        ):
            return None
        target = _scratch_chunk(self.dtype, self.chunks, self.order)
        declared_size, nbytes = self._declared_size, self.nbytes
        assert declared_size is not None

        def decode(data: BytesLike) -> NDArray | None:
            try:
                view = _byte_view(data)
                if declared_size(view) != nbytes:
                    return None
                zstd_decompress(view, target)
            except Exception:
                return None  # the general path says what is wrong
            return target

        return decode

    def scratch_run_decoder(
        self,
    ) -> Callable[[memoryview, Sequence[tuple[int, int]]], NDArray | None] | None:
        """`scratch_decoder` for inner chunks stored back to back: one Zstd call for many.

        ``decode(data, spans)`` decodes the frames at ``spans`` of ``data`` (``(start,
        stop)`` byte spans, each starting where the one before ends, their chunks at most
        4 MiB in all) in one call of numcodecs' ``zstd.decompress`` into a buffer this
        thread reuses, and returns it as an array of shape ``(len(spans), *chunks)`` (valid
        until the next call on this thread); None when the general path is needed: a frame
        whose header differs from the first's (which must declare exactly `nbytes`), one
        that does not end at its span's end, or Zstd failing. The caller then decodes them
        one by one, which says what is wrong. None for chains `scratch_decoder` does not
        serve, for order "F", and with a numcodecs that decodes only a call's first frame.

        Why: ``ZSTD_decompress`` creates a decompression context per call, and creating
        one runs ``cpuid`` twice, which traps to the hypervisor on a virtual machine: ~10
        µs per call on this project's benchmark host, about an eighth of a 64 KiB inner
        chunk's decode (``benchmarks/README.md``, "Sharding"). Numcodecs' build of zstd
        decodes Huffman literals with its assembly loop, ``zstandard``'s without: a context
        kept per thread through that library gained nothing measurable; one call per run
        of inner chunks keeps numcodecs' decoder and pays for the context once per run.
        """
        if (
            self.order != "C"
            or self.scratch_decoder() is None
            or self.nbytes * 2 > _RUN_MAX_BYTES
            or not _zstd_decodes_frames_in_one_call()
        ):
            return None
        nbytes, dtype, chunks = self.nbytes, self.dtype, self.chunks

        def decode(data: memoryview, spans: Sequence[tuple[int, int]]) -> NDArray | None:
            count = len(spans)
            if count * nbytes > _RUN_MAX_BYTES:
                return None
            try:
                start, stop = spans[0]
                found = zstd_size_header(data[start:stop])
                if found is None or found[0] != nbytes:
                    return None
                header, end = data[start : start + found[1]], start
                for start, stop in spans:
                    # Back to back, the same header bytes up to the size field (so the same
                    # declared size), each frame ending at its span's end.
                    if start != end or data[start : start + len(header)] != header:
                        return None
                    if zstd_frame_size(data[start:stop]) != stop - start:
                        return None
                    end = stop
                target = _scratch_run(count * nbytes)
                zstd_decompress(data[spans[0][0] : spans[-1][1]], target)
            except Exception:
                return None  # one by one, the general path says what is wrong
            return target.view(dtype).reshape((count, *chunks))

        return decode

    def _empty(self) -> NDArray:
        return np.empty(self.chunks, dtype=self.dtype, order=self.order)

    def _size_message(self, key: str, got: int, how: str) -> str:
        return (
            f"cannot decode chunk {key!r}: it decompresses to {got} bytes ({how}), expected "
            f"{self.nbytes} (chunk shape {self.chunks}, dtype {self.dtype}, compressor {self.compressor!r})"
        )

    def _as_fixed_chunk(self, chunk: Any, key: str) -> NDArray:
        arr = np.asarray(ensure_ndarray_like(chunk))
        if arr.dtype.hasobject:
            raise CodecError(
                f"cannot decode chunk {key!r}: the filters produced an object array but the "
                f"array dtype is {self.dtype}"
            )
        if arr.ndim > 1 and arr.shape == self.chunks and arr.dtype == self.dtype:
            # A shape-aware codec (pickle, json2, msgpack2) returned the chunk in
            # logical order: keep it (see decode() Notes).
            return np.asarray(arr, order=self.order)
        flat = arr.reshape(-1, order="A")
        if flat.nbytes != self.nbytes:
            raise CodecError(self._size_message(key, flat.nbytes, f"after {len(self.filters)} filter(s)"))
        if flat.dtype != self.dtype:
            flat = flat.view(self.dtype)
        return self._shape_chunk(flat)

    def _shape_chunk(self, flat: NDArray) -> NDArray:
        """The chunk from its elements in stored order (a view)."""
        if self._perm is None:
            return flat.reshape(self.chunks, order=self.order)
        assert self._inverse is not None
        return flat.reshape(self._layout_shape).transpose(self._inverse)

    def _as_object_chunk(self, chunk: Any, key: str) -> NDArray:
        if not isinstance(chunk, np.ndarray) or chunk.dtype != self.dtype:
            got = chunk.dtype if isinstance(chunk, np.ndarray) else type(chunk).__name__
            raise CodecError(
                f"cannot decode chunk {key!r}: cannot read object array without object codec "
                f"(the pipeline decoded to {got}; the first filter must be an object codec such "
                f"as vlen-utf8, got filters {list(self.filters)!r})"
            )
        if chunk.size != self.size:
            raise CodecError(
                f"cannot decode chunk {key!r}: decoded {chunk.size} elements, expected {self.size} "
                f"(chunk shape {self.chunks}, object codec {self.filters[0]!r})"
            )
        if chunk.ndim > 1 and chunk.shape == self.chunks and self._perm is None:
            return np.asarray(chunk, order=self.order)  # logical order (see decode() Notes)
        return self._shape_chunk(chunk.reshape(-1, order="A"))

    # ------------------------------------------------------------------ encode

    def encode(self, chunk: NDArray, *, key: str) -> bytes:
        """Encode one full chunk for storage (zarr-python 2: ``Array._encode_chunk``).

        Parameters
        ----------
        chunk : numpy.ndarray
            Shape ``chunks``, dtype ``dtype``. Edge chunks are passed whole, padded
            with ``fill_value`` by the caller (zarr-python 2 always stores full
            chunks). Copied to ``order``-contiguous memory first if needed.
        key : str
            The chunk's store key, named in errors.

        Returns
        -------
        bytes
            The value to store (never a memoryview or bytearray). Without a
            compressor or filters this is the chunk's memory in ``order``.

        Raises
        ------
        CodecError
            A filter or the compressor failed (for example a ``vlen-utf8`` chunk
            holding a non-``str``), or an object array reached the compressor
            without an object codec. The message names ``key`` and the codec.
        ValueError
            ``chunk`` has the wrong shape or dtype (a caller bug).

        Notes
        -----
        Encoding with ``pickle`` is always allowed: writing a pickle is safe,
        only reading one runs code.
        """
        arr = np.asarray(chunk)
        if arr.shape != self.chunks or arr.dtype != self.dtype:
            raise ValueError(
                f"chunk {key!r} must have shape {self.chunks} and dtype {self.dtype}, "
                f"got shape {arr.shape} and dtype {arr.dtype}"
            )
        if self._plain:
            return arr.tobytes(order=self.order)
        # Codecs serialise memory as laid out ("A" order), so the layout *is*
        # the on-disk order.
        if self._perm is None:
            data: Any = np.asarray(arr, order=self.order)
        else:
            data = np.ascontiguousarray(arr.transpose(self._perm))
        if self._buffer_dtype is not None:
            data = data.view(self._buffer_dtype)
        stage = "encoding"
        try:
            for i, codec in enumerate(self.filters):
                stage = f"filters[{i}] {codec!r}"
                data = codec.encode(data)
            if isinstance(data, np.ndarray) and data.dtype.hasobject:
                raise CodecError(
                    f"cannot encode chunk {key!r}: cannot write object array without object codec "
                    f"(the first filter must be an object codec such as vlen-utf8, got filters "
                    f"{list(self.filters)!r})"
                )
            if self._swap is not None:
                stage = f"writing {self._swap.str} elements"
                data = np.asarray(data).astype(self._swap)
            if self.compressor is not None:
                stage = f"compressor {self.compressor!r}"
                if self._blosc_compress_args is not None:
                    # numcodecs.blosc.compress with Blosc.encode's own arguments, without its
                    # buffer normalisation (plain numeric chunks: bit-exact with Blosc.encode, tested).
                    data = blosc_compress(data, *self._blosc_compress_args)
                elif self._zstd_args is not None and (flat := _contiguous_bytes(data)) is not None:
                    data = zstd_compress(flat, *self._zstd_args)
                else:
                    data = self.compressor.encode(data)
            for codec in self._outer:
                stage = f"codec {codec!r}"
                data = codec.encode(data)
            stage = "converting the result to bytes"
            return _to_bytes(data)
        except CodecError:
            raise
        except Exception as exc:
            raise CodecError(
                f"cannot encode chunk {key!r}: {stage} failed: {type(exc).__name__}: {exc}"
            ) from exc

    def encode_buffer(self, chunk: NDArray, *, key: str) -> bytes | memoryview:
        """`encode`, but a chunk stored as its own memory comes back as a view of it.

        With no compressor and no filters the stored value *is* the chunk's memory in
        ``order``. When ``chunk`` is laid out so, this returns a 1-D ``memoryview`` of its
        bytes instead of a copy. When only its rows are (a chunk-shaped region of a wider
        array: ``values[0:256, 0:1024]`` of an ``(n, 8192)`` array, C order), it returns a
        2-D strided ``memoryview`` of bytes, one row of the chunk (the last axis, or the
        first for ``order="F"``) per row of the view, whose C-order bytes are the value:
        a file store writes the rows with one ``writev`` and no copy. zarr-python 2 copies
        such a region to a contiguous chunk first (``Array._process_for_setitem``).
        Everything else is `encode`'s ``bytes``.

        The view aliases ``chunk``: store it (``Store.set_blocking``, which copies it for
        stores that keep values) before anything changes ``chunk``. Its size in bytes is
        ``.nbytes`` (``len`` of a 2-D view counts rows).

        Raises
        ------
        CodecError, ValueError
            As `encode`.
        """
        if self._plain:
            arr = np.asarray(chunk)
            if arr.shape == self.chunks and arr.dtype == self.dtype:
                # The C-order traversal of ``c_order`` is the stored byte order.
                c_order = arr if self.order == "C" else arr.T
                if c_order.flags.c_contiguous:
                    # A 1-D byte view (for any dtype, unlike memoryview.cast).
                    return c_order.reshape(-1).view(np.uint8).data
                if self.nbytes >= _ROWS_MIN_CHUNK_BYTES:
                    rows = _byte_rows(c_order)
                    if rows is not None:
                        return rows.data
                return c_order.tobytes()  # what encode() returns, without checking again
        return self.encode(chunk, key=key)

    # ------------------------------------------------------------- fill value

    def fill_chunk(self, fill_value: Any = None) -> NDArray:
        """A new chunk-shaped array full of ``fill_value`` (for missing chunks).

        Parameters
        ----------
        fill_value : scalar or None
            The array's decoded fill value (``.zarray`` ``"fill_value"``).

        Returns
        -------
        numpy.ndarray
            Shape ``chunks``, dtype ``dtype``, contiguous in ``order``, writable.
            ``fill_value=None`` gives zeros for fixed-size dtypes and ``None``
            elements for object dtypes. For object dtypes every element is the
            same ``fill_value`` object, as in zarr-python 2.

        Notes
        -----
        zarr-python 2 with ``fill_value=None`` leaves missing chunks
        uninitialised (``np.empty``) on read, but uses zeros when it builds a
        chunk for a partial write (``Array._process_for_setitem``), "so any region
        beyond the array has consistent and compressible data". azarr uses zeros
        in both cases, so reads are deterministic and match what it writes.
        """
        if fill_value is None:
            if self.is_object:
                return np.empty(self.chunks, dtype=self.dtype, order=self.order)  # all None
            return np.zeros(self.chunks, dtype=self.dtype, order=self.order)
        arr = self._empty()
        if self.dtype == object:
            # fill() stores the value itself in every slot; assignment would try
            # to broadcast list or array fill values.
            arr.fill(fill_value)
        else:
            arr[...] = fill_value
        return arr

    def is_fill_chunk(self, chunk: NDArray, fill_value: Any) -> bool:
        """Whether every element of ``chunk`` equals ``fill_value`` (``write_empty_chunks=False``).

        zarr-python 2: ``zarr.util.all_equal``.

        Parameters
        ----------
        chunk : numpy.ndarray
            A chunk-shaped array.
        fill_value : scalar or None
            The array's decoded fill value.

        Returns
        -------
        bool
            ``False`` when ``fill_value`` is ``None`` (such chunks are always
            written, as in zarr-python 2) or cannot be converted to the chunk's
            dtype. NaN equals NaN (also inside complex and structured values),
            NaT equals NaT, structured dtypes compare field by field, object
            arrays compare element by element (ndarray elements by value).

        Notes
        -----
        zarr-python 2 treats any falsy fill value as "all elements falsy", so an
        object chunk of ``None`` counts as empty for ``fill_value=""``. azarr
        requires equality, so it never drops a chunk a reader would see
        differently.
        """
        if fill_value is None:
            return False
        arr = np.asarray(chunk)
        if arr.dtype == object:
            return object_all_equal(arr, fill_value)
        try:
            fv = np.asarray(fill_value, dtype=arr.dtype)
        except (TypeError, ValueError, OverflowError):
            return False
        return _all_equal(arr, fv)


# ----------------------------------------------------------------- helpers


def _resolve(conf: Mapping[str, Any], where: str, source: str | None) -> Codec:
    """Build a numcodecs codec from its JSON config, with errors naming where it came from."""
    of = f" of {source!r}" if source else ""
    if not isinstance(conf, Mapping):
        raise CodecError(f"{where}{of} must be a JSON object with an 'id', got {conf!r}")
    codec_id = conf.get("id")
    if not isinstance(codec_id, str):
        raise CodecError(f"{where}{of} has no string 'id': {dict(conf)!r}")
    config_copy = copy.deepcopy(dict(conf))
    try:
        return numcodecs.get_codec(config_copy)
    except Exception as exc:
        if type(exc).__name__ == "UnknownCodecError" or (
            isinstance(exc, ValueError) and "codec not available" in str(exc)
        ):
            raise CodecError(f"unknown codec id {codec_id!r} in {where}{of}") from exc
        raise CodecError(
            f"invalid configuration for codec {codec_id!r} in {where}{of}: {type(exc).__name__}: {exc}"
        ) from exc


def _stored_dtype(
    dtype: np.dtype[Any], filters: tuple[Codec, ...], endian: str | None
) -> np.dtype[Any] | None:
    """The serialized element type in stored byte order, when that is not this machine's
    (a v3 ``bytes`` codec with the other ``endian``); None when bytes are stored as held."""
    if endian is None:
        return None
    serialized = dtype
    for codec in filters:
        for name in ("astype", "encode_dtype"):
            value = getattr(codec, name, None)
            if value is not None:
                serialized = np.dtype(value)
                break
    stored = serialized.newbyteorder("<" if endian == "little" else ">")
    native = serialized.newbyteorder("=")
    return None if stored == native else stored


def _swaps_in_place(dtype: np.dtype[Any]) -> bool:
    """Whether chunks of ``dtype`` decoded in the stored byte order are fixed by ``byteswap``."""
    return dtype.fields is None and dtype.kind in "biufcmM" and dtype.subdtype is None


def _to_native(chunk: NDArray) -> NDArray:
    """``chunk``, whose memory holds its elements in the other byte order, fixed in place."""
    chunk.byteswap(inplace=True)
    return chunk


def _contiguous_bytes(data: Any) -> Any:
    """``data``'s memory as one buffer when it is contiguous in C or F order (a 1-D ``uint8``
    view of an array, in memory order as numcodecs serialises it; ``bytes`` as is), else None."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, np.ndarray) and not data.dtype.hasobject:
        layout: Any = data.flags
        return data.ravel(order="K").view(np.uint8) if layout.c_contiguous or layout.f_contiguous else None
    return None


def _blosc_compress_args(
    compressor: Codec | None, dtype: np.dtype[Any], filters: tuple[Codec, ...]
) -> tuple[Any, ...] | None:
    """``numcodecs.blosc.compress``'s arguments after the source, as ``Blosc.encode`` passes
    them, for chunks it would pass unchanged (numeric dtypes, no filters); None otherwise or
    when this numcodecs keeps them elsewhere (then ``Blosc.encode`` is called)."""
    if not isinstance(compressor, Blosc) or filters or dtype.kind not in "biufc" or dtype.fields is not None:
        return None
    if str(getattr(dtype.type, "__module__", "")).startswith("ml_dtypes"):
        return None
    cname = getattr(compressor, "_cname_bytes", None)
    if not isinstance(cname, bytes):
        return None
    shuffle = compressor.shuffle
    if shuffle == Blosc.AUTOSHUFFLE:  # resolved by Blosc.encode from the item size, not by compress
        shuffle = Blosc.BITSHUFFLE if dtype.itemsize == 1 else Blosc.SHUFFLE
    args: tuple[Any, ...] = (cname, compressor.clevel, shuffle, compressor.blocksize)
    return (*args, compressor._typesize) if hasattr(compressor, "_typesize") else args


@functools.lru_cache(maxsize=256)
def _exports_buffer(dtype: np.dtype[Any]) -> bool:
    """Whether arrays of ``dtype`` export a buffer (NumPy refuses for datetime64/timedelta64)."""
    try:
        memoryview(np.empty(1, dtype))  # type: ignore[arg-type]
    except (ValueError, TypeError, BufferError):
        return False
    return True


def _byte_view(data: Any) -> memoryview:
    view = memoryview(data)
    if view.ndim != 1 or view.format not in ("B", "b", "c"):
        view = view.cast("B")
    return view


#: Chunks (bytes) from which `ChunkCodec.encode_buffer` returns a view of a chunk's
#: rows rather than a contiguous copy: below it the copy is cheaper than building the view.
_ROWS_MIN_CHUNK_BYTES = 64 << 10
#: Rows of fewer bytes are copied: a ``writev`` of many tiny pieces costs more than the copy.
_ROWS_MIN_ROW_BYTES = 1 << 10


def _byte_rows(arr: NDArray) -> NDArray | None:
    """``arr`` as a 2-D ``uint8`` view, one contiguous row of bytes per row (its last axis),
    or None when its rows are not contiguous or its outer axes do not merge without a copy."""
    if arr.ndim < 2 or arr.strides[-1] != arr.itemsize or arr.dtype.hasobject:
        return None
    if arr.shape[-1] * arr.itemsize < _ROWS_MIN_ROW_BYTES:
        return None
    outer = arr.shape[:-1]
    # The outer axes merge into one when each steps over whole runs of the next.
    for i in range(len(outer) - 1):
        if arr.strides[i] != arr.strides[i + 1] * arr.shape[i + 1]:
            return None
    width = arr.shape[-1] * arr.itemsize
    return np.lib.stride_tricks.as_strided(
        arr.view(np.uint8), shape=(math.prod(outer), width), strides=(arr.strides[-2], 1), writeable=False
    )


def _to_bytes(data: Any) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    result: bytes = ensure_bytes(data)  # ndarray: its memory, in its own layout
    return result


def _blosc_size(view: memoryview) -> int | None:
    # Blosc 1 header: version, versionlz, flags, typesize, nbytes, blocksize, cbytes.
    return int.from_bytes(view[4:8], "little") if len(view) >= 16 else None


def _lz4_size(view: memoryview) -> int | None:
    # numcodecs' LZ4 prefixes the block with the decompressed size (little-endian int32).
    return int.from_bytes(view[:4], "little") if len(view) >= 4 else None


_zstd_size = zstd_content_size


def _declared_size_reader(compressor: Codec | None) -> Callable[[memoryview], int | None] | None:
    """The header parser for compressors whose ``decode(out=...)`` writes in place.

    Measured on numcodecs 0.16 (tracemalloc): Blosc, Zstd and LZ4 decompress
    into ``out`` with no intermediate buffer. Zlib, GZip, BZ2 and LZMA
    decompress into a temporary and copy, so passing ``out`` gains nothing.
    """
    if isinstance(compressor, Blosc):
        return _blosc_size
    if isinstance(compressor, Zstd):
        return _zstd_size
    if isinstance(compressor, LZ4):
        return _lz4_size
    return None


def _all_equal(arr: NDArray, fv: NDArray) -> bool:
    """Elementwise ``arr == fv`` for every element, NaN == NaN, NaT == NaT; fv broadcasts."""
    if arr.dtype.names is not None:
        return all(_all_equal(arr[name], fv[name]) for name in arr.dtype.names)
    kind = arr.dtype.kind
    if kind == "O":  # an object field of a structured dtype
        pairs = zip(arr.flat, np.broadcast_to(fv, arr.shape).flat, strict=True)
        return all(values_equal(a, b) for a, b in pairs)
    if kind == "c":
        return _all_equal(arr.real, fv.real) and _all_equal(arr.imag, fv.imag)
    if kind in "biuf" and fv.ndim == 0 and not fv:
        return not np.any(arr)  # zero fill (the common case): one pass, no temporary
    if kind == "f" and np.isnan(fv).any():
        return bool(np.all((arr == fv) | (np.isnan(arr) & np.isnan(fv))))
    if kind in "mM" and np.isnat(fv).any():
        return bool(np.all((arr == fv) | (np.isnat(arr) & np.isnat(fv))))
    return bool(np.all(arr == fv))


# ------------------------------------------------------------- async helpers


async def decode_chunk_async(
    codec: ChunkCodec, data: BytesLike, key: str, out: NDArray | None = None
) -> NDArray:
    """`ChunkCodec.decode` in the codec pool (never on the event loop).

    Parameters and errors as for `ChunkCodec.decode`. If the awaiting task
    is cancelled while the decode runs, the cancellation completes only after
    the decode has finished, so ``out`` is never written after this returns.
    """
    return await run_in_codec_pool(functools.partial(codec.decode, data, key=key, out=out))


async def encode_chunk_async(codec: ChunkCodec, chunk: NDArray, key: str) -> bytes:
    """`ChunkCodec.encode` in the codec pool (never on the event loop).

    Parameters and errors as for `ChunkCodec.encode`.
    """
    return await run_in_codec_pool(functools.partial(codec.encode, chunk, key=key))
