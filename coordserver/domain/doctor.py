"""Doctor: health probes for the caller (GET /api/doctor) and for operators (GET /api/doctor/admin).

Each probe is an async function returning (status, summary, details); `run_probes` times them and
builds the DoctorReport. Database facts are gathered by plain functions run in read units, never on
the event loop. Admin probes query the real tables (Δ13).
"""
from __future__ import annotations

import time
from datetime import datetime, timedelta
from importlib import metadata
from typing import Awaitable, Callable, Mapping

import peewee as pw

from ..jsonstrict import JSONObject
from .. import db
from ..errors import DatabaseFault
from ..models import Event, Message, PushDelivery, SchemaVersion, User
from ..netcheck import REFUSED_PREFIX
from ..timeutil import age_text, iso, parse_iso
from . import identities, wake

PASS, WARN, FAIL = "pass", "warn", "fail"
_RANK = {PASS: 0, WARN: 1, FAIL: 2}
SLOW_QUERY_MS = 250
SLOW_LOOP_MS = 200
STUCK_LOOP_MS = 2000
OUTBOX_STALE = timedelta(hours=1)
LOW_DISK_FRACTION = 0.05  # and Settings.disk_free_warn_mb: storage warns below either (docs/deploy.md)

Probe = Callable[[], Awaitable[tuple[str, str, JSONObject | None]]]


def version() -> str:
    try:
        return metadata.version("coord")
    except metadata.PackageNotFoundError:
        return "0.0.0"


async def run_probes(probes: list[tuple[str, str, Probe]]) -> tuple[JSONObject, DatabaseFault | None]:
    """The report, and the database fault a probe met (the report is then the answer of that fault's status)."""
    started = time.perf_counter()
    results: list[JSONObject] = []
    fault: DatabaseFault | None = None
    for probe_id, name, probe in probes:
        probe_started = time.perf_counter()
        try:
            status, summary, details = await probe()
        except DatabaseFault as exc:  # the database cannot answer: every probe that needs it says so
            fault = fault or exc
            status, summary, details = FAIL, f"{name}: {exc.message}", {"error": exc.message}
        except Exception as exc:  # a probe that breaks is itself a finding
            status, summary, details = FAIL, f"{name} check failed: {type(exc).__name__}", {"error": str(exc)[:300]}
        results.append({"id": probe_id, "name": name, "status": status, "summary": summary, "details": details,
                        "durationMs": round((time.perf_counter() - probe_started) * 1000)})
    worst = max((r["status"] for r in results), key=_RANK.__getitem__, default=PASS)
    return {"version": version(), "ok": worst == PASS, "status": worst,
            "warnings": [r["summary"] for r in results if r["status"] == WARN],
            "errors": [r["summary"] for r in results if r["status"] == FAIL],
            "probes": results, "totalDurationMs": round((time.perf_counter() - started) * 1000)}, fault


def storage_verdict(facts: JSONObject, warn_bytes: int, outage: JSONObject | None) -> tuple[str, str]:
    """The storage probe's status and summary from `storage_facts` and the store's current outage:
    FAIL while writes are refused for a full disk, WARN under the free-space threshold (`warn_bytes`,
    or 5 % of the filesystem), else PASS."""
    free, total = facts["freeBytes"], facts["totalBytes"]
    if outage is not None and outage["kind"] == "full":
        return FAIL, f"Storage full: writes refused for {outage['seconds']} s ({outage['refused']} requests)"
    if free is None:
        return PASS, "Free space is the PostgreSQL server's to watch (not visible from here)"
    room = f"{_mb(free)} free of {_mb(total)} on the database's filesystem"
    if free < warn_bytes or free < total * LOW_DISK_FRACTION:
        return WARN, f"Low disk space: {room}"
    return PASS, room


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.1f} MB" if size < 10 << 30 else f"{size / (1 << 30):.1f} GB"


# --- caller facts (read units) ---------------------------------------------------------------

def identity_facts(identity: str, env_identities: frozenset[str]) -> JSONObject:
    user = User.get_or_none(User.id == identity)
    return {"known": identities.is_known(identity, env_identities),
            "displayName": user.display_name if user else None,
            "archived": bool(user and user.archived_at), "lastSeenAt": iso(user.last_seen_at) if user else None}


