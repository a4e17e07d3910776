"""What one ``to_zarr`` writes into one group, decided before anything is written.

xarray's ``ZarrStore.store``/``set_variables`` check, encode and write variable after
variable, so a variable refused halfway (a bad encoding, chunks that would overlap)
leaves the ones before it written. Here the same rules run first for every
variable and only record their outcome in a `GroupPlan`: arrays to create (their
metadata already validated), arrays to grow, the group's attributes, and the data
writes. The caller then commits the metadata in one concurrent wave and writes the
data. The rules are xarray's, most by calling xarray's own functions
(``azarr.xarray._compat``):

* ``mode="w"`` replaces every variable; otherwise variables already in the group
  are written with the encoding they were stored with (their dtype must match,
  fixed-width strings exactly), with the same dimensions in the same sizes except
  along ``append_dim``; ``mode="r+"`` creates nothing; ``mode="a-"`` with
  ``append_dim`` leaves existing variables without that dimension alone;
* ``append_dim`` must name a dimension of the stored dataset;
* for Zarr format 2 the array's ``fill_value`` is the variable's ``_FillValue``;
  for format 3 it is ``encoding["fill_value"]`` (NaN for floats by default) and a
  ``_FillValue`` stays an attribute;
* ``encoding=`` keys are checked (``extract_zarr_variable_encoding``) and dask
  chunks that would have two tasks write one Zarr chunk are refused unless
  ``safe_chunks=False`` (``validate_grid_chunks_alignment``) or rechunked onto the
  Zarr grid with ``align_chunks=True`` (``grid_rechunk``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from xarray import conventions

from azarr.xarray._compat import (
    FillValueCoder,
    _encode_variable_name,
    _validate_and_transpose_existing_dims,
    _validate_datatypes_for_zarr_append,
    extract_zarr_variable_encoding,
    grid_rechunk,
    validate_grid_chunks_alignment,
)
from azarr.xarray._encoding import COMPRESSOR_KEY, create_kwargs

if TYPE_CHECKING:
    from azarr.xarray._store import AzarrDataStore

_UNSET: Any = object()


@dataclass(frozen=True)
class PendingArray:
    """A write target before the metadata is committed: array ``name`` of ``store``'s group."""

    store: AzarrDataStore
    name: str


@dataclass
class GroupPlan:
    """The metadata changes one group needs before its data is written.

    Attributes
    ----------
    attrs : dict or None
        The group's new attributes (replacing the old ones), or None to leave them.
    create : dict
        Array name -> `azarr.AsyncGroup.create_dataset` arguments (validated).
    resize : dict
        Array name -> new shape (arrays grown along ``append_dim``).
    """

    attrs: dict[str, Any] | None = None
    create: dict[str, dict[str, Any]] = field(default_factory=dict)
    resize: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.attrs is None and not self.create and not self.resize


def plan_store(
    store: AzarrDataStore,
    variables: dict[Any, Any],
    attributes: dict[Any, Any],
    check_encoding_set: Any,
    writer: Any,
    unlimited_dims: Any,
) -> None:
    """``AzarrDataStore.store``: xarray's ``ZarrStore.store`` rules, recorded in ``store.plan``."""
    from azarr.xarray._writes import Writes, check_attributes, commit_now

    existing_keys = set() if store.mode == "w" else set(store.arrays)
    existing = {vn for vn in variables if _encode_variable_name(vn) in existing_keys}
    new = [vn for vn in variables if vn not in existing]
    if store.mode == "r+" and new:
        raise ValueError(
            f"dataset contains non-pre-existing variables {new!r}, which is not allowed in "
            "``xarray.Dataset.to_zarr()`` with ``mode='r+'``. To allow writing new variables, "
            "set ``mode='a'``."
        )
    if store.append_dim is not None and store.append_dim not in existing_keys:
        stored_dims = store.get_dimensions()  # dimensions without a coordinate variable count too
        if store.append_dim not in stored_dims:
            raise ValueError(
                f"append_dim={store.append_dim!r} does not match any existing dataset dimensions "
                f"{dict(stored_dims)}"
            )
    encoded, attrs = store.encode({vn: variables[vn] for vn in new}, attributes)
    if existing:
        encoded.update(_encode_like_stored(store, variables, existing))
    if store.mode not in ("r", "r+"):
        check_attributes(attrs, "the group")
        store.set_attributes(attrs)
        store.set_dimensions(encoded, unlimited_dims=unlimited_dims)
    if store.mode == "a-" and store.append_dim is not None:
        encoded = {k: v for k, v in encoded.items() if k not in existing or store.append_dim in v.dims}
    ours = isinstance(writer, Writes)
    pending = writer if ours else Writes()
    for vn, var in encoded.items():
        _plan_variable(store, vn, var, vn in check_encoding_set, pending)
    if not ours:
        # Dataset.dump_to_store with xarray's own writer: commit now, hand it real arrays.
        commit_now(pending, writer, store)


