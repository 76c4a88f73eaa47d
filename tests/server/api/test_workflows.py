"""API.md §18 workflows over real HTTP on SQLite and PostgreSQL: every route, success and refusal, and events."""
from __future__ import annotations

import uuid

import httpx
import pytest

from coordserver.events import log as event_log
from tests.helpers import async_client, backend_server, client, ok
from tests.sse_helpers import open_stream

MISSING = str(uuid.uuid4())


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, scheduler_interval_seconds=3600) as server:
        yield server


def refused(response: httpx.Response, status: int, error: str | None = None) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert isinstance(body["error"], str) and (error is None or body["error"] == error), body
    return body


def test_create_read_and_the_full_shape(srv):
    alice = client(srv, "alice")
    body = {"title": "  Release  ", "description": "how we ship", "documentUrl": "https://docs.example.com/release",
            "document": {"steps": [{"id": "s1", "title": "Tag"}]}, "enabled": True, "taggedUsers": [],
            "expiresAt": "2030-01-01T00:00:00+02:00", "reviewAt": "2029-06-01T00:00:00Z"}
    made = ok(alice.post("/api/swarm/workflows", json=body))
    assert set(made) == {"id", "title", "description", "documentUrl", "document", "enabled", "taggedUsers",
                         "expiresAt", "reviewAt", "createdBy", "updatedAt", "createdAt"}
    assert made["title"] == "Release" and made["taggedUsers"] is None and made["createdBy"] == "alice"
    assert made["document"] == body["document"] and made["expiresAt"] == "2029-12-31T22:00:00.000Z"
    assert ok(client(srv, "bob").get(f"/api/swarm/workflows/{made['id']}")) == made
    minimal = ok(alice.post("/api/swarm/workflows", json={"title": "Minimal"}))
    assert minimal["enabled"] is True and minimal["document"] is None and minimal["documentUrl"] is None


def test_bad_fields_are_400_and_write_nothing(srv):
    alice = client(srv, "alice")
    before = len(ok(alice.get("/api/swarm/workflows?includeDisabled=true"))["workflows"])
    for body, message in [({}, "title is required"), ({"title": "  "}, "title is required"),
                          ({"title": "x" * 256}, None), ({"title": "x", "documentUrl": "ftp://x"}, None),
                          ({"title": "x", "documentUrl": "https://" + "a" * 500}, None),
                          ({"title": "x", "enabled": "yes"}, None), ({"title": "x", "taggedUsers": ["nobody"]}, None),
                          ({"title": "x", "expiresAt": "soon"}, None), ({"title": "x", "reviewAt": 5}, None),
                          ({"title": "x", "description": 7}, None)]:
        refused(alice.post("/api/swarm/workflows", json=body), 400, message)
    assert len(ok(alice.get("/api/swarm/workflows?includeDisabled=true"))["workflows"]) == before
    made = ok(alice.post("/api/swarm/workflows", json={"title": "x"}))
    refused(alice.patch(f"/api/swarm/workflows/{made['id']}", json={"title": None}), 400, "title is required")
    refused(alice.patch(f"/api/swarm/workflows/{made['id']}", json={"enabled": None}), 400)


def test_list_visibility_order_and_disabled(srv):
    alice, bob, carol, admin = (client(srv, who) for who in ("alice", "bob", "carol", "admin"))
    tag = uuid.uuid4().hex[:6]
    b = ok(alice.post("/api/swarm/workflows", json={"title": f"{tag} b tagged", "taggedUsers": ["bob"]}))
    a = ok(alice.post("/api/swarm/workflows", json={"title": f"{tag} a open"}))
    off = ok(alice.post("/api/swarm/workflows", json={"title": f"{tag} c off", "enabled": False}))
    expired = ok(alice.post("/api/swarm/workflows", json={"title": f"{tag} d expired",
                                                          "expiresAt": "2000-01-01T00:00:00Z"}))

    def titles(c, query=""):
        return [w["id"] for w in ok(c.get(f"/api/swarm/workflows{query}"))["workflows"] if w["title"].startswith(tag)]
    assert titles(alice) == [a["id"], b["id"], expired["id"]]
    assert titles(bob) == [a["id"], b["id"], expired["id"]]
    assert titles(carol) == [a["id"], expired["id"]]
    assert titles(admin) == [a["id"], b["id"], expired["id"]]
    assert titles(carol, "?includeDisabled=true") == [a["id"], off["id"], expired["id"]]
    refused(carol.get(f"/api/swarm/workflows/{b['id']}"), 404, "Not found")
    refused(carol.get(f"/api/swarm/workflows/{MISSING}"), 404, "Not found")
    assert ok(admin.get(f"/api/swarm/workflows/{b['id']}"))["id"] == b["id"]


