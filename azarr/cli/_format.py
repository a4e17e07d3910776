"""Plain-text formatting shared by the commands: byte sizes and aligned columns."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit


def human_bytes(n: float) -> str:
    """``1536`` -> ``"1.5 KiB"`` (binary units)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def table(rows: Iterable[Sequence[str]]) -> str:
    """Rows of cells as left-aligned columns separated by two spaces (trailing blanks trimmed)."""
    materialized = [list(r) for r in rows]
    if not materialized:
        return ""
    widths = [max(len(r[i]) for r in materialized) for i in range(len(materialized[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in materialized
    )


def display_url(url: str) -> str:
    """``url`` as it may be printed: a password in it (``https://user:pw@host/...``) shown as ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))
