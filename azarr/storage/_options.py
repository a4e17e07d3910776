"""Typed ``storage_options`` for the network drivers (obstore's ``S3Config`` idea).

Each is a ``TypedDict`` with ``total=False``: editors complete the documented
keys, type checkers check their values, and any other key the backing library
takes (s3fs, gcsfs, aiohttp) still passes through, since the drivers accept any
``Mapping[str, Any]`` as well.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from ssl import SSLContext

__all__ = ["GCSOptions", "HTTPOptions", "S3Options"]


class S3Options(TypedDict, total=False):
    """`S3Store` options: `s3fs.S3FileSystem`'s, as s3fs users pass them."""

    anon: bool
    """Unsigned requests (public buckets)."""
    key: str
    """Access key id (s3fs alias ``username``)."""
    secret: str
    """Secret access key (s3fs alias ``password``); never shown in ``repr`` or messages."""
    token: str
    """Session token of temporary credentials."""
    profile: str
    """A botocore profile from ``~/.aws/config``."""
    endpoint_url: str
    """An S3-compatible endpoint (``http://127.0.0.1:8333``); None means AWS."""
    use_ssl: bool
    """HTTPS to AWS (default True)."""
    requester_pays: bool
    """Send ``x-amz-request-payer: requester``."""
    client_kwargs: dict[str, Any]
    """botocore client arguments: ``region_name``, ``endpoint_url``, ``verify``, ..."""
    config_kwargs: dict[str, Any]
    """``botocore.config.Config`` arguments: ``connect_timeout``/``read_timeout`` (seconds),
    ``max_pool_connections``, ``s3={"addressing_style": ...}``, ``signature_version``, ..."""


class GCSOptions(TypedDict, total=False):
    """`GCSStore` options: `gcsfs.GCSFileSystem`'s, plus ``retries``."""

    project: str
    """Billing / bucket-listing project."""
    token: Any
    """``"anon"``, ``"google_default"``, ``"cloud"``, a service-account JSON path, or credentials."""
    endpoint_url: str
    """An emulator endpoint (``http://127.0.0.1:4443``)."""
    requester_pays: bool | str
    """Bill requests to the caller's project."""
    retries: int
    """Attempts per request inside gcsfs (azarr default 1: its scheduler retries)."""


class HTTPOptions(TypedDict, total=False):
    """`HTTPStore` options."""

    headers: dict[str, str]
    """Sent with every request (e.g. ``Authorization``); never shown in ``repr`` or messages."""
    client_kwargs: dict[str, Any]
    """`aiohttp.ClientSession` arguments (``auth``, ``trust_env``, ``timeout``, ...)."""
    timeout: float
    """Seconds allowed to connect, and between two received pieces of a response."""
    max_connections: int
    """Keep-alive pool size per event loop (default ``azarr.config`` ``max_concurrency``)."""
    listings: bool
    """False: never request directory listings (default True)."""
    ssl: bool | str | SSLContext
    """Certificate verification for ``https://``: True (system trust), a PEM CA bundle path,
    an `ssl.SSLContext`, or False (none); fsspec's ``HTTPFileSystem`` takes ``ssl`` too."""
