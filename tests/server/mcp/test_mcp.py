"""/mcp through the SDK's own client (`mcp.client.streamable_http`) against the real server, on SQLite and
PostgreSQL, in both eras of the protocol (the 2025 handshake with sessions, and 2026-07-28): every tool
succeeds and is refused like its REST route, resources, the triage prompt, 401, revocation, wake push."""
from __future__ import annotations

import asyncio
import re
import time
import uuid
from contextlib import asynccontextmanager

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from coordserver.mcp import tools
from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import TOKENS, async_client, backend_url, base_env, client, ok
from tests.server.realtime.test_revocation import register

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
ERAS = ["legacy", "auto"]  # auto: server/discover, then 2026-07-28
GRACE = 1.0  # the bound for push and for a revoked session to end
MISSING = str(uuid.uuid4())


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    """One process even under COORD_TEST_WORKERS: a 2025-era session lives in the worker that opened it
    (docs/deploy.md), and these tests look into the server's MCP state. Several processes: see
    test_wake_push_crosses_processes_on_postgresql."""
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


@asynccontextmanager
async def connect(server_url: str, who: str | None = None, token: str | None = None, mode: str = "legacy",
                  **kwargs):
    token = token or TOKENS[who]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(streamable_http_client(server_url + "/mcp", http_client=http), mode=mode,
                            **kwargs) as session:
        yield session


def rest(srv, who: str, tool_name: str, arguments: dict) -> httpx.Response:
    """What the tool's REST route answers to the same input, sent as a REST client would."""
    tool = tools.BY_NAME[tool_name]
    path, rest_args = tool.path, dict(arguments)
    for name in re.findall(r"\{(\w+)\}", tool.path):
        path = path.replace("{" + name + "}", str(rest_args.pop(name)))
    with client(srv, who) as http:
        if tool.method in ("GET", "DELETE"):
            return http.request(tool.method, path, params={k: (
                "true" if v is True else "false" if v is False else ",".join(map(str, v)) if isinstance(v, list) else v)
                for k, v in rest_args.items()})
        return http.request(tool.method, path, json={**rest_args, **tool.fixed})


def succeeded(result: types.CallToolResult) -> dict:
    """The route's answer a successful call carries (without `untrusted`, the provenance of what others wrote:
    test_mcp_fence.py)."""
    assert not result.is_error, result.content[0].text
    assert len(result.content[0].text.splitlines()) == 1  # the one-line summary
    return {k: v for k, v in result.structured_content.items() if k != "untrusted"}


def refused(result: types.CallToolResult, message: str | None = None) -> dict:
    assert result.is_error, result.content
    assert result.structured_content["error"] == result.content[0].text
    if message is not None:
        assert result.content[0].text == message
    return result.structured_content


@pytest.mark.parametrize("mode", ERAS)
async def test_initialize_lists_the_tools_with_their_schemas(srv, mode):
    async with connect(srv.url, "alice", mode=mode) as session:
        assert (session.protocol_version == "2026-07-28") == (mode == "auto")
        listed = (await session.list_tools()).tools
        assert [t.name for t in listed] == [t.name for t in tools.TOOLS]
        assert len(listed) == 48
        send = next(t for t in listed if t.name == "send_message")
        assert send.input_schema["type"] == "object"
        assert "recipient" in send.input_schema["required"] and "replyToMessageId" in send.input_schema["properties"]
        assert send.input_schema["additionalProperties"] is False
        move = next(t for t in listed if t.name == "move_task")
        status = move.input_schema["properties"]["status"]
        assert any("holding" in branch.get("enum", ()) for branch in [status, *status.get("anyOf", ())])
        assert all(t.output_schema["type"] == "object" for t in listed)  # so the SDK checks every answer
        assert "entries" in next(t for t in listed if t.name == "directory").output_schema["required"]
        assert session.server_capabilities.tools is not None
        assert session.server_capabilities.resources.subscribe


