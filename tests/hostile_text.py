"""Text written to drive a terminal (issue 31), and one seeding of it through the real API into everything
another identity can write: mail, chat, a group name, a project, a task, a link, a notebook page, a buzz
event through the public ingest URL, and a display name. Shared by the coordtui and MCP tests."""
from __future__ import annotations

from dataclasses import dataclass

import httpx

from tests.helpers import client, ok

# The message, then a bare alternate-screen exit, C1 CSI, BEL, a right-to-left override, an OSC 8
# hyperlink, and Rich markup for a link (a widget reading it as markup would emit OSC 8 itself).
PAYLOAD = ("hello \x1b]0;PWNED-TITLE\x07 \x1b[2J\x1b[31mRED \x1b]52;c;ZXZpbA==\x07end"
           " \x1b[?1049l \x9b2J \x07 \u202eRTL"
           " \x1b]8;;https://evil.example/osc8\x1b\\osc8-click\x1b]8;;\x1b\\"
           " [link=https://evil.example/markup]markup-click[/link]")
SHORT = "Mal \x1b]0;PWNED-NAME\x07\x1b[2J\x9b\u202e\x7f lory"  # where 100 characters is the limit; reads as nobody's name
SHOWN = "hello ␛]0;PWNED-TITLE␇"  # how the start of PAYLOAD reads once neutralised
CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\x7f")  # none of these may reach a terminal


@dataclass(frozen=True)
class Seeded:
    message_id: int
    channel_id: str
    group_id: str
    project_id: str
    task_id: str
    link_id: int
    page_id: str
    buzz_id: int


def seed(server, sender: str = "alice", reader: str = "bob") -> Seeded:
    """`sender` writes PAYLOAD everywhere `reader` will see it; the server stores it as sent (checked)."""
    with client(server, sender) as api:
        # two identities cannot share a display name (issue 28): a second sender's says whose it is
        ok(api.post("/api/auth/setup-profile", json={"displayName": SHORT if sender == "alice" else f"{SHORT} {sender}"}))
        message = ok(api.post(f"/api/mailboxes/{reader}/messages", json={"title": PAYLOAD, "body": PAYLOAD}))
        dm = ok(api.post("/api/chat/channels", json={"type": "dm", "identity": reader}))["channelId"]
        ok(api.post(f"/api/chat/channels/{dm}/messages", json={"body": PAYLOAD}))
        group = ok(api.post("/api/chat/channels", json={"type": "group", "name": SHORT, "members": [reader]}))
        ok(api.post(f"/api/chat/channels/{group['channelId']}/messages", json={"body": PAYLOAD}))
        project = ok(api.post("/api/swarm/projects", json={"title": PAYLOAD, "color": "#3b82f6",
                                                            "description": PAYLOAD}))
        task = ok(api.post("/api/swarm/tasks", json={"title": PAYLOAD, "detail": PAYLOAD, "projectId": project["id"],
                                                     "assigneeUserId": reader}))
        link = ok(api.post("/api/directory", json={"title": PAYLOAD, "url": "https://example.com/a\x1b]0;PWNED\x07b",
                                                   "description": PAYLOAD}))
        page = ok(api.post("/api/notebook", json={"title": PAYLOAD, "content": PAYLOAD + "\nGrüße é🎉"}))["page"]
        assert ok(api.get("/api/mailboxes/me/sent"))["messages"][0]["title"] == PAYLOAD  # kept as sent
    with client(server, reader) as api:
        hook = ok(api.post("/api/broadcast/webhooks", json={"appName": "ci", "title": "CI", "forUsers": reader}))
    ingest = httpx.post(f"{server.url}/api/ingest/ci/{hook['token']}", json={"title": PAYLOAD, "body": PAYLOAD},
                        timeout=30)
    assert ingest.status_code == 200, ingest.text
    return Seeded(message["id"], dm, group["channelId"], project["id"], task["id"], link["id"], page["id"],
                  ingest.json()["eventId"])

