"""Schema version 12 (issue 28): per-identity loop-guard thresholds, set by admins (users.loop_messages,
users.loop_minutes; null: the deployment's). domain/guards.py reads them."""
from __future__ import annotations

import peewee as pw

from ..models import User
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    add_missing_columns(database, User, ["loop_messages", "loop_minutes"])
