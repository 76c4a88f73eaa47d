"""Issue 28, loop guards, over real HTTP on SQLite and PostgreSQL with an injected clock: a ping-pong between
two agents trips the guard, nothing is lost, their wake pulses and pushes coalesce, the humans who administer
them are told, a human message clears it, the cooldown clears it on the scheduler's pass; chat loops and the
chat fan-out guard; two server processes on one PostgreSQL count together; doctor and metrics show guards."""
from __future__ import annotations

import asyncio

import httpx
import pytest

from coordserver.events import channels
from coordserver.models import Guard
from coordserver.timeutil import FrozenClock
from coordtui.client.api import tls_for
from tests.helpers import client, eventually, ok
from tests.server.api.test_messages import BusRecorder, events_for
from tests.server.realtime.test_push import ALLOW_LOOPBACK, Receiver, deliveries, register, wait_until

AGENTS = {"COORD_AGENTS": "alice,bob", "COORD_LOOP_MESSAGES": "6", "COORD_LOOP_MINUTES": "2",
          "COORD_LOOP_COOLDOWN_MINUTES": "10", "COORD_CHAT_WAKE_COOLDOWN_MINUTES": "5"}


def settle(srv) -> None:
    async def go():
        await asyncio.sleep(0.05)
    srv.call(go)


def pulsed(srv, wakes) -> list[str]:
    settle(srv)
    heard = [item["identity"] for item in wakes.items]
    wakes.items.clear()
    return heard


def guard_items(api: httpx.Client) -> list[dict]:
    return [i for i in ok(api.get("/api/wake"))["items"] if i["source"] == "guard"]


def send(api: httpx.Client, to: str, title: str) -> dict:
    return ok(api.post(f"/api/mailboxes/{to}/messages", json={"title": title}))


def guards_of(srv) -> list[Guard]:
    return srv.call(lambda: srv.coord.store.read(lambda: list(Guard.select().order_by(Guard.id))))


def clear_pass(srv) -> int:
    async def run():
        return await srv.coord.services.scheduler.clear_guards()
    return srv.call(run)


@pytest.fixture
def world(make_server, database_url):
    clock = FrozenClock()
    srv = make_server(clock=clock, database_url=database_url, env=AGENTS)
    wakes = BusRecorder(srv, channels.WAKE)
    yield srv, clock, wakes, {who: client(srv, who) for who in ("alice", "bob", "carol", "admin")}
    wakes.close()


def test_a_ping_pong_trips_coalesces_tells_the_humans_and_a_human_clears_it(world):
    srv, clock, wakes, api = world
    for n in range(3):  # six messages: at the threshold, not above it
        send(api["alice"], "bob", f"ack {n}")
        send(api["bob"], "alice", f"ack of ack {n}")
        clock.advance(seconds=5)
    assert sorted(pulsed(srv, wakes)) == ["alice"] * 3 + ["bob"] * 3 and guards_of(srv) == []
    send(api["alice"], "bob", "ack 3")  # the seventh within 2 minutes
    assert pulsed(srv, wakes) == ["bob"]  # the tripping message still pulses once: the guard item shows
    [guard] = guards_of(srv)
    assert (guard.kind, guard.members, guard.messages) == ("mail_loop", "alice,bob", 7)
    for n in range(10):
        send(api["bob"], "alice", f"more {n}")
        send(api["alice"], "bob", f"more {n}")
    assert pulsed(srv, wakes) == ["alice"]  # alice's one pulse; bob had his
    # nothing is lost
    inbox = ok(api["bob"].get("/api/mailboxes/me/messages", params={"limit": 100}))
    assert inbox["total"] == 3 + 1 + 10
    # each member's wake carries the guard item, and so does the human admin's; carol (a human, no admin) sees none
    [item] = guard_items(api["bob"])
    assert item["summary"] == "Loop suspected between alice and bob: 7 messages in 2 min"
    assert item["members"] == ["alice", "bob"] and item["kind"] == "mail_loop" and item["priority"] == "high"
    assert "alice" in item["action"] and ok(api["bob"].get("/api/wake"))["items"][0]["source"] == "guard"
    assert [i["guardId"] for i in guard_items(api["alice"])] == [guard.id]
    assert [i["summary"] for i in guard_items(api["admin"])] == [item["summary"]]
    assert "write to one of them" in guard_items(api["admin"])[0]["action"]
    assert guard_items(api["carol"]) == []
    assert [e["change"] for e in events_for(srv, "admin", "guard")] == ["tripped"]
    # a human writing to either clears it at once, and pulses flow again
    send(api["carol"], "bob", "stop it, you two")
    assert guard_items(api["bob"]) == [] == guard_items(api["admin"])
    assert events_for(srv, "alice", "guard_cleared")[0]["guard"]["clearedBy"] == "carol"
    pulsed(srv, wakes)
    send(api["alice"], "bob", "after")
    assert pulsed(srv, wakes) == ["bob"]


