"""Alerts: the persistent state above buzz events (skill page `buzz`, "Alerts").

Every accepted, routed ingest belongs to one alert, keyed by webhook and group key (domain/buzz.py
parse_body decides the key). An alert is `open`, `acked`, `snoozed` or `resolved`:
- a firing counts on its alert; one on a resolved alert reopens it (the count continues), one on an acked
  or snoozed alert leaves that state alone;
- Alertmanager's `status: "resolved"` resolves it (resolvedBy null: the source did);
- ack, unack, snooze and resolve are conditional UPDATEs on the states they start from, so of racing
  writers (two people, two processes, the snooze pass) each change applies once and the loser gets 409;
- a snooze ends by itself: the scheduler's pass (`unsnooze_due`, every process) reopens it, once.
Every state change logs `alert_changed` in the same unit, addressed like the webhook's `broadcast` events,
pulses its wake agent's wake and announces ALERTS (the scheduler sleeps until the next snooze end).

Who sees an alert: as for buzz events (addressed to everyone, or naming the caller), and whoever may act.
Who may act: the webhook's wake and notify agents, its forUsers, its escalateTo, its owner, admins; others
who see it 403.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from datetime import datetime, timedelta
from typing import Any, Literal

import peewee as pw

from .. import db
from ..errors import Conflict, Forbidden, Invalid, NotFound
from ..events import log
from ..events.channels import ALERTS, AlertsPayload
from . import alert_tallies, wake_signal
from ..models import BuzzAlert, BuzzWebhook
from ..timeutil import from_db, iso, parse_iso, to_db

STATES = ("open", "acked", "snoozed", "resolved")
NOT_FOUND = "Alert not found"
SNOOZE_MAX_MINUTES = 30 * 24 * 60
UNSNOOZE_BATCH = 100  # alerts one snooze pass reopens at most (the pass repeats while it finds more)
RECENT_EVENTS = 20  # events GET /api/buzz/alerts/{id} shows

@dataclass(frozen=True)
class FlapRule:
    """An alert resolved by its source more than `resolutions` times within `window` is flapping: it wakes at
    most once per window (the deployment's: COORD_FLAP_RESOLUTIONS, COORD_FLAP_WINDOW_MINUTES; a webhook's
    flapResolutions and flapWindowMinutes replace them for its alerts)."""
    resolutions: int = 3
    window: timedelta = timedelta(minutes=30)

    def for_webhook(self, webhook: BuzzWebhook) -> FlapRule:
        """This rule with the webhook's own thresholds where it sets them."""
        resolutions = webhook.flap_resolutions or self.resolutions
        window = timedelta(minutes=webhook.flap_window_minutes) if webhook.flap_window_minutes else self.window
        return FlapRule(resolutions, window)


def quiet(wakes: bool) -> dict[str, bool]:
    """What a logged change that wakes no one (a flapping alert inside its window) carries: `quiet` true, so
    the push worker sends no push for it (its stream event and history stay)."""
    return {} if wakes else {"quiet": True}


State = Literal["open", "acked", "snoozed", "resolved"]
Change = Literal["opened", "reopened", "acked", "unacked", "snoozed", "unsnoozed", "resolved", "escalated"]


def _stamp() -> datetime:
    """The unit's 'now' as stored (naive UTC)."""
    now = to_db(db.now())
    assert now is not None
    return now


# --- wire shapes -----------------------------------------------------------------------------

def alert_json(alert: BuzzAlert) -> dict[str, Any]:
    return {"id": alert.id, "webhookId": alert.webhook_id, "appName": alert.app_name, "title": alert.title,
            "groupKey": alert.group_key, "state": alert.state, "count": alert.count,
            "firstAt": iso(alert.first_at), "lastAt": iso(alert.last_at), "openedAt": iso(alert.opened_at),
            "ackedBy": alert.acked_by,
            "ackedAt": iso(alert.acked_at), "snoozedUntil": iso(alert.snoozed_until),
            "resolvedAt": iso(alert.resolved_at), "resolvedBy": alert.resolved_by,
            "lastEventId": alert.last_event_id, "silencedBy": alert.silenced_by, "runbook": runbook(alert),
            "escalateAt": iso(alert.escalate_at), "escalatedAt": iso(alert.escalated_at),
            "flapping": bool(alert.flapping)}


