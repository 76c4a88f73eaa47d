"""Notebook page rules through the store, no HTTP, on both backends: a page and its event whole, who may read,
list, change, lock, tag and archive it (refusals in their words, nothing written), how a content change is merged
into the stored CRDT document and announced, a room's save, relays of large updates, and read bases."""
from __future__ import annotations

import base64
from datetime import timedelta

import pytest

from coordserver.domain import notebook as nb
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.events.channels import NOTEBOOK
from coordserver.models import NotebookPage, NotebookPendingEditor, NotebookReadBase, NotebookRelay, NotebookVersion
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START, last_event_id, logged_after, while_held, who

ADMINS = frozenset({"admin"})
LATER_AT = START + timedelta(days=1)
LATER = iso(LATER_AT)


def create(store, identity: str = "alice", **fields):
    return store.write(nb.create_page, who(identity), {"title": "Page", **fields}, ADMINS)


def change(store, page_id: str, identity: str, merge_here: bool = True, base: bytes | None = None, **changes):
    async def run():
        result = await store.write(nb.update_page, page_id, who(identity), changes, ADMINS, merge_here, base)
        return result["change"], result["merge"], nb.page_json(result["page"])
    return run()


def stored(page_id: str) -> dict:
    return nb.page_json(NotebookPage.get_by_id(page_id))


def on_bus(store, page_id: str) -> list[dict]:
    return [payload for channel, payload in store.published if channel == NOTEBOOK.of(page_id)]


def editors(page_id: str) -> list[str]:
    return sorted(e.identity for e in NotebookPendingEditor.select().where(NotebookPendingEditor.page_id == page_id))


async def refused(kind, message: str, call) -> None:
    with pytest.raises(kind) as error:
        await call
    assert error.value.message == message


async def test_a_page_its_event_and_first_version_read_whole(store):
    after = last_event_id()
    made = await create(store, content="hello", taggedUsers=["bob", "bob", "carol"], tags=[" a ", "b", "a", " "],
                        expiresAt=None, reviewAt=LATER_AT)
    assert made == {"id": made["id"], "title": "Page", "content": "hello", "createdBy": "alice",
                    "taggedUsers": ["bob", "carol"], "tags": ["a", "b"], "expiresAt": None, "reviewAt": LATER,
                    "locked": False, "lockedBy": None, "archivedAt": None, "createdAt": iso(START),
                    "updatedAt": iso(START)}
    [(kind, data, to), (version_kind, version, _)] = await store.read(logged_after, after)
    expiring = await create(store, expiresAt=LATER_AT)
    assert (expiring["expiresAt"], expiring["reviewAt"]) == (LATER, None)
    assert await store.read(lambda: nb.page_json(nb.get_page(expiring["id"], who("alice")))) == expiring
    assert (kind, data, to) == ("notebook_page_updated", {
        "type": "notebook_page_updated", "pageId": made["id"], "title": "Page", "updatedBy": "alice",
        "updatedAt": iso(START), "change": "meta"}, ["admin", "alice", "bob", "carol"])
    assert (version_kind, version["reason"]) == ("notebook_version", "created")
    live = await store.read(lambda: nb.page_json(NotebookPage.get_by_id(made["id"]), "the live text"))
    assert live == {**made, "content": "the live text"}
    state, meta = await store.read(nb.stored_document, made["id"])
    assert nb.document_text(nb.load_document(state)) == "hello"
    assert meta == {"createdBy": "alice", "taggedUsers": ["bob", "carol"], "locked": False, "lockedBy": None,
                    "archived": False}
    bare = await create(store, tags=[" "], taggedUsers=[])
    assert (bare["content"], bare["tags"], bare["taggedUsers"]) == ("", None, None)
    assert [entry[2] for entry in await store.read(logged_after, after)][2] is None  # an untagged page: everyone
    assert await store.read(lambda: NotebookVersion.select().where(NotebookVersion.page_id == bare["id"]).count()) == 1


async def test_who_may_read_a_page(store):
    made = await create(store, taggedUsers=["bob"])
    for identity in ("alice", "bob", "admin"):
        assert (await store.read(nb.get_page, made["id"], who(identity))).id == made["id"]
    await refused(Forbidden, "Forbidden", store.read(nb.get_page, made["id"], who("carol")))
    await refused(NotFound, "Not found", store.read(nb.get_page, "nope", who("admin")))
    await refused(Forbidden, "Forbidden", store.write(nb.update_page, made["id"], who("carol"), {"title": "x"},
                                                      ADMINS, True))
    await refused(NotFound, "Not found", store.write(nb.archive_page, "nope", who("alice"), ADMINS))
    assert await store.read(stored, made["id"]) == made


