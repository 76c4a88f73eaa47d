"""Webhook target validation: only globally routable addresses, unless the host is allow-listed.

A URL's host is normalised the way the resolver would read it: IPv6 literals, dotted quads and the
legacy numeric IPv4 forms `inet_aton` accepts (`127.1`, `0x7f000001`, `0177.0.0.1`, `2130706433`, `0`).
Hostnames are resolved and every address they resolve to must pass too. Delivery resolves once, checks
those addresses and connects to the checked one (`pin`), so a DNS answer that changes between the check
and the connection (rebinding) cannot reach an address that was not checked.

Hosts (as written, or their normalised address) listed in SERVICE_WEBHOOK_ALLOWED_HOSTS are accepted
even when private. The resolver is injectable (`Coord.resolver`) so tests are deterministic.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from .domain.fields import WS
from .errors import Invalid

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]  # (host, port) -> addresses as text; raises OSError when it cannot

_LEGACY_IPV4 = re.compile(r"^[0-9a-fx.]+$")
_SHARED = ipaddress.ip_network("100.64.0.0/10")
# last_error of a delivery the address check refused: it fails at once, and doctor reports it.
REFUSED_PREFIX = "refused: "
_ALLOW_HINT = " (list it in SERVICE_WEBHOOK_ALLOWED_HOSTS to allow it)"


class Refused(Exception):
    """The target is not allowed; the message says why."""


def system_resolver(host: str, port: int) -> list[str]:
    """Blocking DNS: call from a thread."""
    # An AF_INET or AF_INET6 sockaddr starts with the address as text.
    return [str(info[4][0]) for info in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)]


def literal_address(host: str) -> Address | None:
    """The address a host names literally, legacy IPv4 spellings included; None for a hostname."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def address_problem(address: Address) -> str | None:
    """Why an address may not be a webhook target, or None when it is globally routable."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return "an IPv4-mapped IPv6 address"
        if address.is_site_local:
            return "a site-local address"
        if address.sixtofour is not None and address_problem(address.sixtofour):
            return f"a 6to4 address embedding {address.sixtofour}"
    checks = (("is_unspecified", "the unspecified address"), ("is_loopback", "a loopback address"),
              ("is_multicast", "a multicast address"), ("is_link_local", "a link-local address"))
    for attribute, text in checks:
        if getattr(address, attribute):
            return text
    if address == ipaddress.IPv4Address("255.255.255.255"):
        return "the broadcast address"
    if address.version == 4 and address in _SHARED:
        return "a shared (carrier-grade NAT) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "not a globally routable address"
    return None


@dataclass(frozen=True)
class Target:
    """A URL's parts as the checks see them."""
    url: str
    scheme: str
    host: str          # lowercased, trailing dots removed, IPv6 without brackets
    port: int
    literal: Address | None


URL_MAX = 500  # a push webhook URL
# RFC 3986's IPv6address, as a bracketed host: a literal address is resolve()'s to judge, like a name.
_H16, _IPV4 = "[0-9A-Fa-f]{1,4}", r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LS32 = f"(?:{_H16}:{_H16}|{_IPV4})"
IPV6 = "(?:" + "|".join([
    f"(?:{_H16}:){{6}}{_LS32}", f"::(?:{_H16}:){{5}}{_LS32}", f"(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}",
    f"(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}", f"(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}",
    f"(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}", f"(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}",
    f"(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}", f"(?:(?:{_H16}:){{0,6}}{_H16})?::"]) + ")"
# Its shape, as parse() reads it (trimmed; an http(s) scheme in any case, a host without user info - a name or a
# bracketed IPv6 address - an optional numeric port): the request model states it; whether the host may be reached is resolve()'s.
URL_PATTERN = rf"^{WS}*[Hh][Tt][Tt][Pp][Ss]?://(?:\[{IPV6}\]|[A-Za-z0-9._~!$&'()*+,;=%-]*[A-Za-z0-9_~-][A-Za-z0-9._~!$&'()*+,;=%-]*)(?::(?:[0-9]{{1,4}}|[1-5][0-9]{{4}}|6[0-4][0-9]{{3}}|65[0-4][0-9]{{2}}|655[0-2][0-9]|6553[0-5]))?(?:[/?#][^\x00]*)?$"


