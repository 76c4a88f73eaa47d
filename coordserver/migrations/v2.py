"""Schema version 2: presence, backup agents and every area beyond identities; full-text search."""
from __future__ import annotations

import peewee as pw

from ..database import is_sqlite
from ..models import ALL_MODELS, Token, User
from .ops import add_missing_columns


def upgrade(database: pw.Database) -> None:
    """v1 held identities, tokens and invites only. v2 adds presence, backup agents and every area."""
    add_missing_columns(database, User, ["last_seen_at", "last_seen_source"])
    add_missing_columns(database, Token, ["backup_agent", "stale_trigger_hours"])
    database.create_tables(ALL_MODELS, safe=True)
    create_search_index(database)


def create_search_index(database: pw.Database) -> None:
    """Full text over message title and body and chat bodies: FTS5 on SQLite, GIN expression indexes on PostgreSQL."""
    if is_sqlite(database):
        database.execute_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS message_fts USING fts5("
            "title, body, content='message', content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
        database.execute_sql(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chat_message_fts USING fts5("
            "body, content='chat_message', content_rowid='id', tokenize='unicode61 remove_diacritics 2')")
        for name, sql in {
            "chat_message_fts_ai": "AFTER INSERT ON chat_message BEGIN INSERT INTO chat_message_fts(rowid, body) "
                                   "VALUES (new.id, new.body); END",
            "chat_message_fts_ad": "AFTER DELETE ON chat_message BEGIN INSERT INTO chat_message_fts("
                                   "chat_message_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
            "chat_message_fts_au": "AFTER UPDATE OF body ON chat_message BEGIN "
                                   "INSERT INTO chat_message_fts(chat_message_fts, rowid, body) "
                                   "VALUES ('delete', old.id, old.body); "
                                   "INSERT INTO chat_message_fts(rowid, body) VALUES (new.id, new.body); END",
        }.items():
            database.execute_sql(f"CREATE TRIGGER IF NOT EXISTS {name} {sql}")
        for name, sql in {
            "message_fts_ai": "AFTER INSERT ON message BEGIN INSERT INTO message_fts(rowid, title, body) "
                              "VALUES (new.id, new.title, new.body); END",
            "message_fts_ad": "AFTER DELETE ON message BEGIN INSERT INTO message_fts(message_fts, rowid, title, body) "
                              "VALUES ('delete', old.id, old.title, old.body); END",
            "message_fts_au": "AFTER UPDATE OF title, body ON message BEGIN "
                              "INSERT INTO message_fts(message_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body); "
                              "INSERT INTO message_fts(rowid, title, body) VALUES (new.id, new.title, new.body); END",
        }.items():
            database.execute_sql(f"CREATE TRIGGER IF NOT EXISTS {name} {sql}")
    else:
        database.execute_sql(
            "CREATE INDEX IF NOT EXISTS message_fts_idx ON message USING GIN "
            "(to_tsvector('simple', coalesce(title, '') || ' ' || coalesce(body, '')))")
        database.execute_sql(
            "CREATE INDEX IF NOT EXISTS chat_message_fts_idx ON chat_message USING GIN "
            "(to_tsvector('simple', body))")
