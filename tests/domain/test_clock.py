"""The service's clock: one way to read a moment people and programs give it."""

from datetime import UTC, datetime

import pytest

from domain.clock import BadTimestamp, iso, parse_timestamp


@pytest.mark.parametrize(
    "text", ["2026-11-20T08:00:00Z", "2026-11-20T08:00:00z", "2026-11-20T09:00:00+01:00", "2026-11-20T08:00Z"]
)
def test_a_timestamp_with_its_zone_is_read_as_utc(text):
    moment = parse_timestamp(text)
    assert moment == datetime(2026, 11, 20, 8, tzinfo=UTC) and moment.tzinfo is UTC


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("yesterday", BadTimestamp.NOT_ISO),
        ("2026-11-20T08:00:00", BadTimestamp.NO_ZONE),
        ("0001-01-01T00:00:00+00:05", BadTimestamp.OUT_OF_RANGE),
    ],
)
def test_what_is_not_a_moment_says_why(text, problem):
    with pytest.raises(BadTimestamp) as refused:
        parse_timestamp(text)
    assert (refused.value.problem, refused.value.text) == (problem, text)


def test_what_iso_writes_reads_back_as_the_same_moment():
    moment = datetime(2026, 11, 20, 8, 0, 0, 123456, tzinfo=UTC)
    assert parse_timestamp(iso(moment)) == moment
