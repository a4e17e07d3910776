"""The ``azarr`` executable, run as a subprocess against a local directory store and SeaweedFS.

Each command's text output, its ``--json`` schema, and the exit codes: 0 ok, 1 failure
(missing bucket, bad credentials, corrupt chunk found by ``verify``), 2 usage (bad
selection, unknown option). Errors are one line on stderr without a traceback unless ``-v``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from servers import S3Server

import azarr
from azarr.storage import S3Store

AZARR = shutil.which("azarr", path=str(Path(sys.executable).parent)) or "azarr"
DATA = np.arange(5000, dtype="f4").reshape(100, 50)


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AWS_EC2_METADATA_DISABLED": "true", "COLUMNS": "120"}
    return subprocess.run(
        [AZARR, *args], capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL
    )


def ok(*args: str) -> subprocess.CompletedProcess[str]:
    proc = run(*args)
    assert proc.returncode == 0, f"azarr {' '.join(args)} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def ok_json(*args: str) -> Any:
    return json.loads(ok(*args, "--json").stdout)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (
        f"expected exit {code}, got {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    )
    assert "Traceback" not in proc.stderr
    return proc.stderr


async def write_hierarchy(store: azarr.Store) -> None:
    root = await azarr.group(store)
    await root.attrs.update(title="cli test")
    arr = await root.zeros("t", shape=(100, 50), chunks=(10, 10), dtype="f4")
    await arr.setitem(..., DATA)
    sub = await root.create_group("sub")
    b = await sub.zeros("b", shape=(7,), chunks=(3,), dtype="i2")
    await b.setitem(slice(0, 4), np.array([1, 2, 3, 4], dtype="i2"))


@pytest.fixture
def local(tmp_path: Path) -> str:
    """A local hierarchy: ``/`` (attrs) with array ``t`` (100x50 f4, 50 chunks) and ``sub/b`` (7, i2)."""
    url = str(tmp_path / "d.zarr")
    asyncio.run(write_hierarchy(azarr.LocalStore(url)))
    return url


def s3_args(server: S3Server, *, secret: str | None = None) -> list[str]:
    return [
        "--endpoint-url",
        server.endpoint_url,
        "-S",
        f"key={server.key}",
        "-S",
        f"secret={secret or server.secret}",
    ]


@pytest.fixture
def s3(seaweedfs: S3Server, s3_bucket: str) -> str:
    """The same hierarchy on SeaweedFS; its URL."""

    async def write() -> None:
        store = S3Store(f"{s3_bucket}/d.zarr", storage_options=seaweedfs.storage_options)
        await write_hierarchy(store)
        await store.close()

    asyncio.run(write())
    return f"s3://{s3_bucket}/d.zarr"


# ---------------------------------------------------------------- usage
def test_usage_errors_exit_2(local: str) -> None:
    assert "No such command" in one_line_error(run("frobnicate", local), 2)
    # The rest in-process (click's runner drives the same command objects, minus ~0.5 s of start-up each).
    from click.testing import CliRunner

    from azarr.cli import cli

    runner = CliRunner()
    cases = {
        ("info",): "Missing argument",
        ("info", local, "--no-such-option"): "No such option",
        ("info", local, "-S", "novalue"): "key=value",
        ("cp", local, local + "2", "--if-exists", "maybe"): "--if-exists",
        ("tree", local, "--depth", "-1"): "--depth",
    }
    for args, message in cases.items():
        result = runner.invoke(cli, list(args))
        assert result.exit_code == 2 and message in result.output, (args, result.output)
    help_text = runner.invoke(cli, ["--help"]).output
    assert all(
        name in help_text for name in ("info", "tree", "ls", "get", "cp", "consolidate", "verify", "bench")
    )


# ---------------------------------------------------------------- info / tree / ls
INFO_KEYS = {
    "url", "kind", "name", "zarr_format", "shape", "chunks", "shards", "dtype", "codecs", "compressor", "filters",
    "fill_value", "order", "dimension_separator", "dimension_names", "nchunks", "nbytes",
    "nchunks_initialized", "nbytes_stored", "ratio", "attrs",
}  # fmt: skip


def test_info_array(local: str) -> None:
    info = ok_json("info", local, "--path", "t")
    assert set(info) == INFO_KEYS
    assert info["shape"] == [100, 50] and info["chunks"] == [10, 10] and info["dtype"] == "<f4"
    assert info["compressor"]["id"] == "blosc" and info["filters"] is None and info["fill_value"] == 0.0
    assert (info["nchunks"], info["nchunks_initialized"], info["nbytes"]) == (50, 50, 20000)
    assert 0 < info["nbytes_stored"] < 20000 and info["ratio"] == pytest.approx(
        20000 / info["nbytes_stored"], 1e-3
    )
    text = ok("info", local, "--path", "t").stdout
    assert "Chunks initialized : 50/50" in text and "Compressor" in text and "blosc(" in text


def test_info_group(local: str) -> None:
    info = ok_json("info", local)
    assert info == {
        "url": local,
        "kind": "group",
        "name": "/",
        "zarr_format": 2,
        "arrays": 1,
        "groups": 1,
        "attrs": {"title": "cli test"},
    }


def test_tree(local: str) -> None:
    assert ok("tree", local).stdout.splitlines() == [
        "/ (Zarr v2)",
        " ├── sub",
        " │   └── b (7,) int16 v2 bytes > blosc",
        " └── t (100, 50) float32 v2 bytes > blosc",
    ]
    tree = ok_json("tree", local)
    assert [c["name"] for c in tree["children"]] == ["sub", "t"]
    assert tree["children"][0]["children"] == [
        {
            "name": "b",
            "path": "sub/b",
            "kind": "array",
            "zarr_format": 2,
            "shape": [7],
            "chunks": [3],
            "shards": None,
            "dtype": "<i2",
            "codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {
                    "name": "blosc",
                    "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "blocksize": 0},
                },
            ],
        }
    ]
    assert ok_json("tree", local, "--depth", "1")["children"][0]["children"] == []


def test_ls(local: str) -> None:
    assert ok("ls", local).stdout.split() == ["sub/", "t"]
    assert ok("ls", local, "-r").stdout.split() == ["sub/", "sub/b", "t"]
    rows = ok_json("ls", local, "-l", "-r")
    assert [(r["name"], r["kind"]) for r in rows] == [("sub", "group"), ("sub/b", "array"), ("t", "array")]
    assert rows[2]["nbytes_stored"] > 0 and rows[2]["shape"] == [100, 50]
    assert one_line_error(run("ls", local, "--path", "t"), 2)


# ---------------------------------------------------------------- get
def test_get(local: str, tmp_path: Path) -> None:
    out = tmp_path / "out.npy"
    ok("get", local, "--path", "t", "--sel", "0:10,::2", "-o", str(out))
    np.testing.assert_array_equal(np.load(out), DATA[0:10, ::2])
    got = ok_json("get", local, "--path", "t", "--sel", "[1,5],-1")
    assert got == {"shape": [2], "dtype": "<f4", "data": DATA[[1, 5], -1].tolist()}
    text = ok("get", local, "--path", "t", "--sel", "2,0:3").stdout
    assert text.strip() == "[100. 101. 102.]"


@pytest.mark.parametrize("sel", ["0:3,,", "1:2:3:4", "[1,[2]]", "abc", "200", "0,0,0"])
def test_get_bad_selection_exit_2(local: str, sel: str) -> None:
    err = one_line_error(run("get", local, "--path", "t", "--sel", sel), 2)
    assert "--sel" in err


def test_get_group_is_usage_error(local: str) -> None:
    assert "group" in one_line_error(run("get", local, "--sel", "0"), 2)


# ---------------------------------------------------------------- cp / consolidate
def test_cp_local(local: str, tmp_path: Path) -> None:
    dst = str(tmp_path / "copy.zarr")
    dry = ok("cp", local, dst, "--dry-run").stdout.splitlines()
    assert dry[-1] == "dry run: 57 copied, 0 skipped" and "copy t/0.0" in dry
    assert not Path(dst).exists()
    result = ok_json("cp", local, dst)
    assert (result["n_copied"], result["n_skipped"]) == (57, 0) and result["n_bytes_copied"] > 0
    err = one_line_error(run("cp", local, dst), 1)
    assert "KeyExistsError" in err and "--if-exists skip" in err
    assert ok_json("cp", local, dst, "--if-exists", "skip")["n_skipped"] == 57
    assert ok_json("cp", local, dst, "--if-exists", "overwrite")["n_copied"] == 57
    assert ok_json("verify", dst, "--digest")["digests"] == ok_json("verify", local, "--digest")["digests"]


def test_cp_progress_bar(local: str, tmp_path: Path) -> None:
    proc = ok("cp", local, str(tmp_path / "copy.zarr"), "--progress")
    assert "57/57" in proc.stderr and "keys" in proc.stderr and "/s" in proc.stderr and "ETA" in proc.stderr
    quiet = ok("cp", local, str(tmp_path / "copy2.zarr"), "--progress", "-q")
    assert quiet.stderr == ""


def test_consolidate(local: str) -> None:
    dry = ok_json("consolidate", local, "--dry-run")
    assert dry["documents"] == [".zattrs", ".zgroup", "sub/.zgroup", "sub/b/.zarray", "t/.zarray"]
    assert not (Path(local) / ".zmetadata").exists()
    assert ok("consolidate", local).stdout.strip() == "wrote 5 documents to .zmetadata"

    async def reopen() -> list[str]:
        root = await azarr.open_consolidated(local)
        assert isinstance(root, azarr.AsyncGroup)
        return [name async for name, _ in root.members(None)]

    assert asyncio.run(reopen()) == ["sub", "sub/b", "t"]


# ---------------------------------------------------------------- verify
def test_verify_ok_with_digests(local: str) -> None:
    report = ok_json("verify", local, "--decode", "--digest")
    assert report["ok"] and report["problems"] == []
    assert (report["documents"], report["chunks"], report["decoded"]) == (5, 52, 52)
    assert report["arrays"] == ["sub/b", "t"] and report["groups"] == ["", "sub"]

    async def digests() -> dict[str, str]:
        return {
            p: await (await azarr.open_array(local, mode="r", path=p)).hexdigest() for p in ("sub/b", "t")
        }

    assert report["digests"] == asyncio.run(digests())
    assert ok("verify", local).stdout.splitlines()[-1].endswith(": ok")


def test_verify_finds_problems_exit_1(local: str) -> None:
    root = Path(local)
    (root / "t" / "3.1").write_bytes(b"not blosc")  # corrupt chunk
    (root / "t" / "10.0").write_bytes(b"x")  # outside the grid
    (root / "stray").write_bytes(b"x")  # under no array
    (root / "sub" / ".zgroup").write_text("{broken")
    proc = run("verify", local, "--decode", "--json")
    assert proc.returncode == 1
    problems = {p["key"]: p["error"] for p in json.loads(proc.stdout)["problems"]}
    assert set(problems) == {"t/3.1", "t/10.0", "stray", "sub/.zgroup"}
    assert problems["t/3.1"].startswith("CodecError") and "outside the chunk grid" in problems["t/10.0"]
    assert problems["sub/.zgroup"].startswith("MetadataError")
    text = run("verify", local)  # without --decode the corrupt chunk goes unnoticed
    assert text.returncode == 1 and "PROBLEM t/3.1" not in text.stdout and "PROBLEM stray" in text.stdout


def test_verify_against_source_finds_what_a_copy_lacks(local: str, tmp_path: Path) -> None:
    # In-process (click's runner: the same command objects, minus ~0.5-2 s of start-up a run).
    from click.testing import CliRunner

    from azarr.cli import cli

    def invoke(*args: str, code: int) -> str:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == code, (args, result.stdout, result.stderr)
        return result.stderr if code == 2 else result.stdout

    def verify(*args: str, code: int = 1) -> str:
        return invoke("verify", *args, code=code)

    dst = tmp_path / "copy.zarr"
    invoke("cp", local, str(dst), code=0)
    report = json.loads(verify(str(dst), "--against", local, "--json", code=0))
    assert report["ok"] and report["compared"] == 57 and report["against"] == local
    (dst / "t" / "3.1").unlink()  # missing
    (dst / "t" / "4.1").write_bytes((dst / "t" / "4.2").read_bytes())  # different bytes
    (dst / "sub" / "b" / "9").write_bytes(b"x")  # extra (and outside the grid)
    for args in ((local, str(dst), "--json"), (str(dst), "--against", local, "--json")):
        problems = {p["key"]: p["error"] for p in json.loads(verify(*args))["problems"]}
        assert problems["t/3.1"].startswith("missing") and problems["t/4.1"].startswith("differs")
        assert problems["sub/b/9"].startswith("extra") or "outside the chunk grid" in problems["sub/b/9"]
    text = verify(local, str(dst))
    assert "PROBLEM t/3.1: missing" in text and f"compared with {local}" in text
    assert "either as the first" in verify(local, str(dst), "--against", local, code=2)
    # A copy stopped before the groups' documents (azarr cp writes them last) fails without SRC too.
    (dst / ".zgroup").unlink()
    (dst / "sub" / ".zgroup").unlink()
    problems = {p["key"]: p["error"] for p in json.loads(verify(str(dst), "--json"))["problems"]}
    assert problems[".zgroup"].startswith("missing:") and "but its group '/' is not" in problems[".zgroup"]
    assert problems["sub/.zgroup"].startswith("missing: 'sub/b' is stored but its group 'sub' is not")


# ---------------------------------------------------------------- bench
def test_bench(local: str) -> None:
    result = ok_json("bench", local, "--seconds", "5")
    assert result["array"] == "/t" and result["chunks"] == 50 and result["complete"]
    assert result["bytes_decoded"] == 20000 and result["requests"] >= 50 and result["errors"] == 0
    assert "chunks/s" in ok("bench", local, "--path", "sub/b").stdout


# ---------------------------------------------------------------- S3 (SeaweedFS)
@pytest.mark.s3
def test_s3_commands(s3: str, seaweedfs: S3Server, local: str) -> None:
    opts = s3_args(seaweedfs)
    assert ok_json("info", s3, "--path", "t", *opts)["nchunks_initialized"] == 50
    assert ok("ls", s3, "-r", *opts).stdout.split() == ["sub/", "sub/b", "t"]
    got = ok_json("get", s3, "--path", "t", "--sel", "99,::25", *opts)
    assert got["data"] == DATA[99, ::25].tolist()
    # The same bytes as the local copy written the same way: the same digests.
    assert (
        ok_json("verify", s3, "--decode", "--digest", *opts)["digests"]
        == ok_json("verify", local, "--digest")["digests"]
    )


@pytest.mark.s3
def test_s3_missing_bucket_exit_1(seaweedfs: S3Server) -> None:
    err = one_line_error(run("info", "s3://no-such-bucket-cli/d.zarr", *s3_args(seaweedfs)), 1)
    assert err.count("\n") == 1 and "no-such-bucket-cli" in err and "bucket does not exist" in err


@pytest.mark.s3
def test_s3_bad_credentials_exit_1(s3: str, seaweedfs: S3Server) -> None:
    err = one_line_error(run("info", s3, *s3_args(seaweedfs, secret="wrong-secret")), 1)
    assert err.count("\n") == 1 and "PermissionDeniedError" in err and s3 in err
    assert "wrong-secret" not in err
    verbose = run("info", s3, "-v", *s3_args(seaweedfs, secret="wrong-secret"))
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr


@pytest.mark.s3
def test_s3_verify_corrupt_chunk(s3: str, seaweedfs: S3Server) -> None:
    bucket = s3.removeprefix("s3://").split("/")[0]
    seaweedfs.admin.put_object(Bucket=bucket, Key="d.zarr/t/0.4", Body=b"\x00" * 7)
    proc = run("verify", s3, "--decode", "--json", *s3_args(seaweedfs))
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert [p["key"] for p in problems] == ["t/0.4"] and "CodecError" in problems[0]["error"]


@pytest.mark.s3
def test_cp_resumes_after_kill(local: str, tmp_path: Path, seaweedfs: S3Server, s3_fault_proxy: Any) -> None:
    """Kill ``azarr cp`` half-way (SIGKILL), rerun with ``--if-exists skip``: the copy is bit-exact."""

    async def write_source() -> None:
        arr = await azarr.zeros((400,), chunks=(1,), dtype="i8", store=local, path="many")
        await arr.setitem(..., np.arange(400))

    asyncio.run(write_source())
    total = len([p for p in Path(local).rglob("*") if p.is_file()])
    bucket = seaweedfs.create_bucket()
    dst = f"s3://{bucket}/copy.zarr"
    # 20 ms each way and two requests in flight: ~450 keys take several seconds.
    s3_fault_proxy.configure(latency_ms=20)
    slow = [
        "--endpoint-url",
        s3_fault_proxy.url,
        "-S",
        f"key={seaweedfs.key}",
        "-S",
        f"secret={seaweedfs.secret}",
    ]
    proc = subprocess.Popen(
        [AZARR, "cp", local, dst, "--max-requests", "2", "-q", *slow],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "AWS_EC2_METADATA_DISABLED": "true"},
    )

    def count() -> int:
        pages = seaweedfs.admin.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return sum(page.get("KeyCount", 0) for page in pages)

    try:
        deadline = time.monotonic() + 60
        while count() < total // 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the copy finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stderr:
            proc.stderr.close()
    # PUTs already inside the delay proxy still reach the server after the client died: wait
    # until the bucket stops changing before counting what the first run left behind.
    done, previous = count(), -1
    while done != previous:
        time.sleep(0.5)
        done, previous = count(), done
    assert 0 < done < total
    s3_fault_proxy.reset()
    result = ok_json("cp", local, dst, "--if-exists", "skip", *s3_args(seaweedfs))
    assert result["n_skipped"] == done and result["n_copied"] == total - done
    src_digests = ok_json("verify", local, "--digest")["digests"]
    assert ok_json("verify", dst, "--digest", *s3_args(seaweedfs))["digests"] == src_digests


def test_verify_finds_stale_consolidated_metadata(local: str) -> None:
    ok("consolidate", local)
    assert ok_json("verify", local)["ok"]
    (Path(local) / "t" / ".zattrs").write_text('{"added": "after consolidating"}')
    proc = run("verify", local, "--json")
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert problems == [
        {"key": ".zmetadata", "error": "stale: 't/.zattrs' is not in it (run 'azarr consolidate')"}
    ]
    ok("consolidate", local)
    assert ok_json("verify", local)["ok"]


@pytest.mark.gcs
def test_gcs_anon_and_endpoint(local: str, fake_gcs: Any, gcs_bucket: str) -> None:
    """``--anon --endpoint-url`` become gcsfs's ``token="anon"`` and ``endpoint_url``."""
    dst = f"gs://{gcs_bucket}/d.zarr"
    gcs = ["--anon", "--endpoint-url", fake_gcs.endpoint_url]
    assert ok_json("cp", local, dst, *gcs)["n_copied"] == 57
    assert ok("tree", dst, *gcs).stdout == ok("tree", local).stdout
    assert ok_json("get", dst, "--path", "sub/b", "--sel", ":", *gcs)["data"] == [1, 2, 3, 4, 0, 0, 0]


