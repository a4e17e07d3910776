"""``.zarray``: the array metadata document (Zarr v2 spec, "Arrays / Metadata")."""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from azarr import config
from azarr.codecs._chain import CodecChain, v2_chain
from azarr.errors import MetadataError
from azarr.metadata._codecs import OBJECT_CODEC_IDS, parse_codec_config, parse_filters
from azarr.metadata._dtype import check_dtype, dtype_from_json, dtype_to_json
from azarr.metadata._fill_value import decode_fill_value, encode_fill_value
from azarr.metadata._json import decode_json, encode_json
from azarr.metadata._keys import ZARR_FORMAT, ZARRAY, check_zarr_format, metadata_error, short_repr

#: Keys every ``.zarray`` must have (spec: "The following keys MUST be present").
REQUIRED_ARRAY_KEYS = (
    "zarr_format",
    "shape",
    "chunks",
    "dtype",
    "compressor",
    "fill_value",
    "order",
    "filters",
)


@dataclass(frozen=True, eq=False)
class ArrayMetadata:
    """The contents of a ``.zarray`` document, validated.

    Every construction path (``from_json``, the constructor, `replace`)
    validates all fields, so an instance always encodes to a valid document.

    Parameters
    ----------
    shape : tuple of int
        Array extent per dimension, each >= 0. ``()`` for a 0-d array.
    chunks : tuple of int
        Chunk extent per dimension, each >= 1, same length as ``shape``.
    dtype : numpy.dtype
        Element type (see `dtype_to_json` for what is supported).
    compressor : dict or None
        numcodecs configuration with an ``"id"``, or None.
    filters : tuple of dict or None
        numcodecs configurations applied before the compressor, or None.
        Object dtypes need an object codec (``OBJECT_CODEC_IDS``) first.
    fill_value : Any
        Decoded fill value (see `decode_fill_value`), or None. Values given
        to the constructor are converted to ``dtype`` (``0`` -> the dtype's zero).
    order : {"C", "F"}
        Memory layout of each chunk.
    dimension_separator : {".", "/"}
        Separator in chunk keys; the spec's default is ``"."``.
    zarr_format : int
        Always 2.

    Notes
    -----
    `to_dict` always writes ``dimension_separator``. zarr-python 2.18
    writes it at creation only when a separator was chosen (by the caller or
    the store), but writes it unconditionally whenever it rewrites ``.zarray``
    (``Array._flush_metadata_nosync``: resize, append, fill_value). When the key
    is absent zarr-python 2 falls back to the *store's* separator (``"/"`` for a
    ``NestedDirectoryStore``), so omitting it would be ambiguous.

    Equality compares the encoded documents, so NaN fill values compare equal.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype[Any]
    compressor: dict[str, Any] | None
    filters: tuple[dict[str, Any], ...] | None
    fill_value: Any
    order: Literal["C", "F"]
    dimension_separator: Literal[".", "/"] = "."
    zarr_format: int = ZARR_FORMAT
    # Derived once in __post_init__: the encoded fill value (for to_dict/__eq__)
    # and the chunk grid (chunk_key and cdata_shape sit on the per-chunk hot path).
    _fill_json: Any = field(init=False, repr=False)
    _cdata_shape: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fields = _validate(
            where="ArrayMetadata",
            zarr_format=self.zarr_format,
            shape=self.shape,
            chunks=self.chunks,
            dtype=self.dtype,
            compressor=self.compressor,
            filters=self.filters,
            fill_value=self.fill_value,
            order=self.order,
            dimension_separator=self.dimension_separator,
        )
        # Frozen dataclass: normalized values are stored through object.__setattr__.
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    # -- parsing and encoding ------------------------------------------------

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], *, key: str = ZARRAY) -> ArrayMetadata:
        """Parse and validate a ``.zarray`` document (zarr-python 2 ``decode_array_metadata``).

        Unknown extra keys are ignored, as the spec says implementations should.

        Parameters
        ----------
        data : bytes, str or Mapping
            The stored JSON, or an already-decoded object (consolidated metadata).
        key : str
            Store key of the document, named in every error.

        Returns
        -------
        ArrayMetadata

        Raises
        ------
        MetadataError
            Not a JSON object; a required key missing; ``zarr_format`` not 2;
            ``shape`` not a list of non-negative ints; ``chunks`` not a list of
            positive ints of the same length; an unknown ``dtype``; ``order`` not
            C/F; ``dimension_separator`` not "."/"/"; ``compressor``/``filters``
            malformed or naming a codec numcodecs does not know; an object dtype
            whose first filter is not an object codec; an invalid ``fill_value``.
        """
        where = repr(key)
        document = data if isinstance(data, Mapping) else decode_json(data, key=key)
        if not isinstance(document, Mapping):
            raise metadata_error(where, None, f"must be a JSON object, got {type(document).__name__}")
        missing = [name for name in REQUIRED_ARRAY_KEYS if name not in document]
        if missing:
            raise metadata_error(where, None, f"is missing required key(s) {missing}")
        # The JSON-typed fields are decoded here (their errors name the key);
        # the rest is checked by _validate, with the same key.
        zarr_format = check_zarr_format(document["zarr_format"], where=where)
        dtype = dtype_from_json(document["dtype"], key=key)
        _check_itemsize(dtype, where)
        separator = document.get("dimension_separator")
        fields = _validate(
            where=where,
            zarr_format=zarr_format,
            shape=document["shape"],
            chunks=document["chunks"],
            dtype=dtype,
            compressor=document["compressor"],
            filters=document["filters"],
            fill_value=decode_fill_value(document["fill_value"], dtype, key=key),
            order=document["order"],
            # null is read as absent, as zarr-python 2 does (``if dimension_separator:``).
            dimension_separator="." if separator is None else separator,
        )
        # Validated once: build the instance from the checked fields (cls(**fields) would run
        # __post_init__'s _validate again -- a third of opening a consolidated hierarchy).
        metadata = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(metadata, name, value)
        return metadata

    def to_dict(self) -> dict[str, Any]:
        """The document as a JSON-ready dict (zarr-python 2 ``encode_array_metadata``).

        ``dtype`` and ``fill_value`` are encoded; codec configurations are
        copies. ``dimension_separator`` is always included (see the class notes).
        """
        return {
            "zarr_format": self.zarr_format,
            "shape": list(self.shape),
            "chunks": list(self.chunks),
            "dtype": dtype_to_json(self.dtype),
            "compressor": copy.deepcopy(self.compressor),
            "fill_value": copy.deepcopy(self._fill_json),
            "order": self.order,
            "filters": None if self.filters is None else [copy.deepcopy(f) for f in self.filters],
            "dimension_separator": self.dimension_separator,
        }

    def to_json(self) -> bytes:
        """The ``.zarray`` document bytes, formatted as zarr-python 2 writes them."""
        return encode_json(self.to_dict())

    def replace(self, **changes: Any) -> ArrayMetadata:
        """A copy with some fields changed, validated again (e.g. ``replace(shape=(20, 10))``).

        Raises
        ------
        MetadataError
            The changed metadata is invalid.
        TypeError
            An unknown field name.
        """
        return dataclasses.replace(self, **changes)

    # -- derived properties --------------------------------------------------

    @property
    def ndim(self) -> int:
        """Number of dimensions (0 for a 0-d array)."""
        return len(self.shape)

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension: ``ceil(shape / chunks)``.

        A zero-length dimension has 0 chunks. A 0-d array gives ``()`` (its
        single chunk has coordinates ``()``); zarr-python 2's ``cdata_shape``
        says ``(1,)`` there, but `nchunks` is 1 either way.
        """
        return self._cdata_shape

    @property
    def nchunks(self) -> int:
        """Total number of chunks in the grid (1 for a 0-d array, 0 if any extent is 0)."""
        return math.prod(self.cdata_shape)

    def chunk_key(self, coords: Sequence[int]) -> str:
        """Store key of a chunk, relative to the array's path (spec "Chunks").

        Indices joined by ``dimension_separator``: ``(2, 4)`` -> ``"2.4"`` or
        ``"2/4"``. A 0-d array's only chunk is ``"0"`` (zarr-python 2 uses
        ``_chunk_key((0,))``); it accepts ``()`` or ``(0,)``.

        Parameters
        ----------
        coords : sequence of int
            Chunk grid coordinates, one per dimension.

        Raises
        ------
        ValueError
            Wrong number of coordinates.
        IndexError
            A coordinate outside the chunk grid.
        """
        if not self.shape:
            if tuple(coords) not in ((), (0,)):
                raise IndexError(f"a 0-d array has the single chunk (), got {tuple(coords)}")
            return "0"
        grid = self.cdata_shape
        if len(coords) != len(grid):
            raise ValueError(f"chunk coordinates {tuple(coords)} do not have {len(grid)} dimensions")
        for index, extent in zip(coords, grid, strict=True):
            if not 0 <= index < extent:
                raise IndexError(f"chunk coordinates {tuple(coords)} are outside the chunk grid {grid}")
        return self.dimension_separator.join(map(str, coords))

    @property
    def chain(self) -> CodecChain:
        """``order``, ``filters`` and ``compressor`` as a `CodecChain` (what `ChunkCodec` runs)."""
        return v2_chain(self.order, self.compressor, self.filters)

    #: What every chunk key of a >= 1-d array starts with: nothing in v2.
    chunk_key_prefix = ""

    @property
    def sharding(self) -> None:
        """None: Zarr v2 has no sharding (the v3 name, for code serving both formats)."""
        return None

    @property
    def shards(self) -> None:
        """None: Zarr v2 has no sharding (zarr-python 3's name)."""
        return None

    @property
    def inner_chunks(self) -> tuple[int, ...]:
        """`chunks` (in Zarr v3, sharded arrays' inner chunks; v2 has no sharding)."""
        return self.chunks

    def chunk_coords(self, name: str) -> tuple[int, ...] | None:
        """Grid coordinates of the chunk key ``name`` (relative to the array), None if it is none."""
        if not self.shape:
            return () if name == "0" else None
        parts = name.split(self.dimension_separator)
        if len(parts) != len(self.shape) or not all(p.isdigit() for p in parts):
            return None
        return tuple(int(p) for p in parts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayMetadata):
            return NotImplemented
        return self.to_dict() == other.to_dict()


