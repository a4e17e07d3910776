"""Fuzzing zip archives: a mutated archive read through ZipStore gives data or an AzarrError.

Templates from fuzz_stores.py are packed into deflated zip files; each case
flips, overwrites or truncates bytes of the archive (local headers, central
directory, deflate streams) and opens/reads it. ``AZARR_FUZZ_EXAMPLES`` sets
the count as in test_fuzz.py (a fifth of it here: every case writes a file).
"""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
import zipfile

import pytest
from fuzz_stores import FUZZ_MAX_CHUNK_BYTES, _read_array, fuzz_settings, templates
from hypothesis import given
from hypothesis import strategies as st
from rss import MiB, measure_rss

import azarr
from azarr.errors import AzarrError
from azarr.storage import ZipStore

EXAMPLES = max(50, int(os.environ.get("AZARR_FUZZ_EXAMPLES", "300")) // 5)
_ZIPS: dict[str, bytes] = {}


def _zipped(name: str) -> bytes:
    if name not in _ZIPS:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for key, value in sorted(templates()[name].items()):
                zf.writestr(key, value)
        _ZIPS[name] = buf.getvalue()
    return _ZIPS[name]


@st.composite
def hostile_zip(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(n for n in templates() if n != "consolidated")))
    data = bytearray(_zipped(name))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "int", "int", "truncate"]))
        if op == "truncate":
            del data[draw(st.integers(0, len(data))) :]
            continue
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= draw(st.integers(1, 255))
        else:
            width = draw(st.sampled_from([2, 4]))
            value = draw(st.sampled_from([0, 1, 8, 12, 99, 0xFFFF, 0xFFFFFFFF, 2**31, 2**24]))
            data[at : at + width] = (value % 2 ** (8 * width)).to_bytes(width, "little")
    return name, bytes(data)


async def _read_zip(path: str) -> None:
    store = ZipStore(path, mode="r")
    try:
        arr = await azarr.open_array(store, mode="r", path="a")
        await _read_array(arr)
    finally:
        await store.close()


@pytest.mark.timeout(0)
def test_fuzz_mutated_zip_archives() -> None:
    loop = asyncio.new_event_loop()
    folder = tempfile.mkdtemp(prefix="azarr-fuzz-zip-")
    path = os.path.join(folder, "store.zip")

    @fuzz_settings(EXAMPLES)
    @given(case=hostile_zip())
    def one_case(case: tuple[str, bytes]) -> None:
        with open(path, "wb") as f:
            f.write(case[1])
        try:
            loop.run_until_complete(_read_zip(path))
        except AzarrError:
            pass

    templates()
    try:
        with azarr.config.set(max_chunk_bytes=FUZZ_MAX_CHUNK_BYTES), measure_rss() as growth:
            one_case()
    finally:
        loop.close()
        os.unlink(path) if os.path.exists(path) else None
        os.rmdir(folder)
    assert growth.bytes < 256 * MiB
