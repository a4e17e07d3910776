"""A store inside one zip archive (zarr-python 2 ``ZipStore``)."""

from __future__ import annotations

import functools
import lzma
import os
import struct
import threading
import time
import warnings
import zipfile
import zlib
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

from azarr.errors import DeleteUnsupportedError, KeyExistsError, StoreError, StoreUnavailableError
from azarr.storage._base import ByteRange, Store
from azarr.storage._mapping import iter_keys
from azarr.storage._spec import StoreSpec
from azarr.storage._threads import BlockingIO

ZipMode = Literal["r", "w", "x", "a"]
_MODES = ("r", "w", "x", "a")
# Reads and writes share one file handle under one lock, so more threads would only wait.
_WORKERS = 1
_MAX_CONCURRENCY = 4


class _Archive:
    """The open ``ZipFile`` of a `ZipStore` and its lifecycle, shared by its read-only views.

    All methods run on the store's worker thread (or, for `flush` during
    pickling, the caller's) and hold ``lock`` for their whole duration: ``zipfile``
    allows one writer and no reads while an entry is being written.
    """

    def __init__(self, store: ZipStore) -> None:
        self.path = store.path
        self.mode: ZipMode = store.mode
        self.compression = store.compression
        self.compresslevel = store.compresslevel
        self.allow_zip64 = store.allowZip64
        self.lock = threading.RLock()
        self.pid = os.getpid()
        # True in a forked child: the archive belongs to the parent, which alone may write it.
        self.forked = False
        self.zf: zipfile.ZipFile | None = None
        # True once opened for writing: a later reopen (after flush) must append,
        # not truncate ("w") or fail ("x").
        self.started = False
        # True after close() in a writing mode: the archive is final, reads reopen it "r".
        self.finalized = False
        # True once the members whose names are not valid keys were reported (once).
        self.warned_unsafe = False

    @property
    def writing(self) -> bool:
        return self.mode != "r" and not self.finalized and not self.forked

    def _locked(self) -> threading.RLock:
        """The lock, after re-arming the archive if this is a forked child."""
        if self.pid != os.getpid():
            zf = self.zf
            if zf is not None:
                # The parent's handle shares its file offset with the parent: never use it
                # here, and never close it (in a writing mode that writes a directory into
                # the parent's archive). Only the child's copy of the descriptor is freed.
                zf.fp = None
            self.zf = None
            self.lock = threading.RLock()
            self.pid = os.getpid()
            self.forked = True
        return self.lock

    def open(self) -> zipfile.ZipFile:
        with self._locked():
            if self.zf is not None:
                return self.zf
            mode: ZipMode
            if not self.writing:
                mode = "r"
            elif self.started:
                mode = "a"
            else:
                mode = self.mode
            self.zf = zipfile.ZipFile(
                self.path,
                mode=mode,
                compression=self.compression,
                compresslevel=self.compresslevel,
                allowZip64=self.allow_zip64,
            )
            if mode != "r":
                self.started = True
            return self.zf

    def close(self, *, finalize: bool) -> None:
        with self._locked():
            if finalize and self.writing and not self.started:
                self.open()  # close() of a never-used writing store still creates the (empty) archive
            zf, self.zf = self.zf, None
            if finalize and self.mode != "r":
                self.finalized = True
            if zf is not None:
                zf.close()  # writes the central directory in writing modes

    def flush(self) -> None:
        with self._locked():
            if self.writing and self.zf is not None:
                self.close(finalize=False)
                self.open()  # reopened with mode "a"

    # ------------------------------------------------------------------ operations
    def read(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        with self._locked():
            zf = self.open()
            try:
                info = zf.getinfo(key)
            except KeyError:
                return None
            if info.is_dir():
                return None
            if info.compress_type != zipfile.ZIP_STORED:
                _check_inflated_size(info, key)
            if byte_range is None:
                if info.compress_type == zipfile.ZIP_STORED:
                    return zf.read(info)
                # read(n) inflates at most n bytes (+ a 4 KiB read size); read() would inflate
                # the whole stream before cutting it to the declared size. A member holding
                # more than it declares then fails zipfile's CRC check.
                with zf.open(info) as f:
                    return f.read(info.file_size)
            size = info.file_size
            start = max(size + byte_range.start, 0) if byte_range.is_suffix else min(byte_range.start, size)
            end = size if byte_range.end is None else min(byte_range.end, size)
            if end <= start:
                return b""
            # Seeking a stored (uncompressed) entry is a file seek; a compressed one is
            # decompressed from its start up to `start`.
            with zf.open(info) as f:
                f.seek(start)
                return f.read(end - start)

    def write(self, key: str, value: bytes) -> None:
        with self._locked():
            if self.forked and self.mode != "r":
                raise StoreError(
                    f"cannot write {key!r}: ZipStore {self.path} was inherited by a forked process; "
                    "only the process that opened it for writing may write to it"
                )
            if not self.writing:
                raise StoreError(
                    f"cannot write {key!r}: ZipStore {self.path} was closed, which finalized the "
                    "archive; open a new ZipStore with mode='a' to add keys"
                )
            zf = self.open()
            if key in zf.NameToInfo:
                raise KeyExistsError(
                    f"cannot write {key!r}: it already exists in {self.path}, and a zip archive "
                    "holds each key once (ZipStore is write-once: rewrite into a new archive)"
                )
            info = zipfile.ZipInfo(filename=key, date_time=time.localtime(time.time())[:6])
            info.compress_type = self.compression
            info.external_attr = 0o644 << 16  # -rw-r--r--, as zarr-python 2 writes
            zf.writestr(info, value, compresslevel=self.compresslevel)

    def contains(self, key: str) -> bool:
        with self._locked():
            info = self.open().NameToInfo.get(key)
            return info is not None and not info.is_dir()

    def size(self, key: str) -> int | None:
        with self._locked():
            info = self.open().NameToInfo.get(key)
            return None if info is None or info.is_dir() else info.file_size

    def keys(self, prefix: str) -> list[str]:
        with self._locked():
            names = list(self.open().NameToInfo)
        if not self.warned_unsafe:
            self.warned_unsafe = True
            _warn_unsafe_members(self.path, names)
        return iter_keys(names, prefix)


class ZipStore(Store):
    """A Zarr hierarchy inside one zip file (zarr-python 2 ``ZipStore``; ``zip::`` URLs).

    Parameters
    ----------
    path : str or os.PathLike
        The archive file; made absolute at construction.
    mode : {"r", "w", "x", "a"}
        ``"r"`` read an existing archive (read-only store); ``"w"`` create or
        truncate; ``"x"`` create, failing if the file exists; ``"a"`` add keys to an
        existing archive (or create it). As `zipfile.ZipFile`.
    compression : int
        ``zipfile.ZIP_STORED`` (default, as zarr-python 2: chunks are usually
        compressed by their codec already, and stored entries allow cheap byte-range
        reads), ``ZIP_DEFLATED``, ``ZIP_BZIP2`` or ``ZIP_LZMA``.
    compresslevel : int, optional
        Level for the compression method (``zipfile`` semantics).
    allowZip64 : bool
        Allow archives and entries over 4 GiB (``zipfile`` name, as zarr-python 2).

    Raises
    ------
    ValueError
        Unknown ``mode``.

    Notes
    -----
    **Write-once.** A zip archive cannot replace or remove an entry, so writing a
    key that is already in the archive raises `KeyExistsError`
    (zarr-python 2 appends a duplicate entry and warns; readers then disagree about
    which one is current). ``delete`` of a key that is not there is a no-op, and of
    one that is raises `DeleteUnsupportedError` (a `StoreError` and, as in zarr-python 2,
    a ``NotImplementedError``). Write each chunk once:
    create an array and write it in whole-chunk slices, e.g. ``azarr.array(data,
    store=zip_store)``; partial updates of a written chunk fail.

    **close() is required after writing.** The archive's central directory, which
    lists its entries, is written by ``await store.close()`` (or leaving ``async with
    store``); without it the file is unreadable. After ``close()`` a writing store
    is final: reads still work (the archive is reopened read-only) and writes raise
    `StoreError`. ``await store.flush()`` writes the directory
    and keeps the store writable (zarr-python 2 ``ZipStore.flush``). Closing a
    read-mode store only releases the file handle.

    **I/O.** One ``ZipFile`` handle per store, opened on first use, used on one
    worker thread under a lock (``zipfile`` does not allow concurrent writes, nor
    reads during a write); never on the event loop. Byte-range reads of stored
    entries read only the requested bytes.

    **Listing** comes from the archive's directory (its ``namelist``); directory
    entries (``"a/"``) and names that are not valid store keys are left out.

    **Pickling** keeps ``path``, ``mode`` and the compression settings; a writing
    store is flushed first, and the copy opens the archive with mode ``"a"`` (never
    ``"w"``, which would truncate it). Do not write through two copies at once: a
    zip file has a single writer. A forked child process reopens the archive for
    reading (the parent's file handle shares its file offset) and may not write;
    flush or close in the parent before forking readers.

    A missing archive in mode ``"r"`` raises
    `StoreUnavailableError`; a corrupt one
    `StoreError`.

    Examples
    --------
    >>> import asyncio, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "data.zip")
    >>> async def write() -> None:
    ...     async with ZipStore(path, mode="w") as store:
    ...         await store.set(".zgroup", b'{"zarr_format": 2}')
    >>> asyncio.run(write())
    >>> asyncio.run(ZipStore(path).get(".zgroup"))
    b'{"zarr_format": 2}'
    """

    supports_deletes = False
    is_local = True
    max_requests = _MAX_CONCURRENCY

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        mode: ZipMode = "r",
        compression: int = zipfile.ZIP_STORED,
        compresslevel: int | None = None,
        allowZip64: bool = True,  # zipfile's and zarr-python 2's spelling
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"ZipStore mode must be one of {_MODES}, got {mode!r}")
        super().__init__(read_only=mode == "r")
        self.path = Path(os.path.abspath(os.fspath(path)))
        self.mode: ZipMode = mode
        self.compression = compression
        self.compresslevel = compresslevel
        self.allowZip64 = allowZip64
        self._archive = _Archive(self)
        self._io = BlockingIO(_WORKERS, "azarr-zip")

    @property
    def url(self) -> str:
        return f"zip::{self.path.as_uri()}"

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        """Finalize the archive (writing modes) and release the file handle.

        Writing modes: writes the zip central directory; afterwards the store is
        read-only in effect (writes raise `StoreError`). Mode
        ``"r"``: the next use reopens the file. Idempotent.
        """
        if self.read_only and self.mode != "r":
            # A read-only view (with_read_only) of a writing store shares its archive:
            # closing the view must not finalize the writer's archive.
            return
        await self._io.call(
            self._translate, "close", "", functools.partial(self._archive.close, finalize=True)
        )

    async def flush(self) -> None:
        """Write the central directory now, keeping the store writable (zarr-python 2 ``flush``).

        Afterwards the file on disk is a complete archive that other readers can open.
        """
        await self._io.call(self._translate, "flush", "", self._archive.flush)

    # ------------------------------------------------------------------ spec and pickling
    def _make_spec(self) -> StoreSpec:
        # The mode is not part of the identity: a reader and a writer of one archive
        # are one store for budgets.
        return StoreSpec.create(
            "zip",
            str(self.path),
            params={
                "compression": self.compression,
                "compresslevel": self.compresslevel,
                "allowZip64": self.allowZip64,
            },
        )

    @classmethod
    def spec_from_url(cls, url: str, storage_options: Mapping[str, Any] | None) -> StoreSpec:
        """``zip://path/to/data.zip``: the archive, opened read-only."""
        from azarr.storage._url import reject_options, split_scheme

        reject_options("zip URL", url, storage_options, frozenset())
        _, path = split_scheme(url)
        return StoreSpec.create(
            "zip",
            os.path.abspath(path),
            params={"compression": zipfile.ZIP_STORED, "compresslevel": None, "allowZip64": True},
        )

    @classmethod
    def from_spec(cls, spec: StoreSpec) -> ZipStore:
        """The archive in mode ``"r"`` (URLs and specs only ever read a zip)."""
        return cls(spec.root, mode="r", **spec.constructor_params())

    def __reduce__(self) -> tuple[Any, ...]:
        # Flush so the copy (which appends) finds a complete archive; pickling is
        # rare and the flush is one small write, so it runs on the caller's thread.
        self._archive.flush()
        mode: ZipMode = "r" if self.read_only else ("a" if self.mode in ("w", "x") else self.mode)
        return (_unpickle_zip, (str(self.path), mode, self.spec.constructor_params()))

    # ------------------------------------------------------------------ helpers
    def _translate(self, exc: Exception, op: str, key: str) -> StoreError | None:
        """The store error for a failure of the archive (None: not one, re-raised as is)."""
        if isinstance(exc, FileNotFoundError):
            return StoreUnavailableError(
                f"{op} {key!r} in {self.url} failed: the archive does not exist ({exc.strerror or exc})"
            )
        if isinstance(exc, FileExistsError):
            return StoreError(f"{op} {key!r} in {self.url} failed: mode 'x' and the archive exists already")
        if isinstance(exc, _ARCHIVE_ERRORS):
            return StoreError(f"{op} {key!r} in {self.url} failed: {type(exc).__name__}: {exc}")
        return None

    # ------------------------------------------------------------------ primitives
    async def _get(self, key: str, byte_range: ByteRange | None) -> bytes | None:
        return await self._io.call(self._translate, "get", key, self._archive.read, key, byte_range)

    async def _set(self, key: str, value: bytes) -> None:
        await self._io.call(self._translate, "set", key, self._archive.write, key, value)

    async def _delete(self, key: str) -> None:
        if await self._exists(key):
            raise DeleteUnsupportedError(
                f"cannot delete {key!r} from {self.url}: entries of a zip archive cannot be removed"
            )

    async def _exists(self, key: str) -> bool:
        return await self._io.call(self._translate, "exists", key, self._archive.contains, key)

    async def _getsize(self, key: str) -> int:
        size = await self._io.call(self._translate, "getsize", key, self._archive.size, key)
        if size is None:
            raise FileNotFoundError(f"{key!r} not found in {self.url}")
        return size

    async def _list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in await self._io.call(self._translate, "list", prefix, self._archive.keys, prefix):
            yield key

    async def _delete_prefix(self, prefix: str) -> None:
        keys = await self._io.call(self._translate, "delete_prefix", prefix, self._archive.keys, prefix)
        if keys:
            raise DeleteUnsupportedError(
                f"cannot delete {len(keys)} keys under {prefix!r} from {self.url}: "
                "entries of a zip archive cannot be removed"
            )


