"""API.md §18 users over real HTTP on SQLite and PostgreSQL: setup-profile, user admin, archiving (which
ends the identity's connections on every process), user stats, who is listed, and the superuser."""
from __future__ import annotations

import time
import uuid
from datetime import timedelta

import httpx
import pytest

from coordserver.domain import identities
from coordserver.settings import EnvToken, parse_env_tokens, parse_superuser
from coordserver.timeutil import FrozenClock, utcnow
from tests.helpers import backend_server, client, eventually, ok
from tests.sse_helpers import open_stream, run_unit, server_process, wait_for
from tests.server.realtime.test_revocation import (GRACE, connected_here_admin_elsewhere, ended, register as register_async,
                                  verify_status)

HOOK_HOST = "hooks.test.invalid"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, env={"SERVICE_WEBHOOK_ALLOWED_HOSTS": HOOK_HOST},
                        scheduler_interval_seconds=3600, push_enabled=False) as server:
        yield server


def register(srv, prefix: str = "u") -> tuple[str, str]:
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    admin = client(srv, "admin")
    code = ok(admin.post("/api/auth/invites", json={}))["invite"]["code"]
    return name, ok(admin.post("/api/auth/register", json={"code": code, "identity": name}))["token"]


def listed(c: httpx.Client) -> dict[str, dict]:
    return {u["id"]: u for u in ok(c.get("/api/users"))["users"]}


def test_setup_profile(srv):
    name, token = register(srv)
    me = client(srv, token=token)
    assert ok(me.post("/api/auth/setup-profile", json={"displayName": "  Alice Liddell "})) == {
        "identity": name, "displayName": "Alice Liddell"}
    assert listed(me)[name]["displayName"] == "Alice Liddell"
    for bad in ("", "   ", "x" * 101, 5, None):
        response = me.post("/api/auth/setup-profile", json={"displayName": bad})
        assert response.status_code == 400 and response.json() == {"error": "displayName must be 1–100 characters"}
    assert ok(me.post("/api/auth/setup-profile", json={"displayName": "y" * 100}))["displayName"] == "y" * 100
    assert client(srv).post("/api/auth/setup-profile", json={"displayName": "x"}).status_code == 401


def test_admin_routes_refuse_non_admins(srv):
    alice = client(srv, "alice")
    for method, path in (("GET", "/api/admin/users"), ("PATCH", "/api/admin/users/alice"),
                         ("GET", "/api/admin/user-stats")):
        response = alice.request(method, path, json={"isAdmin": True} if method == "PATCH" else None)
        assert response.status_code == 403 and "error" in response.json()


def test_patch_fields_types_and_404(srv):
    admin = client(srv, "admin")
    name, token = register(srv, "p")
    path = f"/api/admin/users/{name}"
    changed = ok(admin.patch(path, json={"displayName": " Patched ", "isAgent": True,
                                         "avatarUrl": "https://img.example/p.png"}))["user"]
    assert (changed["displayName"], changed["isAgent"], changed["avatarUrl"]) == ("Patched", True,
                                                                                  "https://img.example/p.png")
    assert ok(admin.patch(path, json={"avatarUrl": None}))["user"]["avatarUrl"] is None
    for body in ({"displayName": 5}, {"displayName": ""}, {"displayName": "x" * 101}, {"isAdmin": "yes"},
                 {"isAgent": 1}, {"avatarUrl": "ftp://x"}, {"avatarUrl": 7}, {"archivedAt": "tomorrow"},
                 {"archivedAt": 5}):
        response = admin.patch(path, json=body)
        assert response.status_code == 400 and isinstance(response.json()["error"], str), body
    assert next(u for u in ok(admin.get("/api/admin/users"))["users"] if u["id"] == name)["displayName"] == "Patched"
    missing = admin.patch("/api/admin/users/nobody-here", json={"isAgent": True})
    assert missing.status_code == 404 and missing.json() == {"error": "User not found"}
    # isAdmin is the identity's: its live token follows at once (another worker's token cache when
    # the NOTIFY arrives: COORD_TEST_WORKERS)
    me = client(srv, token=token)
    assert ok(me.get("/api/auth/verify"))["isAdmin"] is False
    assert ok(admin.patch(path, json={"isAdmin": True}))["user"]["isAdmin"] is True
    assert eventually(lambda: ok(me.get("/api/auth/verify"))["isAdmin"], lambda admin_now: admin_now) is True
    assert me.get("/api/admin/users").status_code == 200
    ok(admin.patch(path, json={"isAdmin": False}))
    assert eventually(lambda: me.get("/api/admin/users").status_code, lambda status: status == 403) == 403


