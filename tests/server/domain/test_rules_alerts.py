"""Alert rules through the store, no HTTP, on both backends (skill page `buzz`, "Alerts"): an alert's wire shape
and its `alert_changed` events with their audiences, pulses and scheduler news; ack, unack, snooze and resolve from
the states each may start from, each refusal in its words with nothing written; who sees (404) and who may act
(403); the list; resolution by the source, reopening and flapping on an injected clock; snooze ends and
escalation passes; the next due time; and the `alert` wake items."""
from __future__ import annotations

import json
from datetime import timedelta

import pytest

from coordserver.domain import alerts, buzz, silences
from coordserver.domain.alerts import FlapRule
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events.channels import ALERTS, WAKE
from coordserver.models import BuzzAlert, NotebookPage
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, last_event_id, logged_after, move_row_last, published

BASE = "https://coord.example"
MINUTE = timedelta(minutes=1)


def create(store, owner: str = "alice", **body):
    return store.write(buzz.create_webhook, owner, {"appName": "ci", "title": "CI", **body}, BASE, KNOWN)


def update(store, webhook_id: int, **body):
    return store.write(buzz.update_webhook, webhook_id, "admin", True, body, BASE, KNOWN)


_fingerprints = iter(range(1_000_000))


async def fire(store, hook: dict, body: dict | None = None, **kwargs) -> dict:
    """An ingest of `body` (by default a firing titled "disk"), never a repeat of an earlier one."""
    body = {"title": "disk", **(body or {}), "fingerprint": f"f{next(_fingerprints)}"}
    parsed = buzz.parse_body(json.dumps(body).encode(), "application/json", None, None)
    return await store.write(buzz.ingest, hook["id"], hook["appName"], hook["token"], parsed, **kwargs)


def am(status: str = "firing", group: str = "g") -> dict:
    """An Alertmanager notification (its `status: resolved` resolves the alert)."""
    return {"status": status, "receiver": "r", "groupKey": group, "alerts": [{"labels": {"alertname": "A"}}]}


def read(store, alert_id: int):
    return store.read(lambda: alerts.alert_json(BuzzAlert.get_by_id(alert_id)))


def changes(after: int) -> list[tuple]:
    """The `alert_changed` events logged past `after`: (data, audience sorted or None)."""
    return [(data, to) for kind, data, to in logged_after(after) if kind == "alert_changed"]


def act(store, call, identity: str, alert_id: int, *args):
    return store.write(call, identity, identity == "admin", alert_id, *args)


async def refused(store, kind: type[Exception], call, identity: str, alert_id: int, *args) -> Exception:
    """The refusal, checking that nothing was written nor told."""
    before, after = await read(store, alert_id), await store.read(last_event_id)
    store.published.clear()
    with pytest.raises(kind) as refusal:
        await act(store, call, identity, alert_id, *args)
    assert await read(store, alert_id) == before
    assert await store.read(last_event_id) == after
    assert store.published == []
    return refusal.value


def pulsed(store) -> list[str]:
    return sorted(p["identity"] for p in published(store, WAKE))


# --- the wire shape and what a change tells -------------------------------------------------------------------

async def test_a_new_alert_reads_whole_and_its_opening_is_told_to_its_audience(store):
    hook = await create(store, forUsers="alice", wakeAgent="carol", notifyAgent="bob",
                        runbookUrl="https://runbooks.example/ci", escalateAfterMinutes=10, escalateTo="carol")
    store.published.clear()
    after = await store.read(last_event_id)
    store.clock.advance(seconds=5)
    now = START + timedelta(seconds=5)
    fired = await fire(store, hook, ingested_by="bob")
    alert = await read(store, fired["alertId"])
    assert alert == {"id": fired["alertId"], "webhookId": hook["id"], "appName": "ci", "title": "disk",
                     "groupKey": "disk", "state": "open", "count": 1, "firstAt": iso(now), "lastAt": iso(now),
                     "openedAt": iso(now), "ackedBy": None, "ackedAt": None, "snoozedUntil": None,
                     "resolvedAt": None, "resolvedBy": None, "lastEventId": fired["eventId"], "silencedBy": None,
                     "runbook": {"pageId": None, "url": "https://runbooks.example/ci"},
                     "escalateAt": iso(now + 10 * MINUTE), "escalatedAt": None, "flapping": False}
    assert await store.read(changes, after) == [(
        {"type": "alert_changed", "alertId": alert["id"], "change": "opened", "by": None, "wakeAgent": "carol",
         "notifyAgent": "bob", "escalateTo": [], "alert": alert, "ingestedBy": "bob"}, ["alice", "bob", "carol"])]
    assert published(store, ALERTS) == [{"alertId": alert["id"], "state": "open", "dueAt": iso(now + 10 * MINUTE)}]
    # carol: the new alert's pulse and the ingest's; bob sent it: no pulse of his own
    assert pulsed(store) == ["carol", "carol"]


