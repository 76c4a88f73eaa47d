"""Admission: the one step every HTTP request passes before its handler.

Who is calling (bearer token), whether they may call now (fixed-window rate limit per route class,
`/mcp` and `POST /onboard` included, plus one per client address for refused tokens) and a presence
touch for a known caller. Both request paths use it: the Quart hook in app.py and the
ASGI hot paths in hotpaths.py, so neither can drift from the other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .auth import TokenResolver
from .principal import Principal
from .errors import Invalid
from .ratelimit import RateLimiter, route_class
from .realtime.presence import PresenceTracker

MCP_PATH = "/mcp"  # the MCP endpoint's (mcp/endpoint.py): a first request there is announced as `via: "mcp"`


@dataclass(frozen=True)
class Admission:
    principal: Principal | None
    token_given: bool
    rate_headers: dict[str, str] = field(default_factory=dict)


class Gate:
    def __init__(self, coord, resolver: TokenResolver, limiter: RateLimiter, presence: PresenceTracker):
        self._presence = presence
        self._resolver = resolver
        self._limiter = limiter
        self._rate_limits = coord.settings.rate_limits

    async def admit(self, method: str, path: str, token: str | None, client: Callable[[], str],
                    query: bytes = b"") -> Admission:
        """Raises RateLimited when the caller's window is full; `client` names an anonymous caller.
        `path` is decoded, `query` the raw query string: NUL in either is refused (see no_nul)."""
        principal = await self._resolver.resolve(token) if token else None
        rate_headers: dict[str, str] = {}
        klass = route_class(method, path) if self._rate_limits else None
        if klass:
            rate_headers = self._limiter.check(klass, principal.identity if principal else client())
        if self._rate_limits and token and principal is None:
            self._limiter.check("refused", client(), "requests with an invalid token")
        if principal is not None:
            self._presence.touch(principal.identity, "api", via="mcp" if path == MCP_PATH else None)
        no_nul(path, query)
        return Admission(principal, token is not None, rate_headers)


def client_address(trusted_proxy: bool, forwarded_for: str, remote_addr: str | None) -> str:
    """Who an anonymous caller is, for rate limiting: the first X-Forwarded-For hop behind a trusted proxy."""
    if trusted_proxy and forwarded_for:
        return forwarded_for.split(",")[0].strip()
    return remote_addr or "unknown"


def no_nul(path: str, query: bytes) -> None:
    """NUL (U+0000) is refused in any text, on both backends (PostgreSQL cannot store or compare it):
    here for path segments and query values, before any handler could pass one to the database."""
    if "\x00" in path or b"%00" in query or b"\x00" in query:
        raise Invalid("NUL (%00) is not allowed in a path or query parameter")
