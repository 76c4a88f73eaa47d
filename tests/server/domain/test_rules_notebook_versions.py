"""Notebook version rules through the store, no HTTP, on both backends: a version and its event whole, who may
list, read, checkpoint and restore (refusals in their words, nothing written), which editors a version names,
when a timed or an idle version is due (to the instant) and when nothing is kept, a restore's two versions, and
pruning (by age and chunk, never a page's newest version)."""
from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from coordserver.domain import notebook_versions as nv
from coordserver.errors import Forbidden, NotFound
from coordserver.models import NotebookPage, NotebookPendingEditor, NotebookVersion
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START, last_event_id, logged_after, while_held, who

ADMINS = frozenset({"admin"})
NOW = to_db(START)


def page(content: str = "first", created_by: str = "alice", tagged: list[str] | None = None, **columns) -> str:
    return NotebookPage.create(title="Page", content=content, created_by=created_by, tagged_users=tagged,
                               created_at=NOW, updated_at=NOW, **columns).id


def versions(page_id: str) -> list[tuple]:
    return [(v.content, v.reason, v.editors, v.label, v.created_by)
            for v in NotebookVersion.select().where(NotebookVersion.page_id == page_id).order_by(NotebookVersion.id)]


def edit(page_id: str, content: str, *editors: str) -> None:
    NotebookPage.update(content=content).where(NotebookPage.id == page_id).execute()
    nv.note_editors(page_id, list(editors))


def pending(page_id: str) -> list[str]:
    return sorted(e.identity for e in NotebookPendingEditor.select().where(NotebookPendingEditor.page_id == page_id))


async def test_a_first_version_and_its_event_read_whole(store):
    page_id = await store.write(page, tagged=["bob"])
    after = last_event_id()
    await store.write(lambda: nv.first_version(NotebookPage.get_by_id(page_id), ADMINS))
    [version] = await store.read(nv.list_versions, page_id, who("bob"), 10, 0)
    assert version == {"id": version["id"], "pageId": page_id, "createdAt": iso(START), "editors": [], "size": 5,
                       "label": None, "reason": "created", "createdBy": "alice"}
    assert await store.read(logged_after, after) == [
        ("notebook_version", {"type": "notebook_version", "pageId": page_id, "versionId": version["id"],
                              "reason": "created", "label": None, "createdAt": iso(START)},
         ["admin", "alice", "bob"])]
    assert await store.read(nv.get_version, page_id, version["id"], who("bob")) == {**version, "content": "first"}
    open_page = await store.write(page)
    after = last_event_id()
    await store.write(lambda: nv.first_version(NotebookPage.get_by_id(open_page), ADMINS))
    assert [entry[2] for entry in await store.read(logged_after, after)] == [None]


async def test_who_may_read_versions(store):
    page_id = await store.write(page, tagged=["bob"])
    await store.write(lambda: nv.first_version(NotebookPage.get_by_id(page_id), ADMINS))
    [version] = await store.read(nv.list_versions, page_id, who("alice"), 10, 0)
    for call, args in ((nv.list_versions, (page_id, who("carol"), 10, 0)),
                       (nv.get_version, (page_id, version["id"], who("carol")))):
        with pytest.raises(Forbidden) as refused:
            await store.read(call, *args)
        assert refused.value.message == "Forbidden"
    assert len(await store.read(nv.list_versions, page_id, who("admin"), 10, 0)) == 1
    with pytest.raises(NotFound) as missing:
        await store.read(nv.list_versions, "nope", who("admin"), 10, 0)
    assert missing.value.message == "Not found"
    other = await store.write(page)
    with pytest.raises(NotFound) as wrong_page:
        await store.read(nv.get_version, other, version["id"], who("alice"))
    assert wrong_page.value.message == "Version not found"
    with pytest.raises(NotFound):
        await store.read(nv.restore_source, other, version["id"], who("alice"))


