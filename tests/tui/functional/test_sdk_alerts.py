"""The SDK's alert and silence methods against the real server: list, read with events, ack (the second ack's 409),
unack, snooze, resolve; the `alert` wake item and the buzz item's alertId; preview, create, list and end a silence;
all as typed objects."""
from __future__ import annotations

import httpx
import pytest

from coordtui.client.api import ApiError, CoordClient
from coordtui.client.models import Alert, Silence
from tests.conftest import TOKENS


def _webhook_and_fire(url: str, app_name: str, bodies: list[dict]) -> list[dict]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}) as alice:
        hook = alice.post("/api/buzz/webhooks", json={"appName": app_name, "title": "T", "wakeAgent": "bob",
                                                      "runbookUrl": "https://runbooks.example.com/a"}).json()
        return [httpx.post(f"{url}/api/ingest/{app_name}/{hook['token']}", json=b).json() for b in bodies]


async def test_alerts_through_the_sdk(server):
    fired = _webhook_and_fire(server.url, "sdk-a", [{"title": "Disk full", "groupKey": "db"}] * 2)
    alert_id = fired[0]["alertId"]
    async with CoordClient(server.url, TOKENS["bob"]) as bob, CoordClient(server.url, TOKENS["alice"]) as alice:
        listed = await bob.alerts(state="open", app_name="sdk-a")
        assert [(a.id, a.count, a.state) for a in listed] == [(alert_id, 2, "open")] and isinstance(listed[0], Alert)
        one = await bob.alert(alert_id)
        assert [e.alert_id for e in one.events] == [alert_id, alert_id]
        assert one.runbook == {"pageId": None, "url": "https://runbooks.example.com/a"}
        items = (await bob.wake()).items
        assert {i.alert_id for i in items if i.source == "buzz"} == {alert_id}
        item = next(i for i in items if i.source == "alert")
        assert (item.id, item.count, item.alert_state, item.title, item.escalated) == (alert_id, 2, "open",
                                                                                       "Disk full", False)
        acked = await bob.ack_alert(alert_id)
        assert (acked.state, acked.acked_by) == ("acked", "bob")
        with pytest.raises(ApiError) as late:
            await alice.ack_alert(alert_id)
        assert late.value.status == 409 and late.value.body["ackedBy"] == "bob"
        assert (await bob.unack_alert(alert_id)).state == "open"
        snoozed = await bob.snooze_alert(alert_id, minutes=15)
        assert snoozed.state == "snoozed" and snoozed.snoozed_until is not None
        resolved = await alice.resolve_alert(alert_id)
        assert (resolved.state, resolved.resolved_by) == ("resolved", "alice")


async def test_silences_through_the_sdk(server):
    fired = _webhook_and_fire(server.url, "sdk-s", [{"title": f"Flaky {n}", "groupKey": "flaky"} for n in range(2)])
    async with CoordClient(server.url, TOKENS["bob"]) as bob:
        events, alerts = await bob.preview_silence({"title": "flaky"}, app_name="sdk-s")
        assert events == 2 and [a.id for a in alerts] == [fired[0]["alertId"]]
        made = await bob.create_silence({"title": "flaky"}, app_name="sdk-s", minutes=30, comment="known")
        assert isinstance(made, Silence) and made.active and made.created_by == "bob" and made.comment == "known"
        assert made.id in [s.id for s in await bob.silences()]
        ended = await bob.end_silence(made.id)
        assert not ended.active and ended.ended_by == "bob"