def test_the_cooldown_clears_it_on_the_scheduler_pass(world):
    srv, clock, wakes, api = world
    for n in range(4):
        send(api["alice"], "bob", f"a{n}")
        send(api["bob"], "alice", f"b{n}")
    assert len(guards_of(srv)) == 1 and guard_items(api["alice"])
    clock.advance(minutes=9)
    assert clear_pass(srv) == 0 and guard_items(api["alice"])
    clock.advance(minutes=1)
    assert guard_items(api["alice"]) == []  # past its end the wake no longer shows it, pass or not
    assert clear_pass(srv) == 1 and clear_pass(srv) == 0
    assert guards_of(srv)[0].cleared_by is None and events_for(srv, "bob", "guard_cleared")
    pulsed(srv, wakes)
    send(api["alice"], "bob", "fresh start")
    assert pulsed(srv, wakes) == ["bob"]


def test_no_guard_while_a_human_takes_part_or_one_way(world):
    srv, _clock, _wakes, api = world
    for n in range(8):
        send(api["alice"], "carol", f"to a human {n}")
        send(api["carol"], "alice", f"from a human {n}")
        send(api["alice"], "bob", f"one way {n}")
    assert guards_of(srv) == []


def test_a_chat_loop_trips_and_the_fan_out_wakes_each_agent_once_per_cooldown(world):
    srv, clock, wakes, api = world
    group = ok(api["carol"].post("/api/chat/channels", json={"type": "group", "name": "bots",
                                                             "members": ["alice", "bob"]}))["channelId"]
    first = ok(api["carol"].post(f"/api/chat/channels/{group}/messages", json={"body": "go"}))
    assert first["woke"] == 2 and first["isAgent"] is False
    again = ok(api["carol"].post(f"/api/chat/channels/{group}/messages", json={"body": "go again"}))
    assert again["woke"] == 0  # each agent member at most once per 5 minutes per channel
    assert sorted(pulsed(srv, wakes)) == ["alice", "bob"]
    clock.advance(minutes=5)
    assert ok(api["alice"].post(f"/api/chat/channels/{group}/messages", json={"body": "on it"}))["woke"] == 2
    assert sorted(pulsed(srv, wakes)) == ["bob", "carol"]  # the human is not held; the sender never woken

    bots = ok(api["alice"].post("/api/chat/channels", json={"type": "dm", "identity": "bob"}))["channelId"]
    for n in range(4):
        ok(api["alice"].post(f"/api/chat/channels/{bots}/messages", json={"body": f"ack {n}"}))
        ok(api["bob"].post(f"/api/chat/channels/{bots}/messages", json={"body": f"ack ack {n}"}))
    [guard] = guards_of(srv)
    assert (guard.kind, guard.scope, guard.members) == ("chat_loop", f"chat:{bots}", "alice,bob")
    assert guard_items(api["bob"])[0]["summary"] == "Loop suspected between alice and bob in chat: 7 messages in 2 min"
    pulsed(srv, wakes)
    for n in range(3):
        ok(api["alice"].post(f"/api/chat/channels/{bots}/messages", json={"body": f"still {n}"}))
    assert pulsed(srv, wakes) == []  # bob had his one pulse when it tripped
    assert len(ok(api["bob"].get(f"/api/chat/channels/{bots}/messages"))["messages"]) == 11  # nothing lost