async def test_an_alert_for_everyone_without_a_runbook_or_escalation(store):
    hook = await create(store, escalateAfterMinutes=10)  # a delay without escalateTo: it never escalates
    after = await store.read(last_event_id)
    fired = await fire(store, hook)
    alert = await read(store, fired["alertId"])
    assert (alert["runbook"], alert["escalateAt"], alert["state"]) == (None, None, "open")
    [(data, to)] = await store.read(changes, after)
    assert to is None and "ingestedBy" not in data and "quiet" not in data
    assert published(store, ALERTS)[-1] == {"alertId": alert["id"], "state": "open", "dueAt": None}
    hook2 = await create(store, appName="ci2", escalateTo="bob")  # escalateTo without a delay: never either
    assert (await read(store, (await fire(store, hook2))["alertId"]))["escalateAt"] is None
    page = await store.write(buzz.update_webhook, hook["id"], "alice", False, {"runbookUrl": "https://r.example"},
                             BASE, KNOWN)
    assert page["runbookUrl"] == "https://r.example"
    assert (await read(store, fired["alertId"]))["runbook"] == {"pageId": None, "url": "https://r.example"}


async def test_each_firing_takes_the_webhooks_routing_as_of_then_and_a_silenced_one_only_counts(store):
    hook = await create(store, forUsers="alice", wakeAgent="carol")
    first = await fire(store, hook)
    await update(store, hook["id"], forUsers="bob", wakeAgent="alice", notifyAgent="carol", escalateTo="bob",
                 escalateAfterMinutes=5, runbookUrl="https://r.example")
    store.clock.advance(seconds=30)
    second = await fire(store, hook, {"title": "disk", "groupKey": "disk"})
    alert = await read(store, first["alertId"])
    assert second["alertId"] == first["alertId"]
    stored = await store.read(lambda: BuzzAlert.get_by_id(first["alertId"]))
    assert (stored.for_users, stored.wake_agent, stored.notify_agent, stored.escalate_to) == (
        "bob", "alice", "carol", "bob")
    assert (alert["count"], alert["lastAt"], alert["firstAt"], alert["lastEventId"], alert["runbook"]) == (
        2, iso(START + timedelta(seconds=30)), iso(START), second["eventId"], {"pageId": None, "url": "https://r.example"})
    # the escalation time is the opening's: a firing on an open alert does not move it
    assert alert["escalateAt"] is None
    silence = await store.write(silences.create, "alice", False,
                                {"app_name": "ci", "minutes": 60, "match": {"title": "disk"}})
    store.published.clear()
    after = await store.read(last_event_id)
    store.clock.advance(seconds=30)
    hushed = await fire(store, hook)
    assert await read(store, first["alertId"]) == {**alert, "count": 3, "lastAt": iso(START + timedelta(seconds=60)),
                                                   "lastEventId": hushed["eventId"], "silencedBy": silence["id"]}
    assert await store.read(changes, after) == [] and published(store, ALERTS) == []
    await store.write(silences.end, "alice", False, silence["id"])
    await fire(store, hook)
    assert (await read(store, first["alertId"]))["silencedBy"] is None


async def test_an_alert_a_silence_hid_from_its_first_firing_is_routed_as_its_webhook(store):
    page = await store.write(lambda: NotebookPage.create(title="Runbook", content="", created_by="alice",
                                                         created_at=to_db(START), updated_at=to_db(START)).id)
    hook = await create(store, forUsers="alice", wakeAgent="carol", notifyAgent="bob", escalateTo="bob",
                        escalateAfterMinutes=10, runbookPageId=page, runbookUrl="https://r.example")
    silence = await store.write(silences.create, "alice", False, {"app_name": "ci", "minutes": 60,
                                                                  "match": {"title": "disk"}})
    store.published.clear()
    after = await store.read(last_event_id)
    fired = await fire(store, hook, {"title": "disk full", "groupKey": "g"})
    alert = await read(store, fired["alertId"])
    assert alert == {"id": fired["alertId"], "webhookId": hook["id"], "appName": "ci", "title": "disk full",
                     "groupKey": "g", "state": "open", "count": 1, "firstAt": iso(START), "lastAt": iso(START),
                     "openedAt": iso(START), "ackedBy": None, "ackedAt": None, "snoozedUntil": None,
                     "resolvedAt": None, "resolvedBy": None, "lastEventId": fired["eventId"],
                     "silencedBy": silence["id"], "runbook": {"pageId": page, "url": "https://r.example"},
                     "escalateAt": iso(START + 10 * MINUTE), "escalatedAt": None, "flapping": False}
    stored = await store.read(lambda: BuzzAlert.get_by_id(fired["alertId"]))
    assert (stored.for_users, stored.wake_agent, stored.notify_agent, stored.escalate_to) == (
        "alice", "carol", "bob", "bob")
    assert await store.read(changes, after) == [] and published(store, ALERTS) == [] and pulsed(store) == []
    with pytest.raises(NotFound):
        await store.read(alerts.visible, "dave", False, fired["alertId"])


# --- resolution by the source, reopening, flapping ------------------------------------------------------------