def runbook(alert: BuzzAlert | BuzzWebhook) -> dict[str, Any] | None:
    """Where the runbook is: a notebook page (`pageId`) or a URL; null when the webhook names none."""
    if alert.runbook_page_id is None and alert.runbook_url is None:
        return None
    return {"pageId": alert.runbook_page_id, "url": alert.runbook_url}


def _identities(column_value: str | None) -> list[str]:
    return column_value.split(",") if column_value else []


def audience(for_users: str | None, wake_agent: str | None, notify_agent: str | None) -> list[str] | None:
    """Who hears of an alert's events (as of a webhook's `broadcast` events): everyone when it names no
    users, otherwise those users and its agents."""
    if for_users is None:
        return None
    names = set(for_users.split(","))
    names.update(a for a in (wake_agent, notify_agent) if a)
    return sorted(names)


def _changed(alert: BuzzAlert, change: Change, by: str | None, pulse: bool = True,
             actor: str | None = None) -> None:
    """Log `alert_changed` for the alert's audience, pulse its wake agent and tell every process's
    scheduler (a snooze's end). Without `pulse` (a flapping alert inside its window) it is logged `quiet`.
    Neither `by` nor `actor` (an identity that ingested the firing) is woken or pushed to by its own change."""
    actor = actor or by
    escalated = _identities(alert.escalate_to) if change == "escalated" else []
    to = audience(alert.for_users, alert.wake_agent, alert.notify_agent)
    log.append("alert_changed", {"type": "alert_changed", "alertId": alert.id, "change": change, "by": by,
                                 "wakeAgent": alert.wake_agent, "notifyAgent": alert.notify_agent,
                                 "escalateTo": escalated, "alert": alert_json(alert), **quiet(pulse),
                                 **({"ingestedBy": actor} if actor and actor != by else {})},
               to=None if to is None else [*to, *escalated])
    for identity in ({alert.wake_agent, *_identities(alert.escalate_to)} - {None}) if pulse else ():
        wake_signal.enters_wake(identity, actor)
    db.after_commit(ALERTS, AlertsPayload(alertId=alert.id, state=alert.state,
                                          dueAt=iso(alert.snoozed_until or alert.escalate_at)))


# --- ingest (called by buzz.ingest under the webhook's row lock) --------------------------------

def find(webhook_id: int, group_key: str) -> BuzzAlert | None:
    """The webhook's alert of that group (fixed SQL: the ingest's hot path; one row by the unique index)."""
    found = db.sql_models(BuzzAlert, "WHERE webhook_id = ? AND group_key = ?", (webhook_id, group_key))
    return found[0] if found else None


def create_for(webhook: BuzzWebhook, group_key: str, title: str, resolves: bool, now: datetime) -> BuzzAlert:
    """A new alert: open, or resolved when its first news is a resolution (nothing fired that we saw)."""
    stamp = to_db(now)
    alert: BuzzAlert = BuzzAlert.create(
        webhook_id=webhook.id, group_key=group_key, app_name=webhook.app_name, title=title,
        for_users=webhook.for_users, wake_agent=webhook.wake_agent, notify_agent=webhook.notify_agent,
        state="resolved" if resolves else "open", count=0, first_at=stamp, last_at=stamp, opened_at=stamp,
        resolved_at=stamp if resolves else None, runbook_page_id=webhook.runbook_page_id,
        runbook_url=webhook.runbook_url, escalate_to=webhook.escalate_to,
        escalate_at=None if resolves else _escalation(webhook, now))
    return alert


def _escalation(webhook: BuzzWebhook | None, opened: datetime) -> datetime | None:
    """When an alert that opens at `opened` escalates if still open: the webhook's delay, or never."""
    if webhook is None or not webhook.escalate_after_minutes or not webhook.escalate_to:
        return None
    return to_db(opened + timedelta(minutes=webhook.escalate_after_minutes))