def test_doctor_and_metrics_show_guards(world):
    srv, _clock, _wakes, api = world
    for n in range(4):
        send(api["alice"], "bob", f"a{n}")
        send(api["bob"], "alice", f"b{n}")
    probes = {p["id"]: p for p in ok(api["admin"].get("/api/doctor/admin"))["probes"]}
    assert probes["guards"]["status"] == "warn"
    assert "loop suspected between alice and bob" in probes["guards"]["summary"]
    assert [g["members"] for g in probes["guards"]["details"]["active"]] == [["alice", "bob"]]
    text = eventually(lambda: httpx.get(f"{srv.url}/api/metrics", verify=tls_for(srv.url)).text,
                      lambda body: 'coord_guard_trips_total{kind="mail_loop"} 1.0' in body)
    assert 'coord_guard_trips_total{kind="mail_loop"} 1.0' in text and 'coord_guards_active{kind="mail_loop"} 1.0' in text


def test_pushes_coalesce_while_a_guard_holds(make_server):
    receiver = Receiver()
    try:
        srv = make_server(env={**ALLOW_LOOPBACK, **AGENTS})
        register(srv, "bob", receiver.url)
        alice, bob = client(srv, "alice"), client(srv, "bob")
        for n in range(4):
            send(alice, "bob", f"a{n}")
            send(bob, "alice", f"b{n}")
        for n in range(5):
            send(alice, "bob", f"held {n}")
        send(client(srv, "carol"), "bob", "marker")  # a human: clears the guard, and is pushed
        pushed_marker = '"title":"marker"'  # (the prose says "markers" of its fences: match the event's title)
        wait_until(lambda: any(d.event_type == "message" and d.identity == "bob" and pushed_marker in (d.body or "")
                               for d in deliveries(srv)))
        titles = [d.body.split('"title":"')[1].split('"')[0] for d in deliveries(srv) if d.identity == "bob"]
        # each up to the trip (a3), then at most one of the five held (the tripping unit's clock may read
        # before or after its event's), then the human's
        assert titles[:4] == ["a0", "a1", "a2", "a3"] and titles[-1] == "marker" and len(titles) <= 6
        assert titles[4:-1] in ([], ["held 0"])
    finally:
        receiver.close()


def test_two_processes_count_together(make_server, pg_cluster):
    url = pg_cluster.create_database()
    one, two = make_server(database_url=url, env=AGENTS), make_server(database_url=url, env=AGENTS)
    alice, bob = client(one, "alice"), client(two, "bob")
    for n in range(4):  # four messages through each process: neither saw more than the threshold alone
        send(alice, "bob", f"a{n}")
        send(bob, "alice", f"b{n}")
    assert [(g.kind, g.members, g.messages) for g in guards_of(one)] == [("mail_loop", "alice,bob", 7)]
    assert eventually(lambda: guard_items(client(two, "admin")), bool)
    assert guard_items(client(one, "bob"))[0]["guardId"] == guards_of(two)[0].id


async def test_guard_items_appear_in_mcp_wake(make_server):
    from tests.server.mcp.test_mcp import connect, succeeded
    srv = make_server(env=AGENTS)
    alice, bob = client(srv, "alice"), client(srv, "bob")
    for n in range(4):
        send(alice, "bob", f"a{n}")
        send(bob, "alice", f"b{n}")
    async with connect(srv.url, "bob") as session:
        wake = succeeded(await session.call_tool("wake", {}))
    [item] = [i for i in wake["items"] if i["source"] == "guard"]
    assert item["members"] == ["alice", "bob"] and item["kind"] == "mail_loop"
    assert any(a["item"] == "guards" for a in wake["actions"]) and wake["summary"] == "5 waiting: 1 loop guard, 4 unread messages."


# --- the admin's list and clear (GET /api/admin/guards, POST /api/admin/guards/{id}/clear) -------------

def ping_pong(alice: httpx.Client, bob: httpx.Client, rounds: int = 4) -> None:
    for n in range(rounds):
        send(alice, "bob", f"a{n}")
        send(bob, "alice", f"b{n}")


