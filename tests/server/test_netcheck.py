"""coordserver/netcheck.py's rules as plain functions (the HTTP side is tests/server/realtime/
test_webhook_targets.py): URL parsing and its refusals, host names that are local by name, the allow
list, every resolved address checked, and what delivery connects to. Fast: the mutation run of
netcheck.py (scripts/mutation.sh) uses these."""
from __future__ import annotations

import ipaddress

import pytest

from coordserver.errors import Invalid
from coordserver.netcheck import (Refused, address_problem, parse, pin, resolve, system_resolver,
                                  validate_webhook_url)

PUBLIC, PUBLIC6 = "93.184.216.34", "2606:4700::6810:1"


class Resolver:
    def __init__(self, *answer: str):
        self.answer, self.calls = list(answer), []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append((host, port))
        return list(self.answer)


def refusal(url: str, resolver=None, allowed: frozenset[str] = frozenset()) -> str:
    with pytest.raises(Refused) as refused:
        resolve(parse(url), allowed, resolver or Resolver(PUBLIC))
    return str(refused.value)


def test_parse_takes_http_and_https_urls_with_their_ports():
    plain = parse("  http://Hooks.Example.NET./a?b=1 ")
    assert (plain.url, plain.scheme, plain.host, plain.port, plain.literal) == (
        "http://Hooks.Example.NET./a?b=1", "http", "hooks.example.net", 80, None)
    assert parse("https://hooks.example.net/").port == 443
    assert parse("https://hooks.example.net:8443/").port == 8443
    assert parse("http://hooks.example.net:8080/").port == 8080
    assert parse("http://[::1]:9/").literal == ipaddress.ip_address("::1")


@pytest.mark.parametrize("url,message", [
    (None, "url must be a non-empty string"),
    (5, "url must be a non-empty string"),
    ("   ", "url must be a non-empty string"),
    ("ftp://example.com/x", "url must be an http:// or https:// URL with a host"),
    ("http:///x", "url must be an http:// or https:// URL with a host"),
    ("http://.../x", "url must be an http:// or https:// URL with a host"),
    ("http://example.com:99999/", "url is not a valid URL: Port out of range 0-65535"),
    ("http://example.com/" + "x" * 482, "url longer than 500 characters"),
])
def test_parse_refuses_with_a_reason(url, message):
    with pytest.raises(Invalid) as refused:
        parse(url)
    assert refused.value.message == message


def test_the_length_limit_is_inclusive():
    at_limit = "http://example.com/" + "x" * 481
    assert len(at_limit) == 500 and parse(at_limit).url == at_limit
    assert len(at_limit + "x") == 501
    with pytest.raises(Invalid):
        parse(at_limit + "x")


@pytest.mark.parametrize("host", ["localhost", "api.localhost", "svc.internal"])
def test_local_and_internal_names_are_refused_whatever_they_resolve_to(host):
    assert refusal(f"http://{host}/x") == f"{host} is a local or internal host name"


def test_the_allow_list_admits_a_name_and_its_addresses():
    resolver = Resolver("10.0.0.7")
    assert resolve(parse("http://svc.internal:8080/x"), frozenset({"svc.internal"}), resolver) == [
        ipaddress.ip_address("10.0.0.7")]
    assert resolver.calls == [("svc.internal", 8080)]
    # an allow-listed address does not admit the others the name resolves to
    assert refusal("http://mixed.example/x", Resolver("127.0.0.2", "10.0.0.1"), frozenset({"127.0.0.2"})) == (
        "mixed.example resolves to 10.0.0.1, which is a private address")
    # a literal, spelled any way, is admitted by its normalised address
    assert resolve(parse("http://2130706433/"), frozenset({"127.0.0.1"}), Resolver()) == [
        ipaddress.ip_address("127.0.0.1")]
    # nothing is admitted by the word None
    assert refusal("http://private.example/x", Resolver("10.0.0.1"), frozenset({"None"})).endswith(
        "is a private address")


