"""Keeping secrets out of ``repr``, error messages and logs.

Store configuration carries credentials (``storage_options`` keys such as
``secret`` or ``token``, ``Authorization`` headers, passwords in endpoint URLs).
Everything that renders configuration for people -- a store's or a store
spec's ``repr``, an error message, a log line -- goes through these helpers,
so a credential never leaves the process except where the user sent it.

Text azarr did not build (a backend's exception message, the repr of an
aiohttp error chained under an azarr error, a third-party log record) goes
through `redact_text`: one pass that removes what a credential looks like
(URL user info, ``Authorization``/signed/token headers and their values in
dict reprs, SigV4 ``Credential=``/``Signature=``, query-string signatures and
tokens, ``Bearer`` tokens) and every credential value a store of this process
was given (`remember_secrets`, called by `StoreSpec`). `AzarrError`'s
constructor applies it to every message; `scrub_exception` applies it to the
chained backend errors azarr re-raises; the CLI's log handler applies it to
every record (`RedactingFilter`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "RedactingFilter",
    "is_secret_name",
    "redact_options",
    "redact_text",
    "redact_url",
    "remember_options",
    "remember_secrets",
    "scrub_exception",
]

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


# ---------------------------------------------------------------------- free text
# Values shorter than this are not remembered: replacing every "abc" in every message
# would mangle text, and a secret that short is no secret.
_MIN_SECRET_LENGTH = 6
_SECRETS: set[str] = set()
_SECRETS_LOCK = threading.Lock()
_SECRETS_SORTED: tuple[str, ...] = ()

# URL user info: "scheme://user:pass@host" in any URL, "scheme://token@host" in URLs of
# network schemes (other schemes use "@" otherwise: "mapping://module.Class@7fa4...").
_URL_USERINFO = re.compile(
    r"(?P<scheme>\b(?:(?:https?|wss?|s3a?|gs|gcs|abfss?|az|adl|ftp|sftp|ssh|rediss?)://"
    r"(?=[^/\s@'\"<>]+@)|[a-zA-Z][a-zA-Z0-9+.-]*://(?=[^/\s@'\"<>:]*:[^/\s@'\"<>]*@)))[^/\s@'\"<>]+@"
)
# "Name: value" / "'name': 'value'" / "name=value" for header, option and query names
# that carry credentials (dict reprs, header dumps, query strings, botocore logs).
_SECRET_FIELD = (
    r"authorization|proxy-authorization|x-amz-security-token|x-amz-signature|x-amz-credential"
    r"|x-goog-signature|x-goog-credential|x-api-key|api[_-]?key|access[_-]?token|refresh[_-]?token"
    r"|id[_-]?token|client[_-]?secret|session[_-]?token|security[_-]?token|secret[_-]?access[_-]?key"
    r"|aws_secret_access_key|aws_session_token|sig|signature|token|password|passwd|secret|cookie|set-cookie"
)
_QUOTED_FIELD = re.compile(
    rf"(?P<name>['\"](?:{_SECRET_FIELD})['\"]\s*[:,]\s*)(?P<q>['\"])(?:(?!(?P=q)).)*(?P=q)", re.IGNORECASE
)
_HEADER_LINE = re.compile(rf"(?P<name>\b(?:{_SECRET_FIELD}):[ \t]*)[^\r\n]+", re.IGNORECASE)
_QUERY_FIELD = re.compile(rf"(?P<name>[?&;](?:{_SECRET_FIELD})=)[^&\s'\"#]*", re.IGNORECASE)
# SigV4 Authorization parts and bearer tokens wherever they appear.
_SIGV4 = re.compile(r"(?P<name>(?<![-\w])(?:Credential|Signature)=)[^,&\s'\"]+")
_BEARER = re.compile(r"(?P<name>\bBearer\s+)[A-Za-z0-9._~+/=-]{4,}")
_PATTERNS = (_QUOTED_FIELD, _HEADER_LINE, _QUERY_FIELD, _SIGV4, _BEARER)


def _keep_name(match: re.Match[str]) -> str:
    quote = match.groupdict().get("q")
    return f"{match['name']}{quote}{REDACTED}{quote}" if quote else f"{match['name']}{REDACTED}"


def remember_secrets(values: Iterable[Any]) -> None:
    """Add credential values to those `redact_text` removes wherever they appear.

    Called with the secret-named values of every store's options (`StoreSpec`)
    and the passwords of URLs with user info, so a backend that echoes a
    credential in an error message (or a library that logs it) shows ``***``.
    Strings shorter than 6 characters are ignored.
    """
    global _SECRETS_SORTED
    new = {
        v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        for v in values
        if isinstance(v, str | bytes) and len(v) >= _MIN_SECRET_LENGTH
    }
    if new <= _SECRETS:
        return
    with _SECRETS_LOCK:
        _SECRETS.update(new)
        # Longest first: a secret containing another is replaced whole.
        _SECRETS_SORTED = tuple(sorted(_SECRETS, key=len, reverse=True))


def secrets_in(options: Mapping[str, Any]) -> list[str]:
    """The credential values in ``options`` (secret-named keys, URL passwords), nested included."""
    found: list[str] = []
    for name, value in options.items():
        if is_secret_name(str(name)) and isinstance(value, str | bytes):
            found.append(value if isinstance(value, str) else value.decode("utf-8", "replace"))
        elif isinstance(value, Mapping):
            found += secrets_in(value)
        elif is_secret_name(str(name)) and isinstance(value, list | tuple):
            found += [str(v) for v in value if isinstance(v, str)]
        if isinstance(value, str):
            found += url_secrets(value)
    return found


def remember_options(options: Mapping[str, Any], *urls: str) -> None:
    """`remember_secrets` for a store's ``storage_options`` and the user info of its URLs."""
    found = secrets_in(options)
    for url in urls:
        found += url_secrets(url)
    if found:
        remember_secrets(found)