async def test_the_source_resolves_and_a_firing_reopens_with_everything_fresh(store):
    hook = await create(store, wakeAgent="carol", escalateAfterMinutes=10, escalateTo="bob")
    opened = await fire(store, hook, am())
    alert_id = opened["alertId"]
    await act(store, alerts.snooze, "carol", alert_id, 60, None)
    store.clock.advance(minutes=1)
    after = await store.read(last_event_id)
    await fire(store, hook, am("resolved"))
    resolved = await read(store, alert_id)
    assert (resolved["state"], resolved["resolvedAt"], resolved["resolvedBy"], resolved["snoozedUntil"],
            resolved["count"]) == ("resolved", iso(START + MINUTE), None, None, 1)
    [(data, _)] = await store.read(changes, after)
    assert (data["change"], data["by"], data["alert"]) == ("resolved", None, resolved)
    store.clock.advance(minutes=1)
    after = await store.read(last_event_id)
    await fire(store, hook, am("resolved"))  # already resolved: nothing changes
    assert await store.read(changes, after) == []
    assert {k: v for k, v in (await read(store, alert_id)).items() if k not in ("lastAt", "lastEventId")} == {
        k: v for k, v in resolved.items() if k not in ("lastAt", "lastEventId")}
    store.clock.advance(minutes=1)
    now = START + 3 * MINUTE
    await fire(store, hook, am())
    reopened = await read(store, alert_id)
    assert reopened == {**resolved, "state": "open", "count": 2, "lastAt": iso(now), "openedAt": iso(now),
                        "resolvedAt": None, "lastEventId": reopened["lastEventId"],
                        "escalateAt": iso(now + 10 * MINUTE)}
    [(data, _)] = await store.read(changes, after)
    assert (data["change"], data["alert"]) == ("reopened", reopened)
    # a person's resolution, then an ack, are cleared by the next reopening too
    await act(store, alerts.ack, "bob", alert_id)
    await act(store, alerts.resolve, "bob", alert_id)
    store.clock.advance(minutes=1)
    await fire(store, hook, am())
    again = await read(store, alert_id)
    assert (again["state"], again["ackedBy"], again["ackedAt"], again["resolvedBy"], again["resolvedAt"],
            again["openedAt"]) == ("open", None, None, None, None, iso(START + 4 * MINUTE))


async def test_a_first_resolution_makes_a_resolved_alert_and_tells_no_opening(store):
    hook = await create(store, escalateAfterMinutes=10, escalateTo="bob")
    after = await store.read(last_event_id)
    first = await fire(store, hook, am("resolved"))
    alert = await read(store, first["alertId"])
    assert (alert["state"], alert["count"], alert["resolvedAt"], alert["escalateAt"]) == (
        "resolved", 0, iso(START), None)
    assert await store.read(changes, after) == []  # created resolved: no change to tell


async def test_an_escalated_alert_reopened_escalates_afresh(store):
    hook = await create(store, escalateAfterMinutes=10, escalateTo="bob")
    alert_id = (await fire(store, hook, am()))["alertId"]
    store.clock.advance(minutes=10)
    assert await store.write(alerts.escalate_due) == 1
    await fire(store, hook, am("resolved"))
    store.clock.advance(minutes=1)
    await fire(store, hook, am())
    alert = await read(store, alert_id)
    assert (alert["escalatedAt"], alert["escalateAt"]) == (None, iso(START + 21 * MINUTE))


async def test_an_alert_resolved_too_often_wakes_once_per_window(store):
    hook = await create(store, wakeAgent="carol", flapResolutions=2, flapWindowMinutes=10)
    alert_id = (await fire(store, hook, am()))["alertId"]

    async def at(minute: int, status: str) -> tuple[list[tuple], list[str], dict]:
        store.clock.set(START + minute * MINUTE)
        store.published.clear()
        after = await store.read(last_event_id)
        await fire(store, hook, am(status), flap=FlapRule(100, timedelta(hours=5)))
        told = [(kind, data.get("change"), data.get("quiet")) for kind, data, _ in await store.read(logged_after, after)]
        return told, pulsed(store), await read(store, alert_id)

    told, woken, alert = await at(1, "resolved")  # the window starts: 1 resolution
    assert (told, woken, alert["flapping"]) == ([("alert_changed", "resolved", None), ("broadcast", None, None)],
                                                ["carol", "carol"], False)
    await at(2, "firing")
    await at(3, "resolved")  # 2: not more than 2
    told, woken, alert = await at(4, "firing")
    assert (woken, alert["flapping"]) == (["carol", "carol"], False)
    told, woken, alert = await at(11, "resolved")  # 3, the window's last instant: flapping, and it wakes once
    assert (told, woken, alert["flapping"]) == ([("alert_changed", "resolved", None), ("broadcast", None, None)],
                                                ["carol", "carol"], True)
    told, woken, alert = await at(12, "firing")  # inside the window since it woke: quiet
    assert (told, woken, alert["state"]) == ([("alert_changed", "reopened", True), ("broadcast", None, True)], [],
                                             "open")
    told, woken, alert = await at(21, "firing")  # a window after it woke: it wakes again (no change to tell)
    assert (told, woken) == ([("broadcast", None, None)], ["carol"])
    told, woken, alert = await at(22, "firing")
    assert (told, woken) == ([("broadcast", None, True)], [])
    told, woken, alert = await at(23, "resolved")  # the window of 1 to 11 is over: a new one, 1 resolution
    assert (told, woken, alert["flapping"]) == ([("alert_changed", "resolved", None), ("broadcast", None, None)],
                                                ["carol", "carol"], False)


