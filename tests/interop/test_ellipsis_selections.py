"""Selections mixing Ellipsis with ints, slices, lists and arrays: azarr against zarr 2.18 and NumPy.

The table lives in ``ref_scripts/ellipsis_selections.py``; the reference interpreter
reads every case with ``z[...]``, ``get_basic_selection`` and ``oindex`` and this
test does the same with `azarr.sync` on an array of the same shape and chunks.

Rules:

- zarr 2.18 returns a result: azarr returns the same shape and values.
- zarr 2.18 raises an `IndexError` (a selection it rejects): azarr raises an
  `IndexError` too (the same class for bounds errors; the same words for
  "unsupported selection item for basic indexing"), except for ``z[...]`` with one
  Ellipsis and one int list/array (`EXTENDED`), which azarr routes like the
  written-out selection (``z[:, :, idx]``): what 2.18's ``oindex`` gives for it.
- zarr 2.18 crashes with ``ValueError: The truth value of an array ... is ambiguous``
  (its ``Ellipsis in selection`` test compares the array item): a 2.18 bug, azarr
  gives the orthogonal reference for ``oindex`` / ``z[...]``, and a selection error
  for ``get_basic_selection``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import azarr.sync as zs
from azarr.indexing import SelectionError

from .conftest import RunRef
from .ref_scripts.ellipsis_selections import ACCESSES, CASES, decode, outcome, reference_array

#: zarr 2.18 errors that azarr turns into results (``z[...]`` routed as the written-out selection).
EXTENDED = {
    ("e-list", "getitem"),
    ("e-ints", "getitem"),
    ("e-ints-unsorted", "getitem"),
    ("list-e", "getitem"),
    ("ints-e", "getitem"),
    ("int-e-list", "getitem"),
    ("e-slice-list", "getitem"),
    ("e-step-list", "getitem"),
    ("slice-e-list", "getitem"),
    ("e-list-int", "getitem"),
    ("e-boollist", "getitem"),
    ("1d-e-list", "getitem"),
    ("1d-list-e", "getitem"),
    ("e-list-oob", "getitem"),
}
ZARR218_CRASH = "truth value of an array with more than one element is ambiguous"


def orthogonal_reference(a: np.ndarray[Any, Any], selection: tuple[Any, ...]) -> np.ndarray[Any, Any]:
    """``a.oindex[selection]`` computed with NumPy alone: ``np.ix_`` over the written-out selection."""
    pos = next(i for i, item in enumerate(selection) if item is Ellipsis)
    n_fill = a.ndim - (len(selection) - 1)
    full = selection[:pos] + (slice(None),) * n_fill + selection[pos + 1 :]
    axes, ints = [], []
    for axis, (item, n) in enumerate(zip(full, a.shape, strict=True)):
        if isinstance(item, slice):
            axes.append(np.arange(n)[item])
        elif isinstance(item, int):
            axes.append(np.array([item]))
            ints.append(axis)
        else:
            arr = np.asarray(item)
            axes.append(np.flatnonzero(arr) if arr.dtype == bool else arr)
    return a[np.ix_(*axes)].squeeze(axis=tuple(ints))


@pytest.fixture(scope="module")
def zarr218_outcomes(run_ref_script: RunRef) -> dict[tuple[str, str], dict[str, Any]]:
    result = run_ref_script("ellipsis_selections.py")
    assert result.returncode == 0, result.report
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {(r["case"], r["access"]): r for r in rows}


@pytest.mark.parametrize("access", ACCESSES)
@pytest.mark.parametrize(("case_id", "shape", "chunks", "items"), CASES, ids=[c[0] for c in CASES])
def test_matches_zarr218_and_numpy(
    zarr218_outcomes: dict[tuple[str, str], dict[str, Any]],
    case_id: str,
    shape: list[int],
    chunks: list[int],
    items: list[Any],
    access: str,
) -> None:
    ref = zarr218_outcomes[(case_id, access)]
    a = reference_array(shape)
    z = zs.array(a, chunks=tuple(chunks))
    selection = decode(items)
    got = outcome(z, access, selection)

    if (case_id, access) in EXTENDED:  # what 2.18 gives for the same selection through oindex
        oindex = zarr218_outcomes[(case_id, "oindex")]
        if "error" not in oindex or ZARR218_CRASH not in oindex["message"]:
            ref = oindex
        else:
            ref = {"zarr218_crash": True, "message": oindex["message"]}

    if "error" in ref and ZARR218_CRASH in ref["message"] and access == "basic":
        assert "error" in got and "IndexError" in got["bases"], got
    elif ("error" in ref and ZARR218_CRASH in ref["message"]) or "zarr218_crash" in ref:
        assert "error" not in got, got
        expected = orthogonal_reference(a, selection)
        assert (got["shape"], got["values"]) == (list(expected.shape), expected.ravel().tolist())
    elif "error" not in ref:
        assert "error" not in got, got
        assert (got["shape"], got["values"]) == (ref["shape"], ref["values"])
    else:
        assert "error" in got, f"zarr 2.18 raised {ref['error']}: {ref['message']}; azarr returned {got}"
        assert "IndexError" in got["bases"], got
        if ref["error"] == "BoundsCheckError":
            assert got["error"] == "BoundsCheckError", got
        if ref["message"].startswith("unsupported selection item for basic indexing"):
            assert got["message"].startswith("unsupported selection item for basic indexing"), got


EXTENDED_CASES = [c for c in CASES if (c[0], "getitem") in EXTENDED]


@pytest.mark.parametrize(
    ("case_id", "shape", "chunks", "items"), EXTENDED_CASES, ids=[c[0] for c in EXTENDED_CASES]
)
def test_getitem_of_ellipsis_and_one_array_is_numpy_where_numpy_is_orthogonal(
    case_id: str, shape: list[int], chunks: list[int], items: list[Any]
) -> None:
    """Where NumPy's ``a[sel]`` is an outer selection (one array, no int apart from it), azarr agrees."""
    a = reference_array(shape)
    z = zs.array(a, chunks=tuple(chunks))
    selection = decode(items)
    if case_id == "e-list-oob":  # both reject index 8 on an axis of 8
        with pytest.raises(IndexError):
            a[selection]
        with pytest.raises(IndexError, match="out of bounds for axis 2"):
            z[selection]
        return
    if case_id == "int-e-list":  # NumPy moves the broadcast axis first; zarr routes this orthogonally
        with pytest.raises(AssertionError):
            np.testing.assert_array_equal(z[selection], a[selection])
        return
    np.testing.assert_array_equal(z[selection], a[selection])


def test_setitem_with_ellipsis_and_a_list_writes_the_orthogonal_selection() -> None:
    a = reference_array([6, 7, 8])
    z = zs.array(a, chunks=(4, 3, 5))
    z[..., [0, 3, 5]] = -1
    a[..., [0, 3, 5]] = -1
    np.testing.assert_array_equal(z[...], a)


def test_basic_selection_with_a_list_names_the_axis_and_the_alternatives() -> None:
    z = zs.array(reference_array([6, 7, 8]), chunks=(4, 3, 5))
    with pytest.raises(SelectionError, match=r"axis 2: .*got list; .*get_orthogonal_selection \(oindex\)"):
        z.get_basic_selection((Ellipsis, [0, 3]))
