"""Schema version 11: task leases (four task columns: when the holder's lease runs out, its length, and who
held a lease that ran out, when) and resource reservations (domain/leases.py, domain/reservations.py)."""
from __future__ import annotations

import peewee as pw

from ..models import Reservation, Task
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    add_missing_columns(database, Task, ["lease_expires_at", "lease_seconds", "lease_lapsed_by", "lease_lapsed_at"])
    database.execute_sql("CREATE INDEX IF NOT EXISTS task_lease_expires_at ON task (lease_expires_at)")
    database.create_tables([Reservation], safe=True)
