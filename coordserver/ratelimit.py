"""Fixed 60 s windows keyed by identity (or client address) and route class.

A token that is refused (unknown, revoked, expired, archived) also counts in the "refused" class of its
client address, whatever the route: guessing tokens is limited alike on REST, /mcp and every other door."""
from __future__ import annotations

import math
import time

from .errors import RateLimited
from .sendroute import send_recipient

WINDOW_SECONDS = 60
LIMITS = {"register": 5, "verify": 20, "invites": 10, "send": 30, "wake": 20, "presence": 30,
          "ingest": 30, "other": 60,
          "mcp": 120,  # /mcp exchanges (initialize, tools/list, ...); a tool call also counts in its route's class
          "refused": 20,  # requests with a token that is refused, per client address, on every door
          "webhook": 60}  # ingests per Buzz webhook, whoever sends them (COORD_INGEST_PER_WEBHOOK)
MCP_PATH = "/mcp"
ASKS_PATH = "/api/asks"


def route_class(method: str, path: str) -> str | None:
    """None = exempt."""
    if path == MCP_PATH:
        return "mcp"
    if path == "/onboard" and method == "POST":
        return "register"  # the browser form registers exactly like /api/auth/register
    if not path.startswith("/api/") and path != "/api":
        return None
    if path in ("/api/health", "/api/metrics") or path.startswith("/api/skill"):
        return None
    if path == "/api/auth/register":
        return "register"
    if path == "/api/auth/verify":
        return "verify"
    if path.startswith("/api/auth/invites"):
        return "invites"
    if method == "POST" and (send_recipient(path) is not None or path == ASKS_PATH):
        return "send"  # an ask is sent like mail, and shares its limit
    if path == "/api/wake" or path.startswith("/api/wake/"):
        return "wake"
    if path == "/api/presence":
        return "presence"
    if path.startswith("/api/ingest/"):
        return "ingest"
    return "other"


class RateLimiter:
    def __init__(self, overrides: dict[str, int] | None = None, clock=time.time):
        self.limits = {**LIMITS, **(overrides or {})}
        self._clock = clock
        self._windows: dict[tuple[str, str], tuple[int, int]] = {}

    def check(self, klass: str, key: str, what: str = "requests") -> dict[str, str]:
        """Counts one request. Returns the X-RateLimit headers, or raises RateLimited ("Too many <what>")."""
        limit = self.limits[klass]
        now = self._clock()
        window = int(now // WINDOW_SECONDS)
        start, count = self._windows.get((klass, key), (window, 0))
        if start != window:
            start, count = window, 0
            if len(self._windows) > 50_000:
                self._windows = {k: v for k, v in self._windows.items() if v[0] == window}
        reset = (window + 1) * WINDOW_SECONDS
        if count >= limit:
            retry = max(1, math.ceil(reset - now))
            error = RateLimited(retry, f"Too many {what}; retry in {retry} s")
            error.headers.update(self._headers(limit, 0, reset))
            raise error
        self._windows[(klass, key)] = (start, count + 1)
        return self._headers(limit, limit - count - 1, reset)

    @staticmethod
    def _headers(limit: int, remaining: int, reset: int) -> dict[str, str]:
        return {"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": str(remaining),
                "X-RateLimit-Reset": str(reset)}
