"""Secrets never leave: errors, chained reprs, CLI output at every verbosity, service responses.

The suite-wide check (every expected exception, log record and captured output
against the planted credentials) is ``tests/secret_scan.py``; these tests drive
the places it cannot see by itself.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from secret_scan import PLANTED, check_exception, planted_in
from servers import HostileServer

from azarr.errors import AzarrError, StoreError
from azarr.service import http_error_for
from azarr.storage import HTTPStore, S3Store
from azarr.storage._redact import RedactingFilter, redact_text, scrub_exception

pytestmark = pytest.mark.timeout(120)

PASSWORD = "azarr-planted-url-password"
TOKEN = "azarr-planted-session-token"
AZARR = str(Path(sys.executable).with_name("azarr"))


def test_the_scanner_finds_planted_values() -> None:
    try:
        check_exception(ValueError(f"http://u:{PASSWORD}@h/"), "a test")
    except AssertionError as exc:
        assert "<PLANTED:5>" in str(exc) and PASSWORD not in str(exc)
    else:
        raise AssertionError("the scanner missed a planted password")
    assert planted_in("x azarr-test-secret y") == ["azarr-test-secret"]


def _s3_with_password(server: HostileServer, case: dict[str, object]) -> S3Store:
    endpoint = server.url.replace("http://", f"http://user:{PASSWORD}@")
    options = server.s3_options(endpoint_url=endpoint)
    return S3Store(server.s3_root(case), storage_options=options)


@pytest.mark.parametrize("status", [403, 500])
async def test_s3_errors_name_no_password_token_or_signature(
    hostile_server: HostileServer, status: int
) -> None:
    store = _s3_with_password(hostile_server, {"status": status})
    try:
        with pytest.raises(AzarrError) as info:
            await store.get("k")
    finally:
        await store.close()
    text = "".join(traceback.format_exception(info.value)) + repr(info.value)
    assert not planted_in(text), text
    assert "Signature=" not in text or "Signature=***" in text
    assert "127.0.0.1" in str(info.value)  # still says where


async def test_http_url_password_never_shown(hostile_server: HostileServer) -> None:
    with pytest.raises(ValueError) as info:
        HTTPStore(f"http://user:{PASSWORD}@127.0.0.1:1/x?query=1")
    assert PASSWORD not in str(info.value)
    store = HTTPStore(
        hostile_server.http_root({"status": 403}).replace("http://", f"http://user:{PASSWORD}@")
    )
    try:
        with pytest.raises(StoreError):
            await store.get("k")
    finally:
        await store.close()


def test_chained_aiohttp_error_keeps_no_signed_headers() -> None:
    import aiohttp
    from multidict import CIMultiDict, CIMultiDictProxy
    from yarl import URL

    headers = CIMultiDictProxy(
        CIMultiDict(
            {"Authorization": "AWS4-HMAC-SHA256 Credential=azarr-test-key/x", "x-amz-security-token": TOKEN}
        )
    )
    info = aiohttp.RequestInfo(URL(f"http://u:{PASSWORD}@h/k?X-Amz-Signature=abc"), "GET", headers)
    cause = aiohttp.ClientResponseError(info, (), status=400, message="bad", headers=headers)
    try:
        try:
            raise cause
        except aiohttp.ClientError as exc:
            from azarr.storage._errors import translate_error

            raise translate_error(exc, "get", "k", "s3://b") from exc
    except StoreError as err:
        check_exception(err, "a translated aiohttp error")
        assert "status=400" in repr(err.__cause__) or "400" in str(err.__cause__)


def test_redacting_filter_cleans_third_party_records() -> None:
    record = logging.LogRecord(
        "botocore.endpoint",
        logging.DEBUG,
        __file__,
        1,
        "headers: %s",
        ({"x-amz-security-token": TOKEN},),
        None,
    )
    assert RedactingFilter().filter(record)
    assert TOKEN not in record.getMessage()
    assert redact_text(f"Authorization: Bearer {PLANTED[4]}") == "Authorization: ***"
    err = RuntimeError(f"GET https://h/k?X-Amz-Security-Token={TOKEN}&a=1")
    assert TOKEN not in str(scrub_exception(err))


@pytest.mark.parametrize("verbosity", ["", "-v", "-vv", "-vvv"])
def test_cli_output_has_no_secret_at_any_verbosity(hostile_server: HostileServer, verbosity: str) -> None:
    endpoint = hostile_server.url.replace("http://", f"http://user:{PASSWORD}@")
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "azarr-test-key",
        "AWS_SECRET_ACCESS_KEY": "azarr-test-secret",
        "AWS_SESSION_TOKEN": TOKEN,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    argv = [
        AZARR,
        "info",
        *([verbosity] if verbosity else []),
        f"s3://{hostile_server.s3_root({'status': 403})}",
    ]
    argv += ["--endpoint-url", endpoint]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "azarr: error:" in output, output[-2000:]
    assert not planted_in(output), output[-4000:]
    assert "Signature=" not in output or "Signature=***" in output


async def test_service_error_names_no_endpoint(hostile_server: HostileServer) -> None:
    store = _s3_with_password(hostile_server, {"status": 403})
    try:
        with pytest.raises(AzarrError) as info:
            await store.get("a/0.0")
    finally:
        await store.close()
    error = http_error_for(info.value)
    assert error.status == 502
    assert "127.0.0.1" not in error.detail and "<store>" in error.detail and not planted_in(error.detail)
    assert "'a/0.0'" in error.detail  # which key failed is still said
