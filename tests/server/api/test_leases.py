"""Task leases over real HTTP (skill page `swarm`, "Leases"), on SQLite and PostgreSQL: a claim with leaseSeconds,
renew (the holder only; 409 without a lease), the v1 shape unchanged without one, expiry on an injected clock
(ready and unassigned again, a `lease_expired` history entry, the holder's and creator's stream event, wake
item and push), the holder's warning in the lease's last stretch, and exactly one expiry with two processes."""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coordserver.events import log as event_log
from coordserver.timeutil import FrozenClock, iso
from tests.helpers import client, eventually, ok
from tests.server.realtime.test_push import ALLOW_LOOPBACK, receiver, register, verify  # noqa: F401 (a fixture)
from tests.sse_helpers import open_stream

START = datetime(2026, 2, 17, 12, 0, tzinfo=UTC)
FAST = {"scheduler_interval_seconds": 0.05}  # the timer pass, on the injected clock
V1_TASK_KEYS = {"id", "projectId", "title", "detail", "followUp", "creatorUserId", "assigneeUserId", "status",
                "issueUrl", "onOrAfterAt", "mustBeDoneAfterTaskId", "sortKey", "nextTaskId", "nextTaskAssigneeUserId",
                "recurringTemplateId", "recurringInstanceAt", "linkedNotebookPages", "createdAt", "updatedAt",
                "completedAt"}


@pytest.fixture
def frozen(make_server, database_url):
    clock = FrozenClock(START)
    return make_server(clock=clock, database_url=database_url, scheduler_interval_seconds=3600), clock


def task(c: httpx.Client, **fields) -> dict:
    return ok(c.post("/api/swarm/tasks", json={"title": "Fix login", **fields}))


def claim(c: httpx.Client, task_id: str, **extra) -> httpx.Response:
    return c.patch(f"/api/swarm/tasks/{task_id}/status", json={"status": "in_progress", **extra})


def renew(c: httpx.Client, task_id: str, **body) -> httpx.Response:
    return c.post(f"/api/swarm/tasks/{task_id}/renew", json=body)


def items(c: httpx.Client, source: str) -> list[dict]:
    return [item for item in ok(c.get("/api/wake"))["items"] if item["source"] == source]


def logged(srv, types: tuple[str, ...]) -> list[tuple[str, dict, list[str] | None]]:
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 10_000))
    return [(kind, data, None if to_all else sorted(audience)) for _id, kind, data, to_all, audience in rows
            if kind in types]


def test_without_lease_seconds_the_v1_shape_is_unchanged(frozen):
    srv, _clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = task(alice)
        assert set(made) == V1_TASK_KEYS
        claimed = ok(claim(bob, made["id"]))
        assert set(claimed) == V1_TASK_KEYS and claimed["assigneeUserId"] == "bob"
        assert all(set(t) == V1_TASK_KEYS for t in ok(bob.get("/api/swarm/tasks"))["tasks"])
        history = ok(bob.get(f"/api/swarm/tasks/{made['id']}/events"))["events"]
        assert history[0]["afterState"] == {"status": "in_progress", "assigneeUserId": "bob"}
        [item] = items(bob, "swarm")
        assert "leaseExpiresAt" not in item and item["priority"] == "normal"
        assert renew(bob, made["id"]).json() == {"error": "Task has no lease: claim it with leaseSeconds to take one"}


