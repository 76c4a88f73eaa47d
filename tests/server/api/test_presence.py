"""GET /api/presence: online state, sources, unread and task counts, persistence across restarts."""
from __future__ import annotations

from coordserver import db
from coordserver.models import Message, Task
from coordserver.timeutil import FrozenClock, iso, to_db
from tests.helpers import client, eventually
from tests.sse_helpers import open_stream, run_unit, wait_for


def _mail_and_tasks():
    now = to_db(db.now())
    for n, (recipient, status) in enumerate([("bob", "unread"), ("bob", "unread"), ("bob", "read"),
                                             ("dave", "unread")]):
        Message.create(recipient=recipient, sender="alice", title=f"m{n}", status=status, created_at=now)
    for status, assignee in [("ready", "bob"), ("in_progress", "bob"), ("review", "carol"), ("done", "bob"),
                             ("ready", None)]:
        Task.create(title=f"t-{status}", creator_user_id="alice", assignee_user_id=assignee, status=status,
                    created_at=now, updated_at=now)


def test_presence_needs_a_token(server):
    with client(server) as anonymous:
        response = anonymous.get("/api/presence")
    assert response.status_code == 401 and "error" in response.json()


def test_presence_lists_known_identities_with_counts(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    run_unit(srv, _mail_and_tasks)
    with client(srv, "alice") as alice:
        presence = alice.get("/api/presence").json()
    assert {"alice", "bob", "carol"} <= set(presence)
    assert "dave" not in presence  # unread mail, but no identity that can act (API.md §18)
    assert presence["alice"] == {"online": True, "lastSeen": iso(clock.now()), "source": "api",
                                 "unread": 0, "tasks": 0, "isAgent": False}
    assert presence["bob"] == {"online": False, "lastSeen": None, "source": None, "unread": 2, "tasks": 2,
                               "isAgent": False}
    assert presence["carol"]["tasks"] == 1

    clock.advance(minutes=6)
    with client(srv, "bob") as bob:
        presence = bob.get("/api/presence").json()
    assert presence["alice"]["online"] is False  # quiet for more than five minutes
    assert presence["bob"]["online"] is True


async def test_an_open_stream_keeps_an_identity_online(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    async with open_stream(srv, "carol"):
        clock.advance(minutes=30)
        with client(srv, "alice") as alice:
            carol = alice.get("/api/presence").json()["carol"]
        assert carol["online"] is True and carol["source"] == "sse"
    with client(srv, "alice") as alice:
        await wait_for(lambda: srv.coord.services.sse.open_streams == 0)
        clock.advance(minutes=6)
        assert alice.get("/api/presence").json()["carol"]["online"] is False


async def test_presence_events_announce_going_online_and_offline(make_server):
    clock = FrozenClock()
    srv = make_server(clock=clock)
    async with open_stream(srv, "bob") as bob:
        with client(srv, "carol") as carol:
            carol.get("/api/presence")
        online = await bob.until(lambda f: f.event == "presence" and f.data["identity"] == "carol")
        assert online.id is None
        assert online.data == {"type": "presence", "identity": "carol", "online": True,
                               "lastSeen": iso(clock.now()), "source": "api"}
        clock.advance(minutes=6)
        srv.call(lambda: _sweep(srv))
        offline = await bob.until(lambda f: f.event == "presence" and f.data["identity"] == "carol")
        assert offline.data["online"] is False


async def test_a_first_request_over_mcp_is_announced_via_mcp(make_server):
    """Ours, additive: the presence event of an identity whose first request came to /mcp says `via: "mcp"`
    (its v1 `source` stays "api"): coordtui's Connect an agent says how the agent connected."""
    srv = make_server()
    async with open_stream(srv, "bob") as bob:
        with client(srv, "carol") as carol:
            carol.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                       headers={"Accept": "application/json, text/event-stream"})
        online = await bob.until(lambda f: f.event == "presence" and f.data["identity"] == "carol")
        assert (online.data["online"], online.data["source"], online.data.get("via")) == (True, "api", "mcp")


async def _sweep(srv):
    srv.coord.services.presence.sweep()


def test_last_seen_survives_a_restart(make_server, tmp_path):
    clock = FrozenClock()
    url = f"sqlite:///{tmp_path / 'presence.db'}"
    srv = make_server(clock=clock, database_url=url)
    with client(srv, "carol") as carol:
        carol.get("/api/users")
    seen_at = clock.now()
    srv.stop()
    clock.advance(hours=2)
    again = make_server(clock=clock, database_url=url)
    with client(again, "alice") as alice:
        presence = alice.get("/api/presence").json()
    assert presence["carol"] == {"online": False, "lastSeen": iso(seen_at), "source": "api", "unread": 0,
                                 "tasks": 0, "isAgent": False}


def test_a_worker_answers_presence_for_identities_seen_by_another(make_server, pg_cluster):
    """Two server processes on one database (workers behind one port): bob talks to the first only;
    the second learns of him from the first's presence flush (bus `presence_seen`)."""
    clock = FrozenClock()
    url = pg_cluster.create_database()
    first, second = make_server(clock=clock, database_url=url), make_server(clock=clock, database_url=url)
    with client(first, "bob") as bob:
        bob.get("/api/users")
    seen_at = clock.now()
    clock.advance(seconds=30)
    first.call(lambda: first.coord.services.presence.flush())
    with client(second, "alice") as alice:
        bob_there = eventually(lambda: alice.get("/api/presence").json()["bob"], lambda b: b["online"])
    assert (bob_there["online"], bob_there["lastSeen"], bob_there["source"]) == (True, iso(seen_at), "api")
