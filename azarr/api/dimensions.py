"""Dimension names as xarray and NCZarr store them.

A Zarr v3 array has its own (``dimension_names`` in ``zarr.json``; xarray writes
them there and reads nothing else for v3). Zarr v2 arrays have no dimension names. xarray keeps them in the array's
``.zattrs`` under ``_ARRAY_DIMENSIONS`` (a list of names, one per axis); NCZarr
(netCDF-C) keeps fully qualified names in ``_nczarr_array.dimrefs``, inside
``.zarray`` (NCZarr 2.x; older files spell it ``_NCZARR_ARRAY``) or ``.zattrs``
(netCDF-C 4.9+). xarray's reader (``_get_zarr_dims_and_attrs``) tries
``_ARRAY_DIMENSIONS`` first, then NCZarr's ``dimrefs`` keeping only each name's
last segment; these helpers do the same, and check what xarray would refuse
(a name count that differs from the rank, non-string names, one name with two
sizes in a group).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from azarr.core._paths import node_key
from azarr.core.array import AsyncArray
from azarr.core.group import AsyncGroup
from azarr.errors import MetadataError, ReadOnlyError
from azarr.metadata import ZARR_JSON, ZARRAY
from azarr.scheduler import StoreIO

#: xarray's attribute (``xarray.backends.zarr.DIMENSION_KEY``).
DIMENSIONS_KEY = "_ARRAY_DIMENSIONS"
#: NCZarr's array metadata key, and the spelling of older files.
NCZARR_ARRAY_KEYS = ("_nczarr_array", "_NCZARR_ARRAY")


def check_dimension_names(names: Any, ndim: int, *, where: str) -> tuple[str, ...]:
    """``names`` as a tuple after xarray's checks.

    Raises
    ------
    MetadataError
        Not a list of ``ndim`` distinct non-empty strings (names ``where``).
    """
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise MetadataError(f"{where}: dimension names must be a list of strings, got {names!r}")
    result = tuple(names)
    if len(result) != ndim:
        raise MetadataError(f"{where}: {len(result)} dimension names {list(result)} for a {ndim}-d array")
    for name in result:
        if not isinstance(name, str) or not name:
            raise MetadataError(f"{where}: dimension names must be non-empty strings, got {name!r}")
    if len(set(result)) != len(result):
        raise MetadataError(f"{where}: dimension names repeat: {list(result)}")
    return result


async def _nczarr_dimrefs(array: AsyncArray) -> list[Any] | None:
    """``dimrefs`` from NCZarr metadata in ``.zattrs`` or the raw ``.zarray`` (extra keys are kept there)."""
    for key in NCZARR_ARRAY_KEYS:
        entry = array.attrs.get(key)
        if isinstance(entry, dict) and "dimrefs" in entry:
            return list(entry["dimrefs"])
    raw = await StoreIO(array.store).get(node_key(array.path, ZARRAY))
    if raw is None:
        return None
    document = json.loads(raw)
    for key in NCZARR_ARRAY_KEYS:
        entry = document.get(key)
        if isinstance(entry, dict) and "dimrefs" in entry:
            return list(entry["dimrefs"])
    return None


async def get_dimension_names(array: AsyncArray, *, try_nczarr: bool = True) -> tuple[str, ...] | None:
    """The array's dimension names; None if it has none.

    A Zarr v3 array's ``dimension_names`` (a 0-d array has ``()`` without them);
    for Zarr v2 ``_ARRAY_DIMENSIONS``, else NCZarr's ``dimrefs`` -- the order of
    xarray's ``_get_zarr_dims_and_attrs``.

    Raises
    ------
    MetadataError
        The stored names are malformed (wrong count, not strings, repeated).
    """
    if array.zarr_format == 3:
        stored = array.dimension_names
        if stored is None:
            return () if array.ndim == 0 else None
        return check_dimension_names(stored, array.ndim, where=repr(node_key(array.path, ZARR_JSON)))
    where = repr(node_key(array.path, ".zattrs"))
    if DIMENSIONS_KEY in array.attrs:
        return check_dimension_names(array.attrs[DIMENSIONS_KEY], array.ndim, where=where)
    if not try_nczarr:
        return None
    dimrefs = await _nczarr_dimrefs(array)
    if dimrefs is None:
        return None
    # NCZarr names are fully qualified ("/group/x"); xarray keeps the last segment.
    names = [ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ref for ref in dimrefs]
    return check_dimension_names(names, array.ndim, where=f"{where} (NCZarr dimrefs)")


async def set_dimension_names(array: AsyncArray, names: Sequence[str]) -> None:
    """Store ``names`` where xarray reads them: a Zarr v3 array's ``dimension_names`` (one
    conditional rewrite of ``zarr.json``), a v2 array's ``_ARRAY_DIMENSIONS`` attribute.

    Raises
    ------
    MetadataError
        ``names`` is not one distinct non-empty string per axis.
    ReadOnlyError
        The array is read-only.
    """
    checked = check_dimension_names(names, array.ndim, where=repr(array.name))
    if array.zarr_format == 3:
        if array.read_only:
            raise ReadOnlyError(f"array {array.name!r} in {array.store.url} is read-only")
        await array._update_metadata(lambda stored: stored.replace(dimension_names=checked))
        return
    await array.attrs.update({DIMENSIONS_KEY: list(checked)})


async def group_dimensions(group: AsyncGroup, *, strict: bool = False) -> dict[str, int]:
    """Size of every dimension named by the group's direct member arrays.

    Parameters
    ----------
    strict : bool
        Also refuse arrays without dimension names (xarray's ``open_zarr`` does).

    Raises
    ------
    MetadataError
        A name has two sizes (xarray: "conflicting sizes for dimension"), names
        are malformed, or with ``strict`` an array has none.
    """
    sizes: dict[str, int] = {}
    seen_in: dict[str, str] = {}
    async for _, array in group.arrays():
        dims = await get_dimension_names(array)
        if dims is None:
            if strict:
                raise MetadataError(
                    f"array {array.name!r} has no {DIMENSIONS_KEY} attribute nor NCZarr dimrefs"
                )
            continue
        for dim, size in zip(dims, array.shape, strict=True):
            if dim in sizes and sizes[dim] != size:
                raise MetadataError(
                    f"conflicting sizes for dimension {dim!r}: {sizes[dim]} in {seen_in[dim]!r}, "
                    f"{size} in {array.name!r}"
                )
            sizes.setdefault(dim, size)
            seen_in.setdefault(dim, array.name or "/")
    return sizes
