"""One alert in full (enter in the Buzz console): its state and who changed it, its runbook, and its most recent
events. Everything shown is another identity's text (titles, bodies): shown as data, never as markup."""
from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from ..client.models import Alert, age_text
from ..tables import PlainTable
from .focus import focus_first


def state_words(alert: Alert, now: datetime, flags: bool = True) -> str:
    """'acked by alice 2m', 'snoozed, 2h to go', 'resolved by bob 1h', 'open' (and, with `flags`, whether it flaps
    or its latest firing was silenced)."""
    if alert.state == "acked":
        words = f"acked by {alert.acked_by or '?'} {age_text(alert.acked_at, now)}".rstrip()
    elif alert.state == "snoozed" and alert.snoozed_until is not None:
        words = f"snoozed, {age_text(now, alert.snoozed_until) or '0m'} to go"
    elif alert.state == "resolved":
        words = f"resolved by {alert.resolved_by or 'its source'} {age_text(alert.resolved_at, now)}".rstrip()
    else:
        words = alert.state
    if alert.flapping and flags:
        words += " · flapping"
    if alert.silenced_by and flags:
        words += f" · silenced (#{alert.silenced_by})"
    return words


def runbook_words(alert: Alert) -> str:
    runbook = alert.runbook or {}
    if runbook.get("pageId"):
        return f"notebook page {runbook['pageId']} (b on the list opens it)"
    if runbook.get("url"):
        return f"{runbook['url']} (b on the list opens or copies it)"
    return "none (set one on the webhook: w)"


class AlertDetailScreen(ModalScreen[None]):
    AUTO_FOCUS = "#alert-events"  # see screens/focus.py
    BINDINGS = [Binding("escape,q", "close", "Close")]

    def __init__(self, alert: Alert, now: datetime) -> None:
        super().__init__(classes="form-screen")
        self.alert = alert
        self.now = now

    def compose(self) -> ComposeResult:
        alert, now = self.alert, self.now
        with Vertical(id="form"):
            yield Label(Text.assemble((f"Alert #{alert.id}: ", "bold"), (alert.title, "bold"),
                                      ("  esc closes", "dim")), id="alert-title")
            yield Static(Text("\n".join([
                f"{alert.app_name} · {state_words(alert, now)} · {alert.count} firings",
                f"First {age_text(alert.first_at, now)} ago · last {age_text(alert.last_at, now)} ago"
                + (f" · escalated {age_text(alert.escalated_at, now)} ago" if alert.escalated_at else ""),
                f"Group key: {alert.group_key}",
                f"Runbook: {runbook_words(alert)}"])), id="alert-facts")
            table = PlainTable(id="alert-events", cursor_type="row")
            table.add_columns("Age", "Title", "Body")
            for event in alert.events:
                title = event.title + (" (silenced)" if event.silenced_by else "")
                table.add_row(age_text(event.received_at, now), Text(title),
                              Text((event.body or "").replace("\n", " ")[:200]), key=str(event.id))
            yield table

    def on_mount(self) -> None:
        focus_first(self)

    def action_close(self) -> None:
        self.dismiss(None)
