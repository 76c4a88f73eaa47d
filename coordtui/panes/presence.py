"""Presence: who is online (first), last seen, unread mail and active tasks."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from ..client.models import PresenceEntry, age_text
from .base import Pane


def order_presence(entries: list[PresenceEntry]) -> list[PresenceEntry]:
    return sorted(entries, key=lambda e: (not e.online, e.identity))


class PresencePane(Pane):
    TITLE = "Presence"
    EVENT_TYPES = frozenset({"presence", "message", "inbox_check", "swarm_task_created", "swarm_task_updated",
                             "resync", "reconnected"})
    KEYS = [("ctrl+r", "refresh")]

    def compose(self) -> ComposeResult:
        yield Static("", id="presence-summary", classes="pane-summary")
        table = DataTable(id="presence-table", cursor_type="row")
        table.add_columns("", "Identity", "Last seen", "Via", "Unread", "Tasks")
        yield table

    async def load(self) -> list[PresenceEntry]:
        return await self.client.presence()

    def show(self, entries: list[PresenceEntry]) -> None:
        table = self.query_one("#presence-table", DataTable)
        table.clear()
        now = self.coord.now()
        entries = order_presence(entries)
        for entry in entries:
            dot = Text("●", style="bold green") if entry.online else Text("○", style="dim")
            seen = f"{age_text(entry.last_seen, now)} ago" if entry.last_seen else "never"
            table.add_row(dot, Text(entry.identity, style="bold" if entry.online else ""), seen, entry.source or "",
                          str(entry.unread), "" if entry.tasks is None else str(entry.tasks), key=entry.identity)
        online = sum(1 for e in entries if e.online)
        self.query_one("#presence-summary", Static).update(f"{online} online · {len(entries)} known")
