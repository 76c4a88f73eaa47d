"""Buzz webhook config rules without HTTP: names that fit the ingest URL, normalised recipients, known agents,
owner-or-admin changes, and a PATCH that changes nothing is refused."""
from __future__ import annotations

import hashlib
import json
import logging
import re
from datetime import timedelta

import pytest

from coordserver.domain import alerts, buzz, silences, wake
from coordserver.domain.alerts import FlapRule
from coordserver.errors import Forbidden, Invalid, NotFound, RateLimited
from coordserver.events.channels import WAKE, WAKE_CHANGED, WEBHOOKS
from coordserver.models import BuzzAlert, BuzzEvent, NotebookPage
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import KNOWN, START, last_event_id, logged_after, published

BASE = "https://coord.example"


def create(store, owner: str = "alice", **body):
    return store.write(buzz.create_webhook, owner, body, BASE, KNOWN)


def update(store, webhook_id: int, identity: str, **body):
    return store.write(buzz.update_webhook, webhook_id, identity, identity == "admin", body, BASE, KNOWN)


async def test_a_new_webhook_is_normalised_and_enabled(rules_store):
    hook = await create(rules_store, appName=" deploys ", title=" Deploys ", forUsers=["Bob", "alice", "bob", " "],
                        wakeAgent="bob", enabled="no")  # not even read: a new webhook starts enabled
    assert (hook["appName"], hook["title"], hook["forUsers"], hook["wakeAgent"]) == ("deploys", "Deploys",
                                                                                    "bob,alice", "bob")
    assert hook["enabled"] is True  # a new webhook starts enabled; PATCH disables it
    assert hook["ingestUrl"] == f"{BASE}/api/ingest/deploys/{hook['token']}"


@pytest.mark.parametrize("body, message", [
    ({"appName": "ci", "title": " "}, "appName and title are required"),
    ({"title": "CI"}, "appName and title are required"),
    ({"appName": "ci/prod", "title": "CI"}, "appName may contain only letters, digits, '.', '_' and '-'"),
    ({"appName": "a" * 51, "title": "CI"}, "appName is longer than 50 characters"),
    ({"appName": "ci", "title": "CI", "wakeAgent": "ghost"}, "wakeAgent is not a known identity: ghost"),
    ({"appName": "ci", "title": "CI", "notifyAgent": 7}, "notifyAgent must be an identity"),
    ({"appName": "ci", "title": "CI", "forUsers": ["alice", 3]}, "forUsers must be a comma-separated string"),
])
async def test_bad_configs_are_refused_and_not_stored(rules_store, body, message):
    with pytest.raises(Invalid) as refused:
        await create(rules_store, **body)
    assert refused.value.message.startswith(message)
    assert await rules_store.read(buzz.list_webhooks, "admin", True, BASE) == []


async def test_only_the_owner_or_an_admin_changes_a_webhook(rules_store):
    hook = await create(rules_store, appName="ci", title="CI", notifyAgent="carol")
    with pytest.raises(Forbidden, match="Only the webhook's owner or an admin"):
        await update(rules_store, hook["id"], "bob", title="bob's")
    with pytest.raises(Invalid, match="^No fields to update$"):
        await update(rules_store, hook["id"], "alice")
    with pytest.raises(Invalid, match="enabled must be true or false"):
        await update(rules_store, hook["id"], "alice", enabled="no")
    changed = await update(rules_store, hook["id"], "admin", enabled=False, notifyAgent=None, forUsers="bob")
    assert (changed["enabled"], changed["notifyAgent"], changed["forUsers"]) == (False, None, "bob")
    with pytest.raises(NotFound, match="Webhook not found"):
        await update(rules_store, 987654, "alice", title="x")


# --- the config's wire shape, the list, changes and deletion ---------------------------------------------------

async def test_a_webhook_reads_whole_and_tells_every_process(store):
    hook = await create(store, appName="ci", title="CI", forUsers="bob", wakeAgent="carol", notifyAgent="bob",
                        runbookUrl="https://runbooks.example/ci", escalateAfterMinutes=5, escalateTo=["bob", "carol"],
                        flapResolutions=4, flapWindowMinutes=10)
    assert hook == {"id": hook["id"], "appName": "ci", "token": hook["token"], "title": "CI", "owner": "alice",
                    "forUsers": "bob", "wakeAgent": "carol", "notifyAgent": "bob", "enabled": True,
                    "createdAt": iso(START), "lastHitAt": None, "ingestUrl": f"{BASE}/api/ingest/ci/{hook['token']}",
                    "runbookPageId": None, "runbookUrl": "https://runbooks.example/ci", "escalateAfterMinutes": 5,
                    "escalateTo": ["bob", "carol"], "flapResolutions": 4, "flapWindowMinutes": 10}
    assert re.fullmatch(r"[0-9a-f]{14}", hook["token"])
    plain = await create(store, appName="ci2", title="CI2")
    assert (plain["forUsers"], plain["wakeAgent"], plain["escalateTo"], plain["flapResolutions"]) == (
        None, None, None, None)
    assert published(store, WEBHOOKS) == [{"webhookId": hook["id"]}, {"webhookId": plain["id"]}]


async def test_the_list_is_newest_first_and_an_owners_own(store):
    first = await create(store, appName="a", title="A")
    second = await create(store, "bob", appName="b", title="B")
    store.clock.advance(seconds=1)
    third = await create(store, appName="c", title="C")
    listed = await store.read(buzz.list_webhooks, "admin", True, BASE)
    assert [h["id"] for h in listed] == [third["id"], second["id"], first["id"]]
    assert listed[0] == third
    assert [h["id"] for h in await store.read(buzz.list_webhooks, "alice", False, BASE)] == [third["id"], first["id"]]
    assert [h["id"] for h in await store.read(buzz.list_webhooks, "bob", False, BASE)] == [second["id"]]
    store.clock.set(START - timedelta(days=1))  # made later, dated earlier (a clock set back): listed by its date
    backdated = await create(store, appName="d", title="D")
    assert [h["id"] for h in await store.read(buzz.list_webhooks, "admin", True, BASE)] == [
        third["id"], second["id"], first["id"], backdated["id"]]