def test_only_creator_or_admin_change_or_delete(srv):
    alice, bob, carol, admin = (client(srv, who) for who in ("alice", "bob", "carol", "admin"))
    made = ok(alice.post("/api/swarm/workflows", json={"title": "Owned", "documentUrl": "https://x.example/doc",
                                                        "taggedUsers": ["bob"]}))
    path = f"/api/swarm/workflows/{made['id']}"
    refused(bob.patch(path, json={"title": "bob's"}), 403)
    refused(bob.delete(path), 403)
    refused(carol.patch(path, json={"title": "carol's"}), 404)  # cannot see it
    refused(carol.delete(path), 404)
    refused(alice.patch(f"/api/swarm/workflows/{MISSING}", json={"title": "x"}), 404)
    changed = ok(alice.patch(path, json={"title": "Owned v2", "documentUrl": None, "enabled": False,
                                         "reviewAt": "2030-01-01T00:00:00Z"}))
    assert (changed["title"], changed["documentUrl"], changed["enabled"]) == ("Owned v2", None, False)
    assert changed["reviewAt"] == "2030-01-01T00:00:00.000Z" and changed["createdBy"] == "alice"
    assert ok(admin.patch(path, json={"taggedUsers": None}))["taggedUsers"] is None
    assert ok(admin.delete(path)) == {"ok": True}
    refused(alice.get(path), 404)
    refused(alice.delete(path), 404)


def test_attach_detach_and_delete_detaches_everywhere(srv):
    alice, bob, carol = client(srv, "alice"), client(srv, "bob"), client(srv, "carol")
    task = ok(alice.post("/api/swarm/tasks", json={"title": "ship it"}))
    other = ok(alice.post("/api/swarm/tasks", json={"title": "ship the other"}))
    release = ok(alice.post("/api/swarm/workflows", json={"title": "Release"}))
    private = ok(alice.post("/api/swarm/workflows", json={"title": "Private", "taggedUsers": ["bob"],
                                                         "enabled": False}))
    path = f"/api/swarm/tasks/{task['id']}/workflows"
    first = ok(bob.post(path, json={"workflowId": release["id"]}))
    assert set(first) == {"taskId", "workflowId", "attachedBy", "attachedAt"}
    assert (first["taskId"], first["workflowId"], first["attachedBy"]) == (task["id"], release["id"], "bob")
    assert ok(alice.post(path, json={"workflowId": release["id"]})) == first  # twice: the first attachment
    ok(bob.post(path, json={"workflowId": private["id"]}))
    ok(alice.post(f"/api/swarm/tasks/{other['id']}/workflows", json={"workflowId": release["id"]}))
    assert [w["id"] for w in ok(bob.get(path))["workflows"]] == [private["id"], release["id"]]  # disabled included
    assert [w["id"] for w in ok(carol.get(path))["workflows"]] == [release["id"]]  # only visible ones
    refused(carol.post(path, json={"workflowId": private["id"]}), 404, "Workflow not found")
    refused(alice.post(path, json={}), 400, "workflowId required")
    refused(alice.post(path, json={"workflowId": 5}), 400, "workflowId required")
    refused(alice.post(path, json={"workflowId": MISSING}), 404, "Workflow not found")
    for method, bad_path, body in [("GET", f"/api/swarm/tasks/{MISSING}/workflows", None),
                                   ("POST", f"/api/swarm/tasks/{MISSING}/workflows", {"workflowId": release["id"]}),
                                   ("DELETE", f"/api/swarm/tasks/{MISSING}/workflows/{release['id']}", None),
                                   ("GET", "/api/swarm/tasks/not-a-uuid/workflows", None)]:
        refused(alice.request(method, bad_path, json=body), 404, "Task not found")
    assert ok(alice.delete(f"{path}/{private['id']}")) == {"ok": True}
    assert ok(alice.delete(f"{path}/{private['id']}")) == {"ok": True}  # again: harmless
    assert [w["id"] for w in ok(bob.get(path))["workflows"]] == [release["id"]]
    ok(alice.delete(f"/api/swarm/workflows/{release['id']}"))
    assert ok(bob.get(path))["workflows"] == []
    assert ok(bob.get(f"/api/swarm/tasks/{other['id']}/workflows"))["workflows"] == []