async def test_a_webhook_without_flap_thresholds_takes_the_deployments(store):
    hook = await create(store, wakeAgent="carol", flapResolutions=1)  # its window: the deployment's
    rule = FlapRule(5, timedelta(minutes=3))
    alert_id = (await fire(store, hook, am(), flap=rule))["alertId"]
    for minute, status in ((1, "resolved"), (2, "firing")):
        store.clock.set(START + minute * MINUTE)
        await fire(store, hook, am(status), flap=rule)
    store.clock.set(START + 5 * MINUTE)  # 4 minutes after the first resolution: outside a 3-minute window
    await fire(store, hook, am("resolved"), flap=rule)
    assert (await read(store, alert_id))["flapping"] is False
    plain = await create(store, appName="ci2", wakeAgent="carol")
    plain_id = (await fire(store, plain, am(), flap=FlapRule(1, timedelta(minutes=3))))["alertId"]
    for minute, status in ((6, "resolved"), (7, "firing"), (8, "resolved")):
        store.clock.set(START + minute * MINUTE)
        await fire(store, plain, am(status), flap=FlapRule(1, timedelta(minutes=3)))
    assert (await read(store, plain_id))["flapping"] is True
    defaults = await create(store, appName="ci3", wakeAgent="carol")
    default_id = (await fire(store, defaults, am()))["alertId"]  # the default rule: more than 3 in 30 minutes
    for minute in range(9, 16):
        store.clock.set(START + minute * MINUTE)
        await fire(store, defaults, am("resolved" if minute % 2 else "firing"))
        assert (await read(store, default_id))["flapping"] is (minute == 15)


# --- acting ----------------------------------------------------------------------------------------------------

async def test_ack_unack_snooze_and_resolve_each_from_its_states(store):
    hook = await create(store, forUsers="alice,admin", wakeAgent="carol", notifyAgent="bob", escalateAfterMinutes=10,
                        escalateTo="admin")
    alert_id = (await fire(store, hook))["alertId"]
    opened = await read(store, alert_id)
    store.published.clear()
    after = await store.read(last_event_id)
    store.clock.advance(minutes=1)
    acked = await act(store, alerts.ack, "bob", alert_id)
    assert acked == {**opened, "state": "acked", "ackedBy": "bob", "ackedAt": iso(START + MINUTE)}
    assert acked == await read(store, alert_id)
    assert await store.read(changes, after) == [(
        {"type": "alert_changed", "alertId": alert_id, "change": "acked", "by": "bob", "wakeAgent": "carol",
         "notifyAgent": "bob", "escalateTo": [], "alert": acked}, ["admin", "alice", "bob", "carol"])]
    assert published(store, ALERTS) == [{"alertId": alert_id, "state": "acked", "dueAt": opened["escalateAt"]}]
    assert pulsed(store) == ["admin", "carol"]

    conflict = await refused(store, Conflict, alerts.ack, "alice", alert_id)
    assert (conflict.message, conflict.extra) == ("Already acked by bob", {"state": "acked", "ackedBy": "bob"})
    store.clock.advance(minutes=1)
    after = await store.read(last_event_id)
    unacked = await act(store, alerts.unack, "alice", alert_id)
    assert [(data["change"], data["by"]) for data, _ in await store.read(changes, after)] == [("unacked", "alice")]
    now = START + 2 * MINUTE
    assert unacked == {**opened, "openedAt": iso(now), "escalateAt": iso(now + 10 * MINUTE)}
    conflict = await refused(store, Conflict, alerts.unack, "alice", alert_id)
    assert (conflict.message, conflict.extra) == ("The alert is open", {"state": "open"})

    store.published.clear()
    after = await store.read(last_event_id)
    snoozed = await act(store, alerts.snooze, "carol", alert_id, 30, None)
    assert pulsed(store) == ["admin"]  # carol's own change does not pulse her
    [(data, _)] = await store.read(changes, after)
    assert (data["change"], data["by"], "ingestedBy" in data) == ("snoozed", "carol", False)
    assert snoozed == {**unacked, "state": "snoozed", "snoozedUntil": iso(now + 30 * MINUTE)}
    assert published(store, ALERTS)[-1] == {"alertId": alert_id, "state": "snoozed",
                                            "dueAt": iso(now + 30 * MINUTE)}
    conflict = await refused(store, Conflict, alerts.unack, "alice", alert_id)
    assert (conflict.message, conflict.extra) == ("The alert is snoozed", {"state": "snoozed"})
    later = await act(store, alerts.snooze, "carol", alert_id, None, iso(now + 5 * MINUTE))  # the new end wins
    assert later["snoozedUntil"] == iso(now + 5 * MINUTE)
    acked = await act(store, alerts.ack, "admin", alert_id)  # an ack ends the snooze
    assert (acked["state"], acked["ackedBy"], acked["snoozedUntil"]) == ("acked", "admin", None)
    again = await act(store, alerts.snooze, "alice", alert_id, 1, None)  # an acked alert may be snoozed
    assert (again["state"], again["ackedBy"], again["snoozedUntil"]) == ("snoozed", "admin", iso(now + MINUTE))

    store.clock.advance(minutes=1)
    after = await store.read(last_event_id)
    resolved = await act(store, alerts.resolve, "alice", alert_id)
    assert resolved == {**again, "state": "resolved", "snoozedUntil": None, "resolvedAt": iso(now + MINUTE),
                        "resolvedBy": "alice"}
    assert [(data["change"], data["by"]) for data, _ in await store.read(changes, after)] == [("resolved", "alice")]
    for call, args in ((alerts.ack, ()), (alerts.unack, ()), (alerts.snooze, (5, None)), (alerts.resolve, ())):
        conflict = await refused(store, Conflict, call, "alice", alert_id, *args)
        assert (conflict.message, conflict.extra) == ("The alert is resolved", {"state": "resolved"})

    straight = (await fire(store, hook, {"title": "straight"}))["alertId"]  # an open alert resolves as it is
    resolved = await act(store, alerts.resolve, "alice", straight)
    assert (resolved["state"], resolved["resolvedBy"], resolved["ackedBy"]) == ("resolved", "alice", None)


