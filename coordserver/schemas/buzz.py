"""Buzz request models (API.md §8). Webhook config bodies are checked by domain/buzz.py's clean_* rules."""
from __future__ import annotations

from .base import Query
from .common import Limit, clamp_limit


class BuzzEventsQuery(Query):
    """GET /api/buzz/events and /api/broadcast/events."""
    app_name: str | None = None
    limit: Limit = 50

    def __post_init__(self) -> None:
        self.app_name = self.app_name or None
        self.limit = clamp_limit(self.limit)
