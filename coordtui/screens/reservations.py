"""Reservations in force (advisory locks on files, globs and services; skill page `reservations`): who holds what,
exclusive or shared, and the time left; release one of your own with a confirmation. Opened from the Swarm board
(`r`). Resources, reasons and holders come from other identities: shown as data (rich Text), never as markup."""
from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ..client.api import ApiError, ConnectionFailed
from ..client.models import Reservation, counted, time_left
from ..keybar import KeyBar
from ..session import Session
from ..tables import PlainTable, cursor_key
from .confirm import ConfirmScreen
from .focus import focus_first


class ReservationsScreen(Screen[None]):
    AUTO_FOCUS = "#reservations-table"  # see screens/focus.py
    BINDINGS = [Binding("escape", "app.pop_screen", "Back"), Binding("d", "release", "Release"),
                Binding("ctrl+r", "reload", "Refresh")]

    def __init__(self, session: Session) -> None:
        super().__init__(classes="ops-screen")
        self.session = session
        self.reservations: dict[str, Reservation] = {}
        self.loads = 0

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("Reservations", "bold"), ("  d release yours · ctrl+r refresh · esc back", "dim")),
                     id="reservations-title")
        yield Static("Loading…", id="reservations-summary", classes="pane-summary")
        table = PlainTable(id="reservations-table", cursor_type="row")
        table.add_columns("Holder", "Resource", "Kind", "Left", "Reason")
        yield table
        yield KeyBar()

    def on_mount(self) -> None:
        focus_first(self)
        self.reload()

    def action_reload(self) -> None:
        self.reload()

    @work(exclusive=True, group="reservations-load", exit_on_error=False)
    async def reload(self) -> None:
        summary = self.query_one("#reservations-summary", Static)
        try:
            rows = await self.session.connected_client().reservations()
        except (ApiError, ConnectionFailed) as exc:
            summary.update(Text(exc.message if isinstance(exc, ApiError) else str(exc), style="red"))
            return
        table = self.query_one("#reservations-table", DataTable)
        selected = cursor_key(table)
        table.clear()
        self.reservations = {str(r.id): r for r in rows}
        now = self.session.now()
        me = self.session.identity
        for r in rows:
            holder = Text(r.holder, style="bold" if r.holder == me else "")
            table.add_row(holder, Text(r.resource), "exclusive" if r.exclusive else "shared",
                          time_left(r.expires_at, now), Text(r.reason or "", style="dim"), key=str(r.id))
        if selected in self.reservations:
            table.move_cursor(row=table.get_row_index(selected))
        mine = sum(1 for r in rows if r.holder == me)
        summary.update(Text(f"{counted(len(rows), 'reservation')} in force · {mine} yours · soonest to end first"))
        self.loads += 1

    def selected(self) -> Reservation | None:
        return self.reservations.get(cursor_key(self.query_one("#reservations-table", DataTable)) or "")

    @work(group="reservations-release", exit_on_error=False)
    async def action_release(self) -> None:
        reservation = self.selected()
        if reservation is None:
            self.notify("Select a reservation first", severity="warning", timeout=3)
            return
        if reservation.holder != self.session.identity:
            self.notify(f"Held by {reservation.holder}: only its holder (or an admin) releases it",
                        severity="warning", timeout=4)
            return
        if not await self.app.push_screen_wait(ConfirmScreen(f"Release your reservation of {reservation.resource}?",
                                                             yes="Release")):
            return
        try:
            await self.session.connected_client().release_reservation(reservation.id)
        except (ApiError, ConnectionFailed) as exc:
            self.notify(exc.message if isinstance(exc, ApiError) else str(exc), severity="error", timeout=5)
            return
        self.notify(f"Released {reservation.resource}", timeout=3)
        self.reload()