async def test_every_tool_succeeds_like_its_route(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        mail = ok(bob.post("/api/mailboxes/alice/messages", json={"title": "Deploy?", "body": "at 3"}))
        channel = ok(bob.post("/api/chat/channels", json={"type": "dm", "identity": "alice"}))["channelId"]
        ok(bob.post(f"/api/chat/channels/{channel}/messages", json={"body": "hello alice"}))
        project = ok(alice.post("/api/swarm/projects", json={"title": "MCP", "color": "#123456"}))
        page = ok(alice.post("/api/notebook", json={"title": "Runbook", "content": "one"}))["page"]
        ok(alice.post("/api/directory", json={"title": "Docs", "url": "https://docs.example.com"}))
        hook = ok(alice.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "CI"}))
        ok(alice.post(f"/api/ingest/ci/{hook['token']}", json={"title": "Build failed"}))
        workflow = ok(alice.post("/api/swarm/workflows", json={"title": "Release"}))
    async with connect(srv.url, "alice") as s:
        call = s.call_tool
        sent = succeeded(await call("send_message", {"recipient": "bob", "title": "From MCP", "urgent": True}))
        assert sent["sender"] == "alice" and sent["urgent"] is True
        with client(srv, "bob") as bob:
            assert any(m["id"] == sent["id"] for m in ok(bob.get("/api/mailboxes/me/messages"))["messages"])
        wake = succeeded(await call("wake", {}))
        assert any(i["source"] == "message" and i["id"] == mail["id"] for i in wake["items"])
        inbox = succeeded(await call("list_inbox", {"status": "unread"}))
        assert inbox == rest(srv, "alice", "list_inbox", {"status": "unread"}).json()
        assert [m["id"] for m in succeeded(await call("search_messages", {"q": "Deploy"}))["messages"]] == [mail["id"]]
        answer = succeeded(await call("reply", {"id": mail["id"], "body": "yes"}))
        assert answer["recipient"] == "bob" and answer["title"] == "Re: Deploy?"
        assert succeeded(await call("set_pending", {"id": mail["id"]}))["responseWaiting"] is True
        assert succeeded(await call("clear_pending", {"id": mail["id"]}))["responseWaiting"] is False
        assert succeeded(await call("ack_messages", {"ids": [mail["id"], 999999]})) == \
            {"success": [mail["id"]], "notFound": [999999]}
        channels = succeeded(await call("chat_channels", {}))["channels"]
        assert next(c for c in channels if c["id"] == channel)["unread_count"] == 1
        assert [m["body"] for m in succeeded(await call("chat_read", {"channelId": channel}))["messages"]] == \
            ["hello alice"]
        assert succeeded(await call("chat_send", {"channelId": channel, "body": "hi bob"}))["body"] == "hi bob"
        assert succeeded(await call("chat_mark_read", {"channelId": channel})) == {"ok": True}
        task = succeeded(await call("create_task", {"title": "Ship MCP", "projectId": project["id"]}))
        assert task["status"] == "ready" and task["projectId"] == project["id"]
        assert succeeded(await call("update_task", {"taskId": task["id"], "detail": "soon"}))["detail"] == "soon"
        assert succeeded(await call("update_task", {"taskId": task["id"], "detail": None}))["detail"] is None
        claimed = succeeded(await call("claim_task", {"taskId": task["id"]}))
        assert claimed["status"] == "in_progress" and claimed["assigneeUserId"] == "alice"
        held = succeeded(await call("move_task", {"taskId": task["id"], "status": "holding", "reason": "vendor"}))
        assert held["status"] == "holding"
        listed = succeeded(await call("list_tasks", {"statuses": ["holding"], "assignee": "me"}))["tasks"]
        assert [t["id"] for t in listed] == [task["id"]]
        assert project["id"] in [p["id"] for p in succeeded(await call("list_projects", {}))["projects"]]
        with client(srv, "alice") as alice:
            ok(alice.post(f"/api/swarm/tasks/{task['id']}/workflows", json={"workflowId": workflow["id"]}))
        assert [w["id"] for w in succeeded(await call("task_workflows", {"taskId": task["id"]}))["workflows"]] == \
            [workflow["id"]]
        assert page["id"] in [p["id"] for p in succeeded(await call("notebook_search", {"q": "runbook"}))["pages"]]
        assert succeeded(await call("notebook_read", {"pageId": page["id"]}))["page"]["content"] == "one"
        edited = succeeded(await call("notebook_edit", {"pageId": page["id"], "content": "one two"}))
        assert edited["page"]["content"] == "one two"
        with client(srv, "alice") as alice:
            assert ok(alice.get(f"/api/notebook/{page['id']}"))["page"]["content"] == "one two"
        versions = succeeded(await call("notebook_versions", {"pageId": page["id"]}))["versions"]
        assert [v["reason"] for v in versions] == ["created"]
        kept = succeeded(await call("notebook_checkpoint", {"pageId": page["id"], "label": "from MCP"}))["version"]
        assert kept["label"] == "from MCP" and kept["editors"] == ["alice"] and kept["size"] == 7
        first = {"pageId": page["id"], "versionId": versions[0]["id"]}
        assert succeeded(await call("notebook_version", first))["version"]["content"] == "one"
        restored = succeeded(await call("notebook_restore", first))
        assert restored["page"]["content"] == "one" and restored["version"]["reason"] == "restore"
        with client(srv, "alice") as alice:
            assert ok(alice.get(f"/api/notebook/{page['id']}"))["page"]["content"] == "one"
        entries = succeeded(await call("directory", {"q": "docs"}))["entries"]
        assert entries == rest(srv, "alice", "directory", {"q": "docs"}).json()
        link = succeeded(await call("update_link", {"entryId": entries[0]["id"], "title": "Docs v2",
                                                    "description": "the handbook", "taggedUsers": ["bob"]}))
        assert link == {**entries[0], "title": "Docs v2", "description": "the handbook", "taggedUsers": ["bob"]}
        assert rest(srv, "alice", "directory", {"q": "docs"}).json() == [link]
        events = succeeded(await call("buzz_events", {"appName": "ci"}))["events"]
        assert [e["title"] for e in events] == ["Build failed"]
        assert succeeded(await call("presence", {}))["alice"]["online"] is True
        assert succeeded(await call("doctor", {}))["status"] in ("pass", "warn", "fail")


