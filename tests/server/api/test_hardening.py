"""Regressions of the hardening issue: standard JSON in and out (legacy rows included), JSON for every
/api answer and masked secrets in every logged path form, the environment admin never listed, Allow
headers that list only what a path accepts, and the per-webhook ingest limit."""
from __future__ import annotations

import json
import math

import httpx
import pytest

from coordserver.realtime.sse import encode_frame
from coordserver.redaction import redact
from tests.helpers import client

_JSON = {"Content-Type": "application/json"}


def _strict(response: httpx.Response):
    def refuse(name):
        raise AssertionError(f"non-standard JSON constant {name}")
    return json.loads(response.content, parse_constant=refuse)


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_non_finite_metadata_is_refused_and_the_inbox_stays_up(make_server, database_url, number):
    srv = make_server(database_url=database_url)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    refused = alice.post("/api/mailboxes/bob/messages", content=b'{"title":"x","metadata":{"x":' + number + b"}}",
                         headers=_JSON)
    assert refused.status_code == 400 and "not standard JSON" in refused.json()["error"]
    for status in ("", "?status=unread", "?status=read"):
        listing = bob.get(f"/api/mailboxes/me/messages{status}")
        assert listing.status_code == 200 and _strict(listing)["messages"] == []


def _insert_legacy_rows(srv) -> None:
    """Rows as an older server stored them: Python's json.dumps wrote NaN and Infinity."""
    from coordserver import db
    from coordserver.models import BuzzEvent

    def insert():
        for metadata in ('{"x":NaN,"y":[Infinity,-Infinity],"z":"kept"}', '{"note":"NaN and Infinity"}'):
            db.sql_execute("INSERT INTO message (recipient, sender, title, body, status, urgent, created_at, "
                           "metadata, response_waiting) VALUES ('bob', 'alice', 'legacy', '', 'unread', ?, ?, ?, ?)",
                           (False, db.now().replace(tzinfo=None), metadata, False))
        BuzzEvent.insert(webhook_id=1, app_name="old", title="old", received_at=db.now().replace(tzinfo=None),
                         content_type="application/json", body_json=None, suppressed=False).execute()
        db.sql_execute("UPDATE buzz_event SET body_json = ? WHERE app_name = 'old'", ('{"v":Infinity}',))
    srv.call(lambda: srv.coord.store.write(insert))


def test_legacy_non_finite_rows_render_as_null(make_server, database_url):
    srv = make_server(database_url=database_url)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    assert alice.post("/api/mailboxes/bob/messages", json={"title": "fine", "metadata": {"n": 1.5}}).status_code == 200
    _insert_legacy_rows(srv)
    expected = {"legacy": [{"note": "NaN and Infinity"}, {"x": None, "y": [None, None], "z": "kept"}],
                "fine": [{"n": 1.5}]}
    for status in ("", "?status=unread", "?limit=1", "?status=unread&limit=2"):
        listing = bob.get(f"/api/mailboxes/me/messages{status}")
        assert listing.status_code == 200, listing.text
        for message in _strict(listing)["messages"]:
            assert message["metadata"] in expected[message["title"]]
    sent = _strict(alice.get("/api/mailboxes/me/sent"))["messages"]
    assert sorted(json.dumps(m["metadata"]) for m in sent if m["title"] == "legacy") == sorted(
        json.dumps(m) for m in expected["legacy"])
    assert client(srv, "bob").get("/api/mailboxes/me/messages/search?q=legacy").status_code == 200
    events = _strict(alice.get("/api/broadcast/events"))["events"]
    assert [e["bodyJson"] for e in events if e["appName"] == "old"] == [{"v": None}]


def test_emitters_refuse_non_finite_numbers(server):
    with pytest.raises(ValueError):
        encode_frame("message", {"x": math.nan})
    with pytest.raises(ValueError):
        server.app.json.dumps({"x": math.inf})


def test_nul_in_search_and_text_on_postgresql(make_server, pg_cluster):
    srv = make_server(database_url=pg_cluster.create_database())
    alice = client(srv, "alice")
    for path in ("/api/notebook?q=a%00b", "/api/directory?q=a%00b", "/api/mailboxes/me/messages/search?q=%00"):
        answer = alice.get(path)
        assert answer.status_code == 400 and "NUL" in answer.json()["error"], path
    for path, body in (("/api/mailboxes/bob/messages", b'{"title":"x","body":"a\\u0000b"}'),
                       ("/api/notebook", b'{"title":"a\\u0000b"}'),
                       ("/api/swarm/projects", b'{"name":"a\\u0000b"}'),
                       ("/api/chat/channels", b'{"type":"group","name":"a\\u0000b","members":["bob"]}'),
                       ("/api/directory", b'{"title":"a\\u0000b","url":"https://x.test"}')):
        answer = alice.post(path, content=body, headers=_JSON)
        assert answer.status_code == 400 and "NUL" in answer.json()["error"], (path, answer.text)


