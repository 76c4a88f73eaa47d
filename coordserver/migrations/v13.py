"""Schema version 13: a task's sortKey as a double on PostgreSQL too. It was `real` there (Peewee's FloatField),
four bytes: 0.1 came back as 0.10000000149011612 and a sortKey above 3.4e38, which the API accepts, failed the
INSERT with a database error instead of being stored. SQLite's REAL was always eight bytes: nothing to do."""
from __future__ import annotations

import peewee as pw

from ..database import is_sqlite


def upgrade(database: pw.Database) -> None:
    if not is_sqlite(database):
        database.execute_sql("ALTER TABLE task ALTER COLUMN sort_key TYPE double precision")