def test_an_admin_lists_and_clears_a_guard(world):
    srv, clock, wakes, api = world
    ping_pong(api["alice"], api["bob"])
    [guard] = guards_of(srv)
    for who in ("alice", "carol"):
        assert api[who].get("/api/admin/guards").status_code == 403
        refused = api[who].post(f"/api/admin/guards/{guard.id}/clear")
        assert refused.status_code == 403 and refused.json()["error"]
    listed = ok(api["admin"].get("/api/admin/guards"))
    assert [g["id"] for g in listed["active"]] == [guard.id] and listed["cleared"] == []
    assert listed["active"][0]["members"] == ["alice", "bob"] and listed["active"][0]["clearedBy"] is None
    assert api["admin"].post("/api/admin/guards/999999/clear").status_code == 404
    assert api["admin"].post("/api/admin/guards/x/clear").status_code == 400
    assert guards_of(srv)[0].cleared_at is None  # refusals changed nothing
    clock.advance(minutes=1)
    cleared = ok(api["admin"].post(f"/api/admin/guards/{guard.id}/clear"))
    assert cleared["id"] == guard.id and cleared["clearedBy"] == "admin" and cleared["clearedAt"]
    assert [e["guard"]["clearedBy"] for e in events_for(srv, "alice", "guard_cleared")] == ["admin"]
    assert [e["guard"]["id"] for e in events_for(srv, "admin", "guard_cleared")] == [guard.id]
    assert guard_items(api["bob"]) == [] == guard_items(api["admin"])
    again = api["admin"].post(f"/api/admin/guards/{guard.id}/clear")
    assert again.status_code == 409 and "by admin" in again.json()["error"]
    assert len(events_for(srv, "alice", "guard_cleared")) == 1
    listed = ok(api["admin"].get("/api/admin/guards"))
    assert listed["active"] == [] and [(g["id"], g["clearedBy"]) for g in listed["cleared"]] == [(guard.id, "admin")]
    pulsed(srv, wakes)
    send(api["alice"], "bob", "after the clear")
    assert pulsed(srv, wakes) == ["bob"]  # pulses flow again
    clock.advance(hours=25)
    assert ok(api["admin"].get("/api/admin/guards")) == {"active": [], "cleared": []}  # only the last 24 h


def test_a_guard_cleared_by_a_human_or_its_cooldown_is_409_and_listed(world):
    srv, clock, _wakes, api = world
    ping_pong(api["alice"], api["bob"])
    send(api["carol"], "alice", "enough")
    [guard] = guards_of(srv)
    refused = api["admin"].post(f"/api/admin/guards/{guard.id}/clear")
    assert refused.status_code == 409 and "by carol" in refused.json()["error"]
    clock.advance(minutes=3)  # past the human's message: a new loop counts
    ping_pong(api["alice"], api["bob"])
    clock.advance(minutes=10)
    clear_pass(srv)  # (the scheduler's own pass, woken by the clock, may have come first: either clears it)
    assert [g.cleared_at is not None for g in guards_of(srv)] == [True, True]
    second = guards_of(srv)[1]
    assert "by its cooldown" in api["admin"].post(f"/api/admin/guards/{second.id}/clear").json()["error"]
    listed = ok(api["admin"].get("/api/admin/guards"))["cleared"]
    assert [(g["id"], g["clearedBy"]) for g in listed] == [(second.id, None), (guard.id, "carol")]


def test_two_processes_clearing_at_once_clear_once(make_server, pg_cluster):
    url = pg_cluster.create_database()
    one, two = make_server(database_url=url, env=AGENTS), make_server(database_url=url, env=AGENTS)
    ping_pong(client(one, "alice"), client(two, "bob"))
    [guard] = guards_of(one)

    async def both():
        from tests.helpers import async_client
        async with async_client(one, "admin") as first, async_client(two, "admin") as second:
            return await asyncio.gather(*(c.post(f"/api/admin/guards/{guard.id}/clear") for c in (first, second)))
    statuses = sorted(r.status_code for r in asyncio.run(both()))
    assert statuses == [200, 409]
    assert len(events_for(one, "alice", "guard_cleared")) == 1
    assert ok(client(two, "admin").get("/api/admin/guards"))["active"] == []
    assert guard_items(client(one, "bob")) == [] == guard_items(client(two, "alice"))