@pytest.mark.parametrize("body, message", [
    ({"title": "x" * 256}, "title is longer than 255 characters"),
    ({"title": 5}, "appName and title are required"),
    ({"appName": 5}, "appName and title are required"),
    ({"appName": "-ci"}, buzz.APP_NAME_RULE),
    ({"forUsers": "alice,b c"}, "forUsers contains an invalid identity: b c"),
    ({"forUsers": "alice, b c" + "d" * 70}, "forUsers contains an invalid identity: b c" + "d" * 57),
    ({"forUsers": ",".join(f"user{i:02d}xxxxxxxx" for i in range(20))}, "forUsers is longer than 255 characters"),
    ({"escalateTo": "bob,ghost"}, "escalateTo is not a known identity: ghost"),
    ({"escalateTo": {"a": 1}}, "escalateTo must be a comma-separated string or an array of identities"),
    ({"wakeAgent": "no such"}, "wakeAgent is not a valid identity"),
    ({"notifyAgent": "ghost"}, "notifyAgent is not a known identity: ghost"),
    ({"runbookPageId": "nope"}, "runbookPageId is not a notebook page"),
    ({"runbookPageId": 3}, "runbookPageId is not a notebook page"),
    ({"escalateAfterMinutes": 0}, "escalateAfterMinutes must be 1 to 10080, or null"),
    ({"escalateAfterMinutes": 10081}, "escalateAfterMinutes must be 1 to 10080, or null"),
    ({"escalateAfterMinutes": True}, "escalateAfterMinutes must be 1 to 10080, or null"),
    ({"escalateAfterMinutes": 2.5}, "escalateAfterMinutes must be 1 to 10080, or null"),
    ({"flapResolutions": 1001}, "flapResolutions must be 1 to 1000, or null"),
    ({"flapWindowMinutes": 10081}, "flapWindowMinutes must be 1 to 10080, or null"),
])
async def test_each_bad_change_is_refused_in_its_words_and_nothing_changes(store, body, message):
    hook = await create(store, appName="ci", title="CI")
    with pytest.raises(Invalid) as refused:
        await update(store, hook["id"], "alice", **body)
    assert refused.value.message == message
    assert await store.read(buzz.list_webhooks, "admin", True, BASE) == [hook]


async def test_the_limits_themselves_are_accepted(store):
    hook = await create(store, appName="a" * 50, title="t" * 255, escalateAfterMinutes=10080, flapResolutions=1000,
                        flapWindowMinutes=1, forUsers=" alice , ,bob ")
    assert (hook["appName"], hook["title"], hook["escalateAfterMinutes"], hook["flapResolutions"],
            hook["flapWindowMinutes"], hook["forUsers"]) == ("a" * 50, "t" * 255, 10080, 1000, 1, "alice,bob")
    longest = ",".join([f"user{i:02d}xxxxxxxx" for i in range(16)] + ["user16xxxxxxxxx"])
    assert len(longest) == 255 and (await create(store, appName="b", title="B", forUsers=longest))[
        "forUsers"] == longest
    changed = await update(store, hook["id"], "alice", escalateAfterMinutes=1, flapResolutions=1,
                           flapWindowMinutes=10080, forUsers=" , ", wakeAgent=" ", notifyAgent="",
                           escalateTo=[], runbookPageId=" ", runbookUrl=None)
    assert (changed["escalateAfterMinutes"], changed["flapResolutions"], changed["flapWindowMinutes"],
            changed["forUsers"], changed["wakeAgent"], changed["notifyAgent"], changed["escalateTo"],
            changed["runbookPageId"]) == (1, 1, 10080, None, None, None, None, None)


async def test_a_change_reads_whole_and_carries_the_runbook_and_escalation_to_its_alerts(store):
    page = await store.write(lambda: NotebookPage.create(title="Runbook", content="", created_by="alice",
                                                         created_at=to_db(START), updated_at=to_db(START)).id)
    made_with = await create(store, appName="made", title="Made", runbookPageId=page)
    assert made_with["runbookPageId"] == page
    assert (await store.read(buzz.list_webhooks, "alice", False, BASE))[0] == made_with
    hook = await create(store, appName="ci", title="CI")
    other = await create(store, appName="other", title="Other")
    await fire(store, hook, {"title": "disk"})
    await fire(store, other, {"title": "disk"})
    store.published.clear()
    with pytest.raises(Invalid) as refused:  # another page's id is no page
        await update(store, hook["id"], "alice", runbookPageId=page + "x")
    assert refused.value.message == "runbookPageId is not a notebook page"
    changed = await update(store, hook["id"], "alice", title=" New ", appName="ci2", runbookPageId=f" {page} ",
                           escalateTo="bob", escalateAfterMinutes=3, wakeAgent="carol")
    assert changed == {**hook, "title": "New", "appName": "ci2", "runbookPageId": page, "escalateTo": ["bob"],
                       "escalateAfterMinutes": 3, "wakeAgent": "carol", "lastHitAt": iso(START),
                       "ingestUrl": f"{BASE}/api/ingest/ci2/{hook['token']}"}
    assert published(store, WEBHOOKS) == [{"webhookId": hook["id"]}]
    assert await store.read(alert_columns) == [(hook["id"], page, None, "bob"), (other["id"], None, None, None)]
    await update(store, hook["id"], "alice", runbookUrl="https://runbooks.example/x", escalateTo=None)
    assert await store.read(alert_columns) == [(hook["id"], page, "https://runbooks.example/x", None),
                                               (other["id"], None, None, None)]
    await update(store, hook["id"], "alice", runbookPageId=None, title="T", wakeAgent=None)
    assert await store.read(alert_columns) == [(hook["id"], None, "https://runbooks.example/x", None),
                                               (other["id"], None, None, None)]


