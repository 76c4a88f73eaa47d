"""Environment tokens are read in the documented order."""
from __future__ import annotations

import json

from coordserver.settings import Settings, parse_env_tokens


def test_env_token_sources():
    tokens = parse_env_tokens({
        "SERVICE_TOKEN_ALICE": "t-alice", "MAILBOX_TOKEN_BOB": "t-bob", "SERVICE_TOKEN_X_ADMIN": "ignored",
        "SERVICE_TOKENS": json.dumps({"t-multi": "Carol"}), "MAILBOX_TOKENS": json.dumps({"t-unused": "dave"}),
        "UI_MAILBOX_KEYS": json.dumps({"t-ui": {"sender": "Erin", "admin": True}}),
        "SERVICE_TOKEN": "t-single", "SERVICE_ADMIN_TOKEN": "t-admin", "MAILBOX_ADMIN_TOKEN": "t-admin2",
    })
    summary = {t: (s.identity, s.is_admin) for t, s in tokens.items()}
    assert summary == {"t-alice": ("alice", False), "t-bob": ("bob", False), "t-multi": ("carol", False),
                       "t-ui": ("erin", True), "t-admin": ("admin", True), "t-admin2": ("admin", True)}


def test_single_token_only_when_nothing_else():
    tokens = parse_env_tokens({"MAILBOX_TOKEN": "solo", "USER": "Operator"})
    assert {t: s.identity for t, s in tokens.items()} == {"solo": "operator"}


def test_settings_defaults_and_flags(tmp_path):
    settings = Settings.from_env({"COORD_RATE_LIMITS": "off", "SERVICE_WEBHOOK_ALLOWED_HOSTS": "A.example, b.test",
                                  "COORD_BASE_URL": "https://coord.example/"})
    assert settings.rate_limits is False
    assert settings.webhook_allowed_hosts == frozenset({"a.example", "b.test"})
    assert settings.base_url == "https://coord.example"
    assert settings.database_url.startswith("sqlite:///") and settings.database_url.endswith("coord.db")


def test_the_stream_heartbeat_interval():
    """COORD_SSE_HEARTBEAT_SECONDS: how often a stream gets its `: heartbeat` comment (and workers tell each
    other who streams where); a positive number of seconds."""
    import pytest
    assert Settings.from_env({}).sse_heartbeat_seconds == 30.0
    assert Settings.from_env({"COORD_SSE_HEARTBEAT_SECONDS": "12.5"}).sse_heartbeat_seconds == 12.5
    for bad in ("0", "-3", "soon", "nan", "inf"):
        with pytest.raises(ValueError, match="COORD_SSE_HEARTBEAT_SECONDS must be a positive number of seconds"):
            Settings.from_env({"COORD_SSE_HEARTBEAT_SECONDS": bad})


def test_postgresql_writer_threads(database_url):
    """One writer by default (every queued write shares a transaction); COORD_PG_WRITERS=N runs N on
    PostgreSQL; SQLite always has one writer (its single write lock)."""
    import pytest

    from coordserver.db import Store
    assert Settings.from_env({}).pg_writers == 1
    assert Settings.from_env({"COORD_PG_WRITERS": "3"}).pg_writers == 3
    with pytest.raises(ValueError, match="COORD_PG_WRITERS must be a positive integer, not '0'"):
        Settings.from_env({"COORD_PG_WRITERS": "0"})
    store = Store(database_url, pg_writers=3)
    store.open()
    try:
        writers = [t.name for t in store._writers]
        assert len(writers) == (1 if store.sqlite else 3)
    finally:
        store.close()