async def test_a_resolved_alert_cannot_be_acked_nor_an_open_one_unacked_by_anyone(store):
    hook = await create(store, forUsers="alice")
    alert_id = (await fire(store, hook))["alertId"]
    await act(store, alerts.ack, "admin", alert_id)  # an admin acts on an alert that names someone else
    await act(store, alerts.unack, "admin", alert_id)
    assert (await act(store, alerts.snooze, "admin", alert_id, 5, None))["state"] == "snoozed"
    await act(store, alerts.resolve, "admin", alert_id)
    conflict = await refused(store, Conflict, alerts.ack, "admin", alert_id)
    assert conflict.extra == {"state": "resolved"}


@pytest.mark.parametrize("minutes, until, message", [
    (None, None, "Snooze with minutes or until, not both"),
    (5, iso(START + MINUTE), "Snooze with minutes or until, not both"),
    (0, None, "minutes must be 1 to 43200"),
    (43201, None, "minutes must be 1 to 43200"),
    (True, None, "minutes must be 1 to 43200"),
    (1.5, None, "minutes must be 1 to 43200"),
    ("5", None, "minutes must be 1 to 43200"),
    (None, "tomorrow", "until must be an ISO-8601 timestamp"),
    (None, 5, "until must be an ISO-8601 timestamp"),
    (None, iso(START), "until must be in the future"),
    (None, iso(START - MINUTE), "until must be in the future"),
    (None, iso(START + timedelta(minutes=43200, milliseconds=1)), "until must be within 43200 minutes"),
])
async def test_a_bad_snooze_is_refused_in_its_words_and_nothing_changes(store, minutes, until, message):
    hook = await create(store)
    alert_id = (await fire(store, hook))["alertId"]
    refusal = await refused(store, Invalid, alerts.snooze, "alice", alert_id, minutes, until)
    assert refusal.message == message


@pytest.mark.parametrize("minutes, until, end", [
    (1, None, START + MINUTE), (43200, None, START + timedelta(minutes=43200)),
    (None, iso(START + timedelta(milliseconds=1)), START + timedelta(milliseconds=1)),
    (None, iso(START + timedelta(minutes=43200)), START + timedelta(minutes=43200))])
async def test_the_snooze_limits_themselves_are_accepted(store, minutes, until, end):
    hook = await create(store)
    alert_id = (await fire(store, hook))["alertId"]
    assert (await act(store, alerts.snooze, "alice", alert_id, minutes, until))["snoozedUntil"] == iso(end)


# --- who sees, who acts, the list ------------------------------------------------------------------------------

