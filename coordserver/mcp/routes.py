"""An MCP tool call or resource read is one request to the REST route that does the same thing,
handed to the application in-process (ASGI, no socket).

So a tool runs the very code a REST client reaches: the same admission (Gate: token, rate-limit class
of the route, presence), request parsing and models, authorisation, domain call and error bodies, the
hot paths included. There is no second implementation of any rule to drift.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

CLIENT_HEADERS = (b"x-forwarded-for", b"user-agent")


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300  # 201 for a route that makes something

    def json(self) -> Any:
        return json.loads(self.body)

    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def error(self) -> dict:
        """A refusal's body: our {"error": ...} (plus fields such as `allowed`), whatever the route said."""
        try:
            body = self.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            return body
        return {"error": f"HTTP {self.status}"}


class RouteCaller:
    """Calls the application (an ASGI callable: the Quart app, whose asgi_app the hot paths wrap) the way a
    client would."""

    def __init__(self, asgi_app):
        self._app = asgi_app

    async def call(self, outer_scope: dict, method: str, path: str, query: dict[str, str] | None = None,
                   body: dict | None = None) -> Reply:
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = [(name, value) for name, value in outer_scope["headers"]
                   if name.lower() in CLIENT_HEADERS or name.lower() == b"authorization"]
        headers.append((b"host", b"mcp.internal"))
        if body is not None:
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        raw_path = quote(path, safe="/")
        scope = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
            "method": method, "scheme": outer_scope.get("scheme", "http"), "path": path,
            "raw_path": raw_path.encode(), "root_path": "", "headers": headers,
            "query_string": urlencode(query or {}).encode(), "client": outer_scope.get("client"),
            "server": outer_scope.get("server"), "extensions": {},
        }
        return await _exchange(self._app, scope, payload)


async def _exchange(app, scope: dict, payload: bytes) -> Reply:
    sent_body = False
    status, chunks, content_type = 500, [], ""

    async def receive() -> dict:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": payload, "more_body": False}
        # Nothing more to read: the application stops waiting for a disconnect once it has answered.
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}  # pragma: no cover

    async def send(message: dict) -> None:
        nonlocal status, content_type
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", ()):
                if name.lower() == b"content-type":
                    content_type = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return Reply(status, b"".join(chunks), content_type)
