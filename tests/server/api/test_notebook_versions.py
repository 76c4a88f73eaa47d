"""Notebook page versions over REST against the real server, on SQLite and PostgreSQL: made by time
(an injected clock), when the last editor leaves and on demand; listing, reading, restoring,
visibility, locking, events and retention pruning."""
from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from coordserver.events import log
from coordserver.timeutil import FrozenClock
from coordtui.client.notebook import NotebookSession
from tests.helpers import TOKENS, async_client, client, ok

START = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
QUICK = {"notebook_save_seconds": 0.05, "notebook_unload_seconds": 0.2, "notebook_version_check_seconds": 0.05}


async def until(predicate, timeout=10.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await predicate():
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.03)


async def versions_of(http, page_id) -> list[dict]:
    response = await http.get(f"/api/notebook/{page_id}/versions")
    assert response.status_code == 200, response.text
    return response.json()["versions"]


async def new_page(http, content="", **fields) -> str:
    response = await http.post("/api/notebook", json={"title": "Runbook", "content": content, **fields})
    assert response.status_code == 200, response.text
    return response.json()["page"]["id"]


def version_events(server, identity, page_id) -> list[dict]:
    rows = server.call(lambda: server.coord.store.read(log.for_identity_after, identity, 0, 100000))
    return [data for _, kind, data in rows if kind == "notebook_version" and data["pageId"] == page_id]


async def test_versions_by_time_by_the_last_editor_leaving_and_on_demand(make_server, database_url):
    clock = FrozenClock(START)
    server = make_server(database_url=database_url, clock=clock, **QUICK)
    async with async_client(server, "alice") as http:
        page_id = await new_page(http, "step 1\n")
        first = await versions_of(http, page_id)
        assert [(v["reason"], v["size"], v["createdBy"]) for v in first] == [("created", 7, "alice")]

        editor = await NotebookSession(server.url, TOKENS["bob"], page_id).connect()
        editor.insert(len(editor.value), "step 2 é\n")
        clock.advance(minutes=4)  # saved, but the newest version is younger than five minutes
        await asyncio.sleep(0.5)
        assert len(await versions_of(http, page_id)) == 1
        clock.advance(minutes=1, seconds=1)

        async def timed_version():
            return len(await versions_of(http, page_id)) == 2
        await until(timed_version)
        newest = (await versions_of(http, page_id))[0]
        assert newest["reason"] == "time" and newest["editors"] == ["bob"] and newest["size"] == 16
        assert newest["createdAt"] == "2026-03-02T09:05:01.000Z"
        clock.advance(minutes=30)
        await asyncio.sleep(0.3)
        assert len(await versions_of(http, page_id)) == 2  # unchanged since: no version

        editor.insert(0, "# ")
        await until(lambda: _stored_is(http, page_id, "# step 1\nstep 2 é\n"))
        await editor.close()  # the last editor leaves: a version at once, whatever the clock says

        async def idle_version():
            return len(await versions_of(http, page_id)) == 3
        await until(idle_version)
        idle = (await versions_of(http, page_id))[0]
        assert idle["reason"] == "idle" and idle["editors"] == ["bob"] and idle["size"] == 18

        response = await http.post(f"/api/notebook/{page_id}/versions", json={"label": "  before deploy  "})
        assert response.status_code == 201, response.text
        checkpoint = response.json()["version"]
        assert checkpoint["label"] == "before deploy" and checkpoint["reason"] == "checkpoint"
        assert checkpoint["editors"] == [] and checkpoint["createdBy"] == "alice"
        listed = await versions_of(http, page_id)
        assert [v["reason"] for v in listed] == ["checkpoint", "idle", "time", "created"]
        assert [v["id"] for v in listed] == sorted((v["id"] for v in listed), reverse=True)
        assert set(listed[0]) == {"id", "pageId", "createdAt", "editors", "size", "label", "reason", "createdBy"}
        text = ok_json(await http.get(f"/api/notebook/{page_id}/versions/{listed[2]['id']}"))["version"]
        assert text["content"] == "step 1\nstep 2 é\n"
        paged = ok_json(await http.get(f"/api/notebook/{page_id}/versions", params={"limit": 1, "offset": 1}))
        assert [v["reason"] for v in paged["versions"]] == ["idle"]
    assert [e["reason"] for e in version_events(server, "carol", page_id)] == \
        ["created", "time", "idle", "checkpoint"]  # an untagged page: everyone hears


async def _stored_is(http, page_id, text) -> bool:
    return (await http.get(f"/api/notebook/{page_id}")).json()["page"]["content"] == text


