"""svc/server.py's decisions that need no server: who is exempt from the per-address cap."""

import ipaddress

from domain.config import Config
from svc.cli import client_limits


def test_trusted_proxies_are_exempt_from_the_per_address_cap_and_no_one_else():
    limits = client_limits(Config(trusted_proxies=(ipaddress.ip_network("10.0.0.0/24"), ipaddress.ip_network("::1"))))
    assert limits.is_exempt("10.0.0.7") and limits.is_exempt("::1")
    assert not limits.is_exempt("10.0.1.7") and not limits.is_exempt("127.0.0.2") and not limits.is_exempt("")


def test_the_limits_come_from_the_configuration():
    config = Config.from_env(
        {
            "SVC_MAX_CONNECTIONS_PER_CLIENT": "5",
            "SVC_REQUEST_HEADER_TIMEOUT": "3",
            "SVC_REQUEST_BODY_MIN_RATE": "1000",
        }
    )
    limits = client_limits(config)
    assert (limits.max_per_client, limits.header_timeout, limits.body_min_rate, limits.exempt) == (5, 3.0, 1000.0, ())
