"""Asks over real HTTP (skill page `asks`), on SQLite and PostgreSQL: ask, answer, the second answer's 409, cancel,
expiry with the default applied on an injected clock (and by exactly one of two processes), who may see an ask,
group asks answered once for all, the asker's stream event, wake item and webhook push, replay after a restart,
limits and the rate limit."""
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
FAST = {"scheduler_interval_seconds": 0.05}  # the expiry pass, on the injected clock


@pytest.fixture
def srv(make_server, database_url):
    return make_server(database_url=database_url)


def ask(c: httpx.Client, **fields) -> dict:
    body = {"to": "bob", "question": "Deploy now or wait for the window?", "options": ["Deploy now", "Wait"]}
    return ok(c.post("/api/asks", json={**body, **fields}))


def wake_items(c: httpx.Client, source: str) -> list[dict]:
    return [item for item in ok(c.get("/api/wake"))["items"] if item["source"] == source]


def logged(srv, types: tuple[str, ...]) -> list[tuple[str, dict, list[str]]]:
    rows = srv.call(lambda: srv.coord.store.read(event_log.range_after, 0, None, 10_000))
    return [(kind, data, sorted(audience)) for _id, kind, data, _all, audience in rows if kind in types]


# --- ask, answer, cancel ------------------------------------------------------------------------

