"""The API returns hostile text unchanged, but as JSON escapes (issue 31): DEL, the C1 controls and the
bidirectional overrides never travel as raw characters, so `curl` in a terminal cannot hand them to the
terminal, while every JSON reader decodes exactly what was sent. Checked on the raw bytes of REST routes,
the hot path (send, inbox), the wake document and the event stream."""
from __future__ import annotations

import re

import httpx
import pytest

from tests.helpers import TOKENS, backend_server, client
from tests.hostile_text import PAYLOAD, seed

# DEL, C1 (U+0080-U+009F) and bidi controls as they would appear in UTF-8 if written raw.
RAW_ACTIVE = re.compile(rb"\x7f|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory):
    """The database encodes the inbox itself on both backends: each must come out escaped."""
    with backend_server(request, tmp_path_factory) as server:
        yield server


def raw_active(body: bytes) -> list[bytes]:
    return RAW_ACTIVE.findall(body)


def strings(value) -> list[str]:
    """Every string value in a decoded JSON document."""
    if isinstance(value, str):
        return [value]
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for item in items for text in strings(item)]


def test_rest_answers_escape_terminal_active_characters_and_decode_to_what_was_sent(server):
    seeded = seed(server, sender="alice", reader="bob")
    with client(server, "bob") as bob:
        paths = ["/api/mailboxes/me/messages", "/api/wake", f"/api/chat/channels/{seeded.channel_id}/messages",
                 "/api/swarm/tasks", "/api/swarm/projects", "/api/directory", f"/api/notebook/{seeded.page_id}",
                 "/api/buzz/events", "/api/mailboxes/me/messages/search?q=hello"]
        for path in paths:
            response = bob.get(path)
            assert response.status_code == 200, (path, response.text)
            assert not raw_active(response.content), (path, raw_active(response.content))
            assert "\\u009b" in response.text and "\\u202e" in response.text, path
            assert any(PAYLOAD in text for text in strings(response.json())), path  # decoded: as sent
    with client(server, "alice") as alice:
        sent = alice.post("/api/mailboxes/bob/messages", json={"title": PAYLOAD, "body": "\x7f"})  # the hot path
        assert sent.status_code == 200 and not raw_active(sent.content)
        assert sent.json()["title"] == PAYLOAD
        # ASCII text but for a DEL: the answer takes the path for ASCII (escape_terminal_active's shortcut)
        sent = alice.post("/api/mailboxes/bob/messages", json={"title": "rm -rf\x7f", "body": "plain"})
        assert sent.status_code == 200 and not raw_active(sent.content) and b"rm -rf\\u007f" in sent.content
        assert sent.json()["title"] == "rm -rf\x7f"


def test_the_event_stream_escapes_them_too(server):
    seed(server, sender="carol", reader="admin")
    headers = {"Authorization": f"Bearer {TOKENS['admin']}", "Last-Event-ID": "0"}
    body = b""
    with httpx.stream("GET", f"{server.url}/api/stream", headers=headers, timeout=10) as response:
        for chunk in response.iter_bytes():
            body += chunk
            if body.count(b"\nevent: message") >= 1 and b"PWNED-TITLE" in body.split(b"event: message", 1)[1]:
                break
    assert b"\\u009b" in body and not raw_active(body)
