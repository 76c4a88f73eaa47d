"""The wire format of every timestamp an answer carries (timeutil.iso), pinned to its definition."""
import random
from datetime import datetime, timedelta, timezone

import pytest

from coordserver.timeutil import iso


def _by_definition(moment: datetime) -> str:
    """ISO-8601 UTC, milliseconds truncated, Z: written out field by field."""
    utc = moment.astimezone(timezone.utc) if moment.tzinfo else moment
    return (f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}."
            f"{utc.microsecond // 1000:03d}Z")


@pytest.mark.parametrize("moment, text", [
    (datetime(2026, 2, 17, 12, 0), "2026-02-17T12:00:00.000Z"),
    (datetime(2026, 2, 17, 12, 0, 5, 999_999), "2026-02-17T12:00:05.999Z"),  # truncated, never rounded up
    (datetime(77, 1, 2, 3, 4, 5, 6_000), "0077-01-02T03:04:05.006Z"),  # four digits of year
    (datetime(2026, 1, 1, 1, 30, tzinfo=timezone(timedelta(hours=2))), "2025-12-31T23:30:00.000Z"),
    ("2026-03-04 05:06:07.891234", "2026-03-04T05:06:07.891Z"),  # SQLite's raw rows give text
])
def test_a_timestamp_on_the_wire(moment, text):
    assert iso(moment) == text


def test_none_stays_none():
    assert iso(None) is None


def test_any_moment_is_written_as_its_definition():
    rng = random.Random(30)
    for _ in range(5_000):
        naive = datetime(1, 1, 1) + timedelta(microseconds=rng.randrange(0, 315_537_897_599_999_999))
        assert iso(naive) == _by_definition(naive)
        if naive.year > 1 and naive.year < 9999:
            aware = naive.replace(tzinfo=timezone(timedelta(minutes=rng.randrange(-720, 720, 15))))
            assert iso(aware) == _by_definition(aware)