def test_a_name_with_no_address_is_an_oserror():
    with pytest.raises(OSError) as error:
        resolve(parse("http://empty.example/"), frozenset(), Resolver())
    assert str(error.value) == "empty.example has no address"


def test_scoped_addresses_are_checked_without_their_zone():
    assert resolve(parse("http://h.example/"), frozenset(), Resolver(f"{PUBLIC6}%eth0")) == [
        ipaddress.ip_address(PUBLIC6)]
    assert refusal("http://h.example/", Resolver("fe80::1%eth0")) == (
        "h.example resolves to fe80::1, which is a link-local address")


@pytest.mark.parametrize("address,problem", [
    ("2002:7f00:1::", "a 6to4 address embedding 127.0.0.1"),
    ("2002:a00:1::", "a 6to4 address embedding 10.0.0.1"),
    ("::ffff:8.8.8.8", "an IPv4-mapped IPv6 address"),
    ("fec0::1", "a site-local address"),
    ("0.0.0.0", "the unspecified address"),
    ("::1", "a loopback address"),
    ("169.254.1.1", "a link-local address"),
    ("100.64.0.1", "a shared (carrier-grade NAT) address"),
    ("192.168.0.1", "a private address"),
    ("fd00::1", "a private address"),
])
def test_address_problems(address, problem):
    assert address_problem(ipaddress.ip_address(address)) == problem


@pytest.mark.parametrize("address", [PUBLIC, PUBLIC6, "2002:5db8:d822::1"])  # the last: 6to4 of PUBLIC
def test_public_addresses_pass(address):
    assert address_problem(ipaddress.ip_address(address)) is None


def test_pin_addresses_the_checked_address_and_keeps_the_host():
    pinned = pin("http://hooks.example.net/a", frozenset(), Resolver(PUBLIC, PUBLIC6))
    assert (pinned.url, pinned.host_header, pinned.sni_hostname) == (
        f"http://{PUBLIC}/a", "hooks.example.net", None)
    scoped = pin("https://hooks.example.net/a", frozenset(), Resolver(f"{PUBLIC6}%eth0"))
    assert scoped.url == f"https://[{PUBLIC6}]/a" and scoped.sni_hostname == "hooks.example.net"
    literal = pin(f"http://[{PUBLIC6}]:8080/x", frozenset(), Resolver())
    assert (literal.url, literal.host_header) == (f"http://[{PUBLIC6}]:8080/x", f"[{PUBLIC6}]:8080")
    assert pin(f"http://[{PUBLIC6}]/x", frozenset(), Resolver()).host_header == f"[{PUBLIC6}]"


def test_pin_takes_stored_urls_up_to_10000_characters():
    """Registration caps a URL at 500; delivery reads what was stored, up to 10,000."""
    long_url = "http://hooks.example.net/" + "x" * (10_000 - 25)
    assert len(long_url) == 10_000 and pin(long_url, frozenset(), Resolver(PUBLIC)).url.endswith("x" * 100)
    with pytest.raises(Invalid):
        pin(long_url + "x", frozenset(), Resolver(PUBLIC))


def test_validate_webhook_url():
    assert validate_webhook_url(" https://hooks.example.net/a ", frozenset(), Resolver(PUBLIC)) == (
        "https://hooks.example.net/a")
    with pytest.raises(Invalid) as refused:
        validate_webhook_url("https://hooks.example.net/a", frozenset(), Resolver(PUBLIC, "10.0.0.1"))
    assert refused.value.message == (
        "Webhook URL refused: hooks.example.net resolves to 10.0.0.1, which is a private address"
        " (list it in SERVICE_WEBHOOK_ALLOWED_HOSTS to allow it)")

    def unresolvable(host, port):
        raise OSError("no DNS")
    assert validate_webhook_url("https://later.example/a", frozenset(), unresolvable) == "https://later.example/a"


def test_the_system_resolver_answers_addresses_once_each():
    assert system_resolver("127.0.0.1", 80) == ["127.0.0.1"]
    assert system_resolver("::1", 443) == ["::1"]