async def test_a_change_of_no_carried_field_leaves_the_alerts(store):
    hook = await create(store, appName="ci", title="CI", runbookUrl="https://runbooks.example/a")
    await fire(store, hook, {"title": "disk"})
    await store.write(lambda: BuzzAlert.update(runbook_url="kept").execute())
    await update(store, hook["id"], "alice", title="T", forUsers="bob", flapResolutions=2)
    assert await store.read(alert_columns) == [(hook["id"], None, "kept", None)]


async def test_only_the_owner_or_an_admin_deletes_a_webhook(store):
    hook = await create(store, appName="ci", title="CI")
    store.published.clear()
    with pytest.raises(Forbidden) as refused:
        await store.write(buzz.delete_webhook, hook["id"], "bob", False)
    assert refused.value.message == "Only the webhook's owner or an admin may change it"
    with pytest.raises(NotFound) as missing:
        await store.write(buzz.delete_webhook, 987654, "admin", True)
    assert missing.value.message == "Webhook not found"
    assert published(store, WEBHOOKS) == []
    await store.write(buzz.delete_webhook, hook["id"], "alice", False)
    assert await store.read(buzz.list_webhooks, "admin", True, BASE) == []
    assert published(store, WEBHOOKS) == [{"webhookId": hook["id"]}]
    other = await create(store, appName="ci", title="CI")
    await store.write(buzz.delete_webhook, other["id"], "admin", True)
    assert await store.read(buzz.list_webhooks, "admin", True, BASE) == []


async def test_an_admin_changes_anyones_webhook(store):
    hook = await create(store, appName="ci", title="CI")
    assert (await store.write(buzz.update_webhook, hook["id"], "dave", True, {"title": "X"}, BASE, KNOWN))[
        "title"] == "X"


# --- parsing what an ingest is sent ----------------------------------------------------------------------------

AM = {"status": "firing", "receiver": "r", "groupKey": "{}:{a=1}",
      "commonLabels": {"alertname": "DiskFull", "severity": "page"}, "commonAnnotations": {"summary": "disks filling"},
      "alerts": [{"status": "firing", "labels": {"instance": "db1", "alertname": "DiskFull"},
                  "annotations": {"summary": "db1 at 95%"}},
                 {"labels": {"job": "node"}, "annotations": {"description": "node desc"}},
                 {"labels": {"alertname": "X"}}, "not an alert"]}


def test_alertmanager_summaries():
    assert buzz.summarise_alertmanager(AM) == (
        "[FIRING:3] DiskFull (page)", "disks filling\n- firing db1: db1 at 95%\n- firing node: node desc\n- firing : X")
    many = {"alerts": [{"labels": {"alertname": "A"}}] * 12, "status": "resolved"}
    assert buzz.summarise_alertmanager(many) == (
        "[RESOLVED:12] A", "\n".join(["- resolved : A"] * 10 + ["... and 2 more"]))
    assert buzz.summarise_alertmanager({**many, "alerts": many["alerts"][:10]})[1] == "\n".join(
        ["- resolved : A"] * 10)
    assert buzz.summarise_alertmanager({**many, "alerts": many["alerts"][:11]})[1] == "\n".join(
        ["- resolved : A"] * 10 + ["... and 1 more"])
    assert buzz.summarise_alertmanager({"alerts": [{"labels": {"alertname": "A"}},  # (the first's: odd_shape test)
                                                   {"labels": ["instance"], "annotations": {"summary": "s"}},
                                                   {"status": "", "labels": {"job": "j"}, "annotations": {}}]}
                                       ) == ("[FIRING:3] A", "- firing : A\n- firing : s\n- j:")
    assert buzz.summarise_alertmanager({"alerts": []}) == ("[FIRING:0] alert", "")
    assert buzz.summarise_alertmanager({"alerts": [], "commonLabels": "x", "commonAnnotations": {"description": "D"}}
                                       ) == ("[FIRING:0] alert", "D")
    assert buzz.summarise_alertmanager({"alerts": [{"labels": {}, "annotations": "y", "status": "pending"}],
                                        "commonAnnotations": "z"}) == ("[FIRING:1] alert", "- pending :")
    assert buzz.summarise_alertmanager({"alerts": [{"labels": {"instance": "i", "job": "j"},
                                                    "annotations": {"description": "d"}}],
                                        "commonAnnotations": {"summary": "s", "description": "x"}}) == (
        "[FIRING:1] alert", "s\n- firing i: d")


GH = {"repository": {"full_name": "o/r"}, "sender": {"login": "sam"}}


