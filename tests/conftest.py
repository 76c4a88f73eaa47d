"""Test harness: the real server (Hypercorn) on a free loopback port with a temporary database.

- `server`: one shared server per test module, with env tokens for admin, alice, bob and carol.
- `make_server(...)`: a fresh server with your own env, clock or database (stopped after the test).
- helpers (clients, settings, starting a server, waits): tests/helpers.py.
- `backend` / `database_url`: parametrise a test over SQLite and PostgreSQL.
- COORD_TEST_WORKERS=N (N > 1): every test server on PostgreSQL without an injected clock runs as N
  workers on one port (tests/workers.py), and the servers that default to SQLite use PostgreSQL.
  A frozen clock cannot be shared with another process: those servers stay single-process, as do
  those of tests marked `single_process` (they watch one process's internals: its hub, bus or store);
  `make_server` gives such a server SQLite by default, as in the ordinary run.
"""
from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading

import pytest

from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests import pg
# The fixtures below use some of these; the rest are here for tests/tui, which still imports them from here.
from tests.helpers import (TOKENS, async_client, backend_server, backend_url, base_env, client,  # noqa: F401
                           default_url, eventually, ok, start_server, workers_for)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'coord.db'}"


@pytest.fixture(scope="session")
def pg_cluster():
    shared = os.environ.get("COORD_TEST_PG_CLUSTER")  # scripts/mutation.sh's, for a whole run
    if not shared:
        pg.require_binaries()
    cluster = pg.PostgresCluster(shared) if shared else pg.PostgresCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path) -> str:
    """Parametrises a test over both backends: a fresh database for each."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'coord.db'}"
    return request.getfixturevalue("pg_cluster").create_database()


def pytest_collection_modifyitems(items):
    """`single_process` keeps the servers a test starts single: the module-wide `server` is shared
    with the module's other tests (started for whichever test asks first), so it cannot honour it."""
    for item in items:
        if item.get_closest_marker("single_process") and "server" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked single_process but uses the module-wide "
                                    "`server`: start its own with `make_server()`")


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


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    """One server per test module; tests in the module must not depend on each other's data."""
    srv = start_server(Settings.from_env(base_env(default_url(request, tmp_path_factory.mktemp("server")))),
                       workers=workers_for(request))
    yield srv
    srv.stop()



@pytest.fixture(autouse=True)
def dump_asyncio_tasks_before_the_timeout(request):
    """pytest-timeout prints every thread's stack, and a hung async test shows only an idle `select` there.
    Shortly before it fires, every running event loop prints the stacks of its tasks: what each awaits."""
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(request.config.getini("timeout") or 0)
    if limit <= 20:
        yield
        return
    timer = threading.Timer(limit - 10, _dump_tasks_of_running_loops)
    timer.daemon = True
    timer.start()
    yield
    timer.cancel()


def _dump_tasks_of_running_loops() -> None:
    loops = [obj for obj in gc.get_objects() if isinstance(obj, asyncio.AbstractEventLoop) and obj.is_running()]
    for loop in loops:
        def dump(loop=loop) -> None:
            print(f"~~~~~~~~ asyncio tasks of {loop!r} ~~~~~~~~", file=sys.stderr)
            for task in asyncio.all_tasks(loop):
                print(f"{task.get_name()}:", file=sys.stderr)
                for line in _awaiting(task.get_coro()):
                    print(f"    {line}", file=sys.stderr)
        loop.call_soon_threadsafe(dump)


def _awaiting(coro) -> list[str]:
    """The chain of coroutines a task is suspended in, outermost first (Task.print_stack shows only the first)."""
    lines = []
    while coro is not None and len(lines) < 40:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = (getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
                or getattr(coro, "ag_await", None))
    return lines
