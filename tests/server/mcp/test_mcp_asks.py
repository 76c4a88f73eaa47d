"""The ask tools over the real /mcp with the SDK's client, on SQLite and PostgreSQL: `ask_human` blocks until a
REST answer releases it (also when the answer is given to another server process), comes back open after
`wait_seconds`, or with the default when the deadline passes; `get_ask`, `list_asks` and `answer_ask` (agents
answer each other too)."""
from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from coordserver.mcp.tools import WAIT_MAX
from coordserver.server import ServerThread
from coordserver.settings import Settings
from coordserver.timeutil import iso
from tests.helpers import TOKENS, backend_url, base_env, client, ok
from tests.server.mcp.test_mcp import connect, refused, succeeded

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")
# Released by the answer, not by wait_seconds (60 and 120 here): well inside those. The bound (within a
# second) is a latency, typically ~50 ms: a timed test of it failed on a loaded machine (1.2 s at load 6).
GRACE = 5.0


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


def open_asks_of(url: str, who: str) -> list[dict]:
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30) as http:
        return ok(http.get("/api/asks", params={"role": "received", "status": "open"}))["asks"]


async def until_asked(url: str, who: str, question: str) -> dict:
    """The open ask put to `who` with this question, once the blocked tool has made it."""
    for _ in range(500):
        found = [a for a in await asyncio.to_thread(open_asks_of, url, who) if a["question"] == question]
        if found:
            return found[0]
        await asyncio.sleep(0.02)
    raise AssertionError("the ask was never made")


def answer_over_rest(url: str, who: str, ask_id: int, **body) -> float:
    """Answer as `who` through `url`; returns when the answer's response arrived (time.monotonic)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKENS[who]}"}, timeout=30) as http:
        ok(http.post(f"/api/asks/{ask_id}/answer", json=body))
    return time.monotonic()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_ask_human_blocks_until_a_rest_answer_releases_it(srv, mode):
    question = f"Deploy now or wait? ({mode}, {time.monotonic()})"
    async with connect(srv.url, "alice", mode=mode) as session:
        call = asyncio.ensure_future(session.call_tool("ask_human", {
            "to": "bob", "question": question, "options": ["Deploy now", "Wait"], "wait_seconds": 60}))
        made = await until_asked(srv.url, "bob", question)
        await asyncio.sleep(0.3)
        assert not call.done()  # still blocked: nobody has answered
        answered_at = await asyncio.to_thread(answer_over_rest, srv.url, "bob", made["id"], option="Wait")
        result = await asyncio.wait_for(call, 10)
        released = time.monotonic()
    assert released - answered_at < GRACE
    ask = succeeded(result)
    assert (ask["id"], ask["status"], ask["answeredBy"], ask["option"]) == (made["id"], "answered", "bob", "Wait")
    assert result.content[0].text == f"Ask {made['id']}: bob answered 'Wait'."  # the asker's own label
    assert ask["readAt"] is not None  # the agent got the answer: nothing waits in its wake
    with client(srv, "alice") as alice:
        assert not [i for i in ok(alice.get("/api/wake"))["items"] if i["source"] == "ask_result"]


async def test_ask_human_returns_the_open_ask_after_wait_seconds_then_get_ask_reads_it(srv):
    async with connect(srv.url, "alice") as session:
        started = time.monotonic()
        ask = succeeded(await session.call_tool("ask_human", {
            "to": ["bob", "carol"], "question": "Approve migration 0042?", "options": ["Approve", "Reject"],
            "allowText": True, "wait_seconds": 1}))
        assert 1 <= time.monotonic() - started < 15  # wait_seconds (1) ended the wait, with room for a loaded machine
        assert ask["status"] == "open" and ask["to"] == ["bob", "carol"]
        async with connect(srv.url, "carol") as carol:
            listed = succeeded(await carol.call_tool("list_asks", {"role": "received", "status": "open"}))
            assert ask["id"] in [a["id"] for a in listed["asks"]]
            said = succeeded(await carol.call_tool("answer_ask", {"askId": ask["id"], "text": "Approve after 6pm"}))
            assert said["text"] == "Approve after 6pm" and said["answeredBy"] == "carol"
        async with connect(srv.url, "bob") as bob:
            late = refused(await bob.call_tool("answer_ask", {"askId": ask["id"], "option": 1}))
            assert late == {"error": "Already answered by carol", "answeredBy": "carol", "status": "answered"}
        with client(srv, "alice") as alice:
            assert [i["id"] for i in ok(alice.get("/api/wake"))["items"] if i["source"] == "ask_result"] == [ask["id"]]
        read = succeeded(await session.call_tool("get_ask", {"askId": ask["id"]}))
        assert read["status"] == "answered" and read["readAt"] is not None
        with client(srv, "alice") as alice:
            assert not [i for i in ok(alice.get("/api/wake"))["items"] if i["source"] == "ask_result"]
        async with connect(srv.url, "carol") as carol:
            refused(await carol.call_tool("get_ask", {"askId": 999999}), "Ask not found")


async def test_ask_human_returns_the_default_when_the_deadline_passes(srv):
    async with connect(srv.url, "alice") as session:
        started = time.monotonic()
        ask = succeeded(await session.call_tool("ask_human", {
            "to": "bob", "question": "Restart the cache?", "options": ["Yes", "No"], "defaultOption": 2,
            "deadline": iso(datetime.now(UTC) + timedelta(seconds=1)), "wait_seconds": 30}))
        assert time.monotonic() - started < 15  # the deadline (1 s), not wait_seconds (30), ended it
        assert (ask["status"], ask["option"], ask["answeredBy"]) == ("expired", "No", None)


async def test_the_wait_is_bounded(srv):
    async with connect(srv.url, "alice") as session:
        too_long = {"to": "bob", "question": "Q?", "options": ["a", "b"], "wait_seconds": WAIT_MAX + 1}
        refused(await session.call_tool("ask_human", too_long), "wait_seconds must be at most 300")
        listed = (await session.list_tools()).tools
        schema = next(t for t in listed if t.name == "ask_human").input_schema
        assert schema["properties"]["wait_seconds"]["maximum"] == WAIT_MAX == 300
        assert {"to", "question"} <= set(schema["required"]) and "options" in schema["properties"]


async def test_an_answer_on_another_process_releases_ask_human_within_a_second(pg_cluster):
    """Two server processes on one PostgreSQL: ask_human blocks on this one; the answer is given to the other."""
    from tests.sse_helpers import server_process
    url = pg_cluster.create_database()
    with ServerThread(Settings.from_env(base_env(url))) as here, server_process(url) as other:
        async with connect(here.url, "alice") as session:
            call = asyncio.ensure_future(session.call_tool("ask_human", {
                "to": ["bob", "carol"], "question": "Which fix?", "options": ["A", "B", "C"], "wait_seconds": 120}))
            made = await until_asked(other, "carol", "Which fix?")  # seen from the other process
            await asyncio.sleep(0.3)
            assert not call.done()
            answered_at = await asyncio.to_thread(answer_over_rest, other, "carol", made["id"], option=3)
            result = await asyncio.wait_for(call, 10)
            released = time.monotonic()
        assert released - answered_at < GRACE
        ask = succeeded(result)
        assert (ask["status"], ask["answeredBy"], ask["option"]) == ("answered", "carol", "C")
