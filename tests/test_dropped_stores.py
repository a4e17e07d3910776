"""A store dropped without ``close()`` closes its per-loop sessions, and says nothing.

Services open stores by URL per request and let them go; the per-loop filesystem
behind a store's listings (s3fs, gcsfs) must then be closed on its own loop -- and
without aiohttp logging "Unclosed client session" for it: a store is a reference
cycle, so the collector used to finalize that session in the same pass as the hook
that was about to close it (``azarr/storage/_loops.py``, ``_owner_dropped``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import aiohttp
import pytest
from servers import GCSServer, S3Server

from azarr.storage import GCSStore, S3Store, Store


def _open_botocore_sessions() -> int:
    """aiohttp sessions of aiobotocore clients (s3fs) that are still open."""
    return sum(
        1
        for obj in gc.get_objects()
        if type(obj) is aiohttp.ClientSession
        and not obj.closed
        and type(obj.connector).__module__.startswith("aiobotocore")
    )


@pytest.mark.parametrize(
    "kind", [pytest.param("s3", marks=pytest.mark.s3), pytest.param("gcs", marks=pytest.mark.gcs)]
)
async def test_a_dropped_store_closes_its_listing_session_quietly(
    kind: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    store: Store
    if kind == "s3":
        server: S3Server = request.getfixturevalue("seaweedfs")
        bucket: str = request.getfixturevalue("s3_bucket")
        store = S3Store(f"{bucket}/dropped", storage_options=server.storage_options)
    else:
        gcs: GCSServer = request.getfixturevalue("fake_gcs")
        gcs_bucket: str = request.getfixturevalue("gcs_bucket")
        store = GCSStore(f"{gcs_bucket}/dropped", storage_options=gcs.storage_options)
    await store.set("a", b"1")
    assert [k async for k in store.list_prefix("")] == ["a"]  # the per-loop s3fs / gcsfs client
    before = _open_botocore_sessions()
    caplog.set_level(logging.WARNING, logger="asyncio")

    del store
    gc.collect()
    for _ in range(10):  # the close runs on this loop
        await asyncio.sleep(0.01)
    gc.collect()

    unclosed: list[Any] = [r.getMessage() for r in caplog.records if "Unclosed" in r.getMessage()]
    assert unclosed == []
    if kind == "s3":
        assert _open_botocore_sessions() == before - 1
