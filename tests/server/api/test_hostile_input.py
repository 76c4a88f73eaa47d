"""Hostile input gets a 4xx {"error"} (never a 500, never HTML) and changes nothing.

The generic tests derive what they attack from the application itself: every POST/PATCH/PUT route
in `app.url_map` and every query parameter the API modules read, so a new route or parameter is
covered without touching this file. They run against SQLite and PostgreSQL (one server per backend
for the whole module: every attack is refused, so the tests cannot disturb each other)."""
from __future__ import annotations

import importlib
import json
import pkgutil
import re
import sys
from pathlib import Path

import httpx
import msgspec
import pytest

import coordserver.api
import coordserver.schemas
from coordserver.schemas.base import Model, Query, wire_names
from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import backend_url, base_env, client, eventually, start_server

_JSON = {"Content-Type": "application/json"}
# Valid JSON to Python, not to RFC 8259, or what no stored text may hold.
HOSTILE_BODIES = {
    "nan": b'{"title":"t","a":NaN}',
    "infinity": b'{"title":"t","a":Infinity}',
    "-infinity": b'{"title":"t","a":-Infinity}',
    "1e400": b'{"title":"t","a":1e400}',
    "deep-1000": b'{"title":"t","a":' + b"[" * 1000 + b"]" * 1000 + b"}",
    "deep-101": b'{"title":"t","a":' + b"[" * 101 + b"]" * 101 + b"}",
    "lone-surrogate": b'{"title":"\\ud800"}',
    "lone-surrogate-key": b'{"title":"t","\\udc00":1}',
    "nul": b'{"title":"a\\u0000b"}',
    "nul-in-key": b'{"title":"t","\\u0000":1}',
}
# Bodies that reach field parsing: an enormous value in every integer field the API reads.
_API_SOURCE = "\n".join(p.read_text() for p in Path(coordserver.api.__file__).parent.glob("*.py"))
_QUERY_PARAM = re.compile(r'(?:args\.get|query_\w+)\("(\w+)"')


_METHODS = ("GET", "POST", "PATCH", "PUT", "DELETE")


def _request_models() -> list[type]:
    """Every request model in coordserver/schemas: by convention its docstring starts with the route it serves."""
    found = []
    for info in pkgutil.iter_modules(coordserver.schemas.__path__):
        module = importlib.import_module(f"coordserver.schemas.{info.name}")
        found += [m for m in vars(module).values() if isinstance(m, type) and issubclass(m, Model)
                  and m.__module__ == module.__name__ and (m.__doc__ or "").split(" ")[0] in _METHODS]
    return found


def _integer_fields(model) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(model)
            if re.search(r"\bint\b", str(f.type)) and not re.search(r"\b(str|list)\b", str(f.type))}


_MODELS = _request_models()
INTEGER_FIELDS = sorted(set(re.findall(r'integer\(body, "(\w+)"', _API_SOURCE))
                        | {n for m in _MODELS if not issubclass(m, Query) for n in _integer_fields(m)})
QUERY_PARAMS = sorted(set(_QUERY_PARAM.findall(_API_SOURCE)) | {"limit", "q"}
                      | {n for m in _MODELS if issubclass(m, Query) for n in wire_names(m)})
HOSTILE_QUERY_VALUES = ["a%00b", "NaN", "Infinity", "1e400", "9" * 30, "-9" * 20, "%ED%A0%80", "%5B" * 2000]
# Routes that read no body: a hostile body is ignored and they answer as usual (ids below are unknown).
BODYLESS = {"auth.revoke_token", "auth.rotate_token", "auth.verify", "chat.archive", "chat.unarchive",
            "chat.mark_read", "chat.typing", "messages.ack", "messages.set_pending", "notebook.page_presence",
            "recurring.tick", "swarm.archive_project"}
_UNKNOWN_ID = "987654"  # an id of no row: integer ids and uuids alike answer 404 for it


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hostile_server(request, tmp_path_factory):
    srv = start_server(Settings.from_env(base_env(backend_url(request, tmp_path_factory))))
    yield srv
    srv.stop()


