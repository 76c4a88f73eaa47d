"""The task state table of API.md §6 (Δ9) plus §18's `closed`, as the client needs it.

The server is the judge (a refused move answers 409 with its own `allowed` list); this copy only lets the
client offer the moves that can succeed and step along the usual path with `]` and `[`.
"""
from __future__ import annotations

ALLOWED: dict[str, tuple[str, ...]] = {
    "queued": ("ready", "holding", "closed"),
    "ready": ("in_progress", "holding", "closed"),
    "in_progress": ("review", "holding", "closed"),
    "review": ("complete", "in_progress", "holding", "closed"),
    "holding": ("ready", "in_progress", "closed"),
    "complete": ("ready",),
    "closed": ("ready",),
}

# Statuses as a person reads them (the wire names, e.g. `in_progress`, are never shown)
STATUS_WORDS = {"queued": "Queued", "ready": "Ready", "in_progress": "In progress", "review": "Review",
                "holding": "Holding", "complete": "Complete", "closed": "Closed"}

# `]` walks forward along the work path, `[` walks back; holding and closed are never a step, only a choice.
FORWARD = {"queued": "ready", "ready": "in_progress", "in_progress": "review", "review": "complete",
           "holding": "in_progress"}
BACKWARD = {"review": "in_progress", "holding": "ready", "complete": "ready", "closed": "ready"}


def allowed_moves(status: str | None, server_allowed: list[str] | None = None) -> tuple[str, ...]:
    """What may follow `status`: the server's own 409 list when we have one, else the table.
    An unknown status (a newer server) offers everything the table knows."""
    if server_allowed:
        return tuple(server_allowed)
    if status in ALLOWED:
        return ALLOWED[status]
    return tuple(ALLOWED)


def step(status: str | None, direction: int) -> str | None:
    """The next status along the path (`direction` 1 or -1), or None when there is no such step."""
    return (FORWARD if direction > 0 else BACKWARD).get(status or "")
