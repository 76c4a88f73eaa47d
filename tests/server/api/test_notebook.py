"""Notebook pages over REST against the real server: shapes, visibility, rules, events."""
from __future__ import annotations

import uuid

import pytest

from coordserver.domain import notebook as pages
from coordserver.events import log
from coordserver.models import NotebookPage
from tests.helpers import client, eventually


@pytest.fixture(scope="module")
def http(server):
    clients = {who: client(server, who) for who in ("admin", "alice", "bob", "carol")}
    yield clients
    for c in clients.values():
        c.close()


def create(http, who="alice", **fields):
    fields.setdefault("title", f"Page {uuid.uuid4().hex[:8]}")
    response = http[who].post("/api/notebook", json=fields)
    assert response.status_code == 200, response.text
    return response.json()["page"]


def stored(server, page_id):
    def read():
        page = NotebookPage.get_by_id(page_id)
        return page.content, pages.document_text(pages.load_document(bytes(page.ydoc)))
    return server.call(lambda: server.coord.store.read(read))


def events_for(server, identity, page_id):
    rows = server.call(lambda: server.coord.store.read(log.for_identity_after, identity, 0, 100000))
    return [data for _, kind, data in rows if kind == "notebook_page_updated" and data["pageId"] == page_id]


def test_create_returns_the_page(http):
    page = create(http, title="Runbook", content="# Runbook\nstep 1", tags=["ops"], taggedUsers=[],
                  reviewAt="2026-03-01T10:00:00+01:00")
    assert set(page) == {"id", "title", "content", "createdBy", "taggedUsers", "tags", "expiresAt", "reviewAt",
                         "locked", "lockedBy", "archivedAt", "createdAt", "updatedAt"}
    assert page["title"] == "Runbook" and page["content"] == "# Runbook\nstep 1"
    assert page["createdBy"] == "alice" and page["taggedUsers"] is None and page["tags"] == ["ops"]
    assert page["reviewAt"] == "2026-03-01T09:00:00.000Z"
    assert page["locked"] is False and page["lockedBy"] is None and page["archivedAt"] is None
    uuid.UUID(page["id"])


def test_create_requires_a_title_and_cuts_it(http):
    for body in ({}, {"title": ""}, {"title": "   "}, {"content": "x"}):
        response = http["alice"].post("/api/notebook", json=body)
        assert response.status_code == 400
        assert response.json() == {"error": "title is required"}
    assert http["alice"].post("/api/notebook", json={"title": "t", "taggedUsers": "bob"}).status_code == 400
    assert http["alice"].post("/api/notebook", json={"title": "t", "reviewAt": "soon"}).status_code == 400
    assert len(create(http, title="x" * 300)["title"]) == 255


def test_visibility_of_tagged_pages(http):
    page = create(http, title="Secret plan", content="only bob", taggedUsers=["bob"])
    for who in ("alice", "bob", "admin"):
        assert http[who].get(f"/api/notebook/{page['id']}").status_code == 200
        assert page["id"] in [p["id"] for p in http[who].get("/api/notebook", params={"limit": 100}).json()["pages"]]
    response = http["carol"].get(f"/api/notebook/{page['id']}")
    assert response.status_code == 403 and response.json() == {"error": "Forbidden"}
    assert page["id"] not in [p["id"] for p in http["carol"].get("/api/notebook", params={"limit": 100}).json()["pages"]]
    missing = http["carol"].get(f"/api/notebook/{uuid.uuid4()}")
    assert missing.status_code == 404 and missing.json() == {"error": "Not found"}


