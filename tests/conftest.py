"""Shared fixtures: real S3 servers (started lazily) and fresh stores of every kind.

Fixtures
--------
seaweedfs (session)
    A ``weed mini`` S3 endpoint enforcing signatures: ``.endpoint_url``, ``.key``,
    ``.secret``, ``.storage_options`` (for ``S3Store``), ``.create_bucket()``.
moto_server (session)
    The same shape on moto (which does not check signatures).
azurite (session)
    Azurite's blob service (npm, in memory): ``.account_url``, ``.storage_options``
    (account key), ``.connection_string``, ``.create_container()``.
fake_gcs (session)
    fake-gcs-server (in memory): ``.endpoint_url``, ``.storage_options`` (for
    ``GCSStore``: anonymous token + endpoint), ``.create_bucket()``, ``.filesystem()``.
gcs_bucket (function)
    A fresh, empty bucket name on ``fake_gcs``.
http_server (session)
    An aiohttp static-file server subprocess (Range, HTML indexes, fault-injection
    paths; see tests/http_server.py): ``.url``, ``.root`` (the served directory).
s3_bucket (function)
    A fresh, empty bucket name on ``seaweedfs``.
store_factory (function; params "memory", "local", "s3")
    ``make() -> Store``: a fresh, empty store of that kind each call (a plain callable:
    building a store does no I/O, so it serves sync and async tests alike). Stores it
    made are closed at teardown. The "s3" param is marked ``s3`` and uses SeaweedFS.
store (function; same params)
    One fresh store from ``store_factory``.

Servers start only when an S3 fixture is requested, so ``-m "not s3"`` runs without
them. A missing server binary fails the tests (no skip): CI must run them.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # make tests/servers.py importable as "servers"

from servers import (
    GCSServer,
    HostileServer,
    HTTPServer,
    S3Server,
    start_fake_gcs,
    start_hostile_server,
    start_http_server,
    start_moto,
    start_seaweedfs,
    tls_material,
)

from azarr.storage import GCSStore, LocalStore, MemoryStore, S3Store, Store

# botocore must never probe the EC2 metadata service (seconds per client off EC2).
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

STORE_KINDS = [
    "memory",
    "local",
    pytest.param("s3", marks=pytest.mark.s3),
    pytest.param("gcs", marks=pytest.mark.gcs),
]

StoreFactory = Callable[[], Store]


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throw-away test CA and a certificate for 127.0.0.1: PEM paths ``ca``, ``cert``, ``key``."""
    return tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="session")
def seaweedfs(tls_files: dict[str, str]) -> Iterator[S3Server]:
    """SeaweedFS ``weed mini`` on free 127.0.0.1 ports, with signature checking; its S3
    gateway also serves HTTPS (``https_endpoint_url``) with the certificate of ``tls_files``."""
    server = start_seaweedfs(tls=(tls_files["cert"], tls_files["key"]))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def moto_server() -> Iterator[S3Server]:
    """A moto S3 server subprocess on a free 127.0.0.1 port (signatures not checked)."""
    server = start_moto()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def fake_gcs() -> Iterator[GCSServer]:
    """fake-gcs-server (memory backend) on a free 127.0.0.1 port."""
    server = start_fake_gcs()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def gcs_bucket(fake_gcs: GCSServer) -> str:
    """A new bucket on fake-gcs-server, unique to the test."""
    return fake_gcs.create_bucket()


@pytest.fixture(scope="session")
def azurite() -> Iterator[Any]:
    """Azurite's blob service (installed from npm into .cache/ on first use; see tests/azurite.py)."""
    from azurite import start_azurite

    server = start_azurite()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def http_server() -> Iterator[HTTPServer]:
    """The static-file server (tests/http_server.py) on a free 127.0.0.1 port."""
    server = start_http_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def hostile_server() -> Iterator[HostileServer]:
    """The hostile HTTP/S3 server (tests/hostile_server.py) on a free 127.0.0.1 port."""
    server = start_hostile_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(seaweedfs: S3Server) -> str:
    """A new bucket on SeaweedFS, unique to the test."""
    return seaweedfs.create_bucket()


def _counted(build: Callable[[int], Store], closing: Callable[[Store], Any]) -> StoreFactory:
    """``make() -> build(0), build(1), ...``, each store closed at teardown by ``closing``."""
    counter = itertools.count()
    return lambda: closing(build(next(counter)))


@pytest.fixture(params=STORE_KINDS)
def store_factory(
    request: pytest.FixtureRequest, tmp_path: Path, closing: Callable[[Store], Any]
) -> StoreFactory:
    """``make() -> Store``: fresh empty stores of the parametrized kind, closed at teardown."""
    kind: str = request.param
    if kind == "memory":
        return _counted(lambda i: MemoryStore(), closing)
    if kind == "local":
        return _counted(lambda i: LocalStore(tmp_path / f"store-{i}"), closing)
    if kind == "s3":
        server: S3Server = request.getfixturevalue("seaweedfs")
        bucket: str = request.getfixturevalue("s3_bucket")
        return _counted(
            lambda i: S3Store(f"{bucket}/store-{i}", storage_options=server.storage_options), closing
        )
    if kind == "gcs":
        gcs: GCSServer = request.getfixturevalue("fake_gcs")
        gcs_bucket: str = request.getfixturevalue("gcs_bucket")
        return _counted(
            lambda i: GCSStore(f"{gcs_bucket}/store-{i}", storage_options=gcs.storage_options), closing
        )
    raise AssertionError(kind)  # pragma: no cover


@pytest.fixture
async def closing() -> AsyncIterator[Callable[[Store], Any]]:
    """``closing(store) -> store``: closed at teardown (on the test's loop)."""
    stores: list[Store] = []

    def track(store: Store) -> Any:
        stores.append(store)
        return store

    yield track
    for store in stores:
        await store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """One fresh, empty store of the parametrized kind."""
    return store_factory()


# Fault-injection proxies in front of SeaweedFS and fake-gcs-server (tests/fault_proxy.py).
from fault_proxy import (  # noqa: E402, F401
    fault_proxy_factory,
    gcs_fault_proxy,
    gcs_fault_proxy_server,
    s3_fault_proxy,
    s3_fault_proxy_server,
)

# No planted credential in any exception, log record or captured output (tests/secret_scan.py).
from secret_scan import (  # noqa: E402, F401
    pytest_configure,
    pytest_runtest_makereport,
    pytest_unconfigure,
)
