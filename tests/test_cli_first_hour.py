"""The ``azarr`` command as a new user meets it (issue #27): progress bars on a real terminal, a
missing source, a root array's tree, a bucket root's listing, the ``--if-exists`` values.

The progress bar is checked under a pseudo-terminal: the real executable runs with its stdin,
stdout and stderr on the slave side of ``os.openpty()``, as in an interactive shell, and the
test reads what it draws from the master side.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import select
import struct
import subprocess
import termios
import time
import typing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from servers import S3Server
from test_cli import AZARR, ok, s3_args, write_hierarchy

import azarr
from azarr.cli import cli
from azarr.cli._format import human_bytes
from azarr.storage import S3Store

HIDE_CURSOR = b"\x1b[?25l"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


@pytest.fixture
def hierarchy(tmp_path: Path) -> str:
    """test_cli's hierarchy: ``t`` (100x50 f4, 50 chunks) and ``sub/b``; 57 keys."""
    url = str(tmp_path / "d.zarr")
    asyncio.run(write_hierarchy(azarr.LocalStore(url)))
    return url


def invoke(*args: str, code: int = 0) -> Result:
    """``azarr *args`` in this process (click's runner: stdout and stderr are not terminals),
    expected to exit with ``code``; a failure is one line on stderr without a traceback."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    if code:
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result


def invoke_json(*args: str) -> Any:
    return json.loads(invoke(*args, "--json").stdout)


def run_on_terminal(*args: str, timeout: float = 120) -> tuple[int, str, bytes]:
    """Run ``azarr *args`` with a pseudo-terminal (120 columns) as its stdin, stdout and stderr:
    the exit status, everything it wrote with escape sequences removed, and as written."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("COLUMNS", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")
    }
    env.update(TERM="xterm-256color", AWS_EC2_METADATA_DISABLED="true")
    proc = subprocess.Popen(
        [AZARR, *args], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    raw = b"".join(chunks)
    return code, ANSI.sub("", raw.decode("utf-8", "replace")), raw


# ---------------------------------------------------------------- progress bars
def test_cp_draws_a_bar_on_a_terminal_without_progress_option(hierarchy: str, tmp_path: Path) -> None:
    code, screen, raw = run_on_terminal("cp", hierarchy, str(tmp_path / "copy.zarr"))
    assert code == 0, screen
    # Drawn live (cursor hidden while the bar redraws in place), not only printed once at the end
    # as rich does for a console it was told is no terminal.
    assert HIDE_CURSOR in raw, raw
    assert re.search(r"copy .*57/57 keys .*KiB", screen), screen
    assert "ETA" in screen and "copied 57 keys" in screen


def test_verify_decode_bar_counts_bytes(hierarchy: str) -> None:
    code, screen, raw = run_on_terminal("verify", hierarchy, "--decode")
    assert code == 0 and HIDE_CURSOR in raw, screen
    bar = next(line for line in screen.splitlines() if "52/52 chunks" in line)
    chunks = [p for p in Path(hierarchy).rglob("*") if p.is_file() and not p.name.startswith(".")]
    stored = sum(p.stat().st_size for p in chunks)
    assert f" {human_bytes(stored)} " in bar, bar  # the chunks' stored bytes, not "0 B"
    assert screen.rstrip().endswith(": ok")


def test_no_bar_off_a_terminal_or_when_quiet(hierarchy: str, tmp_path: Path) -> None:
    piped = ok("cp", hierarchy, str(tmp_path / "a.zarr"))  # stderr is a pipe here
    assert piped.stderr == "" and piped.stdout.startswith("copied 57 keys")
    assert invoke("verify", hierarchy, "--decode").stderr == ""
    for extra in ("-q", "--no-progress"):
        code, screen, raw = run_on_terminal("cp", hierarchy, str(tmp_path / f"b{extra}.zarr"), extra)
        assert code == 0 and "ETA" not in screen and HIDE_CURSOR not in raw, (extra, screen)


# ---------------------------------------------------------------- cp
def test_cp_from_a_missing_source_fails(hierarchy: str, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such.zarr")
    dst = tmp_path / "copy.zarr"
    for extra in ((), ("--dry-run",), ("--if-exists", "skip")):
        err = invoke("cp", missing, str(dst), *extra, code=1).stderr
        assert "nothing to copy" in err and missing in err, err
    assert not dst.exists()
    # As `azarr info` fails on it:
    assert invoke("info", missing, code=1).stderr.startswith("azarr: error: GroupNotFoundError")
    err = invoke("cp", hierarchy, str(dst), "--exclude", ".", code=1).stderr
    assert "no keys that --exclude leaves" in err


def test_if_exists_values_are_the_apis(hierarchy: str, tmp_path: Path) -> None:
    """``--if-exists`` takes copy_store's values; --help and docs/cli.md list the same ones."""
    api = set(typing.get_args(typing.get_type_hints(azarr.copy_store)["if_exists"]))
    help_text = " ".join(invoke("cp", "--help").stdout.split())
    listed = re.search(r"--if-exists \[([a-z|]+)\]", help_text)
    assert listed and set(listed[1].split("|")) == api
    docs = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    documented = re.search(r"--if-exists ([a-z|\\]+)\]", docs)
    assert documented and set(documented[1].split("\\|")) == api
    dst = str(tmp_path / "copy.zarr")
    invoke("cp", hierarchy, dst)
    err = invoke("cp", hierarchy, dst, code=1).stderr
    assert "if_exists='replace' or 'skip'" in err and "--if-exists replace" in err
    assert invoke_json("cp", hierarchy, dst, "--if-exists", "replace")["n_copied"] == 57
    assert invoke_json("cp", hierarchy, dst, "--if-exists", "skip")["n_skipped"] == 57
    # The option's first spelling still works (hidden): scripts written with it keep running.
    assert invoke_json("cp", hierarchy, dst, "--if-exists", "overwrite")["n_copied"] == 57


# ---------------------------------------------------------------- tree / ls
def test_tree_of_a_root_array_is_one_readable_line(hierarchy: str, tmp_path: Path) -> None:
    url = str(tmp_path / "a.zarr")
    asyncio.run(azarr.zeros((20, 4), chunks=(10, 4), dtype="i2", store=url))
    assert invoke("tree", url).stdout == "/ (20, 4) int16 v2 bytes > blosc\n"
    assert invoke("tree", hierarchy, "--path", "sub/b").stdout.startswith("b (7,) int16 v2 ")


def test_ls_of_a_directory_of_datasets(tmp_path: Path) -> None:
    """A location that is no Zarr node lists its entries instead of 'nothing at path'."""
    asyncio.run(write_hierarchy(azarr.LocalStore(str(tmp_path / "d.zarr"))))
    asyncio.run(azarr.zeros((3,), store=str(tmp_path / "a.zarr")))
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f").write_text("x")
    assert invoke("ls", str(tmp_path)).stdout.split() == ["a.zarr", "d.zarr/", "notes.txt", "other/"]
    rows = invoke_json("ls", str(tmp_path), "-l")
    assert [(r["name"], r["kind"]) for r in rows] == [
        ("a.zarr", "array"),
        ("d.zarr", "group"),
        ("notes.txt", "key"),
        ("other", "prefix"),
    ]
    assert rows[0]["shape"] == [3] and "nbytes_stored" in rows[0]
    assert "other/" in invoke("ls", str(tmp_path), "-l").stdout
    assert "GroupNotFoundError" in invoke("ls", str(tmp_path / "empty"), code=1).stderr


@pytest.mark.s3
def test_ls_of_a_bucket_root(seaweedfs: S3Server) -> None:
    bucket = seaweedfs.create_bucket()

    async def write() -> None:
        store = S3Store(f"{bucket}/d.zarr", storage_options=seaweedfs.storage_options)
        await write_hierarchy(store)
        await store.close()
        other = S3Store(f"{bucket}/x.zarr", storage_options=seaweedfs.storage_options)
        arr = await azarr.zeros((4,), chunks=(2,), dtype="u1", store=other)
        await arr.setitem(..., np.arange(4, dtype="u1"))
        await other.close()

    asyncio.run(write())
    opts = s3_args(seaweedfs)
    assert invoke("ls", f"s3://{bucket}", *opts).stdout.split() == ["d.zarr/", "x.zarr"]
    assert invoke("ls", f"s3://{bucket}/", *opts).stdout.split() == ["d.zarr/", "x.zarr"]
    assert invoke("ls", f"s3://{bucket}/d.zarr", *opts).stdout.split() == ["sub/", "t"]