def test_claim_with_a_lease_renew_by_the_holder_only_and_the_refusals(frozen):
    srv, clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = task(alice)
        claimed = ok(claim(bob, made["id"], leaseSeconds=600))
        assert claimed["leaseExpiresAt"] == iso(START + timedelta(minutes=10)) and claimed["assigneeUserId"] == "bob"
        assert set(claimed) == V1_TASK_KEYS | {"leaseExpiresAt"}
        history = ok(bob.get(f"/api/swarm/tasks/{made['id']}/events"))["events"]
        assert history[0]["afterState"] == {"status": "in_progress", "leaseSeconds": 600, "assigneeUserId": "bob"}
        other = renew(alice, made["id"])
        assert (other.status_code, other.json()) == (403, {"error": "Only the task's holder (bob) may renew its lease"})
        clock.advance(minutes=4)
        again = ok(renew(bob, made["id"]))  # its own length again, from now
        assert again["leaseExpiresAt"] == iso(START + timedelta(minutes=14))
        longer = ok(renew(bob, made["id"], leaseSeconds=3600))
        assert longer["leaseExpiresAt"] == iso(START + timedelta(minutes=64))
        for bad in (59, 86_401, "60", True, 1.5):
            refused = renew(bob, made["id"], leaseSeconds=bad)
            assert refused.status_code == 400, bad
            assert refused.json() == {"error": "leaseSeconds must be an integer from 60 to 86400"}
        assert claim(alice, task(alice)["id"], leaseSeconds=10).status_code == 400
        # honoured on moves to in_progress only (like assigneeUserId on other moves): any other move ends the lease
        ok(bob.patch(f"/api/swarm/tasks/{made['id']}/status", json={"status": "review", "leaseSeconds": 60}))
        reviewed = ok(bob.get("/api/swarm/tasks", params={"statuses": "review"}))["tasks"][0]
        assert "leaseExpiresAt" not in reviewed  # any other move ends the lease
        not_in_progress = renew(bob, made["id"])
        assert (not_in_progress.status_code, not_in_progress.json()) == \
            (409, {"error": "Task is review, not in progress: there is no lease to renew"})
        assert renew(bob, "00000000-0000-0000-0000-000000000000").status_code == 404
        # Every other way into in_progress takes one too: created so, resumed, retaken by the holder.
        created = task(alice, status="in_progress", assigneeUserId="bob", leaseSeconds=120)
        assert created["leaseExpiresAt"] == iso(START + timedelta(minutes=6))
        assert "leaseExpiresAt" not in task(alice, title="x", leaseSeconds=120)  # not in progress: ignored
        assert alice.post("/api/swarm/tasks", json={"title": "x", "leaseSeconds": 5}).status_code == 400
        retaken = ok(claim(bob, created["id"], leaseSeconds=900))
        assert retaken["leaseExpiresAt"] == iso(START + timedelta(minutes=19))
        ok(bob.patch(f"/api/swarm/tasks/{created['id']}/status", json={"status": "holding", "reason": "vendor"}))
        resumed = ok(claim(bob, created["id"], leaseSeconds=60))
        assert resumed["leaseExpiresAt"] == iso(START + timedelta(minutes=5))
        handed = ok(alice.patch(f"/api/swarm/tasks/{created['id']}", json={"assigneeUserId": "carol"}))
        assert "leaseExpiresAt" not in handed  # a new holder does not inherit the lease


async def test_expiry_returns_the_task_and_tells_holder_and_creator(make_server, database_url, receiver):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, env=ALLOW_LOOPBACK, **FAST)
    creator_hook, holder_hook = receiver(), receiver()
    alice_token, bob_token = register(srv, "alice", creator_hook.url), register(srv, "bob", holder_hook.url)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = task(alice)
        kept = task(alice, title="Kept alive")
        ok(claim(bob, made["id"], leaseSeconds=120))
        ok(claim(bob, kept["id"], leaseSeconds=300))
        async with open_stream(srv, "bob") as stream:
            time.sleep(0.3)  # passes run; nothing is due by the frozen clock
            assert ok(bob.get("/api/swarm/tasks"))["tasks"][0]["status"] == "in_progress"
            clock.advance(minutes=2)  # exactly the end of the first lease
            frame = await stream.until(lambda f: f.event == "task_lease_expired")
            assert frame.id is not None and frame.data == {
                "type": "task_lease_expired", "taskId": made["id"], "title": "Fix login", "holder": "bob",
                "creator": "alice", "leaseExpiresAt": iso(START + timedelta(minutes=2))}
        back = ok(alice.get("/api/swarm/tasks", params={"statuses": "ready"}))["tasks"]
        assert [(t["id"], t["assigneeUserId"], "leaseExpiresAt" in t) for t in back] == [(made["id"], None, False)]
        history = ok(alice.get(f"/api/swarm/tasks/{made['id']}/events"))["events"]
        assert (history[0]["kind"], history[0]["actorUserId"], history[0]["beforeState"], history[0]["afterState"]) == (
            "lease_expired", "bob", {"status": "in_progress", "assigneeUserId": "bob",
                                     "leaseExpiresAt": iso(START + timedelta(minutes=2))},
            {"status": "ready", "assigneeUserId": None})
        [mine] = items(bob, "lease_expired")
        assert (mine["id"], mine["formerHolder"], mine["priority"]) == (made["id"], "bob", "normal")
        assert "claim it again" in mine["action"]
        [theirs] = items(alice, "lease_expired")
        assert theirs["id"] == made["id"] and "find someone" in theirs["action"]
        assert "1 lease ran out" in ok(alice.get("/api/wake"))["summary"]
        assert [t["id"] for t in ok(bob.get("/api/swarm/tasks", params={"statuses": "in_progress"}))["tasks"]] == \
            [kept["id"]]
        ok(claim(carol := client(srv, "carol"), made["id"]))  # claimed again: the notices leave
        carol.close()
        assert items(bob, "lease_expired") == [] and items(alice, "lease_expired") == []
    assert len(logged(srv, ("task_lease_expired",))) == 1
    updated = [d for _k, d, _to in logged(srv, ("swarm_task_updated",)) if d.get("previousStatus") == "in_progress"
               and d["actor"] == "bob" and d["status"] == "ready"]
    assert [d["taskId"] for d in updated] == [made["id"]]
    for hook, token in ((creator_hook, alice_token), (holder_hook, bob_token)):
        pushed = verify(hook.wait_calls(1)[0], token)
        assert pushed["event"]["type"] == "task_lease_expired" and pushed["event"]["taskId"] == made["id"]
        assert "ran out" in pushed["message"] and f"/api/swarm/tasks/{made['id']}/status" in pushed["message"]
        assert "Fix login" not in pushed["message"].partition("\n")[0]  # the creator's title: fenced after the prose
        assert pushed["untrusted"] == [{"path": "/event/title", "from": "alice", "fromIsAgent": False,
                                        "source": "task"}]


