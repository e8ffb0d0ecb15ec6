"""The staging check against real local HTTPS sites: trusted, self-signed, expiring, failing, slow, absent."""

from datetime import UTC, datetime, timedelta

from integrations import staging

from processes import free_port
from servers.staging import StagingSite


def now() -> datetime:
    # The certificates were issued against the real clock, so the check's clock must be the real one too.
    return datetime.now(UTC)


def test_a_healthy_site_with_a_trusted_certificate_passes(certificates):
    with StagingSite(certificates.trusted) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file)
    assert result.ok and not result.skipped
    assert result.status == 200
    assert 88 < result.days_left <= 90
    assert site.requests == ["/health"]


def test_a_self_signed_certificate_fails(certificates):
    with StagingSite(certificates.untrusted) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file)
    assert not result.ok
    assert result.detail.startswith("certificate not trusted")
    assert "self-signed" in result.detail or "self signed" in result.detail


def test_the_system_store_does_not_trust_the_test_ca(certificates):
    with StagingSite(certificates.trusted) as site:
        result = staging.check(site.url, now=now())
    assert not result.ok and result.detail.startswith("certificate not trusted")


def test_a_certificate_expiring_within_14_days_fails(certificates):
    with StagingSite(certificates.expiring) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file)
    assert not result.ok
    assert result.status == 200
    assert "certificate expires in 7.0 days" in result.detail or "certificate expires in 6.9 days" in result.detail
    assert result.certificate_expires_at > now() + timedelta(days=6)


def test_expiry_is_measured_from_the_callers_clock(certificates):
    with StagingSite(certificates.trusted) as site:
        later = staging.check(site.url, now=now() + timedelta(days=80), ca_file=certificates.ca_file)
    assert not later.ok and "certificate expires in" in later.detail


def test_a_500_fails_and_says_so(certificates):
    with StagingSite(certificates.trusted, status=500) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file)
    assert not result.ok and result.status == 500
    assert result.detail == "answered 500"


def test_a_redirect_is_the_site_answering(certificates):
    with StagingSite(certificates.trusted, status=302) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file)
    assert result.ok and result.status == 302


def test_a_slow_site_times_out(certificates):
    with StagingSite(certificates.trusted, hold=True) as site:
        result = staging.check(site.url, now=now(), ca_file=certificates.ca_file, timeout=0.5)
    assert not result.ok
    assert result.detail == "no answer within 0.5 s"


def test_nothing_listening_is_unreachable(certificates):
    result = staging.check(f"https://127.0.0.1:{free_port()}/", now=now(), timeout=2)
    assert not result.ok and result.detail.startswith("unreachable")


def test_unset_is_skipped_and_says_so():
    result = staging.check(None, now=now())
    assert result.ok and result.skipped
    assert "SVC_STAGING_URL is not set" in result.detail
