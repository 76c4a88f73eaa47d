"""Schema version 8: alerts (the persistent state above buzz events; domain/alerts.py), silences
(domain/silences.py), each buzz event's alert and silence, and a webhook's runbook and escalation."""
from __future__ import annotations

import peewee as pw

from ..models import BuzzAlert, BuzzEvent, BuzzSilence, BuzzWebhook
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    database.create_tables([BuzzAlert, BuzzSilence], safe=True)
    add_missing_columns(database, BuzzEvent, ["alert_id", "silenced_by"])
    add_missing_columns(database, BuzzWebhook, ["runbook_page_id", "runbook_url", "escalate_after_minutes",
                                                "escalate_to"])
    database.execute_sql("CREATE INDEX IF NOT EXISTS buzz_event_alert_id_id ON buzz_event (alert_id, id)")