async def test_list_and_clear_guards_over_mcp(make_server):
    from tests.server.mcp.test_mcp import connect, refused, succeeded
    srv = make_server(env=AGENTS)
    ping_pong(client(srv, "alice"), client(srv, "bob"))
    [guard] = guards_of(srv)
    async with connect(srv.url, "alice") as session:
        refused(await session.call_tool("list_guards", {}))
        refused(await session.call_tool("clear_guard", {"guardId": guard.id}))
    async with connect(srv.url, "admin") as session:
        listed = await session.call_tool("list_guards", {})
        assert [g["id"] for g in succeeded(listed)["active"]] == [guard.id]
        assert listed.content[0].text == "1 active loop guards, 0 cleared in the last 24 h."
        cleared = succeeded(await session.call_tool("clear_guard", {"guardId": guard.id}))
        assert cleared["clearedBy"] == "admin"
        refused(await session.call_tool("clear_guard", {"guardId": guard.id}))
        assert succeeded(await session.call_tool("list_guards", {}))["cleared"][0]["id"] == guard.id


# --- per-identity thresholds (PATCH /api/admin/users/{id} loopMessages, loopMinutes) -------------------

def test_an_admin_sets_an_identitys_thresholds_within_bounds(world):
    srv, _clock, _wakes, api = world
    for bad in ({"loopMessages": 0}, {"loopMessages": 10_001}, {"loopMinutes": 0}, {"loopMinutes": 1441},
                {"loopMessages": "5"}, {"loopMinutes": 2.5}, {"loopMessages": True}):
        refused = api["admin"].patch("/api/admin/users/alice", json={**bad, "displayName": "Alice Changed"})
        assert refused.status_code == 400 and "loopM" in refused.json()["error"], (bad, refused.text)
    assert api["alice"].patch("/api/admin/users/alice", json={"loopMessages": 3}).status_code == 403
    user = ok(api["admin"].get("/api/admin/users"))["users"]
    alice = next(u for u in user if u["id"] == "alice")
    assert (alice["loopMessages"], alice["loopMinutes"], alice["displayName"]) == (None, None, "alice")  # nothing half-written
    changed = ok(api["admin"].patch("/api/admin/users/alice", json={"loopMessages": 3, "loopMinutes": 1440}))["user"]
    assert (changed["loopMessages"], changed["loopMinutes"]) == (3, 1440)
    changed = ok(api["admin"].patch("/api/admin/users/alice", json={"loopMinutes": None}))["user"]
    assert (changed["loopMessages"], changed["loopMinutes"]) == (3, None)
    assert "loopMessages" not in ok(api["alice"].get("/api/users"))["users"][0]  # the public list is as in v1


def test_a_per_identity_threshold_trips_earlier_than_the_default(world):
    srv, clock, _wakes, api = world
    ok(api["admin"].patch("/api/admin/users/bob", json={"loopMessages": 3}))
    send(api["alice"], "bob", "one")
    send(api["bob"], "alice", "two")
    send(api["alice"], "bob", "three")
    assert guards_of(srv) == []  # three: at bob's threshold, not above it (the default is 6)
    send(api["bob"], "alice", "four")
    [guard] = guards_of(srv)  # bob's is the stricter: it counts for the pair, whoever sent
    assert (guard.members, guard.messages, guard.minutes) == ("alice,bob", 4, 2)


def test_the_longer_window_of_the_two_counts(world):
    srv, clock, _wakes, api = world
    ok(api["admin"].patch("/api/admin/users/alice", json={"loopMinutes": 30}))
    for n in range(4):  # seven messages, 4 minutes apart: outside the default 2-minute window, inside alice's 30
        send(api["alice"], "bob", f"a{n}")
        clock.advance(minutes=4)
        if n < 3:
            send(api["bob"], "alice", f"b{n}")
            clock.advance(minutes=4)
    [guard] = guards_of(srv)
    assert (guard.messages, guard.minutes) == (7, 30)
    assert guard_items(api["bob"])[0]["summary"] == "Loop suspected between alice and bob: 7 messages in 30 min"


# --- small cycles over mail (a→b→c→a) ------------------------------------------------------------------

RING = {**AGENTS, "COORD_AGENTS": "alice,bob,carol"}