def _opening(alert: BuzzAlert, stamp: datetime) -> dict[Any, Any]:
    """What (re)opening an alert at `stamp` sets: a fresh escalation delay."""
    webhook = BuzzWebhook.get_or_none(BuzzWebhook.id == alert.webhook_id)
    return {BuzzAlert.opened_at: stamp, BuzzAlert.escalate_at: _escalation(webhook, stamp),
            BuzzAlert.escalated_at: None}


def record(alert: BuzzAlert, webhook: BuzzWebhook, event_id: int, title: str, resolves: bool, created: bool,
           now: datetime, flap: FlapRule = FlapRule(), ingested_by: str | None = None) -> bool:
    """The ingest `event_id` counts on `alert` (one UPDATE); a state change is logged. Returns whether the
    ingest may wake anyone (a flapping alert wakes once per flap window). `ingested_by`: the identity
    that sent the ingest, if it said (its own ingest never wakes or pushes to it)."""
    stamp = to_db(now)
    assert stamp is not None
    fields: dict[Any, Any] = {
        BuzzAlert.last_at: stamp, BuzzAlert.last_event_id: event_id, BuzzAlert.title: title,
        BuzzAlert.app_name: webhook.app_name, BuzzAlert.for_users: webhook.for_users,
        BuzzAlert.wake_agent: webhook.wake_agent, BuzzAlert.notify_agent: webhook.notify_agent,
        BuzzAlert.silenced_by: None, BuzzAlert.runbook_page_id: webhook.runbook_page_id,
        BuzzAlert.runbook_url: webhook.runbook_url, BuzzAlert.escalate_to: webhook.escalate_to}
    change: Change | None = "opened" if created and not resolves else None
    flapping = bool(alert.flapping)
    if resolves:
        if alert.state != "resolved":
            fields.update({BuzzAlert.state: "resolved", BuzzAlert.resolved_at: stamp, BuzzAlert.resolved_by: None,
                           BuzzAlert.snoozed_until: None})
            change = "resolved"
            flapping = _count_resolution(alert, now, flap, fields)
    else:
        fields[BuzzAlert.count] = INCREMENT
        if alert.state == "resolved" and not created:
            fields.update(_reopened(stamp))
            fields.update({BuzzAlert.escalate_at: _escalation(webhook, stamp), BuzzAlert.escalated_at: None})
            change = "reopened"
    woken = from_db(alert.woken_at)
    wakes = not flapping or woken is None or now - woken >= flap.window
    if flapping and wakes:
        fields[BuzzAlert.woken_at] = stamp
    _update_alert(alert.id, fields)
    if change is not None:
        _changed(alert_tallies.get(alert.id), change, None, pulse=wakes, actor=ingested_by)
    return wakes


INCREMENT = object()  # _update_alert: the column goes up by one


@lru_cache(maxsize=64)
def _update_sql(columns: tuple[tuple[str, bool], ...]) -> str:
    sets = ", ".join(f'"{name}" = "{name}" + 1' if increment else f'"{name}" = ?' for name, increment in columns)
    return f'UPDATE buzz_alert SET {sets} WHERE id = ?'


def _update_alert(alert_id: int, fields: dict[Any, Any]) -> None:
    """One UPDATE of the alert by fixed SQL, one statement text per set of columns (the ingest's hot path:
    Peewee composing it from a dict of a dozen columns cost a third of the unit); each value goes through
    its field's db_value as Peewee sends it; INCREMENT adds one."""
    columns = tuple((field.column_name, value is INCREMENT) for field, value in fields.items())
    params = [field.db_value(value) for field, value in fields.items() if value is not INCREMENT]
    db.sql_execute(_update_sql(columns), (*params, alert_id))


def _count_resolution(alert: BuzzAlert, now: datetime, flap: FlapRule, fields: dict[Any, Any]) -> bool:
    """Counts a resolution by the source in the alert's flap window (a new window when the last is over);
    returns whether the alert flaps now."""
    started = from_db(alert.flap_started_at)
    if started is None or now - started > flap.window:
        started, resolutions = now, 1
    else:
        resolutions = alert.flap_resolutions + 1
    flapping = resolutions > flap.resolutions
    fields.update({BuzzAlert.flap_started_at: to_db(started), BuzzAlert.flap_resolutions: resolutions,
                   BuzzAlert.flapping: flapping})
    return flapping


