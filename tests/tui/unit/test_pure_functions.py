"""The client's pure functions, without a server or a screen: CRDT deltas to code-point edits, the task
state table, lenient time parsing and ages, chat items built for older servers."""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest
from pycrdt import Doc, Text

from coordserver.domain.task_rules import TRANSITIONS
from coordserver import timeutil
from coordtui.client.models import Channel, Wake, WakeItem, age_text, parse_time
from coordtui.client.notebook import TextChange, byte_offset, delta_to_changes
from coordtui.client.transitions import ALLOWED, BACKWARD, FORWARD, allowed_moves, step
from coordtui.unread import chat_items, with_chat

ALPHABET = "ab ß é 🎉 中\n"


def apply(text: str, changes: list[TextChange]) -> str:
    for change in changes:
        if change.kind == "insert":
            text = text[:change.index] + change.text + text[change.index:]
        else:
            text = text[:change.index] + text[change.index + change.length:]
    return text


def test_random_remote_edits_become_code_point_changes_that_rebuild_the_text():
    """pycrdt reports UTF-8 byte counts; the editor needs code points. For any edit of multi-byte text the
    changes, applied in order, turn the old text into the new one, and the returned text agrees."""
    rng = random.Random(7)
    doc = Doc()
    text = doc.get("content", type=Text)
    shadow = {"value": ""}
    seen: list[tuple[str, list[TextChange], str]] = []

    def observe(event):
        before = shadow["value"]
        changes, after = delta_to_changes(before, event.delta)
        seen.append((before, changes, after))
        shadow["value"] = after

    text.observe(observe)
    for _ in range(300):
        current = str(text)
        if current and rng.random() < 0.4:
            start = rng.randrange(len(current))
            end = min(len(current), start + rng.randint(1, 4))
            del text[byte_offset(current, start):byte_offset(current, end)]
        else:
            at = rng.randint(0, len(current))
            text.insert(byte_offset(current, at), "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 3))))
        before, changes, after = seen[-1]
        assert after == str(text)
        assert apply(before, changes) == after
    assert len(seen) == 300


def test_byte_offset_counts_utf8_bytes_of_the_prefix():
    assert byte_offset("aé🎉b", 0) == 0
    assert byte_offset("aé🎉b", 2) == 3
    assert byte_offset("aé🎉b", 3) == 7
    assert byte_offset("aé🎉b", 99) == len("aé🎉b".encode())


def test_the_client_state_table_is_the_servers():
    """The move dialog offers only what the server allows; a drift here would offer refused moves."""
    assert {status: set(moves) for status, moves in ALLOWED.items()} == \
        {status: set(moves) for status, moves in TRANSITIONS.items()}


@pytest.mark.parametrize("status", sorted(ALLOWED))
def test_every_step_along_the_path_is_an_allowed_move(status):
    for table in (FORWARD, BACKWARD):
        if status in table:
            assert table[status] in ALLOWED[status]
    assert step(status, 1) == FORWARD.get(status) and step(status, -1) == BACKWARD.get(status)


def test_the_servers_409_list_wins_and_an_unknown_status_offers_everything():
    assert allowed_moves("ready", ["holding"]) == ("holding",)
    assert allowed_moves("ready") == ALLOWED["ready"]
    assert set(allowed_moves("archived_by_a_newer_server")) == set(ALLOWED)


@pytest.mark.parametrize("raw", ["2026-02-17T12:00:00Z", "2026-02-17T12:00:00+00:00", "2026-02-17 12:00:00+00",
                                 "2026-02-17T13:00:00+01:00", "2026-02-17T12:00:00", "2026-02-17 12:00:00.000z"])
def test_times_in_every_spelling_servers_send_parse_to_the_same_utc_instant(raw):
    assert parse_time(raw) == datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("raw", [None, "", "  ", "yesterday", 1700000000, "2026-13-40T00:00:00Z"])
def test_what_is_not_a_time_is_none_not_an_error(raw):
    assert parse_time(raw) is None


@pytest.mark.parametrize("delta, text", [
    (timedelta(seconds=59), "0m"), (timedelta(minutes=5), "5m"), (timedelta(hours=2), "2h"),
    (timedelta(hours=2, minutes=7), "2h 7m"), (timedelta(days=3), "3d"), (timedelta(days=3, hours=4), "3d 4h"),
    (timedelta(seconds=-30), "0m"),  # a clock a little ahead of ours never shows a negative age
])
def test_ages_show_the_two_largest_units(delta, text):
    now = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)
    assert age_text(now - delta, now) == text
    assert age_text(None, now) == ""