def test_ask_answer_and_the_second_answer_is_409_naming_who_answered(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = ask(alice, to=["bob", "carol"], context={"taskId": "t-42"})
        assert made["status"] == "open" and made["from"] == "alice" and made["to"] == ["bob", "carol"]
        assert made["options"] == ["Deploy now", "Wait"] and made["context"] == {"taskId": "t-42"}
        assert made["answeredBy"] is None and made["deadline"] is None and made["createdAt"]
        [item] = wake_items(bob, "ask")
        assert item["id"] == made["id"] and item["priority"] == "high" and item["from"] == "alice"
        assert item["options"] == ["Deploy now", "Wait"] and item["question"] == made["question"]
        assert item["summary"] == "From alice: 'Deploy now or wait for the window?'"
        answered = ok(bob.post(f"/api/asks/{made['id']}/answer", json={"option": 2}))
        assert (answered["status"], answered["answeredBy"], answered["option"]) == ("answered", "bob", "Wait")
        assert answered["closedAt"] is not None and answered["text"] is None
        with client(srv, "carol") as carol:
            late = carol.post(f"/api/asks/{made['id']}/answer", json={"option": "Deploy now"})
            assert late.status_code == 409
            assert late.json() == {"error": "Already answered by bob", "answeredBy": "bob", "status": "answered"}
            again = bob.post(f"/api/asks/{made['id']}/answer", json={"option": 1})
            assert again.status_code == 409 and again.json()["answeredBy"] == "bob"
            assert ok(carol.get(f"/api/asks/{made['id']}"))["option"] == "Wait"  # unchanged by the late answers
        assert wake_items(bob, "ask") == []
    kinds = [(kind, audience) for kind, _data, audience in logged(srv, ("ask", "ask_answered"))]
    assert kinds == [("ask", ["alice", "bob", "carol"]), ("ask_answered", ["alice", "bob", "carol"])]


def test_an_answer_by_label_in_text_and_the_refusals(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        choice = ask(alice, options=["A", "B", "C"], allowText=True)
        assert bob.post(f"/api/asks/{choice['id']}/answer", json={"option": 4}).json() == \
            {"error": "Unknown option for this ask: 4"}
        assert bob.post(f"/api/asks/{choice['id']}/answer", json={"option": "D"}).status_code == 400
        assert bob.post(f"/api/asks/{choice['id']}/answer", json={"option": 1, "text": "x"}).status_code == 400
        assert bob.post(f"/api/asks/{choice['id']}/answer", json={}).status_code == 400
        said = ok(bob.post(f"/api/asks/{choice['id']}/answer", json={"text": "Neither: roll back first"}))
        assert (said["option"], said["text"]) == (None, "Neither: roll back first")
        only = ask(alice)
        refused = bob.post(f"/api/asks/{only['id']}/answer", json={"text": "maybe"})
        assert refused.json() == {"error": "This ask takes one of its options, not text"}
        assert ok(bob.post(f"/api/asks/{only['id']}/answer", json={"option": "Deploy now"}))["option"] == "Deploy now"
        free = ok(alice.post("/api/asks", json={"to": "bob", "question": "Why?", "allowText": True}))
        assert free["options"] == [] and free["allowText"] is True


def test_cancel_by_the_asker_only_and_once(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = ask(alice)
        refused = bob.post(f"/api/asks/{made['id']}/cancel")
        assert (refused.status_code, refused.json()) == (403, {"error": "Only the asker may cancel an ask"})
        cancelled = ok(alice.post(f"/api/asks/{made['id']}/cancel"))
        assert cancelled["status"] == "cancelled" and cancelled["closedAt"] is not None
        assert wake_items(bob, "ask") == [] and wake_items(alice, "ask_result") == []  # no outcome to read
        late = bob.post(f"/api/asks/{made['id']}/answer", json={"option": 1})
        assert (late.status_code, late.json()) == (409, {"error": "The ask was cancelled", "status": "cancelled"})
        assert alice.post(f"/api/asks/{made['id']}/cancel").status_code == 409
        answered = ask(alice)
        ok(bob.post(f"/api/asks/{answered['id']}/answer", json={"option": 1}))
        assert alice.post(f"/api/asks/{answered['id']}/cancel").json()["error"] == "Already answered by bob"
    assert [kind for kind, _data, _to in logged(srv, ("ask_cancelled",))] == ["ask_cancelled"]


def test_only_the_asker_and_those_asked_see_an_ask(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol, \
            client(srv, "admin") as admin:
        made = ask(alice)
        assert ok(bob.get(f"/api/asks/{made['id']}"))["id"] == made["id"]
        for outsider in (carol, admin):  # admins too: to anyone else it does not exist, like a missing one
            for method, path, body in (("GET", "", None), ("POST", "/answer", {"option": 1}),
                                       ("POST", "/cancel", None)):
                answer = outsider.request(method, f"/api/asks/{made['id']}{path}", json=body)
                assert (answer.status_code, answer.json()) == (404, {"error": "Ask not found"}), (method, path)
            assert ok(outsider.get("/api/asks"))["asks"] == []
            assert outsider.get("/api/asks/999999").json() == {"error": "Ask not found"}
        refused = alice.post(f"/api/asks/{made['id']}/answer", json={"option": 1})  # the asker was not asked
        assert (refused.status_code, refused.json()) == (403, {"error": "Only those asked may answer"})
        assert [a["id"] for a in ok(bob.get("/api/asks", params={"role": "received"}))["asks"]] == [made["id"]]
        assert ok(bob.get("/api/asks", params={"role": "sent"}))["asks"] == []
        assert [a["id"] for a in ok(alice.get("/api/asks", params={"role": "sent", "status": "open"}))["asks"]] == \
            [made["id"]]
        assert ok(alice.get("/api/asks", params={"status": "answered"}))["asks"] == []
        assert alice.get("/api/asks", params={"role": "mine"}).status_code == 400


def test_a_group_ask_is_answered_once_for_all(srv):
    with client(srv, "alice") as alice, client(srv, "bob") as bob, client(srv, "carol") as carol:
        made = ask(alice, to=["bob", "carol", "bob"])  # repeated names count once
        assert made["to"] == ["bob", "carol"]
        assert [i["id"] for i in wake_items(bob, "ask")] == [i["id"] for i in wake_items(carol, "ask")] == [made["id"]]
        barrier = threading.Barrier(2)

        def answer(c: httpx.Client, option: int) -> httpx.Response:
            barrier.wait()
            return c.post(f"/api/asks/{made['id']}/answer", json={"option": option})

        with ThreadPoolExecutor(2) as pool:  # a race: exactly one wins
            answers = list(pool.map(answer, [bob, carol], [1, 2]))
        assert sorted(a.status_code for a in answers) == [200, 409]
        winner = next(a.json() for a in answers if a.status_code == 200)
        loser = next(a.json() for a in answers if a.status_code == 409)
        assert loser["answeredBy"] == winner["answeredBy"]
        assert loser["error"] == f"Already answered by {winner['answeredBy']}"
        assert wake_items(bob, "ask") == wake_items(carol, "ask") == []
        [result] = wake_items(alice, "ask_result")
        assert result["answeredBy"] == winner["answeredBy"] and result["option"] == winner["option"]
    assert len(logged(srv, ("ask_answered",))) == 1


def test_limits_like_messages(srv):
    with client(srv, "alice") as alice:
        def refused(**fields) -> str:
            body = {"to": "bob", "question": "Q?", "options": ["a", "b"], **fields}
            answer = alice.post("/api/asks", json=body)
            assert answer.status_code == 400, (fields, answer.text)
            return answer.json()["error"]
        assert refused(question="x" * 2001) == "question is longer than 2000 characters"
        assert ok(alice.post("/api/asks", json={"to": "bob", "question": "x" * 2000, "options": ["a", "b"]}))
        assert refused(question="  ") == "question is required"
        assert refused(options=["only"]).startswith("options must be a list of 2 to 9")
        assert refused(options=[str(n) for n in range(10)]).startswith("options must be a list of 2 to 9")
        assert refused(options=["a", "a"]).startswith("options must be a list of 2 to 9 distinct")
        assert refused(options=["x" * 51, "b"]).startswith("options")
        assert refused(options=[" ", "b"]).startswith("options")
        assert refused(defaultOption=3) == "defaultOption must be the number of one of the options"
        assert refused(to=[]) == "to must be an identity or a list of 1 to 20 identities"
        assert refused(to=[f"u{n}" for n in range(21)]) == "to must be an identity or a list of 1 to 20 identities"
        assert refused(to="nobody") == "Unknown identity for to: nobody"
        assert refused(to="Not An Identity").startswith("to: identity must match")
        assert refused(deadline="2001-01-01T00:00:00Z") == "deadline must be in the future"
        assert refused(deadline="soon") == "deadline must be an ISO-8601 timestamp"
        assert refused(context={"messageId": "42"}).startswith("context holds messageId (an integer)")
        assert ok(alice.post("/api/asks", json={"to": "bob", "question": "Q?", "options": ["a", "b"],
                                                "context": {}}))["context"] is None
        assert alice.post("/api/asks", json={"to": "bob", "question": "Q?"}).json() == \
            {"error": "An ask needs options, allowText, or both"}
        long_answer = ok(alice.post("/api/asks", json={"to": "bob", "question": "Q?", "allowText": True}))
    with client(srv, "bob") as bob:
        assert bob.post(f"/api/asks/{long_answer['id']}/answer", json={"text": "x" * 2001}).status_code == 400


def test_asks_share_the_send_rate_limit_with_mail(make_server):
    srv = make_server(env={"COORD_RATE_LIMITS": "on"}, clock=FrozenClock(START))  # one window throughout
    with client(srv, "alice") as alice:
        for n in range(20):
            ok(alice.post("/api/mailboxes/bob/messages", json={"title": f"m{n}"}))
        for n in range(10):
            answer = alice.post("/api/asks", json={"to": "bob", "question": f"q{n}", "options": ["a", "b"]})
            assert answer.status_code == 200 and answer.headers["X-RateLimit-Limit"] == "30"
        limited = alice.post("/api/asks", json={"to": "bob", "question": "one more", "options": ["a", "b"]})
        assert limited.status_code == 429 and int(limited.headers["Retry-After"]) >= 1
        assert limited.json()["error"].startswith("Too many requests")
        assert alice.get("/api/asks").status_code == 200  # listing is in the ordinary class


# --- the asker hears the answer -------------------------------------------------------------------

async def test_the_asker_gets_the_stream_event_a_wake_item_until_read_and_a_push(make_server, database_url, receiver):
    target = receiver()
    srv = make_server(database_url=database_url, env=ALLOW_LOOPBACK)
    token = register(srv, "alice", target.url)
    bob_target = receiver()
    bob_token = register(srv, "bob", bob_target.url)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        async with open_stream(srv, "alice") as stream:
            made = ask(alice)
            created = await stream.until(lambda f: f.event == "ask")
            assert created.id is not None and created.data["askId"] == made["id"]
            ok(bob.post(f"/api/asks/{made['id']}/answer", json={"option": "Deploy now"}))
            frame = await stream.until(lambda f: f.event == "ask_answered")
            assert frame.id is not None and frame.data == {
                "type": "ask_answered", "askId": made["id"], "from": "alice", "to": ["bob"],
                "question": made["question"], "answeredBy": "bob", "option": "Deploy now", "text": None}
            pulse = await stream.until(lambda f: f.event == "wake_pulse"
                                       and any(i["source"] == "ask_result" for i in f.data["items"]))
            assert pulse.data["summary"] == "1 waiting: 1 ask outcome to read."
            [item] = wake_items(alice, "ask_result")
            assert (item["id"], item["priority"], item["status"], item["answeredBy"], item["option"]) == \
                (made["id"], "normal", "answered", "bob", "Deploy now")
            assert wake_items(alice, "ask_result") == [item]  # listing or waking does not read it
            ok(alice.get("/api/asks"))
            assert len(wake_items(alice, "ask_result")) == 1
            read = ok(alice.get(f"/api/asks/{made['id']}"))
            assert read["readAt"] is not None
            assert (await stream.until(lambda f: f.event == "ask_read")).data == \
                {"type": "ask_read", "askId": made["id"], "from": "alice"}
            assert wake_items(alice, "ask_result") == []
            assert ok(alice.get(f"/api/asks/{made['id']}"))["readAt"] == read["readAt"]  # once
    pushed = verify(target.wait_calls(1)[0], token)
    assert pushed["event"]["type"] == "ask_answered" and pushed["event"]["askId"] == made["id"]
    assert "bob answered your ask" in pushed["message"] and f"GET /api/asks/{made['id']}" in pushed["message"]
    asked = verify(bob_target.wait_calls(1)[0], bob_token)  # those asked are pushed the ask
    assert asked["event"]["type"] == "ask" and "Options: ⟦untrusted 2⟧, ⟦untrusted 3⟧." in asked["message"]
    assert [(u["path"], u["from"]) for u in asked["untrusted"]] == [  # the asker's words, fenced (push_body)
        ("/event/question", "alice"), ("/event/options/0", "alice"), ("/event/options/1", "alice")]
    assert "\nDeploy now\n<<<end untrusted 2 nonce=" in asked["message"]
    assert f"POST /api/asks/{made['id']}/answer" in asked["message"]
    time.sleep(0.3)
    assert len(target.calls) == 1 and len(bob_target.calls) == 1  # nothing else is pushed


async def test_replay_after_a_restart(make_server, database_url):
    """What the asker missed while the server restarted is replayed from the log on resume."""
    first = make_server(database_url=database_url)
    with client(first, "alice") as alice:
        async with open_stream(first, "alice") as stream:
            made = ask(alice, to=["bob", "carol"])
            seen = await stream.until(lambda f: f.event == "ask")
        with client(first, "bob") as bob:
            ok(bob.post(f"/api/asks/{made['id']}/answer", json={"option": 1}))
        expiring = ask(alice)
    first.stop()
    again = make_server(database_url=database_url)
    with client(again, "carol") as carol:
        assert carol.post(f"/api/asks/{made['id']}/answer", json={"option": 2}).json()["answeredBy"] == "bob"
    with client(again, "alice") as alice:
        ok(alice.post(f"/api/asks/{expiring['id']}/cancel"))
        async with open_stream(again, "alice", last_event_id=seen.stream_id) as stream:
            replayed = [await stream.logged() for _ in range(3)]
        assert [(f.event, f.data["askId"]) for f in replayed] == [
            ("ask_answered", made["id"]), ("ask", expiring["id"]), ("ask_cancelled", expiring["id"])]
        assert [i["id"] for i in wake_items(alice, "ask_result")] == [made["id"]]


# --- deadlines ---------------------------------------------------------------------------------

def test_expiry_applies_the_default_on_the_injected_clock(make_server, database_url):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, database_url=database_url, **FAST)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        soon = ask(alice, to=["bob", "carol"], deadline=iso(START + timedelta(minutes=10)), defaultOption=2)
        bare = ask(alice, deadline=iso(START + timedelta(minutes=20)))
        later = ask(alice, deadline=iso(START + timedelta(hours=1)))
        time.sleep(0.3)  # passes run; nothing is due by the frozen clock
        assert [a["status"] for a in ok(alice.get("/api/asks"))["asks"]] == ["open"] * 3
        clock.advance(minutes=10)  # exactly the deadline: due
        expired = eventually(lambda: ok(bob.get(f"/api/asks/{soon['id']}")), lambda a: a["status"] == "expired")
        assert (expired["status"], expired["option"], expired["answeredBy"]) == ("expired", "Wait", None)
        assert expired["closedAt"] == iso(START + timedelta(minutes=10))
        assert bob.post(f"/api/asks/{soon['id']}/answer", json={"option": 1}).json() == \
            {"error": "The ask has expired", "status": "expired"}
        assert [i["id"] for i in wake_items(bob, "ask")] == [bare["id"], later["id"]]
        [result] = wake_items(alice, "ask_result")
        assert (result["id"], result["status"], result["option"], result["answeredBy"]) == \
            (soon["id"], "expired", "Wait", None)
        clock.advance(minutes=15)
        gone = eventually(lambda: ok(bob.get(f"/api/asks/{bare['id']}")), lambda a: a["status"] == "expired")
        assert gone["option"] is None  # no default: expired unanswered
        assert [i["id"] for i in wake_items(alice, "ask_result")] == [soon["id"], bare["id"]]
        assert [i["id"] for i in wake_items(bob, "ask")] == [later["id"]]
        assert ok(alice.get(f"/api/asks/{later['id']}"))["status"] == "open"
    expired_events = logged(srv, ("ask_expired",))
    assert [(d["askId"], d["option"], to) for _k, d, to in expired_events] == [
        (soon["id"], "Wait", ["alice", "bob", "carol"]), (bare["id"], None, ["alice", "bob"])]


def test_an_answer_after_the_deadline_is_refused_before_the_pass_expires_it(make_server):
    clock = FrozenClock(START)
    srv = make_server(clock=clock, scheduler_interval_seconds=3600)
    with client(srv, "alice") as alice, client(srv, "bob") as bob:
        made = ask(alice, deadline=iso(START + timedelta(minutes=5)), defaultOption=1)
        assert len(wake_items(alice, "ask_result")) == 0
        clock.advance(minutes=6)
        late = bob.post(f"/api/asks/{made['id']}/answer", json={"option": 2})
        assert late.json() == {"error": "The ask's deadline has passed", "status": "expired"}
        assert srv.call(srv.coord.services.scheduler.expire_asks) == 1
        assert srv.call(srv.coord.services.scheduler.expire_asks) == 0
        [item] = wake_items(alice, "ask_result")
        assert (item["status"], item["option"]) == ("expired", "Deploy now")
        assert item["summary"] == ("'Deploy now or wait for the window?' expired unanswered: "
                                   "the default Deploy now applies")


def test_a_deadline_wakes_the_pass_before_its_interval(make_server):
    """The expiry pass sleeps until the earliest open deadline, not a whole interval (real clock)."""
    srv = make_server(scheduler_interval_seconds=3600)
    with client(srv, "alice") as alice:
        made = ask(alice, deadline=iso(datetime.now(UTC) + timedelta(seconds=1)))
        started = time.monotonic()
        expired = eventually(lambda: ok(alice.get(f"/api/asks/{made['id']}")), lambda a: a["status"] == "expired")
        assert expired["status"] == "expired" and time.monotonic() - started < 3


def test_two_processes_expire_each_ask_exactly_once(make_server, pg_cluster):
    """Two servers on one PostgreSQL, one injected clock, both running the expiry pass often: every ask
    expires once, with one `ask_expired` event, whichever process got there."""
    url = pg_cluster.create_database()
    clock = FrozenClock(START)
    here = make_server(clock=clock, database_url=url, **FAST)
    there = make_server(clock=clock, database_url=url, **FAST)
    with client(here, "alice") as alice, client(there, "carol") as carol:
        made = [ask(alice if n % 2 else carol, to=["bob"], deadline=iso(START + timedelta(minutes=1 + n % 3)),
                    defaultOption=1) for n in range(12)]
        for _ in range(3):
            clock.advance(minutes=1)
            barrier = threading.Barrier(4)

            def race(server) -> int:
                barrier.wait()
                return server.call(server.coord.services.scheduler.expire_asks)
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(race, [here, there, here, there]))
        with client(there, "bob") as bob:
            statuses = eventually(lambda: [a["status"] for a in ok(bob.get("/api/asks"))["asks"]],
                                  lambda s: s == ["expired"] * 12)
        assert statuses == ["expired"] * 12
    events = logged(here, ("ask_expired",))
    assert sorted(d["askId"] for _k, d, _to in events) == sorted(a["id"] for a in made)
    assert here.coord.services.scheduler.asks_expired + there.coord.services.scheduler.asks_expired == 12