async def test_the_list_is_newest_first_visible_unarchived_and_searched(store):
    hidden = await create(store, "alice", taggedUsers=["bob"], content="Zebra notes")
    store.clock.advance(seconds=1)
    first = await create(store, "carol", content="about ÄPFEL and zebras")
    store.clock.advance(seconds=1)
    archived = await create(store, "carol", content="zebra")
    await store.write(nb.archive_page, archived["id"], who("carol"), ADMINS)
    store.clock.advance(seconds=1)
    second = await create(store, "carol", content="plain", title="A ZEBRA title")
    store.clock.advance(seconds=1)
    newest_hidden = await create(store, "alice", taggedUsers=["bob"], content="zebra too")

    async def ids(identity: str, q: str | None = None, limit: int = 10, offset: int = 0) -> list[str]:
        rows = await store.read(nb.list_pages, who(identity), q, limit, offset)
        return [row["id"] for row in rows]
    assert await ids("carol") == [second["id"], first["id"]]
    assert await ids("alice") == [newest_hidden["id"], second["id"], first["id"], hidden["id"]]
    assert await ids("bob") == [newest_hidden["id"], second["id"], first["id"], hidden["id"]]
    assert await ids("admin", "zebra") == [newest_hidden["id"], second["id"], first["id"], hidden["id"]]
    assert await ids("bob", "zebra", 1, 2) == [first["id"]]
    assert await ids("bob", None, 10, 3) == [hidden["id"]]
    assert await ids("bob", "zebra", 2) == [newest_hidden["id"], second["id"]]
    assert await ids("bob", "äpfel") == [first["id"]]  # beyond ASCII: case folded here, not in SQL
    assert await ids("bob", "ns\\x") == []
    assert await ids("bob", "") == [newest_hidden["id"], second["id"], first["id"], hidden["id"]]
    slash = await create(store, "carol", content="C:\\data\\")
    assert await ids("carol", "DATA\\") == [slash["id"]]  # a backslash is no SQL pattern text: matched here
    [row] = await store.read(nb.list_pages, who("carol"), "plain", 10, 0)
    assert row == {key: value for key, value in second.items() if key not in ("content", "archivedAt")}


async def test_pages_changed_at_one_instant_are_listed_by_id(store):
    made = [(await create(store, content=f"page {n}"))["id"] for n in range(6)]
    assert [row["id"] for row in await store.read(nb.list_pages, who("bob"), None, 10, 0)] == sorted(made)


async def test_meta_changes_read_whole_and_a_change_to_nothing_writes_nothing(store):
    made = await create(store, taggedUsers=["bob"])
    store.clock.advance(minutes=1)
    after = last_event_id()
    assert await change(store, made["id"], "alice", title="Renamed", tags=["x", " x "], expiresAt=LATER_AT,
                        reviewAt=LATER_AT, taggedUsers=["bob", "carol", "bob"]) == ("meta", None, {
        **made, "title": "Renamed", "tags": ["x"], "expiresAt": LATER, "reviewAt": LATER,
        "taggedUsers": ["bob", "carol"], "updatedAt": iso(START + timedelta(minutes=1))})
    [(_kind, data, to)] = await store.read(logged_after, after)
    assert (data["change"], data["title"], data["updatedBy"], to) == ("meta", "Renamed", "alice",
                                                                     ["admin", "alice", "bob", "carol"])
    assert on_bus(store, made["id"])[-1] == {"kind": "meta", "origin": None, "createdBy": "alice",
                                             "taggedUsers": ["bob", "carol"], "locked": False, "lockedBy": None,
                                             "archived": False}
    now = await store.read(stored, made["id"])
    store.clock.advance(minutes=1)
    after = last_event_id()
    same = dict(title="Renamed", tags=["x"], expiresAt=LATER_AT, reviewAt=LATER_AT, taggedUsers=["bob", "carol"],
                locked=False)
    assert await change(store, made["id"], "bob", **same) == (None, None, now)
    assert await change(store, made["id"], "bob", content="", merge_here=False) == (None, "", now)
    assert await store.read(logged_after, after) == [] and await store.read(stored, made["id"]) == now
    assert await change(store, made["id"], "bob", tags=[], expiresAt=None) == ("meta", None, {
        **now, "tags": None, "expiresAt": None, "updatedAt": iso(START + timedelta(minutes=2))})


