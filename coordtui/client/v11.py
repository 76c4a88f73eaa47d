"""API.md §18 objects (workflows, user admin) and the few Prometheus figures the doctor strip shows.

GET /api/metrics is Prometheus text exposition; the client reads only the sample lines it needs, with
the small parser below (no prometheus-client dependency on the client side)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime

from .models import JSONObject, parse_time, pick


@dataclass(frozen=True)
class Workflow:
    id: str
    title: str
    description: str | None
    document_url: str | None
    enabled: bool
    expires_at: datetime | None
    review_at: datetime | None
    created_by: str | None

    @classmethod
    def parse(cls, row: JSONObject) -> "Workflow":
        return cls(id=str(row.get("id")), title=str(row.get("title") or ""), description=row.get("description"),
                   document_url=pick(row, "documentUrl", "document_url"), enabled=bool(row.get("enabled", True)),
                   expires_at=parse_time(pick(row, "expiresAt", "expires_at")),
                   review_at=parse_time(pick(row, "reviewAt", "review_at")),
                   created_by=pick(row, "createdBy", "created_by"))

    def states(self, now: datetime) -> list[str]:
        """What an agent must know before following it: disabled, expired, review due (else enabled)."""
        found = [] if self.enabled else ["disabled"]
        if self.expires_at is not None and self.expires_at <= now:
            found.append("expired")
        if self.review_at is not None and self.review_at <= now:
            found.append("review due")
        return found or ["enabled"]


@dataclass(frozen=True)
class AdminUser:
    id: str
    display_name: str
    is_admin: bool
    is_agent: bool
    archived_at: datetime | None
    last_seen_at: datetime | None

    @classmethod
    def parse(cls, row: JSONObject) -> "AdminUser":
        return cls(id=str(row.get("id")), display_name=str(pick(row, "displayName", "display_name",
                                                                default=row.get("id"))),
                   is_admin=bool(pick(row, "isAdmin", "is_admin", default=False)),
                   is_agent=bool(pick(row, "isAgent", "is_agent", default=False)),
                   archived_at=parse_time(pick(row, "archivedAt", "archived_at")),
                   last_seen_at=parse_time(pick(row, "lastSeenAt", "last_seen_at")))


# --- Prometheus text exposition ----------------------------------------------------------------

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?\s*$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample line; comments, blank and malformed lines are skipped."""
    samples = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        name, raw_labels, raw_value = match.groups()
        labels = {key: re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], value)
                  for key, value in _LABEL.findall(raw_labels or "")}
        try:
            value = float(raw_value)  # also +Inf, -Inf, NaN
        except ValueError:
            continue
        samples.append((name, labels, value))
    return samples


@dataclass(frozen=True)
class MetricsSample:
    """One scrape, reduced to what the doctor strip shows; rates come from two of them."""
    requests: float
    buckets: dict[float, float]  # latency histogram, all routes added up: upper bound -> cumulative count
    streams: float
    sockets: float
    outbox: float
    loop_lag: float | None
    at: float = 0.0  # the client's monotonic clock when scraped
    raw: JSONObject = field(default_factory=dict, repr=False)

    @classmethod
    def parse(cls, text: str, at: float = 0.0) -> "MetricsSample":
        totals: dict[str, float] = {}
        buckets: dict[float, float] = {}
        for name, labels, value in parse_exposition(text):
            if name == "coord_http_request_duration_seconds_bucket" and "le" in labels:
                bound = float(labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + value
            else:
                totals[name] = totals.get(name, 0.0) + value
        return cls(requests=totals.get("coord_http_requests_total", 0.0), buckets=buckets,
                   streams=totals.get("coord_sse_streams", 0.0), sockets=totals.get("coord_notebook_sockets", 0.0),
                   outbox=totals.get("coord_push_outbox_pending", 0.0),
                   loop_lag=totals.get("coord_event_loop_lag_seconds"), at=at, raw=totals)

    def rate(self, before: "MetricsSample | None") -> float | None:
        """Requests per second since `before` (None without one, or across a counter reset)."""
        if before is None or self.at <= before.at or self.requests < before.requests:
            return None
        return (self.requests - before.requests) / (self.at - before.at)

    def p99(self, before: "MetricsSample | None" = None) -> float | None:
        """The 99th percentile latency of the requests since `before` (all of them without it), seconds."""
        since = {b: c - (before.buckets.get(b, 0.0) if before else 0.0) for b, c in self.buckets.items()}
        return quantile(0.99, since)


def quantile(q: float, buckets: dict[float, float]) -> float | None:
    """Like PromQL histogram_quantile: linear within the bucket holding the rank; None without requests."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = q * buckets[bounds[-1]]
    lower_bound, lower_count = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # beyond the largest finite bucket: its bound is what we know
            width = count - lower_count
            return lower_bound + (bound - lower_bound) * ((rank - lower_count) / width if width else 1.0)
        lower_bound, lower_count = bound, count
    return lower_bound
