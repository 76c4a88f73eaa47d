"""Secrets that travel in URLs, masked before a URL reaches a log line.

A Buzz webhook's token is part of its ingest path; streams and notebook sockets may carry `?token=`
and invite links `?code=`. Tokens are secrets and are never logged, so every log line that names a
request URL passes it through `redact` first (the access log in server.py, the error handler in app.py).

Every form a path may take is masked, not only the canonical one: the router decodes percent-escapes
before matching ("/api/%69ngest/x/TOKEN" and "/api/ingest/x%2FTOKEN" reach the ingest route), and a
path such as "/api//ingest/x/TOKEN" still carries the token though it matches nothing. So a URL holding
an escape is decoded first (the log then shows its decoded, masked form), and runs of slashes count
as one.

MCP session ids are secrets too (whoever holds one with the owner's token speaks in that session): the
SDK logs them at INFO, so `SessionIdMask` on its loggers shows only their first four characters.
"""
from __future__ import annotations

import logging
import re
from urllib.parse import unquote

MASK = "***"
_INGEST_TOKEN = re.compile(r"(/ingest/+[^/?\s]+/+)[^/\s]+")  # a decoded token may hold "?"
_QUERY_SECRET = re.compile(r"([?&;](?:token|code)=)[^&;\s]*", re.IGNORECASE)


def redact(url: str) -> str:
    if "%" in url:
        url = unquote(url, errors="replace")
    return _QUERY_SECRET.sub(rf"\g<1>{MASK}", _INGEST_TOKEN.sub(rf"\g<1>{MASK}", url))


_SESSION_ID = re.compile(r"\b([0-9a-fA-F]{4})[0-9a-fA-F]{28}\b")  # uuid4().hex, as the MCP SDK makes them


def mask_session_ids(text: str) -> str:
    return _SESSION_ID.sub(rf"\g<1>{MASK}", text)


class SessionIdMask(logging.Filter):
    """Rewrites a record's message with session ids masked (the arguments are folded in first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask_session_ids(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def mask_session_ids_in(prefix: str) -> None:
    """Installs SessionIdMask on the logger `prefix` and every logger below it that exists now (a
    logger's filters do not apply to its children's records, so each gets its own)."""
    names = [prefix] + [n for n in logging.Logger.manager.loggerDict if n.startswith(prefix + ".")]
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, SessionIdMask) for f in logger.filters):
            logger.addFilter(SessionIdMask())
