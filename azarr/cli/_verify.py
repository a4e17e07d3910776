"""``azarr verify``: check that a hierarchy is whole.

1. every metadata document parses (``.zarray``/``.zgroup`` or a Zarr v3 ``zarr.json``
   by opening the node, which also parses its ``.zattrs``; ``.zmetadata``, or a v3
   group's inline ``consolidated_metadata``, by opening it consolidated, and it must
   hold exactly the documents stored beside it, or it is stale);
2. every other key is a chunk of an array: under an array's directory, named by
   its chunk key encoding (v2: the separator; v3: ``c/1/0`` or ``1.0``...) with one
   in-grid integer per dimension; and every node's parents up to PATH are groups
   (a copy stopped part-way lacks them: ``azarr cp`` writes them last);
3. ``--decode``: every stored chunk is read and decoded, which checks it
   decompresses to exactly the chunk's size (the codec pipeline refuses anything else);
   a shard of a sharded Zarr v3 array is read whole, its index checked (checksum, every
   range inside the shard, no overlaps) and every inner chunk decoded;
4. ``--digest``: each array's zarr-python 2 compatible ``hexdigest``;
5. ``--against SRC`` (or ``azarr verify SRC DST``): every key of SRC is in DST with
   the same bytes, and DST has no other (`azarr.cli._against`): a partial copy fails.

Problems are collected, not raised: the report lists all of them and the exit status is 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import click

import azarr
from azarr import AsyncArray
from azarr.cli._against import compare_stores
from azarr.cli._app import CommandFailed, Session, command
from azarr.cli._format import display_url
from azarr.cli._progress import progress_bar
from azarr.metadata import (
    ZARR_JSON,
    ZARRAY,
    ZATTRS,
    ZGROUP,
    ZMETADATA,
    GroupV3Metadata,
    decode_json,
    is_metadata_key,
    parse_consolidated,
)
from azarr.scheduler import Progress, ProgressCallback, ProgressTracker, StoreIO, bounded_map, budget_for
from azarr.storage import Store


@dataclass
class Report:
    """What ``verify`` found."""

    documents: int = 0
    #: Arrays by path; their format and codec chain are in the JSON report (``formats``).
    arrays: dict[str, AsyncArray] = field(default_factory=dict)
    groups: list[str] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)
    chunks: int = 0
    decoded: int | None = None
    digests: dict[str, str] | None = None
    against: str | None = None
    compared: int | None = None
    problems: list[dict[str, str]] = field(default_factory=list)

    def problem(self, key: str, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else f"{type(error).__name__}: {' '.join(str(error).split())}"
        self.problems.append({"key": key, "error": text})

    def as_json(self, url: str) -> dict[str, Any]:
        return {
            "url": url,
            "ok": not self.problems,
            "documents": self.documents,
            "arrays": sorted(self.arrays),
            "formats": {
                name: {"zarr_format": arr.zarr_format, "codecs": arr.codecs}
                for name, arr in sorted(self.arrays.items())
            },
            "groups": sorted(self.groups),
            "chunks": self.chunks,
            "decoded": self.decoded,
            "digests": self.digests,
            "against": self.against,
            "compared": self.compared,
            "problems": self.problems,
        }

    def text(self) -> str:
        lines = [f"PROBLEM {p['key']}: {p['error']}" for p in self.problems]
        lines += [f"sha1 {digest}  {name or '/'}" for name, digest in sorted((self.digests or {}).items())]
        decoded = "" if self.decoded is None else f", {self.decoded} decoded"
        formats = sorted({arr.zarr_format for arr in self.arrays.values()})
        kinds = f" (Zarr {' and '.join(f'v{f}' for f in formats)})" if formats else ""
        if self.against is not None:
            decoded += f", {self.compared} keys compared with {self.against}"
        lines.append(
            f"{self.documents} metadata documents, {len(self.arrays)} arrays{kinds}, {len(self.groups)} groups, "
            f"{self.chunks} chunks{decoded}: "
            + ("ok" if not self.problems else f"{len(self.problems)} problem(s)")
        )
        return "\n".join(lines)


def _is_document(key: str) -> bool:
    return is_metadata_key(key) or key.rpartition("/")[2] == ZMETADATA


def _split(key: str) -> tuple[str, str]:
    directory, _, name = key.rpartition("/")
    return directory, name


async def _check_documents(store: Store, keys: list[str], report: Report) -> None:
    """Open every node that has a metadata document; note documents that do not parse."""
    present = set(keys)

    def node_document(directory: str) -> bool:
        return any(f"{directory}/{n}".lstrip("/") in present for n in (ZARRAY, ZGROUP, ZARR_JSON))

    for key in keys:
        if not _is_document(key):
            continue
        report.documents += 1
        directory, name = _split(key)
        try:
            if name == ZARRAY:
                report.arrays[directory] = await azarr.open_array(store, mode="r", path=directory)
            elif name == ZGROUP:
                await azarr.open_group(store, mode="r", path=directory)
                report.groups.append(directory)
            elif name == ZARR_JSON:
                node = await azarr.open(store, mode="r", path=directory, zarr_format=3)
                if isinstance(node, AsyncArray):
                    report.arrays[directory] = node
                else:
                    report.groups.append(directory)
                    await _check_inline_consolidated(store, key, keys, report)
            elif name == ZMETADATA:
                await azarr.open_consolidated(store, mode="r", path=directory)
                await _check_consolidated(store, key, keys, report)
            elif name == ZATTRS and not node_document(directory):
                report.problem(key, "attributes of no array or group (no .zarray or .zgroup beside it)")
        except Exception as exc:
            report.problem(key, exc)
            if name in (ZARRAY, ZARR_JSON):  # (a broken group's chunks-looking keys say so too)
                report.broken.add(directory)


def _check_parents(root: str, keys: list[str], report: Report) -> None:
    """Every node below ``root`` must sit in groups up to ``root``: a group whose document is
    missing while its members are there is what a copy stopped part-way leaves (``azarr cp``
    writes each group's document after everything below it, the root's last), so a partial
    copy never verifies clean. Zarr v3 has no implicit groups; zarr-python 2 writes every
    parent's ``.zgroup`` when it creates a node."""
    documents: dict[str, str] = {}  # node directory -> its document's name
    for key in keys:
        directory, name = _split(key)
        if name in (ZARRAY, ZGROUP, ZARR_JSON):
            documents.setdefault(directory, name)
    missing: set[str] = set()
    for node, name in sorted(documents.items()):
        parent = node
        while parent != root:
            parent = parent.rpartition("/")[0]
            if parent in documents or parent in missing or not parent.startswith(root):
                break
            missing.add(parent)
            report.problem(
                f"{parent}/{ZARR_JSON if name == ZARR_JSON else ZGROUP}".lstrip("/"),
                f"missing: {node!r} is stored but its group {parent or '/'!r} is not "
                "(a copy stopped before it was written?)",
            )


