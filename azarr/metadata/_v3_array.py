"""``zarr.json`` of an array: the Zarr v3 array metadata document (v3 core spec, "Array metadata").

`ArrayV3Metadata` describes an array the way `ArrayMetadata` does for ``.zarray``
(``shape``, ``chunks``, ``dtype``, ``fill_value``, ``order``, ``cdata_shape``,
`chunk_key`, a `CodecChain`), so the array, its selections and the chunk
pipeline use either without asking which. What v3 adds is kept and written back:
``attributes`` (stored in this document), ``dimension_names``, the ``codecs`` list
as given, and extension members marked ``"must_understand": false``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from azarr.codecs import CodecChain
from azarr.codecs._sharding import SHARDING_CODEC, ShardingSpec, parse_sharding
from azarr.codecs._v3 import codec_name, parse_v3_codecs
from azarr.errors import MetadataError
from azarr.metadata._array import _check_itemsize, _int_tuple
from azarr.metadata._json import decode_json, to_jsonable
from azarr.metadata._keys import ZARR_JSON, metadata_error, short_repr
from azarr.metadata._v3_dtype import (
    StringKind,
    v3_dtype_from_json,
    v3_dtype_to_json,
    v3_fill_from_json,
    v3_fill_to_json,
)

__all__ = ["ArrayV3Metadata", "ChunkKeyEncoding", "check_extensions", "encode_v3_json"]

#: Members of an array ``zarr.json`` the spec defines.
_ARRAY_MEMBERS = frozenset(
    {
        "zarr_format",
        "node_type",
        "shape",
        "data_type",
        "chunk_grid",
        "chunk_key_encoding",
        "fill_value",
        "codecs",
        "attributes",
        "dimension_names",
        "storage_transformers",
    }
)
_REQUIRED = ("shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs")


def encode_v3_json(document: Mapping[str, Any]) -> bytes:
    """A ``zarr.json`` document's bytes as zarr-python 3 writes them (``json.dumps(indent=2)``;
    non-finite numbers in attributes as bare ``NaN``/``Infinity``, as it does)."""
    return json.dumps(to_jsonable(document, special_floats=False), indent=2, allow_nan=True).encode()


def check_extensions(document: Mapping[str, Any], known: frozenset[str], *, where: str) -> dict[str, Any]:
    """The extension members of a v3 document, once each is shown to be skippable.

    Spec 3.0, "Extensions": a member the implementation does not know may be ignored
    only when it is an object with ``"must_understand": false``.

    Raises
    ------
    MetadataError
        An unknown member without ``"must_understand": false`` (named).
    """
    extra: dict[str, Any] = {}
    for name, value in document.items():
        if name in known:
            continue
        if isinstance(value, Mapping) and value.get("must_understand") is False:
            extra[name] = copy.deepcopy(value)
            continue
        raise metadata_error(
            where,
            name,
            'is an extension azarr does not support, and it does not say "must_understand": false',
        )
    return extra


@dataclass(frozen=True)
class ChunkKeyEncoding:
    """How chunk grid coordinates become store keys (v3 spec, "Chunk key encoding").

    ``default``: ``"c"`` then the coordinates, each after a separator (``c/1/0``;
    ``c`` for a 0-d array). ``v2``: the coordinates joined (``1.0``; ``0`` for 0-d).
    """

    name: Literal["default", "v2"] = "default"
    separator: Literal["/", "."] = "/"

    @classmethod
    def from_json(cls, value: Any, *, where: str) -> ChunkKeyEncoding:
        """Parse a ``chunk_key_encoding`` member (an object, or its bare name).

        Raises
        ------
        MetadataError
            Another encoding, or a separator other than ``"/"``/``"."``.
        """
        if isinstance(value, str):
            name, config = value, {}
        elif isinstance(value, Mapping) and isinstance(value.get("name"), str):
            name, config = value["name"], value.get("configuration", {})
        else:
            raise metadata_error(
                where, "chunk_key_encoding", f"must be an object with a 'name', got {short_repr(value)}"
            )
        if name not in ("default", "v2"):
            raise metadata_error(where, "chunk_key_encoding", f"names unknown encoding {short_repr(name)}")
        if not isinstance(config, Mapping) or set(config) - {"separator"}:
            raise metadata_error(
                where, "chunk_key_encoding", f"has an invalid configuration {short_repr(config)}"
            )
        separator = config.get("separator", "/" if name == "default" else ".")
        if separator not in ("/", "."):
            raise metadata_error(
                where, "chunk_key_encoding", f"separator must be '/' or '.', got {short_repr(separator)}"
            )
        return cls(name, separator)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The member as zarr-python 3 writes it."""
        return {"name": self.name, "configuration": {"separator": self.separator}}

    @property
    def prefix(self) -> str:
        """What every chunk key of a >= 1-d array starts with: ``"c/"``, ``"c."`` or ``""``."""
        return "c" + self.separator if self.name == "default" else ""

    def encode(self, coords: Sequence[int]) -> str:
        """The key of the chunk at ``coords``, relative to the array."""
        if not coords:
            return "c" if self.name == "default" else "0"
        return self.prefix + self.separator.join(map(str, coords))

    def decode(self, name: str, ndim: int) -> tuple[int, ...] | None:
        """The coordinates of the chunk key ``name`` (relative to the array), None if it is none."""
        if ndim == 0:
            return () if name == self.encode(()) else None
        if not name.startswith(self.prefix):
            return None
        parts = name[len(self.prefix) :].split(self.separator)
        if len(parts) != ndim or not all(p.isdigit() for p in parts):
            return None
        return tuple(int(p) for p in parts)


