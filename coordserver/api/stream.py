"""`GET /api/stream`: the SSE stream (token in the query or the Authorization header)."""
from __future__ import annotations

from quart import Blueprint, Response, g, make_response, request

from ..auth import current_principal
from ..context import coord
from ..errors import Invalid, Unauthorized
from ..events.log import parse_event_id
from .common import accepts

bp = Blueprint("stream", __name__, url_prefix="/api")

STREAM_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "Connection": "keep-alive",
    "X-Accel-Buffering": "no",
}


def _resume_point() -> tuple[int | None, str | None]:
    """(id, tag) from Last-Event-ID or ?lastEventId: an event id as the stream gave it (`1532.kqzvbf`,
    checked against the log on resume) or a plain integer (v1, unchecked); (None, None) without one."""
    raw = request.headers.get("Last-Event-ID") or request.args.get("lastEventId")
    if raw is None or not raw.strip():
        return None, None
    if raw.strip().startswith("-") and raw.strip()[1:].isdigit():
        raise Invalid("Last-Event-ID / lastEventId must not be negative")
    try:
        return parse_event_id(raw)
    except ValueError:
        raise Invalid("Last-Event-ID / lastEventId must be an event id (as the stream gave it, or an integer)") \
            from None


@bp.get("/stream")
@accepts(media="text/event-stream")
async def stream():
    """The event stream (SSE); event ids are `<number>.<tag>`, resume with Last-Event-ID (GET /api/skill/monitoring).

    Each logged event's `id:` is its number, a dot and a six-letter tag of that event (`1532.kqzvbf`).
    Resume with `Last-Event-ID` (or `?lastEventId=`) set to the last id received: the events after it
    are replayed, or `resync` follows `connected` when they cannot be (reason `expired`, `ahead`, or
    `restored`: the tag names another event, the database was restored). A plain integer is accepted
    (v1) and not checked. See GET /api/skill/monitoring."""
    principal = current_principal()
    if principal is None:
        raise Unauthorized("Invalid token" if getattr(g, "token_given", False) else "token required")
    resume_after, resume_tag = _resume_point()
    hub = coord().services.sse
    response = await make_response(await hub.open(principal, resume_after, resume_tag), 200, STREAM_HEADERS)
    assert isinstance(response, Response)  # Quart's own (its type admits a werkzeug one too)
    response.timeout = None
    return response