@pytest.mark.parametrize("event, payload, summary", [
    ("push", {**GH, "ref": "refs/heads/main", "pusher": {"name": "pat"},
              "commits": [{"message": "fix\nmore"}, {"message": "two"}, "x"]},
     ("o/r: pat pushed 2 commits to main", "- fix\n- two")),
    ("push", {**GH, "ref": "", "pusher": "p", "commits": [{"message": "one"}], "compare": "c"},
     ("o/r: sam pushed 1 commit to ?", "- one")),
    ("push", {**GH, "commits": [{}] * 11, "compare": "c"},
     ("o/r: sam pushed 11 commits to ?", "\n".join(["- "] * 10))),
    ("push", {"commits": None, "compare": "https://cmp"}, ("repository: someone pushed 0 commits to ?", "https://cmp")),
    ("push", {"sender": "x"}, ("repository: someone pushed 0 commits to ?", "")),
    ("pull_request", {**GH, "action": "closed", "pull_request": {"number": 5, "merged": True, "title": "T",
                                                                "user": {"login": "u"}, "html_url": "h"}},
     ("o/r: PR #5 merged: T", "by u h")),
    ("pull_request", {**GH, "action": "closed", "pull_request": {"number": 5, "merged": False}},
     ("o/r: PR #5 closed: ", "by someone")),
    ("pull_request", {**GH, "action": "opened", "pull_request": {"number": 5, "merged": True, "title": "T"}},
     ("o/r: PR #5 opened: T", "by someone")),
    ("issues", {**GH, "action": "opened", "issue": {"number": 7, "title": "I", "user": {"login": "u"},
                                                    "html_url": "h"}},
     ("o/r: issue #7 opened: I", "by u h")),
    ("issues", {"action": "closed", "issue": {}}, ("repository: issue #None closed: ", "by someone")),
    ("issue_comment", {**GH, "issue": {"number": 7, "title": "I"},
                       "comment": {"user": {"login": "c"}, "body": "  hello\nworld"}},
     ("o/r: c commented on #7: I", "hello")),
    ("issue_comment", {"issue": {"number": 7}, "comment": {"body": "x" * 400}},
     ("repository: someone commented on #7: ", "x" * 300)),
    ("issue_comment", {"issue": {"number": 7}}, ("repository: someone commented on #7: ", "")),
    ("workflow_run", {**GH, "action": "completed", "workflow_run": {
        "name": "CI", "conclusion": "failure", "status": "completed", "head_branch": "main",
        "head_commit": {"message": "msg\nx"}, "html_url": "h"}},
     ("o/r: workflow CI failure on main", "msg h")),
    ("workflow_run", {**GH, "action": "requested", "workflow_run": {"status": "queued"}},
     ("o/r: workflow ? queued on ?", "")),
    ("workflow_run", {**GH, "action": "requested", "workflow_run": {}}, ("o/r: workflow ? requested on ?", "")),
    ("check_run", {**GH, "action": "completed", "check_run": {"name": "lint", "conclusion": "success",
                                                              "status": "completed", "html_url": "h",
                                                              "details_url": "d"}},
     ("o/r: check lint success", "h")),
    ("check_run", {**GH, "action": "created", "check_run": {"status": "queued", "details_url": "d"}},
     ("o/r: check ? queued", "d")),
    ("check_run", {**GH, "action": "created", "check_run": {}}, ("o/r: check ? created", "")),
    ("release", {**GH, "action": "published", "release": {"tag_name": "v1", "html_url": "h"}},
     ("o/r: release v1 published", "h")),
    ("release", {"action": "deleted", "release": {}}, ("repository: release ? deleted", "")),
    ("ping", {"zen": "Z"}, ("repository: GitHub webhook ping", "Z")),
    ("ping", {**GH}, ("o/r: GitHub webhook ping", "")),
    ("star", {**GH, "action": "created"}, ("o/r: GitHub star created", "")),
    ("star", {"action": 3}, ("repository: GitHub star", "")),
    ("pull_request", {"action": "opened", "pull_request": "x"}, ("repository: GitHub pull_request opened", "")),
    ("issues", {"issue": "x"}, ("repository: GitHub issues", "")),
    ("issue_comment", {"issue": []}, ("repository: GitHub issue_comment", "")),
    ("workflow_run", {"workflow_run": 1}, ("repository: GitHub workflow_run", "")),
    ("check_run", {"check_run": 1}, ("repository: GitHub check_run", "")),
    ("release", {"release": 1}, ("repository: GitHub release", "")),
    ("push", {"repository": "o/r"}, ("repository: someone pushed 0 commits to ?", "")),
    ("push", {"repository": {}}, ("repository: someone pushed 0 commits to ?", "")),
])
def test_github_summaries(event, payload, summary):
    assert buzz.summarise_github(event, payload) == summary


def parse(body: bytes | dict, content_type: str | None = "application/json", github_event: str | None = None,
          delivery: str | None = None) -> dict:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return buzz.parse_body(raw, content_type, github_event, delivery)


def parsed(content_type="application/json", body_text=None, body_json=None, title=None, dedup_key=None,
           group_key=None, resolves=False) -> dict:
    return {"content_type": content_type, "body_text": body_text, "body_json": body_json, "title": title,
            "dedup_key": dedup_key, "group_key": group_key, "resolves": resolves}


def test_a_body_is_stored_as_text_decoded_by_its_charset():
    assert parse(b"hello", None) == parsed("text/plain", "hello")
    assert parse(b"hello", " \x00 ") == parsed("text/plain", "hello")
    assert parse(b"  \x00hi", " text/plain; charset=latin-1 \x00") == parsed("text/plain; charset=latin-1",
                                                                              "  \ufffdhi")
    assert parse("caf\xe9".encode("latin-1"), 'text/plain; CHARSET = "iso-8859-1"')["body_text"] == "caf\xe9"
    assert parse("caf\xe9".encode(), "text/plain")["body_text"] == "caf\xe9"
    assert parse(b"\xff abc", "text/plain; charset=rot13")["body_text"] == "\ufffd abc"
    assert parse(b"\xff abc", "text/plain; charset=nope")["body_text"] == "\ufffd abc"
    assert parse(b"\xff abc", "text/plain; charset=ascii")["body_text"] == "\ufffd abc"
    assert parse(b"x", "t" * 150)["content_type"] == "t" * 100
    assert buzz.body_text(b"\xe9t\xe9", "text/plain; charset=latin_1") == "\xe9t\xe9"
    # a stray byte in a declared charset is replaced in that charset, not read as UTF-8 instead
    assert buzz.body_text("\u65e5\u672c".encode("shift_jis") + b"\xff", "text/plain; charset=shift_jis") == (
        "\u65e5\u672c\ufffd")


def test_a_body_is_json_when_it_looks_like_json():
    assert parse(b'{"a": 1}', "text/plain") == parsed("text/plain", body_json={"a": 1})
    assert parse(b' [1, 2]', "") == parsed("text/plain", body_json=[1, 2])
    assert parse(b'"text"', "Application/JSON") == parsed("Application/JSON", body_json="text")
    assert parse(b'"text"', "text/plain") == parsed("text/plain", '"text"')
    assert parse(b"{bad", "application/json") == parsed(body_text="{bad")
    assert parse(b"  ", "application/json") == parsed(body_text="  ")
    assert parse(b'{"a": NaN}', "application/json") == parsed(body_text='{"a": NaN}')