def test_the_clients_ages_read_as_the_servers():
    """coordtui keeps its own copy of the age rule (it reaches coordserver only through embedded.py, and runs
    against remote servers): an age it computes beside one the server sent must read the same."""
    now = datetime(2026, 2, 17, 12, 0, tzinfo=timezone.utc)
    for seconds in [*range(0, 7300, 29), *range(86000, 3 * 86400, 3599), -45]:
        then = now - timedelta(seconds=seconds)
        assert age_text(then, now) == timeutil.age_text(timeutil.to_db(then), now), seconds

def channel(id_: str, unread: int, members=("me", "bob"), type_="dm", name=None, body="hi") -> Channel:
    return Channel(id_, type_, name, list(members), unread, body, None)


def test_chat_items_for_an_older_server_name_each_unread_channel_once():
    items = chat_items([channel("c1", 2), channel("c2", 0), channel("c3", 1, ("me", "ann", "bob"), "group", "ops")],
                       "me")
    assert [(i.id, i.source) for i in items] == [("c1", "chat"), ("c3", "chat")]
    assert items[0].summary == '@bob: 2 unread messages — latest: "hi"'
    assert items[1].summary.startswith("#ops: 1 unread message")


def test_the_servers_own_chat_items_are_never_doubled():
    server_item = WakeItem(source="chat", id="c1", summary="DM with bob", action="", priority="normal", age="")
    wake = Wake([server_item], "1 waiting", "", None)
    assert with_chat(wake, [channel("c1", 2)], "me") is wake
    older = Wake([], "", "", None)
    assert [i.id for i in with_chat(older, [channel("c1", 2)], "me").items] == ["c1"]
    assert with_chat(older, None, "me") is older


def test_wake_names_kinds_in_words_never_the_servers_source_names():
    from coordtui.panes.wake import SOURCE_ORDER, SOURCE_WORDS, need_words
    assert set(SOURCE_ORDER) <= set(SOURCE_WORDS), "every kind Wake lists has words for it"
    assert need_words(("message", "message_pending", "buzz", "alert", "alert_acked")) == "a message or an alert"
    assert need_words(("swarm",)) == "a task"
    assert all("_" not in words for words in SOURCE_WORDS.values())


def test_every_status_reads_as_words_in_forms_and_on_the_board():
    from coordtui.client.transitions import ALLOWED, STATUS_WORDS
    from coordtui.panes.swarm import BOARD
    assert set(BOARD) == set(ALLOWED) == set(STATUS_WORDS)
    assert STATUS_WORDS["in_progress"] == "In progress" and all("_" not in w for w in STATUS_WORDS.values())


def test_a_terminal_browser_is_no_browser_to_open_links_with(monkeypatch):
    """Where Python finds only lynx, w3m or elinks (a machine without a display), opening a link would run it in
    the terminal coordtui draws in: the address is copied instead. A graphical one, or one named in $BROWSER,
    is used."""
    import webbrowser

    from coordtui.screens.page_links import browser_available
    monkeypatch.delenv("BROWSER", raising=False)
    for found, usable in ((webbrowser.GenericBrowser("lynx"), False), (webbrowser.Elinks("elinks"), False),
                          (webbrowser.BackgroundBrowser("xdg-open"), True), (webbrowser.Chrome("chrome"), True)):
        monkeypatch.setattr(webbrowser, "get", lambda using=None, found=found: found)
        assert browser_available() is usable, found
    monkeypatch.setenv("BROWSER", "w3m")
    monkeypatch.setattr(webbrowser, "get", lambda using=None: webbrowser.GenericBrowser("w3m"))
    assert browser_available()

    def none(using=None):
        raise webbrowser.Error("could not locate runnable browser")
    monkeypatch.setattr(webbrowser, "get", none)
    assert not browser_available()
