"""coordserver/gate.py's admission rules as plain calls (over HTTP: test_hotpaths, test_hardening, test_auth):
who is calling, which window counts the request (the caller's identity, else the client address; a refused
token also counts in its address's "refused" window), that a known caller is seen, NUL refused in a path
or query, and who an anonymous caller is behind a proxy. Fast: the mutation run of gate.py uses these.

The token resolver and presence are stand-ins that record what the gate asked of them; the limiter is
the real one on a fixed clock."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from coordserver.errors import Invalid, RateLimited
from coordserver.gate import Admission, Gate, client_address, no_nul
from coordserver.principal import Principal
from coordserver.ratelimit import RateLimiter

NOW = 1_800_000_030.0  # 30 s into a window: it resets at 1_800_000_060
KNOWN = {"alice-token": Principal("alice", False, 7, "db")}


class Resolver:
    def __init__(self):
        self.asked: list[str | None] = []

    async def resolve(self, token):
        self.asked.append(token)
        return KNOWN.get(token)


class Presence:
    def __init__(self):
        self.touched: list[tuple[str, str]] = []

    def touch(self, identity, source, via=None):
        self.touched.append((identity, source) if via is None else (identity, source, via))


def make_gate(rate_limits: bool = True, **limits):
    resolver, presence = Resolver(), Presence()
    coord = SimpleNamespace(settings=SimpleNamespace(rate_limits=rate_limits))
    return Gate(coord, resolver, RateLimiter(limits, clock=lambda: NOW), presence), resolver, presence


def headers(limit: int, remaining: int) -> dict[str, str]:
    return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": "1800000060"}


async def test_a_known_caller_is_admitted_counted_by_identity_and_seen():
    gate, resolver, presence = make_gate(other=1)
    addresses = []
    admission = await gate.admit("GET", "/api/users", "alice-token", lambda: addresses.append(1) or "10.0.0.9")
    assert admission == Admission(KNOWN["alice-token"], True, headers(1, 0))
    assert resolver.asked == ["alice-token"] and presence.touched == [("alice", "api")]
    assert addresses == []  # a known caller's window is its identity's: the address is not needed
    # the address's own window is untouched; alice's is full
    assert (await gate.admit("GET", "/api/users", None, lambda: "10.0.0.9")).rate_headers == headers(1, 0)
    with pytest.raises(RateLimited):
        await gate.admit("GET", "/api/users", "alice-token", lambda: "10.0.0.9")


async def test_a_request_to_the_mcp_endpoint_is_seen_via_mcp():
    gate, _resolver, presence = make_gate(rate_limits=False)
    await gate.admit("POST", "/mcp", "alice-token", lambda: "10.0.0.9")
    await gate.admit("GET", "/api/users", "alice-token", lambda: "10.0.0.9")
    assert presence.touched == [("alice", "api", "mcp"), ("alice", "api")]


async def test_an_anonymous_caller_is_counted_by_address_and_seen_by_no_one():
    gate, resolver, presence = make_gate(register=2)
    admission = await gate.admit("POST", "/api/auth/register", None, lambda: "10.0.0.9")
    assert admission == Admission(None, False, headers(2, 1))
    assert resolver.asked == [] and presence.touched == []
    assert (await gate.admit("POST", "/api/auth/register", None, lambda: "10.0.0.8")).rate_headers == headers(2, 1)
    assert (await gate.admit("POST", "/api/auth/register", None, lambda: "10.0.0.9")).rate_headers == headers(2, 0)


async def test_an_exempt_route_has_no_headers_and_counts_nothing():
    gate, _resolver, presence = make_gate(other=0, refused=0)
    admission = await gate.admit("GET", "/api/health", "alice-token", lambda: "10.0.0.9")
    assert admission == Admission(KNOWN["alice-token"], True, {})
    assert presence.touched == [("alice", "api")]
    assert (await gate.admit("GET", "/api/health", None, lambda: "10.0.0.9")) == Admission(None, False, {})


async def test_a_refused_token_counts_in_its_address_refused_window_too():
    gate, _resolver, presence = make_gate(refused=2, other=5)
    admission = await gate.admit("GET", "/api/users", "guessed", lambda: "10.0.0.9")
    assert admission == Admission(None, True, headers(5, 4))  # counted by address, as if anonymous
    assert presence.touched == []
    assert (await gate.admit("GET", "/api/users", None, lambda: "10.0.0.9")).rate_headers == headers(5, 3)
    # on an exempt route too: every door counts a refused token
    await gate.admit("GET", "/api/health", "guessed", lambda: "10.0.0.9")
    with pytest.raises(RateLimited) as refused:
        await gate.admit("GET", "/api/health", "guessed", lambda: "10.0.0.9")
    assert refused.value.message == "Too many requests with an invalid token; retry in 30 s"
    # another address, and a known caller from the same address, are not refused
    await gate.admit("GET", "/api/health", "guessed", lambda: "10.0.0.8")
    assert (await gate.admit("GET", "/api/health", "alice-token", lambda: "10.0.0.9")).principal.identity == "alice"


async def test_a_full_window_refuses_with_the_route_class_message():
    gate, *_ = make_gate(send=1)
    await gate.admit("POST", "/api/mailboxes/bob/messages", "alice-token", lambda: "x")
    with pytest.raises(RateLimited) as refused:
        await gate.admit("POST", "/api/mailboxes/bob/messages", "alice-token", lambda: "x")
    assert refused.value.message == "Too many requests; retry in 30 s"


async def test_with_rate_limits_off_nothing_is_counted():
    gate, _resolver, presence = make_gate(rate_limits=False, refused=0, other=0)
    admission = await gate.admit("GET", "/api/users", "guessed", lambda: "10.0.0.9")
    assert admission == Admission(None, True, {})
    admission = await gate.admit("GET", "/api/users", "alice-token", lambda: "10.0.0.9")
    assert admission == Admission(KNOWN["alice-token"], True, {})
    assert presence.touched == [("alice", "api")]


@pytest.mark.parametrize("path, query", [("/api/x\x00y", b""), ("/api/users", b"q=a%00b"),
                                         ("/api/users", b"q=a\x00b")])
async def test_nul_in_a_path_or_query_is_refused(path, query):
    with pytest.raises(Invalid) as refused:
        no_nul(path, query)
    assert refused.value.message == "NUL (%00) is not allowed in a path or query parameter"
    gate, *_ = make_gate()
    with pytest.raises(Invalid):
        await gate.admit("GET", path, None, lambda: "x", query)


async def test_text_without_nul_passes():
    no_nul("/api/users/a%2500", b"q=%25&r=00")
    gate, *_ = make_gate()
    assert (await gate.admit("GET", "/api/users", None, lambda: "x", b"q=0")).token_given is False


@pytest.mark.parametrize("trusted, forwarded, remote, who", [
    (True, "203.0.113.7, 10.0.0.1", "10.0.0.1", "203.0.113.7"),
    (True, " 203.0.113.7 ", "10.0.0.1", "203.0.113.7"),
    (True, "", "10.0.0.1", "10.0.0.1"),
    (False, "203.0.113.7", "10.0.0.1", "10.0.0.1"),
    (False, "", None, "unknown"),
    (True, "", None, "unknown"),
])
def test_who_an_anonymous_caller_is(trusted, forwarded, remote, who):
    assert client_address(trusted, forwarded, remote) == who
