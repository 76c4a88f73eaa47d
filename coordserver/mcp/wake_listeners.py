"""Push over MCP: `notifications/resources/updated` for `coord://wake` on the wake pulses that SSE gets.

Two ways to be told, one per era of the protocol:
- handshake era (2025 revisions): a stateful session subscribes with `resources/subscribe`; the
  notification goes out on the session's standalone (GET) stream;
- 2026-07-28: `subscriptions/listen` naming `coord://wake`; the response of that request is the stream.

Either one is a `Listener` of its identity. The WakePulser asks `has_listener` (so an identity whose only
open connection is MCP still gets its coalesced pulses) and calls `pulse` once per pulse. Every session
and listen stream is registered with the TokenGuard, so revoking, rotating or archiving ends it.
"""
from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY, ResourceUpdated, event_to_notification

from ..principal import Principal
from ..realtime.presence import PresenceTracker
from ..realtime.revocation import TokenGuard

log = logging.getLogger("coord.mcp")

WAKE_URI = "coord://wake"
LISTEN_BUFFER = 16  # pulses are level triggers: a listener that has 16 unread ones may drop more
SESSIONS_PER_IDENTITY = 20  # open handshake-era sessions per identity and process; a 21st closes the oldest


class Session:
    """A handshake-era MCP session, owned by the token that opened it; ends with that token."""

    def __init__(self, hub: "WakeListeners", session_id: str, principal: Principal):
        self.hub = hub
        self.session_id = session_id
        self.identity = principal.identity
        self.token_id: int | None = principal.token_id
        self.expires_at: datetime | None = principal.expires_at
        self.subscriber: Any = None  # the ServerSession that subscribed to coord://wake, if any

    def pulse(self) -> None:
        subscriber = self.subscriber
        if subscriber is not None:
            self.hub.coord.spawn(_send_updated(subscriber), f"mcp-wake:{self.identity}")

    def end(self, reason: str) -> None:
        log.info("closing MCP session of %s: token %s", self.identity, reason)
        self.hub.close_session(self)


async def _send_updated(subscriber) -> None:
    try:
        await subscriber.send_resource_updated(WAKE_URI)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass  # the session closed meanwhile


class ListenStream:
    """A 2026-07-28 `subscriptions/listen` stream naming coord://wake."""

    def __init__(self, principal: Principal, send):
        self.identity = principal.identity
        self.token_id: int | None = principal.token_id
        self.expires_at: datetime | None = principal.expires_at
        self._send = send

    def pulse(self) -> None:
        try:
            self._send.send_nowait(ResourceUpdated(WAKE_URI))
        except anyio.WouldBlock:
            pass  # unread pulses are waiting already: one more says nothing new
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def end(self, reason: str) -> None:
        self._send.close()


