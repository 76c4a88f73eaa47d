"""Presence (Who): who is online, idle or offline and since when, unread mail and active tasks.

Offline is the server's word (`online` false: no open stream and not seen for 5 minutes; it announces each change
with a `presence` event); idle is ours: online, but not seen for IDLE_AFTER (an open stream is seen every 30 s,
its heartbeat). So an identity whose last stream closed reads idle after 2 minutes, then offline when the
server says so. The words are derived again every RECHECK_SECONDS from what was read (time alone turns online
into idle), and read again from the server on presence events and every POLL_SECONDS while in view."""
from __future__ import annotations

from datetime import datetime

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from ..agentmark import named
from ..client.models import PresenceEntry, age_text
from .base import Pane
from ..tables import PlainTable, cursor_key

IDLE_AFTER = 2 * 60  # online, and not seen for this long: idle (documented in the help screen)
RECHECK_SECONDS = 15.0  # the words derived again from what was read (the issue: within 30 s)
STATE_LOOK = {"online": ("●", "bold green"), "idle": ("◐", "yellow"), "offline": ("○", "dim")}
STATE_RANK = {"online": 0, "idle": 1, "offline": 2}


def presence_state(entry: PresenceEntry, now: datetime) -> str:
    """offline as the server says; else idle when not seen for IDLE_AFTER; else online."""
    if not entry.online:
        return "offline"
    if entry.last_seen is not None and (now - entry.last_seen).total_seconds() >= IDLE_AFTER:
        return "idle"
    return "online"


def presence_words(entry: PresenceEntry, now: datetime) -> str:
    """The state with the time since the identity was last seen: "online", "idle 3m", "offline 2h" ("offline"
    alone when never seen)."""
    state = presence_state(entry, now)
    if state == "online" or entry.last_seen is None:
        return state
    return f"{state} {age_text(entry.last_seen, now)}"


def order_presence(entries: list[PresenceEntry], now: datetime) -> list[PresenceEntry]:
    return sorted(entries, key=lambda e: (STATE_RANK[presence_state(e, now)], e.identity))


class PresencePane(Pane[list[PresenceEntry]]):
    EVENT_TYPES = frozenset({"presence", "message", "inbox_check", "swarm_task_created", "swarm_task_updated",
                             "resync", "reconnected"})
    POLL_SECONDS = 30.0  # read again while in view (the server's offline also comes as a presence event)
    EMPTY_HINT = "Nobody else has connected yet. C connects an agent, I invites a person."
    BINDINGS = [Binding("U", "ops('users')", "Users", id="presence.users"),
                Binding("C", "ops('connect')", "Connect", id="presence.connect"),
                Binding("I", "ops('invite')", "Invite", show=False, id="presence.invite")]
    KEYS = [("ctrl+r", "refresh"), ("/", "filter"), ("U", "users: archive, admin flag, names (admin)"),
            ("C", "connect an agent: its token and MCP configuration (admin)"),
            ("I", "invite a teammate: an onboarding URL (admin)"),
            ("states", f"online · idle: online, not seen for {IDLE_AFTER // 60} min or more · offline: as the "
                       "server says (no open stream, not seen for 5 min); each with the time since last seen")]

    def compose(self) -> ComposeResult:
        yield Static("", id="presence-summary", classes="pane-summary")
        table = PlainTable(id="presence-table", cursor_type="row")
        table.add_columns("", "Identity", "State", "Last seen", "Via", "Unread", "Tasks")
        yield table

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(RECHECK_SECONDS, self.recheck)

    def recheck(self) -> None:
        """Time alone turns online into idle: the words derived again from what was read."""
        if self._last_data is not None and self.active:
            self.show(self._last_data)

    def shows_nothing(self) -> bool:
        """Nobody but me was ever seen (the others listed are names only): the hint says how others join."""
        return all(e.identity == self.session.identity or e.last_seen is None for e in self._last_data or [])

    async def load(self) -> list[PresenceEntry]:
        return await self.client.presence()

    def show(self, entries: list[PresenceEntry]) -> None:
        """Every RECHECK_SECONDS too: only the rows that changed are redrawn, the cursor stays on its identity."""
        table = self.query_one("#presence-table", PlainTable)
        selected = cursor_key(table)
        now = self.session.now()
        entries = order_presence(entries, now)
        counts = {state: 0 for state in STATE_RANK}
        rows = []
        for entry in entries:
            state = presence_state(entry, now)
            counts[state] += 1
            if not self.matches(entry.identity, state):
                continue
            dot, style = STATE_LOOK[state]
            seen = f"{age_text(entry.last_seen, now)} ago" if entry.last_seen else "never"
            rows.append((entry.identity, [
                Text(dot, style=style), Text(named(entry.identity, entry.is_agent), style="bold" if state == "online" else ""),
                Text(presence_words(entry, now), style=style), seen, entry.source or "", str(entry.unread),
                "" if entry.tasks is None else str(entry.tasks)]))
        table.show_rows(rows)
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected))
        self.query_one("#presence-summary", Static).update(
            f"{counts['online']} online · {counts['idle']} idle · {counts['offline']} offline · {len(entries)} known")
