"""Issue 32 items 2 and 5 over the real /mcp on SQLite and PostgreSQL, and with two server processes on
one PostgreSQL: one identity cannot exhaust MCP sessions for everyone (at most SESSIONS_PER_IDENTITY
open, the oldest closed), /mcp is rate-limited like REST (per identity; per address for refused tokens,
the same window on every door), a request naming another identity's session changes nothing, and the
server log never shows a session id in full."""
from __future__ import annotations

import logging
import uuid

import httpx
import pytest

from coordserver.mcp.endpoint import MAX_SESSIONS, SESSION_IDLE_SECONDS
from coordserver.mcp.wake_listeners import SESSIONS_PER_IDENTITY
from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import TOKENS, backend_url, base_env, client, eventually, ok
from tests.server.mcp.test_mcp import GRACE, assert_notified, connect, succeeded, wake_watch
from tests.server.realtime.test_revocation import register

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
VERSION = "2025-06-18"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": VERSION, "capabilities": {},
                         "clientInfo": {"name": "probe", "version": "1"}}}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
ACCEPT = "application/json, text/event-stream"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    """One process: these tests look into its MCP session table (two processes: the last tests)."""
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


def headers(token: str, session_id: str | None = None) -> dict:
    found = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "MCP-Protocol-Version": VERSION}
    if session_id:
        found["Mcp-Session-Id"] = session_id
    return found


def initialize(http: httpx.Client, token: str) -> httpx.Response:
    return http.post("/mcp", json=INITIALIZE, headers=headers(token))


def open_session(http: httpx.Client, token: str) -> str:
    answer = initialize(http, token)
    assert answer.status_code == 200, answer.text
    return answer.headers["mcp-session-id"]


def usable(http: httpx.Client, token: str, session_id: str) -> bool:
    answer = http.post("/mcp", json=TOOLS_LIST, headers=headers(token, session_id))
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code == 200


def sessions_of(srv, identity: str) -> int:
    return sum(1 for s in srv.coord.services.mcp.sessions.values() if s.identity == identity)


def test_the_documented_limits():
    assert SESSIONS_PER_IDENTITY == 20 and SESSION_IDLE_SECONDS <= 600 and MAX_SESSIONS <= 1000


async def test_one_identity_keeps_its_newest_sessions_and_the_oldest_close(srv):
    identity = f"flood{uuid.uuid4().hex[:6]}"
    _id, token = await register(srv.url, identity)
    with httpx.Client(base_url=srv.url, timeout=30) as http:
        opened = [open_session(http, token) for _ in range(SESSIONS_PER_IDENTITY + 5)]
        assert eventually(lambda: sessions_of(srv, identity), lambda n: n == SESSIONS_PER_IDENTITY) == 20
        assert eventually(lambda: [usable(http, token, s) for s in opened[:5]], lambda u: not any(u)) == [False] * 5
        assert all(usable(http, token, s) for s in opened[5:])
    assert len(srv.coord.services.mcp_endpoint.manager._server_instances) <= MAX_SESSIONS


async def test_rule_no_identity_can_fill_the_session_table_for_the_others(srv):
    """With room for 2 × SESSIONS_PER_IDENTITY + 5 sessions, two identities flooding leave room for a third."""
    manager = srv.coord.services.mcp_endpoint.manager
    saved, manager.max_sessions = manager.max_sessions, len(manager._server_instances) + 2 * SESSIONS_PER_IDENTITY + 5
    try:
        flooders = [await register(srv.url, f"fl{uuid.uuid4().hex[:6]}") for _ in range(2)]
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            for _id, token in flooders:
                for _ in range(SESSIONS_PER_IDENTITY * 2):
                    assert initialize(http, token).status_code == 200
        async with connect(srv.url, "carol") as carol:
            assert succeeded(await carol.call_tool("presence", {}))
    finally:
        manager.max_sessions = saved


async def test_a_delete_with_another_identitys_session_id_changes_nothing(srv, caplog):
    """Item 5: bob's DELETE naming the victim's session answers 404, and the victim is still woken."""
    caplog.set_level(logging.DEBUG)
    victim = f"v{uuid.uuid4().hex[:6]}"
    token_id, token = await register(srv.url, victim)
    hub = srv.coord.services.mcp
    async with wake_watch(srv.url, token, "legacy") as updates:
        session_id = next(s for s, v in hub.sessions.items() if v.identity == victim)
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            for method in ("DELETE", "GET"):
                answer = http.request(method, "/mcp", headers=headers(TOKENS["bob"], session_id))
                assert answer.status_code == 404, (method, answer.text)
        assert session_id in hub.sessions and hub.has_listener(victim)
        await assert_notified(updates, lambda: client(srv, "alice").post(
            f"/api/mailboxes/{victim}/messages", json={"title": "still woken"}))
        # and the victim's session still ends with its token (it had not been detached from the guard)
        ok(client(srv, "admin").post(f"/api/auth/tokens/{token_id}/revoke"))
        assert eventually(lambda: session_id in srv.coord.services.mcp_endpoint.manager._server_instances,
                          lambda alive: not alive, timeout=GRACE * 3) is False
    server_side = ("mcp.server", "mcp.shared", "coord", "hypercorn", "quart", "asyncio")
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(server_side))
    assert session_id[:4] + "***" in logged  # the SDK did log it, masked
    assert session_id not in logged


