"""The keys and bytes a zarr-2-style library stores for a list of creation calls.

``documents(module, new_store)`` makes each call with ``module`` (``zarr`` 2.18, or
``azarr.sync``) into a fresh ``new_store()``, then a group with attributes, a subgroup and a written
array, and returns ``{call: {key: hex bytes}}``. Run with the reference python
(``python creation_documents.py``) it prints zarr 2.18's as JSON; tests/interop/test_write_for_zarr2.py
calls it in-process with ``azarr.sync`` and compares. Never imports azarr.
"""

from __future__ import annotations

import json
from collections.abc import Callable, MutableMapping
from types import ModuleType
from typing import Any

import numcodecs
import numpy as np

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("create", dict(shape=(1000,), chunks=(100,), dtype="i8")),
    ("create", dict(shape=(10, 10), chunks=3, dtype="f4", fill_value=None, order="F")),
    ("create", dict(shape=(4, 4), chunks=2, dimension_separator="/")),
    ("create", dict(shape=5, dtype="U3", fill_value="")),
    ("create", dict(shape=5, dtype=object, object_codec=numcodecs.VLenUTF8())),
    ("create", dict(shape=(3,), dtype=[("a", "i4"), ("b", "S2")], fill_value=b"")),
    ("create", dict(shape=3, dtype="M8[D]", fill_value=None)),
    ("create", dict(shape=3, dtype="c16", fill_value=1 + 2j)),
    ("create", dict(shape=3, dtype="f8", fill_value=float("nan"))),
    ("create", dict(shape=10, compressor=numcodecs.LZMA(filters=[{"id": 3, "dist": 4}]))),
    ("create", dict(shape=10, compression="zlib", compression_opts=9)),
    ("create", dict(shape=10, compressor=[])),
    ("create", dict(shape=10, filters=[numcodecs.Delta(dtype="i4")], dtype="i4")),
    ("array", dict(data=np.arange(100, dtype="i2").reshape(10, 10), chunks=(5, 5))),
]


def documents(
    module: ModuleType, new_store: Callable[[], MutableMapping[str, Any]]
) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for i, (name, kwargs) in enumerate(CALLS):
        store, group_store = new_store(), new_store()
        kw = dict(kwargs)
        if name == "array":
            module.array(kw.pop("data"), store=store, **kw)
        else:
            module.create(store=store, **kw)
        g = module.group(store=group_store)
        g.attrs.update({"title": "é", "nested": {"b": 1, "a": [1.5, None]}})
        g.create_group("sub").zeros("z", shape=(6,), chunks=(4,), dtype="u1")[:] = 7
        stored = {k: bytes(store[k]).hex() for k in store}
        stored |= {"g/" + k: bytes(group_store[k]).hex() for k in group_store}
        out[f"{i} {name} {kwargs!r}"] = stored
    return out


if __name__ == "__main__":
    import zarr

    print(json.dumps(documents(zarr, dict)))