async def test_who_sees_an_alert_and_who_may_act_on_it(store):
    for_alice = await create(store, "bob", forUsers="alice", appName="a")
    for_all = await create(store, "bob", appName="b", escalateTo="carol", escalateAfterMinutes=5)
    agents = await create(store, "admin", appName="c", forUsers="bob", wakeAgent="carol", notifyAgent="alice")
    private, public, routed = [(await fire(store, h))["alertId"] for h in (for_alice, for_all, agents)]
    # private: alice (forUsers) and bob (the owner) see and act; carol does not see it
    for identity in ("alice", "bob", "admin"):
        assert (await store.read(alerts.visible, identity, identity == "admin", private)).id == private
    assert (await act(store, alerts.ack, "alice", private))["ackedBy"] == "alice"  # forUsers act
    gone = await refused(store, NotFound, alerts.ack, "carol", private)
    assert gone.message == "Alert not found"
    with pytest.raises(NotFound):
        await store.read(alerts.visible, "carol", False, private)
    # public: everyone sees it; carol (escalateTo) and bob (owner) act, alice may not
    forbidden = await refused(store, Forbidden, alerts.ack, "alice", public)
    assert forbidden.message == "Only the webhook's agents, its forUsers, its owner or an admin may act on its alerts"
    assert (await act(store, alerts.ack, "carol", public))["ackedBy"] == "carol"
    assert (await act(store, alerts.unack, "bob", public))["state"] == "open"
    # routed: its agents act though forUsers names only bob
    assert (await act(store, alerts.ack, "carol", routed))["ackedBy"] == "carol"
    assert (await act(store, alerts.unack, "alice", routed))["state"] == "open"
    assert (await act(store, alerts.ack, "bob", routed))["ackedBy"] == "bob"
    with pytest.raises(NotFound):
        await store.read(alerts.visible, "dave", False, routed)
    with pytest.raises(NotFound):
        await store.read(alerts.visible, "admin", True, 987654)


async def test_a_webhooks_owner_acts_on_its_alerts_and_no_others(store):
    alices = await create(store, "alice")
    bobs = await create(store, "bob", appName="ops", escalateAfterMinutes=5, escalateTo="bob")
    hers, his = [(await fire(store, h))["alertId"] for h in (alices, bobs)]
    assert (await act(store, alerts.ack, "alice", hers))["ackedBy"] == "alice"
    assert (await act(store, alerts.ack, "bob", his))["ackedBy"] == "bob"
    store.clock.advance(minutes=1)
    assert (await act(store, alerts.unack, "bob", his))["escalateAt"] == iso(START + 6 * MINUTE)  # its webhook's delay
    await act(store, alerts.ack, "bob", his)
    await refused(store, Forbidden, alerts.unack, "alice", his)
    await refused(store, Forbidden, alerts.unack, "bob", hers)


async def test_an_alert_names_identities_whole_without_wildcards(store):
    hook = await create(store, "admin", forUsers="b_b,carol", escalateTo="alice", escalateAfterMinutes=5)
    alert_id = (await fire(store, hook))["alertId"]
    for identity in ("b_b", "carol", "alice"):
        assert (await store.read(alerts.visible, identity, False, alert_id)).id == alert_id
    for identity in ("bob", "b%", "%", "_", "b", "carol,b_b", "b\\_b", "arol", "alic"):
        with pytest.raises(NotFound):
            await store.read(alerts.visible, identity, False, alert_id)
    await store.write(alerts.ack, "b_b", False, alert_id)  # forUsers act
    await store.write(alerts.unack, "alice", False, alert_id)  # escalateTo act


async def test_the_list_is_newest_activity_first_and_the_callers(store):
    ci = await create(store, forUsers="bob")
    ops = await create(store, appName="ops")
    first = (await fire(store, ci))["alertId"]
    second = (await fire(store, ops))["alertId"]  # the same instant: the newer id first
    assert [a["id"] for a in await store.read(alerts.list_alerts, "admin", True, None, None, 10)] == [second, first]
    store.clock.advance(seconds=1)
    third = (await fire(store, ops, {"title": "cpu"}))["alertId"]
    store.clock.advance(seconds=1)
    await fire(store, ci)  # the first alert's activity is now the newest
    await act(store, alerts.ack, "admin", second)

    def listed(identity: str, state: str | None = None, app: str | None = None, limit: int = 10) -> list[int]:
        return [a["id"] for a in alerts.list_alerts(identity, identity == "admin", state, app, limit)]
    assert await store.read(listed, "admin") == [first, third, second]
    assert await store.read(listed, "bob") == [first, third, second]
    assert await store.read(listed, "carol") == [third, second]
    assert await store.read(listed, "admin", "acked") == [second]
    assert await store.read(listed, "admin", "", "") == [first, third, second]
    assert await store.read(listed, "admin", None, "ops") == [third, second]
    assert await store.read(listed, "admin", "open", "ci") == [first]
    assert await store.read(listed, "carol", None, "ci") == []
    assert await store.read(listed, "admin", None, None, 2) == [first, third]
    assert (await store.read(lambda: alerts.list_alerts("admin", True, None, None, 1))) == [await read(store, first)]


# --- snoozes end, alerts escalate -------------------------------------------------------------------------------