def test_a_json_body_gives_its_title_text_and_keys():
    assert parse({"title": " T ", "body": {"x": 1}, "dedupKey": "k"}) == parsed(
        body_text='{"x":1}', body_json={"title": " T ", "body": {"x": 1}, "dedupKey": "k"}, title="T",
        dedup_key="k", group_key="k")
    assert parse({"title": " ", "body": "b", "dedupKey": ""}) == parsed(
        body_text="b", body_json={"title": " ", "body": "b", "dedupKey": ""})
    assert parse({"title": 5, "body": None, "dedupKey": None, "groupKey": "g"}) == parsed(
        body_json={"title": 5, "body": None, "dedupKey": None, "groupKey": "g"}, group_key="g")
    assert parse({"dedupKey": {"b": 1, "a": 2}})["dedup_key"] == '{"a": 2, "b": 1}'
    assert parse({"dedupKey": 0})["dedup_key"] == "0"
    assert parse({"groupKey": "g" * 255})["group_key"] == "g" * 255
    assert parse({"groupKey": "g" * 256})["group_key"] == "sha256:" + hashlib.sha256(b"g" * 256).hexdigest()
    assert parse({"groupKey": "", "dedupKey": "d"})["group_key"] == "d"


def test_an_alertmanager_body_is_summarised_grouped_and_resolves():
    resolved = {"status": "resolved", "receiver": "r", "groupKey": "g1", "alerts": [{"labels": {"alertname": "A"}}]}
    assert parse(resolved) == parsed(body_text="- resolved : A", body_json=resolved, title="[RESOLVED:1] A",
                                     dedup_key="g1|resolved", group_key="g1", resolves=True)
    assert parse({**resolved, "fingerprint": "fp"})["dedup_key"] == "fp"
    assert parse({**resolved, "fingerprint": "fp", "dedupKey": "mine"})["dedup_key"] == "mine"
    assert parse({**resolved, "title": "Mine", "body": "text"})["title"] == "Mine"
    assert parse({**resolved, "title": "Mine", "body": "text"})["body_text"] == "text"
    firing = {**resolved, "status": "firing", "groupKey": "", "fingerprint": "fp"}
    assert parse(firing) == parsed(body_text="- firing : A", body_json=firing, title="[FIRING:1] A",
                                   dedup_key="fp", group_key="fp")
    assert parse({**firing, "dedupKey": "mine"})["group_key"] == "fp"  # grouped by its fingerprint, not dedupKey
    no_keys = {"alerts": [], "status": "firing", "commonLabels": {}}
    assert parse(no_keys) == parsed(body_text="", body_json=no_keys, title="[FIRING:0] alert")
    long_key = {**resolved, "groupKey": "x" * 300}
    assert parse(long_key)["dedup_key"] == "sha256:" + hashlib.sha256(("x" * 300 + "|resolved").encode()).hexdigest()
    assert parse(long_key)["group_key"] == "sha256:" + hashlib.sha256(b"x" * 300).hexdigest()
    # not Alertmanager's shape: no status, or no alerts list, or none of its other keys
    for body in ({"alerts": [], "receiver": "r"}, {"alerts": {}, "status": "firing", "receiver": "r"},
                 {"alerts": [], "status": "resolved"}):
        assert parse(body) == parsed(body_json=body)
    for key in ("groupKey", "receiver", "commonLabels"):
        assert parse({"alerts": [], "status": "resolved", key: "k"})["resolves"] is True


def test_an_alertmanager_body_of_an_odd_shape_keeps_the_webhooks_title(caplog):
    odd = {"alerts": [{"labels": {"alertname": "A"}, "annotations": {"summary": "s"}, "status": "firing"}],
           "status": "firing", "receiver": "r", "commonLabels": {"alertname": ["A"]}, "groupKey": ["g"]}
    assert parse(odd) == parsed(body_text="- firing : s", body_json=odd, title="[FIRING:1] ['A']",
                                dedup_key="['g']|firing", group_key='["g"]')
    broken = {"alerts": [{"labels": {"instance": ["i"]}, "annotations": {}}], "status": "firing", "receiver": "r"}
    assert parse(broken)["title"] == "[FIRING:1] alert"
    weird = {"alerts": [{"status": "firing", "labels": {"instance": 1}}], "status": "firing", "receiver": "r"}
    assert parse(weird)["body_text"] == "- firing 1:"
    labels_not_a_dict = {"alerts": [{"labels": "x"}], "status": "firing", "receiver": "r", "fingerprint": "f"}
    caplog.set_level(logging.INFO, "coord")
    caplog.clear()
    assert parse(labels_not_a_dict) == parsed(body_json=labels_not_a_dict, dedup_key="f", group_key="f")
    assert [r.getMessage() for r in caplog.records] == [
        "ingest payload of an unexpected shape; stored with a generic summary"]


