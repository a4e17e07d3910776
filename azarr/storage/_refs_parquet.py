"""Parquet references (fsspec's ``LazyReferenceMapper`` layout), loaded lazily.

A directory holds ``.zmetadata`` -- ``{"metadata": {key: document}, "record_size": N}``
-- and, per array, files ``<array>/refs.<i>.parq`` of ``N`` rows each, with columns
``path``, ``offset``, ``size`` and ``raw``. Row ``r`` of file ``i`` describes the
chunk whose C-order index in the array's chunk grid is ``i * N + r``: inline data
(``raw`` not null), the whole object ``path`` (``offset`` and ``size`` 0), a
range of it, or nothing (``path`` and ``raw`` null: the chunk is not stored).

Only the record files a lookup needs are read, and at most
``reference_parquet_cache`` of them are kept (least recently used first out), so a
reference set of millions of chunks costs the memory of the files in use.
"""

from __future__ import annotations

import asyncio
import io
import json
import math
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from azarr import config
from azarr.errors import InvalidReferenceError
from azarr.storage._refs_json import Reference, checked_offset, ranged_reference

__all__ = ["ParquetReferences", "RecordReader"]

#: ``read(key) -> bytes | None``: a file of the reference directory (the managed path).
RecordReader = Callable[[str], Awaitable[bytes | None]]

_COLUMNS = ("path", "offset", "size", "raw")


class _Record:
    """One loaded ``refs.<i>.parq`` file: its columns as Python lists."""

    __slots__ = ("nbytes", "offset", "path", "raw", "size")

    def __init__(self, columns: Mapping[str, list[Any]], rows: int, nbytes: int) -> None:
        self.path = columns.get("path") or [None] * rows
        self.offset = columns.get("offset") or [0] * rows
        self.size = columns.get("size") or [0] * rows
        self.raw = columns.get("raw") or [None] * rows
        self.nbytes = nbytes

    def entry(self, row: int, key: str) -> bytes | Reference | None:
        if row >= len(self.path):
            return None
        raw = self.raw[row]
        if isinstance(raw, bytes | str) and raw is not None:
            return raw if isinstance(raw, bytes) else raw.encode("utf-8")
        path = self.path[row]
        if not isinstance(path, str):  # null (None, or NaN from pandas writers): not stored
            return None
        offset, size = _count(self.offset[row], "offset", key), _count(self.size[row], "size", key)
        if offset == 0 and size == 0:
            return Reference(path)
        return ranged_reference(path, offset, size, key)


def _count(value: Any, what: str, key: str) -> int:
    # A cell as pandas writers leave it (an int, a float): parsed loosely, bounded as JSON's.
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise InvalidReferenceError(f"reference {key!r}: {what} {value!r} is not an integer") from None
    return checked_offset(number, what, key)