def ok_json(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


async def test_restore_is_an_edit_and_a_version_and_loses_nothing(make_server, database_url):
    server = make_server(database_url=database_url, **QUICK)
    async with async_client(server, "alice") as http:
        page_id = await new_page(http, "Runbook: restart the pump 😀\n")
        original = (await versions_of(http, page_id))[0]
        ok_json(await http.patch(f"/api/notebook/{page_id}", json={"content": "oops, all gone"}))
        response = await http.post(f"/api/notebook/{page_id}/versions/{original['id']}/restore")
        answer = ok_json(response)
        assert answer["page"]["content"] == "Runbook: restart the pump 😀\n"
        assert answer["version"]["reason"] == "restore" and answer["version"]["editors"] == ["alice"]
        assert answer["version"]["label"] == f"Restored version {original['id']}"
        listed = await versions_of(http, page_id)
        assert [v["reason"] for v in listed] == ["restore", "before_restore", "created"]
        kept = ok_json(await http.get(f"/api/notebook/{page_id}/versions/{listed[1]['id']}"))["version"]
        assert kept["content"] == "oops, all gone" and kept["editors"] == ["alice"]
        assert (await http.get(f"/api/notebook/{page_id}")).json()["page"]["content"] == \
            "Runbook: restart the pump 😀\n"


async def test_visibility_locking_and_bad_input(make_server, database_url):
    server = make_server(database_url=database_url, **QUICK)
    async with async_client(server, "alice") as alice, async_client(server, "bob") as bob, \
            async_client(server, "carol") as carol, async_client(server, "admin") as admin:
        page_id = await new_page(alice, "secret\n", taggedUsers=["bob"])
        version_id = (await versions_of(alice, page_id))[0]["id"]
        for path in (f"/api/notebook/{page_id}/versions", f"/api/notebook/{page_id}/versions/{version_id}"):
            assert (await carol.get(path)).status_code == 403
            assert (await bob.get(path)).status_code == 200 and (await admin.get(path)).status_code == 200
        assert (await carol.post(f"/api/notebook/{page_id}/versions", json={})).status_code == 403
        assert (await carol.post(f"/api/notebook/{page_id}/versions/{version_id}/restore")).status_code == 403
        assert version_events(server, "carol", page_id) == [] and len(version_events(server, "bob", page_id)) == 1

        ok_json(await alice.patch(f"/api/notebook/{page_id}", json={"locked": True}))
        refused = await bob.post(f"/api/notebook/{page_id}/versions", json={"label": "mine"})
        assert refused.status_code == 403 and refused.json() == {"error": "Page is locked"}
        refused = await bob.post(f"/api/notebook/{page_id}/versions/{version_id}/restore")
        assert refused.status_code == 403 and refused.json() == {"error": "Page is locked"}
        assert len(await versions_of(bob, page_id)) == 1  # nothing half-made
        assert (await alice.post(f"/api/notebook/{page_id}/versions", json={"label": "owner"})).status_code == 201
        ok_json(await alice.delete(f"/api/notebook/{page_id}"))
        archived = await alice.post(f"/api/notebook/{page_id}/versions/{version_id}/restore")
        assert archived.status_code == 403 and archived.json() == {"error": "Page is archived"}

        missing = await alice.get(f"/api/notebook/{page_id}/versions/999999")
        assert missing.status_code == 404 and missing.json() == {"error": "Version not found"}
        assert (await alice.get("/api/notebook/no-such-page/versions")).status_code == 404
        bad = await alice.get(f"/api/notebook/{page_id}/versions/abc")
        assert bad.status_code in (400, 404) and "error" in bad.json()
        other = await new_page(alice, "other")
        assert (await alice.get(f"/api/notebook/{other}/versions/{version_id}")).status_code == 404
        long_label = await alice.post(f"/api/notebook/{other}/versions", json={"label": "x" * 201})
        assert long_label.status_code == 400 and "label" in long_label.json()["error"]
        wrong = await alice.post(f"/api/notebook/{other}/versions", json={"label": 5})
        assert wrong.status_code == 400 and len(await versions_of(alice, other)) == 1


@pytest.mark.single_process
async def test_old_versions_are_pruned_in_short_units_keeping_the_newest(make_server, database_url, monkeypatch):
    from coordserver.domain import notebook_versions
    clock = FrozenClock(START)
    server = make_server(database_url=database_url, clock=clock, notebook_version_retention_days=30, **QUICK)
    history = server.coord.services.history
    units = []
    real_prune = notebook_versions.prune

    def counted(retention, chunk=notebook_versions.PRUNE_CHUNK):
        units.append(1)
        return real_prune(retention, chunk=2)
    monkeypatch.setattr(notebook_versions, "prune", counted)
    async with async_client(server, "alice") as http:
        old_page, kept_page = await new_page(http, "a"), await new_page(http, "b")
        for label in ("one", "two", "three", "four"):
            assert (await http.post(f"/api/notebook/{old_page}/versions", json={"label": label})).status_code == 201
        clock.advance(days=31)
        recent = await http.post(f"/api/notebook/{kept_page}/versions", json={"label": "recent"})
        assert recent.status_code == 201
        removed = server.call(history.prune)
        assert removed == 5 and len(units) == 4  # two, two, one, then none left: short units
        assert [v["label"] for v in await versions_of(http, old_page)] == ["four"]  # the newest stays
        assert [v["label"] for v in await versions_of(http, kept_page)] == ["recent"]
