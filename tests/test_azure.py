"""AzureBlobStore against Azurite: the conformance suite, credentials (account key, SAS,
anonymous, connection string), conditional writes and arrays end to end."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

import azarr
from azarr.errors import PermissionDeniedError, PreconditionFailedError, StoreUnavailableError
from azarr.storage import Store, StoreSpec
from azarr.storage._azure import AzureBlobStore
from azarr.testing.store import StoreTests

pytestmark = pytest.mark.azure


class TestAzureBlobStore(StoreTests):
    @pytest.fixture(scope="class")
    @classmethod
    def container(cls, azurite: Any) -> str:
        return str(azurite.create_container())

    @pytest.fixture
    def make_store(
        self, azurite: Any, container: str, closing: Callable[[Store], Any]
    ) -> Callable[[], Store]:
        return lambda: closing(
            AzureBlobStore(f"{container}/store-{uuid.uuid4().hex}", storage_options=azurite.storage_options)
        )

    def reopen(self, store: Store, *, read_only: bool) -> Store:
        assert isinstance(store, AzureBlobStore)
        return AzureBlobStore(
            f"{store.container}/{store.prefix}",
            storage_options=store.spec.storage_options(),
            read_only=read_only,
        )


def _sas(azurite: Any, container: str, **permissions: bool) -> str:
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas
    from azurite import ACCOUNT, ACCOUNT_KEY

    return generate_container_sas(
        ACCOUNT,
        container,
        account_key=ACCOUNT_KEY,
        permission=ContainerSasPermissions(**permissions),
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )


async def test_urls_credentials_and_errors(azurite: Any) -> None:
    container = azurite.create_container()
    url = f"az://{container}/data.zarr"
    store = azarr.storage.from_url(url, storage_options=azurite.storage_options)
    assert isinstance(store, AzureBlobStore) and store.spec == StoreSpec.from_url(
        f"abfs://{container}/data.zarr", storage_options=azurite.storage_options
    )
    assert "Eby8" not in repr(store.spec)
    arr = await azarr.create((40, 30), chunks=(16, 16), dtype="<f4", store=store, overwrite=True)
    values = np.arange(1200, dtype="<f4").reshape(40, 30)
    await arr.setitem(..., values)
    # A SAS token that may read and list, but not write.
    sas = _sas(azurite, container, read=True, list=True)
    reader = AzureBlobStore(url, storage_options={"account_url": azurite.account_url, "sas_token": sas})
    got = await (await azarr.open_array(reader, mode="r")).getitem(...)
    np.testing.assert_array_equal(got, values)
    with pytest.raises(PermissionDeniedError, match="HTTP 403") as info:
        await reader.set("x", b"v")
    assert sas not in str(info.value) and "sig=" not in str(info.value)
    # Connection string; anonymous on a private container is refused, on a public one reads.
    by_string = AzureBlobStore(url, storage_options={"connection_string": azurite.connection_string})
    assert await by_string.get(".zarray") == await store.get(".zarray")
    anon = AzureBlobStore(url, storage_options={"account_url": azurite.account_url, "anon": True})
    with pytest.raises((PermissionDeniedError, StoreUnavailableError)):
        await anon.get(".zarray")
    public = azurite.create_container(public=True)
    await AzureBlobStore(public, storage_options=azurite.storage_options).set("k", b"open")
    assert (
        await AzureBlobStore(public, storage_options={"account_url": azurite.account_url, "anon": True}).get(
            "k"
        )
        == b"open"
    )
    missing = AzureBlobStore("no-such-container/x", storage_options=azurite.storage_options)
    with pytest.raises(StoreUnavailableError, match="container does not exist"):
        await missing.set("k", b"v")
    for s in (store, reader, by_string, anon, missing):
        await s.close()


async def test_conditional_writes_race_to_one_winner(azurite: Any) -> None:
    container = azurite.create_container()
    store = AzureBlobStore(container, storage_options=azurite.storage_options)
    await store.set("k", b"0")
    _, generation = await store.get_with_generation("k")

    async def attempt(i: int) -> bool:
        try:
            await store.set("k", str(i).encode(), if_generation_match=generation)
        except PreconditionFailedError:
            return False
        return True

    results = await asyncio.gather(*(attempt(i) for i in range(8)))
    assert sum(results) == 1

    async def create(i: int) -> bool:
        try:
            await store.set("new", str(i).encode(), if_not_exists=True)
        except PreconditionFailedError:
            return False
        return True

    assert sum(await asyncio.gather(*(create(i) for i in range(8)))) == 1
    await store.close()
