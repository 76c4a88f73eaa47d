"""Schema version 9: a webhook's own flap thresholds (null: the deployment's COORD_FLAP_RESOLUTIONS and
COORD_FLAP_WINDOW_MINUTES; domain/alerts.py FlapRule)."""
from __future__ import annotations

import peewee as pw

from ..models import BuzzWebhook
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    add_missing_columns(database, BuzzWebhook, ["flap_resolutions", "flap_window_minutes"])
