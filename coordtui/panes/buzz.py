"""Buzz events: the alerts and notifications addressed to you, newest first, live."""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from ..client.models import BuzzEvent, age_text, counted
from .base import Pane
from ..tables import PlainTable


class BuzzPane(Pane[list[BuzzEvent]]):
    EVENT_TYPES = frozenset({"broadcast", "resync", "reconnected"})
    KEYS = [("ctrl+r", "refresh"), ("w", "webhooks: list, create, edit, delete, ingest URLs")]
    BINDINGS = [Binding("w", "ops('webhooks')", "Webhooks")]

    @dataclass
    class Viewed(Message):
        """The pane showed the events up to `newest` (an id): the tab's count of unseen events is zero."""
        newest: int

    def compose(self) -> ComposeResult:
        yield Static("", id="buzz-summary", classes="pane-summary")
        table = PlainTable(id="buzz-table", cursor_type="row")
        table.add_columns("Age", "App", "Title", "Body")
        yield table

    async def load(self) -> list[BuzzEvent]:
        return await self.client.buzz_events(limit=100)

    def show(self, events: list[BuzzEvent]) -> None:
        table = self.query_one("#buzz-table", DataTable)
        table.clear()
        now = self.session.now()
        for event in events:
            if not self.matches(event.app_name, event.title, event.body):
                continue
            title = Text(event.title, style="dim strike" if event.suppressed else "bold")
            table.add_row(age_text(event.received_at, now), event.app_name, title,
                          (event.body or "").replace("\n", " ")[:120], key=str(event.id))
        self.query_one("#buzz-summary", Static).update(counted(len(events), "event"))
        if self.active and events:
            self.post_message(self.Viewed(max(event.id for event in events)))