def test_archiving_revokes_refuses_new_work_and_unlists(srv):
    admin, alice = client(srv, "admin"), client(srv, "alice")
    name, token = register(srv, "arch")
    me = client(srv, token=token)
    assert name in listed(alice) and name in ok(alice.get("/api/presence"))
    ok(alice.post(f"/api/mailboxes/{name}/messages", json={"title": "before"}))
    dm = ok(alice.post("/api/chat/channels", json={"type": "dm", "identity": name}))["channelId"]
    from_them = ok(me.post("/api/mailboxes/alice/messages", json={"title": "from the archived-to-be"}))
    archived = ok(admin.patch(f"/api/admin/users/{name}", json={"archivedAt": "2026-03-01T10:00:00+01:00"}))["user"]
    assert archived["archivedAt"] == "2026-03-01T09:00:00.000Z"
    # the other workers' token caches drop the tokens when the NOTIFY arrives (COORD_TEST_WORKERS)
    assert eventually(lambda: me.get("/api/auth/verify").status_code, lambda status: status == 401) == 401
    tokens = [t for t in ok(admin.get("/api/auth/tokens"))["tokens"] if t["identity"] == name]
    assert tokens and all(t["revokedAt"] for t in tokens)
    assert name not in listed(alice) and name not in ok(alice.get("/api/presence"))
    admin_rows = {u["id"]: u for u in ok(admin.get("/api/admin/users"))["users"]}
    assert admin_rows[name]["archivedAt"] is not None  # the admin list keeps archived users
    ids = [u["id"] for u in ok(admin.get("/api/admin/users"))["users"]]
    assert ids == sorted(ids)
    refused = alice.post(f"/api/mailboxes/{name}/messages", json={"title": "after"})
    assert refused.status_code == 400 and refused.json() == {"error": "Invalid recipient mailbox"}
    assert alice.post("/api/chat/channels", json={"type": "dm", "identity": name}).status_code == 400
    assert alice.post("/api/swarm/tasks", json={"title": "t", "assigneeUserId": name}).status_code == 400
    assert alice.post(f"/api/chat/channels/{dm}/messages", json={"body": "still there?"}).status_code == 400
    refused = alice.post(f"/api/mailboxes/me/messages/{from_them['id']}/reply", json={"body": "re"})
    assert refused.status_code == 400 and refused.json() == {"error": "Invalid recipient mailbox"}
    # unarchiving gives no token back
    assert ok(admin.patch(f"/api/admin/users/{name}", json={"archivedAt": None}))["user"]["archivedAt"] is None
    assert me.get("/api/auth/verify").status_code == 401
    assert name not in listed(alice)  # no live token: cannot act
    assert ok(alice.post(f"/api/mailboxes/{name}/messages", json={"title": "back"}))["recipient"] == name


def test_only_identities_that_can_act_are_listed(srv):
    alice, admin = client(srv, "alice"), client(srv, "admin")
    revoked_name, _ = register(srv, "rev")
    token_id = next(t["id"] for t in ok(admin.get("/api/auth/tokens"))["tokens"] if t["identity"] == revoked_name)
    ok(admin.post(f"/api/auth/tokens/{token_id}/revoke"))
    expired_name = f"exp{uuid.uuid4().hex[:6]}"
    run_unit(srv, identities.issue_token, expired_name, False, "old", "admin", utcnow() - timedelta(hours=1))
    users, presence = listed(alice), ok(alice.get("/api/presence"))
    for gone in (revoked_name, expired_name):
        assert gone not in users and gone not in presence
    assert {"alice", "bob", "carol"} <= set(users) and "admin" not in users
    assert {"alice", "bob", "carol", "admin"} <= set(presence)


