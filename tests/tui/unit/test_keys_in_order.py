"""KeysInOrder (coordtui/typeahead.py) with a small app of its own, keys pressed with no pause between them as a
paste or a fast typist delivers them: a run of characters into a text field goes in one round trip, not one per
character, and still lands whole and in order; keys typed while a form opens land in the field it focuses."""
from __future__ import annotations

import asyncio

import pytest
import textual.app
from textual.app import App, ComposeResult
from textual.widgets import Input

from coordtui import typeahead
from coordtui.screens.form import Field, FormScreen
from coordtui.typeahead import KeysInOrder


class Typing(KeysInOrder):
    def __init__(self) -> None:
        super().__init__()
        self.markers = 0
        self.forms: list[object] = []

    def compose(self) -> ComposeResult:
        yield Input(id="first")
        yield Input(id="second")

    def _send_marker(self, target, rounds: int) -> None:
        self.markers += 1
        super()._send_marker(target, rounds)

    def on_key(self, event) -> None:
        if event.key == "f5":  # opens a form as an app's key does: its focus is set once it has mounted
            self.push_screen(FormScreen("Note", [Field("note", "Note"), Field("more", "More")]),
                             self.forms.append)


@pytest.fixture(autouse=True)
def keys_without_pause(monkeypatch):
    """No wait for idle between keys, and a field slow to take each key (a loaded machine): keys queue up."""
    async def no_pause(*_args, **_kwargs) -> None:
        await asyncio.sleep(0)
    monkeypatch.setattr(textual.app, "wait_for_idle", no_pause)
    original = Input._on_key

    async def slowed(self, event) -> None:
        await asyncio.sleep(0.002)
        await original(self, event)
    monkeypatch.setattr(Input, "_on_key", slowed)


async def settled(pilot, app: Typing) -> None:
    for _ in range(200):
        await pilot.pause(0.02)
        if not app._held_input and app._flight is None:
            return
    raise AssertionError("keys still held")


async def test_a_run_of_characters_goes_in_one_round_and_lands_whole():
    text = "".join(f"w{i:03d} " for i in range(100))  # 500 characters
    app = Typing()
    async with app.run_test() as pilot:
        await pilot.press(*text, "tab", *"after the tab")
        await settled(pilot, app)
        assert app.query_one("#first", Input).value == text
        assert app.query_one("#second", Input).value == "after the tab"
        assert app.markers < 60, f"{app.markers} round trips for {len(text) + 14} keys"


async def test_keys_typed_while_a_form_opens_land_in_its_field(monkeypatch):
    original = FormScreen.on_mount

    async def slow_mount(self) -> None:  # a loaded machine: the form takes a while to choose its field
        await asyncio.sleep(0.2)
        original(self)
    monkeypatch.setattr(FormScreen, "on_mount", slow_mount)
    app = Typing()
    async with app.run_test() as pilot:
        await pilot.press("f5", *"hold on", "tab", *"second field", "ctrl+s")
        await settled(pilot, app)
        assert app.forms == [{"note": "hold on", "more": "second field"}]


def test_a_read_only_text_area_takes_no_run():
    from textual import events
    from textual.widgets import TextArea
    key = events.Key("a", "a")
    assert typeahead.KeysInOrder._typed_into(Input(), key)
    assert not typeahead.KeysInOrder._typed_into(TextArea(read_only=True), key)
    assert not typeahead.KeysInOrder._typed_into(Input(), events.Key("enter", None))
