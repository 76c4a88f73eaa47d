"""domain/directory.py through the store, no HTTP (over HTTP: tests/server/api/test_directory.py): the list
(newest first, a search over title and description, paging over what the caller may see), what an entry
shows, and who may delete one. Fast: the mutation run of directory.py uses these."""
from __future__ import annotations

from datetime import timedelta

import pytest

from coordserver.domain import directory
from coordserver.errors import Forbidden, Invalid, NotFound
from coordserver.models import DirectoryEntry
from coordserver.timeutil import iso, to_db
from tests.server.domain.conftest import START


def run(store, fn, *args):
    return store.run_sync(fn, *args)


@pytest.fixture
def entries(rules_store):
    made = {}
    for title, description, creator, tagged in (("Handbook", "How we work", "ann", None),
                                                ("Runbook", "On-call HANDBOOK appendix", "ann", ["bob"]),
                                                ("Status", None, "bob", []), ("Secret", "x", "cat", ["dan"])):
        made[title] = run(rules_store, directory.create, creator, title, f"https://{title.lower()}.example",
                          description, tagged)
        rules_store.clock.advance(minutes=1)
    rules_store.made = made
    return rules_store


def titles(store, identity, is_admin=False, q=None, limit=10, offset=0) -> list[str]:
    return [e["title"] for e in run(store, directory.list_entries, identity, is_admin, q, limit, offset)]


def test_an_entry_shows_its_fields(entries):
    made = entries.made["Runbook"]
    assert made == {"id": made["id"], "title": "Runbook", "url": "https://runbook.example",
                    "description": "On-call HANDBOOK appendix", "createdBy": "ann", "createdByIsAgent": False,
                    "taggedUsers": ["bob"], "createdAt": iso(to_db(START + timedelta(minutes=1)))}
    assert entries.made["Status"]["taggedUsers"] is None  # [] is stored as no tags


def test_the_list_is_newest_first_and_shows_what_the_caller_may_see(entries):
    assert titles(entries, "bob") == ["Status", "Runbook", "Handbook"]
    assert titles(entries, "eve") == ["Status", "Handbook"]
    assert titles(entries, "cat") == ["Secret", "Status", "Handbook"]
    assert titles(entries, "eve", True) == ["Secret", "Status", "Runbook", "Handbook"]


def test_search_covers_title_and_description(entries):
    assert titles(entries, "bob", q="handbook") == ["Runbook", "Handbook"]
    assert titles(entries, "bob", q="Status") == ["Status"]
    assert titles(entries, "eve", q="handbook") == ["Handbook"]
    assert titles(entries, "bob", q="") == ["Status", "Runbook", "Handbook"]


def test_paging_counts_visible_entries_only(entries):
    assert titles(entries, "eve", True, limit=2) == ["Secret", "Status"]
    assert titles(entries, "eve", True, limit=2, offset=2) == ["Runbook", "Handbook"]
    assert titles(entries, "eve", limit=1, offset=1) == ["Handbook"]
    assert titles(entries, "eve", limit=1, offset=2) == []
    assert titles(entries, "bob", limit=0) == []


def test_the_list_is_by_creation_time_then_the_newer_id(rules_store):
    for title in ("one", "two", "three"):
        run(rules_store, directory.create, "ann", title, "https://x.example", None, None)
    assert titles(rules_store, "ann") == ["three", "two", "one"]
    rules_store.clock.advance(hours=-1)  # a clock stepped back: the new entry is the older one
    run(rules_store, directory.create, "ann", "stepped back", "https://x.example", None, None)
    assert titles(rules_store, "ann") == ["three", "two", "one", "stepped back"]


def test_the_creator_or_an_admin_deletes_and_others_cannot(entries):
    runbook, handbook = entries.made["Runbook"]["id"], entries.made["Handbook"]["id"]
    with pytest.raises(Forbidden) as refused:
        run(entries, directory.delete, "bob", False, runbook)
    assert refused.value.message == "Only the creator or an admin may delete this entry"
    for identity, entry_id in (("eve", runbook), ("eve", 99999)):
        with pytest.raises(NotFound) as missing:
            run(entries, directory.delete, identity, False, entry_id)
        assert missing.value.message == "Entry not found"
    assert run(entries, directory.delete, "ann", False, runbook) == {"success": True, "id": runbook}
    assert run(entries, directory.delete, "eve", True, handbook) == {"success": True, "id": handbook}
    secret = entries.made["Secret"]["id"]  # tagged for someone else: an admin sees and deletes it
    assert run(entries, directory.delete, "eve", True, secret) == {"success": True, "id": secret}
    assert run(entries, lambda: sorted(e.title for e in DirectoryEntry.select())) == ["Status"]


def stored(store, entry_id: int) -> dict:
    """An entry's row as stored, every column."""
    return run(store, lambda: DirectoryEntry.select().where(DirectoryEntry.id == entry_id).dicts().get())


def test_the_creator_or_an_admin_updates_the_fields_given_and_no_others(entries):
    runbook = entries.made["Runbook"]
    entries.clock.advance(minutes=5)
    updated = run(entries, directory.update, "ann", False, runbook["id"], {"title": "Runbook v2", "description": None})
    assert updated == {**runbook, "title": "Runbook v2", "description": None}  # createdAt and the rest as they were
    row = stored(entries, runbook["id"])
    assert iso(row.pop("created_at")) == runbook["createdAt"]
    assert row == {"id": runbook["id"], "title": "Runbook v2", "url": "https://runbook.example", "description": None,
                   "created_by": "ann", "tagged_users": ["bob"]}
    by_admin = run(entries, directory.update, "eve", True, runbook["id"],
                   {"url": "https://new.example/r", "taggedUsers": ["bob", "cat"]})
    assert by_admin == {**updated, "url": "https://new.example/r", "taggedUsers": ["bob", "cat"], "createdBy": "ann"}
    cleared = run(entries, directory.update, "ann", False, runbook["id"], {"taggedUsers": []})
    assert cleared["taggedUsers"] is None and stored(entries, runbook["id"])["tagged_users"] is None


def test_an_update_others_may_not_make_changes_nothing(entries):
    runbook, secret = entries.made["Runbook"], entries.made["Secret"]
    with pytest.raises(Forbidden) as refused:
        run(entries, directory.update, "bob", False, runbook["id"], {"title": "mine now"})
    assert refused.value.message == "Only the creator or an admin may edit this entry"
    for identity, entry_id in (("eve", runbook["id"]), ("bob", secret["id"]), ("ann", 99999)):
        with pytest.raises(NotFound) as missing:
            run(entries, directory.update, identity, False, entry_id, {"title": "x"})
        assert missing.value.message == "Entry not found"
    with pytest.raises(Invalid) as empty:
        run(entries, directory.update, "ann", False, runbook["id"], {})
    assert empty.value.message == "No fields to update"
    assert run(entries, directory.list_entries, "eve", True, None, 10, 0) == [
        entries.made[t] for t in ("Secret", "Status", "Runbook", "Handbook")]
