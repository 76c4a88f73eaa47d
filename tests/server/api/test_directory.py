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
