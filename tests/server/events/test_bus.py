"""The bus: local delivery, and PostgreSQL LISTEN/NOTIFY between two server processes' buses."""
from __future__ import annotations

import threading

import pytest

from coordserver.events import log
from coordserver.events.bus import SOLITUDE_KEY, LocalBus, PostgresBus
from coordserver.events.channels import EVENTS, Channel
from tests.helpers import eventually

X, Y = Channel("x"), Channel("y")  # channels of these tests only


def _hearing(server, channel: Channel) -> tuple[list, threading.Event]:
    """What `server`'s bus delivers on `channel` from now on, and an event set at each delivery."""
    heard, arrived = [], threading.Event()

    async def listen():
        def on_payload(payload):
            heard.append(payload)
            arrived.set()
        server.coord.bus.subscribe(channel, on_payload)
    server.call(listen)
    return heard, arrived


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
    heard, arrived = _hearing(second, EVENTS)

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


def _writer_backend_pid(server) -> int:
    """The backend of the server's writer connection: a write unit asks PostgreSQL which one it is."""
    from coordserver import db
    return server.call(lambda: server.coord.store.write(
        lambda: db.current_database().execute_sql("SELECT pg_backend_pid()").fetchone()[0]))


def _listening(server):
    import psycopg2
    params = dict(server.coord.store.database.connect_params, dbname=server.coord.store.database.database)
    listener = psycopg2.connect(**params)
    listener.autocommit = True
    with listener.cursor() as cursor:
        cursor.execute(f"LISTEN {PostgresBus.CHANNEL}")
    return listener


def _notifications(listener, until, timeout: float = 10.0) -> list:
    import select
    import time
    notes, deadline = [], time.monotonic() + timeout
    while not until(notes) and time.monotonic() < deadline:
        if select.select([listener], [], [], 0.2) != ([], [], []):
            listener.poll()
            notes += listener.notifies
            listener.notifies.clear()
    return notes


def test_a_units_effects_are_told_in_its_own_transaction(make_server, pg_cluster):
    """With another server on the database, a unit's log rows and effects are NOTIFYed by the writer's own
    connection, in the unit's transaction (delivered at its commit); a unit that fails tells nothing, and the
    other server hears what committed."""
    import json

    from coordserver import db
    url = pg_cluster.create_database()
    first, second = make_server(database_url=url), make_server(database_url=url)
    assert eventually(first.coord.bus.solitude, lambda solitude: solitude is None) is None
    writer_pid = _writer_backend_pid(first)
    listener = _listening(first)
    heard, arrived = _hearing(second, X)

    def fails():
        db.after_commit(X, {"n": "rolled back"})
        raise ValueError("this unit fails")

    try:
        with pytest.raises(ValueError):
            first.call(lambda: first.coord.store.write(fails))
        first.call(lambda: first.coord.store.write(lambda: db.after_commit(X, {"n": "committed"})))
        event_id = first.call(lambda: first.coord.store.write(log.append, "ping", {"from": "first"}, ["bob"]))
        assert arrived.wait(10), "the second server never heard the committed unit"
        notes = _notifications(listener, lambda notes: any(f'"maxId":{event_id}' in n.payload for n in notes))
    finally:
        listener.close()
    told = [json.loads(note.payload)["m"] for note in notes if note.pid == writer_pid]
    assert ["x", {"n": "committed"}] in told[0] and ["events", {"maxId": event_id}] in told[-1], told
    assert not any("rolled back" in note.payload for note in notes)
    assert eventually(lambda: heard, lambda seen: seen == [{"n": "committed"}]) == [{"n": "committed"}]


@pytest.mark.single_process  # one server and one plain connection on its database
def test_a_server_alone_lets_a_newcomer_in_only_after_its_untold_transactions(make_server, pg_cluster):
    """Alone, a transaction tells nobody (Bus.telling gives no Tell). A newcomer asking for the solitude lock
    waits until such a transaction has ended: it would otherwise read the database before that commit and
    never hear of it."""
    import psycopg2

    url = pg_cluster.create_database()
    server = make_server(database_url=url)
    bus = server.coord.bus
    assert bus.solitude() is not None
    params = dict(server.coord.store.database.connect_params, dbname=server.coord.store.database.database)
    newcomer = psycopg2.connect(**params)
    newcomer.autocommit = True
    joined = threading.Event()

    def join():
        with newcomer.cursor() as cursor:
            cursor.execute("SET lock_timeout = '20s'")
            cursor.execute("SELECT pg_advisory_lock_shared(%s, %s)", SOLITUDE_KEY)
        joined.set()

    try:
        with bus.telling() as tell:
            assert tell is None
            joiner = threading.Thread(target=join)
            joiner.start()
            assert eventually(bus.solitude, lambda solitude: solitude is None) is None  # the loop let go ...
            assert not joined.wait(1.5)  # ... but the lock waits for this transaction
        assert joined.wait(10)
        joiner.join(5)
        with bus.telling() as tell:
            assert tell is not None  # now somebody else may hear
    finally:
        newcomer.close()
