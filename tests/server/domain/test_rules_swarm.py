"""Swarm tasks through the store, no HTTP, on both backends (over HTTP: tests/server/api/test_swarm.py and
test_task_rules.py, which hold the state table): a task whole as created, the field checks' refusals in their
words, the list's filters and order, a field PATCH and its history, status moves (claims, holds, hand-overs,
reopening), what each change logs and whom it wakes, and notebook-page links. The mutation run of swarm.py uses
these with test_rules_leases.py."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import lease_changes, swarm
from coordserver.errors import Conflict, Forbidden, Invalid, NotFound
from coordserver.events.channels import WAKE, WAKE_CHANGED
from coordserver.models import NotebookPage, Task
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import (KNOWN, START, logged_after, published, restricted_project, while_held,
                                         who)

AT = "2026-03-07T12:00:00.000Z"


def at(**delta) -> str | None:
    return iso(START + timedelta(**delta))


def whole(task_id: str, **fields) -> dict:
    base = {"id": task_id, "projectId": None, "title": "Fix login", "detail": None, "followUp": None,
            "creatorUserId": "alice", "assigneeUserId": None, "status": "ready", "issueUrl": None,
            "onOrAfterAt": None, "mustBeDoneAfterTaskId": None, "sortKey": None, "nextTaskId": None,
            "nextTaskAssigneeUserId": None, "recurringTemplateId": None, "recurringInstanceAt": None,
            "linkedNotebookPages": None, "createdAt": AT, "updatedAt": AT, "completedAt": None}
    return {**base, **fields}


async def new_task(store, by: str = "alice", **body) -> dict:
    return await store.write(swarm.create_task, who(by), {"title": "Fix login", **body}, KNOWN)


async def move(store, identity, task_id, status, reason=None, assignee=None, seconds=None) -> dict:
    return await store.write(swarm.move_task, who(identity), task_id, status, reason, assignee, seconds)


async def patch(store, identity, task_id, **body) -> dict:
    return await store.write(swarm.update_task, who(identity), task_id, body, KNOWN)


def history(task_id: str) -> list[tuple]:
    return [(e["kind"], e["actorUserId"], e["beforeState"], e["afterState"], e["createdAt"])
            for e in swarm.list_task_events(who("admin"), task_id, 100)]


async def refused(error, words, call):
    with pytest.raises(error) as caught:
        await call
    assert str(caught.value) == words
    return caught.value


def task_count() -> int:
    return Task.select().count()


# --- field checks (pure) --------------------------------------------------------------------------

def test_statuses_and_their_filter():
    assert swarm.valid_status("review") == "review"
    for bad in ("done", None, 3):
        with pytest.raises(Invalid) as caught:
            swarm.valid_status(bad, "toStatus")
        assert caught.value.body() == {"error": f"Unknown toStatus: {bad}", "allowed": [
            "queued", "ready", "in_progress", "holding", "review", "complete", "closed"]}
    assert swarm.status_filter(" ready , ,review", None) == ["ready", "review"]
    assert swarm.status_filter(None, "queued") == ["queued"]
    assert swarm.status_filter("  ", "holding") == ["holding"]
    assert swarm.status_filter("ready", "review") == ["ready"]
    assert swarm.status_filter(None, None) is None
    assert swarm.status_filter(None, " ") is None
    assert swarm.status_filter(" , ", None) == []
    with pytest.raises(Invalid, match="^Unknown status: nope$"):
        swarm.status_filter("ready", "nope")  # the alias is checked even when statuses wins
    with pytest.raises(Invalid, match="^Unknown status: nope$"):
        swarm.status_filter("ready,nope", None)


def test_the_other_field_checks_say_what_is_wrong():
    assert swarm.valid_timezone("Europe/Paris", "tz") == "Europe/Paris"
    assert swarm.valid_timezone("UTC", "tz") == "UTC"
    for bad, words in ((None, "tz must be an IANA timezone name such as America/Chicago"),
                       ("", "tz must be an IANA timezone name such as America/Chicago"),
                       ("X" * 65, "tz must be an IANA timezone name such as America/Chicago"),
                       ("Mars/Base", "Unknown timezone: Mars/Base"), ("America", "Unknown timezone: America"),
                       ("X" * 64, "Unknown timezone: " + "X" * 64),
                       ("../etc", "Unknown timezone: ../etc")):
        with pytest.raises(Invalid) as caught:
            swarm.valid_timezone(bad, "tz")
        assert str(caught.value) == words
    long_zone = "America/Argentina/ComodRivadavia"
    assert swarm.valid_timezone(long_zone, "tz") == long_zone
    assert swarm.optional_text(None, "detail", 3) is None
    assert swarm.optional_text("abc", "detail", 3) == "abc"
    for bad, words in ((5, "detail must be a string"), ("abcd", "detail is longer than 3 characters")):
        with pytest.raises(Invalid) as caught:
            swarm.optional_text(bad, "detail", 3)
        assert str(caught.value) == words
    assert swarm.required_title("  Ship  ") == "Ship"
    assert swarm.required_title("t" * 255) == "t" * 255
    for bad, words in ((None, "title is required"), ("   ", "title is required"),
                       ("t" * 256, "title is longer than 255 characters")):
        with pytest.raises(Invalid) as caught:
            swarm.required_title(bad)
        assert str(caught.value) == words
    assert swarm.optional_timestamp(None, "at") is None
    assert swarm.optional_timestamp("2026-03-07T12:00:00Z", "at") == START
    for bad in ("soon", 5):
        with pytest.raises(Invalid) as caught:
            swarm.optional_timestamp(bad, "at")
        assert str(caught.value) == "at must be an ISO-8601 timestamp"


async def test_identities_and_projects_named_in_a_body_must_be_known_and_visible(store):
    assert await store.read(swarm.known_identity, "bob", "assigneeUserId", KNOWN) == "bob"
    for bad, words in ((5, "assigneeUserId must be an identity"),
                       ("zed", "Unknown identity for assigneeUserId: zed"),
                       ("", "identity is required")):
        await refused(Invalid, words, store.read(swarm.known_identity, bad, "assigneeUserId", KNOWN))
    secret = await store.write(restricted_project, ["bob"])
    assert await store.read(swarm.existing_project_id, None, "carol") is None
    assert await store.read(swarm.existing_project_id, secret, "bob") == secret
    for bad in (secret, 5, "nope"):
        await refused(Invalid, f"Unknown projectId: {bad}", store.read(swarm.existing_project_id, bad, "carol"))
    assert await store.read(swarm.visible_project_id, None, who("carol")) is None
    assert await store.read(swarm.visible_project_id, secret, who("bob")) == secret
    assert await store.read(swarm.visible_project_id, secret, who("admin")) == secret
    await refused(Invalid, "projectId must be a string", store.read(swarm.visible_project_id, 5, who("bob")))
    await refused(NotFound, "Project not found", store.read(swarm.visible_project_id, secret, who("carol")))


# --- create -----------------------------------------------------------------------------------------

async def test_a_new_task_is_whole_logged_recorded_and_wakes_its_assignee(store):
    made = await new_task(store, assigneeUserId="bob")
    assert made == whole(made["id"], assigneeUserId="bob")
    assert await store.read(logged_after) == [("swarm_task_created", {
        "type": "swarm_task_created", "taskId": made["id"], "title": "Fix login", "status": "ready",
        "actor": "alice"}, None)]
    assert await store.read(history, made["id"]) == [
        ("created", "alice", None, {"status": "ready", "assigneeUserId": "bob", "title": "Fix login"}, AT)]
    assert published(store, WAKE) == [{"identity": "bob"}]
    mine = await new_task(store, assigneeUserId="alice")
    assert published(store, WAKE) == [{"identity": "bob"}]  # a task one assigns oneself wakes nobody
    assert published(store, WAKE_CHANGED) == [{"identity": "alice"}]
    queued = await new_task(store, assigneeUserId="bob", status="queued")
    assert queued["status"] == "queued"
    assert published(store, WAKE) == [{"identity": "bob"}]  # a queued task is in no wake
    assert mine["assigneeUserId"] == "alice"


async def test_a_new_task_carries_every_field_given(store):
    other = await new_task(store)
    secret = await store.write(restricted_project, ["bob"])
    body = {"title": "  Ship it ", "projectId": secret, "detail": "d", "followUp": "f", "issueUrl": "https://x/1",
            "assigneeUserId": "bob", "nextTaskAssigneeUserId": "carol", "mustBeDoneAfterTaskId": other["id"],
            "nextTaskId": other["id"], "onOrAfterAt": "2026-03-08T09:30:00+01:00", "sortKey": 2.5,
            "linkedNotebookPages": ["p1", "p2"]}
    made = await store.write(swarm.create_task, who("admin"), body, KNOWN)
    assert made == whole(made["id"], title="Ship it", projectId=secret, detail="d", followUp="f",
                         issueUrl="https://x/1", assigneeUserId="bob", nextTaskAssigneeUserId="carol",
                         mustBeDoneAfterTaskId=other["id"], nextTaskId=other["id"],
                         onOrAfterAt="2026-03-08T08:30:00.000Z", sortKey=2.5, linkedNotebookPages=["p1", "p2"],
                         creatorUserId="admin")
    assert (await store.read(logged_after))[-1][2] == ["bob", "cre", "dl", "pl"]  # (no environment admins here)
    done = await new_task(store, status="complete", linkedNotebookPages=[])
    assert (done["completedAt"], done["linkedNotebookPages"]) == (AT, None)
    closed = await new_task(store, status="closed")
    assert closed["completedAt"] == AT


async def test_a_new_task_is_refused_in_the_words_of_its_first_fault_and_nothing_written(store):
    secret = await store.write(restricted_project, ["bob"])
    other = await new_task(store)
    cases = [({"title": None}, Invalid, "title is required"), ({"title": "  "}, Invalid, "title is required"),
             ({"title": 5}, Invalid, "title is required"),
             ({"title": "t" * 256}, Invalid, "title is longer than 255 characters"),
             ({"status": "done"}, Invalid, "Unknown status: done"),
             ({"detail": 1}, Invalid, "detail must be a string"),
             ({"followUp": "f" * 20_001}, Invalid, "followUp is longer than 20000 characters"),
             ({"detail": "d" * 20_001}, Invalid, "detail is longer than 20000 characters"),
             ({"issueUrl": "u" * 501}, Invalid, "issueUrl is longer than 500 characters"),
             ({"assigneeUserId": "zed"}, Invalid, "Unknown identity for assigneeUserId: zed"),
             ({"nextTaskAssigneeUserId": "zed"}, Invalid, "Unknown identity for nextTaskAssigneeUserId: zed"),
             ({"mustBeDoneAfterTaskId": "nope"}, Invalid, "Unknown task for mustBeDoneAfterTaskId: nope"),
             ({"nextTaskId": 5}, Invalid, "Unknown task for nextTaskId: 5"),
             ({"onOrAfterAt": "soon"}, Invalid, "onOrAfterAt must be an ISO-8601 timestamp"),
             ({"projectId": secret}, NotFound, "Project not found"),
             ({"assigneeUserId": "carol", "projectId": secret}, NotFound, "Project not found"),
             ({"leaseSeconds": 5}, Invalid, None)]
    for sort_key in (True, "1", float("nan"), float("inf"), 1e308 * 10, -1e301):
        cases.append(({"sortKey": sort_key}, Invalid, "sortKey must be a number"))
    for pages in ("p1", ["p"] * 101, [""], ["x" * 37], [5]):
        cases.append(({"linkedNotebookPages": pages}, Invalid, "linkedNotebookPages must be an array of page ids"))
    for body, error, words in cases:
        with pytest.raises(error) as caught:
            await store.write(swarm.create_task, who("carol"), {"title": "t", **body}, KNOWN)
        if words is not None:
            assert str(caught.value) == words, body
    await refused(Invalid, "assigneeUserId carol cannot see this task's project",
                  store.write(swarm.create_task, who("bob"), {"title": "t", "projectId": secret,
                                                              "assigneeUserId": "carol"}, KNOWN))
    # a task in a project carol cannot see is no task to her
    hidden = await store.write(swarm.create_task, who("bob"), {"title": "t", "projectId": secret}, KNOWN)
    await refused(Invalid, f"Unknown task for nextTaskId: {hidden['id']}",
                  store.write(swarm.create_task, who("carol"), {"title": "t", "nextTaskId": hidden["id"]}, KNOWN))
    assert await store.read(task_count) == 2
    # the largest finite keys pass the check and are stored (PostgreSQL's column was `real`, up to 3.4e38)
    big = -1e299
    edge = await store.write(swarm.create_task, who("carol"), {
        "title": "t", "sortKey": big, "linkedNotebookPages": ["x" * 36] * 100, "mustBeDoneAfterTaskId": other["id"]},
        KNOWN)
    assert (edge["sortKey"], len(edge["linkedNotebookPages"])) == (big, 100)
    assert (await new_task(store, sortKey=None))["sortKey"] is None


async def test_a_lease_is_given_only_to_a_task_created_in_progress_with_a_holder(store):
    held = await new_task(store, status="in_progress", assigneeUserId="bob", leaseSeconds=600)
    assert held == whole(held["id"], status="in_progress", assigneeUserId="bob", leaseExpiresAt=at(minutes=10))
    assert "leaseExpiresAt" not in await new_task(store, status="in_progress", leaseSeconds=600)
    assert "leaseExpiresAt" not in await new_task(store, assigneeUserId="bob", leaseSeconds=600)


# --- the list ------------------------------------------------------------------------------------

async def test_the_list_filters_and_orders_by_status_rank_then_sort_key_then_age(store):
    ids = {}
    for name, status, sort_key, assignee in (("r-late", "ready", None, "bob"), ("r-2", "ready", 2, None),
                                              ("r-1", "ready", 1, "bob"), ("rev", "review", None, "bob"),
                                              ("prog", "in_progress", None, "carol"), ("q", "queued", None, None),
                                              ("hold", "holding", None, None), ("done", "complete", None, "bob"),
                                              ("shut", "closed", None, None), ("r-late2", "ready", None, None)):
        made = await new_task(store, title=name, status=status, sortKey=sort_key, assigneeUserId=assignee)
        ids[made["id"]] = name
        if name != "r-late":
            store.clock.advance(seconds=1)

    def names(**kwargs) -> list[str]:
        args = {"statuses": None, "assignee": None, "project_id": None, "include_completed": False, **kwargs}
        return [ids[t["id"]] for t in swarm.list_tasks(who("carol"), **args)]
    assert await store.read(names) == ["prog", "rev", "r-1", "r-2", "r-late", "r-late2", "q", "hold"]
    assert await store.read(names, include_completed=True) == \
        ["prog", "rev", "r-1", "r-2", "r-late", "r-late2", "q", "hold", "done", "shut"]
    assert await store.read(names, statuses=["closed", "ready"]) == ["r-1", "r-2", "r-late", "r-late2", "shut"]
    assert await store.read(names, assignee="bob") == ["rev", "r-1", "r-late"]
    assert await store.read(names, assignee="bob", include_completed=True) == ["rev", "r-1", "r-late", "done"]
    secret = await store.write(restricted_project, ["bob"])
    inside = await new_task(store, title="inside", projectId=secret, by="bob")
    ids[inside["id"]] = "inside"
    assert "inside" not in await store.read(names)
    assert await store.read(names, project_id=secret) == []
    assert [ids[t["id"]] for t in await store.read(swarm.list_tasks, who("bob"), None, None, secret, False)] == \
        ["inside"]
    assert len(await store.read(swarm.list_tasks, who("admin"), None, None, None, True)) == 11


async def test_tasks_created_at_one_instant_list_by_id(store):
    made = [await new_task(store, title=f"t{i}") for i in range(4)]
    listed = await store.read(swarm.list_tasks, who("alice"), None, None, None, False)
    assert [t["id"] for t in listed] == sorted(t["id"] for t in made)


# --- field changes ---------------------------------------------------------------------------------

async def test_a_patch_writes_and_records_only_what_changed(store):
    made = await new_task(store, detail="d", sortKey=1)
    store.clock.advance(minutes=1)
    same = await patch(store, "bob", made["id"], detail="d", sortKey=1)
    assert same == made
    assert len(await store.read(logged_after)) == 1
    assert await store.read(history, made["id"]) == [("created", "alice", None, {
        "status": "ready", "assigneeUserId": None, "title": "Fix login"}, AT)]
    changed = await patch(store, "bob", made["id"], detail="new", sortKey=1, onOrAfterAt="2026-03-09T00:00:00Z",
                          title=" Renamed ")
    assert changed == whole(made["id"], title="Renamed", detail="new", sortKey=1,
                            onOrAfterAt="2026-03-09T00:00:00.000Z", updatedAt=at(minutes=1))
    assert (await store.read(history, made["id"]))[0] == (
        "updated", "bob", {"title": "Fix login", "detail": "d", "onOrAfterAt": None},
        {"title": "Renamed", "detail": "new", "onOrAfterAt": "2026-03-09T00:00:00.000Z"}, at(minutes=1))
    assert (await store.read(logged_after))[-1] == ("swarm_task_updated", {
        "type": "swarm_task_updated", "taskId": made["id"], "title": "Renamed", "status": "ready", "actor": "bob"},
        None)
    assert published(store, WAKE) == []
    moved_on = await patch(store, "bob", made["id"], onOrAfterAt="2026-03-10T00:00:00Z")
    assert (await store.read(history, made["id"]))[0][2:4] == (
        {"onOrAfterAt": "2026-03-09T00:00:00.000Z"}, {"onOrAfterAt": "2026-03-10T00:00:00.000Z"})
    assert moved_on["onOrAfterAt"] == "2026-03-10T00:00:00.000Z"


async def test_a_new_assignee_is_recorded_apart_woken_and_loses_no_other_change(store):
    made = await new_task(store, status="in_progress", assigneeUserId="bob", leaseSeconds=600)
    store.clock.advance(minutes=1)
    handed = await patch(store, "alice", made["id"], assigneeUserId="carol", detail="over to you")
    assert handed == whole(made["id"], status="in_progress", assigneeUserId="carol", detail="over to you",
                           updatedAt=at(minutes=1))  # the lease is the old holder's: gone
    assert (await store.read(history, made["id"]))[:2] == [
        ("updated", "alice", {"detail": None}, {"detail": "over to you"}, at(minutes=1)),
        ("assigned", "alice", {"assigneeUserId": "bob"}, {"assigneeUserId": "carol"}, at(minutes=1))]
    assert published(store, WAKE)[-1] == {"identity": "carol"}
    unassigned = await patch(store, "alice", made["id"], assigneeUserId=None)
    assert unassigned["assigneeUserId"] is None
    assert [kind for kind, *_ in await store.read(history, made["id"])] == \
        ["assigned", "updated", "assigned", "created"]


async def test_a_held_task_changes_hands_or_projects_only_by_those_the_rule_names(store):
    secret = await store.write(restricted_project, ["bob", "carol"])
    made = await new_task(store, assigneeUserId="bob")
    before = await store.read(logged_after)
    await refused(Forbidden, "Task is held by bob (ready); only its creator (alice), bob, the leads of its project "
                  "or an admin may reassign it", patch(store, "carol", made["id"], assigneeUserId="carol"))
    await refused(Forbidden, "Task is held by bob (ready); only its creator (alice), bob, the leads of its project "
                  "or an admin may move it to another project", patch(store, "carol", made["id"], projectId=secret))
    await refused(Invalid, "assigneeUserId alice cannot see this task's project",
                  patch(store, "bob", made["id"], projectId=secret, assigneeUserId="alice"))
    assert (await store.read(logged_after))[len(before):] == []
    moved = await patch(store, "bob", made["id"], projectId=secret)
    assert moved["projectId"] == secret
    assert (await store.read(history, made["id"]))[0][2:4] == ({"projectId": None}, {"projectId": secret})
    assert (await store.read(logged_after))[-1][2] == ["bob", "carol", "cre", "dl", "pl"]
    # a lead of the project may hand it over; the new holder must see the project
    await refused(Invalid, "assigneeUserId alice cannot see this task's project",
                  patch(store, "pl", made["id"], assigneeUserId="alice"))
    assert (await patch(store, "pl", made["id"], assigneeUserId="carol"))["assigneeUserId"] == "carol"
    # a task one cannot see is not found
    await refused(NotFound, "Task not found", patch(store, "alice", made["id"], detail="x"))
    await refused(NotFound, "Task not found", patch(store, "alice", "no-such-task", detail="x"))


# --- status moves ---------------------------------------------------------------------------------

async def test_a_claim_takes_an_unassigned_task_and_records_the_holder(store):
    made = await new_task(store)
    store.clock.advance(minutes=1)
    claimed = await move(store, "bob", made["id"], "in_progress")
    assert claimed == whole(made["id"], status="in_progress", assigneeUserId="bob", updatedAt=at(minutes=1))
    assert (await store.read(history, made["id"]))[0] == (
        "status_changed", "bob", {"status": "ready", "assigneeUserId": None},
        {"status": "in_progress", "assigneeUserId": "bob"}, at(minutes=1))
    assert (await store.read(logged_after))[-1] == ("swarm_task_updated", {
        "type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login", "status": "in_progress",
        "previousStatus": "ready", "actor": "bob"}, None)
    assert published(store, WAKE) == []  # one's own claim wakes nobody
    err = await refused(Conflict, "Task is already in progress under bob",
                        move(store, "carol", made["id"], "in_progress"))
    assert err.extra == {"allowed": ["holding", "review", "closed"]}
    again = await move(store, "bob", made["id"], "in_progress")
    assert again == claimed
    count = len(await store.read(logged_after))
    renewed = await move(store, "bob", made["id"], "in_progress", seconds=300)
    assert renewed == {**claimed, "leaseExpiresAt": at(minutes=6)}
    assert (await store.read(logged_after))[count:] == [("swarm_task_updated", {
        "type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login", "status": "in_progress",
        "actor": "bob"}, None)]


async def test_only_the_assignee_starts_an_assigned_task_and_a_hold_needs_a_reason(store):
    made = await new_task(store, assigneeUserId="bob")
    await refused(Forbidden, "Task is assigned to bob; only bob can start it",
                  move(store, "carol", made["id"], "in_progress"))
    for reason in (None, "  ", 5):
        await refused(Invalid, "reason is required to put a task on hold",
                      move(store, "bob", made["id"], "holding", reason=reason))
    await refused(Conflict, "Cannot move task from ready to review", move(store, "bob", made["id"], "review"))
    assert (await store.read(history, made["id"]))[0][0] == "created"
    held = await move(store, "bob", made["id"], "holding", reason="waiting on infra")
    assert held["status"] == "holding"
    assert (await store.read(history, made["id"]))[0][2:4] == (
        {"status": "ready"}, {"status": "holding", "reason": "waiting on infra"})
    started = await move(store, "bob", made["id"], "in_progress", seconds=120)
    assert started["leaseExpiresAt"] == at(minutes=2)
    assert (await store.read(history, made["id"]))[0][2:4] == (
        {"status": "holding"}, {"status": "in_progress", "leaseSeconds": 120})
    await refused(NotFound, "Task not found", move(store, "bob", "no-such-task", "ready"))


async def test_review_hands_over_and_finishing_sets_then_reopening_clears_completed_at(store):
    made = await new_task(store)
    await move(store, "bob", made["id"], "in_progress", seconds=600)
    store.clock.advance(minutes=1)
    review = await move(store, "bob", made["id"], "review", assignee="carol")
    assert review == whole(made["id"], status="review", assigneeUserId="carol", updatedAt=at(minutes=1))
    assert (await store.read(history, made["id"]))[0][2:4] == (
        {"status": "in_progress", "assigneeUserId": "bob"}, {"status": "review", "assigneeUserId": "carol"})
    assert published(store, WAKE)[-1] == {"identity": "carol"}
    await refused(Forbidden, "Task is held by carol (review); only its creator (alice), carol, the leads of its "
                  "project or an admin may reassign it",
                  move(store, "bob", made["id"], "in_progress", assignee="bob"))
    back = await move(store, "carol", made["id"], "in_progress", assignee="carol")
    assert (back["assigneeUserId"], (await store.read(history, made["id"]))[0][2:4]) == (
        "carol", ({"status": "review"}, {"status": "in_progress"}))
    await move(store, "carol", made["id"], "review")
    store.clock.advance(minutes=1)
    done = await move(store, "carol", made["id"], "complete")
    assert (done["status"], done["completedAt"], done["assigneeUserId"]) == ("complete", at(minutes=2), "carol")
    wakes = len(published(store, WAKE))
    store.clock.advance(minutes=1)
    reopened = await move(store, "alice", made["id"], "ready")
    assert (reopened["status"], reopened["completedAt"], reopened["updatedAt"]) == ("ready", None, at(minutes=3))
    assert published(store, WAKE)[wakes:] == [{"identity": "carol"}]
    closed = await move(store, "alice", made["id"], "closed", reason="duplicate")
    assert closed["completedAt"] == at(minutes=3)
    holding = await new_task(store)
    await move(store, "bob", holding["id"], "holding", reason="r")
    assert (await move(store, "bob", holding["id"], "ready"))["completedAt"] is None


async def test_a_lease_is_given_only_on_a_move_to_in_progress_with_a_holder(store):
    made = await new_task(store)
    with pytest.raises(Invalid):  # a lease's bounds are checked on a move to in_progress (test_rules_leases.py)
        await move(store, "bob", made["id"], "in_progress", seconds=5)
    assert "leaseExpiresAt" not in await move(store, "bob", made["id"], "holding", reason="r", seconds=600)
    assert "leaseExpiresAt" not in await move(store, "bob", made["id"], "closed", seconds=5)
    queued = await new_task(store, status="queued")
    assert "leaseExpiresAt" not in await move(store, "bob", queued["id"], "ready", seconds=600)
    held = await move(store, "bob", queued["id"], "in_progress", seconds=600)
    assert held["leaseExpiresAt"] == at(minutes=10)
    assert "leaseExpiresAt" not in await move(store, "bob", queued["id"], "review")


async def test_a_move_decided_on_a_stale_read_loses_and_says_why(store, monkeypatch):
    made = await new_task(store)
    real = swarm._task

    def stale_then_real(task_id, viewer, lock=False):
        task = real(task_id, viewer, lock)
        if viewer is not None and not lock:  # the move's own read: someone else claims it right after
            Task.update(status="in_progress", assignee_user_id="carol").where(Task.id == task_id).execute()
        return task
    monkeypatch.setattr(swarm, "_task", stale_then_real)
    err = await refused(Conflict, "Task was claimed by carol first", move(store, "bob", made["id"], "in_progress"))
    assert err.extra == {"allowed": ["holding", "review", "closed"]}
    other = await new_task(store, assigneeUserId="bob")
    err = await refused(Conflict, "Task changed while moving it (now in_progress); reload and retry",
                        move(store, "bob", other["id"], "holding", reason="r"))
    assert err.extra == {"allowed": ["holding", "review", "closed"]}
    third = await new_task(store)

    def stale_release(task_id, viewer, lock=False):
        task = real(task_id, viewer, lock)
        if viewer is not None and not lock:
            Task.update(status="holding").where(Task.id == task_id).execute()
        return task
    monkeypatch.setattr(swarm, "_task", stale_release)
    err = await refused(Conflict, "Task changed while moving it (now holding); reload and retry",
                        move(store, "bob", third["id"], "in_progress"))
    assert err.extra == {"allowed": ["ready", "in_progress", "closed"]}


# --- history ---------------------------------------------------------------------------------------

async def test_the_history_is_newest_first_up_to_its_limit_and_only_for_those_who_see_the_task(store):
    secret = await store.write(restricted_project, ["bob"])
    made = await new_task(store, by="bob", projectId=secret)
    store.clock.advance(minutes=1)
    await move(store, "bob", made["id"], "in_progress")
    await move(store, "bob", made["id"], "review")
    events = await store.read(swarm.list_task_events, who("bob"), made["id"], 2)
    assert [(e["kind"], e["afterState"]["status"]) for e in events] == [("status_changed", "review"),
                                                                          ("status_changed", "in_progress")]
    first = (await store.read(swarm.list_task_events, who("bob"), made["id"], 10))[-1]
    assert first == {"id": first["id"], "taskId": made["id"], "actorUserId": "bob", "kind": "created",
                     "beforeState": None, "afterState": {"status": "ready", "assigneeUserId": None,
                                                         "title": "Fix login"}, "createdAt": AT}
    await refused(NotFound, "Task not found", store.read(swarm.list_task_events, who("carol"), made["id"], 10))


async def test_changes_outside_the_task_fields_announce_an_update(store):
    made = await new_task(store)

    def announce() -> None:
        task = Task.get_by_id(made["id"])
        swarm.announce_change(task, "carol")
        swarm.announce_move(task, "server", "in_progress")
    await store.write(announce)
    assert (await store.read(logged_after))[-2:] == [
        ("swarm_task_updated", {"type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login",
                                "status": "ready", "actor": "carol"}, None),
        ("swarm_task_updated", {"type": "swarm_task_updated", "taskId": made["id"], "title": "Fix login",
                                "status": "ready", "previousStatus": "in_progress", "actor": "server"}, None)]


async def test_a_scheduled_task_wakes_even_its_creator(store):
    def scheduled() -> str:
        return swarm.insert_task("bob", {"title": "daily", "assignee_user_id": "bob"}, scheduled=True).id
    await store.write(scheduled)
    assert published(store, WAKE) == [{"identity": "bob"}]

    def done() -> str:
        return swarm.insert_task("bob", {"title": "done", "assignee_user_id": "carol", "status": "complete"}).id
    task_id = await store.write(done)
    assert published(store, WAKE) == [{"identity": "bob"}]  # a finished task is in no wake
    assert (await store.read(lambda: swarm.task_json(swarm.visible_task(task_id, who("carol")))))["completedAt"] \
        == AT


# --- notebook-page links -------------------------------------------------------------------------------

def page(title: str, created_by: str = "alice", tagged=None) -> str:
    now = to_db(START)
    return NotebookPage.create(title=title, created_by=created_by, tagged_users=tagged, created_at=now,
                               updated_at=now).id


async def test_pages_link_once_list_in_order_and_only_where_both_are_visible(store):
    made = await new_task(store)
    open_page = await store.write(page, "Open")
    private = await store.write(page, "Private", "bob", ["bob"])
    later = await store.write(page, "Later")
    await store.write(swarm.link_page, made["id"], open_page, "bob", False)
    await store.write(swarm.link_page, made["id"], open_page, "bob", False)  # once
    await store.write(swarm.link_page, made["id"], private, "bob", False)
    store.clock.advance(minutes=1)
    await store.write(swarm.link_page, made["id"], later, "carol", False)
    links = await store.read(swarm.linked_pages, made["id"], "bob", False)

    def link(page_id: str, title: str, by: str, created: str) -> dict:
        return {"taskId": made["id"], "notebookPageId": page_id, "createdAt": created, "pageTitle": title,
                "pageCreatedBy": by, "pageUpdatedAt": AT}
    both = sorted([link(open_page, "Open", "alice", AT), link(private, "Private", "bob", AT)],
                  key=lambda row: row["notebookPageId"])
    assert links == [*both, link(later, "Later", "alice", at(minutes=1))]
    assert await store.read(swarm.linked_pages, made["id"], "carol", False) == \
        [row for row in links if row["notebookPageId"] != private]
    assert await store.read(swarm.linked_pages, made["id"], "carol", True) == links
    for page_id, words, error in ((private, "Page not found", NotFound), ("nope", "Page not found", NotFound),
                                  ("", "notebookPageId required", Invalid), (5, "notebookPageId required", Invalid)):
        await refused(error, words, store.write(swarm.link_page, made["id"], page_id, "carol", False))
        await refused(error, words, store.write(swarm.unlink_page, made["id"], page_id, "carol", False))
    await store.write(swarm.unlink_page, made["id"], open_page, "carol", False)
    assert [row["notebookPageId"] for row in await store.read(swarm.linked_pages, made["id"], "admin", True)] == \
        [private, later]
    secret = await store.write(restricted_project, ["bob"])
    hidden = await new_task(store, by="bob", projectId=secret)
    for call in (swarm.link_page, swarm.unlink_page):
        await refused(NotFound, "Task not found", store.write(call, hidden["id"], open_page, "carol", False))
    await refused(NotFound, "Task not found", store.read(swarm.linked_pages, hidden["id"], "carol", False))


async def test_links_in_a_restricted_project_are_for_those_who_see_both_task_and_page(store):
    secret = await store.write(restricted_project, ["bob"])
    hidden = await new_task(store, by="bob", projectId=secret)
    open_task = await new_task(store)
    bobs = await store.write(page, "Bob's", "bob", ["bob"])
    carols_for_bob = await store.write(page, "For bob", "carol", ["bob"])

    def ids(task_id: str, identity: str, is_admin: bool = False):
        async def listed() -> list[str]:
            return [row["notebookPageId"] for row in await store.read(swarm.linked_pages, task_id, identity, is_admin)]
        return listed()
    # bob sees the task and his page; admin (neither creator nor tagged) sees everything
    await store.write(swarm.link_page, hidden["id"], bobs, "bob", False)
    assert await ids(hidden["id"], "bob") == [bobs]
    await store.write(swarm.link_page, hidden["id"], carols_for_bob, "admin", True)
    assert sorted(await ids(hidden["id"], "admin", True)) == sorted([bobs, carols_for_bob])
    await store.write(swarm.unlink_page, hidden["id"], carols_for_bob, "admin", True)
    await store.write(swarm.unlink_page, hidden["id"], bobs, "bob", False)
    assert await ids(hidden["id"], "admin", True) == []
    # carol sees the page she made, though only bob is tagged on it
    await store.write(swarm.link_page, open_task["id"], carols_for_bob, "carol", False)
    assert await ids(open_task["id"], "carol") == [carols_for_bob]
    await store.write(swarm.unlink_page, open_task["id"], carols_for_bob, "carol", False)
    assert await ids(open_task["id"], "carol") == []


# --- survivors of the whole run of 2026-11-28: the PATCH's checks and its one row --------------------------------

async def test_a_project_move_checks_the_holder_the_task_keeps(store):
    secret = await store.write(restricted_project, ["bob"])
    made = await new_task(store, assigneeUserId="carol")
    await refused(Invalid, "assigneeUserId carol cannot see this task's project",
                  patch(store, "admin", made["id"], projectId=secret))  # only the project changes: carol stays
    assert (await patch(store, "admin", made["id"], projectId=secret, assigneeUserId="bob"))["projectId"] == secret


async def test_an_admin_reassigns_and_moves_a_task_held_by_someone_else(store):
    secret = await store.write(restricted_project, ["bob"])
    made = await new_task(store, assigneeUserId="bob")
    assert (await patch(store, "admin", made["id"], projectId=secret))["projectId"] == secret
    assert (await patch(store, "admin", made["id"], assigneeUserId="carol", projectId=None))[
        "assigneeUserId"] == "carol"


async def test_a_task_named_as_another_must_be_one_the_caller_sees(store):
    secret = await store.write(restricted_project, ["bob"])
    hidden = await new_task(store, "bob", projectId=secret)
    mine = await new_task(store)
    await refused(Invalid, f"Unknown task for mustBeDoneAfterTaskId: {hidden['id']}",
                  patch(store, "carol", mine["id"], mustBeDoneAfterTaskId=hidden["id"]))
    assert (await patch(store, "bob", mine["id"], mustBeDoneAfterTaskId=hidden["id"]))[
        "mustBeDoneAfterTaskId"] == hidden["id"]  # a member sees it
    assert (await patch(store, "admin", mine["id"], nextTaskId=hidden["id"]))["nextTaskId"] == hidden["id"]


async def test_a_patch_changes_its_own_task_only_and_keeps_the_holders_lease(store):
    held = await new_task(store, status="in_progress", assigneeUserId="bob", leaseSeconds=600)
    other = await new_task(store, title="Other", assigneeUserId="carol")
    store.clock.advance(minutes=1)
    changed = await patch(store, "bob", held["id"], detail="halfway")
    assert changed == whole(held["id"], status="in_progress", assigneeUserId="bob", detail="halfway",
                            leaseExpiresAt=at(minutes=10), updatedAt=at(minutes=1))
    assert await store.read(lambda: swarm.task_json(swarm.visible_task(other["id"], who("admin")))) == other


async def test_taking_a_task_oneself_wakes_no_one(store):
    made = await new_task(store)
    store.published.clear()
    await patch(store, "bob", made["id"], assigneeUserId="bob")
    assert published(store, WAKE) == []
    await patch(store, "bob", made["id"], assigneeUserId="carol")
    assert published(store, WAKE) == [{"identity": "carol"}]


async def test_each_task_lists_its_own_pages(store):
    first, second = await new_task(store), await new_task(store, title="Second")
    pages = [await store.write(page, title) for title in ("One", "Two")]
    await store.write(swarm.link_page, first["id"], pages[0], "bob", False)
    await store.write(swarm.link_page, second["id"], pages[1], "bob", False)
    for task, linked in ((first, pages[0]), (second, pages[1])):
        assert [row["notebookPageId"] for row in await store.read(swarm.linked_pages, task["id"], "bob", False)] == [
            linked]


async def test_a_patch_waits_for_the_holder_another_process_is_changing(two_stores):
    """update_task locks the task's row before it checks who holds it: bob taking the task back, decided while his
    hand-over to carol was not yet committed, must see carol as the holder and be refused (not overwrite her)."""
    here, there = two_stores
    made = await here.write(swarm.create_task, who("alice"), {"title": "Fix login", "assigneeUserId": "bob"}, KNOWN)

    async def move_after_handover() -> None:
        with pytest.raises(Forbidden) as caught:
            await there.write(swarm.update_task, who("bob"), made["id"], {"assigneeUserId": "bob"}, KNOWN)
        assert str(caught.value) == ("Task is held by carol (ready); only its creator (alice), carol, the leads "
                                     "of its project or an admin may reassign it")
    await while_held(here, lambda: swarm.update_task(who("bob"), made["id"], {"assigneeUserId": "carol"}, KNOWN),
                     move_after_handover)
    assert (await here.read(lambda: swarm.visible_task(made["id"], who("admin")))).assignee_user_id == "carol"


async def test_a_renewal_waits_for_the_holder_another_process_is_changing(two_stores):
    here, there = two_stores
    made = await here.write(swarm.create_task, who("alice"), {"title": "Fix login", "assigneeUserId": "bob",
                                                              "status": "in_progress", "leaseSeconds": 600}, KNOWN)

    async def renew_after_handover() -> None:
        with pytest.raises(Forbidden) as caught:
            await there.write(lease_changes.renew, who("bob"), made["id"], None)
        assert str(caught.value) == "Only the task's holder (carol) may renew its lease"
    await while_held(here, lambda: swarm.update_task(who("bob"), made["id"], {"assigneeUserId": "carol"}, KNOWN),
                     renew_after_handover)


async def test_a_hand_over_by_move_is_for_those_the_rule_names_to_one_who_sees_the_project(store):
    secret = await store.write(restricted_project, ["bob", "carol"])
    made = await new_task(store, "bob", projectId=secret, status="in_progress", assigneeUserId="bob")
    await refused(Invalid, "assigneeUserId dave cannot see this task's project",
                  move(store, "bob", made["id"], "review", assignee="dave"))
    handed = await move(store, "admin", made["id"], "review", assignee="carol")  # an admin, neither holder nor lead
    assert (handed["status"], handed["assigneeUserId"]) == ("review", "carol")


async def test_a_move_the_table_refuses_says_where_the_task_may_go(store):
    made = await new_task(store)
    conflict = await refused(Conflict, "Cannot move task from ready to review", move(store, "alice", made["id"], "review"))
    assert conflict.body() == {"error": "Cannot move task from ready to review",
                               "allowed": ["in_progress", "holding", "closed"]}


async def test_a_task_and_its_history_are_its_own_and_for_those_who_see_it(store):
    secret = await store.write(restricted_project, ["bob"])
    hidden = await new_task(store, "bob", projectId=secret)
    await refused(NotFound, "Task not found", store.read(swarm.visible_task, hidden["id"], who("carol")))
    assert (await store.read(swarm.visible_task, hidden["id"], who("bob"))).id == hidden["id"]
    other = await new_task(store, title="Other")
    await patch(store, "alice", other["id"], detail="changed")
    assert [kind for kind, *_ in await store.read(history, hidden["id"])] == ["created"]


async def test_a_page_id_of_one_character_is_a_page_id(store):
    made = await new_task(store, linkedNotebookPages=["p"])
    assert made["linkedNotebookPages"] == ["p"]


async def test_a_task_made_by_a_template_says_which_instant_it_is_for(store):
    instant = START + timedelta(days=1)
    made = await store.write(lambda: swarm.task_json(swarm.insert_task("alice", {
        "title": "Daily", "recurring_instance_at": to_db(instant)}, scheduled=True)))
    assert made["recurringInstanceAt"] == iso(instant)
