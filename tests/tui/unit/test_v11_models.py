"""coordtui/client/v11.py on its own: workflows and admin users as the client reads them (both spellings of
every key), what a workflow's state says at an instant, and the doctor strip's reading of GET /api/metrics
(Prometheus text: samples, labels, the latency histogram, rates and the 99th percentile)."""
from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import pytest

from coordtui.client.v11 import AdminUser, MetricsSample, Workflow, parse_exposition, quantile

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=timezone.utc)


def test_a_workflow_reads_either_spelling_and_defaults_to_enabled():
    camel = Workflow.parse({"id": 7, "title": "Deploy", "description": "how", "documentUrl": "https://d",
                            "enabled": False, "expiresAt": "2026-11-28T10:00:00Z", "reviewAt": "2026-11-29T09:00:00Z",
                            "createdBy": "alice"})
    assert camel == Workflow("7", "Deploy", "how", "https://d", False, NOW + timedelta(hours=1),
                             NOW + timedelta(days=1), "alice")
    snake = Workflow.parse({"id": "w", "title": None, "document_url": "https://s", "expires_at": "2026-11-28 08:00:00",
                            "review_at": "2026-11-28T09:00:00+00:00", "created_by": "bob"})
    assert snake == Workflow("w", "", None, "https://s", True, NOW - timedelta(hours=1), NOW, "bob")
    assert Workflow.parse({}) == Workflow("None", "", None, None, True, None, None, None)


def test_a_workflows_state_at_an_instant():
    def workflow(enabled=True, expires=None, review=None) -> Workflow:
        return Workflow("w", "t", None, None, enabled, expires, review, None)
    assert workflow().states(NOW) == ["enabled"]
    assert workflow(enabled=False).states(NOW) == ["disabled"]
    assert workflow(expires=NOW, review=NOW).states(NOW) == ["expired", "review due"]  # due at the instant itself
    assert workflow(expires=NOW + timedelta(seconds=1), review=NOW + timedelta(seconds=1)).states(NOW) == ["enabled"]
    assert workflow(False, NOW - timedelta(days=1), NOW + timedelta(days=1)).states(NOW) == ["disabled", "expired"]
    assert workflow(review=NOW - timedelta(days=1)).states(NOW) == ["review due"]


def test_an_admin_user_reads_either_spelling_and_defaults():
    assert AdminUser.parse({"id": "alice", "displayName": "Alice", "isAdmin": True, "isAgent": True,
                            "archivedAt": "2026-11-28T09:00:00Z", "lastSeenAt": "2026-11-28T08:00:00Z"}) == \
        AdminUser("alice", "Alice", True, True, NOW, NOW - timedelta(hours=1))
    assert AdminUser.parse({"id": "bot", "display_name": "Bot", "is_admin": 1, "is_agent": 1,
                            "archived_at": "2026-11-28T08:00:00Z", "last_seen_at": "2026-11-28T09:00:00Z"}) == \
        AdminUser("bot", "Bot", True, True, NOW - timedelta(hours=1), NOW)
    assert AdminUser.parse({"id": "carol"}) == AdminUser("carol", "carol", False, False, None, None)


EXPOSITION = r'''# HELP coord_http_requests_total Requests.
# TYPE coord_http_requests_total counter
coord_http_requests_total{method="GET",route="/api/wake",status="200"} 30
coord_http_requests_total{method="POST",route="/api/x",status="201"} 12 1732780800000

   coord_sse_streams 3
coord_notebook_sockets{room="a \"b\" \\ c\nd"} 2
coord_push_outbox_pending +Inf
coord_event_loop_lag_seconds NaN
not a sample line
coord_bad_value{a="1"} twelve
coord_http_request_duration_seconds_bucket{route="/api/wake",le="0.1"} 20
coord_http_request_duration_seconds_bucket{route="/api/wake",le="+Inf"} 30
coord_http_request_duration_seconds_bucket{route="/api/x",le="0.1"} 2
coord_http_request_duration_seconds_bucket{route="/api/x",le="+Inf"} 12
coord_http_request_duration_seconds_bucket{route="/api/y"} 5
'''


