"""Field selection for structured dtypes (zarr-python 2 semantics).

A selection may name fields as strings anywhere in the tuple, e.g.
``arr["x"]``, ``arr[0:10, "x"]`` or ``arr["x", "y", 0:10]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from azarr.indexing._errors import SelectionError, SelectionTypeError

__all__ = ["check_fields", "check_no_multi_fields", "pop_fields"]


def pop_fields(selection: Any) -> tuple[str | list[str] | None, Any]:
    """Split field names (strings) from the rest of a selection.

    Parameters
    ----------
    selection : Any
        A selection as passed to ``arr[...]``.

    Returns
    -------
    fields : str, list of str or None
        ``None`` if ``selection`` is not a tuple and not a string; the single name if
        exactly one string was given; otherwise the list of names (possibly empty).
    selection : Any
        The selection without the strings: ``()`` if only a string was given, the bare
        item if one item remains, else a tuple.

    Examples
    --------
    >>> pop_fields("x")
    ('x', ())
    >>> pop_fields((slice(0, 2), "x", "y"))
    (['x', 'y'], slice(0, 2, None))
    """
    if isinstance(selection, str):
        return selection, ()
    if not isinstance(selection, tuple):
        return None, selection
    names = [s for s in selection if isinstance(s, str)]
    fields: str | list[str] = names[0] if len(names) == 1 else names
    rest = tuple(s for s in selection if not isinstance(s, str))
    return fields, rest[0] if len(rest) == 1 else rest


def check_fields(fields: str | list[str] | tuple[str, ...] | None, dtype: np.dtype[Any]) -> np.dtype[Any]:
    """Check a field selection against a dtype and return the dtype of the result.

    Parameters
    ----------
    fields : str, list or tuple of str, or None
        Field name(s); ``None`` or empty means all fields (the whole dtype).
    dtype : numpy.dtype
        The array's dtype.

    Returns
    -------
    numpy.dtype
        ``dtype`` for no fields; ``dtype[name]`` for one name; a structured dtype of
        the named fields, in the given order, for a list.

    Raises
    ------
    SelectionTypeError
        ``fields`` is not a string or a list/tuple of strings.
    SelectionError
        The dtype has no fields, or a field does not exist.
    """
    if fields is None:
        return dtype
    if not isinstance(fields, (str, list, tuple)):
        raise SelectionTypeError(
            f"'fields' must be a string or a list of strings; got {type(fields).__name__}"
        )
    if not fields:
        return dtype
    if dtype.names is None:
        raise SelectionError(f"invalid field selection {fields!r}: dtype {dtype} has no fields")
    names = [fields] if isinstance(fields, str) else list(fields)
    for name in names:
        if name not in dtype.names:
            raise SelectionError(
                f"invalid field selection: no field {name!r} in dtype with fields {dtype.names}"
            )
    if isinstance(fields, str):
        return dtype[fields]
    return np.dtype([(f, dtype[f]) for f in names])


def check_no_multi_fields(fields: str | list[str] | tuple[str, ...] | None) -> str | None:
    """Reduce a field selection to at most one field name, for writes.

    Returns
    -------
    str or None
        The single field name, or None for no fields.

    Raises
    ------
    SelectionError
        More than one field was named (zarr-python 2 does not support writing several).
    """
    if isinstance(fields, (list, tuple)):
        if len(fields) > 1:
            raise SelectionError(f"multiple fields are not supported for this operation; got {list(fields)}")
        return fields[0] if fields else None
    return fields
