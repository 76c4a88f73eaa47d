"""GET /api/doctor (the caller's own setup) and GET /api/doctor/admin (the server's insides)."""
from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from quart import Blueprint

from ..auth import require_admin, require_identity
from ..principal import Principal
from ..context import coord
from ..domain import doctor, guards, identities, recurring
from ..domain.doctor import PASS
from ..errors import StorageFull
from ..timeutil import iso
from ..schemas.doctor import DoctorReport
from .common import accepts
from .wake import presence_snapshot

bp = Blueprint("doctor", __name__, url_prefix="/api")
# The report also answers 503 (database unavailable) and 507 (storage full): see _answer.
REPORT = {200: DoctorReport, 503: DoctorReport, 507: DoctorReport}


# --- caller probes ---------------------------------------------------------------------------

def _caller_probes(principal: Principal) -> list:
    c = coord()
    identity = principal.identity

    async def auth():
        kind = f"database token #{principal.token_id}" if principal.source == "db" else "environment token"
        return PASS, f"Token valid ({kind}{', admin' if principal.is_admin else ''})", {
            "source": principal.source, "tokenId": principal.token_id, "isAdmin": principal.is_admin}

    async def who():
        facts = await c.store.read(doctor.identity_facts, identity, c.env_identities)
        return (*doctor.identity_verdict(identity, facts), facts)

    async def stream():
        open_streams = _open_streams(identity)
        details = {"canOpen": True, "open": open_streams, "url": f"{c.settings.base_url}/api/stream"}
        if open_streams:
            return PASS, f"{open_streams} event stream{'s' if open_streams != 1 else ''} open", details
        return PASS, "Token can open GET /api/stream; no stream open now", details

    async def webhooks():
        override = c.settings.webhook_overrides.get(identity)
        state = await c.store.read(identities.webhook_state, identity, override)
        deliveries = state["deliveries"]
        details = {"webhookUrl": state["webhookUrl"], **deliveries}
        return (*doctor.webhook_verdict(state["configured"], deliveries), details)

    async def pending():
        facts = await c.store.read(doctor.pending_facts, identity, c.settings.base_url, c.env_identities,
                                   presence_snapshot())
        summary = (f"{facts['unread']} unread ({facts['urgent']} urgent), {facts['pendingReplies']} replies owed, "
                   f"{facts['wakeItems']} in wake")
        return PASS, summary, facts

    return [("auth", "Authentication", auth), ("identity", "Identity", who), ("stream", "Event stream", stream),
            ("webhooks", "Webhooks", webhooks), ("pending", "Pending work", pending)]


def _open_streams(identity: str | None = None) -> int:
    """Open SSE streams in this process (the hub's count; notebook sockets are not streams)."""
    hub = coord().services.sse
    return hub.stream_count(identity) if identity else hub.open_streams


@bp.get("/doctor")
@accepts(returns=REPORT)
async def caller_report():
    """Health of the caller's own setup."""
    principal = require_identity()
    return await _answer(_caller_probes(principal))


# --- admin probes ----------------------------------------------------------------------------

def _admin_probes() -> list:
    c = coord()

    async def database():
        facts = await c.store.read(doctor.database_facts, c.store)
        return (*doctor.database_verdict(facts), facts)

    async def storage():
        facts = await asyncio.to_thread(c.store.storage_facts)
        outage = c.store.outage.facts()
        status, summary = doctor.storage_verdict(facts, c.settings.disk_free_warn_mb << 20, outage)
        return status, summary, {**facts, "warnBelowBytes": c.settings.disk_free_warn_mb << 20,
                                 "warnBelowFraction": doctor.LOW_DISK_FRACTION, "outage": outage}

    async def events():
        facts = await c.store.read(doctor.event_facts)
        facts["oldestAge"] = doctor.age(facts["oldestAt"], c.now())
        facts["retentionDays"] = c.settings.event_retention_days
        return (*doctor.events_verdict(facts, c.now(), timedelta(days=c.settings.event_retention_days)), facts)

    async def outbox():
        facts = await c.store.read(doctor.outbox_facts)
        facts["oldestPendingAge"] = doctor.age(facts["oldestPendingAt"], c.now())
        return (*doctor.outbox_verdict(facts, c.now()), facts)

    async def streams():
        total = _open_streams()
        details = {"open": total, "identities": len(c.services.sse.streaming_identities())}
        return PASS, f"{total} open stream{'s' if total != 1 else ''}", details

    async def scheduler():
        service = c.services.scheduler
        interval = c.settings.scheduler_interval_seconds
        overdue = await c.store.read(recurring.overdue, c.now(), interval)
        details: dict = {"intervalSeconds": interval, **overdue}
        last_tick = service.last_tick_at
        details["lastTickAt"] = iso(last_tick)
        lag = service.lag_seconds(c.now())
        details["lagSeconds"] = round(lag, 1) if lag is not None else None
        return (*doctor.scheduler_verdict(lag, interval, iso(last_tick), overdue["overdue"], c.now()), details)

    async def loop():
        stats = c.services.loopmon.stats()
        return (*doctor.loop_verdict(stats), stats)

    async def loop_guards():
        active = await c.store.read(guards.active, c.now())
        return (*doctor.guards_verdict(active), {"active": active})

    async def process():
        # The streams, scheduler and loop probes describe the process that answered; with
        # `serve --workers N` this says which one it was.
        # aloneOnDatabase: no other server writes to its database, so it keeps inbox pages (events/bus.py)
        facts = {"pid": os.getpid(), "worker": _env_int("COORD_WORKER_INDEX"), "workers": _env_int("COORD_WORKERS") or 1,
                 "uptimeSeconds": round(time.monotonic() - c.started_monotonic, 1),
                 "aloneOnDatabase": c.bus.solitude() is not None}
        where = f"worker {facts['worker']} of {facts['workers']}, " if facts["worker"] else ""
        company = "alone on its database" if facts["aloneOnDatabase"] else "beside other servers on its database"
        return PASS, f"Answered by {where}pid {facts['pid']}, {company}", facts

    return [("database", "Database", database), ("storage", "Storage", storage), ("events", "Event log", events), ("outbox", "Push outbox", outbox),
            ("streams", "Streams", streams), ("scheduler", "Scheduler", scheduler), ("loop", "Event loop", loop),
            ("guards", "Loop guards", loop_guards), ("process", "Process", process)]


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


@bp.get("/doctor/admin")
@accepts(returns=REPORT)
async def admin_report():
    """Health of the server's database, event log, outbox, streams, scheduler and event loop (admin)."""
    require_admin("Admin access required", hint="ordinary tokens can call /api/doctor")
    return await _answer(_admin_probes())


async def _answer(probes: list):
    """The report; while the database cannot answer (or its storage is full) it is the answer of that
    fault's status (503 or 507, with Retry-After), so a readiness check fails with the report to read."""
    report, fault = await doctor.run_probes(probes)
    if fault is None and coord().store.outage.kind == "full":
        fault = StorageFull()
    if fault is None:
        return report
    return report, fault.status, fault.headers
