"""Time in one place: UTC-aware datetimes, the wire format, and an injectable clock."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import overload


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Clock:
    """The server's source of 'now'. Tests replace it with a FrozenClock instead of sleeping."""

    def now(self) -> datetime:
        return utcnow()


class FrozenClock(Clock):
    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or utcnow()
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, value: datetime) -> None:
        with self._lock:
            self._now = value

    def advance(self, **kwargs: float) -> datetime:
        with self._lock:
            self._now = self._now + timedelta(**kwargs)
            return self._now


@overload
def to_db(value: datetime) -> datetime: ...
@overload
def to_db(value: None) -> None: ...
@overload
def to_db(value: datetime | None) -> datetime | None: ...
def to_db(value: datetime | None) -> datetime | None:
    """Datetimes are stored naive in UTC so SQLite and PostgreSQL compare them alike."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


@overload
def from_db(value: datetime | str) -> datetime: ...
@overload
def from_db(value: None) -> None: ...
@overload
def from_db(value: datetime | str | None) -> datetime | None: ...
def from_db(value: datetime | str | None) -> datetime | None:
    """A stored datetime (naive UTC, or text as SQLite's raw rows give it) as an aware UTC one."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


@overload
def iso(value: datetime | str) -> str: ...
@overload
def iso(value: None) -> None: ...
@overload
def iso(value: datetime | str | None) -> str | None: ...
def iso(value: datetime | str | None) -> str | None:
    """The wire format: ISO-8601 UTC with milliseconds (truncated) and Z, the year in four digits."""
    if value is None:
        return None
    value = to_db(datetime.fromisoformat(value) if isinstance(value, str) else value)
    # isoformat is C and writes the year in four digits (strftime's %Y gives "77" for the year 77, which no RFC
    # 3339 reader takes); every answer carries a few of these, and strftime cost 12 % of a health check.
    return value.isoformat(timespec="milliseconds") + "Z"


def parse_iso(text: object) -> datetime:
    """Accepts any ISO-8601 value; a value without an offset is taken as UTC. Raises ValueError."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("not an ISO-8601 timestamp")
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def age_text(then: datetime | None, now: datetime) -> str:
    """Two largest units, no seconds: '1d 4h', '1d', '2h 15m', '2h', '5m', '0m'."""
    if then is None:
        return "0m"
    seconds = max(0, int((now - from_db(then)).total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    return f"{minutes}m"
