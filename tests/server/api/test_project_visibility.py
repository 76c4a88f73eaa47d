"""API.md §18 project visibility over real HTTP on SQLite and PostgreSQL: to an outsider a restricted
project and its tasks do not exist on any route, in wake, in presence counts or on the event stream."""
from __future__ import annotations

import uuid

import httpx
import pytest

from coordserver.server import ServerThread
from tests.helpers import async_client, backend_server, client, eventually, ok
from tests.sse_helpers import open_stream


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, scheduler_interval_seconds=3600) as server:
        yield server


def register(srv: ServerThread, prefix: str) -> tuple[str, httpx.Client]:
    """A fresh identity with a database token, so counts about it depend on this test alone."""
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    admin = client(srv, "admin")
    code = ok(admin.post("/api/auth/invites", json={}))["invite"]["code"]
    token = ok(admin.post("/api/auth/register", json={"code": code, "identity": name}))["token"]
    return name, client(srv, token=token)


def restricted(owner: httpx.Client, tagged: list[str], **fields) -> dict:
    return ok(owner.post("/api/swarm/projects", json={"title": f"secret-{uuid.uuid4().hex[:6]}", "color": "#aa0000",
                                                        "taggedUsers": tagged, **fields}))


def test_tagged_users_shape_and_validation(srv):
    alice = client(srv, "alice")
    opened = ok(alice.post("/api/swarm/projects", json={"title": "open", "color": "#000000", "taggedUsers": []}))
    assert opened["taggedUsers"] is None and opened["createdBy"] == "alice"
    closed = restricted(alice, ["carol", "bob", "bob"])
    assert closed["taggedUsers"] == ["bob", "carol"]
    unknown = alice.post("/api/swarm/projects", json={"title": "x", "color": "#000000", "taggedUsers": ["nobody"]})
    assert unknown.status_code == 400 and "nobody" in unknown.json()["error"]
    for bad in ("bob", [1], {"a": 1}):
        assert alice.patch(f"/api/swarm/projects/{opened['id']}", json={"taggedUsers": bad}).status_code == 400
    assert ok(alice.patch(f"/api/swarm/projects/{closed['id']}", json={"taggedUsers": []}))["taggedUsers"] is None


def test_only_creator_leads_and_admins_change_tagged_users(srv):
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    lead_name, lead = register(srv, "lead")
    project = restricted(alice, ["bob"], developerLeadUserId=lead_name)
    path = f"/api/swarm/projects/{project['id']}"
    refused = bob.patch(path, json={"taggedUsers": ["bob", "carol"]})  # tagged, but neither creator nor lead
    assert refused.status_code == 403 and "taggedUsers" in refused.json()["error"]
    assert ok(bob.patch(path, json={"description": "tagged users may edit other fields"}))["description"]
    assert carol.patch(path, json={"taggedUsers": ["carol"]}).status_code == 404  # cannot see it
    assert ok(bob.patch(path, json={"taggedUsers": ["bob"]}))["taggedUsers"] == ["bob"]  # unchanged: no refusal
    assert ok(lead.patch(path, json={"taggedUsers": ["bob", "carol"]}))["taggedUsers"] == ["bob", "carol"]
    assert ok(client(srv, "admin").patch(path, json={"taggedUsers": ["bob"]}))["taggedUsers"] == ["bob"]
    assert ok(alice.patch(path, json={"taggedUsers": None}))["taggedUsers"] is None
    assert project["id"] in {p["id"] for p in ok(carol.get("/api/swarm/projects"))["projects"]}  # open again