def parse(url: object, max_length: int = URL_MAX) -> Target:
    if not isinstance(url, str) or not url.strip():
        raise Invalid("url must be a non-empty string")
    url = url.strip()
    if len(url) > max_length:
        raise Invalid(f"url longer than {max_length} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Invalid(f"url is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Invalid("url must be an http:// or https:// URL with a host")
    host = parts.hostname.lower().rstrip(".")
    if not host:
        raise Invalid("url must be an http:// or https:// URL with a host")
    return Target(url, parts.scheme, host, port or (443 if parts.scheme == "https" else 80), literal_address(host))


def _allowed(target: Target, allowed_hosts: frozenset[str], address: Address | None = None) -> bool:
    names = {target.host} | ({str(target.literal)} if target.literal else set())
    if address is not None:
        names.add(str(address))
    return bool(names & allowed_hosts)


def _check_name(target: Target) -> None:
    host = target.host
    if host == "localhost" or host.endswith(".localhost") or host.endswith(".internal"):
        raise Refused(f"{host} is a local or internal host name")


def resolve(target: Target, allowed_hosts: frozenset[str], resolver: Resolver) -> list[Address]:
    """Every address the target may be reached at, each checked. Raises Refused naming what is wrong,
    or OSError when the name cannot be resolved. Blocking: call from a thread."""
    if target.literal is not None:
        addresses = [target.literal]
    else:
        if not _allowed(target, allowed_hosts):
            _check_name(target)
        addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in resolver(target.host, target.port)]
        if not addresses:
            raise OSError(f"{target.host} has no address")
    for address in addresses:
        if _allowed(target, allowed_hosts, address):
            continue
        problem = address_problem(address)
        if problem:
            shown = target.host if target.literal is not None else f"{target.host} resolves to {address}, which"
            spelled = f" ({address})" if target.literal is not None and str(address) != target.host else ""
            raise Refused(f"{shown}{spelled} is {problem}")
    return addresses


def validate_webhook_url(url: object, allowed_hosts: frozenset[str], resolver: Resolver = system_resolver) -> str:
    """Registration-time check (blocking: call from a thread). Returns the cleaned URL or raises Invalid.
    A hostname that does not resolve now is accepted: delivery checks again before every attempt."""
    target = parse(url)
    try:
        resolve(target, allowed_hosts, resolver)
    except Refused as exc:
        raise Invalid(f"Webhook URL refused: {exc}{_ALLOW_HINT}") from None
    except (OSError, ValueError):
        pass
    return target.url


@dataclass(frozen=True)
class Pinned:
    """Where to send a delivery: the checked address, with the original host for Host and TLS."""
    url: str                 # the URL with its host replaced by the checked address
    host_header: str
    sni_hostname: str | None  # https to a hostname: the name to send in SNI and verify the certificate for


def pin(url: str, allowed_hosts: frozenset[str], resolver: Resolver = system_resolver) -> Pinned:
    """Delivery-time check: resolve once, check, and address the request to the checked address.
    Raises Refused (fail the delivery) or OSError (retry later). Blocking: call from a thread."""
    target = parse(url, max_length=10_000)
    address = resolve(target, allowed_hosts, resolver)[0]
    parts = urlsplit(target.url)
    shown = f"[{address}]" if address.version == 6 else str(address)
    netloc = shown if parts.port is None else f"{shown}:{parts.port}"
    pinned_url = parts._replace(netloc=netloc).geturl()  # userinfo dropped: never sent anyway
    hostname = parts.hostname
    assert hostname is not None  # parse() took the URL: it names a host
    original = hostname if ":" not in hostname else f"[{hostname}]"
    host_header = original if parts.port is None else f"{original}:{parts.port}"
    sni = hostname if target.scheme == "https" and target.literal is None else None
    return Pinned(pinned_url, host_header, sni)
