"""Hierarchy paths: normalizing node paths and building the store keys under them."""

from __future__ import annotations

from azarr.storage import validate_key


def normalize_path(path: str | None) -> str:
    """Normalize a node path to ``""`` (root) or ``"a/b"``: no leading/trailing slash.

    Follows zarr-python 2's ``normalize_storage_path``, except that unsafe
    segments (``..``, ``.``) are refused instead of silently resolved.

    Raises
    ------
    InvalidKeyError
        The path contains ``..``/``.`` segments, backslashes or empty segments.
    """
    if path is None:
        return ""
    path = str(path).strip("/")
    if path:
        validate_key(path)
    return path


def join_path(parent: str, name: str) -> str:
    """Join a node path and a relative name (``"a"``, ``"b/c"`` -> ``"a/b/c"``)."""
    name = normalize_path(name)
    if not parent:
        return name
    return f"{parent}/{name}" if name else parent


def node_key(path: str, name: str) -> str:
    """Store key of document or chunk ``name`` under node ``path`` (``"a/b", ".zarray"`` -> ``"a/b/.zarray"``)."""
    return f"{path}/{name}" if path else name


def basename(path: str) -> str:
    """Last segment of a node path; ``""`` for the root."""
    return path.rsplit("/", 1)[-1]
