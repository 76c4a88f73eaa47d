"""coordserver/ratelimit.py's rules as plain functions (over HTTP: test_hotpaths, test_hardening): which
class each route counts in, fixed 60 s windows per (class, key), the headers, the 429 and its
Retry-After. Fast: the mutation run of ratelimit.py (scripts/mutation.sh) uses these."""
from __future__ import annotations

import pytest

from coordserver.errors import RateLimited
from coordserver.ratelimit import LIMITS, RateLimiter, route_class


@pytest.mark.parametrize("method,path,klass", [
    ("POST", "/mcp", "mcp"), ("GET", "/mcp", "mcp"),
    ("POST", "/onboard", "register"), ("GET", "/onboard", None),
    ("GET", "/", None), ("GET", "/static/x.js", None), ("GET", "/apix", None),
    ("GET", "/api", "other"),
    ("GET", "/api/health", None), ("GET", "/api/metrics", None), ("GET", "/api/skill", None),
    ("GET", "/api/skill/swarm", None), ("GET", "/api/skills", None),
    ("POST", "/api/auth/register", "register"),
    ("GET", "/api/auth/verify", "verify"), ("POST", "/api/auth/verify", "verify"),
    ("POST", "/api/auth/invites", "invites"), ("DELETE", "/api/auth/invites/3", "invites"),
    ("POST", "/api/mailboxes/bob/messages", "send"),
    ("GET", "/api/mailboxes/bob/messages", "other"),
    ("POST", "/api/mailboxes/me/messages", "other"),
    ("POST", "/api/mailboxes/bob/messages/ack", "other"),
    ("POST", "/api/mailboxes/bob/sent", "other"),
    ("POST", "/api/asks", "send"), ("GET", "/api/asks", "other"), ("POST", "/api/asks/3/answer", "other"),
    ("GET", "/api/wake", "wake"), ("GET", "/api/wake/carol", "wake"), ("GET", "/api/wakeup", "other"),
    ("GET", "/api/presence", "presence"), ("GET", "/api/presence/x", "other"),
    ("POST", "/api/ingest/ci/token", "ingest"),
    ("GET", "/api/users", "other"), ("GET", "/api/health/x", "other"), ("GET", "/api/metricsx", "other"),
])
def test_route_classes(method, path, klass):
    assert route_class(method, path) == klass


def test_the_default_limits():
    assert LIMITS == {"register": 5, "verify": 20, "invites": 10, "send": 30, "wake": 20, "presence": 30,
                      "ingest": 30, "other": 60, "mcp": 120, "refused": 20, "webhook": 60}


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_window_allows_exactly_the_limit_then_refuses_until_it_ends():
    clock = Clock(6000.0)  # a window starts at 6000 (100 * 60)
    limiter = RateLimiter({"send": 3}, clock=clock)
    headers = [limiter.check("send", "alice") for _ in range(3)]
    assert headers == [{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": str(n), "X-RateLimit-Reset": "6060"}
                       for n in (2, 1, 0)]
    clock.now = 6000.5
    with pytest.raises(RateLimited) as refused:
        limiter.check("send", "alice", "messages")
    assert refused.value.message == "Too many messages; retry in 60 s"
    assert refused.value.headers == {"Retry-After": "60", "X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0",
                                     "X-RateLimit-Reset": "6060"}
    clock.now = 6058.2
    with pytest.raises(RateLimited) as refused:
        limiter.check("send", "alice")
    assert refused.value.message == "Too many requests; retry in 2 s" and refused.value.headers["Retry-After"] == "2"
    clock.now = 6059.9
    with pytest.raises(RateLimited) as refused:
        limiter.check("send", "alice")
    assert refused.value.headers["Retry-After"] == "1"  # never 0
    # other keys and other classes count on their own
    assert limiter.check("send", "bob")["X-RateLimit-Remaining"] == "2"
    assert limiter.check("other", "alice") == {"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "59",
                                               "X-RateLimit-Reset": "6060"}
    clock.now = 6060.0  # the next window: a fresh count
    assert limiter.check("send", "alice") == {"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "2",
                                              "X-RateLimit-Reset": "6120"}
    assert limiter.check("send", "alice")["X-RateLimit-Remaining"] == "1"


def test_refusals_do_not_count():
    clock = Clock(60.0)
    limiter = RateLimiter({"verify": 1}, clock=clock)
    limiter.check("verify", "k")
    for _ in range(3):
        with pytest.raises(RateLimited):
            limiter.check("verify", "k")
    assert limiter._windows[("verify", "k")] == (1, 1)


def test_overrides_replace_single_limits():
    limiter = RateLimiter({"send": 50}, clock=Clock(0.0))
    assert limiter.limits == {**LIMITS, "send": 50}
    assert RateLimiter(clock=Clock(0.0)).limits == LIMITS


def test_old_windows_are_dropped_once_there_are_many():
    clock = Clock(0.0)
    limiter = RateLimiter(clock=clock)
    limiter._windows = {("other", f"k{i}"): (0, 1) for i in range(50_001)}
    clock.now = 30.0
    limiter.check("other", "k0")  # the same window: nothing dropped
    assert len(limiter._windows) == 50_001
    clock.now = 60.0
    limiter.check("other", "k1")  # a key of the old window starts a new one: the old windows go
    assert limiter._windows == {("other", "k1"): (1, 1)}
    small = RateLimiter(clock=clock)
    small._windows = {("other", f"k{i}"): (0, 1) for i in range(50_000)}
    small.check("other", "k1")  # at most 50,000 entries: kept
    assert len(small._windows) == 50_000 and small._windows[("other", "k1")] == (1, 1)


def test_the_real_clock_is_the_default():
    assert RateLimiter().check("other", "k")["X-RateLimit-Remaining"] == "59"
