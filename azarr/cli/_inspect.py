"""``azarr info``, ``azarr tree`` and ``azarr ls``: look at a hierarchy without reading chunk data."""

from __future__ import annotations

import asyncio
from typing import Any

import click

import azarr
from azarr import AsyncArray, AsyncGroup
from azarr.cli._app import Session, command
from azarr.cli._format import display_url, human_bytes, table
from azarr.core._array_info import describe_codec
from azarr.core._reports import array_tree_line
from azarr.errors import GroupNotFoundError
from azarr.scheduler import StoreIO
from azarr.storage import Store

Node = AsyncArray | AsyncGroup


async def open_node(session: Session, url: str, path: str) -> Node:
    """The array or group at ``path`` in the store ``url`` names, opened read-only."""
    return await azarr.open(session.store(url), mode="r", path=path)


def array_summary(arr: AsyncArray) -> dict[str, Any]:
    """An array's configuration as JSON values (no I/O).

    ``codecs`` is the codec chain as Zarr v3 entries for both formats (a v2 array's
    ``order``, ``filters``, memory and ``compressor``); ``compressor``/``filters`` are the
    ``.zarray`` members (None for v3), ``dtype`` the stored ``dtype``/``data_type``.
    """
    meta = arr.metadata.to_dict()
    v2 = arr.zarr_format == 2
    return {
        "kind": "array",
        "name": arr.name,
        "zarr_format": arr.zarr_format,
        "shape": list(arr.shape),
        "chunks": list(arr.chunks),
        "shards": None if arr.shards is None else list(arr.shards),
        "dtype": meta["dtype"] if v2 else meta["data_type"],
        "codecs": arr.codecs,
        "compressor": meta["compressor"] if v2 else None,
        "filters": meta["filters"] if v2 else None,
        "fill_value": meta["fill_value"],
        "order": arr.order,
        "dimension_separator": arr.dimension_separator,
        "dimension_names": None if arr.dimension_names is None else list(arr.dimension_names),
        "nchunks": arr.nchunks,
        "nbytes": arr.nbytes,
    }


async def array_info(arr: AsyncArray) -> dict[str, Any]:
    """`array_summary` plus what listing the store tells: chunks initialised, bytes stored."""
    stored, initialized = await asyncio.gather(arr.nbytes_stored(), arr.nchunks_initialized())
    return {
        **array_summary(arr),
        "nchunks_initialized": initialized,
        "nbytes_stored": stored,
        "ratio": round(arr.nbytes / stored, 3) if stored else None,
        "attrs": arr.attrs.asdict(),
    }


async def group_info(group: AsyncGroup) -> dict[str, Any]:
    """A group's direct members counted by kind, and its attributes."""
    members = [node async for _, node in group.members()]
    return {
        "kind": "group",
        "name": group.name,
        "zarr_format": group.zarr_format,
        "arrays": sum(isinstance(m, AsyncArray) for m in members),
        "groups": sum(isinstance(m, AsyncGroup) for m in members),
        "attrs": group.attrs.asdict(),
    }


def _codec_text(config: dict[str, Any] | None) -> str:
    if config is None:
        return "None"
    params = ", ".join(f"{k}={v!r}" for k, v in config.items() if k != "id")
    return f"{config['id']}({params})"


def _info_text(url: str, info: dict[str, Any]) -> str:
    if info["kind"] == "group":
        rows = [
            ("URL", url),
            ("Name", info["name"]),
            ("Type", "group"),
            ("Zarr format", str(info["zarr_format"])),
            ("Arrays", str(info["arrays"])),
            ("Groups", str(info["groups"])),
        ]
    else:
        stored = info["nbytes_stored"]
        rows = [
            ("URL", url),
            ("Name", info["name"]),
            ("Type", "array"),
            ("Zarr format", str(info["zarr_format"])),
            ("Shape", str(tuple(info["shape"]))),
            ("Chunks", str(tuple(info["chunks"]))),
            *([("Shards", str(tuple(info["shards"])))] if info["shards"] is not None else []),
            ("Data type", str(info["dtype"])),
            ("Fill value", repr(info["fill_value"])),
            ("Order", info["order"]),
            *(
                [
                    ("Filters", ", ".join(_codec_text(f) for f in info["filters"] or []) or "None"),
                    ("Compressor", _codec_text(info["compressor"])),
                ]
                if info["zarr_format"] == 2
                else [(f"Codec [{i}]", describe_codec(c)) for i, c in enumerate(info["codecs"])]
            ),
            ("Chunks initialized", f"{info['nchunks_initialized']}/{info['nchunks']}"),
            ("No. bytes", f"{info['nbytes']} ({human_bytes(info['nbytes'])})"),
            ("No. bytes stored", f"{stored} ({human_bytes(stored)})"),
            ("Storage ratio", "-" if info["ratio"] is None else f"{info['ratio']:.1f}"),
        ]
    if info["attrs"]:
        rows.append(("Attributes", ", ".join(sorted(info["attrs"]))))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}} : {v}" for k, v in rows)