def test_list_search_paging_and_shape(http):
    marker = uuid.uuid4().hex[:8]
    first = create(http, title=f"{marker} Deploy notes")
    second = create(http, "bob", title=f"{marker} other", content=f"how to DEPLOY the École {marker}")
    third = create(http, title=f"{marker} unrelated", content="nothing")
    archived = create(http, title=f"{marker} deploy archived")
    assert http["alice"].delete(f"/api/notebook/{archived['id']}").status_code == 200

    found = http["carol"].get("/api/notebook", params={"q": "deploy"}).json()["pages"]
    ids = [p["id"] for p in found if marker in p["title"]]
    assert ids == [second["id"], first["id"]]  # most recently updated first; archived left out
    assert all("content" not in p and "archivedAt" not in p for p in found)
    assert [p["id"] for p in http["carol"].get("/api/notebook", params={"q": "école"}).json()["pages"]] == [second["id"]]

    everything = [p["id"] for p in http["carol"].get("/api/notebook", params={"q": marker}).json()["pages"]]
    assert everything == [third["id"], second["id"], first["id"]]
    paged = http["carol"].get("/api/notebook", params={"q": marker, "limit": 1, "offset": 1}).json()["pages"]
    assert [p["id"] for p in paged] == [second["id"]]
    assert http["carol"].get("/api/notebook", params={"offset": "x"}).status_code == 400


def test_patch_fields_and_empty_lists(server, http):
    page = create(http, title="Meta", tags=["a"], taggedUsers=["bob"])
    response = http["bob"].patch(f"/api/notebook/{page['id']}", json={
        "title": "y" * 300, "tags": [], "expiresAt": "2026-05-01T00:00:00Z"})
    assert response.status_code == 200, response.text
    updated = response.json()["page"]
    assert len(updated["title"]) == 255 and updated["tags"] is None
    assert updated["expiresAt"] == "2026-05-01T00:00:00.000Z" and updated["updatedAt"] >= page["updatedAt"]
    owner = http["alice"].patch(f"/api/notebook/{page['id']}", json={"taggedUsers": [], "expiresAt": None}).json()["page"]
    assert owner["taggedUsers"] is None and owner["expiresAt"] is None
    assert http["alice"].patch(f"/api/notebook/{page['id']}", json={"title": ""}).status_code == 400
    assert http["alice"].patch(f"/api/notebook/{page['id']}", json={"locked": "yes"}).status_code == 400
    assert http["alice"].patch(f"/api/notebook/{uuid.uuid4()}", json={"title": "x"}).status_code == 404


def test_only_the_owner_changes_lock_and_tags(http):
    page = create(http, title="Owned")
    for body in ({"locked": True}, {"taggedUsers": ["carol"]}):
        response = http["bob"].patch(f"/api/notebook/{page['id']}", json=body)
        assert response.status_code == 403, body
    locked = http["alice"].patch(f"/api/notebook/{page['id']}", json={"locked": True}).json()["page"]
    assert locked["locked"] is True and locked["lockedBy"] == "alice"
    refused = http["bob"].patch(f"/api/notebook/{page['id']}", json={"title": "mine"})
    assert refused.status_code == 403 and refused.json() == {"error": "Page is locked"}
    assert http["admin"].patch(f"/api/notebook/{page['id']}", json={"title": "admin may"}).status_code == 200
    unlocked = http["admin"].patch(f"/api/notebook/{page['id']}", json={"locked": False}).json()["page"]
    assert unlocked["locked"] is False and unlocked["lockedBy"] is None
    assert http["bob"].patch(f"/api/notebook/{page['id']}", json={"title": "now bob"}).status_code == 200


def test_archive_and_restore(http):
    page = create(http, title="To archive")
    assert http["bob"].delete(f"/api/notebook/{page['id']}").status_code == 403
    assert http["alice"].delete(f"/api/notebook/{page['id']}").json() == {"success": True}
    archived = http["alice"].get(f"/api/notebook/{page['id']}").json()["page"]
    assert archived["archivedAt"] is not None
    for who, body in (("alice", {"title": "x"}), ("alice", {"archived": False, "title": "x"}),
                      ("bob", {"archived": False})):
        response = http[who].patch(f"/api/notebook/{page['id']}", json=body)
        assert response.status_code == 403 and response.json() == {"error": "Page is archived"}
    restored = http["alice"].patch(f"/api/notebook/{page['id']}", json={"archived": False}).json()["page"]
    assert restored["archivedAt"] is None
    assert page["id"] in [p["id"] for p in http["alice"].get("/api/notebook", params={"q": "To archive"}).json()["pages"]]
    assert http["carol"].delete(f"/api/notebook/{uuid.uuid4()}").status_code == 404


