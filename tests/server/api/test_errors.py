"""Bad input gets a clear 4xx {"error"} and never a 500."""
from __future__ import annotations

import socket
import sqlite3

import pytest

from tests.helpers import client


def test_unknown_api_path_and_method(server):
    anon = client(server)
    response = anon.get("/api/definitely/not/here")
    assert response.status_code == 404 and response.json() == {"error": "Not found"}
    response = anon.put("/api/health")
    assert response.status_code == 405 and response.json() == {"error": "Method not allowed"}
    for v1_only in ("/api/attachments", "/api/auth/sse-token"):
        assert anon.get(v1_only).json() == {"error": "Not found"}


@pytest.mark.parametrize("raw,message", [
    (b"{not json", "not valid JSON"),
    (b"[1, 2]", "JSON object"),
    (b"\xff\xfe", "not valid JSON"),
    ("\ufeff{}".encode(), "not valid JSON"),  # a byte order mark, refused as json.loads refuses it
    (b"", "JSON object"),
])
def test_malformed_bodies(server, raw, message):
    response = client(server, "admin").post("/api/auth/register", content=raw,
                                            headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and message in response.json()["error"]


@pytest.mark.parametrize("body,field", [
    ({"identityHint": 5}, "identity"),
    ({"isAdmin": "yes"}, "isAdmin"),
    ({"maxUses": "two"}, "maxUses"),
    ({"maxUses": 0}, "maxUses"),
    ({"expiresInHours": -1}, "expiresInHours"),
])
def test_wrong_types(server, body, field):
    response = client(server, "admin").post("/api/auth/invites", json=body)
    assert response.status_code == 400 and field in response.json()["error"]


def test_oversized_bodies(server):
    admin = client(server, "admin")
    response = admin.post("/api/auth/invites", content=b"{" + b" " * 60_000 + b"}",
                          headers={"Content-Type": "application/json"})
    assert response.status_code == 413
    assert response.json() == {"error": "Request body larger than 50000 bytes"}

    def chunks():
        for _ in range(60):
            yield b" " * 1000
    chunked = admin.post("/api/auth/invites", content=chunks(), headers={"Content-Type": "application/json"})
    assert chunked.status_code == 413 and "50000" in chunked.json()["error"]


def test_unknown_ids(server):
    admin = client(server, "admin")
    assert admin.delete("/api/auth/invites/999999").status_code == 404
    response = admin.delete("/api/auth/invites/not-a-number")
    assert response.status_code == 400 and response.json()["error"] == "Invalid id"
    assert admin.post("/api/auth/tokens/abc/revoke").status_code == 400


def test_declared_oversize_is_refused_before_reading(server):
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /api/auth/invites HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-token-0000000000000000\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 999999\r\n\r\n{}")
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert b"413" in status_line


def test_rate_limits(make_server):
    srv = make_server(env={"COORD_RATE_LIMITS": "on"})
    anon = client(srv)
    codes = [anon.post("/api/auth/verify", headers={"Authorization": "Bearer x"}) for _ in range(21)]
    assert [c.status_code for c in codes[:20]] == [401] * 20
    limited = codes[20]
    assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
    assert limited.json()["error"].startswith("Too many requests; retry in ")
    assert codes[0].headers["X-RateLimit-Limit"] == "20"
    assert "X-RateLimit-Reset" in limited.headers
    # exempt routes are not limited
    assert all(anon.get("/api/health").status_code == 200 for _ in range(70))


def test_openapi_lists_real_routes(server):
    document = client(server).get("/api/openapi.json").json()
    assert document["openapi"].startswith("3.")
    assert "post" in document["paths"]["/api/auth/tokens/{token_id}/rotate"]
    assert document["paths"]["/api/health"]["get"].get("security") is None
    assert document["paths"]["/api/users"]["get"]["security"] == [{"bearer": []}]


def test_refused_posts_keep_the_connection_usable(server):
    """A 401 must not be answered while the request body is still arriving: the keep-alive connection
    would be left mid-request and the client's next request on it would fail."""
    body = b'{"identityHint": "late-body"}'
    with socket.create_connection((server.host, server.port), timeout=10) as sock:
        sock.sendall(b"POST /api/auth/invites HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(body) + body[:10])
        sock.settimeout(0.3)
        try:
            early = sock.recv(4096)
        except socket.timeout:
            early = b""
        sock.settimeout(10)
        sock.sendall(body[10:] + b"GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n")
        received = early
        while received.count(b"HTTP/1.1 ") < 2:
            chunk = sock.recv(4096)
            if not chunk:
                break
            received += chunk
    assert early == b"", "answered before the body arrived"
    assert b"HTTP/1.1 401" in received and b"HTTP/1.1 200" in received


def test_a_database_locked_elsewhere_gives_503_and_reads_go_on(make_server, sqlite_url):
    """Another connection (a second process, a backup, an sqlite3 shell) holds SQLite's write lock
    for longer than busy_timeout: writes answer 503 with Retry-After instead of 500, reads keep
    working, and writes succeed again once the lock is gone."""
    srv = make_server(database_url=sqlite_url)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    assert alice.post("/api/mailboxes/bob/messages", json={"title": "before"}).status_code == 200
    other = sqlite3.connect(sqlite_url[len("sqlite:///"):], isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        busy = alice.post("/api/mailboxes/bob/messages", json={"title": "while locked"})
        assert busy.status_code == 503 and busy.json() == {"error": "Database busy; retry shortly"}
        assert busy.headers["Retry-After"] == "1"
        assert [m["title"] for m in bob.get("/api/mailboxes/me/messages").json()["messages"]] == ["before"]
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert alice.post("/api/mailboxes/bob/messages", json={"title": "after"}).status_code == 200
    assert [m["title"] for m in bob.get("/api/mailboxes/me/messages").json()["messages"]] == ["after", "before"]
