"""The baseline: a bare Quart app on Hypercorn, started exactly like coordserver (same config helper).

POST /api/mailboxes/<recipient>/messages parses the JSON body and returns a message-shaped JSON object;
GET /api/mailboxes/me/messages returns 50 message-shaped objects; GET /api/health and POST
/api/ingest/<appName>/<token> answer small JSON objects. No auth, no database: what the
framework and server cost on their own.

    python bench/bare_app.py --port 8431
    python bench/bare_app.py --port 8431 --reuse-port & python bench/bare_app.py --port 8431 --reuse-port
        (two processes on one port, as `coordserver serve --workers 2` runs them)
"""
from __future__ import annotations

import argparse
import itertools

from hypercorn.asyncio import serve
from quart import Quart, request

from coordserver.server import hypercorn_config, listening_socket, run_loop

app = Quart("bare")
app.json.sort_keys = False
_ids = itertools.count(1)


def _message(i: int, recipient: str, title: str, body: str) -> dict:
    return {"id": i, "recipient": recipient, "sender": "bench", "title": title, "body": body, "status": "unread",
            "urgent": False, "createdAt": "2026-02-17T12:00:00.000Z", "viewedAt": None, "threadId": None,
            "replyToMessageId": None, "dedupeKey": None, "metadata": None, "responseWaiting": False,
            "waitingResponder": None, "waitingSince": None}


@app.post("/api/mailboxes/<recipient>/messages")
async def send(recipient: str):
    body = await request.get_json()
    return _message(next(_ids), recipient, body.get("title", ""), body.get("body", ""))


@app.get("/api/health")
async def health():
    return {"status": "ok"}


@app.post("/api/ingest/<app_name>/<token>")
async def ingest(app_name: str, token: str):
    await request.get_data()
    return {"ok": True, "eventId": next(_ids), "alertId": 1}


@app.get("/api/mailboxes/me/messages")
async def inbox():
    return {"messages": [_message(i, "me", f"title {i}", "body " * 10) for i in range(50)], "total": 50,
            "nextCursor": "x"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8431)
    parser.add_argument("--reuse-port", action="store_true", help="share the port with other processes")
    parser.add_argument("--asyncio", action="store_true", help="asyncio's event loop, not uvloop's (as COORD_UVLOOP=off)")
    args = parser.parse_args()
    sock = listening_socket(args.host, args.port, args.reuse_port)
    run_loop(serve(app, hypercorn_config([f"fd://{sock.fileno()}"], "warning")), not args.asyncio)


if __name__ == "__main__":
    main()