async def test_only_the_owner_locks_tags_or_archives_and_a_locked_page_refuses_others(store):
    made = await create(store, taggedUsers=["bob"])
    owner_only = "Only the page owner may change locked or taggedUsers"
    for changes, message in (({"locked": True}, owner_only), ({"taggedUsers": ["bob", "carol"]}, owner_only),
                             ({"archived": True}, "Only the page owner may archive it")):
        await refused(Forbidden, message, change(store, made["id"], "bob", **changes))
    await refused(Forbidden, "Only the page owner may archive it", store.write(nb.archive_page, made["id"], who("bob"),
                                                                              ADMINS))
    assert await store.read(stored, made["id"]) == made
    locked = await change(store, made["id"], "alice", locked=True, title="Locked")
    assert locked[0] == "lock" and (locked[2]["locked"], locked[2]["lockedBy"], locked[2]["title"]) == (
        True, "alice", "Locked")
    await refused(Forbidden, "Page is locked", change(store, made["id"], "bob", title="Mine"))
    assert (await change(store, made["id"], "bob"))[0] is None  # nothing asked: nothing refused
    by_admin = await change(store, made["id"], "admin", locked=False, content="admin's")
    assert (by_admin[0], by_admin[2]["locked"], by_admin[2]["lockedBy"], by_admin[2]["content"]) == (
        "lock", False, None, "admin's")
    assert (await change(store, made["id"], "bob", content="bob's"))[0] == "content"


async def test_an_archived_page_refuses_every_change_but_its_owners_unarchive(store):
    made = await create(store, content="text")
    store.clock.advance(minutes=1)
    archived = await change(store, made["id"], "alice", archived=True, title="ignored")
    assert archived == ("archive", None, {**made, "archivedAt": iso(START + timedelta(minutes=1)),
                                          "updatedAt": iso(START + timedelta(minutes=1))})
    after = last_event_id()
    await store.write(nb.archive_page, made["id"], who("alice"), ADMINS)  # already archived: nothing more
    assert await store.read(logged_after, after) == []
    for identity, changes in (("bob", {"archived": False}), ("alice", {"archived": False, "title": "x"}),
                              ("alice", {"title": "x"})):
        await refused(Forbidden, "Page is archived", change(store, made["id"], identity, **changes))
    assert on_bus(store, made["id"])[-1]["archived"] is True
    store.clock.advance(minutes=1)
    restored = await change(store, made["id"], "alice", archived=False)
    assert restored == ("archive", None, {**made, "updatedAt": iso(START + timedelta(minutes=2))})
    assert [data["change"] for _k, data, _to in await store.read(logged_after, after)] == ["archive"]
    after = last_event_id()
    await store.write(nb.archive_page, made["id"], who("admin"), ADMINS)
    assert (await store.read(stored, made["id"]))["archivedAt"] == iso(START + timedelta(minutes=2))
    tagged = await create(store, taggedUsers=["bob"])
    await store.write(nb.archive_page, tagged["id"], who("alice"), ADMINS)
    await change(store, tagged["id"], "alice", archived=False)
    await change(store, tagged["id"], "alice", archived=True)
    assert [(data["change"], data["updatedBy"], to) for kind, data, to in await store.read(logged_after, after)
            if kind == "notebook_page_updated"] == [
        ("archive", "admin", None), ("meta", "alice", ["admin", "alice", "bob"])] + [
        ("archive", "alice", ["admin", "alice", "bob"])] * 3


