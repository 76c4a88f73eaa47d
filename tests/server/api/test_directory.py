"""Directory over real HTTP: list (bare array, q, paging, visibility), create, delete."""
from __future__ import annotations

from tests.helpers import client


def create(api, **fields):
    response = api.post("/api/directory", json={"title": "Handbook", "url": "https://docs.example.com/h", **fields})
    assert response.status_code == 200, response.text
    return response.json()


def titles(api, **params) -> list[str]:
    response = api.get("/api/directory", params=params)
    assert response.status_code == 200
    assert isinstance(response.json(), list)
    return [e["title"] for e in response.json()]


def test_create_list_search_and_paging(make_server):
    srv = make_server()
    alice, bob = client(srv, "alice"), client(srv, "bob")
    entry = create(alice, title="Handbook", description="How we work")
    assert entry == {"id": entry["id"], "title": "Handbook", "url": "https://docs.example.com/h",
                     "description": "How we work", "createdBy": "alice", "createdByIsAgent": False, "taggedUsers": None,
                     "createdAt": entry["createdAt"]}
    create(alice, title="Runbook", url="http://ops.example.com/run", description="On-call HANDBOOK appendix")
    create(bob, title="Status page", url="https://status.example.com")
    assert titles(bob) == ["Status page", "Runbook", "Handbook"]  # newest first
    assert titles(bob, q="handbook") == ["Runbook", "Handbook"]  # title or description, any case
    assert titles(bob, limit=2) == ["Status page", "Runbook"]
    assert titles(bob, limit=2, offset=2) == ["Handbook"]
    assert titles(bob, q="%") == []
    assert bob.get("/api/directory", params={"offset": -1}).status_code == 400
    long = create(alice, title="T" * 300)
    assert len(long["title"]) == 255


def test_tagged_entries_are_visible_to_tagged_users_creator_and_admin(make_server):
    srv = make_server()
    alice, bob, carol, admin = (client(srv, w) for w in ("alice", "bob", "carol", "admin"))
    create(alice, title="Public")
    private = create(alice, title="For bob", taggedUsers=["bob", "Bob"])
    assert private["taggedUsers"] == ["bob"]
    create(alice, title="Untagged empty list", taggedUsers=[])
    assert titles(alice) == ["Untagged empty list", "For bob", "Public"]
    assert titles(bob) == ["Untagged empty list", "For bob", "Public"]
    assert titles(carol) == ["Untagged empty list", "Public"]
    assert titles(admin) == ["Untagged empty list", "For bob", "Public"]
    # Paging counts visible entries only.
    assert titles(carol, limit=1, offset=1) == ["Public"]


def test_delete_by_creator_or_admin(make_server):
    srv = make_server()
    alice, bob, carol, admin = (client(srv, w) for w in ("alice", "bob", "carol", "admin"))
    mine = create(alice, title="Mine")
    refused = bob.delete(f"/api/directory/{mine['id']}")
    assert refused.status_code == 403 and isinstance(refused.json()["error"], str)
    assert bob.delete("/api/directory/abc").json() == {"error": "Invalid id"}
    assert bob.delete("/api/directory/99999").status_code == 404
    hidden = create(alice, title="Hidden", taggedUsers=["bob"])
    assert carol.delete(f"/api/directory/{hidden['id']}").status_code == 404  # not visible = absent
    assert alice.delete(f"/api/directory/{mine['id']}").json() == {"success": True, "id": mine["id"]}
    assert admin.delete(f"/api/directory/{hidden['id']}").json() == {"success": True, "id": hidden["id"]}
    assert titles(alice) == []
    assert alice.delete(f"/api/directory/{mine['id']}").status_code == 404


def test_bad_input(make_server):
    srv = make_server()
    alice = client(srv, "alice")
    for payload in [{}, {"title": "x"}, {"url": "https://x.example"}, {"title": " ", "url": "https://x.example"},
                    {"title": 5, "url": "https://x.example"}, {"title": "x", "url": 5}]:
        response = alice.post("/api/directory", json=payload)
        assert response.json() == {"error": "title and url are required"}, payload
    for url in ["ftp://x.example/file", "javascript:alert(1)", "file:///etc/passwd", "example.com", "https://",
                "http://exa mple.com", "https://x.example/" + "a" * 2000]:
        response = alice.post("/api/directory", json={"title": "x", "url": url})
        assert response.status_code == 400, url
    for extra in [{"taggedUsers": "bob"}, {"taggedUsers": [5]}, {"taggedUsers": ["Not Valid!"]},
                  {"description": 5}]:
        assert alice.post("/api/directory", json={"title": "x", "url": "https://x.example", **extra}).status_code == 400
    assert alice.post("/api/directory", content=b"[]").status_code == 400
    assert client(srv).get("/api/directory").status_code == 401
    assert alice.get("/api/directory").json() == []


