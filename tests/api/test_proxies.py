"""`TrustedProxies`, the WSGI layer `svc serve` puts in front of the app, called as waitress calls it (the real
server behind a real proxy is tests/end_to_end/test_behind_a_proxy.py)."""

import ipaddress

import pytest

from api.proxies import TrustedProxies


def seen_by_the_app(proxies_networks, peer, headers, *, count=1, trusted=("x-forwarded-for", "x-forwarded-proto")):
    """What the app behind TrustedProxies sees: (REMOTE_ADDR, scheme, the forwarding headers left)."""
    seen = {}

    def app(environ, start_response):
        seen.update(environ)
        start_response("204 No Content", [])
        return [b""]

    front = TrustedProxies(app, [ipaddress.ip_network(n) for n in proxies_networks], count=count, headers=trusted)
    environ = {"REMOTE_ADDR": peer, "wsgi.url_scheme": "http", "SERVER_NAME": "svc", "SERVER_PORT": "8080"}
    environ.update({"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()})
    list(front(environ, lambda *a: None))
    left = {k: v for k, v in seen.items() if k.startswith("HTTP_X_FORWARDED") or k == "HTTP_FORWARDED"}
    return seen["REMOTE_ADDR"], seen["wsgi.url_scheme"], left


def test_a_trusted_proxys_forwarded_for_names_the_client():
    addr, scheme, left = seen_by_the_app(
        ["10.0.0.0/24"], "10.0.0.7", {"X-Forwarded-For": "198.51.100.9, 203.0.113.5", "X-Forwarded-Proto": "https"}
    )
    # One hop: the last entry, the one the trusted proxy wrote; the client's own invention before it is ignored.
    assert (addr, scheme) == ("203.0.113.5", "https")
    assert left == {"HTTP_X_FORWARDED_FOR": "203.0.113.5", "HTTP_X_FORWARDED_PROTO": "https"}


def test_two_hops_take_the_address_the_first_proxy_saw():
    addr, _, _ = seen_by_the_app(
        ["10.0.0.7"], "10.0.0.7", {"X-Forwarded-For": "1.2.3.4, 203.0.113.5, 10.9.9.9"}, count=2
    )
    assert addr == "203.0.113.5"


@pytest.mark.parametrize("peer", ["10.0.0.8", "192.0.2.1", "not-an-address", ""])
def test_anyone_else_is_the_connections_peer_and_their_forwarding_headers_are_removed(peer):
    headers = {"X-Forwarded-For": "203.0.113.5", "Forwarded": "for=203.0.113.5", "X-Forwarded-Host": "evil"}
    addr, scheme, left = seen_by_the_app(["10.0.0.7"], peer, headers)
    assert (addr, scheme, left) == (peer, "http", {})


def test_no_trusted_proxy_believes_nobody():
    addr, _, left = seen_by_the_app([], "127.0.0.1", {"X-Forwarded-For": "203.0.113.5"})
    assert (addr, left) == ("127.0.0.1", {})


def test_an_ipv4_proxy_seen_by_a_dual_stack_listener_is_still_trusted():
    addr, _, _ = seen_by_the_app(["10.0.0.0/24"], "::ffff:10.0.0.7", {"X-Forwarded-For": "203.0.113.5"})
    assert addr == "203.0.113.5"


def test_an_rfc_7239_forwarded_header_when_that_is_the_one_trusted():
    addr, scheme, left = seen_by_the_app(
        ["2001:db8::/32"],
        "2001:db8::1",
        {"Forwarded": 'for="[2001:db8:cafe::17]";proto=https', "X-Forwarded-For": "203.0.113.5"},
        trusted=("forwarded",),
    )
    assert (addr, scheme) == ("2001:db8:cafe::17", "https")
    assert "HTTP_X_FORWARDED_FOR" not in left  # not the header this deployment trusts


@pytest.mark.parametrize(
    ("written", "client"),
    [
        # A dual-stack proxy (nginx on [::]:443 ipv6only=off, Node) sees an IPv4 client as IPv4-mapped IPv6.
        ("::ffff:203.0.113.5", "203.0.113.5"),
        ("198.51.100.9, ::ffff:203.0.113.5", "203.0.113.5"),
        # Some load balancers write the client's port too; the IPv4 form waitress reads, the IPv6 one it did not.
        ("[2001:db8:cafe::17]:51234", "2001:db8:cafe::17"),
    ],
)
def test_the_client_is_one_address_however_the_trusted_proxy_writes_it(written, client):
    # waitress splits `::ffff:203.0.113.5` at its last colon ("::ffff", port "203.0.113.5"), which put every IPv4
    # client in one lockout bucket, and kept `[v6]:port` whole, which gave every connection a bucket of its own.
    addr, _, _ = seen_by_the_app(["10.0.0.0/24"], "10.0.0.7", {"X-Forwarded-For": written})
    assert addr == client
