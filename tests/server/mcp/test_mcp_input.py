"""Issue 32 items 6 and 8 over the real /mcp on SQLite and PostgreSQL.

6: a lone surrogate (or NUL) in a tool argument that becomes a path or query is a tool error (isError,
   like the REST route's 400), decided before the route is called: never JSON-RPC -32603 or a traceback.
   Sent raw in the 2026-07-28 revision (its parser accepts such escapes; the SDK's client cannot send them).
8: a body the 2025 transport cannot validate (a batch, a message without `method`, ...) gets a plain
   JSON-RPC error that neither echoes the input nor names the validation library.
"""
from __future__ import annotations

import json
import logging

import httpx
import pytest

from coordserver.mcp import tools
from coordserver.mcp.rpc_errors import INVALID_REQUEST
from coordserver.schemas.base import wire_names
from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import TOKENS, backend_url, base_env
from tests.server.mcp.test_mcp_limits import headers, open_session

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SURROGATE, NUL = "\\ud800", "\\u0000"  # as JSON escapes in the raw body
EXAMPLES = {"search_messages": {"q": SURROGATE}, "notebook_read": {"pageId": SURROGATE},
            "send_message": {"recipient": "\\udc00", "title": "x"}, "list_tasks": {"statuses": [SURROGATE]}}
MARKER = "echo-me-not-4711"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


def raw_json(value) -> str:
    """JSON text in which a string that is already an escape (SURROGATE, NUL) stays one."""
    if isinstance(value, str) and value.startswith("\\u"):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ",".join(raw_json(v) for v in value) + "]"
    return json.dumps(value)


def call_raw(http: httpx.Client, name: str, arguments: dict) -> dict:
    args = "{" + ",".join(f"{json.dumps(k)}:{raw_json(v)}" for k, v in arguments.items()) + "}"
    body = (f'{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":{json.dumps(name)},'
            f'"arguments":{args},"_meta":{json.dumps(META)}}}}}').encode()
    answer = http.post("/mcp", content=body, headers={
        "Authorization": f"Bearer {TOKENS['alice']}", "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
        "Mcp-Name": name})
    assert answer.status_code == 200, answer.text
    return answer.json()


def tool_error(reply: dict) -> str:
    assert "error" not in reply, reply  # not a JSON-RPC error
    result = reply["result"]
    assert result["isError"] is True and result["structuredContent"]["error"] == result["content"][0]["text"]
    return result["content"][0]["text"]


def route_requests(http: httpx.Client) -> list[str]:
    return [line for line in http.get("/api/metrics").text.splitlines()
            if line.startswith("coord_http_requests_total") and 'route="/mcp"' not in line
            and 'route="/api/metrics"' not in line]


def test_lone_surrogates_in_path_and_query_are_tool_errors_before_any_work(srv, caplog):
    caplog.set_level(logging.ERROR)
    with httpx.Client(base_url=srv.url, timeout=30) as http:
        before = route_requests(http)
        for name, arguments in EXAMPLES.items():
            message = tool_error(call_raw(http, name, arguments))
            assert "lone surrogate" in message and message.split()[0] in arguments, message
        assert route_requests(http) == before  # no route was called
    assert not [r for r in caplog.records if r.name.startswith(("coord", "mcp"))]


def text_parameters(srv) -> list[tuple[str, str]]:
    """Every (tool, argument) that becomes part of a path or a query string."""
    found = []
    for name, shape in srv.coord.services.mcp_endpoint.catalog.shapes.items():
        names = list(shape.path_model.__struct_fields__)
        names += sorted(wire_names(shape.query_model)) if shape.query_model else []
        found += [(name, argument) for argument in names]
    return found


def test_rule_every_path_or_query_argument_refuses_unencodable_text_as_a_tool_error(srv, caplog):
    caplog.set_level(logging.ERROR)
    cases = text_parameters(srv)
    assert {("search_messages", "q"), ("notebook_read", "pageId"), ("send_message", "recipient"),
            ("list_tasks", "statuses")} <= set(cases) and len(tools.BY_NAME) > 10
    with httpx.Client(base_url=srv.url, timeout=30) as http:
        before = route_requests(http)
        for name, argument in cases:
            for bad in (SURROGATE, NUL, [SURROGATE]):
                assert tool_error(call_raw(http, name, {argument: bad})), (name, argument, bad)
        assert route_requests(http) == before
    assert not [r for r in caplog.records if r.name.startswith(("coord", "mcp"))]


def test_a_2025_batch_gets_a_plain_jsonrpc_error(srv):
    with httpx.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http, TOKENS["alice"])
        batch = [{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"x": MARKER}},
                 {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]
        answer = http.post("/mcp", json=batch, headers=headers(TOKENS["alice"], session))
        assert answer.status_code == 400
        assert answer.json() == {"jsonrpc": "2.0", "id": None, "error": {
            "code": INVALID_REQUEST, "message": "Invalid Request: the body must be one JSON-RPC 2.0 request, "
                                                "notification or response object"}}
        assert int(answer.headers["content-length"]) == len(answer.content)


@pytest.mark.parametrize("with_session", [True, False])
def test_rule_no_invalid_body_is_echoed_or_names_the_validator(srv, with_session):
    bodies = [[], [1, 2], [{"jsonrpc": "2.0", "id": 1, "method": MARKER}], {"jsonrpc": "2.0", "id": 5, "x": MARKER},
              {"jsonrpc": "1.0", "id": 5, "method": MARKER}, {"jsonrpc": "2.0", "result": MARKER},
              MARKER, 5, None, {"jsonrpc": "2.0", "method": 5, "params": MARKER}]
    with httpx.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http, TOKENS["bob"]) if with_session else None
        for body in bodies:
            answer = http.post("/mcp", content=json.dumps(body).encode(),
                               headers={**headers(TOKENS["bob"], session), "Content-Type": "application/json"})
            assert 400 <= answer.status_code < 500, (body, answer.text)
            text = answer.text.lower()
            assert MARKER not in text and "pydantic" not in text and "validation error" not in text, text
            assert answer.json()["error"]["code"] in (INVALID_REQUEST, -32700, -32602), text
