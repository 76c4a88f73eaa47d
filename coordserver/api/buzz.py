"""Buzz webhook configs (served under /api/broadcast and, identically, /api/buzz) and the public ingest."""
from __future__ import annotations

from datetime import timedelta
from typing import Awaitable, Callable

from quart import Blueprint, request

from ..auth import current_principal, require_identity
from ..context import coord
from ..domain import alerts, buzz
from ..jsonstrict import JSONObject
from ..principal import Principal
from ..schemas.buzz import BuzzEvents, BuzzEventsQuery, BuzzWebhook, BuzzWebhooks, Ingested, NewWebhook, WebhookFields
from ..schemas.common import Ok
from .common import accepts, body, path_int, query


def _config_blueprint(name: str, prefix: str) -> Blueprint:
    bp = Blueprint(name, __name__, url_prefix=prefix)

    @bp.post("/webhooks")
    @accepts(NewWebhook, returns=BuzzWebhook)
    async def create_webhook():
        """Create a buzz webhook config; returns it with its ingestUrl."""
        principal = require_identity()
        fields: NewWebhook = await body()
        c = coord()
        return await c.store.write(buzz.create_webhook, principal.identity, fields.changes(), c.settings.base_url,
                                   c.env_identities)

    @bp.get("/webhooks")
    @accepts(returns=BuzzWebhooks)
    async def list_webhooks():
        """Buzz webhook configs: the caller's own, or all for admins."""
        principal = require_identity()
        c = coord()
        return {"webhooks": await c.store.read(buzz.list_webhooks, principal.identity, principal.is_admin,
                                               c.settings.base_url)}

    @bp.patch("/webhooks/<rowid:id>")
    @accepts(WebhookFields, returns=BuzzWebhook)
    async def update_webhook(id: str):  # noqa: A002 (the path parameter is named as in the API docs)
        """Change a buzz webhook config (owner or admin)."""
        principal = require_identity()
        number = path_int(id)
        fields: WebhookFields = await body()
        c = coord()
        return await c.store.write(buzz.update_webhook, number, principal.identity, principal.is_admin,
                                   fields.changes(), c.settings.base_url, c.env_identities)

    @bp.delete("/webhooks/<rowid:id>")
    @accepts(returns=Ok)
    async def delete_webhook(id: str):  # noqa: A002
        """Delete a buzz webhook config (owner or admin)."""
        principal = require_identity()
        await coord().store.write(buzz.delete_webhook, path_int(id), principal.identity, principal.is_admin)
        return {"ok": True}

    @bp.get("/events")
    @accepts(query=BuzzEventsQuery, returns=BuzzEvents)
    async def list_events():
        """Buzz events addressed to everyone or naming the caller, newest first."""
        principal = require_identity()
        q: BuzzEventsQuery = query()
        return {"events": await coord().store.read(buzz.list_events, principal.identity, q.app_name, q.limit)}

    return bp


broadcast_bp = _config_blueprint("broadcast", "/api/broadcast")
buzz_bp = _config_blueprint("buzz", "/api/buzz")
ingest_bp = Blueprint("ingest", __name__, url_prefix="/api")


@ingest_bp.post("/ingest/<appName>/<token>")
@accepts(returns=Ingested)
async def ingest(appName: str, token: str):  # noqa: N803 (the path parameter is named as in the API docs)
    """Receive an outside event for a buzz webhook (no auth: the URL token is the credential)."""
    # (get_data's defaults, named: its type is bytes only when as_text=False is said)
    return await ingest_answer(coord(), appName, token, lambda: request.get_data(
        cache=True, as_text=False, parse_form_data=False), request.headers.get("Content-Type"),
        request.headers.get("X-GitHub-Event"), request.headers.get("X-GitHub-Delivery"), current_principal())


INGEST_ROUTE = "/api/ingest/{appName}/{token}"  # its label in coord_http_requests_total (as API.md writes it)


def ingest_path(path: str) -> tuple[str, str] | None:
    """(appName, token) when the decoded `path` is the ingest route (both segments non-empty), else None."""
    if not path.startswith("/api/ingest/"):
        return None
    parts = path[len("/api/ingest/"):].split("/")
    return (parts[0], parts[1]) if len(parts) == 2 and parts[0] and parts[1] else None


async def ingest_answer(c, app_name: str, token: str, read_body: Callable[[], Awaitable[bytes]],
                        content_type: str | None, github_event: str | None, github_delivery: str | None,
                        principal: Principal | None) -> JSONObject:
    """An ingest, for the Quart view above and the hot path (hotpaths.py) alike. `principal`: the bearer
    token's identity, if one came (optional: an identity's own ingest never wakes it)."""
    if c.settings.rate_limits:
        # Decided here, before parsing and before any unit of work, so a refusal costs next to
        # nothing; keyed by the URL, so a wrong token only counts against itself. This window is
        # per process: the ingest unit counts again in the database, which holds across processes.
        c.services.ratelimit.check("webhook", f"{app_name}/{token}", "ingests for this webhook")
    webhook_id = await c.services.webhooks.webhook_id(app_name, token)  # 404 from memory: no unit of work
    parsed = buzz.parse_body(await read_body(), content_type, github_event, github_delivery)
    limit = c.settings.ingest_per_webhook if c.settings.rate_limits else None
    flap = alerts.FlapRule(c.settings.flap_resolutions, timedelta(minutes=c.settings.flap_window_minutes))
    result = await c.store.write(buzz.ingest, webhook_id, app_name, token, parsed, limit, flap,
                                 principal.identity if principal else None)
    if "silencedBy" in result:
        c.services.metrics.process.buzz_silenced.inc()
    return result
