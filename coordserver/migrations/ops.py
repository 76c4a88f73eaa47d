"""Schema operations the version files share."""
from __future__ import annotations

import peewee as pw
from playhouse.migrate import PostgresqlMigrator, SqliteMigrator, migrate as run_migrations

from ..database import is_sqlite


def columns(database: pw.Database, table: str) -> set[str]:
    return {c.name for c in database.get_columns(table)}


def add_missing_columns(database: pw.Database, model: type[pw.Model], names: list[str]) -> None:
    migrator = SqliteMigrator(database) if is_sqlite(database) else PostgresqlMigrator(database)
    existing = columns(database, model._meta.table_name)
    ops = [migrator.add_column(model._meta.table_name, name, model._meta.fields[name])
           for name in names if name not in existing]
    if ops:
        run_migrations(*ops)
