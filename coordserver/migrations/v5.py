"""Schema version 5: notebook read bases in the database (a PATCH served by another worker process
merges three-way against what the writer read, as one served by the same process does)."""
from __future__ import annotations

import peewee as pw

from ..models import NotebookReadBase


def upgrade(database: pw.Database) -> None:
    database.create_tables([NotebookReadBase], safe=True)