async def test_the_list_is_newest_first_in_pages(store):
    page_id = await store.write(page)
    made = [(await store.write(nv.checkpoint, page_id, who("alice"), f"v{n}", ADMINS))["id"] for n in range(4)]
    listed = await store.read(nv.list_versions, page_id, who("bob"), 2, 1)
    assert [v["id"] for v in listed] == [made[2], made[1]]
    assert [v["label"] for v in listed] == ["v2", "v1"]


async def test_a_checkpoint_names_the_editors_since_the_last_version(store):
    page_id = await store.write(page)
    store.clock.advance(seconds=1)
    await store.write(edit, page_id, "second", "carol", "bob")
    store.clock.advance(seconds=1)
    await store.write(edit, page_id, "third", "bob", "alice", "alice")
    assert await store.read(pending, page_id) == ["alice", "bob", "carol"]
    after = last_event_id()
    made = await store.write(nv.checkpoint, page_id, who("bob"), "before lunch", ADMINS)
    assert made == {"id": made["id"], "pageId": page_id, "createdAt": iso(START + timedelta(seconds=2)),
                    "editors": ["bob", "carol", "alice"], "size": 5, "label": "before lunch",
                    "reason": "checkpoint", "createdBy": "bob"}
    assert [entry[1]["label"] for entry in await store.read(logged_after, after)] == ["before lunch"]
    assert await store.read(pending, page_id) == []
    live = await store.write(nv.checkpoint, page_id, who("alice"), None, ADMINS, "the live text")
    assert (live["size"], live["editors"], live["label"]) == (13, [], None)
    assert (await store.read(versions, page_id))[-1] == ("the live text", "checkpoint", [], None, "alice")
    other = await store.write(page)
    await store.write(nv.note_editors, other, ["dave"])
    await store.write(nv.checkpoint, page_id, who("alice"), None, ADMINS)
    assert await store.read(pending, other) == ["dave"]


async def test_an_archived_or_locked_page_refuses_a_change(store):
    archived = await store.write(page, archived_at=NOW)
    locked = await store.write(page, locked=True)
    for page_id, identity, message in ((archived, "alice", "Page is archived"), (archived, "admin", "Page is archived"),
                                       (locked, "bob", "Page is locked")):
        for call, args in ((nv.checkpoint, (page_id, who(identity), None, ADMINS)),
                           (nv.check_editable, (page_id, who(identity)))):
            with pytest.raises(Forbidden) as refused:
                await store.write(call, *args)
            assert refused.value.message == message
    assert await store.read(versions, archived) == [] and await store.read(versions, locked) == []
    await store.read(nv.check_editable, locked, who("alice"))
    await store.read(nv.check_editable, locked, who("admin"))
    made = await store.write(nv.checkpoint, locked, who("admin"), None, ADMINS)
    with pytest.raises(Forbidden) as refused:
        await store.read(nv.restore_source, locked, made["id"], who("bob"))
    assert refused.value.message == "Page is locked"
    assert await store.read(nv.restore_source, locked, made["id"], who("alice")) == "first"
    hidden = await store.write(page, tagged=["bob"])
    with pytest.raises(Forbidden) as unseen:
        await store.write(nv.checkpoint, hidden, who("carol"), None, ADMINS)
    assert unseen.value.message == "Forbidden"
    with pytest.raises(NotFound):
        await store.write(nv.checkpoint, "nope", who("alice"), None, ADMINS)