async def test_every_tool_is_refused_with_our_error(srv):
    with client(srv, "bob") as bob:
        theirs = ok(bob.post("/api/swarm/tasks", json={"title": "Bob's", "assigneeUserId": "bob"}))
        queued = ok(bob.post("/api/swarm/tasks", json={"title": "Later", "status": "queued"}))
    route_refusals = {  # the route says no: the tool carries the route's own error body
        "send_message": {"recipient": "nobody", "title": "x"},
        "list_inbox": {"cursor": "not-a-cursor"},
        "search_messages": {"q": " "},
        "ack_messages": {"ids": [0]},
        "reply": {"id": 999999, "body": "x"},
        "set_pending": {"id": 999999},
        "clear_pending": {"id": 999999},
        "chat_read": {"channelId": MISSING},
        "chat_send": {"channelId": MISSING, "body": "  "},
        "chat_mark_read": {"channelId": MISSING},
        "create_task": {"title": " "},
        "update_task": {"taskId": MISSING, "title": "x"},
        "move_task": {"taskId": queued["id"], "status": "complete"},
        "claim_task": {"taskId": theirs["id"]},
        "task_workflows": {"taskId": MISSING},
        "list_tasks": {"statuses": ["done"]},  # the route's query model takes them; its rule refuses "done"
        "notebook_read": {"pageId": MISSING},
        "notebook_edit": {"pageId": MISSING, "title": "x"},
        "ask_human": {"to": "nobody", "question": "x", "options": ["a", "b"], "wait_seconds": 0},
        "get_ask": {"askId": 999999},
        "answer_ask": {"askId": 999999, "option": 1},
        "notebook_versions": {"pageId": MISSING},
        "notebook_version": {"pageId": MISSING, "versionId": 1},
        "notebook_checkpoint": {"pageId": MISSING, "label": "x"},
        "notebook_restore": {"pageId": MISSING, "versionId": 1},
        "ack_alert": {"alertId": 999999}, "snooze_alert": {"alertId": 999999, "minutes": 5},
        "resolve_alert": {"alertId": 999999}, "update_link": {"entryId": 999999, "title": "x"},
        "preview_silence": {"appName": "nothing", "match": {"title": "x"}},
        "silence_alerts": {"appName": "nothing", "match": {"title": "x"}, "minutes": 5},
        "renew_task_lease": {"taskId": MISSING}, "reserve": {"resource": " ", "ttlSeconds": 60},
        "renew_reservation": {"reservationId": 999999}, "release": {"reservationId": 999999},
        "list_guards": {}, "clear_guard": {"guardId": 999999},  # bob is no admin: 403
    }
    argument_refusals = {  # the arguments do not fit the tool's model
        "wake": {"includeOffHours": "yes"}, "chat_channels": {"archived": "maybe"},
        "list_projects": {"includeArchived": "no"}, "notebook_search": {"limit": 0}, "directory": {"offset": -1},
        "buzz_events": {"limit": "ten"}, "presence": {"who": "me"}, "doctor": {"verbose": True},
        "list_asks": {"role": "both"}, "list_alerts": {"state": "gone"},
        "list_reservations": {"holder": "Not An Identity!"},
    }
    assert set(route_refusals) | set(argument_refusals) == set(tools.BY_NAME)
    async with connect(srv.url, "alice", mode="auto") as s:
        for name, arguments in route_refusals.items():
            body = refused(await s.call_tool(name, arguments))
            answer = rest(srv, "alice", name, arguments)
            assert 400 <= answer.status_code < 500 and body == answer.json(), name
        for name, arguments in argument_refusals.items():
            refused(await s.call_tool(name, arguments))
        refused(await s.call_tool("wake", {"includeOffHours": "yes"}), "includeOffHours must be true or false")
        refused(await s.call_tool("list_inbox", {"limit": 0}), "limit must be at least 1")
        refused(await s.call_tool("send_message", {"recipient": "bob", "titel": "typo"}), "Unknown argument(s): titel")
        move = refused(await s.call_tool("move_task", {"taskId": queued["id"], "status": "complete"}))
        assert move == {"error": "Cannot move task from queued to complete", "allowed": ["ready", "holding", "closed"]}
        refused(await s.call_tool("send_message", {"recipient": "nobody", "title": "x"}), "Invalid recipient mailbox")
        refused(await s.call_tool("no_such_tool", {}), "Unknown tool 'no_such_tool'. tools/list names them.")
        refused(await s.call_tool("notebook_read", {"pageId": "../../api/presence"}))
        # A tool is described by its route's models and path parameters: the same words as the route's own 400s.
        refused(await s.call_tool("set_pending", {"id": "seven"}), "id must be an integer")
        refused(await s.call_tool("chat_mark_read", {}), "channelId is required")
        refused(await s.call_tool("task_workflows", {"taskId": MISSING, "limit": 5}), "Unknown argument(s): limit")
        refused(await s.call_tool("claim_task", {"taskId": MISSING, "status": "closed"}), "Unknown argument(s): status")
        refused(await s.call_tool("chat_read", {"channelId": MISSING, "before": 0}), "Invalid before")
        refused(await s.call_tool("notebook_search", {"limit": 0}), "limit must be at least 1")


