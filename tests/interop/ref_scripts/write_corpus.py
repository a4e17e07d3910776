"""Write the zarr v2 interop corpus with zarr-python 2.18 (run with the reference interpreter).

Usage: ``python write_corpus.py TARGET_DIR``

Creates under TARGET_DIR:

* ``corpus.zarr/``  a DirectoryStore hierarchy: every dtype, compressor, filter, object codec, order,
  dimension separator, fill value, edge/0-d/zero-length shapes, partially written arrays, nested groups
  with attributes; consolidated at the root with ``zarr.consolidate_metadata``.
* ``xarray.zarr/``  an xarray Dataset written with ``Dataset.to_zarr(consolidated=True)``.
* ``expected/*.npy``  what zarr 2.18 reads back for each array (data and fill value).
* ``manifest.json``  one entry per array and group (see ``compare.py`` for the comparison rules).

Each array is read back by zarr 2.18 right after writing and checked against the values that were
meant to be stored, so the corpus is self-verified before azarr ever sees it.

The azarr tests import this module (without zarr or xarray) for `declare_corpus`: the same
declarations (``ArraySpec``: ``zarr.create`` arguments, writes, intended values) parametrize the read
tests and are replayed through ``azarr.create`` by the write tests.
"""

from __future__ import annotations

import json
import shutil
import string
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
from numcodecs import (
    BZ2,
    JSON,
    LZ4,
    LZMA,
    AsType,
    Blosc,
    Categorize,
    Delta,
    FixedScaleOffset,
    GZip,
    MsgPack,
    PackBits,
    Pickle,
    Quantize,
    Shuffle,
    VLenArray,
    Zlib,
    Zstd,
)

if __package__:  # imported by the azarr tests, which have neither zarr 2 nor xarray
    from .compare import MANIFEST, array_problems, expected_file_name, save_npy, to_json_value

    zarr: Any = None
    xr: Any = None
else:  # run as a script by the zarr 2.18 reference interpreter
    import xarray as xr
    import zarr
    from compare import MANIFEST, array_problems, expected_file_name, save_npy, to_json_value

CORPUS = "corpus.zarr"
XARRAY = "xarray.zarr"
STRUCTURED = np.dtype([("a", "<i4"), ("b", "<f8", (2,)), ("c", [("x", "u1"), ("y", "S3")])])

rng = np.random.default_rng(20240611)


# ---------------------------------------------------------------- data makers