def test_rule_session_ids_are_masked_in_any_log_line():
    from coordserver.redaction import SessionIdMask, mask_session_ids
    sid = uuid.uuid4().hex
    assert mask_session_ids(f"session {sid} idle; {sid.upper()}") == f"session {sid[:4]}*** idle; {sid.upper()[:4]}***"
    record = logging.LogRecord("mcp.x", logging.INFO, __file__, 1, "Created new transport with session ID: %s",
                               (sid,), None)
    SessionIdMask().filter(record)
    assert sid not in record.getMessage() and sid[:4] in record.getMessage()


@pytest.fixture(params=["sqlite", "postgresql"])
def limited(request, tmp_path_factory):
    env = base_env(backend_url(request, tmp_path_factory), COORD_RATE_LIMITS="on",
                   COORD_RATE_LIMIT_OVERRIDES='{"mcp": 30}')
    with ServerThread(Settings.from_env(env)) as server:
        yield server


def test_mcp_is_rate_limited_per_identity(limited):
    with httpx.Client(base_url=limited.url, timeout=30) as http:
        answers = [http.post("/mcp", json=TOOLS_LIST, headers=headers(TOKENS["alice"])).status_code
                   for _ in range(31)]
        assert answers[-1] == 429 and 429 not in answers[:30]
        limited_answer = http.post("/mcp", json=TOOLS_LIST, headers=headers(TOKENS["alice"]))
        assert limited_answer.json()["error"].startswith("Too many requests") and limited_answer.headers["Retry-After"]
        assert http.post("/mcp", json=TOOLS_LIST, headers=headers(TOKENS["bob"])).status_code != 429


def test_refused_tokens_are_limited_per_address_on_every_door(limited):
    """Item 2: 20 guessed tokens, then 429, on /mcp as on /api/auth/verify (one window for both)."""
    with httpx.Client(base_url=limited.url, timeout=30) as http:
        for i in range(20):
            door = ("/mcp", "/api/auth/verify")[i % 2]
            answer = http.post(door, json=TOOLS_LIST, headers=headers(f"guess-{i}"))
            assert answer.status_code == 401, (i, answer.text)
        for method, door in (("POST", "/mcp"), ("POST", "/api/auth/verify"), ("GET", "/api/wake")):
            answer = http.request(method, door, json=TOOLS_LIST if method == "POST" else None,
                                  headers=headers("guess-more"))
            assert answer.status_code == 429 and set(answer.json()) == {"error"}, (door, answer.text)
            assert int(answer.headers["Retry-After"]) >= 1
        assert http.get("/api/auth/verify", headers={"Authorization": f"Bearer {TOKENS['alice']}"}).status_code == 200


async def test_two_processes_cap_sessions_and_ignore_foreign_deletes(make_server, pg_cluster):
    """Items 2 and 5 with two servers on one PostgreSQL: each process keeps at most 20 sessions of the
    flooder and serves others; bob's DELETEs of the victim's session on either process change nothing."""
    url = pg_cluster.create_database()
    here, there = make_server(database_url=url), make_server(database_url=url)
    _id, flood = await register(here.url, f"fl{uuid.uuid4().hex[:6]}")
    for server in (here, there):
        with httpx.Client(base_url=server.url, timeout=30) as http:
            for _ in range(SESSIONS_PER_IDENTITY + 3):
                open_session(http, flood)
            assert open_session(http, TOKENS["bob"])
    victim = f"v{uuid.uuid4().hex[:6]}"
    _id, token = await register(here.url, victim)
    async with wake_watch(here.url, token, "legacy") as updates:
        hub = here.coord.services.mcp
        session_id = next(s for s, v in hub.sessions.items() if v.identity == victim)
        for server in (there, here):
            with httpx.Client(base_url=server.url, timeout=30) as http:
                assert http.delete("/mcp", headers=headers(TOKENS["bob"], session_id)).status_code == 404
        await assert_notified(updates, lambda: client(there, "alice").post(
            f"/api/mailboxes/{victim}/messages", json={"title": "from the other process"}))
    for server in (here, there):
        counts = {}
        for session in server.coord.services.mcp.sessions.values():
            counts[session.identity] = counts.get(session.identity, 0) + 1
        assert max(counts.values()) <= SESSIONS_PER_IDENTITY