async def test_user_stats(srv):
    admin, alice = client(srv, "admin"), client(srv, "alice")
    quiet, _ = register(srv, "quiet")
    hooked, hooked_token = register(srv, "hook")
    ok(client(srv, token=hooked_token).post("/api/auth/webhook", json={"url": f"https://{HOOK_HOST}/in"}))
    seen, seen_token = register(srv, "seen")
    ok(client(srv, token=seen_token).get("/api/auth/verify"))
    first = ok(alice.post(f"/api/mailboxes/{seen}/messages", json={"title": "one"}))
    ok(alice.post(f"/api/mailboxes/{seen}/messages", json={"title": "two"}))
    ok(client(srv, token=seen_token).post(f"/api/mailboxes/me/messages/{first['id']}/ack"))
    ok(client(srv, token=seen_token).post(f"/api/mailboxes/me/messages/{first['id']}/pending"))
    ok(alice.post("/api/swarm/tasks", json={"title": "a", "assigneeUserId": seen}))
    ok(alice.post("/api/swarm/tasks", json={"title": "b", "assigneeUserId": seen, "status": "in_progress"}))
    async with open_stream(srv, "bob"):
        # Under COORD_TEST_WORKERS the stream, the requests of `seen` and this one may be on different workers:
        # the answering worker hears of them on the bus (streams at once, presence within a flush).
        stats = eventually(lambda: ok(admin.get("/api/admin/user-stats"))["users"],
                           lambda users: users["bob"]["connection"] == "sse" and users[seen]["presence"]["online"])
    assert stats[seen] == {"inbox": {"unread": 1, "pending": 1, "read": 1, "total": 2},
                           "swarm": {"ready": 1, "in_progress": 1},
                           "presence": {"online": True, "lastSeen": stats[seen]["presence"]["lastSeen"],
                                        "source": "api"},
                           "connection": "api"}
    assert stats[seen]["presence"]["lastSeen"] is not None
    assert stats["bob"]["connection"] == "sse"
    assert stats[hooked]["connection"] == "webhook"
    assert stats[quiet] == {"inbox": {"unread": 0, "pending": 0, "read": 0, "total": 0}, "swarm": {},
                            "presence": {"online": False, "lastSeen": None, "source": None}, "connection": "none"}


async def test_user_stats_count_a_stream_held_by_another_worker(make_server, pg_cluster):
    """Two server processes on one database (workers behind one port): bob's stream is on the first;
    the second's user stats say he is reached over a stream until it closes, and forget a worker that
    has said nothing for three heartbeats (one that died)."""
    clock = FrozenClock()
    url = pg_cluster.create_database()
    first, second = make_server(clock=clock, database_url=url), make_server(clock=clock, database_url=url)
    admin = client(second, "admin")

    def bob_on_second():
        return ok(admin.get("/api/admin/user-stats"))["users"]["bob"]["connection"]
    async with open_stream(first, "bob"):
        assert eventually(bob_on_second, lambda connection: connection == "sse") == "sse"
        assert "bob" not in second.coord.services.sse.streaming_identities()  # not here: elsewhere
        clock.advance(seconds=second.coord.settings.sse_heartbeat_seconds * 3 + 1)  # no refresh heard since
        assert bob_on_second() != "sse"
        first.call(lambda: _refresh_streams(first))  # the first worker's next heartbeat
        assert eventually(bob_on_second, lambda connection: connection == "sse") == "sse"
    assert eventually(bob_on_second, lambda connection: connection != "sse") != "sse"  # its last one closed


async def _refresh_streams(server) -> None:
    hub = server.coord.services.sse
    hub.elsewhere.refresh(hub.by_identity)


