"""Doctor over real HTTP: the caller and admin reports, every probe present with a valid status."""
from __future__ import annotations

import pytest

import asyncio
import os
import tomllib
from datetime import datetime, timedelta, timezone
from importlib import metadata
from pathlib import Path

from coordserver.migrations import SCHEMA_VERSION
from coordserver.models import PushDelivery, RecurringTemplate
from coordserver.realtime.sse import Connection
from coordserver.timeutil import FrozenClock, to_db
from tests.helpers import client

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"

STATUSES = {"pass", "warn", "fail"}
CALLER_PROBES = ["auth", "identity", "stream", "webhooks", "pending"]
ADMIN_PROBES = ["database", "storage", "events", "outbox", "streams", "scheduler", "loop", "guards", "process"]


def check_report(report: dict, probe_ids: list[str]) -> dict:
    assert list(report) == ["version", "ok", "status", "warnings", "errors", "probes", "totalDurationMs"]
    assert report["version"] == metadata.version("coord") == tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    assert [p["id"] for p in report["probes"]] == probe_ids
    for probe in report["probes"]:
        assert list(probe) == ["id", "name", "status", "summary", "details", "durationMs"]
        assert probe["status"] in STATUSES and probe["summary"] and isinstance(probe["durationMs"], int)
    ranks = {"pass": 0, "warn": 1, "fail": 2}
    worst = max((p["status"] for p in report["probes"]), key=ranks.__getitem__)
    assert report["status"] == worst and report["ok"] is (worst == "pass")
    assert report["warnings"] == [p["summary"] for p in report["probes"] if p["status"] == "warn"]
    assert report["errors"] == [p["summary"] for p in report["probes"] if p["status"] == "fail"]
    return {p["id"]: p for p in report["probes"]}


@pytest.mark.single_process  # puts a stream into one process's hub
def test_caller_report(make_server):
    srv = make_server()
    bob = client(srv, "bob")
    assert client(srv).get("/api/doctor").status_code == 401
    probes = check_report(bob.get("/api/doctor").json(), CALLER_PROBES)
    assert probes["auth"]["status"] == "pass" and probes["auth"]["details"]["source"] == "env"
    assert probes["identity"]["summary"] == "Signed in as bob"
    assert probes["stream"]["details"]["open"] == 0
    assert probes["webhooks"]["status"] == "warn" and probes["webhooks"]["summary"] == "No webhook URL registered"
    assert probes["pending"]["details"]["unread"] == 0

    hook = client(srv, "alice").post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI",
                                                                  "wakeAgent": "bob"}).json()
    client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"title": "red"})

    async def open_stream():  # a stream as the hub counts it, without the connect pulse that would deliver the alert
        hub = srv.coord.services.sse
        conn = Connection("bob", hub.queue_size)
        hub.connections.add(conn)
        hub.by_identity["bob"] = {conn: None}
    srv.call(open_stream)
    probes = check_report(bob.get("/api/doctor").json(), CALLER_PROBES)
    assert probes["stream"]["details"]["open"] == 1 and probes["stream"]["summary"] == "1 event stream open"
    assert probes["pending"]["details"]["wakeItems"] == 2  # the v1 buzz item and its alert (issue 26)
    # doctor looks at wake without delivering it
    assert [i["source"] for i in bob.get("/api/wake").json()["items"]] == ["buzz", "alert"]