@pytest.mark.parametrize("mode", ERAS)
async def test_resources_and_the_triage_prompt(srv, mode):
    with client(srv, "carol") as carol:
        mail = ok(carol.post("/api/mailboxes/bob/messages", json={"title": "Triage me"}))
        skill = carol.get("/api/skill/wake").text
    async with connect(srv.url, "bob", mode=mode) as s:
        uris = [str(r.uri) for r in (await s.list_resources()).resources]
        assert uris[:2] == ["coord://wake", "coord://skill"] and "coord://skill/wake" in uris
        templates = (await s.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["coord://skill/{page}"]
        assert (await s.read_resource("coord://skill/wake")).contents[0].text == skill
        wake = (await s.read_resource("coord://wake")).contents[0]
        assert wake.mime_type == "application/json" and f'"id":{mail["id"]}' in wake.text
        with pytest.raises(Exception, match="No skill page named 'nope'"):
            await s.read_resource("coord://skill/nope")
        prompts = (await s.list_prompts()).prompts
        assert [p.name for p in prompts] == ["triage"]
        triage = await s.get_prompt("triage")
        assert "in the order given" in triage.messages[0].content.text
        assert f'"id":{mail["id"]}' in triage.messages[1].content.resource.text


async def test_no_token_or_a_bad_one_is_401(srv):
    async with httpx.AsyncClient(base_url=srv.url) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        none = await http.post("/mcp", json=body)
        assert none.status_code == 401 and none.headers["www-authenticate"] == "Bearer"
        assert none.json() == {"error": "Authentication required: send Authorization: Bearer <token>"}
        bad = await http.post("/mcp", json=body, headers={"Authorization": "Bearer nope"})
        assert (bad.status_code, bad.json()) == (401, {"error": "Invalid key"})
        metrics = (await http.get("/api/metrics")).text
        assert 'coord_http_requests_total{method="POST",route="/mcp",status="4xx"}' in metrics
    with pytest.raises(Exception):
        async with connect(srv.url, token="nope") as s:
            await s.list_tools()


async def test_a_session_is_bound_to_its_token(srv):
    async with connect(srv.url, "alice") as s:
        session_id = next(iter(srv.coord.services.mcp.sessions))
        assert srv.coord.services.mcp.sessions[session_id].identity == "alice"
        async with async_client(srv, "bob") as bob:  # another identity cannot use alice's session
            answer = await bob.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                                    headers={"Mcp-Session-Id": session_id, "Accept": "application/json, "
                                             "text/event-stream", "MCP-Protocol-Version": s.protocol_version})
            assert answer.status_code == 404
        assert succeeded(await s.call_tool("presence", {}))


