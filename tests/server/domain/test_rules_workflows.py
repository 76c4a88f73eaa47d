"""Workflow rules without HTTP: only the creator or an admin changes one, fields keep their limits, and
attaching or detaching names the missing task or workflow."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import projects, swarm, workflows
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.events import log as event_log
from coordserver.timeutil import iso
from tests.server.domain.conftest import KNOWN, START, who

MISSING = "00000000-0000-4000-8000-000000000000"


def create(store, viewer: str, **body):
    return store.write(workflows.create_workflow, who(viewer), body, KNOWN, frozenset({"admin"}))


def update(store, viewer: str, workflow_id: str, **body):
    return store.write(workflows.update_workflow, who(viewer), workflow_id, body, KNOWN, frozenset({"admin"}))


async def test_only_the_creator_or_an_admin_changes_a_workflow(rules_store):
    made = await create(rules_store, "alice", title="Release")
    with pytest.raises(Forbidden, match="Only the workflow's creator or an admin"):
        await update(rules_store, "bob", made["id"], title="bob's")
    with pytest.raises(Forbidden):
        await rules_store.write(workflows.delete_workflow, who("bob"), made["id"], frozenset({"admin"}))
    assert (await update(rules_store, "admin", made["id"], enabled=False))["enabled"] is False
    assert (await update(rules_store, "alice", made["id"], title="  Release 2 "))["title"] == "Release 2"
    assert (await rules_store.read(workflows.get_workflow, who("bob"), made["id"]))["title"] == "Release 2"


async def test_a_tagged_workflow_is_hidden_from_the_untagged(rules_store):
    private = await create(rules_store, "alice", title="Private", taggedUsers=["bob"])
    with pytest.raises(NotFound):
        await update(rules_store, "carol", private["id"], title="carol's")
    assert [w["id"] for w in await rules_store.read(workflows.list_workflows, who("carol"), True)] == []


@pytest.mark.parametrize("body, message", [
    ({"title": "  "}, "title is required"),
    ({"title": "x" * 256}, "title is longer than 255 characters"),
    ({"title": "x", "documentUrl": "ftp://files.example"}, "documentUrl must be an http or https URL of at most 500"),
    ({"title": "x", "enabled": "yes"}, "enabled must be true or false"),
    ({"title": "x", "taggedUsers": ["nobody"]}, "Unknown identity for taggedUsers: nobody"),
    ({"title": "x", "reviewAt": "soon"}, "reviewAt must be an ISO-8601 timestamp"),
    ({"documentUrl": "https://docs.example"}, "title is required"),
])
async def test_bad_fields_are_refused_and_nothing_is_stored(rules_store, body, message):
    with pytest.raises(Invalid) as refused:
        await rules_store.write(workflows.create_workflow, who("alice"), body, KNOWN, frozenset())
    assert refused.value.message.startswith(message)
    assert await rules_store.read(workflows.list_workflows, who("admin"), True) == []


async def test_attach_and_detach_name_what_is_missing(rules_store):
    flow = await create(rules_store, "alice", title="Release")
    task = await rules_store.write(swarm.create_task, who("alice"), {"title": "Ship"}, KNOWN)
    with pytest.raises(NotFound, match="Task not found"):
        await rules_store.write(workflows.attach, who("alice"), MISSING, flow["id"])
    with pytest.raises(NotFound, match="Workflow not found"):
        await rules_store.write(workflows.attach, who("alice"), task["id"], MISSING)
    with pytest.raises(Invalid, match="workflowId required"):
        await rules_store.write(workflows.attach, who("alice"), task["id"], 5)
    first = await rules_store.write(workflows.attach, who("alice"), task["id"], flow["id"])
    assert await rules_store.write(workflows.attach, who("bob"), task["id"], flow["id"]) == first  # harmless twice
    with pytest.raises(NotFound, match="Task not found"):
        await rules_store.write(workflows.detach, who("alice"), MISSING, flow["id"])
    await rules_store.write(workflows.detach, who("alice"), task["id"], flow["id"])
    assert await rules_store.read(workflows.task_workflows, who("alice"), task["id"]) == []
    # a task in a project the caller does not see is missing to it
    project = await rules_store.write(projects.create_project, who("alice"), {"title": "Secret", "color": "#000000",
                                                                              "taggedUsers": ["bob"]}, KNOWN)
    hidden = await rules_store.write(swarm.create_task, who("alice"), {"title": "Ship", "projectId": project["id"]},
                                     KNOWN)
    await rules_store.write(workflows.attach, who("bob"), hidden["id"], flow["id"])
    for call, args in ((workflows.task_workflows, ()), (workflows.attach, (flow["id"],)),
                       (workflows.detach, (flow["id"],))):
        with pytest.raises(NotFound) as refused:
            await rules_store.write(call, who("carol"), hidden["id"], *args)
        assert refused.value.message == "Task not found"
    assert [w["id"] for w in await rules_store.read(workflows.task_workflows, who("bob"), hidden["id"])] == [
        flow["id"]]


# --- each rule as a caller sees it, whole (mutation testing, issue 35) -------------------------------------------

ADMINS = frozenset({"admin"})


def logged() -> list[tuple]:
    return [(row[1], row[2], row[3], sorted(row[4] or [])) for row in event_log.range_after(0)]


def shape(made: dict, **fields) -> dict:
    return {"id": made["id"], "title": "Release", "description": None, "documentUrl": None, "document": None,
            "enabled": True, "taggedUsers": None, "expiresAt": None, "reviewAt": None, "createdBy": "alice",
            "updatedAt": iso(START), "createdAt": iso(START), **fields}


async def test_a_new_workflow_reads_whole_and_is_logged_to_who_can_see_it(rules_store):
    store = rules_store
    plain = await create(store, "alice", title="  Release ")
    assert plain == shape(plain)
    expires, review = START + timedelta(days=30), START + timedelta(days=7)
    full = await create(store, "bob", title="Deploy", description="d" * workflows.TEXT_MAX,
                        documentUrl="https://docs.example/deploy", document={"steps": ["a", "b"]}, enabled=False,
                        taggedUsers=["carol"], expiresAt=iso(expires), reviewAt=iso(review))
    assert full == shape(full, title="Deploy", description="d" * workflows.TEXT_MAX,
                         documentUrl="https://docs.example/deploy", document={"steps": ["a", "b"]}, enabled=False,
                         taggedUsers=["carol"], expiresAt=iso(expires), reviewAt=iso(review), createdBy="bob")
    assert await store.read(workflows.get_workflow, who("carol"), full["id"]) == full
    nulls = await create(store, "alice", title="x" * 255, description=None, documentUrl=None, expiresAt=None)
    assert (nulls["title"], nulls["description"], nulls["documentUrl"], nulls["expiresAt"]) == ("x" * 255, None,
                                                                                               None, None)
    event = {"type": "workflow_updated", "action": "created"}
    assert await store.read(logged) == [
        ("workflow_updated", {**event, "workflowId": plain["id"]}, True, []),
        ("workflow_updated", {**event, "workflowId": full["id"]}, False, ["admin", "bob", "carol"]),
        ("workflow_updated", {**event, "workflowId": nulls["id"]}, True, [])]


@pytest.mark.parametrize("body, message", [
    ({}, "title is required"), ({"title": None}, "title is required"), ({"title": 5}, "title is required"),
    ({"title": " " + "x" * 256}, "title is longer than 255 characters"),
    ({"title": "x", "description": 5}, "description must be a string"),
    ({"title": "x", "description": "d" * 20_001}, "description is longer than 20000 characters"),
    ({"title": "x", "expiresAt": "later"}, "expiresAt must be an ISO-8601 timestamp")])
async def test_a_new_workflow_refuses_in_words(rules_store, body, message):
    with pytest.raises(Invalid) as refused:
        await rules_store.write(workflows.create_workflow, who("alice"), body, KNOWN, ADMINS)
    assert refused.value.message == message
    assert await rules_store.read(workflows.list_workflows, who("admin"), True) == []
    assert await rules_store.read(logged) == []


async def test_the_list_is_by_title_then_age_and_hides_disabled_and_unseen_workflows(rules_store):
    store = rules_store
    b = await create(store, "alice", title="B")
    a_new = await create(store, "alice", title="A")
    store.clock.advance(minutes=-1)
    a_old = await create(store, "bob", title="A")
    off = await create(store, "alice", title="C", enabled=False)
    tagged = await create(store, "alice", title="D", taggedUsers=["bob"])

    async def ids(viewer: str, disabled: bool) -> list[str]:
        return [w["id"] for w in await store.read(workflows.list_workflows, who(viewer), disabled)]
    assert await ids("carol", False) == [a_old["id"], a_new["id"], b["id"]]
    assert await ids("carol", True) == [a_old["id"], a_new["id"], b["id"], off["id"]]
    assert await ids("bob", False) == [a_old["id"], a_new["id"], b["id"], tagged["id"]]
    assert await ids("admin", True) == [a_old["id"], a_new["id"], b["id"], off["id"], tagged["id"]]
    assert await ids("alice", False) == [a_old["id"], a_new["id"], b["id"], tagged["id"]]  # its own, tagged
    assert (await store.read(workflows.list_workflows, who("alice"), False))[0] == a_old


async def test_a_workflow_not_seen_reads_as_not_found(rules_store):
    store = rules_store
    tagged = await create(store, "alice", title="Private", taggedUsers=["bob"])
    for viewer, workflow_id in (("carol", tagged["id"]), ("alice", MISSING), ("alice", 5), ("alice", None)):
        with pytest.raises(NotFound) as refused:
            await store.read(workflows.get_workflow, who(viewer), workflow_id)
        assert refused.value.message == "Not found"
    assert (await store.read(workflows.get_workflow, who("admin"), tagged["id"]))["id"] == tagged["id"]
    assert (await store.read(workflows.get_workflow, who("bob"), tagged["id"]))["id"] == tagged["id"]


async def test_a_change_is_stamped_and_logged_to_who_saw_or_sees_it(rules_store):
    store = rules_store
    made = await create(store, "alice", title="Release", taggedUsers=["bob"])
    store.clock.advance(minutes=1)
    same = await update(store, "alice", made["id"])  # nothing to change: nothing written or logged
    assert same == made
    other = await create(store, "alice", title="Other")
    moved = await update(store, "alice", made["id"], taggedUsers=["carol"], description="now")
    assert await store.read(workflows.get_workflow, who("alice"), other["id"]) == other  # the one named only
    assert moved == {**made, "taggedUsers": ["carol"], "description": "now",
                     "updatedAt": iso(START + timedelta(minutes=1))}
    store.clock.advance(minutes=1)
    opened = await update(store, "admin", made["id"], taggedUsers=None)
    assert (opened["taggedUsers"], opened["updatedAt"]) == (None, iso(START + timedelta(minutes=2)))
    closed = await update(store, "alice", made["id"], taggedUsers=["bob"])
    assert closed["taggedUsers"] == ["bob"]
    event = {"type": "workflow_updated", "workflowId": made["id"]}
    assert await store.read(logged) == [
        ("workflow_updated", {**event, "action": "created"}, False, ["admin", "alice", "bob"]),
        ("workflow_updated", {"type": "workflow_updated", "workflowId": other["id"], "action": "created"}, True, []),
        ("workflow_updated", {**event, "action": "updated"}, False, ["admin", "alice", "bob", "carol"]),
        ("workflow_updated", {**event, "action": "updated"}, True, []),  # was tagged, now seen by everyone
        ("workflow_updated", {**event, "action": "updated"}, True, [])]  # was seen by everyone


async def test_a_change_refuses_bad_fields_before_asking_who_changes(rules_store):
    store = rules_store
    made = await create(store, "alice", title="Release")
    with pytest.raises(Invalid) as refused:
        await update(store, "bob", made["id"], title=" ")
    assert refused.value.message == "title is required"
    with pytest.raises(Forbidden) as refused:
        await update(store, "bob", made["id"], title="Mine")
    assert refused.value.message == "Only the workflow's creator or an admin may change or delete it"
    with pytest.raises(NotFound) as refused:
        await update(store, "alice", MISSING, title="Mine")
    assert refused.value.message == "Not found"
    assert await store.read(workflows.get_workflow, who("alice"), made["id"]) == made


async def test_deleting_detaches_it_and_tells_the_tasks_watchers(rules_store):
    store = rules_store
    made = await create(store, "alice", title="Release", taggedUsers=["bob"])
    kept = await create(store, "alice", title="Kept")
    task = await store.write(swarm.create_task, who("alice"), {"title": "Ship"}, KNOWN)
    other = await store.write(swarm.create_task, who("alice"), {"title": "Other"}, KNOWN)
    await store.write(workflows.attach, who("alice"), task["id"], made["id"])
    await store.write(workflows.attach, who("alice"), task["id"], kept["id"])
    await store.write(workflows.attach, who("alice"), other["id"], kept["id"])  # not told: made was not on it
    before = len(await store.read(logged))
    assert await store.write(workflows.delete_workflow, who("admin"), made["id"], ADMINS) is None
    with pytest.raises(NotFound):
        await store.read(workflows.get_workflow, who("admin"), made["id"])
    assert [w["id"] for w in await store.read(workflows.task_workflows, who("alice"), task["id"])] == [kept["id"]]
    update_event = {"type": "swarm_task_updated", "taskId": task["id"], "title": "Ship", "status": task["status"],
                    "actor": "admin"}
    assert (await store.read(logged))[before:] == [
        ("workflow_updated", {"type": "workflow_updated", "workflowId": made["id"], "action": "deleted"}, False,
         ["admin", "alice", "bob"]),
        ("swarm_task_updated", update_event, True, [])]
    await store.write(workflows.delete_workflow, who("alice"), kept["id"], ADMINS)
    assert await store.read(workflows.task_workflows, who("alice"), task["id"]) == []
    told = sorted((e[1]["taskId"], e[1]["title"], e[1]["actor"]) for e in (await store.read(logged))[-2:])
    assert told == sorted([(task["id"], "Ship", "alice"), (other["id"], "Other", "alice")])  # each once


async def test_attaching_is_logged_once_and_lists_by_title_what_the_viewer_sees(rules_store):
    store = rules_store
    zed = await create(store, "alice", title="Zed")
    alpha = await create(store, "alice", title="Alpha", taggedUsers=["bob"])
    task = await store.write(swarm.create_task, who("alice"), {"title": "Ship"}, KNOWN)
    before = len(await store.read(logged))
    store.clock.advance(minutes=1)
    first = await store.write(workflows.attach, who("alice"), task["id"], zed["id"])
    assert first == {"taskId": task["id"], "workflowId": zed["id"], "attachedBy": "alice",
                     "attachedAt": iso(START + timedelta(minutes=1))}
    store.clock.advance(minutes=1)
    assert await store.write(workflows.attach, who("bob"), task["id"], zed["id"]) == first
    second = await store.write(workflows.attach, who("bob"), task["id"], alpha["id"])
    assert second == {"taskId": task["id"], "workflowId": alpha["id"], "attachedBy": "bob",
                      "attachedAt": iso(START + timedelta(minutes=2))}
    for bad in (" ", "", None):
        with pytest.raises(Invalid) as refused:
            await store.write(workflows.attach, who("alice"), task["id"], bad)
        assert refused.value.message == "workflowId required"
    with pytest.raises(NotFound) as refused:
        await store.write(workflows.attach, who("carol"), task["id"], alpha["id"])  # not seen by carol
    assert refused.value.message == "Workflow not found"
    assert [w["id"] for w in await store.read(workflows.task_workflows, who("alice"), task["id"])] == [
        alpha["id"], zed["id"]]
    assert [w for w in await store.read(workflows.task_workflows, who("carol"), task["id"])] == [
        await store.read(workflows.get_workflow, who("carol"), zed["id"])]
    assert [w["id"] for w in await store.read(workflows.task_workflows, who("admin"), task["id"])] == [
        alpha["id"], zed["id"]]
    changed = ("swarm_task_updated", {"type": "swarm_task_updated", "taskId": task["id"], "title": "Ship",
                                      "status": task["status"], "actor": "alice"}, True, [])
    assert (await store.read(logged))[before:] == [changed, (*changed[:1], {**changed[1], "actor": "bob"},
                                                             *changed[2:])]
    by_bob = (*changed[:1], {**changed[1], "actor": "bob"}, *changed[2:])
    await store.write(workflows.detach, who("alice"), task["id"], MISSING)  # nothing attached: nothing logged
    assert (await store.read(logged))[before:] == [changed, by_bob]
    await store.write(workflows.detach, who("bob"), task["id"], zed["id"])
    assert (await store.read(logged))[before:] == [changed, by_bob, by_bob]
    assert [w["id"] for w in await store.read(workflows.task_workflows, who("alice"), task["id"])] == [alpha["id"]]


async def test_a_tasks_workflows_of_one_title_are_listed_by_id(rules_store):
    store = rules_store
    task = await store.write(swarm.create_task, who("alice"), {"title": "Ship"}, KNOWN)
    made = [await create(store, "alice", title="Same") for _ in range(6)]
    for flow in made:
        await store.write(workflows.attach, who("alice"), task["id"], flow["id"])
    elsewhere = await store.write(swarm.create_task, who("alice"), {"title": "Other"}, KNOWN)
    another = await create(store, "alice", title="Another")
    await store.write(workflows.attach, who("alice"), elsewhere["id"], another["id"])
    listed = [w["id"] for w in await store.read(workflows.task_workflows, who("bob"), task["id"])]
    assert listed == sorted(w["id"] for w in made)  # the task's own only
    assert [w["id"] for w in await store.read(workflows.list_workflows, who("bob"), False)] == [another["id"],
                                                                                                *listed]


async def test_the_list_orders_one_title_by_creation_time(rules_store):
    store = rules_store
    made = []
    for _ in range(6):
        made.append(await create(store, "alice", title="Same"))
        store.clock.advance(minutes=-1)  # each made before the one before it
    listed = [w["id"] for w in await store.read(workflows.list_workflows, who("bob"), False)]
    assert listed == [w["id"] for w in reversed(made)]