def ints(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    info = np.iinfo(np.dtype(dtype))
    out = rng.integers(info.min, info.max, size=shape, dtype=np.dtype(dtype).newbyteorder("="), endpoint=True)
    flat = out.reshape(-1)
    if flat.size >= 2:  # make sure the extremes are present
        flat[0], flat[-1] = info.min, info.max
    return out.astype(dtype)


def floats(dtype: str, shape: tuple[int, ...], specials: bool = True) -> np.ndarray:
    out = (rng.standard_normal(shape) * 1000.0).astype(dtype)
    flat = out.reshape(-1)
    if specials and flat.size >= 5:
        flat[:5] = [np.nan, np.inf, -np.inf, -0.0, np.finfo(np.dtype(dtype)).tiny]
    return out


def complexes(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    part = "f4" if np.dtype(dtype).itemsize == 8 else "f8"
    out = np.empty(shape, dtype=dtype)
    out.real = floats(part, shape)
    out.imag = floats(part, shape, specials=False)
    return out


def datetimes(dtype: str, shape: tuple[int, ...], span: int) -> np.ndarray:
    out = rng.integers(-span, span, size=shape, dtype=np.int64).view(dtype)
    flat = out.reshape(-1)
    if flat.size >= 2:
        flat[1] = np.datetime64("NaT") if dtype.startswith("M8") else np.timedelta64("NaT")
    return out


def bytestrings(n: int, shape: tuple[int, ...]) -> np.ndarray:
    vals = [
        bytes(rng.integers(1, 256, size=int(rng.integers(0, n + 1)), dtype=np.uint8))
        for _ in range(int(np.prod(shape)))
    ]
    return np.array(vals, dtype=f"S{n}").reshape(shape)


ALPHABET = [*string.ascii_letters, *"äöüßéñ€中文字", "\U0001f600", "\U0001d11e", " "]


def unicodes(n: int, count: int) -> list[str]:
    return ["".join(rng.choice(ALPHABET, size=int(rng.integers(0, n + 1)))) for _ in range(count)]


def structured(shape: tuple[int, ...]) -> np.ndarray:
    out = np.zeros(shape, dtype=STRUCTURED)
    out["a"] = ints("<i4", shape)
    out["b"] = floats("<f8", (*shape, 2))
    out["c"]["x"] = ints("u1", shape)
    out["c"]["y"] = bytestrings(3, shape)
    return out


def make_dtype_data(name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name == "bool":
        return rng.random(shape) > 0.5
    if name == "structured":
        return structured(shape)
    if name.startswith("S"):
        return bytestrings(int(name[1:]), shape)
    if name.startswith("U"):
        return np.array(unicodes(int(name[1:]), int(np.prod(shape))), dtype=name).reshape(shape)
    core = name.lstrip("<>")
    if core.startswith(("M8", "m8")):
        span = {"ns": 2**62, "D": 100_000, "s": 2**40}[core[3:-1]]
        return datetimes(core, shape, span).astype(name)
    kind = np.dtype(name).kind
    if kind in "iu":
        return ints(name, shape)
    if kind == "f":
        return floats(name, shape)
    if kind == "c":
        return complexes(name, shape)
    raise ValueError(name)


# ---------------------------------------------------------------- corpus writer


@dataclass
class ArraySpec:
    """One corpus array: the exact ``zarr.create`` arguments, the writes, and what a reader must see.

    Both sides replay these: ``write_corpus.py`` with zarr 2.18, the azarr write tests with
    ``azarr.create`` (whose signature follows zarr 2.18's).
    """

    path: str
    create_kwargs: dict[str, Any]  # shape, chunks, dtype, compressor, filters, fill_value, order, ...
    writes: list[tuple[Any, Any]]  # (selection, array or numpy scalar), applied in order
    intended: np.ndarray | None  # the whole array as read back; None for lossy codecs
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_pickle(self) -> bool:
        return isinstance(self.create_kwargs.get("object_codec"), Pickle)


class Corpus:
    """Where the ``write_*`` steps declare arrays and groups.

    With ``target=None`` nothing is written and the declarations are only collected in
    `specs` / `groups` (that is how the azarr tests get the same matrix).
    """

    def __init__(self, target: Path | None) -> None:
        self.specs: list[ArraySpec] = []
        self.groups: list[tuple[str, dict[str, Any]]] = []
        self.failures: list[str] = []
        self.store: Any = None
        self.root: Any = None
        if target is not None:
            self.store = zarr.DirectoryStore(str(target / CORPUS))
            self.root = zarr.group(store=self.store, overwrite=True)
            (target / "expected").mkdir()

    def array(
        self,
        path: str,
        data: np.ndarray | None,
        *,
        chunks: tuple[int, ...] | bool = True,
        region: Any = None,
        values: np.ndarray | None = None,
        writes: list[tuple[Any, np.ndarray]] | None = None,
        intended: np.ndarray | None = None,
        attrs: dict[str, Any] | None = None,
        lossy: bool = False,
        **kwargs: Any,
    ) -> None:
        """Declare ``path``: created with ``kwargs``, then ``data`` stored whole, ``values`` at
        ``region``, or each ``(selection, values)`` of ``writes`` in turn.

        ``intended`` is the full array a reader must get back (default ``data``); lossy codecs
        (Quantize, FixedScaleOffset) pass ``lossy=True`` and the zarr 2.18 round trip is the truth.
        With no data and no writes nothing is written (every chunk missing).
        """
        if data is not None:
            kwargs.setdefault("shape", data.shape)
            kwargs.setdefault("dtype", data.dtype)
        writes = list(writes or [])
        if data is not None:
            writes.insert(0, (Ellipsis, data))
        if region is not None:
            assert values is not None
            writes.append((region, values))
        if intended is None and not lossy and len(writes) == (data is not None):
            intended = data
        spec = ArraySpec(path, {"chunks": chunks, **kwargs}, writes, intended, dict(attrs or {}))
        self.specs.append(spec)
        if self.store is None:
            return
        arr = zarr.create(store=self.store, path=path, overwrite=True, **spec.create_kwargs)
        for selection, vals in spec.writes:
            arr[selection] = vals
        if spec.attrs:
            arr.attrs.update(spec.attrs)

    def group(self, path: str, attrs: dict[str, Any] | None = None) -> None:
        self.groups.append((path, dict(attrs or {})))
        if self.root is None:
            return
        g = self.root.require_group(path) if path else self.root
        if attrs:
            g.attrs.update(attrs)


def write_dtypes(c: Corpus) -> None:
    c.group("dtypes", {"what": "one array per dtype, shape (7, 5), chunks (3, 2), default fill_value"})
    names = [
        "bool", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16",
        ">i2", ">i4", ">u8", ">f4", ">f8", ">c16", "M8[ns]", "M8[D]", "m8[s]", ">M8[ns]", "S7", "U5",
        "structured",
    ]  # fmt: skip
    for name in names:
        path = "dtypes/" + name.replace(">", "be_").replace("[", "_").replace("]", "")
        data = make_dtype_data(name, (7, 5))
        c.array(path, data, chunks=(3, 2))  # zarr's default fill_value 0, encoded per dtype
    # 1-d big arrays for the byte-swapping paths with several chunks of non-trivial size
    c.array("dtypes/be_f8_1d_long", floats(">f8", (1000,)), chunks=(128,))
    c.array("dtypes/le_i2_1d_long", ints("<i2", (1000,)), chunks=(300,))


def write_compressors(c: Corpus) -> None:
    c.group("compressors", {"what": "float64 (50, 40) chunks (16, 16) per compressor"})
    base = np.cumsum(rng.standard_normal((50, 40)), axis=1)
    base.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    for cname in ["lz4", "zstd", "zlib", "blosclz", "lz4hc"]:
        for shuffle in (Blosc.NOSHUFFLE, Blosc.SHUFFLE, Blosc.BITSHUFFLE):
            c.array(
                f"compressors/blosc_{cname}_shuffle{shuffle}",
                base,
                chunks=(16, 16),
                compressor=Blosc(cname=cname, clevel=5, shuffle=shuffle),
            )
    c.array(
        "compressors/blosc_lz4_blocksize", base, chunks=(16, 16), compressor=Blosc("lz4", 3, 1, blocksize=512)
    )
    c.array(
        "compressors/blosc_zstd_bitshuffle_i2",
        ints("<i2", (50, 40)),
        chunks=(16, 16),
        compressor=Blosc("zstd", 7, 2),
    )
    c.array(
        "compressors/blosc_lz4_be_i8", ints(">i8", (50, 40)), chunks=(16, 16), compressor=Blosc("lz4", 5, 1)
    )
    others: dict[str, Any] = {
        "zstd": Zstd(level=3),
        "zstd_checksum": Zstd(level=1, checksum=True),
        "zlib": Zlib(level=6),
        "gzip": GZip(level=5),
        "bz2": BZ2(level=9),
        "lzma": LZMA(),
        "lz4": LZ4(acceleration=1),
        "none": None,
    }
    for name, codec in others.items():
        c.array(f"compressors/{name}", base, chunks=(16, 16), compressor=codec)
    c.array("compressors/zlib_u1", ints("u1", (50, 40)), chunks=(16, 16), compressor=Zlib(level=1))


def write_filters(c: Corpus) -> None:
    c.group("filters", {"what": "numcodecs filters"})
    steps = np.cumsum(rng.integers(-50, 50, size=(30, 20)), axis=1)
    c.array(
        "filters/delta_i4",
        steps.astype("<i4"),
        chunks=(8, 8),
        filters=[Delta(dtype="<i4")],
        compressor=Zlib(1),
    )
    c.array(
        "filters/delta_i8_astype_i2",
        steps.astype("<i8"),
        chunks=(8, 8),
        filters=[Delta(dtype="<i8", astype="<i2")],
        compressor=None,
    )
    lossy = rng.uniform(1000.0, 1100.0, size=(30, 20))
    c.array(
        "filters/fixedscaleoffset",
        lossy,
        chunks=(8, 8),
        lossy=True,
        filters=[FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<u2")],
    )
    c.array("filters/quantize", lossy, chunks=(8, 8), filters=[Quantize(digits=3, dtype="<f8")], lossy=True)
    c.array(
        "filters/quantize_f4",
        lossy.astype("<f4"),
        chunks=(8, 8),
        filters=[Quantize(digits=2, dtype="<f4")],
        lossy=True,
    )
    c.array("filters/packbits", rng.random((33, 7)) > 0.3, chunks=(10, 7), filters=[PackBits()])
    labels = ["apple", "banana", "cherry", "dürian"]
    cats = np.array(rng.choice(labels, size=(25,)), dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "missing object_codec": Categorize does the object encoding
        c.array(
            "filters/categorize",
            cats,
            chunks=(10,),
            dtype=object,
            fill_value=None,
            filters=[Categorize(labels=labels, dtype=object, astype="u1")],
        )
    f4_exact = rng.standard_normal((30, 20)).astype("<f4").astype("<f8")
    c.array(
        "filters/astype_f8_as_f4",
        f4_exact,
        chunks=(8, 8),
        filters=[AsType(encode_dtype="<f4", decode_dtype="<f8")],
    )
    c.array("filters/shuffle_f8", floats("<f8", (30, 20)), chunks=(8, 8), filters=[Shuffle(elementsize=8)])
    c.array(
        "filters/chain_delta_shuffle_blosc",
        steps.astype("<i8"),
        chunks=(8, 8),
        filters=[Delta(dtype="<i8"), Shuffle(elementsize=8)],
        compressor=Blosc("zstd", 5, 0),
    )


def write_objects(c: Corpus) -> None:
    c.group("objects", {"what": "object arrays and their codecs"})
    strs = np.array([*unicodes(12, 30), "", "x" * 300], dtype=object).reshape(4, 8)
    c.array("objects/vlen_utf8", strs, chunks=(3, 3), dtype=str)
    c.array("objects/vlen_utf8_F_zstd", strs, chunks=(3, 3), dtype=str, order="F", compressor=Zstd(5))
    blobs = np.empty(20, dtype=object)
    blobs[:] = [bytes(rng.integers(0, 256, size=int(rng.integers(0, 40)), dtype=np.uint8)) for _ in range(20)]
    c.array("objects/vlen_bytes", blobs, chunks=(6,), dtype=bytes)
    ragged = np.empty(15, dtype=object)
    ragged[:] = [ints("<i4", (int(rng.integers(0, 9)),)) for _ in range(15)]
    c.array("objects/vlen_array_i4", ragged, chunks=(4,), dtype=object, object_codec=VLenArray("<i4"))
    mixed = np.empty(12, dtype=object)
    mixed[:] = [
        1,
        -2.5,
        "text",
        "ünï",
        None,
        True,
        {"k": [1, 2]},
        [1, "a"],
        10**18,
        "",
        {"n": None},
        [[1], [2, 3]],
    ]
    c.array("objects/json", mixed, chunks=(5,), dtype=object, object_codec=JSON())
    packed = np.empty(10, dtype=object)
    packed[:] = [1, -7, 2.5, "str", "ß", b"raw\x00bytes", None, False, [1, 2, "x"], {"a": 1}]
    c.array("objects/msgpack", packed, chunks=(4,), dtype=object, object_codec=MsgPack())
    pickled = np.empty(6, dtype=object)
    pickled[:] = [(1, 2), {"set": frozenset({1})}, 3 + 4j, "s", b"b", None]
    c.array(
        "objects/pickle",
        pickled,
        chunks=(4,),
        dtype=object,
        object_codec=Pickle(),
        attrs={"note": "needs allow_pickle=True"},
    )


def write_order(c: Corpus) -> None:
    c.group("order", {"what": "C and F memory order with edge chunks"})
    i4 = ints("<i4", (9, 7, 5))
    c.array("order/C_i4_3d", i4, chunks=(4, 3, 2), order="C")
    c.array("order/F_i4_3d", i4, chunks=(4, 3, 2), order="F")
    c.array("order/F_f8_2d", floats("<f8", (11, 6)), chunks=(4, 4), order="F", compressor=Zlib(3))
    c.array("order/F_be_c16", complexes(">c16", (5, 6)), chunks=(2, 4), order="F")
    c.array("order/F_S7", bytestrings(7, (6, 5)), chunks=(4, 2), order="F")
    c.array("order/F_structured", structured((5, 4)), chunks=(2, 3), order="F", fill_value=None)
    c.array(
        "order/F_bool_packbits", rng.random((9, 10)) > 0.5, chunks=(4, 4), order="F", filters=[PackBits()]
    )
    c.array("order/F_U5", make_dtype_data("U5", (6, 3)), chunks=(4, 2), order="F")
    c.array("order/F_M8ns", make_dtype_data("M8[ns]", (5, 5)), chunks=(2, 2), order="F")


def write_separators(c: Corpus) -> None:
    c.group("separators", {"what": "dimension_separator '.' and '/'"})
    data = ints("<i2", (6, 7, 8))
    c.array("separators/dot_3d", data, chunks=(4, 3, 5), dimension_separator=".")
    c.array("separators/slash_3d", data, chunks=(4, 3, 5), dimension_separator="/")
    c.array("separators/slash_1d", floats("<f4", (10,)), chunks=(3,), dimension_separator="/")
    c.array("separators/slash_0d", np.array(7, dtype="<u4"), chunks=(), dimension_separator="/")


def write_fill_values(c: Corpus) -> None:
    """Arrays written only partially so missing chunks show the fill value."""
    c.group("fill_values", {"what": "fill values; only the first chunk row is written"})
    cases: list[tuple[str, str, Any]] = [
        ("f8_nan", "<f8", np.nan),
        ("f8_inf", "<f8", np.inf),
        ("f8_neginf", "<f8", -np.inf),
        ("f8_value", "<f8", 3.25),
        ("f4_nan", "<f4", np.nan),
        ("f2_inf", "<f2", np.inf),
        ("be_f8_nan", ">f8", np.nan),
        ("i4_zero", "<i4", 0),
        ("i8_neg", "<i8", -7),
        ("u8_max", "<u8", 2**64 - 1),
        ("i1_min", "i1", -128),
        ("bool_true", "bool", True),
        ("c16_value", "<c16", 1.5 - 2j),
        ("c8_nan", "<c8", complex(np.nan, 1.0)),
        ("S5_bytes", "S5", b"ab\x01c"),
        ("U3_text", "U3", "zä\U0001f600"),
        ("M8ns_nat", "M8[ns]", np.datetime64("NaT")),
        ("M8D_value", "M8[D]", np.datetime64("2000-01-02")),
        ("m8s_nat", "m8[s]", np.timedelta64("NaT")),
        ("structured", "structured", (-3, [1.5, np.nan], (9, b"xyz"))),
    ]
    shape, chunks = (6, 5), (2, 2)
    for name, dtype_name, fill in cases:
        dtype = STRUCTURED if dtype_name == "structured" else np.dtype(dtype_name)
        values = make_dtype_data(dtype_name if dtype_name != "structured" else "structured", (2, 5)).astype(
            dtype
        )
        intended = np.full(shape, np.array(fill, dtype=dtype), dtype=dtype)
        intended[0:2, :] = values
        c.array(
            f"fill_values/{name}",
            None,
            shape=shape,
            dtype=dtype,
            chunks=chunks,
            fill_value=fill,
            region=(slice(0, 2), slice(None)),
            values=values,
            intended=intended,
        )
    # fill_value None (null in .zarray): every chunk written, since missing ones would be undefined
    c.array("fill_values/f8_none", floats("<f8", (6, 5)), chunks=(2, 2), fill_value=None)
    c.array("fill_values/i4_none", ints("<i4", (6, 5)), chunks=(2, 2), fill_value=None)
    c.array("fill_values/S5_none", bytestrings(5, (6, 5)), chunks=(2, 2), fill_value=None)
    # zarr's default fill_value (0) for strings and object strings, all chunks missing
    c.array(
        "fill_values/default_S4_unwritten",
        None,
        shape=(5,),
        dtype="S4",
        chunks=(2,),
        intended=np.zeros(5, dtype="S4"),
    )
    empty = np.array([""] * 7, dtype=object)
    c.array(
        "fill_values/vlen_utf8_empty_unwritten",
        None,
        shape=(7,),
        dtype=str,
        chunks=(3,),
        fill_value="",
        intended=empty,
    )


def write_shapes(c: Corpus) -> None:
    c.group("shapes", {"what": "edge chunks, 0-d, zero-length"})
    c.array("shapes/edge_2d", floats("<f8", (10, 7)), chunks=(3, 4))
    c.array("shapes/edge_3d_u2", ints("<u2", (9, 7, 5)), chunks=(4, 3, 2))
    c.array("shapes/edge_4d_i1", ints("i1", (3, 4, 2, 5)), chunks=(2, 3, 2, 2))
    c.array("shapes/chunk_bigger_than_shape", ints("<i4", (5,)), chunks=(10,))
    c.array("shapes/chunks_of_one", ints("<i8", (5, 3)), chunks=(1, 1))
    c.array("shapes/single_chunk", floats("<f4", (6, 4)), chunks=(6, 4))
    c.array("shapes/scalar_0d_f8", np.array(42.5), chunks=())
    c.array("shapes/scalar_0d_i2_nocomp", np.array(-3, dtype="<i2"), chunks=(), compressor=None)
    c.array("shapes/scalar_0d_U5", np.array("héllo", dtype="U5"), chunks=())
    c.array("shapes/zero_length_1d", np.zeros((0,), dtype="<f8"), chunks=(5,))
    c.array("shapes/zero_length_2d", np.zeros((0, 5), dtype="<i4"), chunks=(2, 2))
    c.array("shapes/zero_length_2d_middle", np.zeros((3, 0), dtype="<u1"), chunks=(2, 2))


def write_missing(c: Corpus) -> None:
    c.group("missing", {"what": "partially written arrays: missing chunks read as fill_value"})
    intended = np.full(100, 9.5)
    vals = floats("<f8", (22,))
    intended[15:37] = vals
    c.array(
        "missing/partial_1d",
        None,
        shape=(100,),
        dtype="<f8",
        chunks=(10,),
        fill_value=9.5,
        region=(slice(15, 37),),
        values=vals,
        intended=intended,
    )
    intended2 = np.full((20, 30), -1, dtype="<i4")
    v2 = ints("<i4", (4, 5))
    intended2[13:17, 20:25] = v2
    c.array(
        "missing/partial_2d",
        None,
        shape=(20, 30),
        dtype="<i4",
        chunks=(5, 7),
        fill_value=-1,
        region=(slice(13, 17), slice(20, 25)),
        values=v2,
        intended=intended2,
    )
    c.array(
        "missing/nothing_written",
        None,
        shape=(8, 9),
        dtype="<u2",
        chunks=(3, 3),
        fill_value=5,
        intended=np.full((8, 9), 5, dtype="<u2"),
    )
    intended3 = np.full((6, 6, 6), np.nan, dtype="<f4")
    v3 = floats("<f4", (2, 3, 6))
    intended3[4:6, 0:3, :] = v3
    c.array(
        "missing/slash_partial_3d",
        None,
        shape=(6, 6, 6),
        dtype="<f4",
        chunks=(3, 3, 3),
        fill_value=np.nan,
        dimension_separator="/",
        region=(slice(4, 6), slice(0, 3)),
        values=v3,
        intended=intended3,
    )
    intended4 = np.full((6, 4), 0, dtype="<i4", order="F")
    v4 = ints("<i4", (3, 4))
    intended4[3:6] = v4
    c.array(
        "missing/F_partial",
        None,
        shape=(6, 4),
        dtype="<i4",
        chunks=(3, 3),
        order="F",
        fill_value=0,
        region=(slice(3, 6),),
        values=v4,
        intended=intended4,
    )


def apply_writes(base: np.ndarray, writes: list[tuple[Any, np.ndarray]]) -> np.ndarray:
    out = base.copy()
    for selection, values in writes:
        out[selection] = values
    return out


def write_selections(c: Corpus) -> None:
    """Several partial writes per array: unaligned, overlapping, strided, broadcast; object fills."""
    c.group("writes", {"what": "several partial writes per array; intended values computed with numpy"})
    shape = (13, 11)
    writes = [
        ((slice(1, 6), slice(2, 9)), floats("<f8", (5, 7), specials=False)),
        ((slice(4, 13), slice(0, 4)), floats("<f8", (9, 4), specials=False)),
        ((slice(0, 2), slice(7, 11)), floats("<f8", (2, 4), specials=False)),
        ((slice(1, None, 3), 10), floats("<f8", (4,), specials=False)),
        ((7, slice(None)), np.float64(-1.5)),  # a scalar, broadcast
    ]
    c.array(
        "writes/overlapping_2d",
        None,
        shape=shape,
        dtype="<f8",
        chunks=(4, 3),
        fill_value=np.nan,
        writes=writes,
        intended=apply_writes(np.full(shape, np.nan), writes),
    )
    shape3 = (7, 6, 5)
    writes3 = [
        ((slice(0, 5), slice(1, 6), slice(0, 3)), ints("<i4", (5, 5, 3))),
        ((slice(3, 7), slice(0, 2), slice(1, 5)), ints("<i4", (4, 2, 4))),
        ((2, 3, 4), np.int32(123456)),
    ]
    c.array(
        "writes/F_overlapping_3d",
        None,
        shape=shape3,
        dtype="<i4",
        chunks=(3, 4, 2),
        order="F",
        fill_value=-9,
        writes=writes3,
        intended=apply_writes(np.full(shape3, -9, dtype="<i4"), writes3),
    )
    writes_s = [((slice(3, 5),), structured((2,))), ((0,), structured((1,))[0])]
    c.array(
        "writes/structured_partial",
        None,
        shape=(6,),
        dtype=STRUCTURED,
        chunks=(4,),
        writes=writes_s,
        intended=apply_writes(np.zeros(6, dtype=STRUCTURED), writes_s),
    )
    # Object arrays: elements of a *written* chunk that were not assigned hold the fill value when
    # the chunk is encoded, and VLenUTF8/VLenBytes store a non-string fill (0, None) as ''/b''.
    # Elements of chunks never written read as the fill value itself.
    words = np.array(["a", "bb", "ccc"], dtype=object)
    for name, fill in [("default", 0), ("none", None), ("text", "zz"), ("empty", "")]:
        kwargs = {} if name == "default" else {"fill_value": fill}
        writes_o = [((slice(1, 4),), words)]  # chunks of 2: chunks 0 and 1 written, element 0 unassigned
        intended_o = apply_writes(np.full(7, fill, dtype=object), writes_o)
        intended_o[0] = fill if isinstance(fill, str) else ""
        c.array(
            f"writes/vlen_utf8_partial_fill_{name}",
            None,
            shape=(7,),
            dtype=str,
            chunks=(2,),
            writes=writes_o,
            intended=intended_o,
            **kwargs,
        )
    blobs = np.empty(2, dtype=object)
    blobs[:] = [b"\x00\x01", b""]
    writes_b = [((slice(4, 6),), blobs)]  # chunks of 3: chunk 1 written, element 3 unassigned
    intended_b = apply_writes(np.full(7, None, dtype=object), writes_b)
    intended_b[3] = b""
    c.array(
        "writes/vlen_bytes_partial_fill_none",
        None,
        shape=(7,),
        dtype=bytes,
        chunks=(3,),
        fill_value=None,
        writes=writes_b,
        intended=intended_b,
    )


def write_hierarchy(c: Corpus) -> None:
    c.group("", {"title": "azarr interop corpus", "cases": "see tests/interop/ref_scripts/write_corpus.py"})
    c.group(
        "hierarchy",
        {
            "level": 0,
            "unicode": "ünïcødé ✓",
            "nested": {"a": [1, 2, {"b": None}], "c": 1.5e300},
            "flag": True,
        },
    )
    c.group("hierarchy/child", {"level": 1, "empty_list": [], "empty_dict": {}})
    c.group("hierarchy/child/grandchild", {"level": 2})
    c.group("hierarchy/child/grandchild/great", {})
    c.group("hierarchy/empty_group")
    c.array(
        "hierarchy/child/grandchild/great/leaf",
        ints("<i4", (4, 4)),
        chunks=(2, 2),
        attrs={"units": "m", "scale": 0.5, "valid_range": [0, 100], "meta": {"x": "y"}},
    )
    c.array(
        "hierarchy/child/values", floats("<f8", (5,)), chunks=(2,), attrs={"long_name": "values at level 1"}
    )
    c.array("hierarchy/top_array", ints("u1", (3,)), chunks=(3,), attrs={"nan_attr": "NaN-as-string"})


def write_xarray(target: Path) -> None:
    times = np.array(["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"], dtype="M8[ns]")
    lat = np.linspace(-30.0, 30.0, 5)
    lon = np.linspace(0.0, 350.0, 8)
    temp = (rng.standard_normal((4, 5, 8)) * 5 + 280).astype("f4")
    temp[0, 0, 0] = np.nan
    precip = rng.uniform(0, 20, size=(4, 5)).round(2)
    ds = xr.Dataset(
        {
            "temperature": (
                ("time", "lat", "lon"),
                temp,
                {"units": "K", "standard_name": "air_temperature", "long_name": "Air temperature"},
            ),
            "precip": (("time", "lat"), precip, {"units": "mm", "long_name": "Precipitation"}),
        },
        coords={
            "time": ("time", times, {"standard_name": "time"}),
            "lat": ("lat", lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "lon": ("lon", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
        attrs={"Conventions": "CF-1.8", "title": "azarr interop dataset"},
    )
    ds["temperature"].encoding = {"chunks": (2, 3, 4), "compressor": Blosc("zstd", 3, 2)}
    ds["precip"].encoding = {"chunks": (3, 5), "dtype": "i2", "scale_factor": 0.01, "_FillValue": -9999}
    ds.to_zarr(str(target / XARRAY), mode="w", consolidated=True)


# ---------------------------------------------------------------- manifest


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else {}


def chunk_files(array_dir: Path) -> list[str]:
    """Relative paths of the chunk objects under an array directory (metadata documents excluded)."""
    meta = {".zarray", ".zattrs", ".zgroup", ".zmetadata"}
    return sorted(
        str(p.relative_to(array_dir)) for p in array_dir.rglob("*") if p.is_file() and p.name not in meta
    )


def collect(
    target: Path, store_name: str, intent: dict[str, np.ndarray], failures: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Walk ``store_name`` with zarr 2.18; save expected data and describe every node."""
    store_dir = target / store_name
    root = zarr.open_group(str(store_dir), mode="r")
    arrays: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = [{"store": store_name, "path": "", "attrs": root.attrs.asdict()}]

    def visit(path: str, node: Any) -> None:
        if isinstance(node, zarr.hierarchy.Group):
            groups.append({"store": store_name, "path": path, "attrs": node.attrs.asdict()})
            return
        arr: zarr.Array = node
        meta = _read_json(store_dir / path / ".zarray")
        needs_pickle = any(f.get("id") == "pickle" for f in meta.get("filters") or [])
        data = arr[...]
        if not isinstance(data, np.ndarray):  # zarr returns numpy scalars for 0-d selections
            data = np.asarray(data, dtype=arr.dtype)
        want = intent.get(path)
        if want is not None:
            for p in array_problems(data, want, f"{store_name}/{path} round trip"):
                failures.append(p)
        data_file = expected_file_name(store_name, path, "data")
        save_npy(target / "expected" / data_file, data)
        fill_file = None
        if arr.fill_value is not None:
            fill_file = expected_file_name(store_name, path, "fill")
            save_npy(target / "expected" / fill_file, np.array(arr.fill_value, dtype=arr.dtype))
        arrays.append(
            {
                "id": f"{store_name.removesuffix('.zarr')}/{path}",
                "store": store_name,
                "path": path,
                "category": path.split("/")[0],
                "expected": f"expected/{data_file}",
                "fill": None if fill_file is None else f"expected/{fill_file}",
                "shape": list(arr.shape),
                "chunks": list(arr.chunks),
                "dtype": meta["dtype"],
                "order": meta["order"],
                "fill_value_json": meta["fill_value"],
                "compressor": meta["compressor"],
                "filters": meta["filters"],
                "dimension_separator": meta.get("dimension_separator"),
                "attrs": arr.attrs.asdict(),
                "needs_pickle": needs_pickle,
                "zarray": meta,
                "chunk_keys": chunk_files(store_dir / path),
                "object": bool(arr.dtype.hasobject),
            }
        )

    root.visititems(visit)
    return arrays, groups


STEPS: list[Callable[[Corpus], None]] = [
    write_dtypes,
    write_compressors,
    write_filters,
    write_objects,
    write_order,
    write_separators,
    write_fill_values,
    write_shapes,
    write_missing,
    write_selections,
    write_hierarchy,
]
XARRAY_ARRAYS = ["lat", "lon", "precip", "temperature", "time"]


def declare_corpus() -> Corpus:
    """The corpus declarations (array specs and groups) without writing anything; needs no zarr."""
    dry = Corpus(None)
    for step in STEPS:
        step(dry)
    return dry


def list_cases() -> list[str]:
    """The manifest ids this script writes (``corpus/<path>``, ``xarray/<name>``)."""
    return [f"corpus/{spec.path}" for spec in declare_corpus().specs] + [f"xarray/{n}" for n in XARRAY_ARRAYS]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[1])
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    # numcodecs 0.15 refuses Pickle.decode unless opted in; this script reads back its own pickle array.
    numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = True
    corpus = Corpus(target)
    for step in STEPS:
        step(corpus)
    zarr.consolidate_metadata(corpus.store)
    write_xarray(target)

    intent = {spec.path: spec.intended for spec in corpus.specs if spec.intended is not None}
    arrays, groups = collect(target, CORPUS, intent, corpus.failures)
    xr_arrays, xr_groups = collect(target, XARRAY, {}, corpus.failures)
    declared = set(list_cases())
    found = {a["id"] for a in arrays + xr_arrays}
    if declared != found:
        corpus.failures.append(
            f"declared cases vs arrays found: missing {sorted(declared - found)}, "
            f"undeclared {sorted(found - declared)}"
        )
    manifest = {
        "format": 1,
        "writer": {
            "zarr": zarr.__version__,
            "numcodecs": numcodecs.__version__,
            "xarray": xr.__version__,
            "numpy": np.__version__,
        },
        "stores": {CORPUS: {"consolidated": True}, XARRAY: {"consolidated": True, "xarray": True}},
        "arrays": arrays + xr_arrays,
        "groups": groups + xr_groups,
    }
    (target / MANIFEST).write_text(json.dumps(to_json_value(manifest), indent=1, allow_nan=False))
    if corpus.failures:
        print(
            "zarr 2.18 did not read back what it wrote:\n  " + "\n  ".join(corpus.failures), file=sys.stderr
        )
        return 1
    print(
        f"wrote {len(arrays) + len(xr_arrays)} arrays and {len(groups) + len(xr_groups)} groups to {target}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
