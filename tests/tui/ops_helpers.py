"""Driving the operator screens as a person does: open a pane, press its key, fill the form, read the screen."""
from __future__ import annotations

from coordtui.ops.base import OpsScreen, SecretScreen
from coordtui.screens.form import FormScreen
from tests.tui.helpers import table_text, wait_for, wait_idle


def form_error(app) -> str:
    return str(app.screen.query_one("#form-error").render())


def field_error(app, name: str) -> str:
    label = app.screen.query_one(f"#error-{name}")
    return str(label.render()) if label.display else ""


async def open_ops(pilot, app, pane_key: str, key: str, cls: type[OpsScreen]) -> OpsScreen:
    await wait_for(pilot, lambda: app.conn_state == "connected" and app.session.identity, what="connected")
    await pilot.press(pane_key)
    await wait_idle(pilot, app)
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, cls) and app.screen.loads >= 1, what=cls.__name__)
    return app.screen


async def press_for_form(pilot, app, *keys: str) -> FormScreen:
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="form")
    return app.screen


async def refused(pilot, app, text: str) -> FormScreen:
    await wait_for(pilot, lambda: text in form_error(app), what=f"refusal {text!r}")
    assert isinstance(app.screen, FormScreen), "the form stays open after a refusal"
    return app.screen


async def retype(pilot, screen: FormScreen, name: str, value: str) -> None:
    widget = screen.query_one(f"#field-{name}")
    widget.focus()
    widget.clear()
    await pilot.press(*value)


async def accepted(pilot, app, leaves: type = FormScreen) -> None:
    await wait_for(pilot, lambda: not isinstance(app.screen, leaves), what="form closed")


async def confirm_yes(pilot, app) -> None:
    await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="confirmation")
    await pilot.press("enter")
    await accepted(pilot, app)


def ops_rows(app) -> str:
    return table_text(app.screen, "#ops-table")


async def secret_value(pilot, app) -> str:
    await wait_for(pilot, lambda: isinstance(app.screen, SecretScreen), what="secret dialog")
    return app.screen.query_one("#secret-0").value


async def fill_form_keep(pilot, **values) -> None:
    """Types into the open form's fields (leaving the others as they are) and submits with ctrl+s."""
    screen = pilot.app.screen
    for name, value in values.items():
        widget = screen.query_one(f"#field-{name}")
        widget.focus()
        widget.clear()
        await pilot.press(*value)
    await pilot.press("ctrl+s")
