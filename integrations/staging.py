"""The staging check: is `SVC_STAGING_URL` reachable over HTTPS, answering below 400, with a certificate
that is trusted and valid for more than 14 more days.

One GET over one verified TLS connection (the standard library's `http.client`, because the certificate's
expiry is only visible on the socket that carried the answer). Redirects are not followed: a 3xx answer is
the site answering. Every step has a time limit.
"""

from __future__ import annotations

import http.client
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

EXPIRY_WARNING_DAYS = 14
DEFAULT_TIMEOUT = 10.0
USER_AGENT = "svc-staging-check/1"


@dataclass(frozen=True)
class StagingResult:
    checked_at: datetime
    url: str | None
    ok: bool
    skipped: bool
    detail: str
    status: int | None = None
    certificate_expires_at: datetime | None = None
    days_left: float | None = None


def skipped(now: datetime) -> StagingResult:
    return StagingResult(now, None, ok=True, skipped=True, detail="SVC_STAGING_URL is not set: check skipped")


def check(
    url: str | None,
    *,
    now: datetime,
    timeout: float = DEFAULT_TIMEOUT,
    ca_file: Path | None = None,
    warn_days: int = EXPIRY_WARNING_DAYS,
) -> StagingResult:
    """Check `url` (None: skipped). `now` is the caller's clock, for the days left on the certificate."""
    if not url:
        return skipped(now)
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        return StagingResult(now, url, ok=False, skipped=False, detail="not an https:// URL")
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    connection = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout, context=context)
    try:
        connection.connect()  # the TLS handshake, which verifies the chain and the host name
        peer = connection.sock.getpeercert()
        connection.request("GET", path, headers={"User-Agent": USER_AGENT, "Accept": "*/*"})
        response = connection.getresponse()
        status = response.status
        response.read(64 * 1024)  # drain a little; the body itself does not matter
    except ssl.SSLCertVerificationError as exc:
        reason = exc.verify_message or exc.reason or str(exc)
        return StagingResult(now, url, ok=False, skipped=False, detail=f"certificate not trusted: {reason}")
    except ssl.SSLError as exc:
        return StagingResult(now, url, ok=False, skipped=False, detail=f"TLS failed: {exc.reason or exc}")
    except TimeoutError:
        return StagingResult(now, url, ok=False, skipped=False, detail=f"no answer within {timeout:g} s")
    except (OSError, http.client.HTTPException) as exc:
        return StagingResult(now, url, ok=False, skipped=False, detail=f"unreachable: {_describe(exc)}")
    finally:
        connection.close()

    expires = _not_after(peer)
    days_left = round((expires - now).total_seconds() / 86400, 2) if expires else None
    problems = []
    if status >= 400:
        problems.append(f"answered {status}")
    if expires is None:
        problems.append("no certificate expiry could be read")
    elif days_left is not None and days_left <= warn_days:
        # The expiry as the contract writes a moment (domain.clock.iso; integrations import nothing of ours).
        problems.append(f"certificate expires in {days_left:.1f} days ({expires:%Y-%m-%dT%H:%M:%S.%fZ})")
    if problems:
        return StagingResult(now, url, False, False, "; ".join(problems), status, expires, days_left)
    detail = f"answered {status}; certificate valid for {days_left:.0f} more days"
    return StagingResult(now, url, True, False, detail, status, expires, days_left)


def _not_after(peer: dict | None) -> datetime | None:
    if not peer or "notAfter" not in peer:
        return None
    return datetime.fromtimestamp(ssl.cert_time_to_seconds(peer["notAfter"]), UTC)


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:300]
