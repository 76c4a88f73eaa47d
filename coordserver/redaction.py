"""Secrets that travel in URLs, masked before a URL reaches a log line.

A Buzz webhook's token is part of its ingest path; streams and notebook sockets may carry `?token=`
and invite links `?code=`. Tokens are secrets and are never logged, so every log line that names a
request URL passes it through `redact` first (the access log in server.py, the error handler in app.py).

Every form a path may take is masked, not only the canonical one: the router decodes percent-escapes
before matching ("/api/%69ngest/x/TOKEN" and "/api/ingest/x%2FTOKEN" reach the ingest route), and a
path such as "/api//ingest/x/TOKEN" still carries the token though it matches nothing. So a URL holding
an escape is decoded first (the log then shows its decoded, masked form), and runs of slashes count
as one.
"""
from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
_INGEST_TOKEN = re.compile(r"(/ingest/+[^/?\s]+/+)[^/\s]+")  # a decoded token may hold "?"
_QUERY_SECRET = re.compile(r"([?&;](?:token|code)=)[^&;\s]*", re.IGNORECASE)


def redact(url: str) -> str:
    if "%" in url:
        url = unquote(url, errors="replace")
    return _QUERY_SECRET.sub(rf"\g<1>{MASK}", _INGEST_TOKEN.sub(rf"\g<1>{MASK}", url))