def test_caller_webhook_delivery_results(make_server):
    srv = make_server(env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": "127.0.0.1"})
    carol = client(srv, "carol")
    assert carol.post("/api/auth/webhook", json={"url": "http://127.0.0.1:9/hook"}).status_code == 200

    def failed_push():
        from coordserver import db
        now = to_db(db.now())
        PushDelivery.create(identity="carol", event_type="message", body="{}", status="failed", attempts=8,
                            next_attempt_at=now, last_error="HTTP 502", last_status=502, created_at=now)
    srv.call(lambda: srv.coord.store.write(failed_push))
    probes = check_report(carol.get("/api/doctor").json(), CALLER_PROBES)
    assert probes["webhooks"]["status"] == "warn" and "HTTP 502" in probes["webhooks"]["summary"]
    assert probes["webhooks"]["details"]["failed"] == 1
    assert probes["webhooks"]["details"]["webhookUrl"] == "http://127.0.0.1:9/hook"


def test_admin_report(make_server):
    clock = FrozenClock(datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock)
    response = client(srv, "alice").get("/api/doctor/admin")
    assert response.status_code == 403
    assert response.json() == {"error": "Admin access required", "hint": "ordinary tokens can call /api/doctor"}

    async def let_loopmon_sample():
        await asyncio.sleep(0.6)
    srv.call(let_loopmon_sample)
    admin = client(srv, "admin")
    probes = check_report(admin.get("/api/doctor/admin").json(), ADMIN_PROBES)
    assert probes["database"]["details"]["schemaVersion"] == SCHEMA_VERSION
    backend = "postgresql" if srv.settings.database_url.startswith("postgresql") else "sqlite"  # COORD_TEST_WORKERS
    assert probes["database"]["details"]["sizeBytes"] > 0 and probes["database"]["details"]["backend"] == backend
    assert probes["events"]["details"]["rows"] == 0
    if backend == "sqlite":  # the free space of the database's filesystem, against the documented threshold
        storage = probes["storage"]["details"]
        assert 0 < storage["freeBytes"] <= storage["totalBytes"] and storage["warnBelowBytes"] == 1024 << 20
        assert probes["storage"]["status"] == ("pass" if storage["freeBytes"] > max(1 << 30, storage["totalBytes"] / 20)
                                               else "warn")
    assert probes["outbox"]["status"] == "pass" and probes["outbox"]["details"]["pending"] == 0
    assert probes["streams"]["details"]["open"] == 0
    assert probes["loop"]["details"]["samples"] >= 1 and probes["loop"]["details"]["maxMs"] is not None
    assert probes["process"]["details"]["pid"] == os.getpid()  # the in-process test server
    assert probes["process"]["details"]["worker"] is None and probes["process"]["details"]["workers"] == 1

    # a backlog, an old pending push and an overdue template show up as warnings
    hook = client(srv, "alice").post("/api/buzz/webhooks", json={"appName": "ci", "title": "CI"}).json()
    client(srv).post(f"/api/ingest/ci/{hook['token']}", json={"title": "red"})

    def backlog():
        from coordserver import db
        now = to_db(db.now())
        PushDelivery.create(identity="bob", event_type="message", body="{}", status="pending",
                            next_attempt_at=now, created_at=now - timedelta(hours=2))
        RecurringTemplate.create(title="Weekly", creator_user_id="alice", cron_expr="0 9 * * 1", enabled=True,
                                 next_run_at=now - timedelta(hours=1), created_at=now, updated_at=now)
    srv.call(lambda: srv.coord.store.write(backlog))
    probes = check_report(admin.get("/api/doctor/admin").json(), ADMIN_PROBES)
    assert probes["events"]["details"]["rows"] == 2  # the buzz event and its alert opening (alert_changed)
    assert probes["outbox"]["status"] == "warn" and probes["outbox"]["details"]["oldestPendingAge"] == "2h"
    assert probes["scheduler"]["status"] == "warn" and probes["scheduler"]["details"]["overdue"] == 1


def test_admin_report_on_postgresql(make_server, pg_cluster):
    srv = make_server(database_url=pg_cluster.create_database())
    probes = check_report(client(srv, "admin").get("/api/doctor/admin").json(), ADMIN_PROBES)
    assert probes["database"]["details"]["backend"] == "postgresql"
    assert probes["database"]["details"]["sizeBytes"] > 0
    assert probes["storage"]["status"] == "pass" and probes["storage"]["details"]["freeBytes"] is None
    check_report(client(srv, "bob").get("/api/doctor").json(), CALLER_PROBES)
