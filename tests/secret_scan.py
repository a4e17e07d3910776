"""A pytest plugin: no planted credential ever shows in an exception, a log record or captured output.

The fixtures use credentials from `PLANTED` (SeaweedFS's key and secret, the HTTP
test server's basic-auth password and bearer token, the hostile server's planted
session token and URL password). Across the whole suite, at no extra request:

* every exception a test expects with ``pytest.raises`` is checked -- ``str``,
  ``repr`` and the printed traceback of it and of every exception chained to it;
* every log record captured during a test (azarr's loggers at DEBUG, others at
  their levels) is checked, message and traceback;
* captured stdout/stderr of every test is checked.

A planted value found anywhere fails the test that leaked it, naming where.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from typing import Any

import pytest
from _pytest.logging import caplog_records_key

#: Credentials the fixtures use; none may appear in anything azarr shows.
PLANTED = (
    "azarr-test-key",  # SeaweedFS / hostile server S3 access key id
    "azarr-test-secret",  # SeaweedFS / hostile server S3 secret key
    "azarr-planted-session-token",  # S3 session token (hostile server, moto)
    "azarr-secret",  # the HTTP server's basic-auth password (in URLs: user:azarr-secret@)
    "azarr-test-token",  # the HTTP server's bearer token
    "azarr-planted-url-password",  # a password in an endpoint URL
    "azarr-planted-gcs-token",  # a GCS OAuth token
)


def planted_in(text: str) -> list[str]:
    """The planted credentials found in ``text``."""
    return [secret for secret in PLANTED if secret in text]


def exception_texts(exc: BaseException) -> Iterator[str]:
    """``str``, ``repr`` and the formatted traceback of ``exc`` and its chain."""
    yield "".join(traceback.format_exception(exc))
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            yield repr(current)
            yield str(current)
        except Exception:  # an exception whose repr fails is itself a bug, but not this one
            pass
        current = current.__cause__ or current.__context__


def check_exception(exc: BaseException, where: str) -> None:
    for text in exception_texts(exc):
        found = planted_in(text)
        if found:
            raise AssertionError(f"planted credential leaked in {where}: {_marked(text)[:2000]}")


def _marked(text: str) -> str:
    """``text`` with each planted value shown as ``<PLANTED:n>`` (the report must not leak either)."""
    for number, secret in enumerate(PLANTED):
        text = text.replace(secret, f"<PLANTED:{number}>")
    return text


class _ScanningRaises:
    """``pytest.raises`` as a context manager, checking the exception it caught."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __enter__(self) -> Any:
        return self._inner.__enter__()

    def __exit__(self, kind: Any, value: BaseException | None, tb: Any) -> Any:
        suppressed = self._inner.__exit__(kind, value, tb)
        if value is not None and suppressed:
            check_exception(value, f"an exception caught by pytest.raises ({type(value).__name__})")
        return suppressed


_real_raises = pytest.raises


def _scanning_raises(*args: Any, **kwargs: Any) -> Any:
    if len(args) > 1 or "func" in kwargs:  # the call form: pytest.raises(E, fn, *args)
        return _real_raises(*args, **kwargs)
    return _ScanningRaises(_real_raises(*args, **kwargs))


def pytest_configure(config: pytest.Config) -> None:
    pytest.raises = _scanning_raises  # type: ignore[assignment]
    # azarr's own records at every level reach the capture handler (they are few).
    logging.getLogger("azarr").setLevel(logging.DEBUG)


def pytest_unconfigure(config: pytest.Config) -> None:
    pytest.raises = _real_raises


def _record_text(record: logging.LogRecord) -> str:
    try:
        text = record.getMessage()
    except Exception:
        text = str(record.msg)
    if record.exc_info and record.exc_info[1] is not None:
        text += "".join(traceback.format_exception(record.exc_info[1]))
    return text


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    leaks: list[str] = []
    records = item.stash.get(caplog_records_key, {}).get(call.when, [])
    for record in records:
        text = _record_text(record)
        if planted_in(text):
            leaks.append(f"log record of {record.name!r} ({record.levelname}): {_marked(text)[:2000]}")
    for title, text in report.sections:
        if planted_in(text):
            leaks.append(f"{title}: {_marked(text)[-2000:]}")
    if leaks and report.outcome != "failed":
        report.outcome = "failed"
        report.longrepr = "planted credentials leaked:\n" + "\n".join(leaks)