async def test_a_content_change_is_merged_into_the_stored_document_and_announced(store):
    made = await create(store, content="one two three")
    after = last_event_id()
    merged = await change(store, made["id"], "bob", content="one 2 three")
    assert merged == ("content", None, {**made, "content": "one 2 three"})
    assert await store.read(editors, made["id"]) == ["bob"]
    [update] = [p for p in on_bus(store, made["id"]) if p["kind"] == "update"]
    assert (update["origin"], sorted(update)) == (None, ["kind", "origin", "update"])
    state = await store.read(nb.stored_state, made["id"])
    assert nb.document_text(nb.load_document(state)) == "one 2 three"
    [(_kind, data, _to)] = await store.read(logged_after, after)
    assert (data["change"], data["updatedBy"]) == ("content", "bob")
    assert (await change(store, made["id"], "carol", content="one 2 three"))[0] is None  # the same text
    # A writer who read "one two three" and wrote "one two 3": the others' edit since is kept.
    await store.write(lambda: NotebookPage.update(ydoc=nb.new_document("one two three").get_update(),
                                                  content="one two three")
                      .where(NotebookPage.id == made["id"]).execute())
    original = await store.read(nb.stored_state, made["id"])
    doc = nb.load_document(original)
    nb.merge_text(doc, "zero one two three")
    await store.write(lambda: NotebookPage.update(ydoc=doc.get_update(), content="zero one two three")
                      .where(NotebookPage.id == made["id"]).execute())
    assert (await change(store, made["id"], "dave", content="one two 3", base=original))[2]["content"] == \
        "zero one two 3"
    large = "x" * 6000  # its update is too large for a bus notification: sent by relay
    assert (await change(store, made["id"], "dave", content=large))[2]["content"] == large
    relayed = [p for p in on_bus(store, made["id"]) if p["kind"] == "update"][-1]
    assert sorted(relayed) == ["kind", "origin", "relay"]
    assert nb.has_content(await store.read(nb.load_relay, relayed["relay"]))
    live = await change(store, made["id"], "carol", content="in the room", merge_here=False)
    assert (live[0], live[1], live[2]["content"]) == ("content", "in the room", large)


async def test_a_page_without_a_document_gets_one_once(store):
    def legacy() -> str:
        return NotebookPage.create(title="Old", content="old text", created_by="alice", created_at=to_db(START),
                                   updated_at=to_db(START)).id
    page_id = await store.write(legacy)
    assert await store.read(nb.stored_state, page_id) is None
    assert await store.read(nb.stored_state, "nope") is None and await store.read(nb.stored_document, "nope") is None
    state, meta = await store.write(nb.stored_document, page_id)
    assert nb.document_text(nb.load_document(state)) == "old text" and meta["createdBy"] == "alice"
    assert await store.read(nb.stored_state, page_id) == state
    assert (await store.write(nb.stored_document, page_id))[0] == state
    other = await store.write(legacy)
    assert await store.read(nb.stored_state, other) is None  # only the page asked for got its document
    room = nb.new_document("from a room")
    assert await store.write(nb.save_document, other, room.get_update(), room.get_state(), ["bob"], ADMINS) is None
    assert nb.document_text(nb.load_document(await store.read(nb.stored_state, other))) == "from a room"
    other = await store.write(legacy)
    assert (await change(store, other, "bob", content="old text, edited"))[2]["content"] == "old text, edited"
    other = await store.write(legacy)  # a base read elsewhere means nothing to a page without a document
    assert (await change(store, other, "bob", base=nb.new_document("old text").get_update(),
                         content="old text, edited"))[2]["content"] == "old text, edited"


async def test_a_rooms_save_merges_names_its_editors_and_tells_what_the_room_lacked(store):
    made = await create(store, content="base", taggedUsers=["bob"])
    stored_doc = nb.load_document(await store.read(nb.stored_state, made["id"]))
    room = nb.load_document(stored_doc.get_update())
    nb.merge_text(stored_doc, "base, stored")  # saved by another process since the room loaded
    await store.write(lambda: NotebookPage.update(ydoc=stored_doc.get_update(), content="base, stored")
                      .where(NotebookPage.id == made["id"]).execute())
    nb.merge_text(room, "the base")
    store.clock.advance(minutes=1)
    after = last_event_id()
    missing = await store.write(nb.save_document, made["id"], room.get_update(), room.get_state(), ["carol", "bob"],
                                ADMINS)
    room.apply_update(missing)
    page = await store.read(stored, made["id"])
    assert (page["content"], page["updatedAt"]) == (nb.document_text(room), iso(START + timedelta(minutes=1)))
    assert page["content"] == "the base, stored"
    assert nb.document_text(nb.load_document(await store.read(nb.stored_state, made["id"]))) == "the base, stored"
    [(_kind, data, to)] = await store.read(logged_after, after)
    assert (data["change"], data["updatedBy"], to) == ("content", "bob", ["admin", "alice", "bob"])
    assert await store.read(editors, made["id"]) == ["bob", "carol"]
    store.clock.advance(minutes=1)
    after = last_event_id()
    assert await store.write(nb.save_document, made["id"], room.get_update(), room.get_state(), ["dave"],
                             ADMINS) is None  # nothing new either way
    assert await store.read(logged_after, after) == []
    assert (await store.read(stored, made["id"]))["updatedAt"] == iso(START + timedelta(minutes=1))
    assert await store.read(editors, made["id"]) == ["bob", "carol", "dave"]
    assert await store.write(nb.save_document, "nope", b"", b"", ["x"], ADMINS) is None


