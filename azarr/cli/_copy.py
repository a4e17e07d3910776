"""``azarr cp`` (copy a hierarchy's keys between stores) and ``azarr consolidate``."""

from __future__ import annotations

import re
import time
from typing import Any, Literal

import click

import azarr
from azarr.cli._app import Session, command, parse_option
from azarr.cli._format import display_url, human_bytes
from azarr.cli._progress import progress_bar
from azarr.errors import GroupNotFoundError, KeyExistsError
from azarr.metadata import ZARR_JSON, ZMETADATA, is_metadata_key
from azarr.scheduler import StoreIO, set_budget

IfExists = Literal["raise", "skip", "replace"]


class _IfExistsChoice(click.Choice):  # type: ignore[type-arg]
    """``--if-exists``: `copy_store`'s ``if_exists`` values. ``overwrite``, this option's first
    spelling of ``replace``, is still accepted so that scripts written with it keep working;
    it is not shown."""

    def __init__(self) -> None:
        super().__init__(["raise", "skip", "replace"])

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert("replace" if value == "overwrite" else value, param, ctx)


_progress_option = click.option(
    "--progress/--no-progress",
    default=None,
    help="Draw the progress bar (default: when stderr is a terminal and not -q/--json).",
)


@command("cp")
@click.argument("src")
@click.argument("dst")
@click.option(
    "--if-exists",
    type=_IfExistsChoice(),
    default="raise",
    show_default=True,
    help="Keys already in DST: fail before copying anything, leave them (resume), or replace them "
    "(copy_store's if_exists).",
)
@click.option("--dry-run", is_flag=True, help="List what would be copied or skipped; copy nothing.")
@click.option(
    "--exclude",
    multiple=True,
    metavar="REGEX",
    help="Leave out keys (relative to SRC) matching this regular expression (repeatable).",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=1),
    help="Requests in flight per store (default: azarr.config max_concurrency).",
)
@click.option(
    "-D",
    "--dst-storage-option",
    "dst_option",
    multiple=True,
    metavar="KEY=VALUE",
    help="storage_options for DST only (then -S applies to SRC only).",
)
@_progress_option
async def cp(
    session: Session,
    src: str,
    dst: str,
    if_exists: IfExists,
    dry_run: bool,
    exclude: tuple[str, ...],
    max_requests: int | None,
    dst_option: tuple[str, ...],
    progress: bool | None,
) -> None:
    """Copy every key under SRC to DST as stored bytes (no decoding), concurrently.

    azarr.copy_store with a progress bar (keys, bytes, rate, ETA). Each key is
    written whole, so a copy that was killed resumes with --if-exists skip.
    """
    for pattern in exclude:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise click.BadParameter(
                f"{pattern!r} is not a regular expression: {exc}", param_hint="'--exclude'"
            ) from None
    dst_options = dict(parse_option(o) for o in dst_option) if dst_option else None
    source = session.store(src, read_only=True)
    dest = session.store(dst, read_only=False, options=dst_options)
    if max_requests is not None:
        for store in (source, dest):
            set_budget(store, max_requests=max_requests)
    lines: list[str] = []
    show = False if session.quiet or session.json or dry_run else progress
    start = time.monotonic()
    try:
        with progress_bar("copy", show=show, unit="keys") as callback:
            result = await azarr.copy_store(
                source,
                dest,
                if_exists=if_exists,
                excludes=list(exclude),
                dry_run=dry_run,
                log=lines.append if dry_run else None,
                progress=callback,
            )
    except KeyExistsError as exc:
        # copy_store names its keyword; a CLI user needs the option.
        raise KeyExistsError(
            f"{exc} (on the command line: --if-exists skip or --if-exists replace)"
        ) from None
    seconds = time.monotonic() - start
    if result.n_copied + result.n_skipped == 0:
        # As `azarr info` fails on a URL with nothing at it: a mistyped source is not a copy of 0 keys.
        left = " that --exclude leaves" if exclude else ""
        raise GroupNotFoundError(f"nothing to copy: no keys{left} under {display_url(src)}")
    data = {
        "src": display_url(src),
        "dst": display_url(dst),
        "dry_run": dry_run,
        "n_copied": result.n_copied,
        "n_skipped": result.n_skipped,
        "n_bytes_copied": result.n_bytes_copied,
        "seconds": round(seconds, 3),
        "bytes_per_second": round(result.n_bytes_copied / seconds) if seconds > 0 else None,
    }
    if dry_run:
        session.output(data, "\n".join(lines))
        return
    session.output(
        data,
        f"copied {result.n_copied} keys ({human_bytes(result.n_bytes_copied)}), "
        f"skipped {result.n_skipped}, in {seconds:.1f} s "
        f"({human_bytes(result.n_bytes_copied / max(seconds, 1e-9))}/s)",
    )


@command("consolidate")
@click.argument("url")
@click.option("--path", default="", help="Hierarchy root inside the store (default: the root).")
@click.option("--dry-run", is_flag=True, help="List the documents that would be consolidated; write nothing.")
async def consolidate(session: Session, url: str, path: str, dry_run: bool) -> None:
    """Write .zmetadata (azarr.consolidate_metadata): one read then opens the whole hierarchy.

    A Zarr v3 hierarchy is consolidated inline, in its root zarr.json (as zarr-python 3 does).
    """
    store = session.store(url, read_only=dry_run)
    root = path.strip("/")
    prefix = f"{root}/" if root else ""
    keys = sorted(
        [
            k
            for k in await StoreIO(store).list_prefix(root)
            if is_metadata_key(k) and not k.endswith(ZMETADATA)
        ]
    )
    root_v3 = f"{prefix}{ZARR_JSON}"
    v3 = root_v3 in keys
    if v3:  # consolidated inline: the v3 root's own zarr.json holds the others
        keys = [k for k in keys if k != root_v3 and k.rpartition("/")[2] == ZARR_JSON]
    target = root_v3 if v3 else f"{prefix}{ZMETADATA}"
    data: dict[str, Any] = {"url": display_url(url), "key": target, "documents": keys, "dry_run": dry_run}
    if dry_run:
        session.output(data, "\n".join([*keys, f"dry run: would write {len(keys)} documents to {target}"]))
        return
    if not keys and not v3:
        raise GroupNotFoundError(
            f"no metadata documents under {path or '/'!r} in {display_url(url)}: nothing to consolidate"
        )
    await azarr.consolidate_metadata(store, path=root)
    session.output(data, f"wrote {len(keys)} documents to {target}")