async def _check_consolidated(store: Store, key: str, keys: list[str], report: Report) -> None:
    """Compare ``.zmetadata`` with the documents stored beside it: a stale copy misleads readers."""
    io = StoreIO(store)
    directory = key.rpartition("/")[0]
    prefix = f"{directory}/" if directory else ""
    consolidated = parse_consolidated(await io.get(key) or b"{}", key=key)
    stored = [k for k in keys if k.startswith(prefix) and is_metadata_key(k)]
    for doc_key in stored:
        rel = doc_key[len(prefix) :]
        if rel not in consolidated:
            report.problem(key, f"stale: {doc_key!r} is not in it (run 'azarr consolidate')")
        elif consolidated[rel] != json.loads(await io.get(doc_key) or b"null"):
            report.problem(key, f"stale: its copy of {doc_key!r} differs from the stored document")
    for rel in sorted(set(consolidated) - {k[len(prefix) :] for k in stored}):
        report.problem(key, f"stale: lists {prefix + rel!r}, which is not stored")


async def _check_inline_consolidated(store: Store, key: str, keys: list[str], report: Report) -> None:
    """Compare a v3 group's inline ``consolidated_metadata`` with the ``zarr.json`` documents
    below it (compared without their own ``consolidated_metadata``, which zarr-python 3 sets
    to an empty one in nested groups)."""
    io = StoreIO(store)
    document = decode_json(await io.get(key) or b"{}", key=key)
    if not isinstance(document, dict) or document.get("consolidated_metadata") is None:
        return
    consolidated = GroupV3Metadata.from_json(document, key=key).consolidated or {}
    directory = key.rpartition("/")[0]
    prefix = f"{directory}/" if directory else ""

    def plain(doc: Any) -> Any:
        return (
            {k: v for k, v in doc.items() if k != "consolidated_metadata"} if isinstance(doc, dict) else doc
        )

    stored = [k for k in keys if k.startswith(prefix) and k != key and k.rpartition("/")[2] == ZARR_JSON]
    for doc_key in stored:
        rel = doc_key[len(prefix) : -len("/" + ZARR_JSON)]
        if rel not in consolidated:
            report.problem(
                key, f"stale: {doc_key!r} is not in its consolidated_metadata (run 'azarr consolidate')"
            )
        elif plain(consolidated[rel]) != plain(json.loads(await io.get(doc_key) or b"null")):
            report.problem(
                key, f"stale: its consolidated copy of {doc_key!r} differs from the stored document"
            )
    listed = {k[len(prefix) : -len("/" + ZARR_JSON)] for k in stored}
    for rel in sorted(set(consolidated) - listed):
        report.problem(key, f"stale: consolidated_metadata lists {prefix + rel!r}, which is not stored")