def entry_as_listed(api, entry_id: int) -> dict:
    return next(e for e in api.get("/api/directory").json() if e["id"] == entry_id)


def test_update_by_creator_or_admin(make_server, database_url):
    srv = make_server(database_url=database_url)
    alice, bob, admin = (client(srv, w) for w in ("alice", "bob", "admin"))
    entry = create(alice, title="Handbook", description="How we work")
    updated = alice.patch(f"/api/directory/{entry['id']}", json={"title": "  Handbook v2 ", "url": " http://h.example/2 "})
    assert updated.status_code == 200, updated.text
    assert updated.json() == {**entry, "title": "Handbook v2", "url": "http://h.example/2"}  # the rest as it was
    assert entry_as_listed(bob, entry["id"]) == updated.json()
    tagged = admin.patch(f"/api/directory/{entry['id']}", json={"description": None, "taggedUsers": ["Carol", "carol"]})
    assert tagged.json() == {**updated.json(), "description": None, "taggedUsers": ["carol"], "createdBy": "alice"}
    assert [e["id"] for e in bob.get("/api/directory").json()] == []  # tagged for carol now: hidden from bob
    untagged = alice.patch(f"/api/directory/{entry['id']}", json={"taggedUsers": [], "title": "T" * 300})
    assert untagged.json()["taggedUsers"] is None and untagged.json()["title"] == "T" * 255
    assert entry_as_listed(bob, entry["id"]) == untagged.json()


def test_update_refusals_change_nothing(make_server, database_url):
    srv = make_server(database_url=database_url)
    alice, bob, carol = (client(srv, w) for w in ("alice", "bob", "carol"))
    entry = create(alice, title="Mine", description="kept")
    hidden = create(alice, title="Hidden", taggedUsers=["bob"])
    path = f"/api/directory/{entry['id']}"
    refused = bob.patch(path, json={"title": "Bob's now"})
    assert refused.status_code == 403
    assert refused.json() == {"error": "Only the creator or an admin may edit this entry"}
    assert carol.patch(f"/api/directory/{hidden['id']}", json={"title": "x"}).json() == {"error": "Entry not found"}
    assert alice.patch("/api/directory/99999", json={"title": "x"}).status_code == 404
    assert alice.patch("/api/directory/abc", json={"title": "x"}).json() == {"error": "Invalid id"}
    for payload, error in [
            ({}, "No fields to update"),
            ({"title": "ok", "color": "red"}, "color is not a field of this request"),
            ({"createdBy": "bob"}, "createdBy is not a field of this request"),
            ({"title": " "}, "title must be text that is not blank"),
            ({"title": None}, "title must be text that is not blank"),
            ({"title": "ok", "url": "ftp://x.example/file"}, "url must be an http or https URL"),
            ({"url": None}, "url must be an http or https URL"),
            ({"url": "https://x.example/" + "a" * 2000}, "url is longer than 2000 characters"),
            ({"title": "ok", "description": 5}, "description must be a string"),
            ({"description": "d" * 10_001}, "description is longer than 10000 characters"),
            ({"title": "ok", "taggedUsers": "bob"}, "taggedUsers must be an array")]:
        response = alice.patch(path, json=payload)
        assert (response.status_code, response.json()) == (400, {"error": error}), payload
    for payload in [{"taggedUsers": ["Not Valid!"]}, {"taggedUsers": [5]}]:
        assert alice.patch(path, json={"title": "ok", **payload}).status_code == 400, payload
    for raw in [b"", b"[]", b"{"]:
        assert alice.patch(path, content=raw, headers={"Content-Type": "application/json"}).status_code == 400
    assert client(srv).patch(path, json={"title": "x"}).status_code == 401
    assert entry_as_listed(alice, entry["id"]) == entry  # nothing of any refused update was written
