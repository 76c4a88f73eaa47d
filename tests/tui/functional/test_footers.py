"""Issue 24: the bottom row keeps `? Help`, the quit key and each pane's main keys in view, at 80x24 and at
120x35. A pane's main keys are its bindings with show=True (the others are listed by help, `?`): each pane
declares few enough of them to fit, and this test holds every pane to it."""
from __future__ import annotations

import pytest
from textual.binding import Binding

from coordtui.panes.base import ADMIN_OPS
from coordtui.panes.catalog import PANES
from tests.tui.helpers import make_app, screen_lines, wait_for, wait_idle


def admins_only(binding: Binding) -> bool:
    return any(binding.action == f"ops('{name}')" for name in ADMIN_OPS)


def main_keys(app, pane_cls, admin: bool = False) -> list[str]:
    """"key Description" for each show=True binding of the pane (its class's first, one per key), the admins'
    keys for admins only."""
    seen: dict[str, Binding] = {}
    for cls in pane_cls.__mro__:
        for binding in cls.__dict__.get("BINDINGS", []):
            if (isinstance(binding, Binding) and binding.show and binding.key not in seen
                    and (admin or not admins_only(binding))):
                seen[binding.key] = binding
    return [f"{app.get_key_display(binding)} {binding.description}" for binding in seen.values()]


@pytest.mark.parametrize("size", [(80, 24), (120, 35)], ids=["80x24", "120x35"])
async def test_every_pane_keeps_help_quit_and_its_main_keys_in_view(server, size):
    app = make_app(server, "alice")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
        for spec in PANES:
            await pilot.press(spec.key)
            await wait_idle(pilot, app)
            expected = ["? Help", "^q Quit"] + main_keys(app, spec.cls)
            await wait_for(pilot, lambda: all(f" {key} " in screen_lines(app)[-1] for key in expected),
                           timeout=3, what=lambda: f"{spec.title} at {size}: {expected} in {screen_lines(app)[-1]!r}")
            assert len(main_keys(app, spec.cls, admin=True)) >= 2, f"{spec.title} declares its main keys"


async def test_the_admins_keys_are_shown_and_bound_for_admins_only(server):
    """Doctor's t (tokens), i (invites) and U (users), Who's U: an admin sees and uses them; anyone else neither
    sees them in the bottom row nor opens anything with them."""
    for who, admin in (("alice", False), ("admin", True)):
        app = make_app(server, who)
        async with app.run_test(size=(120, 35)) as pilot:
            await wait_for(pilot, lambda: app.conn_state == "connected", what="connected")
            await pilot.press(next(spec.key for spec in PANES if spec.id == "doctor"))
            await wait_idle(pilot, app)
            await wait_for(pilot, lambda: (" t Tokens " in screen_lines(app)[-1]) == admin
                           and " ? Help " in screen_lines(app)[-1], timeout=3,
                           what=lambda: f"{who}: {screen_lines(app)[-1]!r}")
            assert (" U Users " in screen_lines(app)[-1]) == admin
            screens = len(app.screen_stack)
            await pilot.press("t")
            await wait_idle(pilot, app)
            assert (len(app.screen_stack) > screens) == admin, f"{who}: t opened {app.screen!r}"


async def test_a_rebuild_asked_for_after_the_screen_went_away_does_nothing():
    """Textual asks the footer to rebuild after a refresh; escape pressed right after a list opened removed the
    screen first, and asking the removed footer for its keys raised NoScreen (test_column_widths failed so)."""
    from textual.app import App, ComposeResult

    from coordtui.keybar import KeyBar, KeyFooter

    class One(App[None]):
        BINDINGS = [Binding("x", "bell", "Ring")]

        def compose(self) -> ComposeResult:
            yield KeyBar()

    app = One()
    async with app.run_test(size=(80, 24)) as pilot:
        footer = app.query_one(KeyFooter)
        await wait_for(pilot, lambda: footer.shown, what="keys shown")
        assert ("x", "Ring", True) in footer.shown
        await footer.remove()
        await footer.recompose()  # as the callback Textual queued before the removal