def test_patch_content_without_editors_merges_into_the_stored_document(server, http):
    page = create(http, title="Stored merge", content="Grüße aus 東京\nline two")
    new = "Grüße aus 東京 🎌\nline two\nline three"
    response = http["bob"].patch(f"/api/notebook/{page['id']}", json={"content": new})
    assert response.json()["page"]["content"] == new
    assert stored(server, page["id"]) == (new, new)


def test_presence_heartbeat(http):
    page = create(http, title="Viewed", taggedUsers=["bob"])
    assert http["bob"].post(f"/api/notebook/{page['id']}/presence").json() == {"viewers": ["bob"]}
    # bob's heartbeat reaches alice's worker process by the bus (COORD_TEST_WORKERS: maybe another one)
    assert eventually(lambda: http["alice"].post(f"/api/notebook/{page['id']}/presence").json(),
                      lambda seen: seen == {"viewers": ["alice", "bob"]}) == {"viewers": ["alice", "bob"]}
    assert http["carol"].post(f"/api/notebook/{page['id']}/presence").status_code == 403
    assert http["carol"].post(f"/api/notebook/{uuid.uuid4()}/presence").status_code == 404


def test_events_reach_those_who_can_see_the_page(server, http):
    open_page = create(http, title="Open")
    tagged = create(http, title="Tagged", taggedUsers=["bob"])
    http["bob"].patch(f"/api/notebook/{tagged['id']}", json={"content": "bob wrote"})
    http["alice"].patch(f"/api/notebook/{tagged['id']}", json={"locked": True})
    http["alice"].delete(f"/api/notebook/{tagged['id']}")

    assert [e["change"] for e in events_for(server, "carol", open_page["id"])] == ["meta"]
    assert events_for(server, "carol", tagged["id"]) == []
    for who in ("alice", "bob", "admin"):
        assert [e["change"] for e in events_for(server, who, tagged["id"])] == ["meta", "content", "lock", "archive"]
    content_event = events_for(server, "alice", tagged["id"])[1]
    assert content_event["updatedBy"] == "bob" and content_event["title"] == "Tagged"
    assert content_event["type"] == "notebook_page_updated"


def test_auth_is_required(server):
    with client(server) as anonymous:
        assert anonymous.get("/api/notebook").status_code == 401
    with client(server, token="nope") as wrong:
        assert wrong.post("/api/notebook", json={"title": "x"}).status_code == 401


def test_list_and_patch_on_both_backends(make_server, database_url):
    server = make_server(database_url=database_url)
    with client(server, "alice") as alice, client(server, "bob") as bob, client(server, "carol") as carol:
        open_page = alice.post("/api/notebook", json={"title": "Deploy 50%_off", "content": "Straße"}).json()["page"]
        tagged = alice.post("/api/notebook", json={"title": "deploy secret", "taggedUsers": ["bob"]}).json()["page"]
        assert [p["id"] for p in bob.get("/api/notebook", params={"q": "DEPLOY"}).json()["pages"]] == \
            [tagged["id"], open_page["id"]]
        assert [p["id"] for p in carol.get("/api/notebook", params={"q": "deploy"}).json()["pages"]] == [open_page["id"]]
        assert [p["id"] for p in carol.get("/api/notebook", params={"q": "50%_"}).json()["pages"]] == [open_page["id"]]
        assert [p["id"] for p in carol.get("/api/notebook", params={"q": "STRASSE"}).json()["pages"]] == []
        assert [p["id"] for p in carol.get("/api/notebook", params={"q": "straße"}).json()["pages"]] == [open_page["id"]]
        merged = bob.patch(f"/api/notebook/{open_page['id']}", json={"content": "Große Straße"}).json()["page"]
        assert merged["content"] == "Große Straße"
        assert stored(server, open_page["id"]) == ("Große Straße", "Große Straße")