def pending_facts(identity: str, base_url: str, env_identities: frozenset[str],
                  seen: Mapping[str, datetime]) -> JSONObject:
    unread = Message.select().where((Message.recipient == identity) & (Message.status == "unread")).count()
    urgent = Message.select().where((Message.recipient == identity) & (Message.status == "unread")
                                    & (Message.urgent == True)).count()  # noqa: E712
    pending = Message.select().where((Message.recipient == identity)
                                     & (Message.response_waiting == True)).count()  # noqa: E712
    payload = wake.wake_payload(identity, base_url, False, False, env_identities, seen)
    return {"unread": unread, "urgent": urgent, "pendingReplies": pending, "wakeItems": len(payload["items"]),
            "wakeSummary": payload["summary"]}


# --- admin facts (read units) ----------------------------------------------------------------

def database_facts(store: db.Store) -> JSONObject:
    version_row = SchemaVersion.select(pw.fn.MAX(SchemaVersion.version)).scalar()
    started = time.perf_counter()
    messages = Message.select(pw.fn.COUNT(Message.id)).scalar()
    latency_ms = (time.perf_counter() - started) * 1000
    return {"schemaVersion": version_row, "sizeBytes": store.size_bytes(), "queryMs": round(latency_ms, 2),
            "messages": messages, "backend": "sqlite" if store.sqlite else "postgresql"}


def event_facts() -> JSONObject:
    count = Event.select(pw.fn.COUNT(Event.id)).scalar() or 0
    oldest = Event.select(pw.fn.MIN(Event.created_at)).scalar()
    newest_id = Event.select(pw.fn.MAX(Event.id)).scalar()
    return {"rows": count, "oldestAt": iso(oldest), "latestId": newest_id}


def outbox_facts() -> JSONObject:
    counts: dict[str, int] = dict(db.tuples(PushDelivery.select(PushDelivery.status, pw.fn.COUNT(PushDelivery.id))
                                            .group_by(PushDelivery.status)))
    oldest = (PushDelivery.select(pw.fn.MIN(PushDelivery.created_at))
              .where(PushDelivery.status == "pending").scalar())
    last_error = (PushDelivery.select(PushDelivery.last_error).where(PushDelivery.status == "failed")
                  .order_by(PushDelivery.created_at.desc()).limit(1).scalar())
    refused = PushDelivery.select().where((PushDelivery.status == "failed")
                                          & PushDelivery.last_error.startswith(REFUSED_PREFIX))
    last_refused = refused.order_by(PushDelivery.created_at.desc()).limit(1).first()
    return {"pending": counts.get("pending", 0), "failed": counts.get("failed", 0),
            "delivered": counts.get("delivered", 0), "oldestPendingAt": iso(oldest), "lastFailure": last_error,
            "refused": refused.count(),
            "lastRefused": ({"identity": last_refused.identity, "error": last_refused.last_error}
                            if last_refused else None)}


def refused_delivery(last_error: str | None) -> bool:
    """Whether a delivery's error is the address check's refusal (failed at once, never retried)."""
    return bool(last_error and last_error.startswith(REFUSED_PREFIX))


def age(value: str | None, now: datetime) -> str | None:
    """Age of a wire timestamp, e.g. '2h 15m'."""
    return age_text(parse_iso(value), now) if value else None


# --- verdicts: a probe's status and summary from its facts -----------------------------------
# The rules that pass or warn live here, beside the facts they judge; api/doctor.py gathers the facts
# and reports what these say.

def identity_verdict(identity: str, facts: JSONObject) -> tuple[str, str]:
    if facts["archived"]:
        return WARN, f"Identity {identity} is archived"
    if not facts["known"]:
        return WARN, f"Identity {identity} is not a known identity"
    return PASS, f"Signed in as {identity}"


