"""The application factory: blueprints, the one error handler, request hooks and the lifespan."""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from quart import Quart, g, request

from .api.common import OtherThan, RowIdConverter
from .api.metrics import instrument
from .auth import request_token
from .context import Coord
from .db import Store
from .domain import guards, kinds, users
from .errors import render_error
from .events.bus import make_bus
from .gate import client_address
from .hotpaths import HotPaths
from .jsonprovider import StandardJSONProvider
from .mcp.endpoint import McpMount
from .services import build as build_services
from .settings import MAX_BODY_BYTES, Settings
from .timeutil import Clock
from .events.channels import EVENTS, Channel, EventsPayload

log = logging.getLogger("coord")

# Routes whose auth may arrive as ?token= (streams and sockets cannot always set headers).
_QUERY_TOKEN_PATHS = frozenset({"/api/stream"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _blueprints():
    from .api import (admin, alerts, asks, auth, buzz, chat, directory, doctor, messages, meta, metrics, notebook,
                      presence, recurring, reservations, silences, skills, stream, swarm, users, wake,
                      workflows)
    from .web import onboard
    return [auth.bp, meta.bp, onboard.bp, messages.bp, chat.bp, directory.bp, skills.bp, buzz.broadcast_bp,
            buzz.buzz_bp, buzz.ingest_bp, wake.bp, doctor.bp, notebook.bp, swarm.bp, workflows.bp, recurring.bp,
            stream.bp, presence.bp, admin.bp, users.bp, metrics.bp, asks.bp, alerts.bp,
            silences.bp, reservations.bp]


class CoordQuart(Quart):
    json_provider_class = StandardJSONProvider


def create_app(settings: Settings | None = None, clock: Clock | None = None) -> Quart:
    settings = settings or Settings.from_env()
    clock = clock or Clock()
    app = CoordQuart("coordserver")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["PROPAGATE_EXCEPTIONS"] = False
    # "/api//x" or a "%2F" decoding to "//" would otherwise get werkzeug's HTML 308 redirect (which
    # bypasses error handlers) instead of our JSON 404; every /api answer is JSON.
    app.url_map.merge_slashes = False
    app.url_map.converters["other_than"] = OtherThan
    app.url_map.converters["rowid"] = RowIdConverter

    store = Store(settings.database_url, clock, prepare=settings.pg_prepare, pg_writers=settings.pg_writers)
    store.guard_rule = guards.LoopRule(settings.loop_messages, settings.loop_minutes, settings.loop_cooldown_minutes,
                                       settings.chat_wake_cooldown_minutes)
    coord = Coord(settings=settings, store=store, bus=make_bus(store.database), clock=clock)
    app.extensions["coord"] = coord
    for blueprint in _blueprints():
        app.register_blueprint(blueprint)
    services = coord.services = build_services(coord, app)  # after the routes: /mcp's tools are shaped by them
    store.on_events = services.metrics.process.count_events
    gate = services.gate

    @app.before_serving
    async def startup() -> None:
        coord.shutting_down = asyncio.Event()
        await asyncio.to_thread(store.open)
        store.on_commit = _publisher(coord)
        await store.write(users.ensure_admin_rows, settings.admin_rows())
        await store.write(kinds.declare_env_agents, settings.env_agents)
        await coord.bus.start()
        store.on_commit_told = _publisher(coord, told=True)
        store.teller = coord.bus
        for service in services.lifecycle():
            await service.start()

    @app.after_serving
    async def shutdown() -> None:
        assert coord.shutting_down is not None  # startup made it
        coord.shutting_down.set()
        for service in reversed(services.lifecycle()):
            try:
                await service.stop()
            except Exception:
                log.exception("stopping %s failed", type(service).__name__)
        await coord.cancel_tasks()
        await coord.bus.stop()
        await asyncio.to_thread(store.close)

    instrument(app)  # first of the request hooks

    def _request_client() -> str:
        return client_address(settings.trusted_proxy, request.headers.get("X-Forwarded-For", ""),
                              request.remote_addr)

    @app.before_request
    async def authenticate_and_limit() -> None:
        path = request.path
        if request.method in _BODY_METHODS:
            # Read the (size-limited) body before any early answer such as a 401: a response sent
            # while the request body is still unread cannot reuse the keep-alive connection, and
            # the client's next request on it would fail.
            await request.body
        token = request_token(allow_query_token=path in _QUERY_TOKEN_PATHS)
        g.token_given = token is not None
        admission = await gate.admit(request.method, path, token, _request_client, request.query_string)
        g.principal, g.rate_headers = admission.principal, admission.rate_headers

    @app.after_request
    async def add_rate_headers(response):
        for name, value in getattr(g, "rate_headers", {}).items():
            response.headers[name] = value
        return response

    @app.errorhandler(Exception)
    async def render(error: Exception):
        """Every error, HTTPException and ApiError included, rendered as the hot paths render it."""
        answer = render_error(error, request.method, request.path)
        return answer.body, answer.status, answer.headers

    # /mcp beside the routes; its tools call the whole application (`app`, hot paths included) in-process.
    # Quart's documented middleware hook; its type says method, so the checker refuses the assignment.
    app.asgi_app = McpMount(app.asgi_app, services.mcp_endpoint)  # type: ignore[method-assign]
    if settings.hot_paths:
        app.asgi_app = HotPaths(app, coord, gate)  # type: ignore[method-assign]
    return app


def _publisher(coord: Coord, told: bool = False):
    """After a commit: announce new log rows, then the unit's other effects (`told`: other processes were told
    in the transaction, Bus.telling)."""
    def publish(max_event: int | None, effects: list[tuple[Channel[Any], Any]]) -> None:
        bus = coord.bus
        send = bus.publish_told if told else bus.publish
        if max_event is not None:
            announced: EventsPayload = {"maxId": max_event}
            send(EVENTS, announced)
        for channel, payload in effects:
            send(channel, payload)
    return publish
