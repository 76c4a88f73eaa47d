"""Silence rules through the store, no HTTP, on both backends (skill page `buzz`, "Silences"): what a silence
matches (title substring or /regex/, labels of every kind an event carries, one webhook or an app name), the
oldest running one wins, when it runs (endsAt exclusive, ended early), the wire shape, who may create, list and
end one, each refusal in its words with nothing written, and the preview."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest

from coordserver import db
from coordserver.domain import buzz, silences
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.models import BuzzEvent, BuzzSilence, BuzzWebhook
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START

DAY = timedelta(hours=24)


def hook(app: str = "prom", owner: str = "alice", **columns) -> BuzzWebhook:
    """A webhook row as create_webhook makes it (routing columns given directly: silences read them only)."""
    return BuzzWebhook.create(app_name=app, token=f"tok{BuzzWebhook.select().count()}", title=app.title(),
                              owner=owner, enabled=True, created_at=to_db(START), **columns)


async def hooks(store, *specs: dict) -> list[BuzzWebhook]:
    return [await store.write(hook, **spec) for spec in specs]


def fire(webhook: BuzzWebhook, body: dict) -> dict:
    parsed = buzz.parse_body(json.dumps(body).encode(), "application/json", None, None)
    return buzz.ingest(webhook.id, webhook.app_name, webhook.token, parsed)


async def silenced_by(store, webhook: BuzzWebhook, body: dict) -> int | None:
    return (await store.write(fire, webhook, body)).get("silencedBy")


def make(store, identity: str = "alice", **fields):
    fields = {"app_name": "prom", "minutes": 60, "match": {"title": "disk"}, **fields}
    return store.write(silences.create, identity, identity == "admin", fields)


def stored() -> list[tuple]:
    return [(s.app_name, s.webhook_id, s.title_match, s.labels, s.created_by) for s in BuzzSilence.select()]


async def refusal(store, kind: type[Exception], call, *args) -> str:
    with pytest.raises(kind) as refused:
        await store.write(call, *args)
    return refused.value.message  # type: ignore[attr-defined]


# --- what a silence matches ------------------------------------------------------------------------------------

async def test_a_new_silence_reads_whole(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    made = await make(store, match={"title": "Disk", "labels": {"severity": "page"}}, comment="deploying")
    assert made == {"id": made["id"], "appName": "prom", "webhookId": None,
                    "match": {"title": "Disk", "labels": {"severity": "page"}}, "comment": "deploying",
                    "createdBy": "alice", "createdAt": iso(START), "endsAt": iso(START + timedelta(minutes=60)),
                    "endedAt": None, "endedBy": None, "active": True}
    by_hook = await make(store, app_name=None, webhook_id=prom.id, match={"labels": {"team": "db"}}, minutes=5)
    assert (by_hook["appName"], by_hook["webhookId"], by_hook["match"], by_hook["comment"]) == (
        None, prom.id, {"labels": {"team": "db"}}, "")
    titled = await make(store, match={"title": "x", "labels": {}})
    assert titled["match"] == {"title": "x"}
    assert await store.read(stored) == [("prom", None, "Disk", {"severity": "page"}, "alice"),
                                        (None, prom.id, None, {"team": "db"}, "alice"),
                                        ("prom", None, "x", None, "alice")]


async def test_a_title_matches_as_a_substring_or_a_regex_without_case(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    plain = await make(store, match={"title": "d.sk"})
    assert await silenced_by(store, prom, {"title": "Disk full"}) is None  # "." is a dot in a substring
    assert await silenced_by(store, prom, {"title": "root D.SK full"}) == plain["id"]
    regex = await make(store, match={"title": "/^disk \\d+$/"})
    assert await silenced_by(store, prom, {"title": "DISK 42"}) == regex["id"]
    assert await silenced_by(store, prom, {"title": "DISK 42 full"}) is None  # anchored: the pattern whole
    slashes = await make(store, match={"title": "//"})  # two characters: text, not an empty pattern
    assert await silenced_by(store, prom, {"title": "see http://x"}) == slashes["id"]
    assert await silenced_by(store, prom, {"title": "nothing like it"}) is None
    one = await make(store, match={"title": "/q/"})  # the shortest pattern
    assert await silenced_by(store, prom, {"title": "a Q"}) == one["id"]
    assert await silenced_by(store, prom, {"title": "a /q/"}) == one["id"]


@pytest.mark.parametrize("body, hit", [
    ({"groupLabels": {"team": "db"}, "commonLabels": {"severity": "page"}}, True),
    ({"commonLabels": {"team": "db", "severity": "page"}}, True),
    ({"labels": {"team": "db", "severity": "page", "extra": "x"}}, True),
    ({"groupLabels": {"team": "db"}, "labels": {"severity": "page"}}, True),
    ({"labels": {"team": "db"}}, False),  # every label given must be there
    ({"labels": {"team": "db", "severity": "info"}}, False),
    ({"labels": {"team": "db", "severity": ["page"]}}, False),  # a list is not a label value
    ({"labels": {"team": "db", "severity": {"v": "page"}}}, False),
    ({"team": "db", "severity": "page"}, False),  # top-level keys are not labels
    ({"labels": ["team", "db"], "commonLabels": {"severity": "page"}}, False)])
async def test_labels_match_every_one_given_wherever_the_event_carries_them(rules_store, body, hit):
    store = rules_store
    [prom] = await hooks(store, {})
    made = await make(store, match={"labels": {"team": "db", "severity": "page"}})
    assert await silenced_by(store, prom, {"title": "x", **body}) == (made["id"] if hit else None)


async def test_label_values_compare_as_text_and_later_kinds_win(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    numbers = await make(store, match={"labels": {"n": "3", "up": "True", "r": "0.5"}})
    assert await silenced_by(store, prom, {"title": "x", "labels": {"n": 3, "up": True, "r": 0.5}}) == numbers["id"]
    assert await silenced_by(store, prom, {"title": "x", "labels": {"n": 3, "up": True}}) is None
    await store.write(silences.end, "alice", False, numbers["id"])
    later = await make(store, match={"labels": {"k": "c"}})
    assert await silenced_by(store, prom, {"title": "x", "groupLabels": {"k": "a"}, "commonLabels": {"k": "b"},
                                           "labels": {"k": "c"}}) == later["id"]  # labels over commonLabels
    assert await silenced_by(store, prom, {"title": "x", "groupLabels": {"k": "c"}, "commonLabels": {"k": "b"}}) \
        is None  # commonLabels over groupLabels
    assert await silenced_by(store, prom, {"title": "x", "groupLabels": {"k": "c"}}) == later["id"]
    assert await silenced_by(store, prom, {"title": "x", "commonLabels": {"k": "c"}}) == later["id"]


async def test_title_and_labels_must_both_match_when_both_are_given(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    made = await make(store, match={"title": "latency", "labels": {"severity": "page"}})
    assert await silenced_by(store, prom, {"title": "Latency", "labels": {"severity": "info"}}) is None
    assert await silenced_by(store, prom, {"title": "Disk", "labels": {"severity": "page"}}) is None
    assert await silenced_by(store, prom, {"title": "High LATENCY", "labels": {"severity": "page"}}) == made["id"]


async def test_event_labels_of_a_body_that_is_not_an_object_are_none():
    assert silences.event_labels(["labels", {"a": "b"}]) == {}
    assert silences.event_labels(None) == {}
    assert silences.event_labels({"labels": {"a": 1, "b": None, 2: "x"}}) == {"a": "1", "2": "x"}


async def test_a_silence_covers_its_webhook_or_every_webhook_of_its_app_only(rules_store):
    store = rules_store
    first, second, other = await hooks(store, {}, {}, {"app": "deploys"})
    by_app = await make(store, match={"title": "app"})
    by_hook = await make(store, app_name=None, webhook_id=second.id, match={"title": "hook"})
    assert await silenced_by(store, first, {"title": "app"}) == by_app["id"]
    assert await silenced_by(store, second, {"title": "app"}) == by_app["id"]
    assert await silenced_by(store, other, {"title": "app"}) is None
    assert await silenced_by(store, second, {"title": "hook"}) == by_hook["id"]
    assert await silenced_by(store, first, {"title": "hook"}) is None


async def test_the_oldest_running_match_wins_and_a_silence_runs_until_endsat_exclusive(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    short = await make(store, minutes=10)
    later = await make(store, minutes=20)
    assert await silenced_by(store, prom, {"title": "disk", "dedupKey": "1"}) == short["id"]
    store.clock.advance(minutes=10)  # short ends exactly now
    assert await silenced_by(store, prom, {"title": "disk", "dedupKey": "2"}) == later["id"]
    await store.write(silences.end, "alice", False, later["id"])
    assert await silenced_by(store, prom, {"title": "disk", "dedupKey": "3"}) is None


# --- refusals ---------------------------------------------------------------------------------------------------

NOT_ONE_HOOK = "A silence covers appName or webhookId, one of them"
TITLE = f"match.title must be text of 1 to {silences.MATCH_MAX} characters"
LABELS = f"match.labels must be an object of at most {silences.LABELS_MAX} text values"
NO_MATCH = "A silence matches on match.title, match.labels or both"
NOT_ONE_END = "A silence ends with minutes or endsAt, one of them"
MINUTES = f"minutes must be 1 to {silences.MINUTES_MAX}"
ENDS_AT = "endsAt must be an ISO-8601 timestamp"
FUTURE = f"endsAt must be in the future, within {silences.MINUTES_MAX} minutes"
LIMIT = silences.MINUTES_MAX * 60


def bad_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        return f"match.title is not a regular expression: {exc}"
    raise AssertionError(pattern)


@pytest.mark.parametrize("fields, why", [
    ({"app_name": "prom", "webhook_id": 1}, NOT_ONE_HOOK), ({"app_name": None}, NOT_ONE_HOOK),
    ({"app_name": "nothing"}, "Webhook not found"), ({"app_name": None, "webhook_id": 999}, "Webhook not found"),
    ({"match": {"title": 5}}, TITLE), ({"match": {"title": "  "}}, TITLE), ({"match": {"title": "x" * 256}}, TITLE),
    ({"match": {"labels": ["a"]}}, LABELS), ({"match": {"labels": {"a": 1}}}, LABELS),
    ({"match": {"labels": {f"k{n}": "v" for n in range(21)}}}, LABELS),
    ({"match": {"title": "x", "labels": {"a": "b", "c": None}}}, LABELS),
    ({"match": {}}, NO_MATCH), ({"match": None}, NO_MATCH), ({"match": {"title": None, "labels": {}}}, NO_MATCH),
    ({"match": {"title": "/(/"}}, bad_regex("(")), ({"match": {"title": "/a[/"}}, bad_regex("a[")),
    ({"minutes": None}, NOT_ONE_END), ({"ends_at": iso(START + DAY)}, NOT_ONE_END),
    ({"minutes": 0}, MINUTES), ({"minutes": silences.MINUTES_MAX + 1}, MINUTES), ({"minutes": True}, MINUTES),
    ({"minutes": "5"}, MINUTES), ({"minutes": 5.0}, MINUTES),
    ({"minutes": None, "ends_at": "soon"}, ENDS_AT), ({"minutes": None, "ends_at": 1_800_000_000}, ENDS_AT),
    ({"minutes": None, "ends_at": iso(START)}, FUTURE),
    ({"minutes": None, "ends_at": iso(START - timedelta(minutes=1))}, FUTURE),
    ({"minutes": None, "ends_at": iso(START + timedelta(seconds=LIMIT + 1))}, FUTURE),
    ({"comment": "c" * 1001}, f"comment is longer than {silences.COMMENT_MAX} characters")])
async def test_a_new_silence_refuses_in_words_and_writes_nothing(rules_store, fields, why):
    store = rules_store
    await hooks(store, {})
    kind = NotFound if why == "Webhook not found" else Invalid
    assert await refusal(store, kind, silences.create, "alice", False,
                         {"app_name": "prom", "minutes": 60, "match": {"title": "disk"}, **fields}) == why
    assert await store.read(stored) == []


async def test_the_limits_themselves_are_accepted(rules_store):
    store = rules_store
    await hooks(store, {})
    longest = await make(store, minutes=silences.MINUTES_MAX, comment="c" * 1000,
                         match={"title": "t" * 255, "labels": {f"k{n}": "v" for n in range(20)}})
    assert longest["endsAt"] == iso(START + timedelta(minutes=silences.MINUTES_MAX))
    assert (len(longest["comment"]), len(longest["match"]["title"]), len(longest["match"]["labels"])) == (
        1000, 255, 20)
    one = await make(store, minutes=1)
    assert one["endsAt"] == iso(START + timedelta(minutes=1))
    at = await make(store, minutes=None, ends_at=iso(START + timedelta(seconds=LIMIT)))
    assert at["endsAt"] == iso(START + timedelta(seconds=LIMIT))
    soon = await make(store, minutes=None, ends_at=iso(START + timedelta(seconds=1)))
    assert soon["endsAt"] == iso(START + timedelta(seconds=1))
    assert len(await store.read(stored)) == 4


RIGHTS = "Only those who may act on a webhook's alerts may silence it"


@pytest.mark.parametrize("identity, allowed", [
    ("alice", True), ("bob", True), ("carol", True), ("dave", True), ("erin", True), ("admin", True),
    ("frank", False), ("dav", False), ("dave,erin", False)])
async def test_who_may_silence_a_webhook(rules_store, identity, allowed):
    store = rules_store
    await hooks(store, {"wake_agent": "bob", "notify_agent": "carol", "for_users": "dave,erin"})
    if allowed:
        assert (await make(store, identity))["createdBy"] == identity
    else:
        assert await refusal(store, Forbidden, silences.create, identity, False,
                             {"app_name": "prom", "minutes": 5, "match": {"title": "x"}}) == RIGHTS
        assert await store.read(stored) == []


async def test_an_app_name_is_silenced_only_by_who_may_act_on_each_of_its_webhooks(rules_store):
    store = rules_store
    await hooks(store, {"wake_agent": "bob"}, {"owner": "carol", "for_users": "bob"},
                {"app": "other", "owner": "carol"})
    assert (await make(store, "bob"))["createdBy"] == "bob"
    assert await refusal(store, Forbidden, silences.create, "alice", False,
                         {"app_name": "prom", "minutes": 5, "match": {"title": "x"}}) == RIGHTS
    assert await refusal(store, Forbidden, silences.preview, "alice", False,
                         {"app_name": "prom", "match": {"title": "x"}}) == RIGHTS
    assert (await make(store, "admin"))["createdBy"] == "admin"


# --- listing and ending ----------------------------------------------------------------------------------------

def listed(identity: str) -> list[tuple]:
    return [(s["id"], s["active"]) for s in silences.list_silences(identity, identity == "admin")]


async def test_the_listing_shows_what_the_caller_made_or_may_end_newest_first_for_24_hours(rules_store):
    store = rules_store
    prom, deploys = await hooks(store, {"wake_agent": "bob"}, {"app": "deploys", "owner": "carol"})
    mine = await make(store, "alice", minutes=10)
    theirs = await make(store, "carol", app_name="deploys")
    by_admin = await make(store, "admin", app_name=None, webhook_id=prom.id, minutes=silences.MINUTES_MAX)
    assert await store.read(listed, "alice") == [(by_admin["id"], True), (mine["id"], True)]
    assert await store.read(listed, "bob") == [(by_admin["id"], True), (mine["id"], True)]
    assert await store.read(listed, "carol") == [(theirs["id"], True)]
    assert await store.read(listed, "admin") == [(by_admin["id"], True), (theirs["id"], True), (mine["id"], True)]
    assert await store.read(listed, "frank") == []
    store.clock.advance(minutes=10)
    assert await store.read(listed, "alice") == [(by_admin["id"], True), (mine["id"], False)]
    store.clock.advance(hours=24, seconds=-1)  # mine ended 24 h ago less a second
    assert await store.read(listed, "alice") == [(by_admin["id"], True), (mine["id"], False)]
    store.clock.advance(seconds=1)
    assert await store.read(listed, "alice") == [(by_admin["id"], True)]


async def test_a_long_silence_ended_early_leaves_the_listing_24_hours_after_its_end(rules_store):
    store = rules_store
    await hooks(store, {})
    made = await make(store, minutes=silences.MINUTES_MAX)
    await store.write(silences.end, "alice", False, made["id"])
    store.clock.advance(hours=24, seconds=-1)
    assert await store.read(listed, "alice") == [(made["id"], False)]
    store.clock.advance(seconds=1)
    assert await store.read(listed, "alice") == []


async def test_a_silence_ended_long_ago_leaves_the_listing_and_older_ones_stay(rules_store):
    store = rules_store
    await hooks(store, {})
    older = await make(store, minutes=silences.MINUTES_MAX)
    newer = await make(store, minutes=silences.MINUTES_MAX)
    await store.write(silences.end, "alice", False, newer["id"])
    store.clock.advance(hours=24)
    assert await store.read(listed, "alice") == [(older["id"], True)]


async def test_a_silence_of_a_deleted_webhook_is_its_creators_and_the_admins_only(rules_store):
    store = rules_store
    [prom] = await hooks(store, {"wake_agent": "bob"})
    made = await make(store, "alice", app_name=None, webhook_id=prom.id)
    await store.write(lambda: BuzzWebhook.delete().execute())
    assert await store.read(listed, "bob") == []
    assert await refusal(store, NotFound, silences.end, "bob", False, made["id"]) == silences.NOT_FOUND
    assert await store.read(listed, "alice") == [(made["id"], True)]
    assert await store.read(listed, "admin") == [(made["id"], True)]
    ended = await store.write(silences.end, "admin", True, made["id"])
    assert (ended["endedBy"], ended["active"]) == ("admin", False)


async def test_ending_a_silence_once_and_who_may(rules_store):
    store = rules_store
    await hooks(store, {"wake_agent": "bob"})
    made = await make(store, "admin")
    assert await refusal(store, NotFound, silences.end, "frank", False, made["id"]) == silences.NOT_FOUND
    assert await refusal(store, NotFound, silences.end, "alice", False, made["id"] + 1) == silences.NOT_FOUND
    assert (await store.read(silences.list_silences, "admin", True))[0]["active"] is True  # nothing ended
    store.clock.advance(minutes=1)
    ended = await store.write(silences.end, "bob", False, made["id"])  # the wake agent
    assert ended == {**made, "endedAt": iso(START + timedelta(minutes=1)), "endedBy": "bob", "active": False}
    store.clock.advance(minutes=1)
    again = await store.write(silences.end, "alice", False, made["id"])  # ended once: the first end stands
    assert again == ended


async def test_an_expired_silence_is_not_ended_after_its_end(rules_store):
    store = rules_store
    await hooks(store, {})
    made = await make(store, minutes=5)
    store.clock.advance(minutes=5)
    assert await store.write(silences.end, "alice", False, made["id"]) == {**made, "active": False}
    unexpired = await make(store, minutes=5)
    store.clock.advance(minutes=4)
    assert (await store.write(silences.end, "alice", False, unexpired["id"]))["endedBy"] == "alice"


# --- the preview ------------------------------------------------------------------------------------------------

def event_row(webhook: BuzzWebhook, title: str, alert_id: int | None = None) -> None:
    BuzzEvent.create(webhook_id=webhook.id, app_name=webhook.app_name, title=title, received_at=to_db(db.now()),
                     alert_id=alert_id)


async def test_the_preview_counts_the_last_24_hours_and_ranks_the_alerts(rules_store):
    store = rules_store
    prom, second, other = await hooks(store, {}, {}, {"app": "other"})
    old = await store.write(fire, prom, {"title": "disk old", "groupKey": "a"})
    store.clock.advance(hours=24)
    a = [await store.write(fire, prom, {"title": f"disk {n}", "groupKey": "a"}) for n in range(2)]
    b = [await store.write(fire, second, {"title": f"disk {n}", "groupKey": "b"}) for n in range(2)]
    c = await store.write(fire, prom, {"title": "disk", "groupKey": "c"})
    await store.write(fire, prom, {"title": "latency", "groupKey": "d"})
    await store.write(fire, other, {"title": "disk", "groupKey": "e"})
    await store.write(event_row, prom, "disk without alert")  # counted, named by no alert
    fields = {"app_name": "prom", "match": {"title": "disk"}}
    answer = await store.read(silences.preview, "alice", False, fields)
    assert answer["events"] == 6
    assert [(alert["id"], alert["matched"]) for alert in answer["alerts"]] == [
        (b[0]["alertId"], 2), (a[0]["alertId"], 2), (c["alertId"], 1)]  # most hit first, then the newest
    assert old["alertId"] == a[1]["alertId"]  # the event 24 h old is not counted
    detail = await store.read(buzz.alert_detail, "alice", False, c["alertId"])
    assert answer["alerts"][2] == {**{k: v for k, v in detail.items() if k != "events"}, "matched": 1}
    one = await store.read(silences.preview, "alice", False, {"webhook_id": second.id, "match": {"title": "disk"}})
    assert (one["events"], [x["id"] for x in one["alerts"]]) == (2, [b[0]["alertId"]])
    none = await store.read(silences.preview, "alice", False, {"app_name": "prom", "match": {"labels": {"t": "x"}}})
    assert none == {"events": 0, "alerts": []}
    assert await store.read(stored) == []  # a preview creates nothing
    by_admin = await store.read(silences.preview, "admin", True, {"app_name": "prom", "match": {"title": "disk"}})
    assert by_admin == answer  # an admin may preview any webhook


async def test_the_preview_names_at_most_50_alerts(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    fired = [await store.write(fire, prom, {"title": "disk", "groupKey": f"g{n}"}) for n in range(51)]
    answer = await store.read(silences.preview, "alice", False, {"app_name": "prom", "match": {"title": "disk"}})
    assert answer["events"] == 51
    assert [alert["id"] for alert in answer["alerts"]] == [f["alertId"] for f in reversed(fired)][:50]


@pytest.mark.parametrize("fields, kind, why", [
    ({"app_name": "prom", "webhook_id": 1}, Invalid, NOT_ONE_HOOK), ({}, Invalid, NOT_ONE_HOOK),
    ({"app_name": "nothing"}, NotFound, "Webhook not found"), ({"app_name": "prom"}, Invalid, NO_MATCH),
    ({"app_name": "prom", "match": {"title": "/(/"}}, Invalid, bad_regex("("))])
async def test_the_preview_refuses_as_a_new_silence_does(rules_store, fields, kind, why):
    store = rules_store
    await hooks(store, {})
    with pytest.raises(kind) as refused:
        await store.read(silences.preview, "alice", False, fields)
    assert refused.value.message == why


async def test_the_preview_matches_labels_too(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    hit = await store.write(fire, prom, {"title": "a", "groupKey": "a", "labels": {"team": "db"}})
    await store.write(fire, prom, {"title": "b", "groupKey": "b", "labels": {"team": "web"}})
    answer = await store.read(silences.preview, "alice", False, {"app_name": "prom",
                                                                 "match": {"labels": {"team": "db"}}})
    assert (answer["events"], [(a["id"], a["matched"]) for a in answer["alerts"]]) == (1, [(hit["alertId"], 1)])


def many_events(webhook: BuzzWebhook, count: int) -> None:
    row = {"webhook_id": webhook.id, "app_name": webhook.app_name, "title": "disk", "received_at": to_db(db.now())}
    for start in range(0, count, 1000):
        BuzzEvent.insert_many([row] * min(1000, count - start)).execute()


async def test_the_preview_reads_at_most_the_newest_10000_events(rules_store):
    store = rules_store
    [prom] = await hooks(store, {})
    await store.write(many_events, prom, silences.PREVIEW_SCAN + 1)
    answer = await store.read(silences.preview, "alice", False, {"app_name": "prom", "match": {"title": "disk"}})
    assert answer == {"events": silences.PREVIEW_SCAN, "alerts": []}
