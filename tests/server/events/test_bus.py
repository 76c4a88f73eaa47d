"""The bus: local delivery, and PostgreSQL LISTEN/NOTIFY between two server processes' buses."""
from __future__ import annotations

import threading

import pytest

from coordserver.events import log
from coordserver.events.bus import SOLITUDE_KEY, LocalBus, PostgresBus
from coordserver.events.channels import EVENTS, Channel
from tests.helpers import eventually

X, Y = Channel("x"), Channel("y")  # channels of these tests only


def test_local_bus_delivers_and_unsubscribes():
    bus, seen = LocalBus(), []
    unsubscribe = bus.subscribe(X, seen.append)
    bus.publish(X, {"n": 1})
    bus.publish(Y, {"n": 2})
    unsubscribe()
    bus.publish(X, {"n": 3})
    assert seen == [{"n": 1}]


def test_a_broken_subscriber_does_not_stop_others():
    bus, seen = LocalBus(), []
    bus.subscribe(X, lambda payload: 1 / 0)
    bus.subscribe(X, seen.append)
    bus.publish(X, {"ok": True})
    assert seen == [{"ok": True}]


def test_postgres_bus_reaches_the_other_server(make_server, pg_cluster):
    url = pg_cluster.create_database()
    first, second = make_server(database_url=url), make_server(database_url=url)
    assert isinstance(first.coord.bus, PostgresBus) and isinstance(second.coord.bus, PostgresBus)
    heard, arrived = [], threading.Event()

    async def listen():
        def on_events(payload):
            heard.append(payload)
            arrived.set()
        second.coord.bus.subscribe(EVENTS, on_events)
    second.call(listen)

    event_id = first.call(lambda: first.coord.store.write(log.append, "ping", {"from": "first"}, ["bob"]))
    assert arrived.wait(10), "the second server never heard the first one's event"
    assert heard[-1] == {"maxId": event_id}


@pytest.mark.single_process  # one server and one plain connection on its database
def test_a_server_alone_lets_in_a_waiter_that_sent_no_notice(make_server, pg_cluster):
    """The one alone also looks for waiters on the solitude lock (should a newcomer's notice be lost): a plain
    connection asking for the lock shared, and telling nobody, gets it within a few checks, and the server no
    longer counts on solitude from before it does."""
    import psycopg2

    url = pg_cluster.create_database()
    server = make_server(database_url=url)
    assert server.coord.bus.solitude() is not None
    params = dict(server.coord.store.database.connect_params, dbname=server.coord.store.database.database)
    newcomer = psycopg2.connect(**params)
    newcomer.autocommit = True
    try:
        with newcomer.cursor() as cursor:
            cursor.execute("SET lock_timeout = '10s'")
            cursor.execute("SELECT pg_advisory_lock_shared(%s, %s)", SOLITUDE_KEY)  # waits for the server to yield
        assert server.coord.bus.solitude() is None
        with newcomer.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", SOLITUDE_KEY)
            assert cursor.fetchone() == (False,)  # the server holds it too, shared
    finally:
        newcomer.close()
    assert eventually(server.coord.bus.solitude, lambda solitude: solitude is not None) is not None