def _parse_record(data: bytes, record_size: int, where: str) -> _Record:
    """Decode one record file (runs in a worker thread)."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(data), columns=None)
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        raise InvalidReferenceError(f"{where}: not a readable Parquet reference file ({exc})") from None
    if table.num_rows > record_size:
        raise InvalidReferenceError(
            f"{where}: {table.num_rows} rows, more than the record_size {record_size} of .zmetadata"
        )
    try:
        names = [name for name in table.column_names if name in _COLUMNS]
        columns = {name: table.column(name).to_pylist() for name in names}
    except Exception as exc:  # names or strings that are no UTF-8, values pyarrow cannot convert
        raise InvalidReferenceError(f"{where}: unreadable columns ({type(exc).__name__}: {exc})") from None
    if "path" not in names and "raw" not in names:
        raise InvalidReferenceError(f"{where}: neither a 'path' nor a 'raw' column")
    return _Record(columns, table.num_rows, len(data))


class ParquetReferences:
    """The references of a Parquet reference directory, loaded file by file.

    Parameters
    ----------
    zmetadata : bytes
        The directory's ``.zmetadata`` file.
    read : RecordReader
        Reads a file of the directory by its relative key.
    where : str
        The directory's URL, for messages.

    Raises
    ------
    InvalidReferenceError
        ``.zmetadata`` is not a Parquet reference index.
    """

    def __init__(self, zmetadata: bytes, read: RecordReader, *, where: str) -> None:
        try:
            index = json.loads(zmetadata)
        except ValueError as exc:
            raise InvalidReferenceError(f"{where}/.zmetadata: not JSON ({exc})") from None
        if not isinstance(index, dict) or not isinstance(index.get("metadata"), dict):
            raise InvalidReferenceError(f"{where}/.zmetadata: no 'metadata' object")
        record_size = index.get("record_size")
        max_refs = int(config.get("reference_max_refs"))
        if (
            isinstance(record_size, bool)
            or not isinstance(record_size, int)
            or not 0 < record_size <= max_refs
        ):
            raise InvalidReferenceError(
                f"{where}/.zmetadata: record_size {record_size!r} is not an integer in 1 .. {max_refs}"
            )
        self.where = where
        self.record_size = record_size
        self.metadata: dict[str, Any] = index["metadata"]
        self._read = read
        self._grids: dict[str, tuple[list[int], str]] = {}
        for key, doc in self.metadata.items():
            if key == ".zarray" or key.endswith("/.zarray"):
                self._grids[key[: -len(".zarray")].rstrip("/")] = self._grid(key, doc)
        self._records: OrderedDict[tuple[str, int], _Record] = OrderedDict()
        self._cache_files = int(config.get("reference_parquet_cache"))
        self._loading: dict[tuple[str, int], asyncio.Future[_Record | None]] = {}

    def _grid(self, key: str, doc: Any) -> tuple[list[int], str]:
        try:
            shape, chunks = doc["shape"], doc["chunks"]
            grid = [math.ceil(s / c) for s, c in zip(shape, chunks, strict=True)]
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise InvalidReferenceError(f"{self.where}: {key} has no valid shape/chunks ({exc})") from None
        return grid or [1], str(doc.get("dimension_separator") or ".")

    def metadata_keys(self) -> Iterator[str]:
        """The metadata documents' keys."""
        return iter(self.metadata)

    def document(self, key: str) -> bytes | None:
        """A metadata document's JSON, or None."""
        doc = self.metadata.get(key)
        if doc is None:
            return None
        return doc.encode("utf-8") if isinstance(doc, str) else json.dumps(doc).encode("utf-8")

    def arrays(self) -> Iterator[tuple[str, list[int], str]]:
        """Each array's path, chunk grid and dimension separator."""
        for path, (grid, sep) in self._grids.items():
            yield path, grid, sep

    def locate(self, key: str) -> tuple[str, int, int] | None:
        """``(array path, record file number, row)`` of a chunk key; None if it is none."""
        path, _, name = key.rpartition("/")
        if path not in self._grids:
            # "/"-separated chunk keys: the array is the longest known prefix.
            matches = [p for p in self._grids if key.startswith(f"{p}/") or p == ""]
            if not matches:
                return None
            path = max(matches, key=len)
            name = key[len(path) + 1 :] if path else key
        grid, sep = self._grids[path]
        parts = name.split(sep)
        if len(parts) != len(grid) or not all(p.isdigit() for p in parts):
            return None
        number = 0
        for index, n in zip(parts, grid, strict=True):
            i = int(index)
            if i >= n:
                return None
            number = number * n + i
        return path, number // self.record_size, number % self.record_size

    async def lookup(self, key: str) -> bytes | Reference | None:
        """What ``key`` stands for (loading its record file if need be); None if nothing.

        Raises
        ------
        InvalidReferenceError
            A corrupt record file or entry.
        """
        doc = self.document(key)
        if doc is not None:
            return doc
        where = self.locate(key)
        if where is None:
            return None
        path, number, row = where
        record = await self.record(path, number)
        return None if record is None else record.entry(row, key)

    async def record(self, path: str, number: int) -> _Record | None:
        """Record file ``number`` of array ``path`` (cached; loaded once however many ask)."""
        ident = (path, number)
        record = self._records.get(ident)
        if record is not None:
            self._records.move_to_end(ident)
            return record
        pending = self._loading.get(ident)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._loading[ident] = pending
            try:
                loaded = await self._load(path, number)
            except BaseException as exc:
                pending.set_exception(exc)
                pending.exception()  # retrieved: waiters see it, nobody else is told
                raise
            finally:
                self._loading.pop(ident, None)
            pending.set_result(loaded)
            if loaded is not None:
                self._records[ident] = loaded
                while len(self._records) > self._cache_files:
                    self._records.popitem(last=False)  # least recently used
            return loaded
        return await asyncio.shield(pending)

    async def _load(self, path: str, number: int) -> _Record | None:
        key = f"{path}/refs.{number}.parq" if path else f"refs.{number}.parq"
        data = await self._read(key)
        if data is None:
            return None
        return await asyncio.to_thread(_parse_record, data, self.record_size, f"{self.where}/{key}")

    async def chunk_keys(self, path: str) -> list[str]:
        """The stored chunk keys of array ``path``, file by file (for listings)."""
        grid, sep = self._grids[path]
        total = math.prod(grid)
        keys = []
        prefix = f"{path}/" if path else ""
        for number in range(math.ceil(total / self.record_size)):
            record = await self.record(path, number)
            if record is None:
                continue
            for row in range(len(record.path)):
                flat = number * self.record_size + row
                if flat >= total:
                    break
                if record.entry(row, path) is None:
                    continue
                coords = []
                for n in reversed(grid):
                    flat, i = divmod(flat, n)
                    coords.append(str(i))
                keys.append(prefix + sep.join(reversed(coords)))
        return keys