async def test_snoozes_end_by_themselves_earliest_first_once(store):
    hook = await create(store, wakeAgent="carol", escalateAfterMinutes=60, escalateTo="bob")
    ids = [(await fire(store, hook, {"title": t}))["alertId"] for t in ("a", "b", "c", "d")]
    await fire(store, hook, {"title": "open"})  # never snoozed: not the pass's to take
    await fire(store, hook, {"title": "open2"})
    await act(store, alerts.snooze, "carol", ids[0], 10, None)
    # ids[2] snoozed before ids[1]: PostgreSQL then holds their rows the other way round, so only the id orders them
    await act(store, alerts.snooze, "carol", ids[2], 5, None)
    await act(store, alerts.snooze, "carol", ids[1], 5, None)
    await act(store, alerts.snooze, "carol", ids[3], 11, None)
    assert await store.read(alerts.next_due) == START + 5 * MINUTE
    store.clock.set(START + 5 * MINUTE - timedelta(milliseconds=1))
    assert await store.write(alerts.unsnooze_due) == 0
    store.clock.set(START + 10 * MINUTE)
    before = await read(store, ids[1])
    store.published.clear()
    after = await store.read(last_event_id)
    assert await store.write(alerts.unsnooze_due, 2) == 2  # the two ends at 5 minutes, by id
    now = START + 10 * MINUTE
    reopened = await read(store, ids[1])
    assert reopened == {**before, "state": "open", "snoozedUntil": None, "openedAt": iso(now),
                        "escalateAt": iso(now + 60 * MINUTE)}
    assert [(data["alertId"], data["change"], data["by"]) for data, _ in await store.read(changes, after)] == [
        (ids[1], "unsnoozed", None), (ids[2], "unsnoozed", None)]
    assert pulsed(store) == ["bob", "bob", "carol", "carol"]
    assert await store.read(alerts.next_due) == START + 10 * MINUTE
    assert await store.write(alerts.unsnooze_due) == 1
    assert [a["state"] for a in [await read(store, i) for i in ids]] == ["open", "open", "open", "snoozed"]
    assert await store.write(alerts.unsnooze_due) == 0
    assert await store.read(alerts.next_due) == START + 11 * MINUTE


async def test_an_open_alert_escalates_once_past_its_time_unless_handled_or_hidden(store):
    hook = await create(store, forUsers="alice", wakeAgent="carol", escalateAfterMinutes=10, escalateTo="bob,admin")
    ids = [(await fire(store, hook, {"title": t}))["alertId"] for t in ("a", "b", "c", "d")]
    store.clock.advance(minutes=1)
    late = (await fire(store, hook, {"title": "e"}))["alertId"]
    await act(store, alerts.ack, "carol", ids[1])
    await act(store, alerts.snooze, "carol", ids[2], 60, None)
    silence = await store.write(silences.create, "alice", False,
                                {"app_name": "ci", "minutes": 60, "match": {"title": "d"}})
    await fire(store, hook, {"title": "d"})  # silenced: it does not escalate
    assert silence["id"]
    assert await store.read(alerts.next_due) == START + 10 * MINUTE
    store.clock.set(START + 10 * MINUTE - timedelta(milliseconds=1))
    assert await store.write(alerts.escalate_due) == 0
    store.clock.set(START + 10 * MINUTE)
    store.published.clear()
    after = await store.read(last_event_id)
    assert await store.write(alerts.escalate_due) == 1
    escalated = await read(store, ids[0])
    assert escalated["escalatedAt"] == iso(START + 10 * MINUTE)
    assert await store.read(changes, after) == [(
        {"type": "alert_changed", "alertId": ids[0], "change": "escalated", "by": None, "wakeAgent": "carol",
         "notifyAgent": None, "escalateTo": ["bob", "admin"], "alert": escalated},
        ["admin", "alice", "bob", "carol"])]
    assert pulsed(store) == ["admin", "bob", "carol"]
    assert published(store, ALERTS) == [{"alertId": ids[0], "state": "open", "dueAt": escalated["escalateAt"]}]
    assert await store.write(alerts.escalate_due) == 0  # once
    assert await store.read(alerts.next_due) == START + 11 * MINUTE  # the late one's
    store.clock.set(START + 11 * MINUTE)
    assert await store.write(alerts.escalate_due, 1) == 1
    assert (await read(store, late))["escalatedAt"] == iso(START + 11 * MINUTE)
    assert await store.read(alerts.next_due) == START + 61 * MINUTE  # the snooze's end; the acked alert's is not due


async def test_escalation_passes_take_the_earliest_first_up_to_their_limit(store):
    hook = await create(store, escalateAfterMinutes=10, escalateTo="bob")
    first = (await fire(store, hook, {"title": "a"}))["alertId"]
    store.clock.advance(minutes=1)
    second = (await fire(store, hook, {"title": "b"}))["alertId"]
    await store.write(lambda: BuzzAlert.update(escalate_at=to_db(START + 6 * MINUTE)).where(
        BuzzAlert.id == second).execute())  # second is due before first
    store.clock.set(START + 20 * MINUTE)
    assert await store.write(alerts.escalate_due, 1) == 1
    assert [(await read(store, i))["escalatedAt"] is not None for i in (first, second)] == [False, True]
    assert await store.write(alerts.escalate_due, 5) == 1
    c, d = [(await fire(store, hook, {"title": title}))["alertId"] for title in ("c", "d")]  # due at one instant
    await store.write(touch, c)
    store.clock.set(START + 30 * MINUTE)
    assert await store.write(alerts.escalate_due, 1) == 1
    assert [(await read(store, i))["escalatedAt"] is not None for i in (c, d)] == [True, False], "ties by id"
    assert await store.write(alerts.escalate_due, 5) == 1


