"""Check, with zarr-python 2.18, a directory of zarr stores written by azarr (run with the reference python).

Usage: ``python read_and_check.py TARGET_DIR [--json REPORT]``

TARGET_DIR holds the stores, ``manifest.json`` and the expected ``.npy`` files (same layout and schema
as ``write_corpus.py`` produces). For every array entry this opens the array with
``zarr.open_array(path, mode='r')`` and compares shape, chunks, dtype, order, fill_value, compressor and
filter configs, dimension separator, attributes and the data (bit for bit). Stores marked
``consolidated`` are also opened with ``zarr.open_consolidated`` and every array and group is checked
through it too. Optional per-array ``chunk_keys`` lists the exact chunk files that must exist.

Prints one line per check and a summary; exits 1 if anything differs, 2 on bad usage. With
``--json REPORT`` it also writes ``{"<store>/<path>": [problem, ...], ...}`` (failures only) there.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import zarr
from compare import MANIFEST, array_problems, config_problems, fill_value_problems, load_npy

# The manifest comes from the test suite itself; it may include a Pickle-encoded array on purpose.
numcodecs.pickles.ALLOW_UNSAFE_PICKLE_DECODE = True

META_KEYS = {".zarray", ".zattrs", ".zgroup", ".zmetadata"}


def _raw_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def _comparable(meta: dict[str, Any]) -> dict[str, Any]:
    """A ``.zarray`` document with the optional ``dimension_separator`` made explicit."""
    return {**meta, "dimension_separator": meta.get("dimension_separator", ".")}


def check_array(arr: zarr.Array, entry: dict[str, Any], target: Path, how: str) -> list[str]:
    problems: list[str] = []
    expected = load_npy(target / entry["expected"])
    if list(arr.shape) != list(entry["shape"]):
        problems.append(f"shape {list(arr.shape)} != expected {entry['shape']}")
    if list(arr.chunks) != list(entry["chunks"]):
        problems.append(f"chunks {list(arr.chunks)} != expected {entry['chunks']}")
    if arr.dtype != expected.dtype or arr.dtype.descr != expected.dtype.descr:
        problems.append(f"dtype {arr.dtype!r} != expected {expected.dtype!r}")
    if arr.order != entry["order"]:
        problems.append(f"order {arr.order!r} != expected {entry['order']!r}")
    fill = None if entry.get("fill") is None else load_npy(target / entry["fill"])
    problems += fill_value_problems(arr.fill_value, fill, arr.dtype)
    compressor = None if arr.compressor is None else arr.compressor.get_config()
    problems += config_problems(compressor, entry["compressor"], "compressor")
    filters = None if not arr.filters else [f.get_config() for f in arr.filters]
    problems += config_problems(filters, entry["filters"], "filters")
    problems += config_problems(arr.attrs.asdict(), entry["attrs"], "attrs")
    try:
        data = arr[...]
    except Exception as exc:
        problems.append(f"reading data failed: {exc!r}\n{traceback.format_exc()}")
    else:
        if not isinstance(data, np.ndarray):  # zarr 2 returns a numpy scalar for 0-d arrays
            data = np.asarray(data, dtype=arr.dtype)
        problems += array_problems(data, expected)
    return [f"[{how}] {p}" for p in problems]


def check_raw(store_dir: Path, entry: dict[str, Any]) -> list[str]:
    """Checks on the stored documents themselves (what zarr's parsed view would hide)."""
    problems: list[str] = []
    array_dir = store_dir / entry["path"] if entry["path"] else store_dir
    meta = _raw_json(array_dir / ".zarray")
    if meta is None:
        return [f"[raw] no .zarray at {array_dir}"]
    if meta.get("zarr_format") != 2:
        problems.append(f"[raw] zarr_format {meta.get('zarr_format')!r} != 2")
    if "dtype" in entry:
        problems += [f"[raw] {p}" for p in config_problems(meta.get("dtype"), entry["dtype"], "dtype")]
    sep = meta.get("dimension_separator", ".")
    want_sep = entry.get("dimension_separator") or "."
    if sep != want_sep:
        problems.append(f"[raw] dimension_separator {sep!r} != expected {want_sep!r}")
    if "zarray" in entry:
        problems += [
            f"[raw] {p}" for p in config_problems(_comparable(meta), _comparable(entry["zarray"]), ".zarray")
        ]
    if "chunk_keys" in entry:
        present = sorted(
            str(p.relative_to(array_dir))
            for p in array_dir.rglob("*")
            if p.is_file() and p.name not in META_KEYS
        )
        if present != sorted(entry["chunk_keys"]):
            problems.append(f"[raw] chunk files {present} != expected {sorted(entry['chunk_keys'])}")
    return problems


def _guarded(check: Any, *args: Any) -> list[str]:
    """Run a check; an unexpected exception becomes a problem (with its traceback) instead of a crash."""
    try:
        problems: list[str] = check(*args)
    except Exception as exc:
        return [f"check crashed: {exc!r}\n{traceback.format_exc()}"]
    return problems


def check_array_entry(entry: dict[str, Any], target: Path, consolidated_root: Any) -> list[str]:
    store_dir = target / entry["store"]
    problems = check_raw(store_dir, entry)
    try:
        arr = zarr.open_array(str(store_dir), mode="r", path=entry["path"] or None)
    except Exception as exc:
        problems.append(f"[open_array] failed: {exc!r}")
    else:
        problems += check_array(arr, entry, target, "open_array")
    if consolidated_root is not None:
        try:
            node = consolidated_root[entry["path"]] if entry["path"] else consolidated_root
        except Exception as exc:
            problems.append(f"[consolidated] failed: {exc!r}")
        else:
            if isinstance(node, zarr.Array):
                problems += check_array(node, entry, target, "consolidated")
            else:
                problems.append(f"[consolidated] node is a {type(node).__name__}, not an array")
    return problems


def check_group_entry(entry: dict[str, Any], target: Path, consolidated_root: Any) -> list[str]:
    problems: list[str] = []
    store_dir = target / entry["store"]
    group_dir = store_dir / entry["path"] if entry["path"] else store_dir
    if _raw_json(group_dir / ".zgroup") != {"zarr_format": 2}:
        problems.append(f"[raw] .zgroup is {_raw_json(group_dir / '.zgroup')!r}")
    try:
        grp = zarr.open_group(str(store_dir), mode="r", path=entry["path"] or None)
    except Exception as exc:
        problems.append(f"[open_group] failed: {exc!r}")
    else:
        problems += [
            f"[open_group] {p}" for p in config_problems(grp.attrs.asdict(), entry["attrs"], "attrs")
        ]
    if consolidated_root is not None:
        try:
            node = consolidated_root[entry["path"]] if entry["path"] else consolidated_root
        except Exception as exc:
            problems.append(f"[consolidated] failed: {exc!r}")
        else:
            problems += [
                f"[consolidated] {p}" for p in config_problems(node.attrs.asdict(), entry["attrs"], "attrs")
            ]
    return problems


def check_zmetadata(store_name: str, target: Path, manifest: dict[str, Any]) -> list[str]:
    """``.zmetadata`` lists every node, and each document equals the node's own (it is up to date)."""
    problems: list[str] = []
    store_dir = target / store_name
    meta = _raw_json(store_dir / ".zmetadata") or {}
    if meta.get("zarr_consolidated_format") != 1:
        problems.append(f"zarr_consolidated_format {meta.get('zarr_consolidated_format')!r} != 1")
    documents: dict[str, Any] = meta.get("metadata", {})
    listed = {key.rpartition("/")[0] for key in documents if key.rpartition("/")[2] in (".zarray", ".zgroup")}
    wanted = {e["path"] for e in manifest["arrays"] if e["store"] == store_name}
    wanted |= {e["path"] for e in manifest.get("groups", []) if e["store"] == store_name}
    if wanted - listed:
        problems.append(f"nodes missing from .zmetadata: {sorted(wanted - listed)}")
    for key, doc in documents.items():
        on_disk = _raw_json(store_dir / key)
        if on_disk is None:
            problems.append(f"{key!r} is in .zmetadata but not in the store")
        elif on_disk != doc:
            problems.append(f"{key!r} in .zmetadata differs from the stored document: {doc!r} != {on_disk!r}")
    for doc in store_dir.rglob("*"):
        key = doc.relative_to(store_dir).as_posix()
        if doc.name in (".zarray", ".zgroup", ".zattrs") and key not in documents:
            problems.append(f"{key!r} is in the store but not in .zmetadata")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--json"):
        print(__doc__, file=sys.stderr)
        return 2
    target = Path(argv[1])
    json_report = Path(argv[3]) if len(argv) == 4 else None
    manifest = json.loads((target / MANIFEST).read_text())
    versions = f"zarr {zarr.__version__}, numcodecs {numcodecs.__version__}, numpy {np.__version__}"
    print(f"{versions}: checking {target}")
    failures: dict[str, list[str]] = {}

    def record(name: str, problems: list[str]) -> None:
        if problems:
            failures.setdefault(name, []).extend(problems)

    consolidated: dict[str, Any] = {}
    for store_name, info in manifest.get("stores", {}).items():
        if info.get("consolidated"):
            try:
                consolidated[store_name] = zarr.open_consolidated(str(target / store_name), mode="r")
            except Exception as exc:
                record(f"{store_name}/.zmetadata", [f"zarr.open_consolidated failed: {exc!r}"])

    for entry in manifest["arrays"]:
        name = f"{entry['store']}/{entry['path']}"
        problems = _guarded(check_array_entry, entry, target, consolidated.get(entry["store"]))
        record(name, problems)
        print(f"{'FAIL' if problems else 'ok  '} array {name}")

    for entry in manifest.get("groups", []):
        name = f"{entry['store']}/{entry['path']}"
        problems = _guarded(check_group_entry, entry, target, consolidated.get(entry["store"]))
        record(name, problems)
        print(f"{'FAIL' if problems else 'ok  '} group {name}")

    for store_name in consolidated:
        problems = _guarded(check_zmetadata, store_name, target, manifest)
        record(f"{store_name}/.zmetadata", problems)
        print(f"{'FAIL' if problems else 'ok  '} consolidated metadata {store_name}/.zmetadata")

    n_arrays, n_groups = len(manifest["arrays"]), len(manifest.get("groups", []))
    if json_report is not None:
        json_report.write_text(json.dumps(failures, indent=1))
    if failures:
        print(f"\n{len(failures)} of {n_arrays} arrays / {n_groups} groups FAILED:")
        for name, problems in failures.items():
            print(f"\n== {name}")
            for p in problems:
                print("   " + p.replace("\n", "\n   "))
        return 1
    print(f"\nall {n_arrays} arrays and {n_groups} groups match")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
