"""Workflow rules without HTTP: only the creator or an admin changes one, fields keep their limits, and
attaching or detaching names the missing task or workflow."""
from __future__ import annotations

import pytest

from coordserver.domain import swarm, workflows
from coordserver.errors import Forbidden, Invalid, NotFound
from tests.server.domain.conftest import KNOWN, who

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
