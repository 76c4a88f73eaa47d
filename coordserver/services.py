"""The app's long-lived parts, as typed fields of one container (`coord.services`).

Built once by `build` in create_app. Every field is required and type-checked when the container is
made, so a part left out or wired wrongly stops the app at startup, not a request later.
"""
from __future__ import annotations

import typing
from dataclasses import dataclass, fields

from .auth import TokenResolver
from .gate import Gate
from .mcp.endpoint import McpEndpoint
from .mcp.wake_listeners import WakeListeners
from .metrics import AppMetrics, process_metrics
from .ratelimit import RateLimiter
from .realtime.ask_waiters import AskWaiters
from .realtime.loopmon import LoopMonitor
from .realtime.notebook.history import PageHistory
from .realtime.notebook.rooms import NotebookRooms
from .realtime.presence import PresenceTracker
from .realtime.webhook_delivery import PushService
from .realtime.revocation import TokenGuard
from .realtime.sse import SSEHub
from .realtime.inbox_cache import InboxCache
from .realtime.wake_cache import WakeCache
from .realtime.wake_pulse import WakePulser
from .scheduler import Scheduler
from .webhook_cache import WebhookCache


@dataclass(frozen=True)
class Services:
    tokens: TokenResolver
    tokens_guard: TokenGuard
    presence: PresenceTracker
    loopmon: LoopMonitor
    wake: WakePulser
    wake_cache: WakeCache
    inbox_cache: InboxCache  # inbox pages kept while this process is alone on its database
    webhooks: WebhookCache  # which webhook an ingest URL names (ingests refused from memory)
    notebook: NotebookRooms
    history: PageHistory  # notebook page versions: the timed pass and pruning
    scheduler: Scheduler
    sse: SSEHub
    push: PushService
    metrics: AppMetrics
    ratelimit: RateLimiter
    gate: Gate
    mcp: WakeListeners  # MCP sessions and wake listeners by identity
    mcp_endpoint: McpEndpoint
    asks: AskWaiters  # who waits on which ask (MCP ask_human)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, hints[f.name]):
                raise TypeError(f"services.{f.name} must be a {hints[f.name].__name__}, not {type(value).__name__}")

    def lifecycle(self) -> list:
        """The parts with start()/stop(), started in this order and stopped in reverse."""
        return [self.tokens, self.presence, self.tokens_guard, self.loopmon, self.wake, self.wake_cache,
                self.inbox_cache, self.webhooks,
                self.notebook, self.history, self.scheduler, self.sse, self.push, self.asks, self.mcp_endpoint]


def build(coord, app) -> Services:
    """`app` has its routes registered: the MCP endpoint calls them and shapes its tools from them.

    Each part is handed the parts it uses when it is made, so this function is the one place that says
    who depends on whom (parts reach no other part through `coord.services`)."""
    settings, clock = coord.settings, coord.clock
    tokens = TokenResolver(coord)
    limiter = RateLimiter({**settings.rate_limit_overrides, "webhook": settings.ingest_per_webhook},
                          clock=lambda: clock.now().timestamp())
    presence = PresenceTracker(coord)
    tokens_guard = TokenGuard(coord, tokens)
    gate = Gate(coord, tokens, limiter, presence)
    sse = SSEHub(coord, tokens_guard, presence)
    wake_cache = WakeCache(coord)
    asks = AskWaiters(coord)
    endpoint = McpEndpoint(coord, gate, app, presence, tokens_guard, asks)
    loopmon = LoopMonitor(coord)
    scheduler = Scheduler(coord, on_escalated=lambda count: process_metrics().buzz_escalated.inc(count))
    notebook = NotebookRooms(coord)
    return Services(tokens=tokens, tokens_guard=tokens_guard, presence=presence,
                    loopmon=loopmon, wake=WakePulser(coord, sse, endpoint.hub, wake_cache, presence),
                    wake_cache=wake_cache, inbox_cache=InboxCache(coord), webhooks=WebhookCache(coord), notebook=notebook,
                    history=PageHistory(coord, notebook.env_admins), scheduler=scheduler, sse=sse,
                    push=PushService(coord), metrics=AppMetrics(coord, scheduler, loopmon), ratelimit=limiter,
                    gate=gate, mcp=endpoint.hub, mcp_endpoint=endpoint, asks=asks)
