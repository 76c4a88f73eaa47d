"""Full-text conditions for both backends, built from a user query that may contain anything.

The query is reduced to its words (letters, digits, underscore), so FTS5 operators, quotes, NUL
bytes and stray punctuation can never reach the query parser: every input is a clean match or no
match. All words must match.
"""
from __future__ import annotations

import re

import peewee as pw

from ..database import is_sqlite
from ..models import ChatMessage, Message

_WORD = re.compile(r"\w+", re.UNICODE)
MAX_WORDS = 32


def words(q: str) -> list[str]:
    return _WORD.findall(q)[:MAX_WORDS]


def condition(model: type[Message | ChatMessage], fts_table: str, pg_document: str, terms: list[str]) -> pw.Node:
    """`model.id IN <fts5 match>` on SQLite; `<pg_document> @@ plainto_tsquery` on PostgreSQL.

    `pg_document` must be the exact expression of the table's GIN index so the index is used.
    """
    database = model._meta.database
    database = getattr(database, "obj", None) or database  # the models' DatabaseProxy
    if is_sqlite(database):
        phrase = " ".join('"' + term.replace('"', '""') + '"' for term in terms)
        return model.id.in_(pw.SQL(f"(SELECT rowid FROM {fts_table} WHERE {fts_table} MATCH {database.param})",
                                   [phrase]))
    return pw.SQL(f"{pg_document} @@ plainto_tsquery('simple', {database.param})", [" ".join(terms)])
