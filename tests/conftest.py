"""Test harness: the real server (Hypercorn) on a free loopback port with a temporary database.

- `server`: one shared server per test module, with env tokens for admin, alice, bob and carol.
- `make_server(...)`: a fresh server with your own env, clock or database (stopped after the test).
- `client(server, who)`: an httpx.Client authenticated as one of the env identities.
- `backend` / `database_url`: parametrise a test over SQLite and PostgreSQL.
- COORD_TEST_WORKERS=N (N > 1): every test server on PostgreSQL without an injected clock runs as N
  workers on one port (tests/workers.py), and the servers that default to SQLite use PostgreSQL.
  A frozen clock cannot be shared with another process: those servers stay single-process, as do
  those of tests marked `single_process` (they watch one process's internals: its hub, bus or store);
  `make_server` gives such a server SQLite by default, as in the ordinary run.
"""
from __future__ import annotations

import os
import time
import uuid
from contextlib import contextmanager

import httpx
import pytest

from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests import pg

TEST_WORKERS = int(os.environ.get("COORD_TEST_WORKERS") or 1)
TOKENS = {"admin": "admin-token-0000000000000000", "alice": "alice-token-000000000000000",
          "bob": "bob-token-00000000000000000", "carol": "carol-token-000000000000000"}


def base_env(database_url: str, **extra: str) -> dict[str, str]:
    env = {
        "COORD_DATABASE_URL": database_url,
        "COORD_BASE_URL": "http://coord.test",
        "COORD_RATE_LIMITS": "off",
        "SERVICE_ADMIN_TOKEN": TOKENS["admin"],
        "SERVICE_TOKEN_ALICE": TOKENS["alice"],
        "SERVICE_TOKEN_BOB": TOKENS["bob"],
        "SERVICE_TOKEN_CAROL": TOKENS["carol"],
    }
    env.update(extra)
    return env


def client(server: ServerThread, who: str | None = None, token: str | None = None, **kwargs) -> httpx.Client:
    headers = {}
    token = token or (TOKENS[who] if who else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=server.url, headers=headers, timeout=30, **kwargs)


def async_client(server: ServerThread, who: str | None = None, token: str | None = None, **kwargs) -> httpx.AsyncClient:
    headers = {}
    token = token or (TOKENS[who] if who else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30, **kwargs)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'coord.db'}"


@pytest.fixture(scope="session")
def pg_cluster():
    pg.require_binaries()
    cluster = pg.PostgresCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    """Parametrises a test over both backends: a fresh database for each."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'coord.db'}"
    return request.getfixturevalue("pg_cluster").create_database()


def start_server(settings: Settings, clock=None, port: int = 0, workers: int = TEST_WORKERS) -> ServerThread:
    """A started test server: in this process, or N workers on one port under COORD_TEST_WORKERS=N."""
    if workers > 1 and clock is None and settings.database_url.startswith("postgresql"):
        from tests.workers import WorkerGroup
        return WorkerGroup(settings, workers, port=port).start()
    return ServerThread(settings, clock=clock, port=port).start()


def pytest_collection_modifyitems(items):
    """`single_process` keeps the servers a test starts single: the module-wide `server` is shared
    with the module's other tests (started for whichever test asks first), so it cannot honour it."""
    for item in items:
        if item.get_closest_marker("single_process") and "server" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked single_process but uses the module-wide "
                                    "`server`: start its own with `make_server()`")


def workers_for(request) -> int:
    """COORD_TEST_WORKERS, or 1 for tests marked `single_process`."""
    return 1 if request.node.get_closest_marker("single_process") else TEST_WORKERS


def default_url(request, directory, workers: int = TEST_WORKERS) -> str:
    """SQLite in `directory`, or a PostgreSQL database for a server of several workers."""
    if workers > 1:
        return request.getfixturevalue("pg_cluster").create_database()
    return f"sqlite:///{directory / f'coord-{uuid.uuid4().hex[:6]}.db'}"


@pytest.fixture
def make_server(request, tmp_path):
    started: list[ServerThread] = []

    def factory(env: dict[str, str] | None = None, clock=None, database_url: str | None = None,
                port: int = 0, **settings_overrides) -> ServerThread:
        # a server that stays one process (a frozen clock, single_process) keeps the usual SQLite
        workers = workers_for(request) if clock is None else 1
        url = database_url or default_url(request, tmp_path, workers)
        full_env = base_env(url, **(env or {}))
        server = start_server(Settings.from_env(full_env, **settings_overrides), clock=clock, port=port,
                              workers=workers)
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()


def backend_url(request, tmp_path_factory) -> str:
    """For a fixture parametrised over ["sqlite", "postgresql"]: a fresh database of that backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('backend') / 'coord.db'}"
    return request.getfixturevalue("pg_cluster").create_database()


@contextmanager
def backend_server(request, tmp_path_factory, env: dict[str, str] | None = None, clock=None, **settings_overrides):
    """A server for a fixture parametrised over ["sqlite", "postgresql"] (N workers under COORD_TEST_WORKERS)."""
    settings = Settings.from_env(base_env(backend_url(request, tmp_path_factory), **(env or {})), **settings_overrides)
    server = start_server(settings, clock=clock, workers=workers_for(request))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """One server per test module; tests in the module must not depend on each other's data."""
    srv = start_server(Settings.from_env(base_env(default_url(request, tmp_path_factory.mktemp("server")))),
                       workers=workers_for(request))
    yield srv
    srv.stop()


def eventually(fetch, check, timeout: float = 10):
    """fetch() until check(its value) holds (or the time is up); returns the last value. For what one
    server process hears of another's change through the bus: asynchronously, within milliseconds
    (COORD_TEST_WORKERS, or two servers on one database)."""
    deadline = time.monotonic() + timeout
    while True:
        value = fetch()
        if check(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()