def test_superuser_from_the_environment(make_server, database_url):
    srv = make_server(env={"SUPERUSER_TOKEN": "root-token-00000000000000000", "SUPERUSER_NAME": "Root",
                           "SUPERUSER_DISPLAY_NAME": "Root User"}, database_url=database_url)
    root = client(srv, token="root-token-00000000000000000")
    assert ok(root.get("/api/auth/verify")) == {"identity": "root", "isAdmin": True}
    row = listed(client(srv, "alice"))["root"]
    assert (row["displayName"], row["isAdmin"]) == ("Root User", True)
    assert ok(root.get("/api/admin/users"))["users"]
    default = make_server(env={"SUPERUSER_TOKEN": "super-token-0000000000000000"})
    superuser = client(default, token="super-token-0000000000000000")
    assert ok(superuser.get("/api/auth/verify")) == {"identity": "admin", "isAdmin": True}
    assert "admin" not in listed(superuser)
    assert next(u for u in ok(superuser.get("/api/admin/users"))["users"] if u["id"] == "admin")["displayName"] == "Admin"


@pytest.mark.single_process  # `here` is one process (its hub is watched); `other` is the second
async def test_archiving_on_one_process_closes_streams_and_sockets_on_another(make_server, pg_cluster):
    url = pg_cluster.create_database()
    here = make_server(database_url=url)
    with server_process(url) as other:
        _token_id, token = await register_async(here.url, "dave")
        async with connected_here_admin_elsewhere(here, other, "dave", token) as (editor, stream, admin):
            archived = await admin.patch("/api/admin/users/dave", json={"archivedAt": "2026-03-01T00:00:00Z"})
            assert archived.status_code == 200, archived.text
            started = time.monotonic()
            assert await ended(stream) == "closing: identity archived"
            assert await editor.closed(GRACE) == (4001, "Identity archived")
            assert time.monotonic() - started < GRACE
            assert await verify_status(here.url, token) == 401
            assert await verify_status(other, token) == 401


def test_superuser_settings():
    assert parse_superuser({}) is None and parse_superuser({"SUPERUSER_NAME": "root"}) is None
    assert parse_superuser({"SUPERUSER_TOKEN": "t", "SUPERUSER_NAME": " Root "}) == ("root", "Root", False)
    assert parse_superuser({"SUPERUSER_TOKEN": "t", "SUPERUSER_DISPLAY_NAME": "Boss"}) == ("admin", "Boss", True)
    with pytest.raises(ValueError):
        parse_superuser({"SUPERUSER_TOKEN": "t", "SUPERUSER_NAME": "not a name"})
    assert parse_env_tokens({"SUPERUSER_TOKEN": "t", "SUPERUSER_NAME": "root"})["t"] == EnvToken("root", True,
                                                                                                 "SUPERUSER_TOKEN")
    # an older variable naming the same token keeps its meaning
    assert parse_env_tokens({"SUPERUSER_TOKEN": "t", "SERVICE_TOKEN_BOB": "t"})["t"].identity == "bob"


def test_the_last_active_admin_is_neither_archived_nor_demoted(make_server, database_url):
    """409 with a clear error, and nothing written; with another admin that can act, the same change is allowed."""
    server = make_server(database_url=database_url)
    admin = client(server, "admin")
    for body, verb in (({"archivedAt": utcnow().isoformat()}, "archived"), ({"isAdmin": False}, "demoted")):
        response = admin.patch("/api/admin/users/admin", json=body)
        assert response.status_code == 409, response.text
        assert response.json() == {"error": f"admin is the only active admin and cannot be {verb}: "
                                            "make another admin first"}
    users = {u["id"]: (u["isAdmin"], u["archivedAt"]) for u in ok(admin.get("/api/admin/users"))["users"]}
    assert users["admin"] == (True, None), "refused: nothing written"

    name, token = register(server, "boss")
    ok(admin.patch(f"/api/admin/users/{name}", json={"isAdmin": True}))
    assert ok(admin.patch("/api/admin/users/admin", json={"isAdmin": False}))["user"]["isAdmin"] is False
    boss = client(server, token=token)
    response = boss.patch(f"/api/admin/users/{name}", json={"archivedAt": utcnow().isoformat()})
    assert response.status_code == 409 and "only active admin" in response.json()["error"]
