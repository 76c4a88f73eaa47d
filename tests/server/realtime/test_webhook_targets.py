"""Webhook targets over real HTTP: every non-public spelling is refused at registration, hostnames are
resolved and checked, a refused delivery fails at once and shows in doctor, and delivery connects to the
address it checked (no second DNS lookup), with an injected resolver so each case is deterministic."""
from __future__ import annotations

import threading

import pytest

from coordserver.netcheck import Refused, pin
from coordserver.timeutil import FrozenClock
from tests.helpers import client
from tests.sse_helpers import emit, message_event
from tests.server.realtime.test_push import deliveries, first, kick, receiver, register, wait_until  # noqa: F401 (fixture)

# (URL, what the 400 must name), straight from the report plus their IPv6 and broadcast cousins.
REFUSED = [
    ("http://2130706433/", "2130706433 (127.0.0.1) is a loopback address"),
    ("http://0177.0.0.1/", "0177.0.0.1 (127.0.0.1) is a loopback address"),
    ("http://0x7f000001/", "0x7f000001 (127.0.0.1) is a loopback address"),
    ("http://127.1/", "127.1 (127.0.0.1) is a loopback address"),
    ("http://0/", "0 (0.0.0.0) is the unspecified address"),
    ("http://[::127.0.0.1]/", "::127.0.0.1 (::7f00:1) is a reserved address"),
    ("http://[::ffff:127.0.0.1]/", "is an IPv4-mapped IPv6 address"),
    ("http://100.64.0.1/", "100.64.0.1 is a shared (carrier-grade NAT) address"),
    ("http://[fec0::1]/", "fec0::1 is a site-local address"),
    ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
    ("http://[ff02::1]/", "ff02::1 is a multicast address"),
    ("http://255.255.255.255/", "255.255.255.255 is the broadcast address"),
    ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
    ("http://127.0.0.1./x", "127.0.0.1 is a loopback address"),
]


class Resolver:
    """Answers from a script: the n-th lookup gets answers[n] (the last one repeats); records each call."""

    def __init__(self, *answers: str):
        self.answers = list(answers)
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, host: str, port: int) -> list[str]:
        with self.lock:
            self.calls.append(host)
            return [self.answers[min(len(self.calls), len(self.answers)) - 1]]


@pytest.mark.parametrize("url,reason", REFUSED)
def test_registration_refuses_every_non_public_spelling(server, url, reason):
    with client(server, "bob") as bob:
        response = bob.post("/api/auth/webhook", json={"url": url})
        assert response.status_code == 400, url
        error = response.json()["error"]
        assert error.startswith("Webhook URL refused: ") and reason in error, error
        assert "SERVICE_WEBHOOK_ALLOWED_HOSTS" in error
        assert bob.get("/api/auth/webhook").json()["configured"] is False


@pytest.mark.single_process  # the resolver is replaced in this process
def test_a_hostname_is_checked_by_what_it_resolves_to(make_server):
    srv = make_server()
    srv.coord.resolver = Resolver("10.0.0.7")
    with client(srv, "bob") as bob:
        response = bob.post("/api/auth/webhook", json={"url": "https://hooks.example.net/agent"})
        assert response.status_code == 400
        assert "hooks.example.net resolves to 10.0.0.7, which is a private address" in response.json()["error"]
        srv.coord.resolver = Resolver("93.184.216.34")
        assert bob.post("/api/auth/webhook", json={"url": "https://hooks.example.net/agent"}).status_code == 200


# A hostname answering with several addresses, one of them not public, in every position: each must pass.
MIXED = [("93.184.216.34", "10.0.0.7"), ("10.0.0.7", "93.184.216.34"),
         ("2606:4700::6810:1", "93.184.216.34", "::1"), ("93.184.216.34", "169.254.169.254", "2606:4700::6810:1")]
MIXED_PROBLEM = {"10.0.0.7": "a private address", "::1": "a loopback address",
                 "169.254.169.254": "a link-local address"}


@pytest.mark.single_process  # the resolver is replaced in this process
def test_every_address_a_hostname_resolves_to_must_pass_registration(make_server):
    srv = make_server()
    with client(srv, "bob") as bob:
        for answer in MIXED:
            srv.coord.resolver = lambda host, port, answer=answer: list(answer)
            response = bob.post("/api/auth/webhook", json={"url": "https://hooks.example.net/agent"})
            assert response.status_code == 400, answer
            bad = next(a for a in answer if a in MIXED_PROBLEM)
            assert (f"hooks.example.net resolves to {bad}, which is {MIXED_PROBLEM[bad]}"
                    in response.json()["error"]), answer
            assert bob.get("/api/auth/webhook").json()["configured"] is False
        srv.coord.resolver = lambda host, port: ["93.184.216.34", "2606:4700::6810:1"]  # all public: accepted
        assert bob.post("/api/auth/webhook", json={"url": "https://hooks.example.net/agent"}).status_code == 200