async def test_a_large_update_travels_by_relay_for_ten_minutes(store):
    small = await store.write(nb.bus_update, "p", b"x" * 3750, "bob")  # 5000 base64 bytes: inline
    assert small == {"kind": "update", "origin": "bob", "update": base64.b64encode(b"x" * 3750).decode()}
    large = await store.write(nb.bus_update, "p", b"y" * 3751, None)
    assert sorted(large) == ["kind", "origin", "relay"] and (large["kind"], large["origin"]) == ("update", None)
    assert await store.read(nb.load_relay, large["relay"]) == b"y" * 3751
    assert await store.read(nb.load_relay, large["relay"] + 1) is None
    made = await create(store)
    room = nb.load_document(await store.read(nb.stored_state, made["id"]))
    store.clock.advance(minutes=10)
    await store.write(nb.save_document, made["id"], room.get_update(), room.get_state(), [], ADMINS)
    assert await store.read(nb.load_relay, large["relay"]) == b"y" * 3751  # exactly ten minutes old: kept
    store.clock.advance(seconds=1)
    await store.write(nb.save_document, made["id"], room.get_update(), room.get_state(), [], ADMINS)
    assert await store.read(nb.load_relay, large["relay"]) is None
    assert await store.read(lambda: NotebookRelay.select().count()) == 0


async def test_a_read_base_is_each_readers_own_and_kept_a_day(store):
    await store.write(nb.remember_read, "p", "bob", b"one")
    await store.write(nb.remember_read, "p", "carol", b"carol's")
    await store.write(nb.remember_read, "q", "bob", b"other page")
    store.clock.advance(hours=1)
    await store.write(nb.remember_read, "p", "bob", b"two")
    assert [await store.read(nb.read_base, p, i) for p, i in (("p", "bob"), ("p", "carol"), ("q", "bob"), ("q", "x"))] \
        == [b"two", b"carol's", b"other page", None]
    store.clock.advance(hours=23)
    await store.write(nb.remember_read, "r", "dave", b"r")  # carol's and q's: exactly a day old, kept
    assert await store.read(nb.read_base, "p", "carol") == b"carol's"
    store.clock.advance(seconds=1)
    await store.write(nb.remember_read, "r", "dave", b"r")
    assert [await store.read(nb.read_base, p, i) for p, i in (("p", "bob"), ("p", "carol"), ("q", "bob"))] == [
        b"two", None, None]
    assert await store.read(lambda: NotebookReadBase.select().count()) == 2


def test_text_merges_keep_others_edits_and_count_code_points():
    assert [nb.byte_offset("aé😀b", i) for i in range(5)] == [0, 1, 3, 7, 8]
    doc = nb.new_document("héllo wörld")
    assert nb.merge_text(doc, "héllo wörld") is None
    update = nb.merge_text(doc, "héllo, big wörld 😀")
    assert nb.document_text(doc) == "héllo, big wörld 😀"
    replica = nb.new_document("")
    assert nb.document_text(nb.load_document(None)) == "" and nb.document_text(replica) == ""
    assert nb.merge_text(doc, "hullo wörld!") and nb.document_text(doc) == "hullo wörld!"
    assert update and nb.has_content(update) and not nb.has_content(b"\x00\x00") and not nb.has_content(b"")
    base = nb.new_document("abc def ghi")
    theirs = nb.load_document(base.get_update())
    nb.merge_text(theirs, "ABC def ghi")
    assert nb.merge_text_from(theirs, base.get_update(), "abc def GHI") is not None
    assert nb.document_text(theirs) == "ABC def GHI"
    assert nb.merge_text_from(theirs, base.get_update(), "abc def ghi") is None
    assert nb.merge_text_from(theirs, None, "ABC") and nb.document_text(theirs) == "ABC"
    assert nb._opcodes("abcXdef", "abcYYdef") == [("replace", 3, 4, 3, 5)]
    assert nb._opcodes("aaa", "aaaa") == [("insert", 3, 3, 3, 4)]
    assert nb._opcodes("abab", "ab") == [("delete", 2, 4, 2, 2)]
    assert nb._opcodes("xaby", "xy") == [("delete", 1, 3, 1, 1)]
    long_old, long_new = "x" + "ab" * 150 + "y", "z" + "ab" * 150 + "w"  # no junk heuristics on long texts
    assert nb._opcodes(long_old, long_new) == [("replace", 0, 1, 0, 1), ("replace", 301, 302, 301, 302)]
    for old, new in (("ab", "aa"), ("a", "bab"), ("abc", "bc"), ("abc", "ab")):
        merged = nb.new_document(old)
        nb.merge_text(merged, new)
        assert nb.document_text(merged) == new