def _owner(key: str, owners: dict[str, AsyncArray | None]) -> tuple[bool, AsyncArray | None]:
    """Whether an array directory holds ``key`` (the deepest one), and that array (None if its
    ``.zarray`` did not parse)."""
    directory = key
    while directory:
        directory, _, _ = directory.rpartition("/")
        if directory in owners:
            return True, owners[directory]
    return False, None


def _chunk_coords(arr: AsyncArray, key: str) -> tuple[int, ...] | str:
    """Grid coordinates of chunk ``key`` of ``arr``, or why it is not one of its chunks."""
    name = key[len(arr.path) + 1 :] if arr.path else key
    found = arr.metadata.chunk_coords(name)
    grid = arr.metadata.cdata_shape if arr.ndim else (1,)  # the stored objects' grid (shards)
    if found is None:
        example = arr.metadata.chunk_key(tuple(0 for _ in grid) if arr.ndim else ())
        return f"not a chunk key of array {arr.name} ({arr.ndim}-d, chunk keys like {example!r})"
    coords = found or (0,)
    if any(c >= n for c, n in zip(coords, grid, strict=True)):
        return f"chunk {coords} is outside the chunk grid {grid} of array {arr.name}"
    return coords


def _check_chunk_keys(keys: list[str], report: Report) -> list[tuple[AsyncArray, tuple[int, ...], str]]:
    owners: dict[str, AsyncArray | None] = {**dict.fromkeys(report.broken), **report.arrays}
    chunks = []
    for key in keys:
        if _is_document(key):
            continue
        found, arr = _owner(key, owners)
        if arr is None:
            if not found:  # under a .zarray that did not parse: that problem is reported already
                report.problem(key, "belongs to no array (no .zarray or zarr.json in any directory above it)")
            continue
        coords = _chunk_coords(arr, key)
        if isinstance(coords, str):
            report.problem(key, coords)
            continue
        chunks.append((arr, coords, key))
    report.chunks = len(chunks)
    return chunks