async def test_events_reach_those_who_can_see(srv):
    async with async_client(srv, "alice") as alice, open_stream(srv, "bob") as bob, \
            open_stream(srv, "carol") as carol:
        task = (await alice.post("/api/swarm/tasks", json={"title": "evented"})).json()
        hidden = (await alice.post("/api/swarm/workflows", json={"title": "Bob only", "taggedUsers": ["bob"]})).json()
        frame = await bob.until(lambda f: f.event == "workflow_updated")
        assert frame.id is not None
        assert frame.data == {"type": "workflow_updated", "workflowId": hidden["id"], "action": "created"}
        await alice.patch(f"/api/swarm/workflows/{hidden['id']}", json={"title": "Bob only v2"})
        assert (await bob.until(lambda f: f.event == "workflow_updated")).data["action"] == "updated"
        await alice.post(f"/api/swarm/tasks/{task['id']}/workflows", json={"workflowId": hidden["id"]})
        attached = await bob.until(lambda f: f.event == "swarm_task_updated" and f.data["taskId"] == task["id"])
        assert attached.data["actor"] == "alice"
        await alice.delete(f"/api/swarm/tasks/{task['id']}/workflows/{hidden['id']}")
        await bob.until(lambda f: f.event == "swarm_task_updated" and f.data["taskId"] == task["id"])
        await alice.delete(f"/api/swarm/workflows/{hidden['id']}")
        assert (await bob.until(lambda f: f.event == "workflow_updated")).data["action"] == "deleted"
        opened = (await alice.post("/api/swarm/workflows", json={"title": "Everyone"})).json()
        # carol's first workflow event is the open one: none of the tagged workflow's reached her
        frame = await carol.until(lambda f: f.event == "workflow_updated")
        assert frame.data == {"type": "workflow_updated", "workflowId": opened["id"], "action": "created"}


def test_a_tagged_change_is_logged_for_the_tagged_the_creator_and_every_admin(srv):
    """visibility.audience: tagged identities, the creator and the admins of the moment (environment
    admins, unarchived admin users, holders of live admin tokens), and no one else."""
    tag = uuid.uuid4().hex[:6]
    names = {role: f"{role}{tag}" for role in ("dbadmin", "plain", "archived", "demoted", "revoked")}
    with client(srv, "admin") as admin:
        for role, name in names.items():
            code = ok(admin.post("/api/auth/invites", json={"isAdmin": role != "plain"}))["invite"]["code"]
            ok(admin.post("/api/auth/register", json={"code": code, "identity": name}))
        ok(admin.patch(f"/api/admin/users/{names['archived']}", json={"archivedAt": "2026-01-01T00:00:00Z"}))
        ok(admin.patch(f"/api/admin/users/{names['demoted']}", json={"isAdmin": False}))  # its token follows
        tokens = {t["identity"]: t["id"] for t in ok(admin.get("/api/auth/tokens"))["tokens"]}
        ok(admin.post(f"/api/auth/tokens/{tokens[names['revoked']]}/revoke"))  # still an admin user
    made = ok(client(srv, "alice").post("/api/swarm/workflows", json={"title": "Tagged", "taggedUsers": ["bob"]}))
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 100_000))
    audiences = [sorted(audience) for _, type_, data, to_all, audience in rows
                 if data.get("workflowId") == made["id"] and not to_all]
    assert audiences == [sorted(["alice", "bob", "admin", names["dbadmin"], names["revoked"]])]
