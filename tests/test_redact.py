"""Secrets never shown: azarr.storage._redact."""

from __future__ import annotations

from azarr.storage._redact import REDACTED, redact_options, redact_url


def test_redact_url_hides_userinfo() -> None:
    assert (
        redact_url("https://user:pw@example.org:8443/x.zarr") == f"https://{REDACTED}@example.org:8443/x.zarr"
    )
    assert redact_url("http://token@[::1]/a") == f"http://{REDACTED}@[::1]/a"
    assert redact_url("s3://bucket/x") == "s3://bucket/x"
    assert redact_url("/tmp/a@b") == "/tmp/a@b"


def test_redact_options_nested() -> None:
    options = {
        "key": "AKIA",
        "secret": "s3cr3t",
        "anon": False,
        "endpoint_url": "http://u:p@127.0.0.1:9000",
        "client_kwargs": {"region_name": "eu-west-1", "aws_session_token": "SESSIONXYZ"},
        "headers": {"Authorization": "Bearer x"},
        "token": None,
    }
    shown = redact_options(options)
    text = repr(shown)
    for secret in ("AKIA", "s3cr3t", "SESSIONXYZ", "Bearer", ":p@"):
        assert secret not in text
    assert shown["client_kwargs"]["region_name"] == "eu-west-1"
    assert shown["anon"] is False and shown["token"] is None