@pytest.fixture
def ring(make_server, database_url):
    clock = FrozenClock()
    srv = make_server(clock=clock, database_url=database_url, env=RING)
    wakes = BusRecorder(srv, channels.WAKE)
    yield srv, clock, wakes, {who: client(srv, who) for who in ("alice", "bob", "carol", "admin")}
    wakes.close()


def round_the_ring(api: dict, n: int) -> None:
    send(api["alice"], "bob", f"over to you {n}")
    send(api["bob"], "carol", f"over to you {n}")
    send(api["carol"], "alice", f"over to you {n}")


def test_three_agents_passing_mail_round_a_ring_trip_a_guard(ring):
    srv, _clock, wakes, api = ring
    round_the_ring(api, 0)
    round_the_ring(api, 1)
    assert guards_of(srv) == []  # six: at the threshold
    send(api["alice"], "bob", "and again")
    [guard] = guards_of(srv)
    assert (guard.kind, guard.scope, guard.members, guard.messages) == ("mail_loop", "mail:alice,bob,carol",
                                                                        "alice,bob,carol", 7)
    for who in ("alice", "bob", "carol"):  # every member told
        [item] = guard_items(api[who])
        assert item["members"] == ["alice", "bob", "carol"]
        assert item["summary"] == "Loop suspected between alice, bob and carol: 7 messages in 2 min"
        assert [e["change"] for e in events_for(srv, who, "guard")] == ["tripped"]
    assert len(guard_items(api["admin"])) == 1
    pulsed(srv, wakes)
    for n in range(2, 5):
        round_the_ring(api, n)
    assert sorted(pulsed(srv, wakes)) == ["alice", "carol"]  # every member held: one pulse each (bob had his)
    send(api["admin"], "carol", "stop")  # a human writing to any member clears it
    assert guard_items(api["alice"]) == [] and guards_of(srv)[0].cleared_by == "admin"


def test_no_ring_guard_when_a_human_wrote_to_the_third_or_the_ring_is_open(ring):
    srv, clock, _wakes, api = ring
    for n in range(4):  # a chain a→b→c, never back to a: no ring
        send(api["alice"], "bob", f"chain {n}")
        send(api["bob"], "carol", f"chain {n}")
    assert guards_of(srv) == []
    clock.advance(minutes=3)
    send(api["admin"], "carol", "I am watching")  # a human writes to the third member only
    round_the_ring(api, 0)
    round_the_ring(api, 1)
    send(api["alice"], "bob", "and again")
    assert guards_of(srv) == []


def test_a_ring_through_a_pair_already_held_still_trips(ring):
    """A pair's guard does not hide a ring the pair is part of: alice and bob tripped their own guard; minutes
    later (their guard still holding, its messages out of the window) the ring alice→bob→carol→alice crosses
    its own threshold with mail between alice and bob alone, and trips."""
    srv, clock, _wakes, api = ring
    for n in range(4):
        send(api["alice"], "bob", f"ack {n}")
        send(api["bob"], "alice", f"ack of ack {n}")
    assert [g.scope for g in guards_of(srv)] == ["mail:alice,bob"]
    clock.advance(minutes=3)  # out of the 2-minute window; the pair's 10-minute cooldown holds
    send(api["bob"], "carol", "over to you")
    send(api["carol"], "alice", "over to you")  # the ring closes: 2 messages among the three
    for n in range(2):
        send(api["alice"], "bob", f"ring {n}")
        send(api["bob"], "alice", f"ring {n}")
    assert [g.scope for g in guards_of(srv)] == ["mail:alice,bob"]  # six: at the ring's threshold
    send(api["alice"], "bob", "and again")  # the seventh, between the held pair
    pair, ring_guard = guards_of(srv)
    assert pair.cleared_at is None
    assert (ring_guard.scope, ring_guard.members, ring_guard.messages) == ("mail:alice,bob,carol",
                                                                          "alice,bob,carol", 7)
    [item] = guard_items(api["carol"])  # carol, outside the pair, is held and told
    assert item["members"] == ["alice", "bob", "carol"]
    assert [e["change"] for e in events_for(srv, "carol", "guard")] == ["tripped"]
