"""Schema version 10 (issue 28): who is who and loop guards. An invite's `is_agent` (the kind its
registrations get), the loop guards (one active per scope: a partial unique index) and the chat fan-out
guard's last wake per channel and agent."""
from __future__ import annotations

import peewee as pw

from ..models import ChatWake, Guard, Invite
from .ops import add_missing_columns


def create_guard_indexes(database: pw.Database) -> None:
    database.execute_sql("CREATE UNIQUE INDEX IF NOT EXISTS guard_active_scope ON guard (scope) "
                         "WHERE cleared_at IS NULL")
    database.execute_sql("CREATE INDEX IF NOT EXISTS guard_cleared_at_until ON guard (cleared_at, until)")


def upgrade(database: pw.Database) -> None:
    add_missing_columns(database, Invite, ["is_agent"])
    database.create_tables([Guard, ChatWake], safe=True)
    create_guard_indexes(database)