async def test_a_timed_version_is_due_once_the_newest_is_old_enough(store):
    page_id = await store.write(page)
    interval = timedelta(minutes=10)
    assert await store.write(nv.version_if_due, page_id, interval, ADMINS) is False  # nothing edited
    await store.write(edit, page_id, "second", "bob")
    assert await store.read(nv.pages_with_pending_edits) == [page_id]
    store.clock.advance(minutes=10, seconds=-1)
    assert await store.write(nv.version_if_due, page_id, interval, ADMINS) is False  # the page is too new
    store.clock.advance(seconds=1)
    after = last_event_id()
    assert await store.write(nv.version_if_due, page_id, interval, ADMINS) is True
    assert await store.read(versions, page_id) == [("second", "time", ["bob"], None, None)]
    assert [entry[1]["reason"] for entry in await store.read(logged_after, after)] == ["time"]
    assert await store.read(nv.pages_with_pending_edits) == []
    await store.write(edit, page_id, "third", "carol")
    store.clock.advance(minutes=9)
    assert await store.write(nv.version_if_due, page_id, interval, ADMINS) is False  # the newest is too new
    store.clock.advance(minutes=1)
    assert await store.write(nv.version_if_due, page_id, interval, ADMINS) is True
    assert (await store.read(versions, page_id))[-1] == ("third", "time", ["carol"], None, None)
    assert await store.write(nv.version_if_due, "nope", interval, ADMINS) is False


async def test_an_edit_back_to_the_newest_text_keeps_nothing(store):
    page_id = await store.write(page)
    await store.write(lambda: nv.first_version(NotebookPage.get_by_id(page_id), ADMINS))
    await store.write(edit, page_id, "first", "bob")
    store.clock.advance(hours=1)
    after = last_event_id()
    assert await store.write(nv.version_if_due, page_id, timedelta(minutes=10), ADMINS) is False
    assert await store.read(pending, page_id) == []
    await store.write(edit, page_id, "first", "carol")
    assert await store.write(nv.version_when_idle, page_id, ADMINS) is False
    assert await store.read(pending, page_id) == []
    assert await store.read(logged_after, after) == []
    assert len(await store.read(versions, page_id)) == 1


async def test_an_idle_version_keeps_what_the_last_editors_did(store):
    page_id = await store.write(page)
    assert await store.write(nv.version_when_idle, page_id, ADMINS) is False
    await store.write(edit, page_id, "second", "bob")
    assert await store.write(nv.version_when_idle, page_id, ADMINS) is True
    assert await store.read(versions, page_id) == [("second", "idle", ["bob"], None, None)]
    assert await store.write(nv.version_when_idle, page_id, ADMINS) is False
    assert await store.write(nv.version_when_idle, "nope", ADMINS) is False


async def test_a_restore_keeps_the_text_it_replaces_and_names_its_maker(store):
    page_id = await store.write(page)
    await store.write(lambda: nv.first_version(NotebookPage.get_by_id(page_id), ADMINS))
    [first] = await store.read(nv.list_versions, page_id, who("alice"), 10, 0)
    await store.write(nv.keep_before_restore, page_id, "first", ADMINS)  # a version holds it: nothing kept
    assert len(await store.read(versions, page_id)) == 1
    await store.write(edit, page_id, "edited", "carol")
    await store.write(nv.keep_before_restore, page_id, "live text", ADMINS)
    made = await store.write(nv.record_restore, page_id, who("bob"), first["id"], "first", ADMINS)
    assert made == {"id": made["id"], "pageId": page_id, "createdAt": iso(START), "editors": ["bob"], "size": 5,
                    "label": f"Restored version {first['id']}", "reason": "restore", "createdBy": "bob"}
    assert await store.read(versions, page_id) == [
        ("first", "created", [], None, "alice"), ("live text", "before_restore", ["carol"], None, None),
        ("first", "restore", ["bob"], f"Restored version {first['id']}", "bob")]
    await store.write(nv.keep_before_restore, "nope", "x", ADMINS)
    fresh = await store.write(page, "fresh")
    await store.write(nv.keep_before_restore, fresh, "fresh", ADMINS)  # no version yet: keep it
    assert await store.read(versions, fresh) == [("fresh", "before_restore", [], None, None)]
    hidden = await store.write(page, tagged=["bob"])
    with pytest.raises(Forbidden):
        await store.write(nv.record_restore, hidden, who("carol"), 1, "x", ADMINS)
    assert await store.read(versions, hidden) == []