@pytest.mark.http
def test_http_read_only(local: str, http_server: Any) -> None:
    site = http_server.root / f"cli-{os.getpid()}-{time.monotonic_ns()}.zarr"
    shutil.copytree(local, site)
    ok("consolidate", str(site))
    url = f"{http_server.url}/{site.name}"
    assert ok_json("info", url, "--path", "t")["nchunks_initialized"] == 50  # from the server's HTML index
    assert ok_json("get", url, "--path", "t", "--sel", "1,0:2")["data"] == [50.0, 51.0]
    assert "ReadOnlyError" in one_line_error(run("consolidate", url), 1)


@pytest.mark.s3
def test_s3_json_storage_options(s3: str, seaweedfs: S3Server) -> None:
    """``-S`` values parse as JSON (objects, numbers, booleans) and reach s3fs unchanged."""
    opts = [*s3_args(seaweedfs), "-S", 'config_kwargs={"max_pool_connections": 4}', "-S", "use_ssl=false"]
    assert ok("ls", s3, *opts).stdout.split() == ["sub/", "t"]


def test_verify_broken_array_metadata_is_one_problem(local: str) -> None:
    (Path(local) / "t" / ".zarray").write_text('{"zarr_format": 2, "shape": "wide"}')
    proc = run("verify", local, "--json")
    assert proc.returncode == 1
    problems = json.loads(proc.stdout)["problems"]
    assert [p["key"] for p in problems] == ["t/.zarray"]  # not 50 more for its chunks
    assert problems[0]["error"].startswith("MetadataError")


