"""Issue 32 items 1 and 4 over real HTTP on SQLite and PostgreSQL: an identity name is never reissued.

Registering a name that exists in any state (live, dormant, archived, environment) is 409 and consumes
nothing; an admin restores an archived identity by unarchiving it and then inviting it by name, and the
restored identity's rights come from that invite, never from its archived row. An archived environment
identity's token is refused until it is unarchived. Also with two server processes on one PostgreSQL.
"""
from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from coordserver.domain import identities
from coordserver.timeutil import utcnow
from tests.helpers import backend_server, client, eventually, ok
from tests.sse_helpers import open_stream, run_unit

DAVE = "dave-token-0000000000000000"  # an environment identity these tests may archive
EXTRA_ENV = {"SERVICE_TOKEN_DAVE": DAVE, "SERVICE_TOKEN_EVE": "eve-token-00000000000000000"}
ARCHIVE = {"archivedAt": "2026-03-01T00:00:00Z"}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, env=EXTRA_ENV, scheduler_interval_seconds=3600,
                        push_enabled=False) as server:
        yield server


def invite(admin, **body) -> dict:
    return ok(admin.post("/api/auth/invites", json=body))["invite"]


def register(base, code: str, identity: str):
    return client(base).post("/api/auth/register", json={"code": code, "identity": identity})


def fresh(srv, prefix: str, is_admin: bool = False) -> tuple[str, str]:
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    return name, ok(register(srv, invite(client(srv, "admin"), isAdmin=is_admin)["code"], name))["token"]


def use_count(admin, invite_id: int) -> int:
    return next(i for i in ok(admin.get("/api/auth/invites"))["invites"] if i["id"] == invite_id)["useCount"]


def test_archived_identity_is_not_taken_over_by_an_unhinted_invite(srv):
    """The reported example: erin archived, then `register {code: <unhinted invite>, identity: erin}`."""
    admin, alice = client(srv, "admin"), client(srv, "alice")
    erin, _ = fresh(srv, "erin")
    ok(alice.post(f"/api/mailboxes/{erin}/messages", json={"title": "private to erin"}))
    ok(admin.patch(f"/api/admin/users/{erin}", json=ARCHIVE))
    anyone = invite(admin, maxUses=3)
    taken = register(srv, anyone["code"], erin)
    assert taken.status_code == 409 and "already exists" in taken.json()["error"], taken.text
    assert set(taken.json()) == {"error"}
    assert use_count(admin, anyone["id"]) == 0  # a refusal consumes nothing
    # even an invite naming it cannot skip the unarchive
    assert register(srv, invite(admin, identityHint=erin)["code"], erin).status_code == 409
    assert not [t for t in ok(admin.get("/api/auth/tokens"))["tokens"]
                if t["identity"] == erin and t["revokedAt"] is None]


async def test_admin_restores_an_archived_identity_with_rights_from_the_invite(srv):
    """Unarchive, then an invite naming it. A former admin restored by a plain invite is no admin: not
    by its token, not by its users row, and not in the audiences of what happened while it was archived."""
    admin, alice = client(srv, "admin"), client(srv, "alice")
    erin, _ = fresh(srv, "erin", is_admin=True)
    ok(alice.post(f"/api/mailboxes/{erin}/messages", json={"title": "kept for erin"}))
    ok(admin.patch(f"/api/admin/users/{erin}", json=ARCHIVE))
    secret = ok(alice.post("/api/notebook", json={"title": "for bob only", "taggedUsers": ["bob"]}))
    page_id = (secret.get("page") or secret)["id"]
    ok(admin.patch(f"/api/admin/users/{erin}", json={"archivedAt": None}))
    assert register(srv, invite(admin)["code"], erin).status_code == 409  # unhinted: still never reissued
    restored = ok(register(srv, invite(admin, identityHint=erin)["code"], erin))
    assert restored["isAdmin"] is False
    me = client(srv, token=restored["token"])
    assert ok(me.get("/api/auth/verify")) == {"identity": erin, "isAdmin": False}
    row = next(u for u in ok(admin.get("/api/admin/users"))["users"] if u["id"] == erin)
    assert row["isAdmin"] is False and row["archivedAt"] is None
    assert me.get("/api/admin/users").status_code == 403
    assert [m["title"] for m in ok(me.get("/api/mailboxes/me/messages"))["messages"]] == ["kept for erin"]
    assert me.get(f"/api/notebook/{page_id}").status_code == 403  # not visible to a non-admin
    assert page_id not in {e["data"].get("pageId") for e in await replay(srv, restored["token"])}


async def replay(srv, token: str) -> list[dict]:
    """Every logged frame a stream resumed from event 0 replays, up to a marker sent after opening."""
    frames = []
    async with open_stream(srv, None, last_event_id=0, token=token) as stream:
        me = ok(client(srv, token=token).get("/api/auth/verify"))["identity"]
        ok(client(srv, "bob").post(f"/api/mailboxes/{me}/messages", json={"title": "marker"}))
        while True:
            frame = await stream.logged()
            frames.append({"event": frame.event, "data": frame.data or {}})
            if (frame.data or {}).get("title") == "marker":
                return frames