def record_silenced(alert: BuzzAlert, event_id: int, silence_id: int, now: datetime) -> None:
    """A silenced firing counts on its alert and hides it from wake; it changes no state and logs nothing."""
    BuzzAlert.update({BuzzAlert.count: BuzzAlert.count + 1, BuzzAlert.last_at: to_db(now),
                      BuzzAlert.last_event_id: event_id, BuzzAlert.silenced_by: silence_id}).where(
        BuzzAlert.id == alert.id).execute()


def _reopened(stamp: datetime) -> dict[Any, Any]:
    return {BuzzAlert.state: "open", BuzzAlert.opened_at: stamp, BuzzAlert.acked_by: None,
            BuzzAlert.acked_at: None, BuzzAlert.snoozed_until: None, BuzzAlert.resolved_at: None,
            BuzzAlert.resolved_by: None}


# --- who sees, who acts ----------------------------------------------------------------------

def names(column: pw.Field[Any], identity: str) -> pw.NodeList:
    """`column` (a normalised comma list) names `identity` exactly; LIKE wildcards in it are escaped."""
    pattern = "%," + identity.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ",%"
    padded = pw.Value(",").concat(column).concat(",")
    return pw.NodeList((padded, pw.SQL("LIKE"), pw.Value(pattern), pw.SQL("ESCAPE '\\'")))


def _visible_where(identity: str, is_admin: bool) -> pw.Expression | None:
    if is_admin:
        return None
    owned = BuzzWebhook.select(BuzzWebhook.id).where(BuzzWebhook.owner == identity)
    return (BuzzAlert.for_users.is_null() | names(BuzzAlert.for_users, identity)
            | (BuzzAlert.wake_agent == identity) | (BuzzAlert.notify_agent == identity)
            | names(BuzzAlert.escalate_to, identity) | BuzzAlert.webhook_id.in_(owned))


def visible(identity: str, is_admin: bool, alert_id: int) -> BuzzAlert:
    """The alert, if the caller may see it; else 404 (it does not exist for them)."""
    where = BuzzAlert.id == alert_id
    rule = _visible_where(identity, is_admin)
    found = alert_tallies.rows(alert_tallies.select().where(where if rule is None else where & rule))
    if not found:
        raise NotFound(NOT_FOUND)
    return found[0]


def _may_act(alert: BuzzAlert, identity: str, is_admin: bool) -> bool:
    if is_admin or identity in (alert.wake_agent, alert.notify_agent):
        return True
    if identity in _identities(alert.for_users) or identity in _identities(alert.escalate_to):
        return True
    owner = BuzzWebhook.select(BuzzWebhook.owner).where(BuzzWebhook.id == alert.webhook_id).scalar()
    return bool(owner == identity)


def _actable(identity: str, is_admin: bool, alert_id: int) -> BuzzAlert:
    alert = visible(identity, is_admin, alert_id)
    if not _may_act(alert, identity, is_admin):
        raise Forbidden("Only the webhook's agents, its forUsers, its owner or an admin may act on its alerts")
    return alert


def list_alerts(identity: str, is_admin: bool, state: str | None, app_name: str | None,
                limit: int) -> list[dict[str, Any]]:
    """Newest activity first; what the caller may see."""
    query = alert_tallies.select()
    rule = _visible_where(identity, is_admin)
    if rule is not None:
        query = query.where(rule)
    if state:
        query = query.where(BuzzAlert.state == state)
    if app_name:
        query = query.where(BuzzAlert.app_name == app_name)
    newest_first = query.order_by(alert_tallies.last_activity().desc(), BuzzAlert.id.desc()).limit(limit)
    return [alert_json(a) for a in alert_tallies.rows(newest_first)]


# --- acting: each change from the states it may start from -------------------------------------

