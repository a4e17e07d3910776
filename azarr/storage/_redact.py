"""Keeping secrets out of ``repr``, error messages and logs.

Store configuration carries credentials (``storage_options`` keys such as
``secret`` or ``token``, ``Authorization`` headers, passwords in endpoint URLs).
Everything that renders configuration for people -- a store's or a store
spec's ``repr``, an error message, a log line -- goes through these helpers,
so a credential never leaves the process except where the user sent it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "is_secret_name", "redact_options", "redact_url"]

#: What a secret value is shown as.
REDACTED = "***"

# Option names (compared case-insensitively, '-' read as '_') whose values are
# credentials in s3fs, gcsfs, adlfs, aiohttp, botocore and HTTP headers.
_SECRET_NAMES = frozenset(
    {
        "secret",
        "key",
        "token",
        "password",
        "passwd",
        "session_token",
        "security_token",
        "aws_secret_access_key",
        "aws_access_key_id",
        "aws_session_token",
        "secret_access_key",
        "access_key",
        "access_key_id",
        "account_key",
        "sas_token",
        "connection_string",
        "credential",
        "credentials",
        "client_secret",
        "authorization",
        "proxy_authorization",
        "cookie",
        "x_amz_security_token",
        "x_api_key",
        "api_key",
        "auth",
        "headers",  # may hold Authorization; shown by name only
    }
)


def is_secret_name(name: str) -> bool:
    """True if an option or header called ``name`` holds a credential (case-insensitive)."""
    return name.lower().replace("-", "_") in _SECRET_NAMES


def redact_url(url: str) -> str:
    """``url`` with any user info (``user:password@``) replaced by ``***@``.

    Query strings are kept: a store URL has none (signed URLs are not store
    roots). Non-URL strings (local paths) are returned unchanged.
    """
    if "@" not in url or "://" not in url:
        return url
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = f"{REDACTED}@{host}" + (f":{parts.port}" if parts.port is not None else "")
    return urlunsplit(parts._replace(netloc=netloc))


def redact_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` fit to show: secret values replaced, nested mappings and URLs redacted.

    Parameters
    ----------
    options : Mapping
        ``storage_options`` as given (nested ``client_kwargs``/``config_kwargs`` dicts included).

    Returns
    -------
    dict
        The same keys; values of secret-named keys (`is_secret_name`) are
        ``"***"``, strings containing URLs have their user info removed.
    """
    return {name: _redact_value(name, value) for name, value in options.items()}


def _redact_value(name: str, value: Any) -> Any:
    if is_secret_name(str(name)) and value not in (None, False, ""):
        return REDACTED
    if isinstance(value, Mapping):
        return redact_options(value)
    if isinstance(value, str):
        return redact_url(value)
    if isinstance(value, list | tuple):
        return type(value)(_redact_value("", v) for v in value)
    return value