def _strict_json(response: httpx.Response):
    """The body parsed as RFC 8259 JSON: bare NaN/Infinity would raise."""
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name} in {response.request.url}")
    assert response.headers["content-type"].startswith("application/json"), response.text[:200]
    return json.loads(response.content, parse_constant=refuse)


def _refused(response: httpx.Response, what) -> None:
    assert 400 <= response.status_code < 500, (what, response.status_code, response.text[:300])
    body = _strict_json(response)
    assert isinstance(body.get("error"), str) and body["error"], (what, body)


def _snapshot(srv: ServerThread) -> dict[str, int]:
    """Row counts of every table: a refused request leaves them all as they were."""
    from coordserver.models import ALL_MODELS

    def count():
        return {m._meta.table_name: m.select().count() for m in ALL_MODELS}
    return srv.call(lambda: srv.coord.store.read(count))


def _body_routes(srv: ServerThread) -> list[tuple[str, str, str]]:
    """(method, concrete path, endpoint) of every /api route that takes a body, from the url map."""
    routes = []
    for rule in srv.app.url_map.iter_rules():
        if not rule.rule.startswith("/api/") or getattr(rule, "websocket", False) or rule.endpoint == "ingest.ingest":
            continue
        path = re.sub(r"<[^>]*?(\w+)>", lambda m: "bob" if m.group(1) == "recipient" else _UNKNOWN_ID, rule.rule)
        for method in sorted(rule.methods & {"POST", "PATCH", "PUT"}):
            routes.append((method, path, rule.endpoint))
    return routes


WARMED = ("alice", "bob", "admin")


def _warm(srv: ServerThread) -> None:
    """Requests whose side effects (users rows from presence, a first message) happen before the snapshot.
    Under COORD_TEST_WORKERS a request may have landed on another worker, whose presence writes its
    users row at its own next flush: wait until every warmed identity has one."""
    for who in WARMED:
        client(srv, who).get("/api/health")
        assert client(srv, who).get("/api/mailboxes/me/messages").status_code == 200
    srv.call(lambda: srv.coord.services.presence.flush())
    rows = eventually(lambda: _users_seen(srv), lambda seen: seen >= set(WARMED), timeout=30)
    assert rows >= set(WARMED), rows


def _users_seen(srv: ServerThread) -> set[str]:
    from coordserver.models import User

    def seen():
        return {u.id for u in User.select(User.id).where(User.last_seen_at.is_null(False))}
    return srv.call(lambda: srv.coord.store.read(seen))


def test_every_json_route_refuses_hostile_bodies(hostile_server):
    srv = hostile_server
    routes = _body_routes(srv)
    assert ("POST", "/api/mailboxes/bob/messages", "messages.send") in routes and len(routes) > 30
    alice = client(srv, "alice")
    assert alice.post("/api/mailboxes/bob/messages", json={"title": "before"}).status_code == 200
    _warm(srv)
    before = _snapshot(srv)
    callers = {"admin": client(srv, "admin"), "alice": alice}
    for method, path, endpoint in routes:
        for name, raw in HOSTILE_BODIES.items():
            caller = callers["admin" if path.startswith("/api/auth/") else "alice"]
            response = caller.request(method, path, content=raw, headers=_JSON)
            if endpoint in BODYLESS:
                assert response.status_code < 500, (endpoint, name, response.text[:200])
                _strict_json(response)
            else:
                _refused(response, (method, path, name))
    srv.call(lambda: srv.coord.services.presence.flush())
    assert _snapshot(srv) == before
    for status in ("", "?status=unread", "?status=read"):
        assert client(srv, "bob").get(f"/api/mailboxes/me/messages{status}").status_code == 200


