"""Azurite (Microsoft's Azure Storage emulator, the ``azurite`` npm package) for the tests.

`ensure_azurite` installs the pinned version with ``npm install --prefix`` into
``<repo>/.cache/azurite-<version>`` once (under a ``flock``: parallel sessions install it
once), and `start_azurite` runs its blob service on a free 127.0.0.1 port, in memory,
stopped by PID like the other test servers. node and npm come with the machine.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import ServerProcess, free_port

VERSION = "3.35.0"
REPO_ROOT = Path(__file__).resolve().parent.parent
PREFIX = REPO_ROOT / ".cache" / f"azurite-{VERSION}"
#: Azurite's well-known development account (public, documented by Microsoft).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def ensure_azurite() -> Path:
    """The ``azurite-blob`` launcher, installing the pinned package on first use."""
    binary = PREFIX / "node_modules" / ".bin" / "azurite-blob"
    PREFIX.mkdir(parents=True, exist_ok=True)
    with (PREFIX.parent / f".azurite-{VERSION}.lock").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("npm is not on PATH: it installs Azurite for the Azure tests")
            proc = subprocess.run(
                [npm, "install", "--prefix", str(PREFIX), f"azurite@{VERSION}", "--no-audit", "--no-fund",
                 "--loglevel=error"],
                capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            if proc.returncode != 0 or not binary.exists():
                raise RuntimeError(f"npm install azurite@{VERSION} failed:\n{proc.stdout}\n{proc.stderr}")
    return binary


@dataclass
class AzuriteServer:
    """A running Azurite blob service: ``account_url``, credentials, ``create_container()``."""

    account_url: str
    process: ServerProcess
    workdir: Path
    name: str = "azurite"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint={self.account_url};"
        )

    @property
    def storage_options(self) -> dict[str, Any]:
        """``AzureBlobStore`` options: the account key against this endpoint."""
        return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY, "account_url": self.account_url}

    def create_container(self, name: str | None = None, *, public: bool = False) -> str:
        """A new container (a fresh name unless given); ``public``: anonymous reads allowed."""
        from azure.storage.blob import BlobServiceClient

        name = name or f"c{time.monotonic_ns()}"
        with BlobServiceClient.from_connection_string(self.connection_string) as service:
            service.create_container(name, public_access="container" if public else None)
        return name

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_azurite() -> AzuriteServer:
    """Start Azurite's blob service in memory on a free port; return once it answers (~1 s)."""
    binary = ensure_azurite()
    workdir = Path(tempfile.mkdtemp(prefix="azarr-azurite-"))
    port = free_port()
    argv = [
        str(binary),
        "--blobHost", "127.0.0.1",
        "--blobPort", str(port),
        "--inMemoryPersistence",
        "--skipApiVersionCheck",
        "--disableTelemetry",
        "--silent",
    ]  # fmt: skip
    process = ServerProcess("azurite", argv, workdir)
    process.start()
    url = f"http://127.0.0.1:{port}/{ACCOUNT}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}?comp=list", timeout=2)
            break
        except urllib.error.HTTPError:
            break  # it answers (403 without a signature): up
        except OSError:
            if not process.alive() or time.monotonic() > deadline:
                process.stop()
                raise RuntimeError(f"Azurite did not start:\n{process.log_tail()}") from None
            time.sleep(0.1)
    return AzuriteServer(url, process, workdir)
