"""Synchronous ``MutableMapping[str, bytes]`` backends for MappingStore tests (real databases, no mocks).

Importable as ``mappings`` (conftest puts ``tests/`` on ``sys.path``), also in spawned
worker processes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any


class SQLiteMapping(MutableMapping[str, bytes]):
    """A key-value table in an SQLite file, like zarr-python 2's ``SQLiteStore``.

    Pickles as its file name (a reference to the data), so a copy in another process
    sees the same keys. One connection shared by threads under a lock.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)")

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])  # type: ignore[misc]

    def __getitem__(self, key: str) -> bytes:
        with self._lock:
            row = self._db.execute("SELECT v FROM kv WHERE k = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(key)
        return bytes(row[0])

    def __setitem__(self, key: str, value: bytes) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (key, bytes(value)))

    def __delitem__(self, key: str) -> None:
        with self._lock:
            deleted = self._db.execute("DELETE FROM kv WHERE k = ?", (key,)).rowcount
        if not deleted:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM kv WHERE k = ?", (key,)).fetchone() is not None

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            keys = [row[0] for row in self._db.execute("SELECT k FROM kv ORDER BY k")]
        return iter(keys)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM kv").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class UnpicklableSQLiteMapping(SQLiteMapping):
    """The same table, but pickling it tries (and fails) to pickle the open connection."""

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()
