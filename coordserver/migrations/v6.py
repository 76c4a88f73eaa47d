"""Schema version 6: asks (a question with options put to one or more identities; domain/asks.py)."""
from __future__ import annotations

import peewee as pw

from ..models import Ask, AskRecipient


def upgrade(database: pw.Database) -> None:
    database.create_tables([Ask, AskRecipient], safe=True)