def test_the_exposition_gives_every_sample_line_and_skips_the_rest():
    samples = parse_exposition(EXPOSITION)
    assert [(name, labels) for name, labels, _ in samples] == [
        ("coord_http_requests_total", {"method": "GET", "route": "/api/wake", "status": "200"}),
        ("coord_http_requests_total", {"method": "POST", "route": "/api/x", "status": "201"}),
        ("coord_sse_streams", {}),
        ("coord_notebook_sockets", {"room": 'a "b" \\ c\nd'}),
        ("coord_push_outbox_pending", {}),
        ("coord_event_loop_lag_seconds", {}),
        ("coord_http_request_duration_seconds_bucket", {"route": "/api/wake", "le": "0.1"}),
        ("coord_http_request_duration_seconds_bucket", {"route": "/api/wake", "le": "+Inf"}),
        ("coord_http_request_duration_seconds_bucket", {"route": "/api/x", "le": "0.1"}),
        ("coord_http_request_duration_seconds_bucket", {"route": "/api/x", "le": "+Inf"}),
        ("coord_http_request_duration_seconds_bucket", {"route": "/api/y"})]
    values = [value for *_, value in samples]
    assert values[:5] == [30.0, 12.0, 3.0, 2.0, math.inf] and math.isnan(values[5]) and values[6:] == [
        20.0, 30.0, 2.0, 12.0, 5.0]
    assert parse_exposition("") == [] and parse_exposition("  # only a comment\n\n") == []


def test_a_scrape_adds_up_routes_and_reads_what_the_strip_shows():
    sample = MetricsSample.parse(EXPOSITION, at=5.0)
    assert (sample.requests, sample.streams, sample.sockets, sample.outbox, sample.at) == (42.0, 3.0, 2.0, math.inf, 5.0)
    assert sample.loop_lag is not None and math.isnan(sample.loop_lag)
    assert sample.buckets == {0.1: 22.0, math.inf: 42.0}  # a bucket without `le` is counted as an ordinary sample
    assert sample.raw["coord_http_request_duration_seconds_bucket"] == 5.0
    bare = MetricsSample.parse("coord_http_requests_total 7\n")
    assert (bare.requests, bare.buckets, bare.streams, bare.sockets, bare.outbox, bare.loop_lag, bare.at) == (
        7.0, {}, 0.0, 0.0, 0.0, None, 0.0)
    assert MetricsSample.parse("coord_sse_streams 1\n").requests == 0.0  # no request yet


def scrape(requests: float, at: float, fast: float, total: float) -> MetricsSample:
    return MetricsSample(requests, {0.1: fast, 1.0: total, math.inf: total}, 0, 0, 0, None, at)


def test_the_request_rate_since_the_last_scrape():
    before, after = scrape(100, 10.0, 0, 0), scrape(160, 13.0, 0, 0)
    assert after.rate(before) == 20.0
    assert after.rate(None) is None
    assert before.rate(after) is None  # an earlier scrape
    assert scrape(160, 10.0, 0, 0).rate(before) is None  # no time between them
    assert scrape(5, 20.0, 0, 0).rate(before) is None  # the server restarted: the counter began again
    assert scrape(100, 11.0, 0, 0).rate(before) == 0.0


def test_p99_of_the_requests_since_the_last_scrape():
    before = scrape(0, 0.0, 90, 100)
    after = scrape(0, 1.0, 90, 200)  # all 100 new requests took 0.1 to 1 s
    assert after.p99(before) == pytest.approx(0.1 + 0.9 * 0.99)
    assert after.p99() == pytest.approx(0.1 + 0.9 * (198 - 90) / 110)
    assert before.p99(before) is None  # nothing since
    first = MetricsSample(0, {0.1: 0.0, math.inf: 0.0}, 0, 0, 0, None, 0.0)  # a bucket the earlier scrape lacks
    later = MetricsSample(0, {0.1: 0.0, 0.5: 10.0, math.inf: 10.0}, 0, 0, 0, None, 1.0)
    assert later.p99(first) == pytest.approx(0.1 + 0.4 * 0.99)


@pytest.mark.parametrize("buckets, q, expected", [
    ({}, 0.99, None),
    ({0.1: 0.0, math.inf: 0.0}, 0.5, None),
    ({0.1: 10.0, 0.5: 10.0, math.inf: 10.0}, 0.5, 0.05),  # linear within the first bucket, from 0
    ({0.1: 0.0, 0.5: 10.0, math.inf: 10.0}, 0.5, 0.3),
    ({0.1: 0.0, 0.5: 1.0, math.inf: 1.0}, 0.5, 0.3),  # one request is enough
    ({0.1: 10.0, 0.5: 10.0, math.inf: 10.0}, 1.0, 0.1),  # the rank met at the first bucket's full count
    ({0.1: 5.0, 0.5: 5.0, math.inf: 10.0}, 0.99, 0.5),  # beyond the largest finite bucket: its bound
    ({0.1: 4.0, 0.2: 4.0, math.inf: 10.0}, 0.4, 0.1),  # count reached exactly at a bucket
    ({0.1: 0.0, 0.2: 0.0, 0.4: 8.0}, 0.0, 0.1),  # rank 0: the first bucket holds it, an empty width: its bound
    ({0.1: 1.0, 0.2: 2.0}, 1.5, 0.2),  # a rank no bucket reaches: the last bound
])
def test_quantile_reads_a_cumulative_histogram_as_promql_does(buckets, q, expected):
    found = quantile(q, buckets)
    assert found == (None if expected is None else pytest.approx(expected))