async def check_hierarchy(
    store: Store, path: str, report: Report
) -> tuple[list[str], list[tuple[AsyncArray, tuple[int, ...], str]]]:
    """Steps 1 and 2 of the module on the hierarchy at ``path``: problems go to ``report``.

    Returns the keys listed and the chunks found (array, grid coordinates, key).
    """
    keys = sorted(await StoreIO(store).list_prefix(path))
    await _check_documents(store, keys, report)
    _check_parents(path, keys, report)
    return keys, _check_chunk_keys(keys, report)


async def _decode_all(
    store: Store,
    chunks: list[tuple[AsyncArray, tuple[int, ...], str]],
    report: Report,
    progress: ProgressCallback,
) -> None:
    tracker = ProgressTracker(len(chunks), progress)

    async def decode(item: tuple[AsyncArray, tuple[int, ...], str]) -> bool:
        arr, coords, key = item
        stored = 0

        def read(chunk: Progress) -> None:
            nonlocal stored
            stored = chunk.nbytes

        try:
            if arr.shards is not None:
                # The shard's region: one GET of the shard, its index checked, every inner
                # chunk decoded (each checked against the inner chunk shape).
                region = tuple(
                    slice(c * s, min((c + 1) * s, n))
                    for c, s, n in zip(coords, arr.shards, arr.shape, strict=True)
                )
                await arr.get_basic_selection(region)
                return True
            # A ``blocks`` read of one chunk: fetched through the budgeted path and decoded,
            # which checks the decoded size against the chunk shape. Its own progress report
            # carries the bytes fetched, which the bar counts.
            await arr.get_block_selection(coords if arr.ndim else (), progress=read)
            return True
        except Exception as exc:
            report.problem(key, exc)
            return False
        finally:
            tracker.advance(stored)

    results = await bounded_map(decode, chunks, budget_for(store).max_requests)
    report.decoded = sum(results)


@command("verify")
@click.argument("url")
@click.argument("copy", required=False, metavar="[DST]")
@click.option(
    "--against",
    metavar="SRC",
    help="Also check URL is a whole copy of SRC: no key missing, different or extra.",
)
@click.option("--path", default="", help="Check only the hierarchy below this path.")
@click.option("--decode", is_flag=True, help="Read and decode every stored chunk.")
@click.option("--digest", is_flag=True, help="Print each array's sha1 hexdigest (zarr-python 2 compatible).")
@click.option("--progress/--no-progress", default=None, help="Progress bar for --decode.")
async def verify(
    session: Session,
    url: str,
    copy: str | None,
    against: str | None,
    path: str,
    decode: bool,
    digest: bool,
    progress: bool | None,
) -> None:
    """Check a hierarchy: metadata parses, every key is a chunk of an array, chunks decode.

    With two URLs (SRC DST) or --against SRC, also check the hierarchy is a whole copy of
    SRC. Exit status 1 when any problem is found; every problem is listed with its key.
    """
    if copy is not None:
        if against is not None:
            raise click.UsageError("give SRC either as the first of two URLs or as --against, not both")
        url, against = copy, url
    store = session.store(url)
    report = Report()
    keys, chunks = await check_hierarchy(store, path.strip("/"), report)
    if against is not None:
        report.against = display_url(against)
        show = False if session.quiet or session.json else progress
        with progress_bar("compare", show=show) as callback:
            report.compared = await compare_stores(
                session.store(against), store, path.strip("/"), report.problem, callback
            )
    if decode:
        show = False if session.quiet or session.json else progress
        with progress_bar("decode", show=show) as callback:
            await _decode_all(store, chunks, report, callback)
    if digest:
        report.digests = {}
        for name, arr in sorted(report.arrays.items()):
            report.digests[name] = await arr.hexdigest()
    if not keys:
        report.problem(path or "/", f"no keys under {path or '/'!r} in {display_url(url)}")
    session.output(report.as_json(display_url(url)), report.text())
    if report.problems:
        raise CommandFailed
