"""Hierarchy paths: normalizing node paths and building the store keys under them."""

from __future__ import annotations

from azarr.storage import validate_key


def normalize_path(path: str | bytes | None) -> str:
    """Normalize a node path to ``""`` (root) or ``"a/b"``: no leading/trailing slash.

    zarr-python 2's ``normalize_storage_path``: backslashes become slashes, runs of
    slashes one slash (``"a\\b"`` and ``"a//b"`` are ``"a/b"``), ``bytes`` are decoded
    as ASCII and other objects taken as ``str(path)``; ``..`` and ``.`` segments are
    refused (zarr-python 2 refuses them too).

    Raises
    ------
    InvalidKeyError
        The path contains ``..``/``.`` segments or characters no key may hold.
    """
    if path is None:
        return ""
    text = path.decode("ascii") if isinstance(path, bytes) else str(path)
    text = "/".join(part for part in text.replace("\\", "/").split("/") if part)
    if text:
        validate_key(text)
    return text


def join_path(parent: str, name: str | bytes) -> str:
    """The path of ``name`` seen from the group at ``parent``: ``"a"``, ``"b/c"`` -> ``"a/b/c"``.

    A name starting with ``/`` is absolute, from the root of the store (zarr-python 2:
    ``group["/x"]``, ``group.require_group("/a/b")``, ``group.move(..., "/bar")``).
    """
    absolute = isinstance(name, str) and name.startswith("/")
    name = normalize_path(name)
    if absolute or not parent:
        return name
    return f"{parent}/{name}" if name else parent


def node_key(path: str, name: str) -> str:
    """Store key of document or chunk ``name`` under node ``path`` (``"a/b", ".zarray"`` -> ``"a/b/.zarray"``)."""
    return f"{path}/{name}" if path else name


def basename(path: str) -> str:
    """Last segment of a node path; ``""`` for the root."""
    return path.rsplit("/", 1)[-1]