@pytest.mark.parametrize("mode", ERAS)
async def test_wake_subscription_is_notified_within_a_second_of_a_rest_send(srv, mode):
    recipient = f"w{uuid.uuid4().hex[:8]}"
    _token_id, token = await register(srv.url, recipient)
    async with wake_watch(srv.url, token, mode) as updates:
        await assert_notified(updates, lambda: client(srv, "alice").post(
            f"/api/mailboxes/{recipient}/messages", json={"title": "wake up"}))


@asynccontextmanager
async def wake_watch(url: str, token: str, mode: str):
    """An MCP client watching coord://wake: yields a queue of the times updates arrived."""
    updates: asyncio.Queue = asyncio.Queue()

    async def on_message(message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification) and message.params.uri == "coord://wake":
            updates.put_nowait(time.monotonic())

    async with connect(url, token=token, mode=mode, message_handler=on_message) as s:
        if mode == "legacy":
            await s.subscribe_resource("coord://wake")
            await asyncio.sleep(0.2)  # the standalone stream opens beside the session
            yield updates
            return
        async with s.listen(resource_subscriptions=["coord://wake"]) as subscription:
            assert subscription.honored.resource_subscriptions == ["coord://wake"]

            async def forward() -> None:
                async for _event in subscription:
                    updates.put_nowait(time.monotonic())
            task = asyncio.ensure_future(forward())
            try:
                yield updates
            finally:
                task.cancel()