_NETWORK_SCHEMES = frozenset(
    {
        "http",
        "https",
        "ws",
        "wss",
        "s3",
        "s3a",
        "gs",
        "gcs",
        "abfs",
        "abfss",
        "az",
        "adl",
        "ftp",
        "sftp",
        "ssh",
    }
)


def url_secrets(url: str) -> list[str]:
    """The password of ``url``'s user info (or a bare token of a network URL); none for other strings."""
    if "@" not in url or "://" not in url:
        return []
    try:
        parts = urlsplit(url)
        if parts.password:
            return [parts.password]
        # A bare "token@" is a credential in network URLs; elsewhere "@" may mean anything
        # ("mapping://module.Class@7fa4..." names an object).
        if parts.username and parts.scheme.lower() in _NETWORK_SCHEMES:
            return [parts.username]
    except ValueError:
        pass
    return []


def redact_text(text: str) -> str:
    """``text`` without anything that looks like a credential or is a remembered one.

    Removes URL user info, values of credential-named headers, options and query
    parameters (``Authorization``, ``X-Amz-Security-Token``, ``X-Amz-Signature``,
    ``token``, ``sig``, ``password``, ...) in ``Name: value``, ``'name': 'value'``
    and ``?name=value`` forms, SigV4 ``Credential=``/``Signature=`` values,
    ``Bearer`` tokens, and every value passed to `remember_secrets`.
    Idempotent, and cheap on text with none of them (one scan per pattern).
    """
    if not text:
        return text
    for secret in _SECRETS_SORTED:
        if secret in text:
            text = text.replace(secret, REDACTED)
    if "://" in text and "@" in text:
        text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    for pattern in _PATTERNS:
        text = pattern.sub(_keep_name, text)
    return text


def scrub_exception(exc: BaseException) -> BaseException:
    """Redact ``exc`` and the exceptions chained to it, in place; returns ``exc``.

    For backend errors azarr chains under its own (``raise StoreError(...) from
    cause``): string arguments go through `redact_text`, and what aiohttp keeps
    of the request (``request_info`` with its signed headers, the response
    ``headers``) is dropped, so neither ``str``, ``repr`` nor a printed traceback
    of the chain shows a credential.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        _scrub_one(current)
        current = current.__cause__ or current.__context__
    return exc


def _scrub_one(exc: BaseException) -> None:
    try:
        if any(isinstance(arg, str) for arg in exc.args):
            exc.args = tuple(redact_text(a) if isinstance(a, str) else a for a in exc.args)
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
        pass
    attributes = getattr(exc, "__dict__", None)
    if not attributes:
        return
    for name, value in list(attributes.items()):
        if name == "request_info" and hasattr(value, "_replace"):
            # aiohttp's ClientResponseError: RequestInfo holds the sent (signed) headers,
            # and its str() needs the object: keep it, without headers or credentials.
            from multidict import CIMultiDict, CIMultiDictProxy

            _set(
                exc,
                name,
                value._replace(
                    headers=CIMultiDictProxy(CIMultiDict()),
                    url=_bare_url(value.url),
                    real_url=_bare_url(value.real_url),
                ),
            )
        elif name in ("headers", "history") and value:
            _set(exc, name, None if name == "headers" else ())
        elif isinstance(value, str) and value:
            cleaned = redact_text(value)
            if cleaned != value:
                _set(exc, name, cleaned)
        elif name in ("message", "msg", "url", "real_url", "filename") and value is not None:
            cleaned = redact_text(str(value))
            if cleaned != str(value):
                _set(exc, name, cleaned)


def _bare_url(url: Any) -> Any:
    """A yarl URL without user info and query string (signed URLs carry tokens there)."""
    try:
        if url.user is not None or url.password is not None or url.query_string:
            return url.with_user(None).with_query(None)
    except (AttributeError, TypeError, ValueError):
        pass
    return url


def _set(exc: BaseException, name: str, value: Any) -> None:
    try:
        object.__setattr__(exc, name, value)
    except (AttributeError, TypeError):  # pragma: no cover - read-only attributes
        pass


class RedactingFilter(logging.Filter):
    """A logging filter that passes every record through `redact_text`.

    The CLI installs it on its stderr handler, so records of azarr's loggers and,
    with ``-vvv``, of botocore, aiohttp and s3fs (which log request headers at
    DEBUG) are shown without credentials. The record's message is formatted
    once here (``%`` arguments merged) and its traceback text redacted too.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: leave it to the handler's own error path
            return True
        record.msg, record.args = redact_text(message), None
        if record.exc_info and record.exc_info[1] is not None:
            scrub_exception(record.exc_info[1])
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True
