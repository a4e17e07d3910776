"""Files stay in the store: LocalStore symlinks, ZipStore deflate bombs."""

from __future__ import annotations

import os
import struct
import zipfile
from pathlib import Path

import pytest
from rss import MiB, measure_rss

import azarr
from azarr.errors import PermissionDeniedError, StoreError
from azarr.storage import LocalStore, ZipStore

pytestmark = pytest.mark.timeout(60)


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside"
    victim.mkdir()
    (victim / "precious").write_bytes(b"keep me")
    return victim


@pytest.fixture
def root(tmp_path: Path, outside: Path) -> Path:
    r = tmp_path / "store"
    (r / "a").mkdir(parents=True)
    os.symlink(outside, r / "a" / "escape")  # a directory link leaving the root
    os.symlink(outside / "precious", r / "a" / "leak")  # a file link leaving the root
    (r / "inner").mkdir()
    os.symlink(r / "inner", r / "a" / "inside")  # a link that stays inside
    return r


async def test_writes_through_escaping_symlink_are_refused(root: Path, outside: Path) -> None:
    store = LocalStore(root)
    for key in ("a/escape/0.0", "a/escape/new/.zarray", "a/escape/precious"):
        with pytest.raises(PermissionDeniedError, match="outside the store root") as info:
            await store.set(key, b"evil")
        assert repr(key) in str(info.value)
    with pytest.raises(PermissionDeniedError):
        await store.delete("a/escape/precious")
    with pytest.raises(PermissionDeniedError):
        await store.delete_prefix("a/escape/")
    assert sorted(os.listdir(outside)) == ["precious"]
    assert _read(outside / "precious") == b"keep me"


async def test_links_that_stay_inside_and_file_links_are_fine(root: Path, outside: Path) -> None:
    store = LocalStore(root)
    await store.set("a/inside/0", b"ok")
    assert (root / "inner" / "0").read_bytes() == b"ok"
    # Writing the key of a file link replaces the link itself, never its target.
    await store.set("a/leak", b"new")
    assert not (root / "a" / "leak").is_symlink()
    assert _read(outside / "precious") == b"keep me"


async def test_reads_follow_links_unless_confined(root: Path) -> None:
    assert await LocalStore(root).get("a/escape/precious") == b"keep me"  # zarr-python 2 behaviour
    with pytest.raises(PermissionDeniedError, match="outside the store root"):
        await LocalStore(root, confine_reads=True).get("a/escape/precious")
    assert await LocalStore(root, confine_reads=True).get("a/inside/missing") is None


async def test_confinement_can_be_turned_off(root: Path, outside: Path) -> None:
    await LocalStore(root, confine_writes=False).set("a/escape/allowed", b"x")
    assert (outside / "allowed").read_bytes() == b"x"


async def test_array_write_into_escaping_link_is_refused(root: Path, outside: Path) -> None:
    with pytest.raises(PermissionDeniedError):
        await azarr.create((4,), chunks=(2,), dtype="<i4", store=LocalStore(root), path="a/escape/arr")
    assert sorted(os.listdir(outside)) == ["precious"]


def _deflated_zip(path: Path, name: str, size: int) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf, zf.open(name, "w") as f:
        block = bytes(MiB)
        for _ in range(size // MiB):
            f.write(block)


async def test_zip_deflate_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    _deflated_zip(path, "a/0", 128 * MiB)  # ~128 KiB on disk
    assert path.stat().st_size < MiB
    store = ZipStore(path, mode="r")
    try:
        with (
            azarr.config.set(max_chunk_bytes=4 * MiB),
            measure_rss() as growth,
            pytest.raises(StoreError, match=r"'a/0'.*declares 134217728 bytes.*max_chunk_bytes"),
        ):
            await store.get("a/0")
        assert growth.bytes < 32 * MiB
    finally:
        await store.close()


async def test_zip_member_inflating_past_its_declared_size_stops_there(tmp_path: Path) -> None:
    # A member whose headers declare 16 bytes but whose deflate stream holds 64 MiB.
    path = tmp_path / "liar.zip"
    _deflated_zip(path, "a/0", 64 * MiB)
    data = bytearray(path.read_bytes())
    for sig, offset in ((b"PK\x01\x02", 24), (b"PK\x03\x04", 22)):  # central and local headers
        at = data.find(sig)
        data[at + offset : at + offset + 4] = struct.pack("<I", 16)
    path.write_bytes(bytes(data))
    store = ZipStore(path, mode="r")
    try:
        with measure_rss() as growth:
            try:
                value = await store.get("a/0")
            except StoreError as exc:  # bad CRC / zip64 mismatch: a typed error is fine
                assert "'a/0'" in str(exc)
            else:
                assert value is not None and len(value) <= 16
        assert growth.bytes < 32 * MiB
    finally:
        await store.close()
