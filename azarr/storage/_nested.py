"""``NestedDirectoryStore``: read and write old nested-layout data (zarr-python 2 ``NestedDirectoryStore``).

Before ``dimension_separator`` existed (zarr-python < 2.8), nested data was
written with chunk keys ``"0.0"`` stored as files ``0/0``, and ``.zarray`` said
nothing about it. Opened through a plain `LocalStore` such an array
reads as all fill value. This store maps every chunk key whose last segment is
``digits(.digits)+`` to the nested file, as zarr-python 2 does
(``_nested_map_ckey``); arrays whose ``.zarray`` says ``"/"`` already use
``/`` keys and pass through unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path

from azarr.storage._local import LocalStore

_FLAT_CHUNK_KEY = re.compile(r"^\d+(\.\d+)+$")


def nested_key(key: str) -> str:
    """``"a/0.1.2"`` -> ``"a/0/1/2"``; other keys (``"a/.zarray"``, ``"a/0"``) unchanged."""
    head, _, last = key.rpartition("/")
    if not _FLAT_CHUNK_KEY.match(last):
        return key
    nested = last.replace(".", "/")
    return f"{head}/{nested}" if head else nested


class NestedDirectoryStore(LocalStore):
    """A directory store with nested chunk files (zarr-python 2 ``NestedDirectoryStore``).

    Listings show the files as they are (``a/0/1``), so counts that parse
    listed chunk keys (``nchunks_initialized``) see no ``.``-separated chunks;
    reads and writes by key are mapped. Arrays created here default to
    ``dimension_separator="/"``, as zarr-python 2.18's do.
    """

    dimension_separator = "/"

    def _path(self, key: str) -> Path:
        return super()._path(nested_key(key))
