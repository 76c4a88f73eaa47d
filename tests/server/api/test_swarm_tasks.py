"""API.md §18 tasks over real HTTP on SQLite and PostgreSQL: the `closed` status, `status=` and `assignee=me`."""
from __future__ import annotations

import uuid

import httpx
import pytest

from tests.helpers import backend_server, client, eventually, ok

OPEN = ["queued", "ready", "in_progress", "holding", "review"]
ALL = ["queued", "ready", "in_progress", "holding", "review", "complete", "closed"]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, scheduler_interval_seconds=3600) as server:
        yield server


def project(c: httpx.Client) -> str:
    return ok(c.post("/api/swarm/projects", json={"title": f"p-{uuid.uuid4().hex[:6]}", "color": "#112233"}))["id"]


def task(c: httpx.Client, **fields) -> dict:
    return ok(c.post("/api/swarm/tasks", json={"title": "t", **fields}))


def move(c: httpx.Client, task_id: str, status: str, **extra) -> httpx.Response:
    return c.patch(f"/api/swarm/tasks/{task_id}/status", json={"status": status, **extra})


@pytest.mark.parametrize("source", OPEN)
def test_every_open_status_closes_with_a_recorded_reason_and_reopens(srv, source):
    alice = client(srv, "alice")
    made = task(alice, status=source, assigneeUserId="alice")
    closed = ok(move(client(srv, "bob"), made["id"], "closed", reason="won't do: duplicate"))
    assert closed["status"] == "closed" and closed["completedAt"] is not None
    history = ok(alice.get(f"/api/swarm/tasks/{made['id']}/events"))["events"]
    assert history[0]["kind"] == "status_changed" and history[0]["actorUserId"] == "bob"
    assert history[0]["beforeState"] == {"status": source}
    assert history[0]["afterState"] == {"status": "closed", "reason": "won't do: duplicate"}
    reopened = ok(move(alice, made["id"], "ready"))
    assert reopened["status"] == "ready" and reopened["completedAt"] is None


def test_closing_without_a_reason_and_the_refused_moves(srv):
    alice = client(srv, "alice")
    made = task(alice)
    closed = ok(move(alice, made["id"], "closed"))
    assert closed["completedAt"] is not None
    assert ok(alice.get(f"/api/swarm/tasks/{made['id']}/events"))["events"][0]["afterState"] == {"status": "closed"}
    for target in ("queued", "in_progress", "holding", "review", "complete"):
        refused = move(alice, made["id"], target, reason="x")
        assert refused.status_code == 409
        assert refused.json() == {"error": f"Cannot move task from closed to {target}", "allowed": ["ready"]}
    done = task(alice, status="complete")
    refused = move(alice, done["id"], "closed")
    assert refused.status_code == 409 and refused.json()["allowed"] == ["ready"]
    queued = task(alice, status="queued")
    assert move(alice, queued["id"], "complete").json()["allowed"] == ["ready", "holding", "closed"]
    unknown = move(alice, queued["id"], "done")
    assert unknown.status_code == 400 and unknown.json()["allowed"] == ALL


def test_created_closed_has_completed_at_and_lists_after_complete(srv):
    alice = client(srv, "alice")
    pid = project(alice)
    made = {status: task(alice, projectId=pid, status=status, title=status) for status in ALL}
    assert made["closed"]["completedAt"] is not None and made["ready"]["completedAt"] is None
    default = [t["title"] for t in ok(alice.get(f"/api/swarm/tasks?projectId={pid}"))["tasks"]]
    assert set(default) == set(OPEN)
    everything = [t["title"] for t in ok(alice.get(f"/api/swarm/tasks?projectId={pid}&includeCompleted=true"))["tasks"]]
    assert everything == ["in_progress", "review", "ready", "queued", "holding", "complete", "closed"]
    named = [t["title"] for t in ok(alice.get(f"/api/swarm/tasks?projectId={pid}&statuses=closed"))["tasks"]]
    assert named == ["closed"]


def test_status_alias_statuses_wins_and_unknown_values_are_400(srv):
    alice = client(srv, "alice")
    pid = project(alice)
    for status in ("ready", "review", "closed"):
        task(alice, projectId=pid, status=status, title=status)
    alias = [t["title"] for t in ok(alice.get(f"/api/swarm/tasks?projectId={pid}&status=closed,review"))["tasks"]]
    assert alias == ["review", "closed"]
    both = [t["title"] for t in ok(alice.get(f"/api/swarm/tasks?projectId={pid}&status=closed&statuses=ready"))["tasks"]]
    assert both == ["ready"]
    for query in ("status=nope", "status=ready,nope", "statuses=nope&status=ready"):
        refused = alice.get(f"/api/swarm/tasks?{query}")
        assert refused.status_code == 400 and refused.json()["allowed"] == ALL, query


def test_assignee_me_is_the_caller(srv):
    alice, carol = client(srv, "alice"), client(srv, "carol")
    pid = project(alice)
    mine = task(alice, projectId=pid, assigneeUserId="carol")
    task(alice, projectId=pid, assigneeUserId="bob")
    listed = ok(carol.get(f"/api/swarm/tasks?projectId={pid}&assignee=me"))["tasks"]
    assert [t["id"] for t in listed] == [mine["id"]]
    assert ok(alice.get(f"/api/swarm/tasks?projectId={pid}&assignee=me"))["tasks"] == []


def test_closed_tasks_never_enter_wake(srv):
    alice, bob = client(srv, "alice"), client(srv, "bob")
    def waking() -> set[str]:  # another worker's wake shows a change once its NOTIFY arrived (docs/deploy.md)
        return {i["id"] for i in ok(bob.get("/api/wake"))["items"]}
    made = task(alice, assigneeUserId="bob", title="wake-closed-check")
    assert made["id"] in eventually(waking, lambda ids: made["id"] in ids)
    ok(move(alice, made["id"], "closed", reason="no longer needed"))
    assert made["id"] not in eventually(waking, lambda ids: made["id"] not in ids)
    created_closed = task(alice, assigneeUserId="bob", status="closed")
    assert created_closed["id"] not in {i["id"] for i in ok(bob.get("/api/wake"))["items"]}
