"""Issue 32 item 7 over real HTTP on SQLite and PostgreSQL: the HTML pages send security headers, the
onboarding form refuses cross-origin posts and shares /api/auth/register's rate limit, and JSON routes
read only JSON (415 `{"error"}` otherwise, nothing written). Each with the rule behind it: every HTML
answer, every origin case, every JSON-body operation of /api/openapi.json."""
from __future__ import annotations

import base64
import hashlib
import re
import uuid

import httpx
import pytest

from coordserver.settings import Settings
from tests.helpers import backend_server, base_env, client, ok, start_server

NOT_JSON = {"error": "Content-Type must be application/json"}
EVIL = "https://evil.example"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    with backend_server(request, tmp_path_factory, scheduler_interval_seconds=3600, push_enabled=False) as server:
        yield server


def invite(srv, **body) -> dict:
    return ok(client(srv, "admin").post("/api/auth/invites", json=body))["invite"]


def use_count(srv, invite_id: int) -> int:
    invites = ok(client(srv, "admin").get("/api/auth/invites"))["invites"]
    return next(i for i in invites if i["id"] == invite_id)["useCount"]


def assert_page_headers(response: httpx.Response) -> str:
    policy = response.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert directives["base-uri"] == "'none'" and "unsafe-inline" not in directives.get("script-src", "")
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    return policy


def test_pages_send_security_headers(srv):
    anon = client(srv)
    code = invite(srv)["code"]
    onboard = anon.get(f"/onboard?code={code}")
    assert "form-action 'self'" in assert_page_headers(onboard)
    refused = anon.post("/onboard", data={"code": "nope", "identity": "x1"})
    assert refused.status_code == 403 and assert_page_headers(refused)
    docs = anon.get("/api/docs")
    policy = assert_page_headers(docs)
    script = re.search(r"<script>(.*?)</script>", docs.text, re.DOTALL).group(1)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy and "connect-src 'self'" in policy


def test_rule_every_html_answer_carries_the_headers(srv):
    anon = client(srv)
    pages = 0
    for rule in srv.app.url_map.iter_rules() if hasattr(srv, "app") else ():
        if "GET" not in rule.methods or "<" in rule.rule:
            continue
        answer = anon.get(rule.rule)
        if answer.headers.get("content-type", "").startswith("text/html"):
            assert_page_headers(answer)
            pages += 1
    assert pages >= 2 or not hasattr(srv, "app")


ORIGIN_CASES = [  # (Origin, Sec-Fetch-Site, allowed)
    (EVIL, None, False), ("null", None, False), ("http://coord.test.evil.example", None, False),
    (None, "cross-site", False), (None, "same-site", False), (EVIL, "same-origin", False),
    ("http://coord.test", None, True), (None, "same-origin", True), (None, "none", True), (None, None, True),
]


def test_a_cross_origin_form_post_registers_nothing(srv):
    code = invite(srv)
    answer = client(srv).post("/onboard", data={"code": code["code"], "identity": f"csrf{uuid.uuid4().hex[:6]}"},
                              headers={"Origin": EVIL})
    assert answer.status_code == 403 and "<code id=token>" not in answer.text and code["code"] not in answer.text
    assert use_count(srv, code["id"]) == 0


@pytest.mark.parametrize("origin, fetch_site, allowed", ORIGIN_CASES)
def test_rule_only_this_servers_own_pages_may_post_the_form(srv, origin, fetch_site, allowed):
    code = invite(srv)
    sent = {k: v for k, v in (("Origin", origin), ("Sec-Fetch-Site", fetch_site)) if v is not None}
    answer = client(srv).post("/onboard", data={"code": code["code"], "identity": f"o{uuid.uuid4().hex[:6]}"},
                              headers=sent)
    assert answer.status_code == (200 if allowed else 403), answer.text
    assert use_count(srv, code["id"]) == (1 if allowed else 0)
    own = client(srv).post("/onboard", data={"code": invite(srv)["code"], "identity": f"s{uuid.uuid4().hex[:6]}"},
                           headers={"Origin": srv.url})
    assert own.status_code == 200  # the request's own host is this server too


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "text/html"])
def test_register_reads_only_json(srv, content_type):
    code = invite(srv)
    body = f'{{"code":"{code["code"]}","identity":"plain{uuid.uuid4().hex[:6]}"}}'.encode()
    answer = client(srv).post("/api/auth/register", content=body, headers={"Content-Type": content_type})
    assert (answer.status_code, answer.json()) == (415, NOT_JSON)
    assert use_count(srv, code["id"]) == 0
    for accepted in ("application/json", "application/json; charset=utf-8", None):  # None: a v1 script's raw bytes
        fresh = invite(srv)
        raw = f'{{"code":"{fresh["code"]}","identity":"j{uuid.uuid4().hex[:6]}"}}'.encode()
        sent = {"Content-Type": accepted} if accepted else {}
        assert client(srv).post("/api/auth/register", content=raw, headers=sent).status_code == 200, accepted


def test_rule_every_json_body_operation_refuses_other_media(srv):
    """Every operation that declares a JSON request body, hot paths included, as the admin: 415."""
    admin = client(srv, "admin")
    document = ok(admin.get("/api/openapi.json"))
    checked = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if "requestBody" not in operation:
                continue
            assert "415" in operation["responses"], (method, path)  # the document says so
            url = re.sub(r"\{[^}]+\}", "1", path)
            answer = admin.request(method.upper(), url, content=b'{"title":"t"}', headers={"Content-Type": "text/plain"})
            assert (answer.status_code, answer.json()) in ((415, NOT_JSON), (404, answer.json())), (method, path,
                                                                                                   answer.text)
            checked += answer.status_code == 415
    assert checked >= 20
    sent = admin.post("/api/mailboxes/bob/messages", content=b'{"title":"hot"}',
                      headers={"Content-Type": "text/plain"})
    assert (sent.status_code, sent.json()) == (415, NOT_JSON)


def test_the_form_shares_registers_rate_limit(tmp_path_factory):
    """5 registrations per 60 s per address, counted across /api/auth/register and POST /onboard."""
    settings = Settings.from_env(base_env(f"sqlite:///{tmp_path_factory.mktemp('rl') / 'c.db'}",
                                          COORD_RATE_LIMITS="on"))
    server = start_server(settings, workers=1)
    try:
        admin, anon = client(server, "admin"), client(server)
        codes = [ok(admin.post("/api/auth/invites", json={}))["invite"]["code"] for _ in range(7)]
        for i, code in enumerate(codes[:5]):
            if i % 2:
                assert anon.post("/onboard", data={"code": code, "identity": f"rl{i}"}).status_code == 200
            else:
                ok(anon.post("/api/auth/register", json={"code": code, "identity": f"rl{i}"}))
        for answer in (anon.post("/onboard", data={"code": codes[5], "identity": "rl5"}),
                       anon.post("/api/auth/register", json={"code": codes[6], "identity": "rl6"})):
            assert answer.status_code == 429 and "error" in answer.json() and answer.headers["Retry-After"]
    finally:
        server.stop()