def test_a_github_body_is_summarised_and_grouped():
    pr = {"repository": {"full_name": "o/r"}, "action": "opened", "pull_request": {"number": 5, "title": "T"}}
    assert parse(pr, github_event="pull_request", delivery="d-1") == parsed(
        body_text="by someone", body_json=pr, title="o/r: PR #5 opened: T", dedup_key="github:d-1",
        group_key="github:o/r:#5")
    assert parse(pr, github_event="pull_request")["dedup_key"] is None
    assert parse(pr, github_event="pull_request", delivery="")["dedup_key"] is None  # an empty delivery id
    assert parse({**pr, "dedupKey": ""}, github_event="pull_request", delivery="d-1")[
        "dedup_key"] == "github:d-1"  # an empty dedupKey is none: the delivery's stands
    comment = {"repository": {"full_name": "o/r"}, "issue": {"number": 5}, "comment": {"body": "hi"}}
    assert parse(comment, github_event="issue_comment")["group_key"] == "github:o/r:#5"
    run = {"repository": {"full_name": "o/r"}, "workflow_run": {"name": "CI", "conclusion": "success"}}
    assert parse(run, github_event="workflow_run")["group_key"] == "github:o/r:workflow:CI"
    assert parse({"workflow_run": {}}, github_event="workflow_run")["group_key"] == "github:repository:workflow:?"
    check = {"check_run": {"name": "lint"}, "pull_request": {"number": 3}}
    assert parse(check, github_event="check_run")["group_key"] == "github:repository:check:lint"
    assert parse({"check_run": "x", "pull_request": {"number": 3}}, github_event="check_run")[
        "group_key"] == "github:repository:#3"
    assert parse({"workflow_run": {"name": "CI"}}, github_event="push")["group_key"] == "github:repository:push"
    assert parse({"issue": {"number": None}}, github_event="issues")["group_key"] == "github:repository:issues"
    assert parse({"issue": {"title": "x"}, "dedupKey": "k"}, github_event="issues")["group_key"] == (
        "github:repository:issues")
    star = {"repository": {"full_name": "o/r"}, "action": "created"}
    assert parse(star, github_event="star", delivery="d") == parsed(
        body_text="", body_json=star, title="o/r: GitHub star created", dedup_key="github:d",
        group_key="github:o/r:star")
    assert parse({"title": "T", "body": "b"}, github_event="ping", delivery="d")[
        "title"] == "T"  # the sender's own title wins
    assert parse({"title": "T", "body": "b"}, github_event="ping")["body_text"] == "b"
    odd = {"commits": [{"message": 5}], "pull_request": {"number": 1}}  # a shape the summary cannot read
    assert parse(odd, github_event="push") == parsed(body_json=odd, group_key="github:repository:#1")
    assert parse({"repository": {"full_name": ["o"]}}, github_event="push")["group_key"] == (
        "github:['o']:push")
    # a user without a login is "someone"; a commit's first line is cut at 120 characters
    assert parse({"pull_request": {"number": 2, "user": {}}, "action": "opened"}, github_event="pull_request")[
        "body_text"] == "by someone"
    assert parse({"issue": {"number": 2, "user": {"id": 1}}, "action": "opened"}, github_event="issues")[
        "body_text"] == "by someone"
    assert parse({"issue": {"number": 2}, "comment": {"user": {}}}, github_event="issue_comment")[
        "title"] == "repository: someone commented on #2: "
    assert parse({"commits": [{"message": "m" * 130 + "\nrest"}], "sender": {}}, github_event="push") == parsed(
        body_text="- " + "m" * 120, body_json={"commits": [{"message": "m" * 130 + "\nrest"}], "sender": {}},
        title="repository: someone pushed 1 commit to ?", group_key="github:repository:push")


# --- ingest ----------------------------------------------------------------------------------------------------

def alert_columns() -> list[tuple]:
    return [(a.webhook_id, a.runbook_page_id, a.runbook_url, a.escalate_to)
            for a in BuzzAlert.select().order_by(BuzzAlert.id)]


async def fire(store, hook: dict, body: dict | bytes, *, content_type: str = "application/json",
               github_event: str | None = None, delivery: str | None = None, **kwargs) -> dict:
    return await store.write(buzz.ingest, hook["id"], hook["appName"], hook["token"],
                             parse(body, content_type, github_event, delivery), **kwargs)


def events() -> list[dict]:
    return [buzz.event_json(e) for e in BuzzEvent.select().order_by(BuzzEvent.id)]


async def test_an_ingest_is_stored_whole_logged_and_wakes_its_agents(store):
    hook = await create(store, appName="ci", title="CI", forUsers="alice", wakeAgent="carol", notifyAgent="bob")
    store.published.clear()
    after = last_event_id()
    store.clock.advance(seconds=5)
    answer = await fire(store, hook, {"title": "disk", "x": 1})
    assert answer == {"ok": True, "eventId": answer["eventId"], "alertId": answer["alertId"]}
    assert await store.read(events) == [{
        "id": answer["eventId"], "webhookId": hook["id"], "appName": "ci", "title": "disk", "forUsers": "alice",
        "receivedAt": iso(START + timedelta(seconds=5)), "contentType": "application/json", "bodyText": None,
        "bodyJson": {"title": "disk", "x": 1}, "wakeDeliveredAt": None, "notifyDeliveredAt": None,
        "suppressed": False, "alertId": answer["alertId"], "silencedBy": None}]
    broadcasts = [entry for entry in await store.read(logged_after, after) if entry[0] == "broadcast"]
    assert broadcasts == [("broadcast", {"type": "broadcast", "appName": "ci", "title": "disk",
                                         "eventId": answer["eventId"], "alertId": answer["alertId"]},
                           ["alice", "bob", "carol"])]
    # the new alert pulses its wake agent; the ingest pulses both agents
    assert sorted(p["identity"] for p in published(store, WAKE)) == ["bob", "carol", "carol"]
    [listed] = await store.read(buzz.list_webhooks, "alice", False, BASE)
    assert listed["lastHitAt"] == iso(START + timedelta(seconds=5))
    detail = await store.read(buzz.alert_detail, "alice", False, answer["alertId"])
    assert (detail["title"], detail["groupKey"], detail["state"], detail["count"]) == ("disk", "disk", "open", 1)
    assert detail["events"] == await store.read(events)

    store.clock.advance(seconds=7)  # each agent's wake takes its item once, and the event says when
    await store.write(wake.wake_payload, "carol", BASE, False, True, KNOWN)
    delivered = iso(START + timedelta(seconds=12))
    assert [(e["wakeDeliveredAt"], e["notifyDeliveredAt"]) for e in await store.read(events)] == [(delivered, None)]
    store.clock.advance(seconds=1)
    await store.write(wake.wake_payload, "bob", BASE, False, True, KNOWN)
    assert [(e["wakeDeliveredAt"], e["notifyDeliveredAt"]) for e in await store.read(events)] == [
        (delivered, iso(START + timedelta(seconds=13)))]


async def test_an_ingest_for_everyone_and_by_an_agent(store):
    hook = await create(store, appName="ci", title="CI", wakeAgent="carol", notifyAgent="bob")
    store.published.clear()
    after = last_event_id()
    answer = await fire(store, hook, b"plain words", content_type="text/plain", ingested_by="carol")
    broadcasts = [entry for entry in await store.read(logged_after, after) if entry[0] == "broadcast"]
    assert broadcasts == [("broadcast", {"type": "broadcast", "appName": "ci", "title": "CI",
                                         "eventId": answer["eventId"], "alertId": answer["alertId"],
                                         "ingestedBy": "carol"}, None)]
    assert [p["identity"] for p in published(store, WAKE)] == ["bob"]  # carol's own ingest: no pulse
    assert [p["identity"] for p in published(store, WAKE_CHANGED)].count("carol") >= 1
    assert (await store.read(events))[0]["bodyText"] == "plain words"