# Where each integer field is read; a new integer field fails the test until it is listed here.
_INTEGER_ROUTES = {"maxUses": ("admin", "/api/auth/invites"), "replyToMessageId": ("alice", "/api/mailboxes/bob/messages"),
                   "workHoursStart": ("alice", "/api/swarm/projects"), "workHoursEnd": ("alice", "/api/swarm/projects"),
                   "count": ("alice", "/api/swarm/recurring/preview"), "defaultOption": ("alice", "/api/asks"),
                   "minutes": ("alice", f"/api/buzz/alerts/{_UNKNOWN_ID}/snooze"),
                   "webhookId": ("alice", "/api/buzz/silences/preview"),
                   "escalateAfterMinutes": ("alice", "/api/buzz/webhooks"),
                   "flapResolutions": ("alice", "/api/buzz/webhooks"), "flapWindowMinutes": ("alice", "/api/buzz/webhooks"),
                   "staleTriggerHours": ("admin", f"PATCH /api/auth/tokens/{_UNKNOWN_ID}"),
                   "leaseSeconds": ("alice", "/api/swarm/tasks"), "ttlSeconds": ("alice", "/api/reservations"),
                   "loopMessages": ("admin", "PATCH /api/admin/users/alice"),
                   "loopMinutes": ("admin", "PATCH /api/admin/users/alice")}


def test_integer_fields_refuse_out_of_range_numbers(hostile_server):
    srv = hostile_server
    assert set(INTEGER_FIELDS) == set(_INTEGER_ROUTES)
    _warm(srv)
    before = _snapshot(srv)
    callers = {"admin": client(srv, "admin"), "alice": client(srv, "alice")}
    for value in ("1e400", "NaN", "-Infinity", "1" + "0" * 30, "-" + "9" * 25, "2147483648", "1.5e300"):
        for field, (who, path) in _INTEGER_ROUTES.items():
            raw = f'{{"title":"t","{field}":{value}}}'.encode()
            method, _, path = path.rpartition(" ")
            _refused(callers[who].request(method or "POST", path, content=raw, headers=_JSON), (field, value))
    assert _snapshot(srv) == before


def test_every_query_parameter_takes_hostile_values(hostile_server):
    """Whatever a query parameter holds, the answer is JSON and never a 500; NUL is always a 400."""
    srv = hostile_server
    assert {"q", "cursor", "limit", "offset", "before", "status"} <= set(QUERY_PARAMS)
    alice = client(srv, "alice")
    _warm(srv)
    before = _snapshot(srv)
    for path, params in _get_routes(srv):
        for param in params:
            for value in HOSTILE_QUERY_VALUES:
                response = alice.get(f"{path}?{param}={value}")
                assert response.status_code < 500, (path, param, value, response.text[:200])
                _strict_json(response)
                if "%00" in value:
                    _refused(response, (path, param, value))
    srv.call(lambda: srv.coord.services.presence.flush())
    assert _snapshot(srv) == before


def _get_routes(srv: ServerThread) -> list[tuple[str, list[str]]]:
    """Each GET route under /api with the query parameters its module reads or its query model declares
    (limit and q always)."""
    routes = []
    for rule in srv.app.url_map.iter_rules():
        if not rule.rule.startswith("/api/") or "GET" not in rule.methods or getattr(rule, "websocket", False) \
                or rule.rule.startswith(("/api/skill", "/api/stream", "/api/metrics", "/api/docs")):  # not JSON
            continue
        view = srv.app.view_functions[rule.endpoint]
        module = sys.modules[view.__module__]
        params = set(_QUERY_PARAM.findall(Path(module.__file__).read_text())) | {"limit", "q"}
        declared = getattr(view, "__schema__", {}).get("query")
        params |= set(wire_names(declared)) if declared else set()
        routes.append((re.sub(r"<[^>]*?(\w+)>", _UNKNOWN_ID, rule.rule), sorted(params)))
    return routes


def test_nul_and_odd_bytes_in_paths(hostile_server):
    alice = client(hostile_server, "alice")
    for path in ("/api/chat/channels/a%00b/messages", "/api/notebook/a%00b", "/api/swarm/tasks/a%00b",
                 "/api/mailboxes/me/messages/1%00/ack", "/api/directory?q=%00"):
        _refused(alice.post(path, json={}) if "ack" in path else alice.get(path), path)
    _refused(alice.post("/api/mailboxes/b%00ob/messages", json={"title": "t"}), "send")
    _refused(alice.post("/api/swarm/tasks", json={"title": "t", "sortKey": 10 ** 400}), "sortKey")


