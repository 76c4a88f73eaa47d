#!/usr/bin/env python3
"""coord monitor: print your live events, forever, without losing any.

Standard library only. Usage:

    COORD_URL=https://coord.example.net COORD_TOKEN=<token> python3 monitor.py

Each event is printed as one JSON line: {"id": "1532.kqzvbf", "event": "message", "data": {...}}.
On a dropped connection it reconnects with exponential backoff (1 s doubling to 60 s, with jitter)
and sends Last-Event-ID (the id exactly as received), so the server replays everything logged since
the last event it printed. A `resync` event means that cannot be done (the gap was older than the
server keeps, or its database was restored from a backup): refetch your inbox and wake list; the
monitor carries on from the server's newest event (`resumeFrom` of `connected`).
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
import urllib.error
import urllib.request

READ_TIMEOUT = 90  # the server sends a heartbeat every 30 s; silence longer than this is a dead link


def events(url: str, token: str, last_event_id: str | None):
    """Yield (id, event, data) from one connection until it ends."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream", "Cache-Control": "no-cache"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    request = urllib.request.Request(f"{url}/api/stream", headers=headers)
    with urllib.request.urlopen(request, timeout=READ_TIMEOUT) as response:
        event_id: str | None = None
        event_type = "message"
        data: list[str] = []
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    yield event_id, event_type, "\n".join(data)
                event_id, event_type, data = None, "message", []
            elif line.startswith(":"):
                if "closing" in line:
                    print(f"# server: {line[1:].strip()}", file=sys.stderr)
            else:
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "id":
                    event_id = value
                elif field == "event":
                    event_type = value
                elif field == "data":
                    data.append(value)


def main() -> int:
    url = os.environ.get("COORD_URL", "http://127.0.0.1:8420").rstrip("/")
    token = os.environ.get("COORD_TOKEN")
    if not token:
        print("set COORD_TOKEN (and COORD_URL)", file=sys.stderr)
        return 2
    last_event_id = os.environ.get("COORD_LAST_EVENT_ID") or None
    resume_from = None  # the server's newest event id, as the last `connected` said
    delay = 1.0
    while True:
        try:
            for event_id, event_type, data in events(url, token, last_event_id):
                delay = 1.0  # a working connection resets the backoff
                if event_id is not None:
                    last_event_id = event_id
                try:
                    payload = json.loads(data)
                except ValueError:
                    payload = data
                if event_type == "connected" and isinstance(payload, dict):
                    resume_from = payload.get("resumeFrom") or resume_from
                elif event_type == "resync" and resume_from:
                    last_event_id = resume_from  # the old id names nothing here: go on from the server's head
                print(json.dumps({"id": int(event_id) if event_id and event_id.isdigit() else event_id,
                                  "event": event_type, "data": payload}), flush=True)
            reason = "stream ended"
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                print(f"# refused ({error.code}): check COORD_TOKEN", file=sys.stderr)
                return 1
            reason = f"HTTP {error.code}"
        except (OSError, urllib.error.URLError) as error:
            reason = str(error)
        except KeyboardInterrupt:
            return 0
        wait = delay * (0.5 + random.random() / 2)
        print(f"# {reason}; reconnecting in {wait:.1f} s from event {last_event_id}", file=sys.stderr)
        try:
            time.sleep(wait)
        except KeyboardInterrupt:
            return 0
        delay = min(delay * 2, 60.0)


if __name__ == "__main__":
    sys.exit(main())
