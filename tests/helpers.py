"""Helpers for the tests (the fixtures that use them are in conftest.py): the env tokens, the settings
of a test server, starting one (in this process, or N workers under COORD_TEST_WORKERS=N), clients
authenticated as an env identity, and small waits and checks.

- `client(server, who)`: an httpx.Client authenticated as one of the env identities.
- `backend_server(...)`: a server for a fixture parametrised over SQLite and PostgreSQL.
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx

from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordtui.client.api import tls_for

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


# Clients of the plain-http test servers make no TLS context (tls_for): httpx would otherwise load the CA
# bundle for each one, 20 ms, and 0.1 s on a loaded machine, thousands of times a run.
def client(server: ServerThread, who: str | None = None, token: str | None = None, **kwargs) -> httpx.Client:
    headers = {}
    token = token or (TOKENS[who] if who else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.Client(base_url=server.url, headers=headers, timeout=30, verify=tls_for(server.url), **kwargs)


def async_client(server: ServerThread, who: str | None = None, token: str | None = None, **kwargs) -> httpx.AsyncClient:
    headers = {}
    token = token or (TOKENS[who] if who else None)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30, verify=tls_for(server.url),
                             **kwargs)


def start_server(settings: Settings, clock=None, port: int = 0, workers: int = TEST_WORKERS) -> ServerThread:
    """A started test server: in this process, or N workers on one port under COORD_TEST_WORKERS=N."""
    if workers > 1 and clock is None and settings.database_url.startswith("postgresql"):
        from tests.workers import WorkerGroup
        return WorkerGroup(settings, workers, port=port).start()
    return ServerThread(settings, clock=clock, port=port).start()


def workers_for(request) -> int:
    """COORD_TEST_WORKERS, or 1 for tests marked `single_process`."""
    return 1 if request.node.get_closest_marker("single_process") else TEST_WORKERS


def default_url(request, directory, workers: int = TEST_WORKERS) -> str:
    """SQLite in `directory`, or a PostgreSQL database for a server of several workers."""
    if workers > 1:
        return request.getfixturevalue("pg_cluster").create_database()
    return f"sqlite:///{directory / f'coord-{uuid.uuid4().hex[:6]}.db'}"


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


def at_once(servers: list[ServerThread], pass_of):
    """One background pass per entry of `servers`, all released together (processes' timers racing):
    `pass_of(server)` is the coroutine function `server.call` runs. Returns each pass's result, in order."""
    barrier = threading.Barrier(len(servers))

    def run(server: ServerThread):
        barrier.wait()
        return server.call(pass_of(server))
    with ThreadPoolExecutor(len(servers)) as pool:
        return list(pool.map(run, servers))


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



class MergeWatch:
    """How the writer ran a `db.merges` unit function's queued calls (on SQLite only those it marks so): the
    sizes of the batches it merged, those sent back to run one by one (db.Unmerged) and any that failed."""

    def __init__(self, monkeypatch, unit_function) -> None:
        from coordserver import db
        self.merged: list[int] = []
        self.unmerged: list[int] = []
        self.failed: list[Exception] = []
        merge = unit_function.merge
        many = merge.many

        def watching(calls):
            try:
                finishers = many(calls)
            except db.Unmerged:
                self.unmerged.append(len(calls))
                raise
            except Exception as failure:
                self.failed.append(failure)
                raise
            self.merged.append(len(calls))
            return finishers
        monkeypatch.setattr(unit_function, "merge", merge._replace(many=watching))