def test_ingest_stores_hostile_bodies_as_text(hostile_server):
    """Ingest takes any body: what is not standard JSON is kept as text, NUL as U+FFFD; never a 500."""
    alice = client(hostile_server, "alice")
    hook = alice.post("/api/broadcast/webhooks", json={"appName": "hostile", "title": "Hostile"}).json()
    url = f"{hostile_server.url}/api/ingest/hostile/{hook['token']}"
    for name, raw in HOSTILE_BODIES.items():
        answer = httpx.post(url, content=raw, headers=_JSON)
        assert answer.status_code == 200, (name, answer.text)
        event = _event(alice, answer.json()["eventId"])
        assert event["bodyJson"] is None and event["bodyText"] == raw.decode(), name
    raw_nul = httpx.post(url, content=b"disk\x00full", headers={"Content-Type": "text/plain"})
    assert _event(alice, raw_nul.json()["eventId"])["bodyText"] == "disk\ufffdfull"
    utf16 = httpx.post(url, content="héllo ✓".encode("utf-16"), headers={"Content-Type": "text/plain; charset=utf-16"})
    assert _event(alice, utf16.json()["eventId"])["bodyText"] == "héllo ✓"
    utf16_json = httpx.post(url, content='{"title":"from utf-16"}'.encode("utf-16-le"),
                            headers={"Content-Type": "application/json; charset=UTF-16LE"})
    assert _event(alice, utf16_json.json()["eventId"])["title"] == "from utf-16"
    for charset in ("rot13", "base64", "no-such-charset", "idna"):
        odd = httpx.post(url, content=b"\xff\x00plain", headers={"Content-Type": f"text/plain; charset={charset}"})
        assert odd.status_code == 200 and _event(alice, odd.json()["eventId"])["bodyText"] == "\ufffd\ufffdplain"


def test_ingest_summarisers_survive_odd_shapes(hostile_server):
    alice = client(hostile_server, "alice")
    hook = alice.post("/api/broadcast/webhooks", json={"appName": "shapes", "title": "Shapes"}).json()
    url = f"{hostile_server.url}/api/ingest/shapes/{hook['token']}"
    push = httpx.post(url, json={"commits": 5, "repository": "x", "pusher": [1]}, headers={"X-GitHub-Event": "push"})
    alerts = httpx.post(url, json={"alerts": [None, 1, "x", {"labels": 5}], "status": 7, "groupKey": []})
    for answer, payload_key in ((push, "commits"), (alerts, "alerts")):
        assert answer.status_code == 200, answer.text
        event = _event(alice, answer.json()["eventId"])
        assert event["title"] == "Shapes" and payload_key in event["bodyJson"]
    for event_name in ("pull_request", "issues", "issue_comment", "workflow_run", "check_run", "release", "ping"):
        odd = httpx.post(url, json={event_name: 5, "issue": {"user": 3}, "comment": [], "action": {}},
                         headers={"X-GitHub-Event": event_name})
        assert odd.status_code == 200, (event_name, odd.text)


def _event(who: httpx.Client, event_id: int) -> dict:
    response = who.get("/api/broadcast/events", params={"limit": 100})
    return next(e for e in _strict_json(response)["events"] if e["id"] == event_id)


def test_integer_path_ids_at_their_declared_maximum_are_absent(hostile_server):
    """The document bounds every integer path id; the largest it allows is an unknown row (404) on both
    backends, never a database error (PostgreSQL's integer columns are 32-bit)."""
    alice = client(hostile_server, "alice")
    document = alice.get("/api/openapi.json").json()
    tried = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            ids = [p for p in operation.get("parameters", ()) if p["in"] == "path" and p["schema"].get("type") == "integer"]
            if not ids or path.startswith("/api/ingest"):
                continue
            url = path
            for param in ids:
                url = url.replace("{" + param["name"] + "}", str(param["schema"]["maximum"]))
            response = alice.request(method.upper(), url, json={} if "requestBody" in operation else None)
            tried += 1
            assert response.status_code in (400, 403, 404), (method, url, response.status_code, response.text)
    assert tried >= 5