def webhook_verdict(configured: bool, deliveries: JSONObject) -> tuple[str, str]:
    if not configured:
        return WARN, "No webhook URL registered"
    if refused_delivery(deliveries["lastError"]):
        return FAIL, ("Webhook deliveries refused by the address check, not retried "
                      f"({deliveries['lastError'][len(REFUSED_PREFIX):]}); "
                      "register a publicly routable URL")
    if deliveries["failed"] or deliveries["lastError"]:
        return WARN, f"Webhook registered; last delivery problem: {deliveries['lastError'] or 'failed'}"
    return PASS, "Webhook registered" + (f"; last delivery at {deliveries['lastSuccessAt']}"
                                         if deliveries["lastSuccessAt"] else "; nothing delivered yet")


def database_verdict(facts: JSONObject) -> tuple[str, str]:
    """WARN when a trivial query takes longer than SLOW_QUERY_MS."""
    summary = (f"{facts['backend']} schema v{facts['schemaVersion']}, "
               f"{_size(facts['sizeBytes'])}, query {facts['queryMs']} ms")
    return (WARN if facts["queryMs"] > SLOW_QUERY_MS else PASS), summary


def _size(size: float | None) -> str:
    if size is None:
        return "size unknown"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def events_verdict(facts: JSONObject, now: datetime, retention: timedelta) -> tuple[str, str]:
    """WARN when the oldest event is a day past retention (is pruning running?)."""
    oldest = parse_iso(facts["oldestAt"]) if facts["oldestAt"] else None
    if oldest and now - oldest > retention + timedelta(days=1):
        return WARN, f"{facts['rows']} events; oldest {facts['oldestAge']} old, past retention (pruning?)"
    return PASS, f"{facts['rows']} events in the log" + (
        f", oldest {facts['oldestAge']} old" if facts["oldestAge"] else "")


def outbox_verdict(facts: JSONObject, now: datetime) -> tuple[str, str]:
    """WARN on a pending push older than OUTBOX_STALE, on refused or on failed deliveries."""
    summary = f"{facts['pending']} pending, {facts['failed']} failed pushes"
    stale = facts["oldestPendingAt"] and now - parse_iso(facts["oldestPendingAt"]) > OUTBOX_STALE
    if stale:
        return WARN, summary + f"; oldest pending {facts['oldestPendingAge']} old"
    if facts["refused"]:
        last = facts["lastRefused"]
        return WARN, summary + (f"; {facts['refused']} refused by the address check, last for "
                                f"{last['identity']}: {last['error'][len(REFUSED_PREFIX):]}")
    if facts["failed"]:
        return WARN, summary + (f"; last failure: {facts['lastFailure']}" if facts["lastFailure"] else "")
    return PASS, summary


def scheduler_verdict(lag: float | None, interval: float, last_tick: str | None, overdue: int,
                      now: datetime) -> tuple[str, str]:
    """WARN when the scheduler has not run for two intervals, or templates are overdue."""
    if lag is not None and lag > 2 * interval:
        return WARN, f"Scheduler last ran {age(last_tick, now)} ago"
    if overdue:
        return WARN, f"{overdue} recurring template(s) overdue"
    return PASS, "Scheduler running" + ("" if last_tick else "; no tick yet")


def loop_verdict(stats: JSONObject) -> tuple[str, str]:
    """FAIL past STUCK_LOOP_MS of event-loop lag, WARN past SLOW_LOOP_MS."""
    if not stats["samples"]:
        return PASS, "Event loop: no lag samples yet"
    summary = f"Event-loop lag over the last minute: max {stats['maxMs']} ms, avg {stats['avgMs']} ms"
    if stats["maxMs"] > STUCK_LOOP_MS:
        return FAIL, summary
    return (WARN if stats["maxMs"] > SLOW_LOOP_MS else PASS), summary


def guards_verdict(active: list[JSONObject]) -> tuple[str, str]:
    """Active loop guards (domain/guards.py): a warning naming them, each a suspected loop among agents."""
    if not active:
        return PASS, "No loop guard holds"
    names = "; ".join(str(guard["summary"]) for guard in active[:3])
    more = f" (and {len(active) - 3} more)" if len(active) > 3 else ""
    return WARN, f"{len(active)} loop guard{'s' if len(active) != 1 else ''} holding: {names}{more}"
