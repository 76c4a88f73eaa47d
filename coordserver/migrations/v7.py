"""Schema version 7: alerts (the persistent state above buzz events; domain/alerts.py) and each buzz
event's alert."""
from __future__ import annotations

import peewee as pw

from ..models import BuzzAlert, BuzzEvent
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    database.create_tables([BuzzAlert], safe=True)
    add_missing_columns(database, BuzzEvent, ["alert_id"])
    database.execute_sql("CREATE INDEX IF NOT EXISTS buzz_event_alert_id_id ON buzz_event (alert_id, id)")