def states(srv) -> dict[str, str]:
    """One name in each state a name can be in (the onboarding skill page's lifecycle)."""
    admin = client(srv, "admin")
    live, _ = fresh(srv, "live")
    revoked, _ = fresh(srv, "revoked")
    token_id = next(t["id"] for t in ok(admin.get("/api/auth/tokens"))["tokens"] if t["identity"] == revoked)
    ok(admin.post(f"/api/auth/tokens/{token_id}/revoke"))
    expired = f"expired{uuid.uuid4().hex[:6]}"
    run_unit(srv, identities.issue_token, expired, False, "old", "admin", utcnow() - timedelta(hours=1))
    archived, _ = fresh(srv, "archived")
    ok(admin.patch(f"/api/admin/users/{archived}", json=ARCHIVE))
    unarchived, _ = fresh(srv, "unarch")
    ok(admin.patch(f"/api/admin/users/{unarchived}", json=ARCHIVE))
    ok(admin.patch(f"/api/admin/users/{unarchived}", json={"archivedAt": None}))
    ok(client(srv, token=TOKENS_EVE).post("/api/auth/setup-profile", json={"displayName": "Eve"}))  # a users row
    ok(admin.patch("/api/admin/users/eve", json=ARCHIVE))
    return {live: "live", revoked: "dormant", expired: "dormant", unarchived: "dormant", archived: "archived",
            "alice": "environment", "eve": "environment (archived)", "admin": "environment"}


TOKENS_EVE = EXTRA_ENV["SERVICE_TOKEN_EVE"]


def test_rule_every_existing_name_is_409_and_only_an_invite_naming_a_dormant_one_restores(srv):
    admin = client(srv, "admin")
    by_name = states(srv)
    unhinted = invite(admin, maxUses=len(by_name))
    for name, state in by_name.items():
        refused = register(srv, unhinted["code"], name)
        assert refused.status_code == 409 and set(refused.json()) == {"error"}, (state, refused.text)
    assert use_count(admin, unhinted["id"]) == 0
    for name, state in by_name.items():
        named = invite(admin, identityHint=name)
        answer = register(srv, named["code"], name)
        if state == "dormant":
            assert ok(answer)["identity"] == name
            assert use_count(admin, named["id"]) == 1
        else:
            assert answer.status_code == 409, (state, answer.text)
            assert use_count(admin, named["id"]) == 0
    # the rule's other side: a free name registers once, then exists
    name, _ = fresh(srv, "new")
    assert register(srv, invite(admin)["code"], name).status_code == 409


def test_archived_environment_identity_is_refused_until_unarchived(srv):
    """Item 4: its environment token answers 401 (REST and stream) and its name stays unregistrable."""
    admin, dave = client(srv, "admin"), client(srv, token=DAVE)
    ok(dave.post("/api/auth/setup-profile", json={"displayName": "Dave"}))  # a users row to archive
    ok(admin.patch("/api/admin/users/dave", json=ARCHIVE))
    refused = eventually(lambda: dave.get("/api/auth/verify"), lambda r: r.status_code == 401)
    assert refused.status_code == 401 and set(refused.json()) == {"error"}
    assert dave.get("/api/stream").status_code == 401
    assert register(srv, invite(admin)["code"], "dave").status_code == 409
    assert register(srv, invite(admin, identityHint="dave")["code"], "dave").status_code == 409
    ok(admin.patch("/api/admin/users/dave", json={"archivedAt": None}))
    assert eventually(lambda: dave.get("/api/auth/verify").status_code, lambda s: s == 200) == 200


def test_two_processes_archive_here_register_and_env_token_there(make_server, pg_cluster):
    url = pg_cluster.create_database()
    here = make_server(env=EXTRA_ENV, database_url=url, push_enabled=False)
    there = make_server(env=EXTRA_ENV, database_url=url, push_enabled=False)
    admin_here, admin_there = client(here, "admin"), client(there, "admin")
    erin, token = fresh(here, "erin")
    dave_there = client(there, token=DAVE)
    ok(dave_there.post("/api/auth/setup-profile", json={"displayName": "Dave"}))  # cached as valid there
    ok(client(there, token=token).get("/api/auth/verify"))
    ok(admin_here.patch(f"/api/admin/users/{erin}", json=ARCHIVE))
    ok(admin_here.patch("/api/admin/users/dave", json=ARCHIVE))
    assert register(there, invite(admin_there)["code"], erin).status_code == 409
    assert register(there, invite(admin_there)["code"], "dave").status_code == 409
    assert eventually(lambda: dave_there.get("/api/auth/verify").status_code, lambda s: s == 401) == 401
    assert eventually(lambda: client(there, token=token).get("/api/auth/verify").status_code,
                      lambda s: s == 401) == 401
    ok(admin_there.patch(f"/api/admin/users/{erin}", json={"archivedAt": None}))
    restored = ok(register(here, invite(admin_here, identityHint=erin)["code"], erin))
    assert ok(client(there, token=restored["token"]).get("/api/auth/verify"))["identity"] == erin
    ok(admin_there.patch("/api/admin/users/dave", json={"archivedAt": None}))
    assert eventually(lambda: client(here, token=DAVE).get("/api/auth/verify").status_code,
                      lambda s: s == 200) == 200