def test_sqlite_cursor_beyond_64_bits(server):
    import base64
    raw = json.dumps(["newest", 0, "2026-01-01 00:00:00", 2**70]).encode()
    cursor = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    answer = client(server, "bob").get("/api/mailboxes/me/messages", params={"cursor": cursor})
    assert answer.status_code == 400 and answer.json() == {"error": "Invalid cursor"}
    deep = base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode()
    assert client(server, "bob").get("/api/mailboxes/me/messages", params={"cursor": deep}).status_code == 400


def test_every_api_answer_is_json(server):
    hook = client(server, "alice").post("/api/broadcast/webhooks", json={"appName": "j", "title": "J"}).json()
    anon = client(server)
    for method, path in (("POST", f"/api//ingest/j/{hook['token']}"), ("GET", "/api/chat/channels/..%2F/messages"),
                         ("GET", "/api//health"), ("GET", "/api/health/"), ("GET", "/api/notebook/"),
                         ("POST", f"/api/ingest/j/{hook['token']}/"), ("GET", "/api/%2E%2E/health"),
                         ("GET", "/api/notebook/ws")):
        answer = anon.request(method, path, headers={"Authorization": "Bearer alice-token-000000000000000"})
        assert answer.headers["content-type"] == "application/json", (path, answer.status_code, answer.text[:80])
        assert 400 <= answer.status_code < 500 and set(answer.json()) == {"error"}, path


@pytest.mark.parametrize("logged", [
    "POST /api//ingest/ci/0123456789abcd HTTP/1.1", "/api/ingest//ci//0123456789abcd", "/api/%69ngest/ci/0123456789abcd",
    "/api/ingest/ci%2F0123456789abcd", "/api/ingest/ci/0123%3F456789abcd", "/api/stream?%74oken=0123456789abcd",
    "/api/stream?x=1&TOKEN=0123456789abcd", "/onboard?code=0123456789abcd"])
def test_every_logged_form_of_a_path_is_masked(logged):
    assert "456789abcd" not in redact(logged) and "***" in redact(logged)


def test_environment_admin_is_never_listed(server):
    admin = client(server, "admin")
    assert admin.get("/api/auth/verify").status_code == 200
    server.call(lambda: server.coord.services.presence.flush())
    listed = [u["id"] for u in client(server, "alice").get("/api/users").json()["users"]]
    assert "admin" not in listed and {"alice", "bob"} <= set(listed)


def test_allow_lists_only_what_a_path_accepts(server):
    """For every literal route in the url map, OPTIONS lists exactly the methods of the routes written
    for that literal path: a `<id>` sibling must not lend it its own (recurring/tick, mailboxes/me)."""
    literal: dict[str, set[str]] = {}
    for rule in server.app.url_map.iter_rules():
        if rule.rule.startswith("/api/") and not rule.arguments and not getattr(rule, "websocket", False):
            literal.setdefault(rule.rule, set()).update(rule.methods)
    assert "/api/swarm/recurring/tick" in literal and "/api/mailboxes/me/messages" in literal
    alice = client(server, "alice")
    for path, methods in literal.items():
        allow = {m.strip() for m in alice.options(path).headers["allow"].split(",")}
        assert allow == methods | {"OPTIONS"}, (path, sorted(allow))
    assert alice.patch("/api/swarm/recurring/tick", json={}).status_code == 405
    assert alice.post("/api/mailboxes/me/messages", json={"title": "t"}).status_code == 405


def test_ingest_limit_follows_the_switch(make_server):
    off = make_server()  # COORD_RATE_LIMITS=off, as every test server
    hook = client(off, "alice").post("/api/broadcast/webhooks", json={"appName": "load", "title": "L"}).json()
    with client(off) as anon:
        assert {anon.post(f"/api/ingest/load/{hook['token']}", json={"title": f"n{i}"}).status_code
                for i in range(70)} == {200}


@pytest.mark.single_process  # counts one process's store writes
def test_ingest_limit_is_configurable_and_refused_before_any_write(make_server):
    srv = make_server(env={"COORD_RATE_LIMITS": "on", "COORD_INGEST_PER_WEBHOOK": "3",
                           "COORD_RATE_LIMIT_OVERRIDES": '{"ingest": 1000, "other": 1000}'})
    hook = client(srv, "alice").post("/api/broadcast/webhooks", json={"appName": "few", "title": "F"}).json()
    store, writes = srv.coord.store, []
    inner_write = store.write

    async def counting(fn, *args, **kwargs):
        writes.append(fn.__name__)
        return await inner_write(fn, *args, **kwargs)
    store.write = counting
    with client(srv) as anon:
        answers = [anon.post(f"/api/ingest/few/{hook['token']}", json={"title": f"n{i}"}) for i in range(5)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429, 429]
    assert answers[3].json()["error"].startswith("Too many ingests for this webhook; retry in ")
    assert int(answers[3].headers["Retry-After"]) >= 1
    assert writes.count("ingest") == 3
