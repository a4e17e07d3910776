"""azarr reads what zarr-python 2.18 wrote: every corpus array, bit for bit, from disk, S3, GCS and HTTP.

The corpus is written once per session by ``ref_scripts/write_corpus.py`` in the reference venv;
``manifest.json`` lists each array with its metadata as zarr 2.18 sees it, and ``expected/*.npy``
hold the values zarr 2.18 reads back. Tests are parametrized by manifest id (``corpus/<path>``,
``xarray/<name>``), so a failure names the case.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio

import azarr
from azarr.errors import UnsafeCodecError
from azarr.storage import GCSStore, HTTPStore, LocalStore, S3Store, Store
from azarr.storage._azure import AzureBlobStore

from .conftest import AzureCorpus, GCSCorpus, HTTPCorpus, RefCorpus, S3Corpus
from .ref_scripts.compare import array_problems, config_problems, fill_value_problems, load_npy
from .ref_scripts.write_corpus import declare_corpus, list_cases

# One event loop for the module: the cached stores (and their S3 clients) live in it.
pytestmark = [pytest.mark.interop, pytest.mark.asyncio(loop_scope="module")]

CASES = list_cases()
GROUPS = ["corpus/" + path for path, _ in declare_corpus().groups] + ["xarray/"]
BACKENDS = [
    "local",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("gcs", marks=pytest.mark.gcs),
    pytest.param("http", marks=pytest.mark.http),
    # Azurite stores ~65 blobs/s whatever the concurrency (its node process is the
    # bottleneck), so uploading the corpus takes ~40 s: in the slow run (-m slow).
    pytest.param("azure", marks=[pytest.mark.azure, pytest.mark.slow]),
]
PICKLE_CASE = "corpus/objects/pickle"

StoreMaker = Callable[[str], Store]


def codec_config(codec: Any) -> Any:
    """A codec (numcodecs object or config dict) as its JSON config."""
    if codec is None or isinstance(codec, dict):
        return codec
    return codec.get_config()


def as_array(data: Any, dtype: np.dtype[Any]) -> Any:
    """zarr-python 2 returns numpy scalars for 0-d reads; accept those as 0-d arrays."""
    return np.asarray(data) if isinstance(data, np.generic) and data.dtype == dtype else data


async def array_problems_azarr(arr: Any, entry: dict[str, Any], root: Path) -> list[str]:
    """Everything azarr reports about ``arr`` that differs from zarr 2.18's view in ``entry``."""
    problems: list[str] = []
    expected = load_npy(root / entry["expected"])
    if tuple(arr.shape) != tuple(entry["shape"]):
        problems.append(f"shape {arr.shape} != expected {tuple(entry['shape'])}")
    if tuple(arr.chunks) != tuple(entry["chunks"]):
        problems.append(f"chunks {arr.chunks} != expected {tuple(entry['chunks'])}")
    if arr.dtype != expected.dtype or arr.dtype.descr != expected.dtype.descr:
        problems.append(f"dtype {arr.dtype!r} != expected {expected.dtype!r}")
    if arr.order != entry["order"]:
        problems.append(f"order {arr.order!r} != expected {entry['order']!r}")
    separator = entry["dimension_separator"] or "."
    if arr.dimension_separator != separator:
        problems.append(f"dimension_separator {arr.dimension_separator!r} != expected {separator!r}")
    fill = None if entry["fill"] is None else load_npy(root / entry["fill"])
    problems += fill_value_problems(arr.fill_value, fill, expected.dtype)
    problems += config_problems(codec_config(arr.compressor), entry["compressor"], "compressor")
    filters = None if not arr.filters else [codec_config(f) for f in arr.filters]
    problems += config_problems(filters, entry["filters"], "filters")
    problems += config_problems(arr.attrs.asdict(), entry["attrs"], "attrs")
    try:
        data = as_array(await arr.getitem(Ellipsis), expected.dtype)
    except Exception as exc:
        return [*problems, f"getitem(...) raised {exc!r}"]
    problems += array_problems(data, expected, "getitem(...)")
    if expected.ndim and expected.size:
        # a region crossing chunk boundaries, starting and ending inside chunks
        region = tuple(slice(n // 3, n - n // 4) for n in expected.shape)
        try:
            part = await arr.getitem(region)
        except Exception as exc:
            return [*problems, f"getitem({region}) raised {exc!r}"]
        problems += array_problems(part, expected[region], f"getitem({region})")
    return problems


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def store_cache() -> AsyncIterator[dict[tuple[str, str], Store]]:
    """Stores shared by the module's tests (one event loop), so S3 clients are built once."""
    cache: dict[tuple[str, str], Store] = {}
    yield cache
    for store in cache.values():
        await store.close()


@pytest.fixture
def make_store(
    request: pytest.FixtureRequest, zarr2_corpus: RefCorpus, store_cache: dict[tuple[str, str], Store]
) -> StoreMaker:
    """``make_store(store_name)``: a read-only azarr store on the corpus: local, S3, GCS or HTTP."""
    backend: str = request.param

    def make(store_name: str) -> Store:
        key = (backend, store_name)
        if key not in store_cache:
            if backend == "local":
                store_cache[key] = LocalStore(zarr2_corpus.root / store_name, read_only=True)
            elif backend == "gcs":
                gcs: GCSCorpus = request.getfixturevalue("gcs_corpus")
                store_cache[key] = GCSStore(
                    f"{gcs.prefix}/{store_name}", storage_options=gcs.storage_options, read_only=True
                )
            elif backend == "azure":
                azure: AzureCorpus = request.getfixturevalue("azure_corpus")
                store_cache[key] = AzureBlobStore(
                    f"{azure.prefix}/{store_name}", storage_options=azure.storage_options, read_only=True
                )
            elif backend == "http":
                http: HTTPCorpus = request.getfixturevalue("http_corpus")
                store_cache[key] = HTTPStore(http.url(store_name))
            else:
                s3: S3Corpus = request.getfixturevalue("s3_corpus")
                store_cache[key] = S3Store(
                    f"{s3.prefix}/{store_name}", storage_options=s3.storage_options, read_only=True
                )
        return store_cache[key]

    return make


async def test_manifest_matches_declared_cases(zarr2_corpus: RefCorpus) -> None:
    """The parametrization (from the script's declarations) covers exactly what was written."""
    assert sorted(e["id"] for e in zarr2_corpus.arrays) == sorted(CASES)
    assert len(CASES) == len(set(CASES))


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
@pytest.mark.parametrize("case", CASES)
async def test_read_array(case: str, make_store: StoreMaker, zarr2_corpus: RefCorpus) -> None:
    entry = zarr2_corpus.array(case)
    arr = await azarr.open_array(
        make_store(entry["store"]), mode="r", path=entry["path"], allow_pickle=entry["needs_pickle"]
    )
    problems = await array_problems_azarr(arr, entry, zarr2_corpus.root)
    assert not problems, f"{case}:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
async def test_pickle_refused_without_opt_in(make_store: StoreMaker) -> None:
    store = make_store("corpus.zarr")
    with pytest.raises(UnsafeCodecError):
        arr = await azarr.open_array(store, mode="r", path="objects/pickle")
        await arr.getitem(Ellipsis)
    root = await azarr.open_consolidated(store)
    assert isinstance(root, azarr.AsyncGroup)
    with pytest.raises(UnsafeCodecError):
        node = await root.get("objects/pickle")
        assert isinstance(node, azarr.AsyncArray)
        await node.getitem(Ellipsis)


@pytest.mark.parametrize("make_store", ["local"], indirect=True)
async def test_pickle_read_with_opt_in(make_store: StoreMaker, zarr2_corpus: RefCorpus) -> None:
    entry = zarr2_corpus.array(PICKLE_CASE)
    arr = await azarr.open_array(
        make_store("corpus.zarr"), mode="r", path="objects/pickle", allow_pickle=True
    )
    data = await arr.getitem(Ellipsis)
    assert not array_problems(data, load_npy(zarr2_corpus.root / entry["expected"]))
    assert data[2] == 3 + 4j and data[0] == (1, 2)


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
@pytest.mark.parametrize("group", GROUPS)
async def test_group_attributes(group: str, make_store: StoreMaker, zarr2_corpus: RefCorpus) -> None:
    store_name, _, path = group.partition("/")
    entry = next(g for g in zarr2_corpus.groups if g["store"] == f"{store_name}.zarr" and g["path"] == path)
    grp = await azarr.open_group(make_store(entry["store"]), mode="r", path=path or None)
    assert isinstance(grp, azarr.AsyncGroup)
    assert grp.attrs.asdict() == entry["attrs"]


def _children(corpus: RefCorpus, store_name: str, parent: str) -> tuple[set[str], set[str]]:
    """(array names, group names) directly below ``parent`` according to the manifest."""

    def direct(path: str) -> str | None:
        prefix = f"{parent}/" if parent else ""
        rest = path[len(prefix) :] if path.startswith(prefix) and path != parent else None
        return rest if rest and "/" not in rest else None

    arrays = {n for e in corpus.arrays if e["store"] == store_name and (n := direct(e["path"]))}
    groups = {n for g in corpus.groups if g["store"] == store_name and (n := direct(g["path"]))}
    return arrays, groups


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
async def test_hierarchy_navigation(make_store: StoreMaker, zarr2_corpus: RefCorpus) -> None:
    root = await azarr.open_group(make_store("corpus.zarr"), mode="r")
    for parent in ["", "hierarchy", "hierarchy/child", "hierarchy/child/grandchild/great", "shapes"]:
        grp = root if not parent else await root.get(parent)
        assert isinstance(grp, azarr.AsyncGroup), parent
        arrays, groups = _children(zarr2_corpus, "corpus.zarr", parent)
        assert {k async for k in grp.array_keys()} == arrays, parent
        assert {k async for k in grp.group_keys()} == groups, parent
    leaf = await root.get("hierarchy/child/grandchild/great/leaf")
    assert isinstance(leaf, azarr.AsyncArray)
    assert leaf.attrs.asdict() == {"units": "m", "scale": 0.5, "valid_range": [0, 100], "meta": {"x": "y"}}


def _strip_node_metadata(src: Path, dst: Path) -> None:
    """Copy a store without its per-node metadata: only the root ``.zmetadata`` can describe it."""
    shutil.copytree(src, dst)
    for doc in dst.rglob("*"):
        if doc.name in {".zarray", ".zattrs", ".zgroup"}:
            doc.unlink()


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
@pytest.mark.parametrize("store_name", ["corpus.zarr", "xarray.zarr"])
async def test_open_consolidated(
    store_name: str,
    make_store: StoreMaker,
    zarr2_corpus: RefCorpus,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Open the hierarchy from ``.zmetadata`` and read every node through it.

    Locally the per-node documents are deleted first, so everything must come from ``.zmetadata``;
    over HTTP the server gives no directory listings, so nothing can come from listing.
    """
    backend = request.node.callspec.params["make_store"]
    made_here = backend in ("local", "http")  # not from the module's cache: close it here
    if backend == "local":
        stripped = tmp_path / store_name
        _strip_node_metadata(zarr2_corpus.root / store_name, stripped)
        store: Store = LocalStore(stripped, read_only=True)
    elif backend == "http":
        http: HTTPCorpus = request.getfixturevalue("http_corpus")
        store = HTTPStore(http.url(store_name, listings=False))
    else:
        store = make_store(store_name)
    try:
        root = await azarr.open_consolidated(store, allow_pickle=True)
        assert isinstance(root, azarr.AsyncGroup)
        failures: dict[str, list[str]] = {}
        for g in zarr2_corpus.groups:
            if g["store"] == store_name:
                node = root if not g["path"] else await root.get(g["path"])
                if not isinstance(node, azarr.AsyncGroup) or node.attrs.asdict() != g["attrs"]:
                    failures[g["path"] or "/"] = [
                        f"group: {node!r} attrs {node.attrs.asdict()} != {g['attrs']}"
                    ]

        async def check(entry: dict[str, Any]) -> None:
            node = await root.get(entry["path"])
            if not isinstance(node, azarr.AsyncArray):
                failures[entry["path"]] = [f"not an array: {node!r}"]
            elif problems := await array_problems_azarr(node, entry, zarr2_corpus.root):
                failures[entry["path"]] = problems

        await asyncio.gather(*(check(e) for e in zarr2_corpus.arrays if e["store"] == store_name))
        report = "\n".join(f"{path}:\n  " + "\n  ".join(p) for path, p in failures.items())
        assert not failures, f"{len(failures)} node(s) differ through open_consolidated:\n{report}"
    finally:
        if made_here:
            await store.close()


XARRAY_DIMS = {
    "time": ["time"],
    "lat": ["lat"],
    "lon": ["lon"],
    "temperature": ["time", "lat", "lon"],
    "precip": ["time", "lat"],
}


@pytest.mark.parametrize("make_store", BACKENDS, indirect=True)
async def test_xarray_dataset(make_store: StoreMaker, zarr2_corpus: RefCorpus) -> None:
    """The raw zarr view of an xarray ``to_zarr`` dataset: dimension names, CF attributes, sizes."""
    root = await azarr.open_consolidated(make_store("xarray.zarr"))
    assert isinstance(root, azarr.AsyncGroup)
    assert root.attrs.asdict() == {"Conventions": "CF-1.8", "title": "azarr interop dataset"}
    assert {k async for k in root.array_keys()} == set(XARRAY_DIMS)
    sizes: dict[str, int] = {}
    for name in ["time", "lat", "lon"]:
        coord = await root.get(name)
        assert isinstance(coord, azarr.AsyncArray)
        sizes[name] = coord.shape[0]
    for name, dims in XARRAY_DIMS.items():
        arr = await root.get(name)
        assert isinstance(arr, azarr.AsyncArray)
        assert arr.attrs["_ARRAY_DIMENSIONS"] == dims, name
        assert arr.shape == tuple(sizes[d] for d in dims), name
    temperature, precip, time = [await root.get(name) for name in ("temperature", "precip", "time")]
    assert isinstance(temperature, azarr.AsyncArray)
    assert isinstance(precip, azarr.AsyncArray)
    assert isinstance(time, azarr.AsyncArray)
    assert temperature.attrs["units"] == "K"
    assert np.isnan(temperature.fill_value)
    assert temperature.dtype == np.dtype("<f4")
    assert precip.attrs["scale_factor"] == 0.01
    assert precip.fill_value == -9999 and precip.dtype == np.dtype("<i2")
    assert time.attrs["units"].startswith("days since 2024-01-01")
    assert (await time.getitem(Ellipsis)).tolist() == [0, 1, 2, 3]
