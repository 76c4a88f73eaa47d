"""A database written by an older schema version opens and is upgraded, never silently broken."""
from __future__ import annotations

import importlib
from datetime import datetime

import peewee as pw
import pytest

from coordserver.principal import hash_token
from coordserver.database import open_database
from coordserver.db import Store
from coordserver.migrations import SCHEMA_VERSION, UPGRADES, SchemaTooNew
from tests.helpers import client

OLD_TOKEN = "f" * 64


def create_v1_database(url: str) -> None:
    """The first schema version, frozen here as it shipped: identities, tokens and invites only."""
    database = open_database(url)

    class V1(pw.Model):
        class Meta:
            database = None
            legacy_table_names = False

    class SchemaVersion(V1):
        version = pw.IntegerField()

    class User(V1):
        id = pw.CharField(max_length=50, primary_key=True)
        display_name = pw.CharField(max_length=100)
        is_admin = pw.BooleanField(default=False)
        is_agent = pw.BooleanField(default=False)
        avatar_url = pw.CharField(max_length=500, null=True)
        created_at = pw.DateTimeField()
        updated_at = pw.DateTimeField()
        archived_at = pw.DateTimeField(null=True)

    class Token(V1):
        identity = pw.CharField(max_length=50, index=True)
        token_hash = pw.CharField(max_length=64, unique=True)
        is_admin = pw.BooleanField(default=False)
        label = pw.CharField(max_length=100, null=True)
        created_by = pw.CharField(max_length=50, null=True)
        created_at = pw.DateTimeField()
        expires_at = pw.DateTimeField(null=True)
        last_used_at = pw.DateTimeField(null=True)
        revoked_at = pw.DateTimeField(null=True)

    class Invite(V1):
        code = pw.CharField(max_length=64, unique=True)
        created_by = pw.CharField(max_length=50)
        identity_hint = pw.CharField(max_length=50, null=True)
        is_admin = pw.BooleanField(default=False)
        max_uses = pw.IntegerField(default=1)
        use_count = pw.IntegerField(default=0)
        expires_at = pw.DateTimeField(null=True)
        created_at = pw.DateTimeField()
        webhook_token = pw.CharField(max_length=128, null=True)

    models = [SchemaVersion, User, Token, Invite]
    with database.bind_ctx(models):
        database.create_tables(models)
        SchemaVersion.create(version=1)
        now = datetime(2026, 1, 5, 12, 0, 0)
        User.create(id="oldtimer", display_name="Old Timer", created_at=now, updated_at=now)
        Token.create(identity="oldtimer", token_hash=hash_token(OLD_TOKEN), label="from v1", created_at=now)
    database.close()


def test_v1_database_is_upgraded_on_start(make_server, database_url):
    create_v1_database(database_url)
    srv = make_server(database_url=database_url)
    old = client(srv, token=OLD_TOKEN)
    assert old.post("/api/auth/verify").json() == {"identity": "oldtimer", "isAdmin": False}
    users = old.get("/api/users").json()["users"]
    assert next(u for u in users if u["id"] == "oldtimer")["displayName"] == "Old Timer"
    record = next(t for t in client(srv, "admin").get("/api/auth/tokens").json()["tokens"] if t["identity"] == "oldtimer")
    assert record["label"] == "from v1" and record["staleTriggerHours"] == 4 and record["backupAgent"] is None
    srv.stop()
    store = Store(database_url)
    found, now = store.open()
    store.close()
    assert (found, now) == (SCHEMA_VERSION, SCHEMA_VERSION)


def test_newer_schema_refuses_to_start(sqlite_url):
    store = Store(sqlite_url)
    store.open()
    store.database.execute_sql("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    store.close()
    with pytest.raises(SchemaTooNew):
        Store(sqlite_url).open()


def test_every_schema_version_after_the_first_has_its_own_module():
    """migrations/vN.py takes a database from N-1 to N, for every N up to SCHEMA_VERSION."""
    assert sorted(UPGRADES) == list(range(2, SCHEMA_VERSION + 1))
    for version, upgrade in UPGRADES.items():
        module = importlib.import_module(f"coordserver.migrations.v{version}")
        assert upgrade is module.upgrade
