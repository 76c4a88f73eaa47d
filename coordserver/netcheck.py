"""Webhook target validation: no loopback, private, link-local or internal targets unless allow-listed."""
from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlparse

from .errors import Invalid

_BLOCKED_NETWORKS = [ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "::1/128", "0.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
    "fc00::/7", "169.254.0.0/16", "fe80::/10", "::/128", "::ffff:0:0/96",
)]


def _blocked_address(address: ipaddress._BaseAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in _BLOCKED_NETWORKS if network.version == address.version)


def check_url_shape(url: object, max_length: int = 500) -> str:
    if not isinstance(url, str) or not url.strip():
        raise Invalid("url must be a non-empty string")
    url = url.strip()
    if len(url) > max_length:
        raise Invalid(f"url longer than {max_length} characters")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise Invalid("url must be an http:// or https:// URL with a host")
    return url


def validate_webhook_url(url: object, allowed_hosts: frozenset[str]) -> str:
    """Checks the URL as written (registration time). Returns the cleaned URL or raises Invalid."""
    url = check_url_shape(url)
    host = urlparse(url).hostname.lower().rstrip(".")
    if host in allowed_hosts:
        return url
    if host == "localhost" or host.endswith(".localhost") or host.endswith(".internal"):
        raise Invalid(f"Webhook URL refused: {host} is a local or internal host "
                      "(list it in SERVICE_WEBHOOK_ALLOWED_HOSTS to allow it)")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return url
    if _blocked_address(address):
        raise Invalid(f"Webhook URL refused: {host} is a private, loopback or link-local address "
                      "(list it in SERVICE_WEBHOOK_ALLOWED_HOSTS to allow it)")
    return url


def resolved_target_allowed(url: str, allowed_hosts: frozenset[str]) -> tuple[bool, str]:
    """Delivery-time check on the resolved addresses. Blocking (DNS): call it from a thread."""
    host = (urlparse(url).hostname or "").lower().rstrip(".")
    if host in allowed_hosts:
        return True, ""
    try:
        validate_webhook_url(url, allowed_hosts)
        port = urlparse(url).port or (443 if url.startswith("https") else 80)
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except Invalid as exc:
        return False, exc.message
    except OSError as exc:
        return False, f"cannot resolve {host}: {exc.strerror or exc}"
    for info in infos:
        if _blocked_address(ipaddress.ip_address(info[4][0])):
            return False, f"{host} resolves to a private or loopback address"
    return True, ""
