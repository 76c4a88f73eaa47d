"""Alert endpoints under /api/buzz/alerts (skill page `buzz`, "Alerts"): parse and authorise here, rules in
domain/alerts.py."""
from __future__ import annotations

from typing import Any

from msgspec import UNSET
from quart import Blueprint

from ..auth import require_identity
from ..context import coord
from ..domain import alerts, buzz
from ..timeutil import parse_iso
from ..schemas.alerts import Alert, AlertDetail, Alerts, AlertsQuery, Snooze
from .common import accepts, body, path_int, query

bp = Blueprint("alerts", __name__, url_prefix="/api/buzz/alerts")


@bp.get("")
@accepts(query=AlertsQuery, returns=Alerts)
async def list_alerts() -> dict[str, Any]:
    """Alerts the caller may see (as for buzz events), newest activity first."""
    principal = require_identity()
    q: AlertsQuery = query()
    return {"alerts": await coord().store.read(alerts.list_alerts, principal.identity, principal.is_admin, q.state,
                                               q.app_name, q.limit)}


@bp.get("/<rowid:alert_id>")
@accepts(returns=AlertDetail)
async def get(alert_id: str) -> dict[str, Any]:
    """One alert with its most recent events."""
    principal = require_identity()
    number = path_int(alert_id)
    return await coord().store.read(buzz.alert_detail, principal.identity, principal.is_admin, number)


@bp.post("/<rowid:alert_id>/ack")
@accepts(returns=Alert)
async def ack(alert_id: str) -> dict[str, Any]:
    """"I'm on it": an open or snoozed alert becomes acked by the caller (409 when someone acked it first)."""
    principal = require_identity()
    number = path_int(alert_id)
    c = coord()
    acked = await c.store.write(alerts.ack, principal.identity, principal.is_admin, number)
    waited = parse_iso(acked["ackedAt"]) - parse_iso(acked["openedAt"])
    c.services.metrics.process.alert_ack_seconds.observe(max(0.0, waited.total_seconds()))
    return acked


@bp.post("/<rowid:alert_id>/unack")
@accepts(returns=Alert)
async def unack(alert_id: str) -> dict[str, Any]:
    """An acked alert is open again."""
    principal = require_identity()
    number = path_int(alert_id)
    return await coord().store.write(alerts.unack, principal.identity, principal.is_admin, number)


@bp.post("/<rowid:alert_id>/snooze")
@accepts(Snooze, returns=Alert)
async def snooze(alert_id: str) -> dict[str, Any]:
    """Quiet an alert for `minutes` or until a time; it is open again then, by itself."""
    principal = require_identity()
    number = path_int(alert_id)
    given: Snooze = await body()
    minutes = None if given.minutes is UNSET else given.minutes
    until = None if given.until is UNSET else given.until
    return await coord().store.write(alerts.snooze, principal.identity, principal.is_admin, number, minutes, until)


@bp.post("/<rowid:alert_id>/resolve")
@accepts(returns=Alert)
async def resolve(alert_id: str) -> dict[str, Any]:
    """The problem is over: the alert is resolved (a new firing reopens it)."""
    principal = require_identity()
    number = path_int(alert_id)
    return await coord().store.write(alerts.resolve, principal.identity, principal.is_admin, number)