async def assert_notified(updates: asyncio.Queue, send) -> None:
    started = time.monotonic()
    response = await asyncio.to_thread(send)
    assert response.status_code == 200, response.text
    arrived = await asyncio.wait_for(updates.get(), 5)
    assert arrived - started < GRACE


@pytest.mark.parametrize("mode", ERAS)
async def test_wake_push_crosses_processes_on_postgresql(pg_cluster, mode):
    from tests.sse_helpers import server_process
    url = pg_cluster.create_database()
    with ServerThread(Settings.from_env(base_env(url))) as here, server_process(url) as other:
        _token_id, token = await register(here.url, "erin")
        async with wake_watch(here.url, token, mode) as updates:
            def send_elsewhere():
                with httpx.Client(base_url=other, headers={"Authorization": f"Bearer {TOKENS['bob']}"}) as http:
                    return http.post("/api/mailboxes/erin/messages", json={"title": "from the other process"})
            await assert_notified(updates, send_elsewhere)


async def test_revoking_the_token_ends_its_session_and_listen_stream(srv):
    identity = f"r{uuid.uuid4().hex[:8]}"
    token_id, token = await register(srv.url, identity)
    hub = srv.coord.services.mcp
    async with connect(srv.url, token=token) as legacy, connect(srv.url, token=token, mode="auto") as modern:
        await legacy.subscribe_resource("coord://wake")
        session_id = next(s for s, v in hub.sessions.items() if v.identity == identity)
        listening = asyncio.ensure_future(_until_listen_ends(modern))
        await asyncio.sleep(0.3)
        assert len(hub.by_identity[identity]) == 2
        with client(srv, "admin") as admin:
            ok(admin.post(f"/api/auth/tokens/{token_id}/revoke"))
        started = time.monotonic()
        assert await asyncio.wait_for(listening, GRACE) == "ended"
        while session_id in hub.manager._server_instances:
            assert time.monotonic() - started < GRACE, "the session outlived its token"
            await asyncio.sleep(0.02)
        assert identity not in hub.by_identity and session_id not in hub.sessions
        async with httpx.AsyncClient(base_url=srv.url) as http:
            after = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                    headers={"Authorization": f"Bearer {token}", "Mcp-Session-Id": session_id})
            assert (after.status_code, after.json()) == (401, {"error": "Invalid key"})
        with pytest.raises(Exception):
            await legacy.call_tool("presence", {})


async def _until_listen_ends(session) -> str:
    async with session.listen(resource_subscriptions=["coord://wake"]) as subscription:
        async for _event in subscription:
            pass
    return "ended"


def test_the_readme_lists_the_tools_the_server_has():
    """The table is `coordserver mcp-tools --markdown`, built from the list the server answers tools/list
    with (test_initialize_lists_the_tools_with_their_schemas checks that list against the server)."""
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    from coordserver.cli import cli
    table = CliRunner().invoke(cli, ["mcp-tools", "--markdown"]).stdout.strip()
    assert table.count("\n") == len(tools.TOOLS) + 1
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    assert table in readme, "README's MCP tool table differs: paste `coordserver mcp-tools --markdown`"
    listed = json.loads(CliRunner().invoke(cli, ["mcp-tools"]).stdout)
    assert [t["name"] for t in listed] == [t.name for t in tools.TOOLS]
    assert listed[0]["inputSchema"]["properties"]["includeOffHours"]["type"] == "boolean"


