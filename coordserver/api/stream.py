"""`GET /api/stream`: the SSE stream (token in the query or the Authorization header)."""
from __future__ import annotations

from quart import Blueprint, g, make_response, request

from ..auth import current_principal
from ..context import coord
from ..errors import Invalid, Unauthorized
from .common import accepts

bp = Blueprint("stream", __name__, url_prefix="/api")

STREAM_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


def _resume_point() -> int | None:
    raw = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    if raw is None or not raw.strip():
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise Invalid("Last-Event-ID / lastEventId must be an integer event id") from None
    if value < 0:
        raise Invalid("Last-Event-ID / lastEventId must not be negative")
    return value


@bp.get("/stream")
@accepts(media="text/event-stream")
async def stream():
    principal = current_principal()
    if principal is None:
        raise Unauthorized("Invalid token" if getattr(g, "token_given", False) else "token required")
    resume_after = _resume_point()
    hub = coord().services.sse
    response = await make_response(await hub.open(principal, resume_after), 200, STREAM_HEADERS)
    response.timeout = None
    return response
