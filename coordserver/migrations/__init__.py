"""Schema migrations: one module per schema version (`vN.upgrade` takes a database from N-1 to N), and
the runner that applies them on start and by `coordserver migrate`.

Version 1 (identities, tokens and invites) has no module: nothing upgrades to it, and a new database
is created at SCHEMA_VERSION directly. A module never imports the domain (an import contract): a
migration must mean the same however the domain changes later.
"""
from __future__ import annotations

import logging
from typing import Callable

import peewee as pw

from ..database import is_sqlite
from ..models import ALL_MODELS, SchemaVersion
from . import v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14

log = logging.getLogger("coord.db")

SCHEMA_VERSION = 14
UPGRADES: dict[int, Callable[[pw.Database], None]] = {2: v2.upgrade, 3: v3.upgrade, 4: v4.upgrade,
                                                     5: v5.upgrade, 6: v6.upgrade, 7: v7.upgrade, 8: v8.upgrade,
                                                     9: v9.upgrade, 10: v10.upgrade, 11: v11.upgrade,
                                                     12: v12.upgrade, 13: v13.upgrade, 14: v14.upgrade}


class SchemaTooNew(RuntimeError):
    pass


MIGRATION_LOCK_KEY = 0x636F6F7264  # "coord": the advisory lock that serialises schema upgrades


def current_version(database: pw.Database) -> int | None:
    if not database.table_exists(SchemaVersion._meta.table_name):
        return None
    row = SchemaVersion.select(pw.fn.MAX(SchemaVersion.version)).scalar()
    return int(row) if row is not None else None


def migrate(database: pw.Database) -> tuple[int | None, int]:
    """Bring the schema to SCHEMA_VERSION. Returns (version found, version now).

    On PostgreSQL, several coordserver processes (workers, a rolling upgrade, `coordserver migrate`)
    may start at once: a transaction-scoped advisory lock makes them upgrade one after another, and
    the later ones find the schema current."""
    with database.atomic():
        if not is_sqlite(database):
            database.execute_sql("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        found = current_version(database)
        if found is None:
            database.create_tables(ALL_MODELS, safe=True)
            v2.create_search_index(database)
            v4.create_wake_indexes(database)
            v10.create_guard_indexes(database)
            SchemaVersion.create(version=SCHEMA_VERSION)
            return None, SCHEMA_VERSION
        if found > SCHEMA_VERSION:
            raise SchemaTooNew(
                f"database schema version {found} is newer than this coordserver ({SCHEMA_VERSION}); upgrade coordserver")
        for version in range(found + 1, SCHEMA_VERSION + 1):
            log.info("upgrading database schema to version %d", version)
            UPGRADES[version](database)
            SchemaVersion.delete().execute()
            SchemaVersion.create(version=version)
        return found, SCHEMA_VERSION
