"""Issue 24: confirmations work one way everywhere: y confirms, n or escape cancels, in the operator dialogs (a
form without fields) as in ConfirmScreen."""
from __future__ import annotations

from coordtui.ops.admin import InvitesScreen
from coordtui.screens.form import FormScreen
from tests.tui.functional.test_typed_ahead import api
from tests.tui.helpers import make_app, select_row, wait_for
from tests.tui.ops_helpers import open_ops


async def test_an_operator_confirmation_answers_y_and_n(server):
    invite = api(server, "admin", "POST", "/api/auth/invites", json={"identityHint": "confirmbot"})["invite"]
    app = make_app(server, "admin")
    async with app.run_test(size=(120, 35)) as pilot:
        await open_ops(pilot, app, "6", "i", InvitesScreen)
        await wait_for(pilot, lambda: str(invite["id"]) in app.screen.items, what="listed")
        select_row(app.screen, "#ops-table", str(invite["id"]))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="asked")
        assert "y or enter confirms · n or escape cancels" in str(app.screen.query_one("#form-title").render())
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, InvitesScreen), what="cancelled")
        assert any(i["id"] == invite["id"] for i in api(server, "admin", "GET", "/api/auth/invites")["invites"])
        select_row(app.screen, "#ops-table", str(invite["id"]))
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, FormScreen), what="asked again")
        await pilot.press("y")
        await wait_for(pilot, lambda: not any(i["id"] == invite["id"] for i in
                                              api(server, "admin", "GET", "/api/auth/invites")["invites"]),
                       what="deleted")
