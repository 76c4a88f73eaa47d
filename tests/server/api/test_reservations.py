"""Resource reservations over real HTTP (skill page `reservations`), on SQLite and PostgreSQL: reserve, the 409
body naming the conflicts (glob-aware; shared vs exclusive), racing creates of which one wins, list filters,
renew and release (holder or admin), project visibility, expiry on an injected clock (the holder's stream event,
wake item and push), and exactly one expiry with two processes."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coordserver.events import log as event_log
from coordserver.timeutil import FrozenClock, iso
from tests.helpers import TOKENS, at_once, client, eventually, ok
from tests.server.realtime.test_push import ALLOW_LOOPBACK, receiver, register, verify  # noqa: F401 (a fixture)
from tests.sse_helpers import open_stream

START = datetime(2026, 2, 17, 12, 0, tzinfo=UTC)
FAST = {"scheduler_interval_seconds": 0.05}


@pytest.fixture
def frozen(make_server, database_url):
    clock = FrozenClock(START)
    return make_server(clock=clock, database_url=database_url, scheduler_interval_seconds=3600), clock


def reserve(c: httpx.Client, resource: str, **fields) -> httpx.Response:
    return c.post("/api/reservations", json={"resource": resource, "ttlSeconds": 600, **fields})


def listed(c: httpx.Client, **params) -> list[dict]:
    return ok(c.get("/api/reservations", params=params))["reservations"]


def items(c: httpx.Client, source: str) -> list[dict]:
    return [item for item in ok(c.get("/api/wake"))["items"] if item["source"] == source]


def logged(srv, types: tuple[str, ...]) -> list[tuple[str, dict]]:
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 10_000))
    return [(kind, data) for _id, kind, data, _all, _audience in rows if kind in types]


def test_reserve_conflicts_and_shared(frozen):
    srv, _clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol:
        made = reserve(alice, "./src/", reason="refactoring the app")
        assert made.status_code == 201
        body = made.json()
        assert body == {"id": body["id"], "resource": "src/**", "exclusive": True, "holder": "alice",
                        "reason": "refactoring the app", "projectId": None, "ttlSeconds": 600,
                        "createdAt": iso(START), "expiresAt": iso(START + timedelta(minutes=10)), "expired": False}
        refused = reserve(bob, "src/app.py")
        assert refused.status_code == 409
        assert refused.json() == {"error": "src/app.py overlaps a reservation held by others", "conflicts": [
            {"id": body["id"], "holder": "alice", "resource": "src/**", "exclusive": True,
             "expiresAt": iso(START + timedelta(minutes=10))}]}
        assert reserve(bob, "src/app.py", exclusive=False).status_code == 409  # shared vs exclusive
        assert reserve(bob, "docs/*.md").status_code == 201  # no overlap
        assert reserve(alice, "src/app.py").status_code == 201  # the holder's own never conflict
        shared = reserve(bob, "service:db", exclusive=False)
        assert shared.status_code == 201
        assert reserve(carol, "service:*", exclusive=False).status_code == 201  # shared with shared
        against_shared = reserve(carol, "service:db")
        assert against_shared.status_code == 409
        assert {c["holder"] for c in against_shared.json()["conflicts"]} == {"bob"}
        assert [r["resource"] for r in listed(carol, resource="src/x/y.py")] == ["src/**"]
        assert [r["resource"] for r in listed(carol, holder="bob")] == ["docs/*.md", "service:db"]
        assert len(listed(carol)) == 5
        for bad, error in (({"resource": " ", "ttlSeconds": 60}, "resource is required"),
                           ({"resource": "x"}, "ttlSeconds must be an integer from 10 to 86400"),
                           ({"resource": "x", "ttlSeconds": 5}, "ttlSeconds must be an integer from 10 to 86400"),
                           ({"resource": "x", "ttlSeconds": 60, "exclusive": "yes"},
                            "exclusive must be true or false")):
            response = carol.post("/api/reservations", json=bad)
            assert (response.status_code, response.json()["error"]) == (400, error), bad
        assert len(listed(carol)) == 5  # nothing half-written


def test_renew_and_release_by_the_holder_or_an_admin(frozen):
    srv, clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "admin") as admin:
        mine = reserve(alice, "src/a.py", ttlSeconds=60).json()
        clock.advance(seconds=30)
        renewed = ok(alice.post(f"/api/reservations/{mine['id']}/renew"))
        assert renewed["expiresAt"] == iso(START + timedelta(seconds=90))
        longer = ok(alice.post(f"/api/reservations/{mine['id']}/renew", json={"ttlSeconds": 3600}))
        assert (longer["expiresAt"], longer["ttlSeconds"]) == (iso(START + timedelta(seconds=3630)), 3600)
        other = bob.post(f"/api/reservations/{mine['id']}/renew")
        assert (other.status_code, other.json()) == (403, {"error": "Only its holder (alice) may renew a reservation"})
        assert bob.delete(f"/api/reservations/{mine['id']}").status_code == 403
        assert alice.post("/api/reservations/999999/renew").status_code == 404
        assert ok(alice.delete(f"/api/reservations/{mine['id']}")) == {"ok": True}
        assert alice.delete(f"/api/reservations/{mine['id']}").status_code == 404
        theirs = reserve(bob, "src/a.py").json()  # free again
        assert ok(admin.delete(f"/api/reservations/{theirs['id']}")) == {"ok": True}
        assert listed(alice) == []
    changes = [(d["change"], d["by"]) for _k, d in logged(srv, ("reservation_changed",))]
    assert changes == [("created", "alice"), ("renewed", "alice"), ("renewed", "alice"), ("released", "alice"),
                       ("created", "bob"), ("released", "admin")]


def test_a_project_reservation_exists_only_for_who_sees_the_project(frozen):
    srv, _clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol:
        hidden = ok(alice.post("/api/swarm/projects", json={"title": "secret", "color": "#000000",
                                                             "taggedUsers": ["bob"]}))["id"]
        made = reserve(alice, "src/**", projectId=hidden).json()
        assert made["projectId"] == hidden
        assert reserve(bob, "src/a.py", projectId=hidden).status_code == 409
        assert reserve(bob, "src/a.py").status_code == 201  # another scope: no conflict
        assert [r["id"] for r in listed(bob, projectId=hidden)] == [made["id"]]
        assert [r["resource"] for r in listed(carol)] == ["src/a.py"]
        assert carol.delete(f"/api/reservations/{made['id']}").status_code == 404
        assert carol.post(f"/api/reservations/{made['id']}/renew").status_code == 404
        assert reserve(carol, "x", projectId=hidden).json() == {"error": "Project not found"}


def test_racing_creates_one_wins(make_server, database_url):
    srv = make_server(database_url=database_url)
    who = ["alice", "bob", "carol", "admin"] * 2
    barrier = threading.Barrier(len(who))

    def attempt(identity_and_path: tuple[str, str]) -> int:
        identity, resource = identity_and_path
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {TOKENS[identity]}"}) as c:
            barrier.wait()
            return reserve(c, resource).status_code
    resources = ["src/**", "src/app.py", "src/*.py", "**/app.py"] * 2
    with ThreadPoolExecutor(len(who)) as pool:
        codes = list(pool.map(attempt, zip(who, resources)))
    with client(srv, "alice") as alice:
        holders = {r["holder"] for r in listed(alice)}
    assert len(holders) == 1 and codes.count(409) >= 4 and set(codes) <= {201, 409}


async def test_expiry_is_heard_by_the_holder(make_server, database_url, receiver):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, env=ALLOW_LOOPBACK, **FAST)
    hook = receiver()
    token = register(srv, "alice", hook.url)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = reserve(alice, "src/**", ttlSeconds=60).json()
        kept = reserve(alice, "docs/**", ttlSeconds=600).json()
        async with open_stream(srv, "alice") as stream:
            time.sleep(0.3)
            assert len(listed(bob)) == 2
            clock.advance(minutes=1)
            frame = await stream.until(lambda f: f.event == "reservation_changed" and f.data["change"] == "expired")
            assert frame.data["reservationId"] == made["id"] and frame.data["by"] is None
            assert frame.data["reservation"]["expired"] is True
        assert [r["id"] for r in listed(bob)] == [kept["id"]]
        assert reserve(bob, "src/a.py").status_code == 201  # free again
        [item] = items(alice, "reservation_expired")
        assert (item["id"], item["summary"], item["priority"]) == (made["id"], "src/**", "normal")
        assert f"DELETE /api/reservations/{made['id']}" in item["action"]
        assert ok(alice.delete(f"/api/reservations/{made['id']}")) == {"ok": True}
        assert items(alice, "reservation_expired") == []
        assert alice.post(f"/api/reservations/{kept['id']}/renew").status_code == 200
    pushed = verify(hook.wait_calls(1)[0], token)
    assert pushed["event"]["type"] == "reservation_changed" and pushed["event"]["change"] == "expired"
    assert "src/**" in pushed["message"]
    time.sleep(0.3)
    assert len(hook.calls) == 1  # created, renewed, released: not pushed


def test_the_holder_hears_before_it_ends(frozen):
    """In a reservation's last stretch (a task lease's lead time: the last 20 %, at most 5 minutes) the holder's
    wake has a high `reservation_expiring` item; a wake read just before is not kept past that instant (the
    cache knows when it changes); renewing takes the item away, and so does the end."""
    srv, clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        short = reserve(alice, "src/**", ttlSeconds=600).json()  # warns from minute 8
        long = reserve(alice, "docs/**", ttlSeconds=3600).json()  # warns from minute 55
        reserve(alice, "tiny", ttlSeconds=10)  # warns in its last 2 s
        assert items(alice, "reservation_expiring") == []
        clock.advance(minutes=7, seconds=59)
        assert items(alice, "reservation_expiring") == []
        clock.advance(seconds=1)
        [item] = items(alice, "reservation_expiring")
        assert (item["id"], item["summary"], item["priority"], item["expiresAt"]) == (
            short["id"], "src/**", "high", iso(START + timedelta(minutes=10)))
        assert f"POST /api/reservations/{short['id']}/renew" in item["action"]
        wake = ok(alice.get("/api/wake"))
        assert "1 reservation about to run out" in wake["summary"]
        assert "reservations_expiring" in [a["item"] for a in wake["actions"]]
        assert items(bob, "reservation_expiring") == []  # the holder's alone
        ok(alice.post(f"/api/reservations/{short['id']}/renew"))  # another 10 minutes: no warning
        assert items(alice, "reservation_expiring") == []
        clock.advance(minutes=47)  # minute 55: the long one warns; the short one (renewed to minute 18) has ended
        assert [i["id"] for i in items(alice, "reservation_expiring")] == [long["id"]]
        clock.advance(minutes=5)  # the end: expired, no longer about to
        assert items(alice, "reservation_expiring") == []


def test_time_ends_a_reservation_before_the_pass_runs(frozen):
    srv, clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = reserve(alice, "src/**", ttlSeconds=60).json()
        clock.advance(seconds=60)
        assert listed(bob) == [] and reserve(bob, "src/a.py").status_code == 201
        refused = alice.post(f"/api/reservations/{made['id']}/renew")
        assert (refused.status_code, refused.json()) == \
            (409, {"error": "The reservation has expired: reserve the resource again"})
        srv.call(srv.coord.services.scheduler.expire_leases)  # (the background pass may have been first)
        assert srv.call(srv.coord.services.scheduler.expire_leases) == (0, 0)
        assert [d["change"] for _k, d in logged(srv, ("reservation_changed",))].count("expired") == 1
        assert reserve(alice, "src/**", ttlSeconds=60).status_code == 409  # bob's now
        assert [i["id"] for i in items(alice, "reservation_expired")] == [made["id"]]


def test_two_processes_expire_each_reservation_exactly_once(make_server, pg_cluster):
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, **FAST)
    there = make_server(clock=clock, database_url=url, **FAST)
    with client(here, "alice") as alice, client(there, "bob") as bob:
        made = [reserve(alice if n % 2 else bob, f"file{n}.py", ttlSeconds=60 * (1 + n % 3)).json()
                for n in range(12)]
        for _ in range(3):
            clock.advance(minutes=1)
            at_once([here, there, here, there], lambda server: server.coord.services.scheduler.expire_leases)
        eventually(lambda: listed(bob), lambda rows: rows == [])
    expired = [d["reservationId"] for _k, d in logged(here, ("reservation_changed",)) if d["change"] == "expired"]
    assert sorted(expired) == sorted(r["id"] for r in made)
    assert here.coord.services.scheduler.reservations_expired + there.coord.services.scheduler.reservations_expired \
        == 12