def _unpickle_zip(path: str, mode: ZipMode, params: dict[str, Any]) -> ZipStore:
    return ZipStore(path, mode=mode, **params)


# What zipfile raises on a corrupt archive: besides its own errors, the
# decompressors' (zlib.error, lzma.LZMAError; bz2 raises OSError), EOFError for
# a stream cut short and struct.error for truncated headers.
_ARCHIVE_ERRORS = (
    OSError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    ValueError,
    RuntimeError,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    struct.error,
)


class UnsafeMemberWarning(UserWarning):
    """A zip archive holds members whose names are not valid store keys; they are skipped."""


def _warn_unsafe_members(path: str | os.PathLike[str], names: list[str]) -> None:
    """Warn (once per archive, on its first listing) about members no key can name.

    ``../x``, ``/etc/passwd``, ``a\\b``, ``a//b``: a hostile archive's way out of
    the store. They are never read or listed; this says they were there.
    """
    unsafe = [name for name in names if not name.endswith("/") and not iter_keys([name], "")]
    if unsafe:
        shown = ", ".join(repr(name[:80]) for name in unsafe[:3])
        warnings.warn(
            f"zip archive {os.fspath(path)!r}: skipped {len(unsafe)} member(s) whose names are not "
            f"valid store keys (absolute, '..', backslashes or empty segments): {shown}",
            UnsafeMemberWarning,
            stacklevel=2,
        )


def _check_inflated_size(info: zipfile.ZipInfo, key: str) -> None:
    """Refuse a compressed member that declares more bytes than any value azarr reads.

    No store value is larger than a chunk (``max_chunk_bytes``) or a metadata
    document (``max_metadata_bytes``); zipfile itself never inflates past the
    declared size (it then fails the CRC check), so this bounds every read.
    """
    from azarr import config

    limit = max(int(config.get("max_chunk_bytes")), int(config.get("max_metadata_bytes")))
    if info.file_size > limit:
        raise ValueError(
            f"the compressed member {key!r} declares {info.file_size} bytes uncompressed, more than "
            f"max_chunk_bytes ({limit} bytes); if this archive is trusted, raise the limit with "
            f"azarr.config.set(max_chunk_bytes={info.file_size})"
        )