#: Largest extent of a dimension: NumPy indexes with int64, so larger shapes
#: could never be read (and would overflow later arithmetic in C).
MAX_EXTENT = 2**63 - 1
#: Most dimensions accepted (NumPy's own limit is 64).
MAX_NDIM = 64


def _int_tuple(value: Any, *, where: str, name: str, minimum: int) -> tuple[int, ...]:
    kind = "non-negative" if minimum == 0 else "positive"
    if not isinstance(value, (list, tuple)):
        raise metadata_error(where, name, f"must be a list of {kind} integers, got {short_repr(value)}")
    if len(value) > MAX_NDIM:
        raise metadata_error(where, name, f"has {len(value)} dimensions, more than {MAX_NDIM}")
    for item in value:
        # bool is an int subclass, but [true] is not a shape.
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)) or item < minimum:
            raise metadata_error(
                where, name, f"must be a list of {kind} integers, got {short_repr(list(value))}"
            )
        if item > MAX_EXTENT:
            raise metadata_error(where, name, f"has an extent over 2**63 - 1: {short_repr(item)}")
    return tuple(int(item) for item in value)


def _check_itemsize(dtype: np.dtype[Any], where: str) -> None:
    # Before the fill value is decoded: that allocates one element, which for a
    # structured type with a huge subarray could be gigabytes.
    # max_itemsize: a selection of one element allocates one element, whatever the chunk.
    for name in ("max_itemsize", "max_chunk_bytes"):
        limit = int(config.get(name))
        if dtype.itemsize > limit:
            raise metadata_error(
                where,
                "dtype",
                f"has elements of {dtype.itemsize} bytes, more than {name} ({limit} bytes); if "
                f"this data is trusted, raise the limit with azarr.config.set({name}={dtype.itemsize})",
            )