async def test_a_webhook_without_agents_pulses_no_one(store):
    hook = await create(store, appName="ci", title="CI", forUsers="alice")
    store.published.clear()
    await fire(store, hook, {"title": "x"})
    assert published(store, WAKE) == []


async def test_the_title_falls_back_to_the_webhooks_and_is_cut(store):
    hook = await create(store, appName="ci", title="CI")
    await fire(store, hook, {"title": "t" * 300})
    await fire(store, hook, {"other": 1})
    assert [e["title"] for e in await store.read(events)] == ["t" * 255, "CI"]
    alerts = await store.read(lambda: [(a.group_key, a.title) for a in BuzzAlert.select().order_by(BuzzAlert.id)])
    assert alerts == [("t" * 255, "t" * 255), ("CI", "CI")]
    long_title = "u" * 300
    await fire(store, hook, {"title": long_title, "groupKey": "g"})
    await fire(store, hook, {"title": "v" * 255, "extra": 1})
    assert (await store.read(lambda: [a.group_key for a in BuzzAlert.select().order_by(BuzzAlert.id)]))[2:] == [
        "g", "v" * 255]


async def test_a_repeat_within_five_minutes_is_suppressed(store):
    hook = await create(store, appName="ci", title="CI", wakeAgent="carol")
    first = await fire(store, hook, {"title": "disk", "dedupKey": "k1"})
    store.published.clear()
    after = last_event_id()
    store.clock.advance(seconds=299)
    repeat = await fire(store, hook, {"title": "disk", "dedupKey": "k1"})
    assert repeat == {"ok": True, "eventId": repeat["eventId"], "suppressed": True}
    assert await store.read(logged_after, after) == []
    assert published(store, WAKE) == []
    [listed] = await store.read(buzz.list_webhooks, "alice", False, BASE)
    assert listed["lastHitAt"] == iso(START)
    stored = await store.read(events)
    assert [(e["suppressed"], e["alertId"]) for e in stored] == [(False, first["alertId"]),
                                                                 (True, first["alertId"])]
    other = await fire(store, hook, {"title": "disk", "dedupKey": "k2"})
    assert "suppressed" not in other
    store.clock.advance(seconds=1)  # 300 s after the first: the window is over
    again = await fire(store, hook, {"title": "disk", "dedupKey": "k1"})
    assert again == {"ok": True, "eventId": again["eventId"], "alertId": first["alertId"]}


async def test_a_repeat_counts_from_the_last_ingest_that_was_not_one(store):
    hook = await create(store, appName="ci", title="CI")
    await fire(store, hook, {"dedupKey": "k"})
    store.clock.advance(seconds=200)
    assert (await fire(store, hook, {"dedupKey": "k"}))["suppressed"] is True
    store.clock.advance(seconds=150)  # 350 s after the first, 150 s after the repeat
    assert "suppressed" not in await fire(store, hook, {"dedupKey": "k"})
    other = await create(store, appName="ci2", title="CI2")
    assert "suppressed" not in await fire(store, other, {"dedupKey": "k"})


async def test_a_repeat_of_an_unknown_group_starts_no_alert(store):
    hook = await create(store, appName="ci", title="CI")
    await fire(store, hook, {"dedupKey": "k", "groupKey": "g1"})
    repeat = await fire(store, hook, {"dedupKey": "k", "groupKey": "g2"})
    assert repeat["suppressed"] is True
    assert (await store.read(events))[1]["alertId"] is None
    assert await store.read(lambda: [a.group_key for a in BuzzAlert.select()]) == ["g1"]


async def test_the_rate_limit_counts_the_last_minute_in_the_database(store):
    hook = await create(store, appName="ci", title="CI")
    await fire(store, hook, {"n": 1}, limit=3)
    store.clock.advance(seconds=10)
    await fire(store, hook, {"n": 2}, limit=3)
    await fire(store, hook, {"n": 3}, limit=3)
    store.clock.advance(seconds=20.5)
    with pytest.raises(RateLimited) as limited:
        await fire(store, hook, {"n": 4}, limit=3)
    assert (limited.value.message, limited.value.headers["Retry-After"]) == (
        "Too many ingests for this webhook; retry in 30 s", "30")
    assert len(await store.read(events)) == 3
    assert "ok" in await fire(store, hook, {"n": 4}, limit=4)
    assert "ok" in await fire(store, hook, {"n": 5})
    store.clock.advance(seconds=29.5)  # the first is now 60 s old: out of the window
    assert "ok" in await fire(store, hook, {"n": 6}, limit=5)
    store.clock.advance(seconds=0.75)
    with pytest.raises(RateLimited) as again:
        await fire(store, hook, {"n": 7}, limit=5)
    assert again.value.headers["Retry-After"] == "10"  # 9.25 s, rounded up
    with pytest.raises(RateLimited) as newest:  # a lower limit: the retry counts from the limit-th newest
        await fire(store, hook, {"n": 8}, limit=2)
    assert newest.value.headers["Retry-After"] == "30"  # the second newest, at 30.5 s: 29.75 s to go
    store.clock.advance(seconds=59)  # the newest, at 60 s, is 59.75 s old: 0.25 s to go, made 1
    with pytest.raises(RateLimited) as soon:
        await fire(store, hook, {"n": 9}, limit=1)
    assert soon.value.headers["Retry-After"] == "1"


async def test_an_ingest_into_a_wrong_or_disabled_webhook_is_refused(store):
    hook = await create(store, appName="ci", title="CI")
    for webhook_id, app_name, token in ((hook["id"] + 1, "ci", hook["token"]), (hook["id"], "ci2", hook["token"]),
                                        (hook["id"], "ci", hook["token"][:-1] + "x"), (hook["id"], "ci", "")):
        with pytest.raises(NotFound) as refused:
            await store.write(buzz.ingest, webhook_id, app_name, token, parse({"a": 1}))
        assert refused.value.message == "Invalid webhook"
    await update(store, hook["id"], "alice", enabled=False)
    with pytest.raises(NotFound):
        await fire(store, hook, {"a": 1})
    assert await store.read(events) == []


