"""The rules of xarray's own Zarr engine that azarr calls rather than restates, imported in one place.

azarr's writer and engine follow xarray's ``ZarrStore`` (``xarray/backends/zarr.py``)
rule by rule. Where xarray keeps a rule in a function of its own -- CF encoding
for Zarr, which encoding keys are valid and how chunks follow from them, whether
dask chunks may share a Zarr chunk, the dtype and dimension checks of an append,
the write-mode defaults -- azarr calls that function, so errors and edge cases
are xarray's own and stay so when xarray changes them. These names are private
to xarray: this module is the one place to adapt when xarray moves one (the
``xarray>=2026.9`` requirement; ``tests/interop/test_xarray_suite.py`` runs
xarray's own Zarr backend tests against azarr and fails when one goes missing).
"""

from __future__ import annotations

from xarray.backends.chunks import grid_rechunk, validate_grid_chunks_alignment
from xarray.backends.common import _decode_variable_name, _encode_variable_name
from xarray.backends.writers import _validate_dataset_names, dump_to_store
from xarray.backends.zarr import (
    DIMENSION_KEY,
    FillValueCoder,
    _choose_default_mode,
    _validate_and_transpose_existing_dims,
    _validate_datatypes_for_zarr_append,
    encode_zarr_attr_value,
    encode_zarr_variable,
    extract_zarr_variable_encoding,
)
from xarray.core.utils import emit_user_level_warning

__all__ = [
    "DIMENSION_KEY",
    "FillValueCoder",
    "_choose_default_mode",
    "_decode_variable_name",
    "_encode_variable_name",
    "_validate_and_transpose_existing_dims",
    "_validate_dataset_names",
    "_validate_datatypes_for_zarr_append",
    "dump_to_store",
    "emit_user_level_warning",
    "encode_zarr_attr_value",
    "encode_zarr_variable",
    "extract_zarr_variable_encoding",
    "grid_rechunk",
    "validate_grid_chunks_alignment",
]
