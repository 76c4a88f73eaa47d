"""Leases and reservations over the real /mcp with the SDK's client, on SQLite and PostgreSQL: claim_task with
leaseSeconds and renew_task_lease (the holder only), reserve (the 409's conflicts carried as the tool error's
structured content), list_reservations, renew_reservation and release, each calling the REST route in-process."""
from __future__ import annotations

import pytest

from coordserver.server import ServerThread
from coordserver.settings import Settings
from tests.helpers import backend_url, base_env, client, ok
from tests.server.mcp.test_mcp import connect, refused, succeeded

pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    server = ServerThread(Settings.from_env(base_env(backend_url(request, tmp_path_factory)))).start()
    yield server
    server.stop()


async def test_claim_with_a_lease_and_renew_it(srv):
    with client(srv, "alice") as alice:
        task = ok(alice.post("/api/swarm/tasks", json={"title": "Leased over MCP"}))
    async with connect(srv.url, "bob") as bob:
        tools = {t.name: t for t in (await bob.list_tools()).tools}
        assert "leaseSeconds" in tools["claim_task"].input_schema["properties"]
        claimed = succeeded(await bob.call_tool("claim_task", {"taskId": task["id"], "leaseSeconds": 600}))
        assert claimed["assigneeUserId"] == "bob" and "leaseExpiresAt" in claimed
        renewed = await bob.call_tool("renew_task_lease", {"taskId": task["id"], "leaseSeconds": 1200})
        assert succeeded(renewed)["leaseExpiresAt"] > claimed["leaseExpiresAt"]
        assert renewed.content[0].text.startswith(f"Task {task['id']} ⟦untrusted 1⟧: lease until ")  # alice's title
        refused(await bob.call_tool("renew_task_lease", {"taskId": task["id"], "leaseSeconds": 5}),
                "leaseSeconds must be an integer from 60 to 86400")
    async with connect(srv.url, "carol") as carol:
        refused(await carol.call_tool("renew_task_lease", {"taskId": task["id"]}),
                "Only the task's holder (bob) may renew its lease")


async def test_reserve_list_renew_and_release(srv):
    async with connect(srv.url, "alice") as alice, connect(srv.url, "bob") as bob:
        made = await alice.call_tool("reserve", {"resource": "mcp/src/**", "ttlSeconds": 600, "reason": "refactor"})
        mine = succeeded(made)
        assert (mine["holder"], mine["resource"], mine["exclusive"]) == ("alice", "mcp/src/**", True)
        assert made.content[0].text.startswith(f"Made reservation {mine['id']} of mcp/src/** (exclusive) until ")
        conflict = refused(await bob.call_tool("reserve", {"resource": "mcp/src/app.py", "ttlSeconds": 60}))
        assert conflict["error"] == "mcp/src/app.py overlaps a reservation held by others"
        assert [(c["id"], c["holder"]) for c in conflict["conflicts"]] == [(mine["id"], "alice")]
        listed = succeeded(await bob.call_tool("list_reservations", {"resource": "mcp/src/x.py"}))
        assert [r["id"] for r in listed["reservations"]] == [mine["id"]]
        refused(await bob.call_tool("release", {"reservationId": mine["id"]}),
                "Only its holder (alice) or an admin may release a reservation")
        renewed = succeeded(await alice.call_tool("renew_reservation", {"reservationId": mine["id"],
                                                                         "ttlSeconds": 1200}))
        assert renewed["ttlSeconds"] == 1200
        released = await alice.call_tool("release", {"reservationId": mine["id"]})
        assert succeeded(released) == {"ok": True}
        assert released.content[0].text == f"Released reservation {mine['id']}."
        assert succeeded(await bob.call_tool("reserve", {"resource": "mcp/src/app.py", "ttlSeconds": 60}))
