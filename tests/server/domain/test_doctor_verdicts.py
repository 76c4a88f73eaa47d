"""Doctor's pass/warn/fail rules are domain functions of the facts a probe gathered (api/doctor.py only
gathers and reports): each rule checked here without a server."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from coordserver.domain import doctor
from coordserver.domain.doctor import FAIL, PASS, WARN
from coordserver.netcheck import REFUSED_PREFIX

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
