"""Skill docs: served as markdown without auth or rate limits, and they name every route and no other."""
from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from coordserver.skills import index as skills
from tests.helpers import TOKENS, client

_DOC_ROUTE = re.compile(r"\b(GET|POST|PUT|PATCH|DELETE)\s+(/api(?:/[^\s`'\"()\[\]?,;#]*)?)")
_RULE_PARAM = re.compile(r"<[^>]+>")
_DOC_PARAM = re.compile(r"\{[^}/]*\}")


def app_routes(app) -> set[tuple[str, str]]:
    routes = set()
    for rule in app.url_map.iter_rules():
        if not (rule.rule == "/api" or rule.rule.startswith("/api/")):
            continue
        path = _RULE_PARAM.sub("{}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            routes.add((method, path))
    return routes


def documented_routes() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for page in sorted(skills.SKILLS_DIR.glob("*.md")):
        for method, path in _DOC_ROUTE.findall(page.read_text(encoding="utf-8")):
            path = _DOC_PARAM.sub("{}", path.rstrip(".:"))
            found.setdefault((method, path), []).append(page.name)
    return found


def _exists(mention: tuple[str, str], routes: set[tuple[str, str]]) -> bool:
    """A mention names a route when each segment is equal or the route has a parameter there
    (`GET /api/skill/script` names `GET /api/skill/{}`); a documented parameter needs a route parameter."""
    method, path = mention
    parts = path.split("/")
    for route_method, route_path in routes:
        route_parts = route_path.split("/")
        if route_method == method and len(route_parts) == len(parts) and all(
                r == d or r == "{}" for r, d in zip(route_parts, parts)):
            return True
    return False


def test_every_route_is_documented_and_every_documented_route_exists(server):
    routes = app_routes(server.app)
    documented = documented_routes()
    assert ("POST", "/api/mailboxes/{}/messages") in routes  # the conversion works
    assert _exists(("GET", "/api/skill/script"), routes) and not _exists(("DELETE", "/api/skill/{}"), routes)
    undocumented = sorted(routes - set(documented))
    unknown = sorted((m, pages) for m, pages in documented.items() if not _exists(m, routes))
    assert not undocumented, f"routes no skill page names as 'METHOD /api/...': {undocumented}"
    assert not unknown, f"skill pages name routes that do not exist: {unknown}"


def test_overview_lists_every_page_and_each_serves_markdown(server):
    anonymous = client(server)
    overview = anonymous.get("/api/skill")
    assert overview.status_code == 200
    assert overview.headers["content-type"] == "text/markdown; charset=utf-8"
    text = overview.text
    assert "{{PAGES}}" not in text
    for word in ("pending", "ack", "reply", "/api/wake"):
        assert word in text
    listed = re.findall(r"`GET /api/skill/([a-z][a-z0-9_-]*)`", text)
    files = {p.stem for p in skills.SKILLS_DIR.glob("*.md")} - {"skill"}
    assert files <= set(listed)
    assert {"messages", "chat", "directory", "onboarding", "script"} <= set(listed)
    for page in listed:
        response = anonymous.get(f"/api/skill/{page}")
        assert response.status_code == 200, page
        expected = "text/plain; charset=utf-8" if page == "script" else "text/markdown; charset=utf-8"
        assert response.headers["content-type"] == expected, page
        assert response.text.strip()


def test_unknown_pages_are_json_404(server):
    anonymous = client(server)
    for page in ("nope", "skill", "..%2Fapp", "Messages", "script.py"):
        response = anonymous.get(f"/api/skill/{page}")
        assert response.status_code == 404, page
        assert "error" in response.json()


def test_no_auth_and_no_rate_limit(make_server):
    srv = make_server(env={"COORD_RATE_LIMITS": "on", "COORD_RATE_LIMIT_OVERRIDES": '{"other": 2}'})
    anonymous = client(srv)
    for _ in range(5):
        response = anonymous.get("/api/skill/messages")
        assert response.status_code == 200 and "X-RateLimit-Limit" not in response.headers
    limited = client(srv, "alice")
    statuses = [limited.get("/api/directory").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]  # the limit is real elsewhere


@pytest.mark.single_process  # the skill docs' directory is replaced in this process
def test_pages_added_later_are_listed_and_buzz_aliases_broadcast(make_server, tmp_path, monkeypatch):
    server = make_server()
    docs = tmp_path / "skills"
    shutil.copytree(skills.SKILLS_DIR, docs)
    (docs / "broadcast.md").write_text("# Broadcast feeds\n\nfeeds page\n", encoding="utf-8")
    monkeypatch.setattr(skills, "SKILLS_DIR", docs)
    skills._summary.cache_clear()
    anonymous = client(server)
    text = anonymous.get("/api/skill").text
    assert "`GET /api/skill/broadcast` (http://coord.test/api/skill/broadcast): Broadcast feeds" in text
    assert "`GET /api/skill/buzz`" in text and "alias of `broadcast`" in text
    assert anonymous.get("/api/skill/buzz").text == anonymous.get("/api/skill/broadcast").text == \
        "# Broadcast feeds\n\nfeeds page\n"
    skills._summary.cache_clear()


class _FakeStream(BaseHTTPRequestHandler):
    """Serves two events per connection, then drops; records the Last-Event-ID of each connect."""
    seen_last_ids: list = []
    next_id = 1

    def do_GET(self):  # noqa: N802
        type(self).seen_last_ids.append(self.headers.get("Last-Event-ID"))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'event: connected\ndata: {"identity":"bob"}\n\n: heartbeat\n\n')
        for _ in range(2):
            n = type(self).next_id
            type(self).next_id += 1
            self.wfile.write(f'id: {n}\nevent: message\ndata: {{"messageId":{n}}}\n\n'.encode())
        self.wfile.flush()

    def log_message(self, *args):
        pass


