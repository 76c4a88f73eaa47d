"""Who is calling: token lookup (database first, then environment) and the guards handlers use."""
from __future__ import annotations

import hmac
import time
from datetime import datetime, timedelta

from quart import g, request

from .errors import DatabaseFault, Forbidden, Unauthorized
from .principal import Principal, hash_token
from .timeutil import from_db
from .events.channels import TOKENS

_CACHE_SECONDS = 5.0
_LAST_USED_RESOLUTION = timedelta(seconds=60)


class TokenResolver:
    """Resolves bearer tokens. A short cache keeps auth off the database on hot paths. A unit that
    changes what a token may do announces it after its commit (`domain.identities.tokens_changed`, on
    the bus's "tokens" channel): this process drops those tokens from its cache before the caller hears
    the result, other processes when the NOTIFY arrives (milliseconds later), not after _CACHE_SECONDS.
    Revocations also reach processes that missed the announcement, through the log
    (realtime/revocation.py)."""

    def __init__(self, coord):
        self.coord = coord
        self._cache: dict[str, tuple[float, Principal | None, datetime | None]] = {}  # expires_at as stored
        self._env = {hash_token(t): spec for t, spec in coord.settings.env_tokens.items()}
        self._last_used: dict[int, object] = {}
        self._unsubscribe = None

    async def start(self) -> None:
        self._unsubscribe = self.coord.bus.subscribe(TOKENS, self._on_changed)

    async def stop(self) -> None:
        if self._unsubscribe:
            self._unsubscribe()

    def _on_changed(self, payload: dict) -> None:
        token_ids = [t for t in payload.get("tokenIds") or () if isinstance(t, int)]
        identity = payload.get("identity")
        self.forget(token_ids, identity if isinstance(identity, str) else None)

    def invalidate(self) -> None:
        self._cache.clear()

    def forget(self, token_ids: list[int], identity: str | None = None) -> None:
        """Drop these database tokens (and with `identity`, every token of that identity) from the cache."""
        ids = set(token_ids)
        for digest, (_until, principal, _expires) in list(self._cache.items()):
            if principal is None:
                if identity is not None:  # a refusal may be this identity's (archived environment token)
                    self._cache.pop(digest, None)
            elif principal.token_id in ids or principal.identity == identity:
                self._cache.pop(digest, None)

    async def resolve(self, token: str | None) -> Principal | None:
        if not token:
            return None
        digest = hash_token(token)
        cached = self._cache.get(digest)
        now_mono = time.monotonic()
        if cached and cached[0] > now_mono:
            principal, expires_at = cached[1], cached[2]
            if principal is None or expires_at is None or from_db(expires_at) > self.coord.now():
                self._maybe_touch(principal)
                return principal
        principal, expires_at = await self._lookup(digest)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[digest] = (now_mono + _CACHE_SECONDS, principal, expires_at)
        self._maybe_touch(principal)
        return principal

    async def _lookup(self, digest: str) -> tuple[Principal | None, datetime | None]:
        from .domain import identities
        try:
            row = await self.coord.store.read(identities.token_by_hash, digest)
        except DatabaseFault:
            # An environment token does not need the database: its holder (an operator's readiness
            # check, GET /api/doctor/admin) still gets in and is told the database is unavailable.
            principal = self._env_principal(digest)
            if principal is None:
                raise
            return principal, None
        now = self.coord.now()
        if row is not None and row.revoked_at is None and (row.expires_at is None or from_db(row.expires_at) > now):
            self._last_used[row.id] = from_db(row.last_used_at)
            return Principal(row.identity, row.is_admin, row.id, "db", from_db(row.expires_at)), row.expires_at
        principal = self._env_principal(digest)
        if principal is not None and await self.coord.store.read(identities.is_archived, principal.identity):
            return None, None  # refused until an admin unarchives it (API.md §18)
        return principal, None

    def _env_principal(self, digest: str) -> Principal | None:
        for known_digest, spec in self._env.items():
            if hmac.compare_digest(known_digest, digest):
                return Principal(spec.identity, spec.is_admin, None, "env")
        return None

    def _maybe_touch(self, principal: Principal | None) -> None:
        """Record last use at most once a minute per token, without making the caller wait."""
        if principal is None or principal.token_id is None:
            return
        now = self.coord.now()
        seen = self._last_used.get(principal.token_id)
        if seen is not None and now - seen < _LAST_USED_RESOLUTION:
            return
        self._last_used[principal.token_id] = now
        from .domain import identities
        self.coord.spawn(self.coord.store.write(identities.touch_token, principal.token_id), "touch-token")


def parse_bearer(header: str) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, or None."""
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return None


def bearer_token() -> str | None:
    return parse_bearer(request.headers.get("Authorization", ""))


def current_principal() -> Principal | None:
    return getattr(g, "principal", None)


def require_identity() -> Principal:
    return identity_required(current_principal(), getattr(g, "token_given", False))


def identity_required(principal: Principal | None, token_given: bool) -> Principal:
    if principal is None:
        if token_given:
            raise Unauthorized("Invalid key")
        raise Unauthorized("Authentication required: send Authorization: Bearer <token>")
    return principal


def require_admin(message: str = "Admin access required", **extra) -> Principal:
    principal = require_identity()
    if not principal.is_admin:
        raise Forbidden(message, **extra)
    return principal


def request_token(allow_query_token: bool) -> str | None:
    token = bearer_token()
    if token is None and allow_query_token:
        token = request.args.get("token") or None
    return token