def _refused(alert: BuzzAlert, wanted: str) -> Conflict:
    if alert.state == "resolved":
        return Conflict("The alert is resolved", state=alert.state)
    if alert.state == "acked" and wanted == "ack":
        return Conflict(f"Already acked by {alert.acked_by}", state=alert.state, ackedBy=alert.acked_by)
    return Conflict(f"The alert is {alert.state}", state=alert.state)


def _apply(identity: str, is_admin: bool, alert_id: int, wanted: str, from_states: tuple[str, ...],
           fields: dict[Any, Any], change: Change) -> dict[str, Any]:
    found = _actable(identity, is_admin, alert_id)
    if fields.get(BuzzAlert.state) == "open":
        fields = {**fields, **_opening(found, _stamp())}
    won = BuzzAlert.update(fields).where((BuzzAlert.id == alert_id) & BuzzAlert.state.in_(from_states)).execute()
    alert = alert_tallies.get(alert_id)
    if not won:
        raise _refused(alert, wanted)
    _changed(alert, change, identity)
    return alert_json(alert)


def ack(identity: str, is_admin: bool, alert_id: int) -> dict[str, Any]:
    """"I'm on it": an open or snoozed alert becomes acked by the caller."""
    return _apply(identity, is_admin, alert_id, "ack", ("open", "snoozed"),
                  {BuzzAlert.state: "acked", BuzzAlert.acked_by: identity, BuzzAlert.acked_at: _stamp(),
                   BuzzAlert.snoozed_until: None}, "acked")


def unack(identity: str, is_admin: bool, alert_id: int) -> dict[str, Any]:
    return _apply(identity, is_admin, alert_id, "unack", ("acked",),
                  {BuzzAlert.state: "open", BuzzAlert.acked_by: None, BuzzAlert.acked_at: None}, "unacked")


def snooze_end(minutes: int | None, until: str | None, now: datetime) -> datetime:
    """`minutes` from now or `until` (exactly one), in the future and at most SNOOZE_MAX_MINUTES ahead."""
    if (minutes is None) == (until is None):
        raise Invalid("Snooze with minutes or until, not both")
    if minutes is not None:
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= SNOOZE_MAX_MINUTES:
            raise Invalid(f"minutes must be 1 to {SNOOZE_MAX_MINUTES}")
        return now + timedelta(minutes=minutes)
    try:
        end = parse_iso(until) if isinstance(until, str) else None
    except ValueError:
        end = None
    if end is None:
        raise Invalid("until must be an ISO-8601 timestamp")
    if end <= now:
        raise Invalid("until must be in the future")
    if end > now + timedelta(minutes=SNOOZE_MAX_MINUTES):
        raise Invalid(f"until must be within {SNOOZE_MAX_MINUTES} minutes")
    return end


def snooze(identity: str, is_admin: bool, alert_id: int, minutes: int | None,
           until: str | None) -> dict[str, Any]:
    """Quiet until then (a snoozed alert may be snoozed again: the new end replaces the old)."""
    end = snooze_end(minutes, until, db.now())
    return _apply(identity, is_admin, alert_id, "snooze", ("open", "acked", "snoozed"),
                  {BuzzAlert.state: "snoozed", BuzzAlert.snoozed_until: to_db(end)}, "snoozed")


def resolve(identity: str, is_admin: bool, alert_id: int) -> dict[str, Any]:
    now = _stamp()
    return _apply(identity, is_admin, alert_id, "resolve", ("open", "acked", "snoozed"),
                  {BuzzAlert.state: "resolved", BuzzAlert.resolved_at: now, BuzzAlert.resolved_by: identity,
                   BuzzAlert.snoozed_until: None}, "resolved")


# --- snoozes end by themselves ---------------------------------------------------------------

def unsnooze_due(limit: int = UNSNOOZE_BATCH) -> int:
    """One snooze pass (a unit of its own: Store.write_alone): snoozed alerts whose end has come reopen.
    Returns how many this unit reopened; one another process reopened first is skipped."""
    now = _stamp()
    due = [a.id for a in BuzzAlert.select(BuzzAlert.id)
           .where((BuzzAlert.state == "snoozed") & (BuzzAlert.snoozed_until <= now))
           .order_by(BuzzAlert.snoozed_until, BuzzAlert.id).limit(limit)]
    reopened = 0
    for alert_id in due:
        opening = _opening(BuzzAlert.get_by_id(alert_id), now)
        won = BuzzAlert.update({BuzzAlert.state: "open", BuzzAlert.snoozed_until: None, **opening}) \
            .where((BuzzAlert.id == alert_id) & (BuzzAlert.state == "snoozed")
                   & (BuzzAlert.snoozed_until <= now)).execute()
        if won:
            _changed(alert_tallies.get(alert_id), "unsnoozed", None)
            reopened += 1
    return reopened