def test_reference_monitor_resumes_with_last_event_id(server, tmp_path):
    script = tmp_path / "monitor.py"
    script.write_text(client(server).get("/api/skill/script").text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("monitor", script)
    monitor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(monitor)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _FakeStream)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        first = list(monitor.events(url, "t", None))
        assert [e[:2] for e in first] == [(None, "connected"), ("1", "message"), ("2", "message")]
        assert first[1][2] == '{"messageId":1}'
        second = list(monitor.events(url, "t", first[-1][0]))
        assert [e[0] for e in second] == [None, "3", "4"]
        assert _FakeStream.seen_last_ids == [None, "2"]
    finally:
        httpd.shutdown()


@pytest.mark.parametrize("page", ["messages", "chat", "directory", "onboarding", "guards", "reservations", "swarm"])
def test_pages_have_curl_examples(server, page):
    assert "curl " in client(server).get(f"/api/skill/{page}").text


def _monitor_module(server, tmp_path):
    script = tmp_path / "monitor_live.py"
    script.write_text(client(server).get("/api/skill/script").text, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("monitor_live", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_monitor_against_the_real_stream(make_server, tmp_path):
    srv = make_server()
    monitor = _monitor_module(srv, tmp_path)
    alice = client(srv, "alice")

    def first_message_events(last_event_id, count):
        found = []
        for event_id, event_type, data in monitor.events(srv.url, TOKENS["bob"], last_event_id):
            if event_type == "connected":
                ready.set()
            if event_type == "message":
                found.append((event_id, json.loads(data)))
                if len(found) == count:
                    return found

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        ready = threading.Event()
        live = pool.submit(first_message_events, None, 1)
        assert ready.wait(10)
        one = alice.post("/api/mailboxes/bob/messages", json={"title": "one"}).json()
        [(first_id, data)] = live.result(10)
        assert data["messageId"] == one["id"] and first_id is not None
        # While disconnected, two more arrive; resuming from first_id replays exactly those.
        two = alice.post("/api/mailboxes/bob/messages", json={"title": "two"}).json()
        three = alice.post("/api/mailboxes/bob/messages", json={"title": "three"}).json()
        ready = threading.Event()
        resumed = pool.submit(first_message_events, first_id, 2).result(10)
        assert [d["messageId"] for _, d in resumed] == [two["id"], three["id"]]