async def test_a_version_is_of_the_page_it_names(store):
    page_id = await store.write(page)
    assert await store.read(nv.latest, page_id) is None
    first = await store.write(nv.checkpoint, page_id, who("alice"), "a", ADMINS)
    second = await store.write(nv.checkpoint, page_id, who("alice"), "b", ADMINS)
    other = await store.write(page)
    await store.write(nv.checkpoint, other, who("alice"), "c", ADMINS)
    assert (await store.read(nv.latest, page_id)).id == second["id"]
    assert await store.read(nv.get_version, page_id, first["id"], who("bob")) == {**first, "content": "first"}


async def test_pruning_drops_old_versions_in_chunks_but_never_a_pages_newest(store):
    pages = [await store.write(page) for _ in range(2)]
    for n in range(3):
        await store.write(nv.checkpoint, pages[0], who("alice"), f"a{n}", ADMINS)
    await store.write(nv.checkpoint, pages[1], who("alice"), "b0", ADMINS)
    store.clock.advance(days=1)
    await store.write(nv.checkpoint, pages[1], who("alice"), "b1", ADMINS)
    store.clock.advance(seconds=1)
    assert await store.write(nv.prune, timedelta(days=1, seconds=1)) == 0  # the cutoff their instant: kept
    retention = timedelta(days=1)
    assert await store.write(nv.prune, retention, 1) == 1
    assert await store.write(nv.prune, retention) == 2
    assert await store.write(nv.prune, retention) == 0

    def labels():
        return [v.label for v in NotebookVersion.select().order_by(NotebookVersion.id)]
    assert await store.read(labels) == ["a2", "b1"]
    store.clock.advance(days=30)
    assert await store.write(nv.prune, retention) == 0


async def test_every_version_goes_to_the_pages_audience_with_the_environment_admins(store):
    """Each way a version is made tells the page's own people and the environment's admins, and no one else."""
    page_id = await store.write(page, tagged=["bob"])
    audience = ["admin", "alice", "bob"]

    async def made_by(call, *args) -> list[tuple]:
        after = last_event_id()
        await store.write(call, *args)
        return [(data["reason"], to) for _kind, data, to in await store.read(logged_after, after)]
    await store.write(edit, page_id, "second", "bob")
    assert await made_by(nv.version_if_due, page_id, timedelta(0), ADMINS) == [("time", audience)]
    await store.write(edit, page_id, "third", "bob")
    assert await made_by(nv.version_when_idle, page_id, ADMINS) == [("idle", audience)]
    assert await made_by(nv.checkpoint, page_id, who("bob"), None, ADMINS) == [("checkpoint", audience)]
    assert await made_by(nv.keep_before_restore, page_id, "live", ADMINS) == [("before_restore", audience)]
    assert await made_by(nv.record_restore, page_id, who("bob"), 1, "first", ADMINS) == [("restore", audience)]


async def test_each_page_keeps_its_own_versions_and_editors(store):
    """With two pages, every read and every pass is of the page it names."""
    other = await store.write(page, "other")  # made first: a query without its page would find it
    mine = await store.write(page, "mine")
    await store.write(nv.checkpoint, other, who("alice"), "other's", ADMINS)
    assert await store.read(nv.list_versions, mine, who("alice"), 10, 0) == []
    assert await store.read(nv.latest, mine) is None
    await store.write(edit, other, "other edited", "carol")
    interval = timedelta(0)
    assert await store.write(nv.version_if_due, mine, interval, ADMINS) is False  # only the other page has edits
    assert await store.write(nv.version_when_idle, mine, ADMINS) is False
    assert await store.read(versions, mine) == []
    await store.write(nv.keep_before_restore, mine, "other's", ADMINS)  # no version of mine holds it
    assert await store.read(versions, mine) == [("other's", "before_restore", [], None, None)]
    await store.write(edit, mine, "mine edited", "bob")
    assert await store.write(nv.version_when_idle, mine, ADMINS) is True
    assert (await store.read(versions, mine))[-1] == ("mine edited", "idle", ["bob"], None, None)
    assert await store.read(pending, other) == ["carol"]
    assert await store.read(nv.pages_with_pending_edits) == [other]
    await store.write(edit, mine, "mine again", "bob")
    assert await store.write(nv.version_if_due, mine, interval, ADMINS) is True
    assert (await store.read(versions, mine))[-1] == ("mine again", "time", ["bob"], None, None)
    assert await store.read(pending, other) == ["carol"]