@command("info")
@click.argument("url")
@click.option("--path", default="", help="Node path inside the store (default: the root).")
async def info(session: Session, url: str, path: str) -> None:
    """Shape, chunks, dtype, codecs, fill value, order, chunks initialised, bytes stored and ratio."""
    node = await open_node(session, url, path)
    data = await (array_info(node) if isinstance(node, AsyncArray) else group_info(node))
    shown = display_url(url)
    session.output({"url": shown, **data}, _info_text(shown, data))


def _tree_json(name: str, node: Node, children: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "path": node.path}
    if isinstance(node, AsyncArray):
        summary = array_summary(node)
        entry.update(
            {k: summary[k] for k in ("kind", "zarr_format", "shape", "chunks", "shards", "dtype", "codecs")}
        )
    else:
        entry.update(kind="group", zarr_format=node.zarr_format, children=list(children.values()))
    return entry


async def _tree_data(group: AsyncGroup, depth: int | None) -> dict[str, Any]:
    """The hierarchy below ``group`` as nested dicts (``children`` lists for groups)."""
    root = _tree_json(group.name, group, {})
    index: dict[str, dict[str, Any]] = {"": root}
    if depth == 0:
        return root
    async for rel, node in group.members(None if depth is None else depth - 1):
        parent, _, name = rel.rpartition("/")
        entry = _tree_json(name, node, {})
        index[parent]["children"].append(entry)
        index[rel] = entry
    return root


@command("tree")
@click.argument("url")
@click.option("--path", default="", help="Group path inside the store (default: the root).")
@click.option("--depth", type=click.IntRange(min=0), default=None, help="Levels to descend (default: all).")
async def tree(session: Session, url: str, path: str, depth: int | None) -> None:
    """The hierarchy as a tree: groups, and arrays with shape, dtype, format and codecs."""
    node = await open_node(session, url, path)
    if isinstance(node, AsyncArray):
        summary = array_summary(node)
        # The line a group's tree shows for it; "/" names a root array.
        line = array_tree_line(node.path.rpartition("/")[2] or "/", node, codecs=True)
        session.output({"name": node.name, "path": node.path, **summary}, line)
        return
    drawn = str(await node.tree(level=depth, codecs=True))
    first, _, rest = drawn.partition("\n")  # the root line says the hierarchy's format
    text = f"{first} (Zarr v{node.zarr_format})" + (f"\n{rest}" if rest else "")
    session.output(await _tree_data(node, depth) if session.json else None, text)


async def _node_row(name: str, node: Node, long: bool) -> dict[str, Any]:
    if isinstance(node, AsyncGroup):
        return {"name": name, "kind": "group"}
    entry = {**array_summary(node), "name": name}
    if long:
        entry["nbytes_stored"] = await node.nbytes_stored()
    return entry


async def _ls_rows(group: AsyncGroup, recursive: bool, long: bool) -> list[dict[str, Any]]:
    members = [item async for item in group.members(None if recursive else 0)]
    return list(await asyncio.gather(*(_node_row(name, node, long) for name, node in members)))


async def _listing_rows(store: Store, path: str, long: bool) -> list[dict[str, Any]]:
    """The entries of a location that is no Zarr node (a bucket root, a directory of datasets):
    hierarchies as their kind, other keys as ``key``, other directories as ``prefix``."""
    io = StoreIO(store)

    async def row(name: str) -> dict[str, Any]:
        child = f"{path}/{name}" if path else name
        try:
            return await _node_row(name, await azarr.open(store, mode="r", path=child), long)
        except GroupNotFoundError:  # neither an array nor a group
            return {"name": name, "kind": "key" if await io.exists(child) else "prefix"}

    return list(await asyncio.gather(*(row(name) for name in sorted(await io.list_dir(path)))))


def _ls_text(rows: list[dict[str, Any]], long: bool) -> str:
    if not long:
        return "\n".join(r["name"] + ("/" if r["kind"] in ("group", "prefix") else "") for r in rows)
    return table(
        (r["kind"], r["name"] + ("/" if r["kind"] != "key" else ""), "", "", "", "")
        if r["kind"] != "array"
        else (
            "array",
            r["name"],
            str(tuple(r["shape"])),
            str(r["dtype"]),
            str(tuple(r["chunks"])),
            human_bytes(r["nbytes_stored"]),
        )
        for r in rows
    )


@command("ls")
@click.argument("url")
@click.option("--path", default="", help="Group path inside the store (default: the root).")
@click.option("-l", "long", is_flag=True, help="Kind, shape, dtype, chunks and bytes stored.")
@click.option("-r", "recursive", is_flag=True, help="Every member below, not just the direct ones.")
async def ls(session: Session, url: str, path: str, long: bool, recursive: bool) -> None:
    """The members of a group (groups end in '/').

    Where there is no Zarr node (a bucket root, a directory of datasets), the entries there:
    the hierarchies among them as groups and arrays, other directories ending in '/'.
    """
    store = session.store(url)
    try:
        node = await azarr.open(store, mode="r", path=path)
    except GroupNotFoundError:
        rows = await _listing_rows(store, path.strip("/"), long)
        if not rows:
            raise
        session.output(rows, _ls_text(rows, long))
        return
    if isinstance(node, AsyncArray):
        raise click.UsageError(f"{display_url(url)} path {path!r} is an array, not a group; use 'azarr info'")
    rows = await _ls_rows(node, recursive, long)
    session.output(rows, _ls_text(rows, long))
