"""Schema version 7: notebook page versions (stored snapshots of a page's text) and the identities
who edited a page since its newest version."""
from __future__ import annotations

import peewee as pw

from ..models import NotebookPendingEditor, NotebookVersion


def upgrade(database: pw.Database) -> None:
    database.create_tables([NotebookVersion, NotebookPendingEditor], safe=True)
