"""Plain JSON-RPC errors for bodies the MCP SDK cannot validate.

The SDK's handshake-era transport answers a body that is JSON but no JSON-RPC message (a batch, a
request without `method`, ...) with pydantic's validation report as the error message: it echoes the
input and names the validation library and its version. `plain_validation_errors` wraps the ASGI
`send` of a /mcp request and replaces such an answer (and only it) with the JSON-RPC 2.0 "Invalid
Request" error, as the 2026-07-28 transport already answers a batch.
"""
from __future__ import annotations

import json

INVALID_REQUEST = -32600
MESSAGE = "Invalid Request: the body must be one JSON-RPC 2.0 request, notification or response object"
_SDK_PREFIX = "Validation error"


def plain_body() -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": MESSAGE}},
                      separators=(",", ":")).encode()


def _is_validation_report(body: bytes) -> bool:
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return False
    return isinstance(error, dict) and str(error.get("message", "")).startswith(_SDK_PREFIX)


def plain_validation_errors(send):
    """`send`, with a 400 answer's body held until complete and rewritten if it is the SDK's report."""
    held: list[dict] = []
    chunks: list[bytes] = []

    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start" and message["status"] == 400:
            held.append(message)
            return
        if not held or message["type"] != "http.response.body":
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        body = b"".join(chunks)
        start = held.pop()
        if _is_validation_report(body):
            body = plain_body()
            start = {**start, "headers": [(k, v) for k, v in start.get("headers", ())
                                          if k.lower() != b"content-length"]
                     + [(b"content-length", str(len(body)).encode())]}
        await send(start)
        await send({"type": "http.response.body", "body": body})
    return sending