def _encode_like_stored(store: AzarrDataStore, variables: dict[Any, Any], names: set[Any]) -> dict[Any, Any]:
    """Variables already in the group, encoded exactly as the stored ones (units, dtype, scale...)."""
    stored, _, _ = conventions.decode_cf_variables(
        variables={vn: store.open_store_variable(_encode_variable_name(vn)) for vn in names},
        attributes={},  # the group's "coordinates" attribute is of no concern here
    )
    like = {}
    for vn in names:
        _validate_datatypes_for_zarr_append(vn, stored[vn], variables[vn])
        like[vn] = variables[vn].copy(deep=False)
        like[vn].encoding = stored[vn].encoding
    encoded, _ = store.encode(like, {})
    return {
        vn: _validate_and_transpose_existing_dims(
            vn, encoded[vn], stored[vn], store.write_region, store.append_dim
        )
        for vn in names
    }


def _fill_value(store: AzarrDataStore, var: Any, attrs: dict[str, Any]) -> Any:
    """The array's ``fill_value``, taking ``_FillValue`` out of (or re-encoding it in) ``attrs``."""
    if store.use_zarr_fill_value_as_mask:
        fill_value = attrs.pop("_FillValue", None)
    else:
        fill_value = var.encoding.pop("fill_value", None)
        if fill_value is None and var.dtype.kind == "f":
            fill_value = np.nan  # xarray's default for floats (zarr's would be 0)
        if "_FillValue" in attrs:
            fv = attrs.pop("_FillValue")
            if fv is not None:
                attrs["_FillValue"] = FillValueCoder.encode(fv, var.dtype)
    if "_FillValue" in var.encoding:
        if var.encoding["_FillValue"] is not None:
            raise ValueError("Zarr does not support _FillValue in encoding.")
        del var.encoding["_FillValue"]
    return fill_value


def _plan_variable(store: AzarrDataStore, vn: Any, var: Any, check_encoding: bool, writes: Any) -> None:
    """One variable of xarray's ``ZarrStore.set_variables``: create or grow its array, queue its data."""
    from azarr.xarray._writes import check_attributes

    name = _encode_variable_name(vn)
    attrs = dict(var.attrs)
    dims = var.dims
    fill_value = _fill_value(store, var, attrs)
    # azarr also takes zarr-python 2's "compressor", which xarray's check would drop or refuse.
    compressor = var.encoding.pop(COMPRESSOR_KEY, _UNSET)
    encoding = extract_zarr_variable_encoding(
        var, raise_on_invalid=check_encoding, name=vn, zarr_format=store.zarr_format
    )
    if compressor is not _UNSET:
        encoding[COMPRESSOR_KEY] = compressor
    region = {dim: (store.write_region or {}).get(dim, slice(None)) for dim in dims}
    stored_shape = None
    creating = store.mode == "w" or name not in store.arrays
    if not creating:
        array = store.arrays[name]
        stored_shape = array.shape
        if store.append_dim is not None and store.append_dim in dims:
            axis = dims.index(store.append_dim)
            region[store.append_dim] = slice(array.shape[axis], None)
            stored_shape = tuple(
                n + var.shape[axis] if i == axis else n
                for i, n in enumerate(store.plan.resize.get(name, array.shape))
            )
            store.plan.resize[name] = stored_shape
    selection = tuple(region[dim] for dim in dims)
    # With shards, dask chunks must align with whole shards (xarray GH 10831).
    write_chunks = encoding.get("shards") or encoding["chunks"]
    if store.align_chunks and isinstance(write_chunks, tuple):
        var = grid_rechunk(v=var, enc_chunks=write_chunks, region=selection)
    if store.safe_chunks and isinstance(write_chunks, tuple):
        validate_grid_chunks_alignment(
            nd_v_chunks=var.chunks,
            enc_chunks=write_chunks,
            region=selection,
            allow_partial_chunks=store.mode != "r+",
            name=name,
            backend_shape=stored_shape or var.shape,
        )
    if creating:
        encoded_attrs = {k: store.encode_attribute(v) for k, v in attrs.items()}
        check_attributes(encoded_attrs, f"variable {vn!r}")
        store.plan.create[name] = create_kwargs(
            vn,
            shape=var.shape,
            dtype=var.dtype,
            fill_value=fill_value,
            dims=dims,
            attrs=encoded_attrs,
            encoding=encoding,
            write_empty=store.write_empty,
            overwrite=store.mode == "w",
            zarr_format=store.zarr_format,
        )
    writes.add(var.data, PendingArray(store, name), selection)