def test_the_holders_wake_warns_in_the_last_stretch(frozen):
    """The last 20 % of a lease, at most the last 5 minutes: the swarm item turns high with a renew action."""
    srv, clock = frozen
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        short, long = task(alice, title="short"), task(alice, title="long")
        ok(claim(bob, short["id"], leaseSeconds=600))  # warns from minute 8
        ok(claim(bob, long["id"], leaseSeconds=3600))  # warns from minute 55
        by_id = {i["id"]: i for i in items(bob, "swarm")}
        assert by_id[short["id"]]["leaseExpiresAt"] == iso(START + timedelta(minutes=10))
        assert {i["priority"] for i in by_id.values()} == {"normal"}
        clock.advance(minutes=7, seconds=59)
        assert {i["priority"] for i in items(bob, "swarm")} == {"normal"}
        clock.advance(seconds=1)
        by_id = {i["id"]: i for i in items(bob, "swarm")}
        assert by_id[short["id"]]["priority"] == "high" and by_id[long["id"]]["priority"] == "normal"
        assert by_id[short["id"]]["action"] == (f"Your lease on it runs out soon: renew it (POST /api/swarm/tasks/"
                                                f"{short['id']}/renew) or it returns to ready.")
        assert ok(bob.get("/api/wake"))["items"][0]["id"] == short["id"]  # high comes first
        ok(renew(bob, short["id"]))
        assert {i["priority"] for i in items(bob, "swarm")} == {"normal"}


def test_two_processes_expire_each_lease_exactly_once(make_server, pg_cluster):
    """Two servers on one PostgreSQL, one injected clock, racing expiry passes: each lease runs out once, with one
    `lease_expired` history entry and one `task_lease_expired` event, whichever process got there."""
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, **FAST)
    there = make_server(clock=clock, database_url=url, **FAST)
    with client(here, "alice") as alice, client(there, "bob") as bob:
        made = [task(alice, title=f"t{n}") for n in range(12)]
        for n, t in enumerate(made):
            ok(claim(bob, t["id"], leaseSeconds=60 * (1 + n % 3)))
        for _ in range(3):
            clock.advance(minutes=1)
            barrier = threading.Barrier(4)

            def race(server) -> tuple[int, int]:
                barrier.wait()
                return server.call(server.coord.services.scheduler.expire_leases)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(race, [here, there, here, there]))
        statuses = eventually(lambda: [t["status"] for t in ok(bob.get("/api/swarm/tasks"))["tasks"]],
                              lambda s: s == ["ready"] * 12)
        assert statuses == ["ready"] * 12
        for t in made:
            kinds = [e["kind"] for e in ok(alice.get(f"/api/swarm/tasks/{t['id']}/events"))["events"]]
            assert kinds.count("lease_expired") == 1
    events = logged(here, ("task_lease_expired",))
    assert sorted(d["taskId"] for _k, d, _to in events) == sorted(t["id"] for t in made)
    assert here.coord.services.scheduler.leases_expired + there.coord.services.scheduler.leases_expired == 12