def test_without_the_cli_extra_says_what_to_install() -> None:
    code = "import sys; sys.modules['click'] = None; from azarr.cli import main; main()"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (
        proc.returncode == 1 and "pip install 'azarr[cli]'" in proc.stderr and "Traceback" not in proc.stderr
    )


def test_import_loads_no_cloud_sdk() -> None:
    """``import azarr`` (and the CLI module) leaves botocore, s3fs and friends unloaded.

    botocore alone was ~30 % of ``import azarr`` (0.2-0.5 s), paid by every CLI command and
    every worker process, most of which never touch S3. They load with the first store that
    needs them.
    """
    sdks = ("botocore", "aiobotocore", "s3fs", "gcsfs", "adlfs", "fsspec", "aiohttp", "icechunk")
    code = f"import sys, azarr, azarr.cli; print(sorted(m for m in {sdks!r} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.http
def test_password_in_url_is_not_printed(local: str, http_server: Any) -> None:
    site = http_server.root / f"cli-pw-{os.getpid()}-{time.monotonic_ns()}.zarr"
    shutil.copytree(local, site)
    url = http_server.url.replace("http://", "http://reader:hunter2@") + f"/{site.name}"
    proc = run("info", url, "--path", "t", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "hunter2" not in proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["url"].startswith("http://reader:***@")
    failed = run("info", url, "--path", "no-such-array")
    assert failed.returncode == 1 and "hunter2" not in failed.stderr


def test_cp_exclude(local: str, tmp_path: Path) -> None:
    dst = str(tmp_path / "partial.zarr")
    result = ok_json("cp", local, dst, "--exclude", r"^t/[1-9]", "--exclude", "^sub/")
    assert result["n_copied"] == 3 + 5  # .zgroup, .zattrs, t/.zarray and chunks t/0.0 .. t/0.4
    assert sorted(p.name for p in (Path(dst) / "t").iterdir()) == [
        ".zarray",
        "0.0",
        "0.1",
        "0.2",
        "0.3",
        "0.4",
    ]
    assert not (Path(dst) / "sub").exists()
    assert "--exclude" in one_line_error(run("cp", local, dst, "--exclude", "(", "--if-exists", "skip"), 2)
