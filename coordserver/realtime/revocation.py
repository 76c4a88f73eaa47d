"""Open connections end when the token that opened them stops being valid.

A stream (`GET /api/stream`) or notebook socket is admitted with the principal of its token and
registered here. It ends:
- when the token is revoked or rotated, or its identity archived: the domain logs a `token_revoked`
  event in the same transaction (`domain.identities.log_revocation`). That row is a control event: it
  has no audience, so it never reaches an SSE stream, a resume or a webhook. Every process's SSE hub
  reads it from the log like any other row (the bus only says "new rows"; a process that missed the
  announcement still reads the row) and hands it to `TokenGuard.on_logged`, which closes the
  connections of those tokens and drops them from the token cache at once;
- when the token's `expiresAt` passes (the app's clock): a sweep every EXPIRY_CHECK_SECONDS.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Protocol

from ..domain.identities import REVOCATION_EVENT as EVENT_TYPE

log = logging.getLogger("coord.revocation")

EXPIRY_CHECK_SECONDS = 0.5


class TokenCache(Protocol):
    """What the guard needs of the token cache (auth.TokenResolver): to forget tokens now revoked."""

    def forget(self, token_ids, identity: str | None = None) -> None: ...


class Guarded(Protocol):
    identity: str
    token_id: int | None
    expires_at: datetime | None

    def end(self, reason: str) -> None: ...


class TokenGuard:
    """coord.services.tokens_guard: every open stream and socket, by token and by identity."""

    def __init__(self, coord, tokens: TokenCache):
        self.coord = coord
        self.tokens = tokens  # the token cache it empties of what is revoked
        self.by_token: dict[int, set[Guarded]] = {}
        self.by_identity: dict[str, set[Guarded]] = {}
        self.expiring: set[Guarded] = set()
        self.revoked: set[int] = set()  # token ids heard revoked: a late admission is refused too

    async def start(self) -> None:
        self.coord.spawn(self._sweep(), "token-expiry")

    async def stop(self) -> None:
        return None

    @property
    def open_connections(self) -> int:
        return sum(len(conns) for conns in self.by_identity.values())

    def admit(self, conn: Guarded) -> None:
        """Register a connection; one whose token was revoked or expired meanwhile ends at once."""
        self.by_identity.setdefault(conn.identity, set()).add(conn)
        if conn.token_id is not None:
            self.by_token.setdefault(conn.token_id, set()).add(conn)
        if conn.expires_at is not None:
            self.expiring.add(conn)
        if conn.token_id is not None and conn.token_id in self.revoked:
            conn.end("revoked")
        elif conn.expires_at is not None and conn.expires_at <= self.coord.now():
            conn.end("expired")

    def release(self, conn: Guarded) -> None:
        _discard(self.by_identity, conn.identity, conn)
        if conn.token_id is not None:
            _discard(self.by_token, conn.token_id, conn)
        self.expiring.discard(conn)

    def on_logged(self, event_type: str, data: dict) -> None:
        """A control row read from the event log (by the SSE hub, in log order)."""
        if event_type != EVENT_TYPE:
            return
        token_ids = [t for t in data.get("tokenIds") or () if isinstance(t, int)]
        identity, reason = data.get("identity"), data.get("reason") or "revoked"
        whole = identity if data.get("wholeIdentity") and isinstance(identity, str) else None
        self.revoked.update(token_ids)
        self.tokens.forget(token_ids, whole)
        targets = {c for t in token_ids for c in self.by_token.get(t, ())}
        if whole is not None:
            targets.update(self.by_identity.get(whole, ()))
        for conn in targets:
            conn.end(reason)
        if targets:
            log.info("closed %d connection(s): token %s", len(targets), reason)

    def expire_due(self) -> int:
        now = self.coord.now()
        due = [c for c in self.expiring if c.expires_at is not None and c.expires_at <= now]
        for conn in due:
            self.expiring.discard(conn)
            conn.end("expired")
        return len(due)

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_SECONDS)
            if self.expiring:
                self.expire_due()


def _discard(index: dict, key, conn) -> None:
    conns = index.get(key)
    if conns is not None:
        conns.discard(conn)
        if not conns:
            del index[key]