# --- two processes at once (PostgreSQL: two stores on one database) ---------------------------

async def answered_there(here, held_here: Callable[[], Any], there, unit: Callable[..., Any], *args: Any) -> Any:
    """`unit(*args)` on the store `there`, while `held_here` holds its transaction open on `here`: there's answer."""
    answers: list = []

    async def run_there() -> None:
        answers.append(await there.write(unit, *args))
    await while_held(here, held_here, run_there)
    return answers[0]


async def test_two_timed_or_idle_passes_at_once_make_one_version(two_stores):
    """Each pass holds the page row: the other process's pass waits for it, then finds nothing pending."""
    here, there = two_stores
    page_id = await here.write(page)
    await here.write(edit, page_id, "second", "bob")
    assert await answered_there(here, lambda: nv.version_if_due(page_id, timedelta(0), ADMINS),
                                there, nv.version_if_due, page_id, timedelta(0), ADMINS) is False
    await here.write(edit, page_id, "third", "bob")
    assert await answered_there(here, lambda: nv.version_when_idle(page_id, ADMINS),
                                there, nv.version_when_idle, page_id, ADMINS) is False
    assert [v[1] for v in await here.read(versions, page_id)] == ["time", "idle"]


async def test_a_checkpoint_or_restore_elsewhere_waits_and_names_no_editor_twice(two_stores):
    here, there = two_stores
    page_id = await here.write(page)
    await here.write(edit, page_id, "second", "bob")
    made = await answered_there(here, lambda: nv.checkpoint(page_id, who("alice"), "here", ADMINS),
                                there, nv.checkpoint, page_id, who("carol"), "there", ADMINS)
    assert made["editors"] == []
    await here.write(edit, page_id, "third", "bob")
    made = await answered_there(here, lambda: nv.record_restore(page_id, who("alice"), 1, "first", ADMINS),
                                there, nv.record_restore, page_id, who("carol"), 1, "first", ADMINS)
    assert made["editors"] == ["carol"]
    assert [(v[1], v[2]) for v in await here.read(versions, page_id)] == [
        ("checkpoint", ["bob"]), ("checkpoint", []), ("restore", ["alice", "bob"]), ("restore", ["carol"])]


async def test_two_restores_at_once_keep_the_replaced_text_once(two_stores):
    here, there = two_stores
    page_id = await here.write(page)
    await while_held(here, lambda: nv.keep_before_restore(page_id, "live", ADMINS),
                     lambda: there.write(nv.keep_before_restore, page_id, "live", ADMINS))
    assert await here.read(versions, page_id) == [("live", "before_restore", [], None, None)]


async def test_reading_versions_never_waits_for_a_writer_of_the_page(two_stores):
    """Only the units that change a page hold its row: a list or a read elsewhere answers at once, with what
    was committed before the checkpoint in progress."""
    here, there = two_stores
    page_id = await here.write(page)
    first = await here.write(nv.checkpoint, page_id, who("alice"), "first", ADMINS)
    seen: list = []

    async def read_there():
        seen.append([v["label"] for v in await there.read(nv.list_versions, page_id, who("bob"), 10, 0)])
        seen.append((await there.read(nv.get_version, page_id, first["id"], who("bob")))["label"])
        seen.append(await there.read(nv.restore_source, page_id, first["id"], who("alice")))
        await there.read(nv.check_editable, page_id, who("alice"))
    await while_held(here, lambda: nv.checkpoint(page_id, who("alice"), "second", ADMINS), read_there)
    assert seen == [["first"], "first", "first"]