class WakeListeners:
    """coord.services.mcp: MCP sessions and wake listeners by identity."""

    def __init__(self, coord, presence: PresenceTracker, tokens_guard: TokenGuard):
        self.coord = coord
        self.presence = presence  # a listener keeps its identity online, as a stream does
        self.tokens_guard = tokens_guard  # closes the listeners of revoked tokens
        self.sessions: dict[str, Session] = {}
        self.by_identity: dict[str, set] = {}
        self.manager: StreamableHTTPSessionManager | None = None  # set by the endpoint

    # --- what the WakePulser asks ---------------------------------------------------------------
    def has_listener(self, identity: str) -> bool:
        return bool(self.by_identity.get(identity))

    def identities(self) -> list[str]:
        return list(self.by_identity)

    def pulse(self, identity: str) -> None:
        for listener in list(self.by_identity.get(identity, ())):
            listener.pulse()

    # --- sessions (handshake era) ---------------------------------------------------------------
    def session_opened(self, session_id: str, principal: Principal) -> None:
        session = self.sessions[session_id] = Session(self, session_id, principal)
        self._guard().admit(session)
        self._cap(principal.identity)

    def _cap(self, identity: str) -> None:
        """At most SESSIONS_PER_IDENTITY sessions of one identity: the oldest beyond it are closed, so
        one identity cannot fill the server's session table (the SDK's max_sessions) for everyone."""
        self.prune()  # sessions the SDK ended (idle, DELETE) hold no slot
        own = [s for s in self.sessions.values() if s.identity == identity]  # oldest first (insertion order)
        for session in own[:-SESSIONS_PER_IDENTITY]:
            log.info("closing the oldest MCP session of %s: more than %d open", identity, SESSIONS_PER_IDENTITY)
            self.close_session(session)

    def owns(self, session_id: str, principal: Principal) -> bool:
        """Whether `session_id` is a session this token opened (the SDK's own rule for serving it)."""
        session = self.sessions.get(session_id)
        return session is not None and (session.identity, session.token_id) == (principal.identity,
                                                                                 principal.token_id)

    def session_closed(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            self._guard().release(session)
            self._unlisten(session)

    def subscribe(self, session_id: str | None, subscriber) -> None:
        session = self.sessions.get(session_id or "")
        if session is None:
            raise MCPError(types.INVALID_REQUEST, "resources/subscribe needs a session (initialize first)")
        session.subscriber = subscriber
        self._listen(session)

    def unsubscribe(self, session_id: str | None) -> None:
        session = self.sessions.get(session_id or "")
        if session is not None:
            session.subscriber = None
            self._unlisten(session)

    def close_session(self, session: Session) -> None:
        self.session_closed(session.session_id)
        transport = self._transports().get(session.session_id)
        if transport is not None:
            self.coord.spawn(transport.terminate(), f"mcp-close:{session.identity}")

    def prune(self) -> None:
        """Forget sessions the SDK has ended (idle timeout, client DELETE, crash)."""
        live = self._transports()
        for session_id in [s for s in self.sessions if s not in live]:
            self.session_closed(session_id)

    def live_session_ids(self):
        return self._transports().keys()

    def _transports(self) -> dict:
        # The manager keeps its live sessions here (mcp 2.3); nothing public ends one from outside.
        return getattr(self.manager, "_server_instances", {}) if self.manager is not None else {}

    # --- listen streams (2026-07-28) ------------------------------------------------------------
    async def listen(self, ctx: ServerRequestContext, params: types.SubscriptionsListenRequestParams,
                     principal: Principal) -> types.SubscriptionsListenResult:
        if ctx.request_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        asked = params.notifications
        honored_uris = [u for u in asked.resource_subscriptions or () if u == WAKE_URI]
        honored = types.SubscriptionFilter(resource_subscriptions=honored_uris or None)
        meta: dict[str, Any] = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        send, receive = anyio.create_memory_object_stream[ResourceUpdated](LISTEN_BUFFER)
        stream = ListenStream(principal, send)
        if honored_uris:
            self._listen(stream)
        self._guard().admit(stream)
        try:
            await ctx.session.send_notification(
                types.SubscriptionsAcknowledgedNotification(
                    params=types.SubscriptionsAcknowledgedNotificationParams(notifications=honored, _meta=meta)),
                related_request_id=ctx.request_id)
            async for event in receive:
                await ctx.session.send_notification(event_to_notification(event, meta),
                                                    related_request_id=ctx.request_id)
        finally:
            self._guard().release(stream)
            self._unlisten(stream)
            send.close()
            receive.close()
        return types.SubscriptionsListenResult(_meta=meta)

    def _listen(self, listener) -> None:
        """A wake listener is an open event stream: its identity stays online while it listens (presence
        source "sse", as for an SSE stream), however long it stays idle."""
        listeners = self.by_identity.setdefault(listener.identity, set())
        if listener not in listeners:
            listeners.add(listener)
            self.presence.connection_opened(listener.identity, "sse")

    def _unlisten(self, listener) -> None:
        listeners = self.by_identity.get(listener.identity)
        if listeners is not None and listener in listeners:
            listeners.discard(listener)
            if not listeners:
                del self.by_identity[listener.identity]
            self.presence.connection_closed(listener.identity, "sse")

    def _guard(self):
        return self.tokens_guard

    async def prune_forever(self, every: float = 30.0) -> None:
        while True:
            await asyncio.sleep(every)
            self.prune()
