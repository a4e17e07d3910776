"""``copy`` / ``copy_all``: node-level copies that decode and re-encode (zarr-python 2 ``zarr.convenience``).

Unlike `copy_store`, which moves stored bytes, these functions
read each array's values and write them into a new array, so the copy may
change the compressor, filters, chunks or order (``**create_kws``), and the
source may be an HDF5 file read with h5py. They follow zarr-python 2.18's
``copy``/``copy_all`` call for call: the same ``if_exists`` choices, log lines,
summary line and ``(n_copied, n_skipped, n_bytes_copied)`` counts, where a
group counts as one copied node and ``n_bytes_copied`` is the uncompressed
size (``size * itemsize``) of every array copied.

Sources: `AsyncArray` / `AsyncGroup`, or h5py
``File`` / ``Group`` / ``Dataset`` (h5py is an optional dependency: ``pip
install 'azarr[hdf5]'``). The destination is an `AsyncGroup`;
zarr-python 2's copies into h5py files are out of scope (azarr writes Zarr).
Array data is streamed slab by slab (``azarr.core._streaming``), never read whole.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import IO, Any, Literal

import numpy as np

from azarr.api.copy import CopyResult
from azarr.core._array_info import encoding_arguments
from azarr.core._streaming import prepare_source
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import CopyError
from azarr.scheduler import Progress, ProgressCallback

IfExists = Literal["raise", "replace", "skip", "skip_initialized"]
_IF_EXISTS = ("raise", "replace", "skip", "skip_initialized")
#: Creation arguments that build a Zarr v3 codec chain instead of the source's ``codecs``.
_V3_CODEC_ARGUMENTS = frozenset(
    {"compressor", "compressors", "filters", "serializer", "order", "object_codec"}
)
LogLike = Callable[[str], Any] | str | IO[str] | None


@contextlib.contextmanager
def _log_writer(log: LogLike) -> Iterator[Callable[[str], None]]:
    """zarr-python 2 ``_LogWriter``: a callable, a file name (opened for writing) or a file-like object."""
    if log is None:
        yield lambda message: None
    elif callable(log):
        yield log
    elif isinstance(log, str):
        with open(log, "w") as fh:  # a log file, written line by line as zarr 2 does
            yield _printer(fh)
    elif hasattr(log, "write"):
        yield _printer(log)
    else:
        raise TypeError(f"log must be a callable function, file path or file-like object, found {log!r}")


def _printer(stream: IO[str]) -> Callable[[str], None]:
    def write(message: str) -> None:
        print(message, file=stream)
        if hasattr(stream, "flush"):
            stream.flush()

    return write


def _is_h5py(node: Any) -> bool:
    return type(node).__module__.startswith("h5py")


def _is_array(node: Any) -> bool:
    return isinstance(node, AsyncArray) or (not isinstance(node, AsyncGroup) and hasattr(node, "shape"))


async def _children(group: Any) -> AsyncIterator[tuple[str, Any]]:
    """``(name, node)`` of a group's members: azarr's sorted and opened in one concurrent wave,
    h5py's in h5py's own order (as zarr-python 2 iterates them), one by one in a worker thread."""
    if isinstance(group, AsyncGroup):
        async for name, node in group.members():
            yield name, node
        return
    for name in await asyncio.to_thread(lambda: list(group.keys())):
        yield name, await asyncio.to_thread(group.__getitem__, name)


def _attrs(node: Any) -> dict[str, Any]:
    if isinstance(node, (AsyncArray, AsyncGroup)):
        return node.attrs.asdict()
    # h5py attribute values are NumPy scalars and arrays: plain JSON values in Zarr.
    return {
        str(k): v.tolist() if isinstance(v, (np.ndarray, np.generic)) else v for k, v in node.attrs.items()
    }


def _describe(node: Any) -> str:
    dtype = node.dtype
    return f"{node.name} {tuple(int(n) for n in node.shape)} {dtype}"


class _Copier:
    """One ``copy``/``copy_all`` call: options, log and counts."""

    def __init__(
        self,
        log: Callable[[str], None],
        *,
        shallow: bool,
        without_attrs: bool,
        if_exists: str,
        dry_run: bool,
        create_kws: dict[str, Any],
        progress: ProgressCallback | None,
        total: int,
    ) -> None:
        if if_exists not in _IF_EXISTS:
            raise ValueError(f"if_exists must be one of {list(_IF_EXISTS)!r}; found {if_exists!r}")
        self.log = log
        self.shallow = shallow
        self.without_attrs = without_attrs
        self.if_exists = if_exists
        self.dry_run = dry_run
        self.create_kws = create_kws
        self.progress = progress
        self.total = total
        self.n_copied = self.n_skipped = self.n_bytes_copied = 0

    def _count(self, copied: int = 0, skipped: int = 0, nbytes: int = 0) -> None:
        self.n_copied += copied
        self.n_skipped += skipped
        self.n_bytes_copied += nbytes
        if self.progress is not None:
            self.progress(Progress(self.n_copied + self.n_skipped, self.total, self.n_bytes_copied))

    async def copy(self, source: Any, dest: AsyncGroup | None, name: str, *, root: bool) -> None:
        if _is_array(source):
            await self._copy_array(source, dest, name)
        elif root or not self.shallow:
            await self._copy_group(source, dest, name)

    async def _copy_array(self, source: Any, dest: AsyncGroup | None, name: str) -> None:
        await prepare_source(source)  # an AsyncArray with a recheck policy: its current shape
        exists = dest is not None and await dest.contains(name)
        do_copy = True
        if exists:
            assert dest is not None
            if self.if_exists == "raise":
                raise CopyError(f"an object {name!r} already exists in destination {dest.name!r}")
            if self.if_exists == "skip":
                do_copy = False
            elif self.if_exists == "skip_initialized":
                existing = await dest.get(name)
                if (
                    isinstance(existing, AsyncArray)
                    and await existing.nchunks_initialized() == existing.nchunks
                ):
                    do_copy = False
        if not do_copy:
            self.log(f"skip {_describe(source)}")
            self._count(skipped=1)
            return
        self.log(f"copy {_describe(source)}")
        nbytes = 0
        if not self.dry_run:
            assert dest is not None
            created = await dest.create_dataset(
                name,
                shape=tuple(source.shape),
                dtype=source.dtype,
                overwrite=exists,
                **self._array_kws(source, dest.zarr_format),
            )
            await created.set_basic_selection(Ellipsis, source)
            nbytes = created.size * created.dtype.itemsize
            if not self.without_attrs:
                await created.attrs.update(_attrs(source))
        self._count(copied=1, nbytes=nbytes)

    def _array_kws(self, source: Any, zarr_format: int) -> dict[str, Any]:
        kws = dict(self.create_kws)
        kws.setdefault("chunks", source.chunks)  # preserved by default, as zarr-python 2
        if _is_h5py(source):
            # h5py -> zarr: azarr's default compressor, HDF5's fill value
            kws.setdefault("fill_value", source.fillvalue)
        else:
            # zarr -> zarr: the stored encoding is preserved by default, in the destination
            # group's format (a v3 array copied into a v2 group becomes a v2 array)
            encoding = encoding_arguments(source.metadata, zarr_format, compressor="compressor" not in kws)
            shards = encoding.pop("shards", None)
            if "codecs" in encoding and _V3_CODEC_ARGUMENTS & set(kws):
                del encoding["codecs"]  # the caller's codec arguments make the (inner) chain
                if shards is not None:
                    kws.setdefault("shards", shards)
            elif shards is not None and "codecs" not in self.create_kws:
                kws["chunks"] = self.create_kws.get("chunks", shards)  # the sharding codec's grid
            for key, value in encoding.items():
                kws.setdefault(key, value)
            kws.setdefault("fill_value", source.fill_value)
        return kws

    async def _copy_group(self, source: Any, dest: AsyncGroup | None, name: str) -> None:
        exists_array = (
            dest is not None and await dest.contains(name) and isinstance(await dest.get(name), AsyncArray)
        )
        if exists_array:
            assert dest is not None
            if self.if_exists == "raise":
                raise CopyError(f"an array {name!r} already exists in destination {dest.name!r}")
            if self.if_exists == "skip":
                self.log(f"skip {source.name}")
                self._count(skipped=1)
                return
        self.log(f"copy {source.name}")
        group: AsyncGroup | None
        if not self.dry_run:
            assert dest is not None
            group = await dest.require_group(name, overwrite=exists_array)
            if not self.without_attrs:
                await group.attrs.update(_attrs(source))
        else:
            # a dry run creates nothing: recurse into what exists, if anything
            group = None
            if dest is not None and await dest.contains(name):
                existing = await dest.get(name)
                group = existing if isinstance(existing, AsyncGroup) else None
        async for key, child in _children(source):
            await self.copy(child, group, key, root=False)
        self._count(copied=1)

    def summary(self) -> None:
        """zarr-python 2 ``_log_copy_summary``."""
        message = "dry run: " if self.dry_run else "all done: "
        message += f"{self.n_copied:,} copied, {self.n_skipped:,} skipped"
        if not self.dry_run:
            message += f", {self.n_bytes_copied:,} bytes copied"
        self.log(message)

    def result(self) -> CopyResult:
        return CopyResult(self.n_copied, self.n_skipped, self.n_bytes_copied)


def _check_dest(dest: Any) -> None:
    if not isinstance(dest, AsyncGroup):
        raise ValueError(f"dest must be a group (an azarr.AsyncGroup), got {dest!r}")


async def _count_nodes(source: Any, *, shallow: bool, root: bool) -> int:
    """Nodes a copy visits (for progress totals)."""
    if _is_array(source) or (shallow and not root):
        return 1 if _is_array(source) else 0
    total = 1
    async for _, child in _children(source):
        total += await _count_nodes(child, shallow=shallow, root=False)
    return total


async def copy(
    source: Any,
    dest: AsyncGroup,
    name: str | None = None,
    shallow: bool = False,
    without_attrs: bool = False,
    log: LogLike = None,
    if_exists: IfExists = "raise",
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    **create_kws: Any,
) -> CopyResult:
    """Copy ``source`` (an array or a group and its members) into group ``dest`` (zarr-python 2 ``zarr.copy``).

    Parameters
    ----------
    source : AsyncArray, AsyncGroup, or h5py Dataset/Group/File
        What to copy.
    dest : AsyncGroup
        The group to copy into (writable).
    name : str, optional
        Name of the copy in ``dest`` (default: the last segment of ``source.name``;
        required for a root group).
    shallow : bool
        Copy only the immediate children of a source group.
    without_attrs : bool
        Leave attributes behind.
    log : callable, str or file-like, optional
        Where to log one line per node (``"copy /a (10,) float64"``) and a
        summary (``"all done: 3 copied, 0 skipped, 80 bytes copied"``): a
        callable, a file path (overwritten) or an object with ``write``.
    if_exists : {"raise", "replace", "skip", "skip_initialized"}
        What to do with a node that exists in ``dest``; ``skip_initialized``
        skips arrays whose chunks are all stored.
    dry_run : bool
        Log and count what would be copied without writing anything.
    progress : callable, optional
        Called with a `Progress` after each node
        (``done`` nodes copied or skipped of ``total``, ``nbytes`` copied).
    **create_kws
        Passed to the creation of every array (``chunks=``, ``compressor=``,
        ``filters=``, ``dtype``-preserving options...). By default an azarr or
        Zarr source keeps its chunks, compressor, filters, order and fill
        value; an h5py source keeps its chunks and HDF5 fill value and gets
        azarr's default compressor.

    Returns
    -------
    CopyResult
        ``(n_copied, n_skipped, n_bytes_copied)``; it unpacks like zarr-python 2's tuple.

    Raises
    ------
    CopyError
        A node exists at the target and ``if_exists="raise"``.
    ValueError
        ``dest`` is not a group, or ``if_exists`` is not one of the choices.
    TypeError
        ``name`` is None and ``source`` is at the root of its store; ``log`` is of no usable kind.
    """
    _check_dest(dest)
    if name is None:
        name = (source.name or "").split("/")[-1]
        if not name:
            raise TypeError(
                "source has no name, please provide the `name` parameter to indicate a name to copy to"
            )
    total = await _count_nodes(source, shallow=shallow, root=True) if progress is not None else 0
    options = {"shallow": shallow, "without_attrs": without_attrs, "if_exists": if_exists, "dry_run": dry_run}
    with _copier(log, options, create_kws, progress, total) as copier:
        await copier.copy(source, dest, name, root=True)
    return copier.result()


async def copy_all(
    source: Any,
    dest: AsyncGroup,
    shallow: bool = False,
    without_attrs: bool = False,
    log: LogLike = None,
    if_exists: IfExists = "raise",
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    **create_kws: Any,
) -> CopyResult:
    """Copy every member of group ``source`` into group ``dest`` (zarr-python 2 ``zarr.copy_all``).

    Arguments, result and errors as `copy`; the source group's own
    attributes are merged into ``dest``'s (also with ``without_attrs``, as in
    zarr-python 2.18).
    """
    _check_dest(dest)
    total = 0
    if progress is not None:
        async for _, child in _children(source):
            total += await _count_nodes(child, shallow=shallow, root=False)
    options = {"shallow": shallow, "without_attrs": without_attrs, "if_exists": if_exists, "dry_run": dry_run}
    with _copier(log, options, create_kws, progress, total) as copier:
        async for key, child in _children(source):
            await copier.copy(child, dest, key, root=False)
        if not dry_run:
            await dest.attrs.update(_attrs(source))
    return copier.result()


@contextlib.contextmanager
def _copier(
    log: LogLike,
    options: dict[str, Any],
    create_kws: dict[str, Any],
    progress: ProgressCallback | None,
    total: int,
) -> Iterator[_Copier]:
    """A `_Copier` writing to ``log``; its summary line is logged when the copy ends."""
    with _log_writer(log) as write:
        copier = _Copier(write, create_kws=create_kws, progress=progress, total=total, **options)
        yield copier
        copier.summary()