@pytest.mark.parametrize("answer", MIXED)
def test_every_address_must_pass_at_delivery_too(answer):
    """pin() connects to the first address, but refuses the target when any address is not public."""
    with pytest.raises(Refused) as refused:
        pin("https://hooks.example.net/agent", frozenset(), lambda host, port: list(answer))
    bad = next(a for a in answer if a in MIXED_PROBLEM)
    assert str(refused.value) == f"hooks.example.net resolves to {bad}, which is {MIXED_PROBLEM[bad]}"


def test_the_allow_list_accepts_a_host_by_name_or_by_normalised_address(make_server):
    srv = make_server(env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1,hooks.lan"})
    srv.coord.resolver = Resolver("192.168.1.9")
    with client(srv, "bob") as bob:
        assert bob.post("/api/auth/webhook", json={"url": "http://2130706433:8080/x"}).status_code == 200
        assert bob.post("/api/auth/webhook", json={"url": "http://hooks.lan/x"}).status_code == 200
        assert bob.post("/api/auth/webhook", json={"url": "http://10.0.0.1/x"}).status_code == 400


def test_rebinding_after_the_check_never_reaches_loopback(make_server, receiver):
    """Public when registered, loopback from then on: the delivery re-checks, is refused, fails at once
    (no retries) and doctor says so; the loopback target never hears a thing."""
    trap = receiver()
    srv = make_server(clock=FrozenClock())
    srv.coord.resolver = Resolver("93.184.216.34", "127.0.0.1")
    register(srv, "bob", f"http://hook.example.net:{trap.port}/hook")
    emit(srv, *message_event("bob", 1))
    wait_until(lambda: first(srv).status == "failed")
    row = first(srv)
    assert row.attempts == 1 and row.last_error == (
        "refused: hook.example.net resolves to 127.0.0.1, which is a loopback address")
    kick(srv)
    # A marker after the kick: once the sender has tried (and failed) it, it has passed the failed row.
    emit(srv, *message_event("bob", 2))
    wait_until(lambda: [d.status for d in deliveries(srv)] == ["failed", "failed"])
    assert [d.attempts for d in deliveries(srv)] == [1, 1] and trap.calls == []

    caller = {p["id"]: p for p in client(srv, "bob").get("/api/doctor").json()["probes"]}
    assert caller["webhooks"]["status"] == "fail"
    assert "refused by the address check" in caller["webhooks"]["summary"]
    assert "hook.example.net resolves to 127.0.0.1" in caller["webhooks"]["summary"]
    admin = {p["id"]: p for p in client(srv, "admin").get("/api/doctor/admin").json()["probes"]}
    assert admin["outbox"]["status"] == "warn" and admin["outbox"]["details"]["refused"] == 2  # and the marker
    assert "2 refused by the address check, last for bob" in admin["outbox"]["summary"]


def test_delivery_connects_to_the_address_it_checked(make_server, receiver):
    """The check at delivery sees 127.0.0.2 (allow-listed); any later lookup would say 127.0.0.1. The
    push must arrive at 127.0.0.2, with the original Host header, after exactly one lookup."""
    target = receiver(host="127.0.0.2")
    trap = receiver(host="127.0.0.1", port=target.port)
    srv = make_server(env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.2"}, clock=FrozenClock())
    resolver = srv.coord.resolver = Resolver("127.0.0.2", "127.0.0.2", "127.0.0.1")
    register(srv, "bob", f"http://hook.example.net:{target.port}/hook?x=1")
    emit(srv, *message_event("bob", 1))
    call = target.wait_calls(1)[0]
    assert call["headers"]["Host"] == f"hook.example.net:{target.port}" and call["path"] == "/hook?x=1"
    wait_until(lambda: first(srv).status == "delivered")
    assert trap.calls == [] and resolver.calls == ["hook.example.net", "hook.example.net"]


def test_https_keeps_the_name_for_tls():
    """Connect to the checked address, but present and verify the original name (SNI, Host)."""
    pinned = pin("https://hooks.example.net:8443/a?b=1", frozenset(), lambda host, port: ["2606:4700::6810:1"])
    assert pinned.url == "https://[2606:4700::6810:1]:8443/a?b=1"
    assert pinned.host_header == "hooks.example.net:8443" and pinned.sni_hostname == "hooks.example.net"
    literal = pin("https://93.184.216.34/x", frozenset(), lambda host, port: [])
    assert literal.url == "https://93.184.216.34/x" and literal.sni_hostname is None
