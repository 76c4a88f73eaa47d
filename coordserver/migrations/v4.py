"""Schema version 4: the partial index behind wake_version."""
from __future__ import annotations

import peewee as pw


def upgrade(database: pw.Database) -> None:
    create_wake_indexes(database)


def create_wake_indexes(database: pw.Database) -> None:
    """The newest event addressed to everyone, for wake_version (domain/wake.py): a partial index, so
    the lookup stays one index probe however long the log is. `WHERE to_all`, not `= ?`: SQLite uses
    a partial index only for a query whose WHERE repeats the index's own terms."""
    database.execute_sql("CREATE INDEX IF NOT EXISTS event_to_all ON event (id) WHERE to_all")