def touch(alert_id: int) -> None:
    move_row_last(BuzzAlert, alert_id, "group_key")


async def test_wake_items_of_one_instant_list_by_id(store):
    hook = await create(store, wakeAgent="carol")
    first, second = [(await fire(store, hook, {"title": title}))["alertId"] for title in ("a", "b")]
    await store.write(touch, first)
    assert [i["id"] for i in (await store.read(alerts.wake_items, "carol", 10))[0]] == [first, second]


async def test_nothing_is_due_without_snoozes_or_escalations(store):
    assert await store.read(alerts.next_due) is None
    hook = await create(store)
    await fire(store, hook)
    assert await store.read(alerts.next_due) is None


# --- wake ------------------------------------------------------------------------------------------------------

async def test_wake_items_are_the_open_alerts_of_the_wake_agent_and_the_escalated(store):
    hook = await create(store, wakeAgent="carol", escalateAfterMinutes=10, escalateTo="alice,bob",
                        runbookUrl="https://r.example")
    first = await fire(store, hook, {"title": "a"})
    store.clock.advance(seconds=1)
    second = (await fire(store, hook, {"title": "b"}))["alertId"]
    await fire(store, hook, {"title": "b"})
    store.clock.advance(seconds=1)
    third = (await fire(store, hook, {"title": "c"}))["alertId"]
    acked = (await fire(store, hook, {"title": "d"}))["alertId"]
    await act(store, alerts.ack, "carol", acked)
    other = await create(store, appName="ops", wakeAgent="bob")
    ops = (await fire(store, other))["alertId"]

    def items(identity: str, limit: int = 10) -> tuple[list, int]:
        listed, total = alerts.wake_items(identity, limit)
        return [{k: v for k, v in i.items() if k != "_at"} for i in listed], total
    listed, total = await store.read(items, "carol")
    assert total == 3
    assert listed[0] == {
        "source": "alert", "id": first["alertId"], "summary": "a (1 firing)",
        "action": f"Ack it if you take it on (POST /api/buzz/alerts/{first['alertId']}/ack), or snooze or resolve it.",
        "priority": "high", "appName": "ci", "title": "a", "count": 1, "state": "open", "firstAt": iso(START),
        "runbook": {"pageId": None, "url": "https://r.example"}, "escalated": False, "ephemeral": False}
    assert [(i["id"], i["summary"]) for i in listed] == [(first["alertId"], "a (1 firing)"),
                                                         (second, "b (2 firings)"), (third, "c (1 firing)")]
    [raw] = (await store.read(alerts.wake_items, "carol", 1))[0]
    assert raw["_at"] == START
    assert await store.read(items, "carol", 1) == (listed[:1], 3), "beyond the limit, every open alert counted"
    assert await store.read(items, "carol", 2) == (listed[:2], 3)
    assert await store.read(items, "carol", 3) == (listed, 3)
    assert await store.read(items, "alice") == ([], 0)  # escalateTo: nothing until it escalates
    store.clock.set(START + 10 * MINUTE)
    assert await store.write(alerts.escalate_due) == 1  # the first (the others are 1 s and 2 s later)
    listed, total = await store.read(items, "alice")
    assert (total, [(i["id"], i["summary"], i["escalated"]) for i in listed]) == (
        1, [(first["alertId"], "Escalated to you, unacknowledged: a (1 firing)", True)])
    assert [i["id"] for i in (await store.read(items, "bob"))[0]] == [first["alertId"], ops]  # and his own
    assert await store.read(items, "_ob") == ([], 0)  # a LIKE wildcard names no one
    assert await store.read(items, "%") == ([], 0)
    carol = (await store.read(items, "carol"))[0]
    assert [(i["id"], i["escalated"]) for i in carol] == [(first["alertId"], False), (second, False), (third, False)]
    await act(store, alerts.ack, "alice", first["alertId"])
    assert await store.read(items, "alice") == ([], 0)
    store.clock.set(START + 11 * MINUTE)
    await fire(store, hook, {"title": "b"})  # the second's activity is now the newest
    assert [i["id"] for i in (await store.read(items, "carol"))[0]] == [third, second]


async def test_an_alert_a_silence_hid_leaves_its_wake_agents_wake_but_not_the_escalated(store):
    hook = await create(store, wakeAgent="carol", escalateAfterMinutes=10, escalateTo="alice")
    alert_id = (await fire(store, hook))["alertId"]
    store.clock.set(START + 10 * MINUTE)
    assert await store.write(alerts.escalate_due) == 1
    await store.write(silences.create, "alice", False,
                      {"app_name": "ci", "minutes": 60, "match": {"title": "disk"}})
    await fire(store, hook)
    assert (await store.read(alerts.wake_items, "carol", 10))[1] == 0
    assert [i["id"] for i in (await store.read(alerts.wake_items, "alice", 10))[0]] == [alert_id]