def _validate(
    *,
    where: str,
    zarr_format: Any,
    shape: Any,
    chunks: Any,
    dtype: Any,
    compressor: Any,
    filters: Any,
    fill_value: Any,
    order: Any,
    dimension_separator: Any,
) -> dict[str, Any]:
    """Check and normalize every field; returns them plus the encoded fill value."""
    check_zarr_format(zarr_format, where=where)
    shape_t = _int_tuple(shape, where=where, name="shape", minimum=0)
    chunks_t = _int_tuple(chunks, where=where, name="chunks", minimum=1)
    if len(chunks_t) != len(shape_t):
        raise metadata_error(
            where,
            "chunks",
            f"has {len(chunks_t)} dimensions but 'shape' has {len(shape_t)}: {list(chunks_t)!r}",
        )
    if not isinstance(dtype, np.dtype):
        raise metadata_error(where, "dtype", f"must be a numpy.dtype, got {dtype!r}")
    try:
        check_dtype(dtype)
    except ValueError as exc:
        raise metadata_error(where, "dtype", f"is not supported: {exc}") from exc
    if order not in ("C", "F"):
        raise metadata_error(where, "order", f"must be 'C' or 'F', got {order!r}")
    if dimension_separator not in (".", "/"):
        raise metadata_error(where, "dimension_separator", f"must be '.' or '/', got {dimension_separator!r}")
    compressor_d = (
        None if compressor is None else parse_codec_config(compressor, where=where, field="compressor")
    )
    filters_t = parse_filters(filters, where=where)
    # zarr-python 2.18 reads filters[0] as the object codec
    # (Metadata2.decode_array_metadata); without one, chunks cannot be decoded.
    if dtype.hasobject and (not filters_t or filters_t[0]["id"] not in OBJECT_CODEC_IDS):
        first = filters_t[0]["id"] if filters_t else None
        raise metadata_error(
            where,
            "filters",
            f"must start with an object codec ({', '.join(sorted(OBJECT_CODEC_IDS))}) for "
            f"object dtype {dtype.str}, got first filter {first!r}",
        )
    # Encoding then decoding both validates the value and canonicalizes it (a
    # Python 0 becomes the dtype's zero scalar), so to_json cannot fail later.
    fill_json = encode_fill_value(fill_value, dtype, where=where)
    try:
        canonical = decode_fill_value(fill_json, dtype)
    except MetadataError as exc:  # pragma: no cover - encode output always decodes
        raise metadata_error(where, "fill_value", f"{fill_value!r} does not round-trip: {exc}") from exc
    if dtype.hasobject:
        canonical = fill_value  # object fill values are kept as given (zarr-python 2)
    return {
        "zarr_format": ZARR_FORMAT,
        "shape": shape_t,
        "chunks": chunks_t,
        "dtype": dtype,
        "compressor": compressor_d,
        "filters": filters_t,
        "fill_value": canonical,
        "order": order,
        "dimension_separator": dimension_separator,
        "_fill_json": fill_json,
        # Integer ceiling division: exact for any size (math.ceil(s / c) overflows a float).
        "_cdata_shape": tuple(-(-s // c) for s, c in zip(shape_t, chunks_t, strict=True)),
    }