def _escalating(now: datetime) -> pw.Expression:
    return ((BuzzAlert.state == "open") & BuzzAlert.escalated_at.is_null() & (BuzzAlert.escalate_at <= now)
            & BuzzAlert.silenced_by.is_null())


def escalate_due(limit: int = UNSNOOZE_BATCH) -> int:
    """One escalation pass (a unit of its own): open alerts past their escalation time wake their webhook's
    `escalateTo` (a high wake item and a push; `alert_changed` with change `escalated` says so in the history).
    A conditional update: of two processes' passes, one escalates each alert."""
    now = _stamp()
    due = [a.id for a in BuzzAlert.select(BuzzAlert.id).where(_escalating(now))
           .order_by(BuzzAlert.escalate_at, BuzzAlert.id).limit(limit)]
    escalated = 0
    for alert_id in due:
        won = BuzzAlert.update({BuzzAlert.escalated_at: now}).where(
            (BuzzAlert.id == alert_id) & _escalating(now)).execute()
        if won:
            _changed(alert_tallies.get(alert_id), "escalated", None)
            escalated += 1
    return escalated


def next_due() -> datetime | None:
    """The earliest end of a snooze or escalation of an open alert (the pass sleeps until then; an alert a
    silence hid never escalates, so its time is not one: it kept the pass running at its 20 ms floor)."""
    snoozes: datetime | str | None = BuzzAlert.select(pw.fn.MIN(BuzzAlert.snoozed_until)).where(
        BuzzAlert.state == "snoozed").scalar()
    escalations: datetime | str | None = BuzzAlert.select(pw.fn.MIN(BuzzAlert.escalate_at)).where(
        (BuzzAlert.state == "open") & BuzzAlert.escalated_at.is_null() & BuzzAlert.silenced_by.is_null()).scalar()
    due = [at for at in (from_db(snoozes), from_db(escalations)) if at is not None]
    return min(due) if due else None


# --- wake ------------------------------------------------------------------------------------

def wake_items(identity: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """Open alerts for which `identity` is the wake agent, oldest activity first: one item per alert (not
    those whose latest firing a silence hid)."""
    watched = (BuzzAlert.wake_agent == identity) & BuzzAlert.silenced_by.is_null()
    escalated = BuzzAlert.escalated_at.is_null(False) & names(BuzzAlert.escalate_to, identity)
    where = (BuzzAlert.state == "open") & (watched | escalated)
    rows = alert_tallies.rows(alert_tallies.select().where(where)
                              .order_by(alert_tallies.last_activity(), BuzzAlert.id).limit(limit + 1))
    total = len(rows) if len(rows) <= limit else BuzzAlert.select().where(where).count()
    return [_item(a, identity) for a in rows[:limit]], total


def _item(a: BuzzAlert, identity: str) -> dict[str, Any]:
    escalated = a.escalated_at is not None and identity in _identities(a.escalate_to)
    summary = f"{a.title} ({_firings(a.count)})"
    if escalated:
        summary = f"Escalated to you, unacknowledged: {summary}"
    return {"source": "alert", "id": a.id, "summary": summary,
            "action": f"Ack it if you take it on (POST /api/buzz/alerts/{a.id}/ack), or snooze or resolve it.",
            "priority": "high", "appName": a.app_name, "title": a.title, "count": a.count, "state": a.state,
            "firstAt": iso(a.first_at), "runbook": runbook(a), "escalated": escalated, "ephemeral": False,
            "_at": from_db(a.last_at)}


def _firings(count: int) -> str:
    return "1 firing" if count == 1 else f"{count} firings"