async def test_a_silenced_ingest_is_stored_and_told_to_no_one(store):
    hook = await create(store, appName="ci", title="CI", wakeAgent="carol")
    silence = await store.write(silences.create, "alice", False, {"app_name": "ci", "minutes": 60,
                                                                  "match": {"title": "disk"}})
    store.published.clear()
    after = last_event_id()
    answer = await fire(store, hook, {"title": "disk full"})
    assert answer == {"ok": True, "eventId": answer["eventId"], "alertId": answer["alertId"],
                      "silencedBy": silence["id"]}
    assert [(e["silencedBy"], e["suppressed"]) for e in await store.read(events)] == [(silence["id"], False)]
    assert [entry[0] for entry in await store.read(logged_after, after)] == []
    assert published(store, WAKE) == []
    [listed] = await store.read(buzz.list_webhooks, "alice", False, BASE)
    assert listed["lastHitAt"] is None
    detail = await store.read(buzz.alert_detail, "alice", False, answer["alertId"])
    assert detail["silencedBy"] == silence["id"]


async def test_a_silenced_resolution_does_not_resolve(store):
    hook = await create(store, appName="am", title="AM")
    body = {"status": "firing", "receiver": "r", "groupKey": "g", "alerts": [{"labels": {"alertname": "A"}}]}
    opened = await fire(store, hook, body)
    await store.write(silences.create, "alice", False, {"app_name": "am", "minutes": 60, "match": {"title": "A"}})
    await fire(store, hook, {**body, "status": "resolved"})
    detail = await store.read(buzz.alert_detail, "alice", False, opened["alertId"])
    assert detail["state"] == "open"


async def test_a_resolution_resolves_and_a_first_resolution_opens_nothing(store):
    hook = await create(store, appName="am", title="AM")
    body = {"status": "firing", "receiver": "r", "groupKey": "g", "alerts": [{"labels": {"alertname": "A"}}]}
    opened = await fire(store, hook, body)
    resolved = await fire(store, hook, {**body, "status": "resolved"})
    assert resolved["alertId"] == opened["alertId"]
    assert (await store.read(buzz.alert_detail, "alice", False, opened["alertId"]))["state"] == "resolved"
    first = await fire(store, hook, {**body, "groupKey": "g2", "status": "resolved"})
    assert (await store.read(buzz.alert_detail, "alice", False, first["alertId"]))["state"] == "resolved"


async def test_a_flapping_alert_wakes_once_per_window_and_its_broadcast_is_quiet(store):
    hook = await create(store, appName="am", title="AM", wakeAgent="carol", flapResolutions=1, flapWindowMinutes=30)
    body = {"status": "firing", "receiver": "r", "groupKey": "g", "alerts": [{"labels": {"alertname": "A"}}]}
    rule = FlapRule(100, timedelta(hours=1))  # the webhook's own thresholds replace the deployment's
    for n, status in enumerate(("firing", "resolved", "firing", "resolved")):
        store.clock.advance(seconds=1)
        await fire(store, hook, {**body, "status": status, "fingerprint": f"f{n}"}, flap=rule)
    store.published.clear()
    after = last_event_id()
    store.clock.advance(seconds=1)
    await fire(store, hook, {**body, "status": "firing"}, flap=rule)
    broadcasts = [entry[1] for entry in await store.read(logged_after, after) if entry[0] == "broadcast"]
    assert [b.get("quiet") for b in broadcasts] == [True]
    assert published(store, WAKE) == []


async def test_the_event_list_is_newest_first_and_the_callers(store):
    everyone = await create(store, appName="ci", title="CI")
    bobs = await create(store, appName="ops", title="Ops", forUsers="bob,carol")
    underscored = await create(store, appName="x", title="X", forUsers="b_b")
    ids = [(await fire(store, hook, {"n": n}))["eventId"] for n, hook in enumerate([everyone, bobs, everyone,
                                                                                    underscored])]
    assert [e["id"] for e in await store.read(buzz.list_events, "bob", None, 10)] == [ids[2], ids[1], ids[0]]
    assert [e["id"] for e in await store.read(buzz.list_events, "alice", None, 10)] == [ids[2], ids[0]]
    assert [e["id"] for e in await store.read(buzz.list_events, "bob", None, 2)] == [ids[2], ids[1]]
    assert [e["id"] for e in await store.read(buzz.list_events, "bob", "ops", 10)] == [ids[1]]
    assert [e["id"] for e in await store.read(buzz.list_events, "bob", "", 10)] == [ids[2], ids[1], ids[0]]
    assert [e["id"] for e in await store.read(buzz.list_events, "bib", None, 10)] == [ids[2], ids[0]]
    assert (await store.read(buzz.list_events, "bob", None, 1))[0] == (await store.read(events))[2]


async def test_an_alerts_detail_shows_its_newest_twenty_events_to_who_may_see_it(store):
    hook = await create(store, appName="ci", title="CI", forUsers="bob")
    other = await create(store, appName="ci2", title="CI2")
    ids = [(await fire(store, hook, {"title": "disk", "n": n}))["eventId"] for n in range(22)]
    await fire(store, other, {"title": "disk"})
    alert_id = (await store.read(events))[0]["alertId"]
    detail = await store.read(buzz.alert_detail, "bob", False, alert_id)
    assert [e["id"] for e in detail["events"]] == ids[::-1][:20]
    assert {k: v for k, v in detail.items() if k != "events"} == await store.read(
        lambda: alerts.alert_json(BuzzAlert.get_by_id(alert_id)))
    with pytest.raises(NotFound):
        await store.read(buzz.alert_detail, "carol", False, alert_id)
    assert await store.read(buzz.alert_detail, "dave", True, alert_id) == detail  # an admin sees every alert