@dataclass(frozen=True, eq=False)
class ArrayV3Metadata:
    """An array's ``zarr.json``, validated (Zarr v3 core spec 3.0 with the 3.1 clarifications).

    Parameters
    ----------
    shape : tuple of int
        Array extent per dimension.
    chunks : tuple of int
        The ``regular`` chunk grid's ``chunk_shape``: the stored objects, so the shards of a
        sharded array (`inner_chunks` is then the shape selections are cut into).
    dtype : numpy.dtype
        Element type in memory, this machine's byte order (object for ``string``/``bytes``).
    codecs : tuple of dict
        The ``codecs`` list (v3 entries); the chain run on chunks is derived from it.
    fill_value : Any
        Decoded fill value.
    chunk_key_encoding : ChunkKeyEncoding
    string_kind : {"string", "bytes"} or None
        For object dtypes: which variable-length type.
    dimension_names : tuple of (str or None), or None
    attributes : dict
        User attributes (stored in this document).
    extensions : dict
        Members with ``"must_understand": false``, written back as read.
    data_type : Any
        The ``data_type`` member; derived from ``dtype`` when None.

    Notes
    -----
    zarr-python 3 equivalent: ``zarr.core.metadata.v3.ArrayV3Metadata``. Equality
    compares the encoded documents.
    """

    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype[Any]
    codecs: tuple[dict[str, Any], ...]
    fill_value: Any = None
    chunk_key_encoding: ChunkKeyEncoding = ChunkKeyEncoding()
    string_kind: StringKind = None
    dimension_names: tuple[str | None, ...] | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    extensions: dict[str, Any] = field(default_factory=dict)
    data_type: Any = None
    zarr_format: int = 3
    _chain: CodecChain = field(init=False, repr=False)
    _sharding: ShardingSpec | None = field(init=False, repr=False)
    _cdata_shape: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        where = "ArrayV3Metadata"
        shape = _int_tuple(self.shape, where=where, name="shape", minimum=0)
        chunks = _int_tuple(self.chunks, where=where, name="chunk_shape", minimum=1)
        if len(chunks) != len(shape):
            raise metadata_error(
                where, "chunk_grid", f"has {len(chunks)} dimensions but 'shape' has {len(shape)}"
            )
        dtype = np.dtype(self.dtype)
        data_type = (
            self.data_type
            if self.data_type is not None
            else v3_dtype_to_json(dtype, self.string_kind, where=where)
        )
        sharding = None
        # Anything but a list (a stored "codecs": 0) goes to parse_v3_codecs as it is, which refuses it.
        given = list(self.codecs) if isinstance(self.codecs, (list, tuple)) else self.codecs
        if isinstance(given, list) and len(given) == 1 and codec_name(given[0]) == SHARDING_CODEC:
            sharding = parse_sharding(given[0], dtype=dtype, shard_shape=chunks, where=where)
            codecs, chain = [dict(given[0])], sharding.chain  # the entry kept as given
        else:
            codecs, chain = parse_v3_codecs(given, dtype=dtype, ndim=len(shape), where=where)
        fill = self.fill_value
        if fill is None:
            raise metadata_error(where, "fill_value", "is required in Zarr v3")
        raw_bits = isinstance(data_type, str) and data_type.startswith("r")
        try:
            fill_json = v3_fill_to_json(fill, dtype, self.string_kind, raw_bits=raw_bits)
        except (TypeError, ValueError, OverflowError) as exc:
            raise metadata_error(
                where, "fill_value", f"{short_repr(fill)} is not valid for {dtype}: {exc}"
            ) from exc
        fill = v3_fill_from_json(fill_json, dtype, self.string_kind, where=where)
        names = self.dimension_names
        if names is not None:
            names = tuple(names)
            if len(names) != len(shape) or not all(n is None or isinstance(n, str) for n in names):
                raise metadata_error(
                    where,
                    "dimension_names",
                    f"must hold one string or null per dimension, got {short_repr(list(names))}",
                )
        for name, value in (
            ("shape", shape),
            ("chunks", chunks),
            ("dtype", dtype),
            ("codecs", tuple(codecs)),
            ("fill_value", fill),
            ("dimension_names", names),
            ("attributes", dict(self.attributes)),
            ("data_type", data_type),
            ("_chain", chain),
            ("_sharding", sharding),
            ("_cdata_shape", tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))),
        ):
            object.__setattr__(self, name, value)

    # -- parsing and encoding ------------------------------------------------

    @classmethod
    def from_json(cls, data: bytes | str | Mapping[str, Any], *, key: str = ZARR_JSON) -> ArrayV3Metadata:
        """Parse and validate an array ``zarr.json``.

        Parameters
        ----------
        data : bytes, str or Mapping
            The stored JSON, or an already-decoded object (consolidated metadata).
        key : str
            Store key of the document, named in every error.

        Raises
        ------
        MetadataError
            Not a JSON object; ``zarr_format`` not 3 or ``node_type`` not ``"array"``; a
            required member missing; an unknown data type, chunk grid (only
            ``regular``), chunk key encoding or codec (each named; ``sharding_indexed``
            only as the one codec, not nested); ``storage_transformers`` not empty; an unknown
            member without ``"must_understand": false``; a fill value the type cannot
            hold; chunks larger than ``max_chunk_bytes``.
        """
        where = repr(key)
        document = data if isinstance(data, Mapping) else decode_json(data, key=key)
        if not isinstance(document, Mapping):
            raise metadata_error(where, None, f"must be a JSON object, got {type(document).__name__}")
        if document.get("zarr_format") != 3 or isinstance(document.get("zarr_format"), bool):
            raise metadata_error(
                where, "zarr_format", f"must be 3, got {short_repr(document.get('zarr_format'))}"
            )
        if document.get("node_type") != "array":
            raise metadata_error(
                where, "node_type", f"must be 'array', got {short_repr(document.get('node_type'))}"
            )
        missing = [name for name in _REQUIRED if name not in document]
        if missing:
            raise metadata_error(where, None, f"is missing required member(s) {missing}")
        extensions = check_extensions(document, _ARRAY_MEMBERS, where=where)
        transformers = document.get("storage_transformers", [])
        if transformers:
            raise metadata_error(
                where,
                "storage_transformers",
                f"names storage transformers, which azarr does not support: {short_repr(transformers)}",
            )
        dtype, string_kind = v3_dtype_from_json(document["data_type"], where=where)
        _check_itemsize(dtype, where)
        shape = _int_tuple(document["shape"], where=where, name="shape", minimum=0)
        chunks = _parse_chunk_grid(document["chunk_grid"], len(shape), where)
        attributes = document.get("attributes", {})
        if not isinstance(attributes, Mapping):
            raise metadata_error(where, "attributes", f"must be an object, got {short_repr(attributes)}")
        names = document.get("dimension_names")
        if names is not None and not isinstance(names, list):
            raise metadata_error(where, "dimension_names", f"must be a list, got {short_repr(names)}")
        try:
            return cls(
                shape=shape,
                chunks=chunks,
                dtype=dtype,
                codecs=tuple(document["codecs"])
                if isinstance(document["codecs"], list)
                else document["codecs"],
                fill_value=v3_fill_from_json(document["fill_value"], dtype, string_kind, where=where),
                chunk_key_encoding=ChunkKeyEncoding.from_json(document["chunk_key_encoding"], where=where),
                string_kind=string_kind,
                dimension_names=None if names is None else tuple(names),
                attributes=dict(attributes),
                extensions=extensions,
                data_type=copy.deepcopy(document["data_type"]),
            )
        except MetadataError as exc:
            # Errors of the constructor name the class; the stored document's key is what helps.
            raise MetadataError(str(exc).replace("ArrayV3Metadata", where, 1)) from None

    def to_dict(self) -> dict[str, Any]:
        """The document as a JSON-ready dict, members in zarr-python 3's order."""
        raw_bits = isinstance(self.data_type, str) and self.data_type.startswith("r")
        document: dict[str, Any] = {
            "shape": list(self.shape),
            "data_type": copy.deepcopy(self.data_type),
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.chunks)}},
            "chunk_key_encoding": self.chunk_key_encoding.to_json(),
            "fill_value": v3_fill_to_json(self.fill_value, self.dtype, self.string_kind, raw_bits=raw_bits),
            "codecs": copy.deepcopy(list(self.codecs)),
            "attributes": copy.deepcopy(self.attributes),
        }
        if self.dimension_names is not None:
            document["dimension_names"] = list(self.dimension_names)
        document.update(zarr_format=3, node_type="array", storage_transformers=[])
        document.update(copy.deepcopy(self.extensions))
        return document

    def to_json(self) -> bytes:
        """The ``zarr.json`` bytes, formatted as zarr-python 3 writes them."""
        return encode_v3_json(self.to_dict())

    def replace(self, **changes: Any) -> ArrayV3Metadata:
        """A copy with some fields changed, validated again (``replace(shape=(20, 10))``).

        Raises
        ------
        MetadataError
            The changed metadata is invalid.
        """
        if "dtype" in changes and "data_type" not in changes:
            changes["data_type"] = None
        return dataclasses.replace(self, **changes)

    # -- the array description shared with ArrayMetadata ----------------------

    @property
    def chain(self) -> CodecChain:
        """The codecs as a `CodecChain` (what `ChunkCodec` runs): of the inner chunks when the
        array is sharded."""
        return self._chain

    @property
    def sharding(self) -> ShardingSpec | None:
        """The ``sharding_indexed`` configuration when the array is sharded (``codecs`` is that
        one codec), else None."""
        return self._sharding

    @property
    def shards(self) -> tuple[int, ...] | None:
        """The shard shape (the chunk grid's ``chunk_shape``) of a sharded array, else None
        (zarr-python 3's ``ArrayV3Metadata.shards``)."""
        return None if self._sharding is None else self.chunks

    @property
    def inner_chunks(self) -> tuple[int, ...]:
        """The shape of the chunks the codecs encode, which selections are cut into: the inner
        chunks of a sharded array, else `chunks` (zarr-python 3's ``ArrayV3Metadata.chunks``)."""
        return self.chunks if self._sharding is None else self._sharding.chunk_shape

    @property
    def order(self) -> Literal["C", "F"]:
        """Layout of stored chunks: ``"F"`` when a ``transpose`` reverses the axes, else ``"C"``."""
        return self._chain.order

    @property
    def dimension_separator(self) -> str:
        """The chunk key encoding's separator."""
        return self.chunk_key_encoding.separator

    @property
    def chunk_key_prefix(self) -> str:
        """What every chunk key of a >= 1-d array starts with (``"c/"`` by default)."""
        return self.chunk_key_encoding.prefix

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def cdata_shape(self) -> tuple[int, ...]:
        """Number of chunks along each dimension: ``ceil(shape / chunks)``."""
        return self._cdata_shape

    @property
    def nchunks(self) -> int:
        """Total number of chunks in the grid."""
        return math.prod(self._cdata_shape)

    def chunk_key(self, coords: Sequence[int]) -> str:
        """Store key of a chunk, relative to the array (``"c/2/4"``; ``"c"`` for 0-d).

        Raises
        ------
        ValueError
            Wrong number of coordinates.
        IndexError
            A coordinate outside the chunk grid.
        """
        coords = tuple(coords)
        if not self.shape:
            if coords not in ((), (0,)):
                raise IndexError(f"a 0-d array has the single chunk (), got {coords}")
            return self.chunk_key_encoding.encode(())
        if len(coords) != len(self._cdata_shape):
            raise ValueError(f"chunk coordinates {coords} do not have {len(self._cdata_shape)} dimensions")
        for index, extent in zip(coords, self._cdata_shape, strict=True):
            if not 0 <= index < extent:
                raise IndexError(f"chunk coordinates {coords} are outside the chunk grid {self._cdata_shape}")
        return self.chunk_key_encoding.encode(coords)

    def chunk_coords(self, name: str) -> tuple[int, ...] | None:
        """Grid coordinates of the chunk key ``name`` (relative to the array), None if it is none."""
        return self.chunk_key_encoding.decode(name, self.ndim)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayV3Metadata):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def _parse_chunk_grid(value: Any, ndim: int, where: str) -> tuple[int, ...]:
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        raise metadata_error(where, "chunk_grid", f"must be an object with a 'name', got {short_repr(value)}")
    if value["name"] != "regular":
        raise metadata_error(
            where,
            "chunk_grid",
            f"names chunk grid {short_repr(value['name'])}; azarr reads the 'regular' grid only",
        )
    config = value.get("configuration")
    if not isinstance(config, Mapping) or "chunk_shape" not in config:
        raise metadata_error(
            where, "chunk_grid", f"needs a configuration with 'chunk_shape', got {short_repr(config)}"
        )
    chunks = _int_tuple(config["chunk_shape"], where=where, name="chunk_shape", minimum=1)
    if len(chunks) != ndim:
        raise metadata_error(where, "chunk_grid", f"has {len(chunks)} dimensions but 'shape' has {ndim}")
    return chunks
