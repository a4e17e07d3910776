"""Target URLs of referenced bytes, checked and resolved to live stores.

kerchunk reference sets (`ReferenceStore`) and Icechunk virtual chunks (`IcechunkStore`)
both name byte ranges of objects by URL: ``s3://bucket/file.nc``, ``file:///data/x.nc``,
``https://host/x.nc``. Those URLs come from a file someone else wrote, so each is
checked against the schemes and prefixes the reader allows (`check_allowed`) and for
``.``/``..`` segments before any I/O, then resolved to the one live store of its bucket
or host (`TargetResolver.resolve`), whose budget, retries and timeouts every reader of
that bucket shares.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping
from typing import Any

from azarr.errors import InvalidReferenceError, ReferenceTargetError
from azarr.storage._base import Store, validate_key
from azarr.storage._spec import StoreSpec
from azarr.storage._url import split_scheme

__all__ = ["TargetResolver", "canonical_scheme", "check_allowed"]

# Scheme spellings that name the same kind of target.
_SCHEME_ALIASES = {"s3a": "s3", "gcs": "gs", "local": "file", "abfs": "az", "abfss": "az", "adl": "az"}
# Target URLs whose checked resolution is remembered (sets name one file, or a few thousand).
_RESOLVED_CACHE = 4096


def canonical_scheme(name: str) -> str:
    """The one spelling of a target scheme (``s3a`` -> ``s3``, ``gcs`` -> ``gs``, ...)."""
    name = name.lower()
    return _SCHEME_ALIASES.get(name, name)


def check_allowed(allowed: tuple[str, ...] | None, scheme: str, rest: str, url: str, what: str) -> None:
    """Refuse a target outside ``allowed`` (schemes such as ``"s3"`` and URL prefixes such
    as ``"https://data.example/"``; None allows any).

    Raises
    ------
    ReferenceTargetError
        ``scheme://rest`` matches no entry; the message names ``what`` (the referencing
        key and where it is) and ``url``.
    """
    if allowed is None:
        return
    normalized = f"{scheme}://{rest}"
    for entry in allowed:
        entry_scheme, entry_rest = split_scheme(entry)
        if entry_scheme is None and "/" not in entry:
            if canonical_scheme(entry) == scheme:
                return
            continue
        prefix = f"{canonical_scheme(entry_scheme or 'file')}://{entry_rest}"
        if normalized == prefix or normalized.startswith(prefix if prefix.endswith("/") else prefix + "/"):
            return
    raise ReferenceTargetError(
        f"{what}: target {url!r} is outside the allowed targets {list(allowed)} "
        "(pass allowed_targets= or set azarr.config reference_allowed_targets)"
    )


class TargetResolver:
    """Resolves target URLs to ``(live store, key)``, one store per bucket or host.

    Parameters
    ----------
    allowed : callable
        Returns the schemes and URL prefixes targets may name (None: any); asked at each
        resolution not yet remembered, so a changed ``azarr.config`` applies.
    remote_protocol : str, optional
        Scheme of target URLs written without one.
    remote_options : mapping, optional
        ``storage_options`` of every remote target store (not of local files).
    """

    def __init__(
        self,
        allowed: Callable[[], tuple[str, ...] | None],
        *,
        remote_protocol: str | None = None,
        remote_options: Mapping[str, Any] | None = None,
    ) -> None:
        self._allowed = allowed
        self._remote_protocol = remote_protocol
        self._remote_options = dict(remote_options or {})
        self._stores: dict[tuple[str, str], Store] = {}
        # (target URL, allowed targets then) -> (store, key): resolutions already checked.
        self._resolved: dict[tuple[str, tuple[str, ...] | None], tuple[Store, str]] = {}

    def resolve(self, url: str, where: str) -> tuple[Store, str]:
        """The live store and key of target ``url`` (checked; remembered when checked once).

        ``where`` names the referencing key for messages (``"reference 'x/0.0' in ..."``).

        Raises
        ------
        ReferenceTargetError
            ``url`` is outside the allowed targets, or has ``.``/``..`` segments.
        InvalidReferenceError
            ``url`` cannot name an object (no bucket, a query string, a NUL character).
        """
        ident = (url, self._allowed())
        found = self._resolved.get(ident)
        if found is None:
            found = self._resolve(url, where, ident[1])
            if len(self._resolved) < _RESOLVED_CACHE:
                self._resolved[ident] = found
        return found

    def _resolve(self, url: str, where: str, allowed: tuple[str, ...] | None) -> tuple[Store, str]:
        if "\x00" in url:  # no OS path or URL holds one (a file target's open would raise ValueError)
            raise InvalidReferenceError(f"{where}: target {url!r} holds a NUL character")
        scheme, rest = split_scheme(url)
        if scheme is None:
            if self._remote_protocol:
                scheme, rest = self._remote_protocol, url
            else:
                scheme, rest = "file", os.path.abspath(url) if not url.startswith("/") else url
        scheme = canonical_scheme(scheme)
        if scheme == "file":
            rest = rest if rest.startswith("/") else "/" + rest
        if any(s in (".", "..") for s in rest.split("/")):
            raise ReferenceTargetError(f"{where}: target {url!r} has '.' or '..' segments")
        check_allowed(allowed, scheme, rest, url, where)
        if scheme == "file":
            root, name = posixpath.split(rest)
            root = root or "/"
        else:
            if "?" in rest or "#" in rest:
                raise InvalidReferenceError(f"{where}: target {url!r} has a query or fragment")
            host, _, name = rest.partition("/")
            if not host or not name:
                raise InvalidReferenceError(f"{where}: target {url!r} names no object")
            root = f"{scheme}://{host}"
        try:
            validate_key(name)
        except InvalidReferenceError:
            raise
        except ValueError as exc:
            raise InvalidReferenceError(f"{where}: target {url!r}: {exc}") from None
        store = self._stores.get((scheme, root))
        if store is None:
            options = None if scheme == "file" else self._remote_options or None
            store = StoreSpec.from_url(root, storage_options=options).open(read_only=True)
            self._stores[(scheme, root)] = store
        return store, name

    async def close(self) -> None:
        """Close every target store opened."""
        for store in list(self._stores.values()):
            await store.close()
