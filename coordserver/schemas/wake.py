"""Wake query (API.md §9)."""
from __future__ import annotations

from .base import Query


class WakeQuery(Query):
    """GET /api/wake and /api/wake/{identity}."""
    include_off_hours: bool = False
