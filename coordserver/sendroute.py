"""The send route, POST /api/mailboxes/{recipient}/messages, matched in one place.

Quart routes it for the views (api/messages.py); outside Quart two doors must know it from the raw
path: the hot paths, which serve it in front of Quart (hotpaths.py), and the rate limiter, whose
"send" class it is (ratelimit.py). Both ask `send_recipient`. MCP's send_message tool names it by
its template, SEND_ROUTE, which is also its label in coord_http_requests_total.
"""
from __future__ import annotations

MAILBOXES = "/api/mailboxes/"
_MESSAGES = "/messages"
_SHORTEST = len(MAILBOXES) + len(_MESSAGES)
SEND_ROUTE = MAILBOXES + "{recipient}" + _MESSAGES


def send_recipient(path: str) -> str | None:
    """The recipient segment of a send's `path` ("" when the segment is empty, which Quart answers), or
    None if `path` is not the send route: "me" is no recipient (its /messages is the caller's inbox)."""
    if len(path) < _SHORTEST or not path.startswith(MAILBOXES) or not path.endswith(_MESSAGES):
        return None
    recipient = path[len(MAILBOXES):-len(_MESSAGES)]
    return None if "/" in recipient or recipient == "me" else recipient