def test_a_merge_update_carries_only_the_change_made_under_its_origin():
    doc = nb.new_document("shared text")
    replica = nb.load_document(doc.get_update())
    origins: list = []
    text = doc.get(nb.TEXT_NAME, type=nb.Text)
    subscription = text.observe(lambda event: origins.append(event.transaction.origin))
    update = nb.merge_text(doc, "shared, edited text", origin="room")
    assert origins == ["room"]
    text.unobserve(subscription)
    replica.apply_update(update)
    assert nb.document_text(replica) == "shared, edited text"
    stranger = nb.load_document(None)
    stranger.apply_update(update)  # without the text it edits, the change alone shows nothing
    assert nb.document_text(stranger) == ""


def test_a_title_is_required_and_cut_to_255():
    assert nb.require_title("x" * 300) == "x" * 255 and nb.require_title(" t ") == " t "
    for value in (None, "  ", 5):
        with pytest.raises(Invalid) as refused:
            nb.require_title(value)
        assert refused.value.message == "title is required"


# --- two processes at once (PostgreSQL: two stores on one database) ---------------------------

async def test_two_changes_of_one_page_at_once_both_count(two_stores):
    """A change holds the page row: the other process's PATCH, archive or room save waits for it and merges
    into what it stored, never over it."""
    here, there = two_stores
    made = await create(here, content="one two three")
    base = await here.read(nb.stored_state, made["id"])
    await while_held(here, lambda: nb.update_page(made["id"], who("alice"), {"content": "ONE two three"}, ADMINS,
                                                  True, base),
                     lambda: there.write(nb.update_page, made["id"], who("bob"), {"content": "one two THREE"}, ADMINS,
                                         True, base))
    assert (await here.read(stored, made["id"]))["content"] == "ONE two THREE"
    room = nb.load_document(base)
    nb.merge_text(room, "one and two three")
    await while_held(here, lambda: nb.update_page(made["id"], who("alice"), {"content": "zero ONE two THREE"}, ADMINS,
                                                  True, None),
                     lambda: there.write(nb.save_document, made["id"], room.get_update(), room.get_state(), ["bob"],
                                         ADMINS))
    assert (await here.read(stored, made["id"]))["content"] == "zero ONE and two THREE"
    after = last_event_id()
    await while_held(here, lambda: nb.archive_page(made["id"], who("alice"), ADMINS),
                     lambda: there.write(nb.archive_page, made["id"], who("alice"), ADMINS))
    assert [data["change"] for _k, data, _to in await here.read(logged_after, after)] == ["archive"]


async def test_reading_a_page_never_waits_for_a_writer(two_stores):
    here, there = two_stores
    made = await create(here, content="before")
    seen: list = []

    async def read_there():
        seen.append((await there.read(nb.get_page, made["id"], who("bob"))).content)
    await while_held(here, lambda: nb.update_page(made["id"], who("alice"), {"content": "after"}, ADMINS, True),
                     read_there)
    assert seen == ["before"]


async def test_two_first_loads_of_a_page_without_a_document_agree_on_one(two_stores):
    """Each process builds a document for a page saved before it had one; the conditional update lets only the
    first be stored, and the other answers with that one."""
    here, there = two_stores

    def legacy() -> str:
        return NotebookPage.create(title="Old", content="old text", created_by="alice", created_at=to_db(START),
                                   updated_at=to_db(START)).id
    page_id = await here.write(legacy)
    theirs: list = []

    async def load_there():
        theirs.append(await there.write(nb.stored_document, page_id))
    mine = await while_held(here, lambda: nb.stored_document(page_id), load_there)
    assert theirs[0][0] == mine[0] == await here.read(nb.stored_state, page_id)
    assert theirs[0][1] == mine[1]