def test_outsider_finds_nothing_on_any_route(srv):
    alice, carol, admin = client(srv, "alice"), client(srv, "carol"), client(srv, "admin")
    tagged_name, tagged = register(srv, "tag")
    project = restricted(alice, [tagged_name])
    pid = project["id"]
    task = ok(alice.post("/api/swarm/tasks", json={"title": "hidden", "projectId": pid, "assigneeUserId": tagged_name}))
    tid = task["id"]
    page = ok(alice.post("/api/notebook", json={"title": "open page"}))["page"]["id"]
    workflow = ok(alice.post("/api/swarm/workflows", json={"title": "open workflow"}))["id"]
    ok(alice.post(f"/api/swarm/tasks/{tid}/workflows", json={"workflowId": workflow}))

    for insider in (alice, tagged, admin):  # creator, tagged identity, admin
        assert pid in {p["id"] for p in ok(insider.get("/api/swarm/projects"))["projects"]}
        assert [t["id"] for t in ok(insider.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"]] == [tid]
        assert ok(insider.get(f"/api/swarm/tasks/{tid}/events"))["events"]

    # lists: absent, and ?projectId=<hidden> is an empty 200
    for query in ("", "?includeArchived=true"):
        assert pid not in {p["id"] for p in ok(carol.get(f"/api/swarm/projects{query}"))["projects"]}
    for query in ("", f"?projectId={pid}", f"?assignee={tagged_name}", "?includeCompleted=true",
                  "?statuses=ready", "?status=ready"):
        assert tid not in {t["id"] for t in ok(carol.get(f"/api/swarm/tasks{query}"))["tasks"]}, query
    assert ok(carol.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"] == []
    # every project and task route: 404
    for method, path, body in [
        ("PATCH", f"/api/swarm/projects/{pid}", {"title": "mine now"}),
        ("POST", f"/api/swarm/projects/{pid}/archive", None),
        ("PATCH", f"/api/swarm/tasks/{tid}", {"title": "mine now"}),
        ("PATCH", f"/api/swarm/tasks/{tid}/status", {"status": "closed"}),
        ("GET", f"/api/swarm/tasks/{tid}/events", None),
        ("GET", f"/api/swarm/tasks/{tid}/notebook-pages", None),
        ("POST", f"/api/swarm/tasks/{tid}/notebook-pages", {"notebookPageId": page}),
        ("DELETE", f"/api/swarm/tasks/{tid}/notebook-pages", {"notebookPageId": page}),
        ("GET", f"/api/swarm/tasks/{tid}/workflows", None),
        ("POST", f"/api/swarm/tasks/{tid}/workflows", {"workflowId": workflow}),
        ("DELETE", f"/api/swarm/tasks/{tid}/workflows/{workflow}", None),
    ]:
        response = carol.request(method, path, json=body)
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"] in ("Task not found", "Project not found"), (method, path)
    # creating in, or moving into, the hidden project: 404 Project not found
    refused = carol.post("/api/swarm/tasks", json={"title": "sneak", "projectId": pid})
    assert refused.status_code == 404 and refused.json() == {"error": "Project not found"}
    own = ok(carol.post("/api/swarm/tasks", json={"title": "mine"}))
    refused = carol.patch(f"/api/swarm/tasks/{own['id']}", json={"projectId": pid})
    assert refused.status_code == 404 and refused.json() == {"error": "Project not found"}
    # nor can a hidden task be named as a dependency
    assert carol.patch(f"/api/swarm/tasks/{own['id']}", json={"mustBeDoneAfterTaskId": tid}).status_code == 400
    # nothing changed
    assert ok(alice.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"][0]["title"] == "hidden"
    assert ok(alice.get(f"/api/swarm/tasks/{tid}/workflows"))["workflows"][0]["id"] == workflow


def test_assignees_must_see_the_project(srv):
    alice = client(srv, "alice")
    tagged_name, _tagged = register(srv, "tag")
    pid = restricted(alice, [tagged_name])["id"]
    refused = alice.post("/api/swarm/tasks", json={"title": "x", "projectId": pid, "assigneeUserId": "carol"})
    assert refused.status_code == 400 and "carol" in refused.json()["error"]
    task = ok(alice.post("/api/swarm/tasks", json={"title": "x", "projectId": pid, "status": "in_progress",
                                                   "assigneeUserId": tagged_name}))
    assert alice.patch(f"/api/swarm/tasks/{task['id']}", json={"assigneeUserId": "carol"}).status_code == 400
    refused = alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "review", "assigneeUserId": "carol"})
    assert refused.status_code == 400
    assert ok(alice.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"][0]["status"] == "in_progress"
    # an open task of carol's cannot be moved into the project while carol holds it
    open_task = ok(alice.post("/api/swarm/tasks", json={"title": "y", "assigneeUserId": "carol"}))
    assert alice.patch(f"/api/swarm/tasks/{open_task['id']}", json={"projectId": pid}).status_code == 400
    # admins and leads see every project: assigning to them is fine
    admin_task = ok(alice.post("/api/swarm/tasks", json={"title": "z", "projectId": pid, "assigneeUserId": "admin"}))
    assert admin_task["assigneeUserId"] == "admin"


def test_wake_and_presence_count_only_visible_tasks(srv):
    alice = client(srv, "alice")
    worker_name, worker = register(srv, "work")
    pid = restricted(alice, [worker_name])["id"]
    task = ok(alice.post("/api/swarm/tasks", json={"title": "secret work", "projectId": pid,
                                                   "assigneeUserId": worker_name}))
    assert task["id"] in {i["id"] for i in ok(worker.get("/api/wake"))["items"]}
    assert ok(worker.get("/api/presence"))[worker_name]["tasks"] == 1
    assert ok(client(srv, "carol").get("/api/presence"))[worker_name]["tasks"] == 0  # carol cannot see it
    assert ok(alice.get("/api/presence"))[worker_name]["tasks"] == 1
    # untagged, the worker can no longer see the project: the task leaves its wake and counts
    ok(alice.patch(f"/api/swarm/projects/{pid}", json={"taggedUsers": ["bob"]}))

    def wake_ids(who, path):  # a worker process other than the one that made the change hears of it by the bus
        return eventually(lambda: {i["id"] for i in ok(who.get(path))["items"]}, lambda ids: task["id"] not in ids)
    assert task["id"] not in wake_ids(worker, "/api/wake")
    assert task["id"] not in wake_ids(client(srv, "admin"), f"/api/wake/{worker_name}")
    assert ok(worker.get("/api/presence"))[worker_name]["tasks"] == 0
    assert worker.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "review"}).status_code == 404


async def test_outsider_stream_gets_no_task_events_while_a_tagged_one_does(srv):
    async with async_client(srv, "alice") as alice:
        pid = (await alice.post("/api/swarm/projects", json={"title": "s", "color": "#000000",
                                                               "taggedUsers": ["bob"]})).json()["id"]
        async with open_stream(srv, "carol") as carol, open_stream(srv, "bob") as bob:
            task = (await alice.post("/api/swarm/tasks", json={"title": "hidden", "projectId": pid})).json()
            assert (await alice.patch(f"/api/swarm/tasks/{task['id']}", json={"detail": "d"})).status_code == 200
            moved = await alice.patch(f"/api/swarm/tasks/{task['id']}/status", json={"status": "closed"})
            assert moved.status_code == 200
            sentinel = (await alice.post("/api/swarm/tasks", json={"title": "open sentinel"})).json()
            seen_by_bob = []
            while True:
                frame = await bob.logged()
                if frame.event.startswith("swarm_task_"):
                    seen_by_bob.append((frame.event, frame.data["taskId"]))
                if frame.data.get("taskId") == sentinel["id"]:
                    break
            assert seen_by_bob == [("swarm_task_created", task["id"]), ("swarm_task_updated", task["id"]),
                                   ("swarm_task_updated", task["id"]), ("swarm_task_created", sentinel["id"])]
            frame = await carol.until(lambda f: f.id is not None and f.event.startswith("swarm_task_"))
            assert (frame.event, frame.data["taskId"]) == ("swarm_task_created", sentinel["id"])
        # nor does a resume replay them
        async with open_stream(srv, "carol", last_event_id=0) as replay:
            ids = []
            while True:
                frame = await replay.logged()
                if frame.event.startswith("swarm_task_"):
                    ids.append(frame.data["taskId"])
                if frame.data.get("taskId") == sentinel["id"]:
                    break
            assert task["id"] not in ids
