"""``azarr get``: read a selection of an array to the screen, JSON or a ``.npy`` file."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import click
import numpy as np

from azarr import AsyncArray
from azarr.cli._app import Session, command
from azarr.cli._format import display_url
from azarr.cli._inspect import open_node
from azarr.indexing import SelectionError, parse_selection

#: Elements printed before NumPy summarises with "..." (the whole thing goes to -o or --json).
_PRINT_THRESHOLD = 1000


@command("get")
@click.argument("url")
@click.option("--path", default="", help="Array path inside the store (default: the root).")
@click.option(
    "--sel",
    "selection",
    default="",
    metavar="SELECTION",
    help='NumPy subscript without brackets: "0:10,::2", "[1,5,9],:", "...,-1" (default: everything).',
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False, path_type=Path), help="Write a .npy file here."
)
async def get(session: Session, url: str, path: str, selection: str, output: Path | None) -> None:
    """Read a selection of an array, with the selection language of azarr's services.

    Lists mixed with slices select orthogonally, lists alone pick points, as
    zarr-python 2's z[...] does. Without -o the values are printed (summarised
    when large); with --json they are printed as nested lists with shape and dtype.
    """
    try:
        parsed = parse_selection(selection)
    except SelectionError as exc:
        raise click.BadParameter(str(exc), param_hint="'--sel'") from None
    node = await open_node(session, url, path)
    if not isinstance(node, AsyncArray):
        raise click.UsageError(f"{display_url(url)} path {path!r} is a group; give --path of an array")
    try:
        data = np.asarray(await node.getitem(parsed))
    except SelectionError as exc:
        raise click.BadParameter(
            f"{exc} (array {node.name} has shape {node.shape})", param_hint="'--sel'"
        ) from None
    if output is not None:
        _save(output, data)
        session.note(f"wrote {data.shape} {data.dtype} to {output}")
    session.output(_as_json(data), None if output else _as_text(data))


def _save(output: Path, data: np.ndarray[Any, Any]) -> None:
    # Object arrays need pickle in .npy; refuse rather than write what np.load refuses by default.
    if data.dtype.hasobject:
        raise click.UsageError(
            f"cannot write an object array to {output} (.npy would need pickle); use --json"
        )
    buffer = io.BytesIO()
    np.save(buffer, data, allow_pickle=False)
    output.write_bytes(buffer.getvalue())


def _as_json(data: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {"shape": list(data.shape), "dtype": data.dtype.str, "data": data.tolist()}


def _as_text(data: np.ndarray[Any, Any]) -> str:
    return np.array2string(data, threshold=_PRINT_THRESHOLD, max_line_width=100)
