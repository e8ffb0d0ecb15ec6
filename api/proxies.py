"""Who the client is behind a reverse proxy: forwarding headers are believed only on a trusted proxy's connection.

`svc serve` wraps the app in `TrustedProxies`. On a connection from an address in `SVC_TRUSTED_PROXY`, waitress's
own proxy-header parser sets `REMOTE_ADDR` (and the scheme, and the host when that header is trusted) from
`X-Forwarded-For` or `Forwarded`, taking the entry `SVC_TRUSTED_PROXY_COUNT` hops from the end, the one the
trusted proxy wrote. On any other connection those headers are removed before the app sees them. Everything
that asks who the client is — the failed-credentials lockout, the access log — reads `REMOTE_ADDR`.

Why not waitress's `trusted_proxy` setting itself: it holds one address (or `*`, everyone), while a load balancer
or an ingress reaches the service from several addresses, often a whole subnet. So the trust decision is made
here, against networks, and the parsing is waitress's.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from waitress.proxy_headers import PROXY_HEADERS, proxy_headers_middleware

from domain.config import Config

# The forwarding headers as WSGI environ keys: a request from an untrusted peer that carries none of them has
# nothing to remove, and goes straight to the app.
_FORWARDING_KEYS = tuple(f"HTTP_{name}" for name in sorted(PROXY_HEADERS))
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class TrustedProxies:
    """A WSGI app in front of `app` that believes forwarding headers from trusted peers only."""

    def __init__(self, app: WsgiApp, networks: Iterable[Network], *, count: int = 1, headers: Iterable[str] = ()):
        self.networks = tuple(networks)
        self.app = app
        # trusted_proxy="*": this branch is taken only for a peer `trusts` has already accepted.
        self._believing = proxy_headers_middleware(
            app, trusted_proxy="*", trusted_proxy_count=count, trusted_proxy_headers=set(headers), clear_untrusted=True
        )
        self._doubting = proxy_headers_middleware(app, trusted_proxy=None, clear_untrusted=True)
        self.trusts = lru_cache(maxsize=4096)(self._trusts)

    @classmethod
    def from_config(cls, app: WsgiApp, config: Config) -> TrustedProxies:
        return cls(app, config.trusted_proxies, count=config.trusted_proxy_count, headers=config.trusted_proxy_headers)

    def _trusts(self, peer: str) -> bool:
        """Whether the connection's peer address is one of the trusted proxies."""
        if not self.networks:
            return False
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        # A dual-stack listener sees an IPv4 proxy as ::ffff:a.b.c.d.
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in network for network in self.networks)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not self.trusts(environ.get("REMOTE_ADDR") or ""):
            for key in _FORWARDING_KEYS:
                if key in environ:
                    return self._doubting(environ, start_response)
            return self.app(environ, start_response)
        if "HTTP_X_FORWARDED_FOR" in environ:
            environ["HTTP_X_FORWARDED_FOR"] = ",".join(
                _plain_hop(h) for h in environ["HTTP_X_FORWARDED_FOR"].split(",")
            )
        return self._believing(environ, start_response)


def _plain_hop(hop: str) -> str:
    """One X-Forwarded-For entry in a form waitress reads as one address: `a.b.c.d` for `::ffff:a.b.c.d` (an IPv4
    client seen by a dual-stack proxy) and `[v6]` for `[v6]:port`. waitress splits the first at its last colon
    (address `::ffff`: every IPv4 client in one lockout bucket) and keeps the second whole (the port in the
    address: every connection a bucket of its own). Anything else is left as it is."""
    text = hop.strip()
    if text.startswith("[") and "]:" in text:
        text = text[: text.index("]") + 1]
    try:
        address = ipaddress.ip_address(text.removeprefix("[").removesuffix("]"))
    except ValueError:
        return hop
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return text


def describe(config: Config) -> str:
    """One line for the start-up banner: whose forwarding headers are believed."""
    if not config.trusted_proxies:
        return "forwarding headers are never believed (no SVC_TRUSTED_PROXY)"
    proxies = ", ".join(str(n) if n.num_addresses > 1 else str(n.network_address) for n in config.trusted_proxies)
    headers = ", ".join(sorted(config.trusted_proxy_headers))
    hops = config.trusted_proxy_count
    return f"believing {headers} from {proxies} ({hops} proxy hop{'s' if hops > 1 else ''})"
