"""The alert tools over the real /mcp with the SDK's client, on SQLite and PostgreSQL: list_alerts, ack_alert (409
names who was first), snooze_alert, resolve_alert, preview_silence then silence_alerts (a silenced ingest has no
effects), each calling the REST route in-process as the caller."""
from __future__ import annotations

import pytest

from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import backend_url, base_env, client, ok
from tests.server.mcp.test_mcp import connect, refused, succeeded

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


def fire(srv, hook: dict, body: dict) -> dict:
    with client(srv) as anon:
        return ok(anon.post(f"/api/ingest/{hook['appName']}/{hook['token']}", json=body))


async def test_list_ack_snooze_and_resolve(srv):
    with client(srv, "alice") as alice:
        hook = ok(alice.post("/api/buzz/webhooks", json={"appName": "mcp-a", "title": "T", "wakeAgent": "bob"}))
    first = fire(srv, hook, {"title": "Disk full", "groupKey": "db"})
    fire(srv, hook, {"title": "Disk full", "groupKey": "db", "body": "again"})
    async with connect(srv.url, "bob") as bob:
        listed = succeeded(await bob.call_tool("list_alerts", {"appName": "mcp-a", "state": "open"}))
        assert [(a["id"], a["count"]) for a in listed["alerts"]] == [(first["alertId"], 2)]
        acked = await bob.call_tool("ack_alert", {"alertId": first["alertId"]})
        assert succeeded(acked)["ackedBy"] == "bob"
        # the feed's title is fenced, never quoted in the summary (fence.py)
        assert acked.content[0].text == f"Acked alert {first['alertId']} ⟦untrusted 1⟧: acked, 2 firings, acked by bob."
        async with connect(srv.url, "alice") as alice_mcp:
            again = refused(await alice_mcp.call_tool("ack_alert", {"alertId": first["alertId"]}))
            assert again == {"error": "Already acked by bob", "state": "acked", "ackedBy": "bob"}
        snoozed = succeeded(await bob.call_tool("snooze_alert", {"alertId": first["alertId"], "minutes": 30}))
        assert snoozed["state"] == "snoozed" and snoozed["snoozedUntil"]
        assert succeeded(await bob.call_tool("resolve_alert", {"alertId": first["alertId"]}))["resolvedBy"] == "bob"
        refused(await bob.call_tool("snooze_alert", {"alertId": first["alertId"]}),
                "Snooze with minutes or until, not both")


async def test_preview_then_silence(srv):
    with client(srv, "alice") as alice:
        hook = ok(alice.post("/api/buzz/webhooks", json={"appName": "mcp-s", "title": "T", "wakeAgent": "bob"}))
    noisy = [fire(srv, hook, {"title": f"Flaky test {n}", "groupKey": "flaky"}) for n in range(3)]
    async with connect(srv.url, "bob") as bob:
        target = {"appName": "mcp-s", "match": {"title": "flaky"}}
        preview = await bob.call_tool("preview_silence", target)
        assert succeeded(preview)["events"] == 3 and preview.content[0].text.startswith("Would have hidden 3 events")
        assert succeeded(preview)["alerts"][0]["id"] == noisy[0]["alertId"]
        made = succeeded(await bob.call_tool("silence_alerts", {**target, "minutes": 60, "comment": "known"}))
        assert made["active"] and made["createdBy"] == "bob"
        assert fire(srv, hook, {"title": "Flaky test 4", "groupKey": "flaky"})["silencedBy"] == made["id"]
        async with connect(srv.url, "carol") as carol:
            refused(await carol.call_tool("silence_alerts", {**target, "minutes": 5}),
                    "Only those who may act on a webhook's alerts may silence it")
