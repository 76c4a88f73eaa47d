"""Schema version 14 (issue 30): buzz_alert_tally, the firings merged ingest batches counted on an alert and
not yet folded into its row (models.BuzzAlertTally)."""
from __future__ import annotations

import peewee as pw

from ..models import BuzzAlertTally


def upgrade(database: pw.Database) -> None:
    database.create_tables([BuzzAlertTally], safe=True)
