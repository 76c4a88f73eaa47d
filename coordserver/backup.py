"""`coordserver backup PATH` and `coordserver restore PATH` for SQLite (PostgreSQL: pg_dump, docs/deploy.md §6).

Backup uses SQLite's online backup API (sqlite3.Connection.backup): a consistent copy, safe while the
server runs and writes. It copies in one step, inside one read transaction of the WAL database: the
copy is the snapshot at its start and the server's writer carries on meanwhile (a copy in several steps
would start over after every write, and under steady writes might never finish). The copy is checked
with PRAGMA integrity_check before it is kept. Restore refuses while anything else has the database open
(a running server), checks the backup, keeps the database it replaces beside it, and copies the backup
in with the same API. The restored log reuses event ids the old one had given out; streams tell the two
apart by the tag in each event id (events/log.py) and answer `resync`.
"""
from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from .database import sqlite_path

ALL_PAGES = -1


class BackupError(Exception):
    """Why a backup or restore did not happen, in words for the operator."""


def database_file(url: str) -> Path:
    if not url.startswith("sqlite:"):
        raise BackupError("backup and restore here are for SQLite; for PostgreSQL use pg_dump and pg_restore "
                          "(docs/deploy.md, 'Backup and restore')")
    return sqlite_path(url)


def _copy(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    source.backup(target, pages=ALL_PAGES)


def _check(connection: sqlite3.Connection, what: str) -> None:
    result = connection.execute("PRAGMA integrity_check").fetchone()[0]
    if result != "ok":
        raise BackupError(f"{what} fails its integrity check: {result}")


def backup(url: str, destination: Path) -> Path:
    """Copy the live database to `destination` (a new file); returns it."""
    live = database_file(url)
    if not live.exists():
        raise BackupError(f"no database at {live}")
    if destination.exists():
        raise BackupError(f"{destination} exists: name a new file")
    partial = destination.with_name(destination.name + ".partial")
    source = sqlite3.connect(live)
    target = sqlite3.connect(partial)
    try:
        _copy(source, target)
        target.execute("PRAGMA journal_mode=delete")  # one self-contained file
        _check(target, "the copy")
    finally:
        target.close()
        source.close()
    partial.rename(destination)
    return destination


def restore(url: str, backup_file: Path) -> Path | None:
    """Replace the database with `backup_file`. Returns where the replaced database was kept (None if
    there was none). Refuses while another connection (a running server) has the database open."""
    live = database_file(url)
    if not backup_file.is_file():
        raise BackupError(f"no backup at {backup_file}")
    source = sqlite3.connect(backup_file)
    try:
        _check(source, f"the backup {backup_file}")
        target = sqlite3.connect(live, timeout=0.5)
        try:
            _take_alone(target, live)
            kept = _keep_replaced(live)
            _copy(source, target)
            target.execute("PRAGMA journal_mode=wal")
        finally:
            target.close()
    finally:
        source.close()
    return kept


def _take_alone(connection: sqlite3.Connection, live: Path) -> None:
    """Leaving WAL mode needs the only connection to the database: with a server running it fails."""
    try:
        mode = connection.execute("PRAGMA journal_mode=delete").fetchone()[0]
    except sqlite3.OperationalError:
        mode = None
    if mode != "delete":
        raise BackupError(f"{live} is in use (is coordserver still running?): stop the server, then restore")


def _keep_replaced(live: Path) -> Path | None:
    if live.stat().st_size == 0:
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    kept = live.with_name(f"{live.name}.replaced-{stamp}")
    source = sqlite3.connect(live)
    target = sqlite3.connect(kept)
    try:
        _copy(source, target)
    finally:
        target.close()
        source.close()
    return kept
