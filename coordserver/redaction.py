"""Secrets that travel in URLs, masked before a URL reaches a log line.

A Buzz webhook's token is part of its ingest path; streams and notebook sockets may carry `?token=`
and invite links `?code=`. Tokens are secrets and are never logged, so every log line that names a
request URL passes it through `redact` first (the access log in server.py, the error handler in app.py).
"""
from __future__ import annotations

import re

MASK = "***"
_INGEST_TOKEN = re.compile(r"(/api/ingest/[^/?\s]+/)[^/?\s]+")
_QUERY_SECRET = re.compile(r"([?&](?:token|code)=)[^&\s]*")


def redact(url: str) -> str:
    return _QUERY_SECRET.sub(rf"\g<1>{MASK}", _INGEST_TOKEN.sub(rf"\g<1>{MASK}", url))
