"""Who may take a task out of its holder's hands, over real HTTP, on every route that sets an assignee.

The rule (coordserver/domain/task_rules.py): a task someone holds may be reassigned only by its creator,
the holder, a lead of its project or an admin; others get 403 and nothing changes. An unassigned task
may be assigned (or claimed) by anyone; creating a task with an assignee is always allowed.
"""
from __future__ import annotations

import httpx
import pytest

from coordserver.domain.swarm import STATUSES
from coordserver.settings import Settings
from tests.helpers import TOKENS, backend_url, base_env, start_server

EXTRA = {"dave": "dave-token-0000000000000000", "erin": "erin-token-0000000000000000"}
ALL_TOKENS = {**TOKENS, **EXTRA}
# alice creates the tasks, bob holds them, carol leads the project, dave is anyone else, erin is the new assignee.
ROLES = {"creator": "alice", "holder": "bob", "lead": "carol", "admin": "admin", "other": "dave"}
PERMITTED = {"creator", "holder", "lead", "admin"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    env = base_env(backend_url(request, tmp_path_factory), SERVICE_TOKEN_DAVE=EXTRA["dave"], SERVICE_TOKEN_ERIN=EXTRA["erin"])
    server = start_server(Settings.from_env(env, scheduler_interval_seconds=3600))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def http(srv):
    clients = {who: httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
               for who, token in ALL_TOKENS.items()}
    yield clients
    for c in clients.values():
        c.close()


@pytest.fixture(scope="module")
def project(http) -> str:
    response = http["carol"].post("/api/swarm/projects", json={"title": "Rules", "color": "#123456"})
    assert response.status_code == 200, response.text
    return response.json()["id"]


def make_task(http, project: str, status: str, holder: str | None) -> dict:
    response = http["alice"].post("/api/swarm/tasks", json={
        "title": f"{status} held by {holder}", "projectId": project, "status": status, "assigneeUserId": holder})
    assert response.status_code == 200, response.text
    return response.json()


def fetch(http, task_id: str) -> dict:
    tasks = http["alice"].get("/api/swarm/tasks", params={"includeCompleted": "true"}).json()["tasks"]
    return next(t for t in tasks if t["id"] == task_id)


def expected(role: str, holder: str | None) -> int:
    return 200 if holder is None or role in PERMITTED else 403


def check_refusal(http, task: dict, response) -> None:
    """A 403 says what was wrong and leaves the task and its history as they were."""
    assert "held by bob" in response.json()["error"]
    after = fetch(http, task["id"])
    assert after["assigneeUserId"] == task["assigneeUserId"] and after["status"] == task["status"]
    assert [e["kind"] for e in http["alice"].get(f"/api/swarm/tasks/{task['id']}/events").json()["events"]] == [
        "created"]


def test_field_patch_follows_the_rule_in_every_status(http, project):
    table, seen = {}, {}
    for role, actor in ROLES.items():
        for status in STATUSES:
            for holder in (None, "bob"):
                task = make_task(http, project, status, holder)
                response = http[actor].patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "erin"})
                table[(role, status, holder)] = expected(role, holder)
                seen[(role, status, holder)] = response.status_code
                if response.status_code == 403:
                    check_refusal(http, task, response)
                elif response.status_code == 200:
                    assert response.json()["assigneeUserId"] == "erin"
    assert seen == table


@pytest.mark.parametrize("source,target", [("in_progress", "review"), ("review", "in_progress")])
def test_reassigning_moves_follow_the_rule(http, project, source, target):
    table, seen = {}, {}
    for role, actor in ROLES.items():
        for holder in (None, "bob"):
            task = make_task(http, project, source, holder)
            response = http[actor].patch(f"/api/swarm/tasks/{task['id']}/status",
                                         json={"status": target, "assigneeUserId": "erin"})
            table[(role, source, holder)] = expected(role, holder)
            seen[(role, source, holder)] = response.status_code
            if response.status_code == 403:
                check_refusal(http, task, response)
            elif response.status_code == 200:
                assert response.json()["assigneeUserId"] == "erin" and response.json()["status"] == target
            # The move without a hand-over stays open to anyone.
            if response.status_code == 403:
                plain = http[actor].patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": target})
                assert plain.status_code == 200 and plain.json()["assigneeUserId"] == "bob"
    assert seen == table


def test_claim_and_create_with_an_assignee(http, project):
    for role, actor in ROLES.items():
        free = make_task(http, project, "ready", None)
        claimed = http[actor].patch(f"/api/swarm/tasks/{free['id']}/status", json={"status": "in_progress"})
        assert claimed.status_code == 200 and claimed.json()["assigneeUserId"] == actor, role
        held = make_task(http, project, "ready", "bob")
        start = http[actor].patch(f"/api/swarm/tasks/{held['id']}/status", json={"status": "in_progress"})
        assert start.status_code == (200 if role == "holder" else 403), role
        created = http[actor].post("/api/swarm/tasks", json={"title": "new", "projectId": project,
                                                             "status": "in_progress", "assigneeUserId": "bob"})
        assert created.status_code == 200 and created.json()["assigneeUserId"] == "bob", role


def test_the_reported_walk_around_is_closed(http, project):
    """Alice may not start bob's task; taking it with a field PATCH first no longer works either."""
    task = make_task(http, None, "ready", "bob")
    dave = http["dave"]
    assert dave.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}).status_code == 403
    taken = dave.patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "dave"})
    assert taken.status_code == 403 and taken.json()["error"] == (
        "Task is held by bob (ready); only its creator (alice), bob, the leads of its project or an admin "
        "may reassign it")
    assert dave.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"}).status_code == 403
    # Nor via hold, reassign, resume on a task bob has started.
    ok = http["bob"].patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "in_progress"})
    assert ok.status_code == 200
    held = dave.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "holding", "reason": "mine now"})
    assert held.status_code == 200
    assert dave.patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "dave"}).status_code == 403
    assert fetch(http, task["id"])["assigneeUserId"] == "bob"


def test_leads_cannot_be_borrowed(http, project):
    """Leads may reassign, so becoming one, or moving the task into one's own project, is the same decision."""
    task = make_task(http, project, "in_progress", "bob")
    dave = http["dave"]
    own = dave.post("/api/swarm/projects", json={"title": "Dave's", "color": "#654321"}).json()
    moved = dave.patch(f"/api/swarm/tasks/{task['id']}", json={"projectId": own["id"]})
    assert moved.status_code == 403 and "another project" in moved.json()["error"]
    promoted = dave.patch(f"/api/swarm/projects/{project}", json={"projectLeadUserId": "dave"})
    assert promoted.status_code == 403 and "leads" in promoted.json()["error"]
    projects = http["alice"].get("/api/swarm/projects").json()["projects"]
    assert [p["projectLeadUserId"] for p in projects if p["id"] == project] == ["carol"]
    assert dave.patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "dave"}).status_code == 403
    # Other project fields stay open to anyone; a lead may hand the lead on.
    assert dave.patch(f"/api/swarm/projects/{project}", json={"description": "x"}).status_code == 200
    assert http["carol"].patch(f"/api/swarm/projects/{project}",
                               json={"developerLeadUserId": "erin"}).json()["developerLeadUserId"] == "erin"
    refused = dave.patch(f"/api/swarm/projects/{project}", json={"projectLeadUserId": "dave"})
    assert (refused.status_code, refused.json()) == (
        403, {"error": "Only the project's leads (carol, erin) or an admin may change its leads"})
    assert http["admin"].patch(f"/api/swarm/projects/{project}",
                               json={"developerLeadUserId": "carol"}).status_code == 200
