"""Kept inbox pages (realtime/inbox_cache.py): a page asked again is answered from memory, byte for byte as
read, and every change to what it shows is in the very next answer (never eventually), on both backends;
with a second server on the same PostgreSQL database nothing is kept, so a change made through the other
server is in the next answer too."""
from __future__ import annotations

import pytest

from coordserver.events import channels
from coordserver.settings import Settings
from coordserver.server import ServerThread
from tests.helpers import backend_url, base_env, client, eventually
from tests.server.api.test_messages import BusRecorder, send

INBOX = "/api/mailboxes/me/messages"


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def one(request, tmp_path_factory):
    """One process, whatever COORD_TEST_WORKERS says: these tests read its cache's counters."""
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


def counters(server) -> tuple[int, int]:
    cache = server.coord.services.inbox_cache
    return cache.hits, cache.misses


def page(api, **params) -> dict:
    response = api.get(INBOX, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def process_probe(server) -> dict:
    with client(server, "admin") as admin:
        return {p["id"]: p for p in admin.get("/api/doctor/admin").json()["probes"]}["process"]


def test_a_page_asked_again_is_the_kept_answer_byte_for_byte(one):
    server = one
    with client(server, "bob") as bob, client(server, "carol") as carol:
        for n in range(3):
            send(bob, "carol", title=f"kept {n}", metadata={"n": n, "é": "ß"})
        first = carol.get(INBOX, params={"status": "unread", "limit": 2})
        hits, misses = counters(server)
        again = carol.get(INBOX, params={"status": "unread", "limit": 2})
        assert counters(server) == (hits + 1, misses)
        assert again.content == first.content and again.headers["content-type"] == first.headers["content-type"]
        assert again.json()["total"] == 3 and again.json()["nextCursor"]
        # another query is another page, and a cursor's page is kept by its cursor
        following = page(carol, status="unread", limit=2, cursor=first.json()["nextCursor"])
        assert [m["title"] for m in following["messages"]] == ["kept 2"]
        assert page(carol, status="unread", limit=2, cursor=first.json()["nextCursor"]) == following
        assert counters(server) == (hits + 2, misses + 1)


def test_each_change_to_a_message_is_in_the_next_answer(one):
    server = one
    with client(server, "alice") as alice, client(server, "bob") as bob:
        first = send(bob, "alice", title="one")
        assert [m["title"] for m in page(alice)["messages"]][:1] == ["one"]
        page(alice)  # kept now

        send(bob, "alice", title="two")  # a send
        assert [m["title"] for m in page(alice)["messages"]][:2] == ["two", "one"]

        assert alice.post(f"{INBOX}/{first['id']}/pending").status_code == 200  # marked pending
        assert page(alice)["messages"][1]["responseWaiting"] is True
        assert alice.delete(f"{INBOX}/{first['id']}/pending").status_code == 200
        assert page(alice)["messages"][1]["responseWaiting"] is False

        assert alice.post(f"{INBOX}/{first['id']}/ack").status_code == 200  # one acknowledged
        assert page(alice)["messages"][1]["status"] == "read"
        unread = page(alice, status="unread")
        assert unread["total"] == 1 and page(alice, status="unread") == unread

        two = unread["messages"][0]["id"]
        assert alice.post(f"{INBOX}/ack", json={"ids": [two]}).status_code == 200  # many acknowledged
        assert page(alice, status="unread")["total"] == 0

        assert bob.post(f"{INBOX}/{send(alice, 'bob', title='ask')['id']}/reply",
                        json={"body": "answer"}).status_code == 200  # a reply
        assert page(alice)["messages"][0]["title"] == "Re: ask"


def test_a_change_elsewhere_than_the_messages_is_in_the_next_answer(one):
    server = one
    """A sender becoming an agent changes `fromIsAgent` of every message it sent: any unit that is not one of
    the message units drops every kept page."""
    with client(server, "admin") as admin, client(server, "carol") as carol:
        sender = "kind-changer"
        code = admin.post("/api/auth/invites", json={}).json()["invite"]["code"]
        token = admin.post("/api/auth/register", json={"code": code, "identity": sender}).json()["token"]
        with client(server, token=token) as changer:
            send(changer, "carol", title="from a human")
        assert page(carol)["messages"][0]["fromIsAgent"] is False
        page(carol)
        assert admin.patch(f"/api/admin/users/{sender}", json={"isAgent": True}).status_code == 200
        assert page(carol)["messages"][0]["fromIsAgent"] is True


def test_a_kept_page_still_tells_the_callers_streams_of_the_read(one):
    server = one
    hints = BusRecorder(server, channels.STREAM_HINTS)
    try:
        with client(server, "bob") as bob:
            page(bob, limit=3)
            hits = counters(server)[0]
            page(bob, limit=3)
            assert counters(server)[0] == hits + 1  # the second read is the kept page's
        reads = [h for h in hints.items if h["data"] == {"type": "inbox_check", "mailbox": "bob", "action": "list"}]
        assert len(reads) == 2
    finally:
        hints.close()


@pytest.mark.single_process
def test_another_server_on_the_database_stops_the_keeping(make_server, pg_cluster):
    url = pg_cluster.create_database()
    server = make_server(database_url=url)
    bus = server.coord.bus
    alone = bus.solitude()
    assert alone is not None and process_probe(server)["details"]["aloneOnDatabase"] is True
    other = make_server(database_url=url)
    assert bus.solitude() is None and other.coord.bus.solitude() is None  # before `other` served anything
    shown = process_probe(server)
    assert shown["details"]["aloneOnDatabase"] is False and shown["summary"].endswith("beside other servers on its database")
    with client(server, "alice") as here, client(other, "bob") as there:
        send(there, "alice", title="first")
        assert page(here)["total"] == 1
        page(here)
        hits = counters(server)[0]
        send(there, "alice", title="through the other server")
        after = page(here)
        assert after["total"] == 2 and after["messages"][0]["title"] == "through the other server"
        assert counters(server)[0] == hits  # read again: nothing was kept
    other.stop()
    again = eventually(bus.solitude, lambda solitude: solitude is not None)
    assert again is not None and again != alone
    assert process_probe(server)["summary"].endswith("alone on its database")
    with client(server, "alice") as here:
        page(here)
        hits = counters(server)[0]
        page(here)
        assert counters(server)[0] == hits + 1
