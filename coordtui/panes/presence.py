"""Presence: who is active, idle, away or offline (from lastSeen), unread mail and active tasks."""
from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..agentmark import named
from ..client.models import PresenceEntry, age_text
from .base import Pane
from ..tables import PlainTable

# From lastSeen (the server's `online` is "seen in the last 5 minutes"): documented in the help screen.
IDLE_AFTER = 2 * 60      # active: seen in the last 2 minutes
AWAY_AFTER = 15 * 60     # idle: 2-15 minutes; away: longer (or never seen) while the server still says online
STATE_LOOK = {"active": ("●", "bold green"), "idle": ("◐", "yellow"), "away": ("◌", "dark_orange"),
              "offline": ("○", "dim")}
STATE_RANK = {"active": 0, "idle": 1, "away": 2, "offline": 3}


def presence_state(entry: PresenceEntry, now: datetime) -> str:
    if entry.last_seen is None:
        return "away" if entry.online else "offline"
    seconds = (now - entry.last_seen).total_seconds()
    if seconds < IDLE_AFTER:
        return "active"
    if seconds < AWAY_AFTER:
        return "idle"
    return "away" if entry.online else "offline"


def order_presence(entries: list[PresenceEntry], now: datetime) -> list[PresenceEntry]:
    return sorted(entries, key=lambda e: (STATE_RANK[presence_state(e, now)], e.identity))


class PresencePane(Pane[list[PresenceEntry]]):
    EVENT_TYPES = frozenset({"presence", "message", "inbox_check", "swarm_task_created", "swarm_task_updated",
                             "resync", "reconnected"})
    POLL_SECONDS = 30.0  # active turns idle and away with time alone
    EMPTY_HINT = "Nobody else has connected yet. C connects an agent, I invites a person."
    BINDINGS = [Binding("U", "ops('users')", "Users", id="presence.users"),
                Binding("C", "ops('connect')", "Connect", id="presence.connect"),
                Binding("I", "ops('invite')", "Invite", show=False, id="presence.invite")]
    KEYS = [("ctrl+r", "refresh"), ("/", "filter"), ("U", "users: archive, admin flag, names (admin)"),
            ("C", "connect an agent: its token and MCP configuration (admin)"),
            ("I", "invite a teammate: an onboarding URL (admin)"),
            ("states", f"active < {IDLE_AFTER // 60} min since last seen · idle < {AWAY_AFTER // 60} min · "
                       "away: longer · offline: the server says not online")]

    def compose(self) -> ComposeResult:
        yield Static("", id="presence-summary", classes="pane-summary")
        table = PlainTable(id="presence-table", cursor_type="row")
        table.add_columns("", "Identity", "State", "Last seen", "Via", "Unread", "Tasks")
        yield table

    def shows_nothing(self) -> bool:
        """Nobody but me was ever seen (the others listed are names only): the hint says how others join."""
        return all(e.identity == self.session.identity or e.last_seen is None for e in self._last_data or [])

    async def load(self) -> list[PresenceEntry]:
        return await self.client.presence()

    def show(self, entries: list[PresenceEntry]) -> None:
        table = self.query_one("#presence-table", DataTable)
        table.clear()
        now = self.session.now()
        entries = order_presence(entries, now)
        counts = {state: 0 for state in STATE_RANK}
        for entry in entries:
            state = presence_state(entry, now)
            counts[state] += 1
            if not self.matches(entry.identity, state):
                continue
            dot, style = STATE_LOOK[state]
            seen = f"{age_text(entry.last_seen, now)} ago" if entry.last_seen else "never"
            table.add_row(Text(dot, style=style), Text(named(entry.identity, entry.is_agent),
                                                        style="bold" if state == "active" else ""),
                          Text(state, style=style), seen, entry.source or "", str(entry.unread),
                          "" if entry.tasks is None else str(entry.tasks), key=entry.identity)
        self.query_one("#presence-summary", Static).update(
            f"{counts['active']} active · {counts['idle']} idle · {counts['away']} away · {len(entries)} known")
