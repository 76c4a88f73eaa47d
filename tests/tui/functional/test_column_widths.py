"""Issue 24: tables size columns to their content; when the rows are wider than the table the least important
columns give way first, and what matters (revoked, expired, archived) is never the part cut, at 120 and 80
columns. At 80x24 the Tokens "Revoked" column was off-screen, so a revoked token looked live."""
from __future__ import annotations

import pytest
from rich.text import Text

from coordtui.ops.admin import TokensScreen
from coordtui.ops.projects import ProjectsScreen
from coordtui.tables import fitted_widths
from coordtui.ops.commands import open_ops
from tests.tui.functional.test_typed_ahead import api, issue_token
from tests.tui.helpers import make_app, table_text, wait_for


def shown(table) -> dict[str, int]:
    return {column.label.plain: column.get_render_width(table) - 2 * table.cell_padding
            for column in table.columns.values()}


def fits(table) -> bool:
    return sum(column.get_render_width(table) for column in table.columns.values()) \
        <= table.scrollable_content_region.width


def one_table(table, *columns: str):
    """An app showing only `table`, with these columns."""
    from textual.app import App, ComposeResult

    class One(App[None]):
        def compose(self) -> ComposeResult:
            table.add_columns(*columns)
            yield table
    return One()


async def open_list(pilot, app, name: str, cls):
    open_ops(app.ops, name)
    await wait_for(pilot, lambda: isinstance(app.screen, cls) and app.screen.loads >= 1, what=name)
    await pilot.pause(0.3)
    return app.screen.query_one("#ops-table")


@pytest.mark.parametrize("size", [(120, 35), (80, 24)])
async def test_what_matters_is_never_cut(server, size):
    token = issue_token(server, "widthbot")
    api(server, "admin", "POST", f"/api/auth/tokens/{token['id']}/revoke")
    project = api(server, "admin", "POST", "/api/swarm/projects",
                  json={"title": "Website relaunch for the spring campaign", "color": "#3b82f6",
                        "description": "x", "workHoursStart": 9, "workHoursEnd": 17,
                        "workHoursTimezone": "America/Argentina/Buenos_Aires"})
    api(server, "admin", "POST", f"/api/swarm/projects/{project['id']}/archive")
    app = make_app(server, "admin")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.session.identity, what="connected")
        table = await open_list(pilot, app, "tokens", TokensScreen)
        await wait_for(pilot, lambda: fits(table), what=lambda: f"tokens fit: {shown(table)}")
        revoked = next(line for line in table_text(app.screen, "#ops-table").splitlines() if "widthbot" in line)
        assert shown(table)["Revoked"] >= len(revoked.split(" | ")[-1]) == len("2026-01-01 00:00"), shown(table)
        assert shown(table)["Created"] >= len("Created")
        await pilot.press("escape")

        table = await open_list(pilot, app, "projects", ProjectsScreen)
        await wait_for(pilot, lambda: fits(table), what=lambda: f"projects fit: {shown(table)}")
        assert shown(table)["Archived"] >= len("2026-01-01 00:00"), shown(table)
        if size[0] == 120:
            assert shown(table)["Title"] >= len("Website relaunch for the spring campaign"), shown(table)


def test_the_least_important_give_way_first():
    # natural 10, 20, 16 in 30: the second gives way to its header (8), then the first
    assert fitted_widths([10, 20, 16], [4, 8, 7], [1, 0], 30) == [6, 8, 16]
    assert fitted_widths([10, 20, 16], [4, 8, 7], [1, 0], 60) == [10, 20, 16]
    assert fitted_widths([10, 20, 16], [4, 8, 7], [1, 0], 20) == [3, 3, 16]  # below headers, never the third


async def test_a_column_narrows_again_once_its_long_rows_are_gone():
    """Textual keeps the widest cell ever shown; coordtui's tables start again from the headers when their rows
    are cleared, so a long row gone long ago no longer holds its column wide (and a picture of the list does not
    depend on what was listed before)."""
    from coordtui.tables import PlainTable

    app = one_table(PlainTable(), "Item", "Age")
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(PlainTable)
        table.add_row("a very long item title that was listed a while ago", "1m")
        await pilot.pause()
        assert shown(table)["Item"] >= 50
        table.clear()
        table.add_row("short", "2m")
        await pilot.pause()
        assert shown(table)["Item"] == len("short")


async def test_a_refilled_table_is_as_wide_as_its_rows_before_it_is_next_idle():
    """Textual measures new rows when the table is next idle; a table refilled while nothing else reached it (the
    Wake pane repainted under a form, at 80x24 in tmux) showed "Disk" for "Disk full on db-7" until a key was
    pressed. Its text cells count as they are added."""
    from coordtui.tables import PlainTable

    app = one_table(PlainTable(), "Pri", "Item")
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(PlainTable)
        table.add_row("normal", "an earlier row")
        await pilot.pause()
        table.clear()
        table.add_row(Text("high"), Text("Disk full on db-7 (1 firing)  [open]"))
        table.add_row("low", "two lines\nthe second of them longer")
        assert shown(table) == {"Pri": len("high"), "Item": len("Disk full on db-7 (1 firing)  [open]")}
        await pilot.pause()
        assert shown(table) == {"Pri": len("high"), "Item": len("Disk full on db-7 (1 firing)  [open]")}


async def test_columns_fitted_before_textual_measured_the_new_rows_are_not_cut():
    """A fit can come before Textual measures rows just added (a resize, or the refresh after them coming first on
    a loaded machine): the widths follow the rows all the same (the revoked date was cut to its header)."""
    from coordtui.tables import PlainTable

    class Fitted(PlainTable):
        give_way = ("Title",)

    app = one_table(Fitted(), "Title", "Revoked")
    async with app.run_test(size=(60, 10)) as pilot:
        table = app.query_one(Fitted)
        table.clear(columns=True)
        table.add_columns("Title", "Revoked")
        table.add_row("a title far too long to fit beside the date in sixty columns", "2026-11-27 15:56")
        table.fit_columns()  # at once, as a resize between the rows and Textual's measuring does
        assert shown(table)["Revoked"] == len("2026-11-27 15:56"), shown(table)  # (no later resize need mend it)
        assert fits(table)
        await pilot.pause()
        assert shown(table)["Revoked"] == len("2026-11-27 15:56") and fits(table), shown(table)


@pytest.mark.parametrize("size", [(120, 35), (80, 24)])
async def test_a_long_page_or_channel_name_gives_way_to_the_header_beside_it(server, size):
    """Notes and Chat list pages and channels in a narrow column: a long title is cut, never the "Updated" or
    "New" header (Notes showed "Updat" beside a 16-character title)."""
    api(server, "admin", "POST", "/api/notebook", json={"title": "Failover runbook for the primary database"})
    api(server, "admin", "POST", "/api/chat/channels", json={"type": "group", "name": "incident-war-room-eu-west",
                                                           "members": ["admin", "alice"]})
    app = make_app(server, "admin")
    async with app.run_test(size=size) as pilot:
        for key, selector, header in (("7", "#notebook-pages", "Updated"), ("3", "#chat-channels", "New")):
            await pilot.press(key)
            table = app.query_one(selector)
            await wait_for(pilot, lambda: table.row_count and fits(table),
                           what=lambda: f"{selector} fits: {shown(table)}")
            assert shown(table)[header] >= len(header), shown(table)
