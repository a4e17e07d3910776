"""Which HTTP redirects `HTTPStore` follows, and with which headers.

A server azarr reads from must not be able to point it somewhere the user did
not: at the cloud metadata service that hands out instance credentials, at a
plain-text copy of an https URL, or at another host that would then receive
the user's ``Authorization`` header. `RedirectPolicy` decides each hop
(``HTTPStore._send`` follows redirects itself, one hop at a time):

* same origin (scheme, host, port) by default; other origins only with
  ``storage_options={"allow_cross_origin_redirects": True}``, and then the
  user's custom headers and credentials are not sent to the new origin;
* never from ``https`` to ``http``;
* never to a link-local or cloud metadata address (``169.254.0.0/16``,
  ``fe80::/10``, ``fd00:ec2::254``, ``168.63.129.16``, ``100.100.100.200``,
  ``metadata.google.internal``, ...), checked
  on the literal host and on every address its name resolves to;
* at most `MAX_REDIRECTS` hops.

The same rules as browsers' fetch (no https -> http downgrade; credentials are
dropped on cross-origin redirects, as aiohttp and requests do for
``Authorization``), plus the SSRF guard against metadata endpoints.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from azarr.errors import StoreError

if TYPE_CHECKING:
    from yarl import URL

__all__ = ["MAX_REDIRECTS", "REDIRECT_STATUSES", "RedirectPolicy", "RedirectRefusedError", "shown"]

#: Most redirects followed for one request (aiohttp's default too).
MAX_REDIRECTS = 10
#: Statuses that redirect with a ``Location`` (RFC 9110 15.4).
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
# Metadata services outside the link-local ranges: AWS's IPv6 endpoint, and the
# names clouds publish for theirs (GCP, AWS, Azure/Alibaba use the IPv4 one).
_METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IMDS over IPv6 (Nitro)
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
        ipaddress.ip_address("168.63.129.16"),  # Azure's wire server (metadata, health, DNS)
    }
)
_METADATA_NAMES = frozenset(
    {"metadata.google.internal", "metadata", "metadata.goog", "instance-data", "instance-data.ec2.internal"}
)

Resolver = Callable[[str, int], Awaitable[list[str]]]


class RedirectRefusedError(StoreError):
    """A server redirected a request where the store's redirect policy does not allow."""


def shown(url: URL) -> str:
    """``url`` fit for a message: no user info, no query (signed URLs carry tokens there)."""
    port = f":{url.explicit_port}" if url.explicit_port is not None else ""
    return f"{url.scheme}://{url.raw_host}{port}{url.raw_path}"


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme.lower(), (url.host or "").lower().rstrip("."), url.port)


def forbidden_address(address: str) -> bool:
    """True for link-local and cloud metadata IP addresses (IPv4-mapped IPv6 included)."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv4 addresses carried in IPv6 ones: mapped (::ffff:a.b.c.d), 6to4 (2002::/16)
        # and NAT64 (64:ff9b::/96) reach the IPv4 address they embed.
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in _NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if embedded is not None:
            ip = embedded
    return ip in _METADATA_ADDRESSES or any(ip in net for net in _LINK_LOCAL if ip.version == net.version)


async def _resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class RedirectPolicy:
    """The rules for following one request's redirects.

    Parameters
    ----------
    allow_cross_origin : bool
        Follow redirects to another scheme/host/port (default False). Even then
        https -> http and link-local/metadata targets are refused, and the
        caller must drop custom headers and credentials (see `check`).
    resolver : callable, optional
        ``await resolver(host, port)`` -> IP address strings, to check names
        that resolve to forbidden addresses (default: the loop's getaddrinfo).
    """

    allow_cross_origin: bool = False
    resolver: Resolver = _resolve

    async def check(self, current: URL, target: URL, *, hops: int) -> bool:
        """Whether following ``current`` -> ``target`` is allowed; returns True if it changes origin.

        Raises
        ------
        RedirectRefusedError
            Too many hops, not http(s), https -> http, another origin without
            ``allow_cross_origin``, or a link-local / metadata target. The message
            names both URLs without credentials or query strings.
        """
        where = f"redirect from {shown(current)} to {shown(target)}"
        if hops > MAX_REDIRECTS:
            raise RedirectRefusedError(f"{where} refused: more than {MAX_REDIRECTS} redirects")
        scheme = target.scheme.lower()
        if scheme not in ("http", "https") or not target.host:
            raise RedirectRefusedError(f"{where} refused: not an http(s) URL with a host")
        if current.scheme.lower() == "https" and scheme == "http":
            raise RedirectRefusedError(f"{where} refused: it downgrades https to http")
        cross = _origin(current) != _origin(target)
        if cross and not self.allow_cross_origin:
            raise RedirectRefusedError(
                f"{where} refused: it leaves the origin {shown(current.origin())}; pass "
                "storage_options={'allow_cross_origin_redirects': True} to follow it (custom headers "
                "and credentials are then not sent to the other origin)"
            )
        host = target.host.lower().rstrip(".")
        if host in _METADATA_NAMES or forbidden_address(host):
            raise RedirectRefusedError(
                f"{where} refused: the target is a link-local / cloud metadata address"
            )
        if cross:
            try:
                addresses = await self.resolver(host, target.port or 0)
            except OSError:
                addresses = []  # unresolvable: the request itself will fail as unreachable
            if any(forbidden_address(a) for a in addresses):
                raise RedirectRefusedError(
                    f"{where} refused: {host} resolves to a link-local / metadata address"
                )
        return cross
