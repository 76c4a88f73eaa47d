"""Doctor's pass/warn/fail rules are domain functions of the facts a probe gathered (api/doctor.py only
gathers and reports): each rule checked here without a server."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

from coordserver.domain import doctor
from coordserver.domain.doctor import FAIL, PASS, WARN
from coordserver.errors import DatabaseFault
from coordserver.events import log as event_log
from coordserver.models import BuzzEvent, Message, Project, PushDelivery, SchemaVersion, Task, Token, User
from coordserver.netcheck import REFUSED_PREFIX
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, last_event_id

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)


def test_identity():
    assert doctor.identity_verdict("bob", {"archived": True, "known": True})[0] == WARN
    assert doctor.identity_verdict("bob", {"archived": False, "known": False})[0] == WARN
    assert doctor.identity_verdict("bob", {"archived": False, "known": True}) == (PASS, "Signed in as bob")


def test_webhook():
    clean = {"lastError": None, "failed": 0, "lastSuccessAt": None}
    assert doctor.webhook_verdict(False, clean) == (WARN, "No webhook URL registered")
    assert doctor.webhook_verdict(True, {**clean, "lastError": REFUSED_PREFIX + "loopback"})[0] == FAIL
    assert doctor.webhook_verdict(True, {**clean, "failed": 1})[0] == WARN
    assert doctor.webhook_verdict(True, clean) == (PASS, "Webhook registered; nothing delivered yet")


def test_database_and_loop():
    facts = {"backend": "sqlite", "schemaVersion": 5, "sizeBytes": 2048, "queryMs": doctor.SLOW_QUERY_MS + 1}
    assert doctor.database_verdict(facts) == (WARN, f"sqlite schema v5, 2.0 KB, query {facts['queryMs']} ms")
    assert doctor.loop_verdict({"samples": 0})[0] == PASS
    assert doctor.loop_verdict({"samples": 5, "maxMs": doctor.STUCK_LOOP_MS + 1, "avgMs": 1})[0] == FAIL
    assert doctor.loop_verdict({"samples": 5, "maxMs": doctor.SLOW_LOOP_MS + 1, "avgMs": 1})[0] == WARN


def test_events_outbox_scheduler():
    old = (NOW - timedelta(days=9)).isoformat().replace("+00:00", "Z")
    assert doctor.events_verdict({"rows": 3, "oldestAt": old, "oldestAge": "9d"}, NOW, timedelta(days=7))[0] == WARN
    assert doctor.events_verdict({"rows": 0, "oldestAt": None, "oldestAge": None}, NOW, timedelta(days=7)) == \
        (PASS, "0 events in the log")
    outbox = {"pending": 1, "failed": 0, "refused": 0, "oldestPendingAt": old, "oldestPendingAge": "9d",
              "lastRefused": None, "lastFailure": None}
    assert doctor.outbox_verdict(outbox, NOW)[0] == WARN
    assert doctor.outbox_verdict({**outbox, "oldestPendingAt": None}, NOW) == (PASS, "1 pending, 0 failed pushes")
    assert doctor.scheduler_verdict(200.0, 60, old, 0, NOW)[0] == WARN
    assert doctor.scheduler_verdict(None, 60, None, 2, NOW)[0] == WARN
    assert doctor.scheduler_verdict(None, 60, None, 0, NOW) == (PASS, "Scheduler running; no tick yet")


# --- each verdict's words whole, at its boundaries ------------------------------------------------------------

def iso_z(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def test_identity_words():
    assert doctor.identity_verdict("bob", {"archived": True, "known": False}) == (WARN, "Identity bob is archived")
    assert doctor.identity_verdict("bob", {"archived": False, "known": False}) == (
        WARN, "Identity bob is not a known identity")


def test_webhook_words():
    clean = {"lastError": None, "failed": 0, "lastSuccessAt": None}
    assert doctor.webhook_verdict(True, {**clean, "lastError": REFUSED_PREFIX + "loopback", "failed": 1}) == (
        FAIL, "Webhook deliveries refused by the address check, not retried (loopback); register a publicly "
              "routable URL")
    assert doctor.webhook_verdict(True, {**clean, "failed": 1}) == (
        WARN, "Webhook registered; last delivery problem: failed")
    assert doctor.webhook_verdict(True, {**clean, "lastError": "HTTP 500"}) == (
        WARN, "Webhook registered; last delivery problem: HTTP 500")
    assert doctor.webhook_verdict(True, {**clean, "lastSuccessAt": "2026-03-01T11:00:00Z"}) == (
        PASS, "Webhook registered; last delivery at 2026-03-01T11:00:00Z")
    assert doctor.webhook_verdict(False, {**clean, "failed": 3}) == (WARN, "No webhook URL registered")
    assert doctor.refused_delivery(REFUSED_PREFIX) is True
    assert doctor.refused_delivery("x" + REFUSED_PREFIX) is False
    assert doctor.refused_delivery("") is False and doctor.refused_delivery(None) is False


def test_database_words_and_sizes():
    facts = {"backend": "postgresql", "schemaVersion": 12, "sizeBytes": None, "queryMs": doctor.SLOW_QUERY_MS}
    assert doctor.database_verdict(facts) == (PASS, "postgresql schema v12, size unknown, query 250 ms")
    for size, text in ((0, "0 B"), (1023, "1023 B"), (1024, "1.0 KB"), (1536, "1.5 KB"), (1024 ** 2 - 1, "1024.0 KB"),
                       (1024 ** 2, "1.0 MB"), (5 * 1024 ** 3, "5.0 GB"), (2048 * 1024 ** 3, "2048.0 GB")):
        assert doctor.database_verdict({**facts, "sizeBytes": size})[1] == (
            f"postgresql schema v12, {text}, query 250 ms"), size


def test_loop_words():
    assert doctor.loop_verdict({"samples": 0, "maxMs": 9999}) == (PASS, "Event loop: no lag samples yet")
    summary = "Event-loop lag over the last minute: max {} ms, avg 3 ms"
    for max_ms, status in ((doctor.STUCK_LOOP_MS + 1, FAIL), (doctor.STUCK_LOOP_MS, WARN),
                           (doctor.SLOW_LOOP_MS + 1, WARN), (doctor.SLOW_LOOP_MS, PASS)):
        assert doctor.loop_verdict({"samples": 1, "maxMs": max_ms, "avgMs": 3}) == (status, summary.format(max_ms))


def test_events_words_and_the_day_past_retention():
    week = timedelta(days=7)
    at = NOW - week - timedelta(days=1)
    assert doctor.events_verdict({"rows": 3, "oldestAt": iso_z(at), "oldestAge": "8d"}, NOW, week) == (
        PASS, "3 events in the log, oldest 8d old")
    assert doctor.events_verdict({"rows": 3, "oldestAt": iso_z(at - timedelta(seconds=1)), "oldestAge": "8d"},
                                 NOW, week) == (WARN, "3 events; oldest 8d old, past retention (pruning?)")


def test_outbox_words():
    old = iso_z(NOW - timedelta(hours=1, seconds=1))
    base = {"pending": 2, "failed": 3, "refused": 0, "oldestPendingAt": None, "oldestPendingAge": None,
            "lastRefused": None, "lastFailure": None}
    assert doctor.outbox_verdict({**base, "oldestPendingAt": old, "oldestPendingAge": "1h", "refused": 1}, NOW) == (
        WARN, "2 pending, 3 failed pushes; oldest pending 1h old")
    assert doctor.outbox_verdict({**base, "oldestPendingAt": iso_z(NOW - timedelta(hours=1))}, NOW) == (
        WARN, "2 pending, 3 failed pushes")
    refused = {**base, "refused": 2, "lastRefused": {"identity": "bob", "error": REFUSED_PREFIX + "private"}}
    assert doctor.outbox_verdict(refused, NOW) == (
        WARN, "2 pending, 3 failed pushes; 2 refused by the address check, last for bob: private")
    assert doctor.outbox_verdict({**base, "lastFailure": "HTTP 502"}, NOW) == (
        WARN, "2 pending, 3 failed pushes; last failure: HTTP 502")
    assert doctor.outbox_verdict({**base, "failed": 0, "lastFailure": "old"}, NOW) == (
        PASS, "2 pending, 0 failed pushes")


def test_scheduler_words():
    tick = iso_z(NOW - timedelta(minutes=2, seconds=1))
    assert doctor.scheduler_verdict(121.0, 60, tick, 5, NOW) == (WARN, "Scheduler last ran 2m ago")
    assert doctor.scheduler_verdict(120.0, 60, tick, 0, NOW) == (PASS, "Scheduler running")
    assert doctor.scheduler_verdict(120.0, 60, tick, 2, NOW) == (WARN, "2 recurring template(s) overdue")
    assert doctor.age(None, NOW) is None and doctor.age("", NOW) is None
    assert doctor.age(iso_z(NOW - timedelta(hours=2, minutes=15)), NOW) == "2h 15m"


def test_storage_words():
    mb = 1 << 20
    facts = {"freeBytes": 100 * mb, "totalBytes": 1000 * mb}
    assert doctor.storage_verdict(facts, 50 * mb, None) == (PASS, "100.0 MB free of 1000.0 MB on the database's "
                                                                  "filesystem")
    assert doctor.storage_verdict(facts, 100 * mb + 1, None) == (
        WARN, "Low disk space: 100.0 MB free of 1000.0 MB on the database's filesystem")
    assert doctor.storage_verdict(facts, 100 * mb, None)[0] == PASS
    assert doctor.storage_verdict({"freeBytes": 50 * mb - 1, "totalBytes": 1000 * mb}, 0, None)[0] == WARN
    assert doctor.storage_verdict({"freeBytes": 50 * mb, "totalBytes": 1000 * mb}, 0, None)[0] == PASS
    assert doctor.storage_verdict({"freeBytes": 20 << 30, "totalBytes": 10 << 30}, 0, None)[1] == (
        "20.0 GB free of 10.0 GB on the database's filesystem")
    assert doctor.storage_verdict({"freeBytes": (10 << 30) - 1, "totalBytes": 10 << 30}, 0, None)[1] == (
        "10240.0 MB free of 10.0 GB on the database's filesystem")
    full = {"kind": "full", "seconds": 12, "refused": 3}
    assert doctor.storage_verdict(facts, 0, full) == (FAIL, "Storage full: writes refused for 12 s (3 requests)")
    assert doctor.storage_verdict(facts, 0, {**full, "kind": "down"})[0] == PASS
    assert doctor.storage_verdict({"freeBytes": None, "totalBytes": None}, 0, None) == (
        PASS, "Free space is the PostgreSQL server's to watch (not visible from here)")
    assert doctor.storage_verdict({"freeBytes": None, "totalBytes": None}, 0, full)[0] == FAIL


def test_guards_words():
    assert doctor.guards_verdict([]) == (PASS, "No loop guard holds")
    assert doctor.guards_verdict([{"summary": "a"}]) == (WARN, "1 loop guard holding: a")
    three = [{"summary": s} for s in "abc"]
    assert doctor.guards_verdict(three) == (WARN, "3 loop guards holding: a; b; c")
    assert doctor.guards_verdict(three + [{"summary": "d"}]) == (WARN, "4 loop guards holding: a; b; c (and 1 more)")
    assert doctor.guards_verdict(three + [{"summary": "d"}, {"summary": "e"}]) == (
        WARN, "5 loop guards holding: a; b; c (and 2 more)")


# --- running probes --------------------------------------------------------------------------------------------

async def test_the_report_is_its_worst_probe_with_warnings_and_errors_listed(monkeypatch):
    async def ok():
        return PASS, "fine", None

    async def warns():
        return WARN, "careful", {"n": 1}

    async def breaks():
        raise ValueError("x" * 400)

    async def no_database():
        raise DatabaseFault("Database unavailable")

    async def no_database_again():
        raise DatabaseFault("Database still unavailable")
    report, fault = await doctor.run_probes([("a", "A", ok)])
    assert (report["ok"], report["status"], report["warnings"], report["errors"], fault) == (True, PASS, [], [], None)
    assert report["version"] == doctor.version() and isinstance(report["totalDurationMs"], int)
    assert report["probes"] == [{"id": "a", "name": "A", "status": PASS, "summary": "fine", "details": None,
                                 "durationMs": report["probes"][0]["durationMs"]}]
    report, fault = await doctor.run_probes([("a", "A", ok), ("w", "W", warns)])
    assert (report["ok"], report["status"], report["warnings"], report["errors"]) == (False, WARN, ["careful"], [])
    report, fault = await doctor.run_probes([("w", "W", warns), ("b", "Broken", breaks), ("d", "DB", no_database),
                                             ("e", "DB2", no_database_again), ("a", "A", ok)])
    assert (report["status"], report["warnings"]) == (FAIL, ["careful"])
    assert report["errors"] == ["Broken check failed: ValueError", "DB: Database unavailable",
                                "DB2: Database still unavailable"]
    assert [p["details"] for p in report["probes"]] == [
        {"n": 1}, {"error": "x" * 300}, {"error": "Database unavailable"}, {"error": "Database still unavailable"},
        None]
    assert fault is not None and fault.message == "Database unavailable"
    assert (await doctor.run_probes([]))[0]["status"] == PASS

    async def slow():
        await asyncio.sleep(0.05)
        return PASS, "slow", None
    report, _ = await doctor.run_probes([("s", "S", slow), ("a", "A", ok)])
    timed = report["probes"][0]["durationMs"]
    assert 50 <= timed < 5000 and timed <= report["totalDurationMs"] < 5000
    # durations are whole milliseconds
    monkeypatch.setattr(doctor, "time", Ticks(99.0, 100.0, 102.0004, 102.5, 102.5, 103.0007))
    report, _ = await doctor.run_probes([("a", "A", ok), ("b", "B", ok)])
    assert [p["durationMs"] for p in report["probes"]] == [2000, 0]
    assert report["totalDurationMs"] == 4001


def test_the_version_is_the_installed_packages(monkeypatch):
    from importlib import metadata
    assert doctor.version() == metadata.version("coord")

    def not_installed(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(doctor.metadata, "version", not_installed)
    assert doctor.version() == "0.0.0"


class Ticks:
    """A stand-in for doctor's `time`: perf_counter answers the given instants in turn (the durations to the
    millisecond)."""
    def __init__(self, *ticks: float):
        self.ticks = list(ticks)

    def perf_counter(self) -> float:
        return self.ticks.pop(0)


# --- facts from the store -------------------------------------------------------------------------------------

async def test_identity_and_pending_facts(store):
    assert await store.read(doctor.identity_facts, "bob", KNOWN) == {
        "known": True, "displayName": None, "archived": False, "lastSeenAt": None}
    assert (await store.read(doctor.identity_facts, "ghost", KNOWN))["known"] is False
    now = to_db(START)

    def setup():
        User.create(id="bob", display_name="Bob", created_at=now, updated_at=now, last_seen_at=now)
        User.create(id="old", display_name="Old", created_at=now, updated_at=now, archived_at=now)
        for urgent, status, waiting in ((True, "unread", False), (False, "unread", True), (False, "unread", False),
                                        (True, "read", True), (True, "read", False)):
            Message.create(recipient="bob", sender="alice", title="t", urgent=urgent, status=status,
                           response_waiting=waiting, created_at=now)
        for _ in range(3):
            Message.create(recipient="carol", sender="alice", title="t", urgent=True, response_waiting=True,
                           created_at=now)
        BuzzEvent.create(webhook_id=1, app_name="ci", title="Build", received_at=now, wake_agent="bob")
        night = Project.create(title="Night", color="#000000", work_hours_start=22, work_hours_end=6,
                               work_hours_timezone="UTC", created_at=now, updated_at=now)
        Task.create(title="off hours", creator_user_id="alice", assignee_user_id="bob", project_id=night.id,
                    created_at=now, updated_at=now)
        Token.create(identity="carol", token_hash="h", created_at=now - timedelta(hours=9), backup_agent="bob")
    await store.write(setup)
    seen = {"carol": START}  # carol, whom bob backs up, was seen just now: no backup alert
    assert await store.read(doctor.identity_facts, "bob", KNOWN) == {
        "known": True, "displayName": "Bob", "archived": False, "lastSeenAt": iso(START)}
    assert (await store.read(doctor.identity_facts, "old", KNOWN))["archived"] is True
    for _ in range(2):  # the wake as it stands, off hours left out, nothing delivered
        assert await store.read(doctor.pending_facts, "bob", "https://coord.example", KNOWN, seen) == {
            "unread": 3, "urgent": 1, "pendingReplies": 2, "wakeItems": 6,
            "wakeSummary": "6 waiting: 1 alert, 3 unread messages, 2 replies owed."}
    assert (await store.read(doctor.pending_facts, "bob", "https://coord.example", KNOWN, {}))["wakeSummary"] == (
        "7 waiting: 1 alert, 1 backup alert, 3 unread messages, 2 replies owed.")


async def test_database_and_event_facts(store, monkeypatch):
    await store.write(lambda: Message.create(recipient="bob", sender="alice", title="t", created_at=to_db(START)))
    facts = await store.read(doctor.database_facts, store)
    assert facts == {"schemaVersion": facts["schemaVersion"], "sizeBytes": facts["sizeBytes"],
                     "queryMs": facts["queryMs"], "messages": 1, "backend": "sqlite" if store.sqlite else "postgresql"}
    assert 0 < facts["queryMs"] < 5000
    monkeypatch.setattr(doctor, "time", Ticks(10.0, 10.0123456))  # milliseconds to two places
    assert (await store.read(doctor.database_facts, store))["queryMs"] == 12.35
    assert facts["schemaVersion"] == await store.read(
        lambda: max(v.version for v in SchemaVersion.select())) and facts["sizeBytes"] > 0
    assert await store.read(doctor.event_facts) == {"rows": 0, "oldestAt": None, "latestId": None}
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=None))
    store.clock.advance(minutes=5)
    await store.write(lambda: event_log.append("x", {"type": "x"}, to=["bob"]))
    got = await store.read(doctor.event_facts)
    assert (got["rows"], got["oldestAt"], got["latestId"]) == (2, iso(START), await store.read(last_event_id))


async def test_outbox_facts(store):
    now = to_db(START)
    assert await store.read(doctor.outbox_facts) == {
        "pending": 0, "failed": 0, "delivered": 0, "oldestPendingAt": None, "lastFailure": None, "refused": 0,
        "lastRefused": None}

    def push(status: str, minutes: int, identity: str = "bob", error: str | None = None) -> None:
        PushDelivery.create(identity=identity, event_type="x", body="{}", status=status, next_attempt_at=now,
                            created_at=now + timedelta(minutes=minutes), last_error=error)

    def setup():
        push("pending", 3)
        push("pending", 1)
        push("delivered", 0)
        push("failed", 1, error="HTTP 500")
        push("failed", 2, "carol", REFUSED_PREFIX + "private")
        push("failed", 4, error="HTTP 502")
        push("failed", 0, "dave", REFUSED_PREFIX + "loopback")
        push("pending", 5, error="HTTP 503, retrying")  # the newest error, but not a failure
    await store.write(setup)
    assert await store.read(doctor.outbox_facts) == {
        "pending": 3, "failed": 4, "delivered": 1, "oldestPendingAt": iso(START + timedelta(minutes=1)),
        "lastFailure": "HTTP 502", "refused": 2,
        "lastRefused": {"identity": "carol", "error": REFUSED_PREFIX + "private"}}
