"""A screen's cursor starts where the screen says from its first moment (coordtui/screens/focus.py): keys typed as
it opens never land in another field first. The CI caught it: a refused token's connect screen, resumed with the
URL field focused, got the first letter of the new token in the URL until its `on_mount` focus arrived."""
from __future__ import annotations

import ast
import inspect
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest
import textual.widget
from textual.app import App
from textual.screen import Screen

import coordtui
from coordtui.config import Profile
from coordtui.ops.base import SecretScreen
from coordtui.screens.confirm import ConfirmScreen
from coordtui.screens.connect import ConnectScreen
from coordtui.screens.snooze import SnoozePicker
from tests.tui.helpers import wait_for

PROFILE = Profile("work", "http://127.0.0.1:1", "wrong-token")
NOW = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)


async def never_sent(_choice):
    raise AssertionError("nothing is snoozed here")

SCREENS = {
    "connect, first run": (lambda: ConnectScreen(), "url"),
    "connect, token refused": (lambda: ConnectScreen(PROFILE, "Refused by the server: Invalid key"), "token"),
    "confirm": (lambda: ConfirmScreen("Delete the page?", "Delete"), "no"),
    "snooze": (lambda: SnoozePicker("disk full", NOW, never_sent), "snooze-choices"),
    "secret": (lambda: SecretScreen("New token", "", [("Token", "abc")], once=True), "copy-0"),
}


@pytest.fixture
def late_focus(monkeypatch):
    """`Widget.focus()` as on a loaded machine where the App's queue delivers it after the keys typed meanwhile:
    here never, so only where the screen starts by itself counts."""
    monkeypatch.setattr(textual.widget.Widget, "focus", lambda self, scroll_visible=True: self)


@pytest.mark.parametrize("name", list(SCREENS))
async def test_a_screen_has_its_cursor_where_it_says_from_the_first_moment(late_focus, name):
    make, expected = SCREENS[name]
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = make()
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen and app.focused is not None, what=f"{name} focused")
        assert app.focused is not None and app.focused.id == expected


async def test_enter_typed_as_a_confirmation_opens_cancels(late_focus):
    """The destructive button comes first in the dialog: an enter typed ahead must meet Cancel, never it."""
    answers: list[bool | None] = []
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(ConfirmScreen("Delete the page?", "Delete"), answers.append)
        await pilot.press("enter")
        await wait_for(pilot, lambda: answers, what="an answer")
    assert answers == [False]


def screen_classes() -> list[type[Screen]]:
    """Every screen class coordtui defines (its modules imported)."""
    import importlib
    root = Path(coordtui.__file__).parent
    for path in sorted(root.rglob("*.py")):
        importlib.import_module(".".join(("coordtui", *path.relative_to(root).with_suffix("").parts))
                                .removesuffix(".__init__"))
    found: list[type[Screen]] = []
    stack = list(Screen.__subclasses__())
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("coordtui."):
            found.append(cls)
    return found


def focuses_in_on_mount(cls: type[Screen]) -> bool:
    on_mount = cls.__dict__.get("on_mount")
    if on_mount is None:
        return False
    tree = ast.parse(textwrap.dedent(inspect.getsource(on_mount)))
    return any(isinstance(node, ast.Attribute) and node.attr == "focus" for node in ast.walk(tree))


def test_no_screen_moves_its_cursor_from_on_mount_after_textuals_first_pick():
    """Where a screen starts is its AUTO_FOCUS (screens/focus.py): a `focus()` in `on_mount` arrives after keys typed
    as the screen opened, which went to Textual's first pick meanwhile. A screen may still choose in `on_mount` if
    it has Textual pick nothing (AUTO_FOCUS "", as FormScreen: typeahead.py holds the keys until a field has focus)."""
    classes = screen_classes()
    offenders = sorted(cls.__qualname__ for cls in classes if focuses_in_on_mount(cls) and cls.AUTO_FOCUS is None)
    assert len(classes) > 10 and any(focuses_in_on_mount(cls) for cls in classes)
    assert not offenders, f"screens focusing from on_mount after Textual's pick (use AUTO_FOCUS): {offenders}"