async def test_coordserver_serve_and_coordtui_serve_both_serve_mcp(tmp_path):
    from coordtui.embedded import EmbeddedServer
    from tests.sse_helpers import server_process
    with server_process(f"sqlite:///{tmp_path / 'served.db'}") as url:
        async with connect(url, "alice") as s:
            assert succeeded(await s.call_tool("send_message", {"recipient": "bob", "title": "served"}))["id"] == 1
    embedded = EmbeddedServer(data_dir=tmp_path / "tui", env={}).start()
    try:
        async with connect(embedded.url, token=embedded.token, mode="auto") as s:
            assert succeeded(await s.call_tool("doctor", {}))["status"] in ("pass", "warn", "fail")
    finally:
        embedded.stop()


async def test_tool_calls_share_their_routes_rate_limit_and_touch_presence(tmp_path):
    env = base_env(f"sqlite:///{tmp_path / 'limited.db'}", COORD_RATE_LIMITS="on",
                   COORD_RATE_LIMIT_OVERRIDES='{"send": 2}')
    with ServerThread(Settings.from_env(env)) as srv:
        await _limited_like_rest(srv)


async def _limited_like_rest(srv) -> None:
    async with connect(srv.url, "carol", mode="auto") as s:
        for _ in range(2):
            succeeded(await s.call_tool("send_message", {"recipient": "bob", "title": "counted"}))
        limited = refused(await s.call_tool("send_message", {"recipient": "bob", "title": "one too many"}))
        assert limited["error"].startswith("Too many requests; retry in ")
        with client(srv, "bob") as bob:  # carol has been seen through /mcp alone
            assert ok(bob.get("/api/presence"))["carol"]["online"] is True
        with client(srv, "carol") as carol:  # the same window as REST's
            assert carol.post("/api/mailboxes/bob/messages", json={"title": "REST"}).status_code == 429


async def test_notebook_edit_is_merged_into_the_live_document(srv):
    from tests.server.realtime.test_notebook_ws import RawClient
    with client(srv, "alice") as alice:
        page = ok(alice.post("/api/notebook", json={"title": "Live", "content": "hello world"}))["page"]
    editor = await RawClient(srv, page["id"], "bob").connect()
    try:
        await editor.wait(lambda c: c.of_type("sync") and c.value == "hello world")
        await editor.edit(len("hello world"), "!")
        async with connect(srv.url, "alice") as s:
            read = succeeded(await s.call_tool("notebook_read", {"pageId": page["id"]}))["page"]["content"]
            assert read == "hello world!"  # the live text, bob's edit included
            await editor.edit(len(read), "?")  # bob goes on typing after alice read
            await asyncio.sleep(0.2)
            edited = read.replace("hello", "hello brave")
            succeeded(await s.call_tool("notebook_edit", {"pageId": page["id"], "content": edited}))
        await editor.wait(lambda c: c.value == "hello brave world!?")  # merged as a diff: bob keeps his "?"
    finally:
        await editor.close()


@pytest.mark.parametrize("mode", ERAS)
async def test_an_agent_listening_over_mcp_alone_stays_online(make_server, mode):
    """A wake listener is an open event stream: its agent is online however long it stays idle, and
    goes offline the usual five minutes after it stops listening."""
    from datetime import datetime, timedelta, timezone

    from coordserver.timeutil import FrozenClock
    clock = FrozenClock(datetime(2026, 3, 2, 12, 0, tzinfo=timezone.utc))
    srv = make_server(clock=clock)
    identity = f"m{uuid.uuid4().hex[:8]}"
    _token_id, token = await register(srv.url, identity)

    def online() -> bool:
        with client(srv, "alice") as alice:
            return ok(alice.get("/api/presence"))[identity]["online"]

    async with wake_watch(srv.url, token, mode):
        clock.advance(minutes=30)
        assert await asyncio.to_thread(online) is True
    deadline = time.monotonic() + GRACE
    while srv.coord.services.mcp.has_listener(identity):
        assert time.monotonic() < deadline, "the listener outlived its connection"
        await asyncio.sleep(0.02)
    clock.advance(minutes=4)
    assert await asyncio.to_thread(online) is True
    clock.advance(minutes=2)
    assert await asyncio.to_thread(online) is False
