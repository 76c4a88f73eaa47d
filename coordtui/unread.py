"""Unread at a glance: the counts shown in the tab labels, and chat in the wake list.

Counts come from the server, never from guessing: the wake list (a `wake_pulse` carries it whole), the
inbox's unread `total`, and the channels' `unread_count`. Events only say *that* something changed; the
app then refetches once per burst (`UnreadCounts.due` is a flag, not a queue).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from .alerts import AlertStore
from .client.models import BuzzEvent, Channel, Wake, WakeItem

CHAT_ACTION = "Read the conversation and answer; opening it marks it read."
# what makes a fresh count worth fetching (inbox_check only when it is an ack: our own list calls echo back)
COUNT_EVENTS = frozenset({"message", "chat_message", "swarm_task_created", "swarm_task_updated", "broadcast",
                          "resync", "reconnected"})


def chat_items(channels: list[Channel], me: str) -> list[WakeItem]:
    """Wake items for channels with unread messages, as an older server (no §18 chat source) would lack them."""
    items = []
    for channel in channels:
        if not channel.unread:
            continue
        label = channel.label(me)
        noun = "message" if channel.unread == 1 else "messages"
        latest = f" — latest: \"{channel.last_body[:100]}\"" if channel.last_body else ""
        items.append(WakeItem(source="chat", id=channel.id, summary=f"{label}: {channel.unread} unread {noun}{latest}",
                              action=CHAT_ACTION, priority="normal", age="", channel_id=channel.id,
                              channel_type=channel.type, channel_name=channel.name))
    return items


def with_chat(wake: Wake, channels: list[Channel] | None, me: str) -> Wake:
    """The server's wake, plus chat items built from the channels when the server sent none."""
    if channels is None or any(item.source == "chat" for item in wake.items):
        return wake
    extra = chat_items(channels, me)
    if not extra:
        return wake
    return replace(wake, items=wake.items + extra)


def wake_view(wake: Wake, channels: list[Channel] | None, me: str, alerts: AlertStore, now: datetime) -> Wake:
    """The wake list as shown: the server's items, chat items built from the channels when an older
    server sends none, and one-shot alerts kept until dismissed (and never again after: an answer shown again, or
    one in flight since before the dismissal, may still carry one)."""
    wake = with_chat(alerts.without_dismissed(wake), channels, me)
    present = {item.key for item in wake.items}
    kept = [alert.shown(now) for alert in alerts.alerts() if alert.item.key not in present]
    if not kept:
        return wake
    note = f"{len(kept)} earlier alert{'s' if len(kept) > 1 else ''} kept on screen (a dismisses)"
    summary = f"{wake.summary} · {note}" if wake.summary else note
    return replace(wake, items=wake.items + kept, summary=summary)


def tab_labels(titles: list[str], counts: list[int | None], width: int) -> list[str]:
    """The tab labels ("1 Wake (12)"), as wide as `width` columns allow: each tab takes its label plus one
    column of gap. Too wide, the badges lose their space and show at most 99+; still too wide (three 99+
    badges at 80 columns), the digits lose their space too. Nothing is ever cut off."""
    def badge(count: int | None, tight: bool) -> str:
        if not count:
            return ""
        return f"({min(count, 99)}{'+' if count > 99 else ''})" if tight else f" ({count})"

    for tight, joiner in ((False, " "), (True, " "), (True, "")):
        labels = [f"{number}{joiner}{title}{badge(count, tight)}"
                  for number, (title, count) in enumerate(zip(titles, counts), start=1)]
        if sum(len(label) + 1 for label in labels) <= width:
            break
    return labels


def unseen_buzz(events: list[BuzzEvent], newest_seen: int) -> int:
    """Buzz events after the newest one the person has had in view (repeats the server suppressed do not count)."""
    return sum(1 for event in events if event.id > newest_seen and not event.suppressed)


@dataclass
class UnreadCounts:
    wake: int | None = None
    mail: int | None = None
    chat: int | None = None
    buzz: int | None = None
    channels: list[Channel] | None = None
    last_wake: Wake | None = None  # the server's, before chat items and kept alerts join it
    due: bool = False  # something changed since the last fetch
    fetches: int = 0

    def set_channels(self, channels: list[Channel]) -> None:
        self.channels = list(channels)
        self.chat = sum(c.unread for c in channels)

    def read(self, channel_id: str) -> list[Channel]:
        """The channels as they are once `channel_id` is read."""
        return [c if c.id != channel_id else Channel(c.id, c.type, c.name, c.members, 0, c.last_body, c.last_at)
                for c in self.channels or []]

    def badges(self) -> dict[str, int | None]:
        return {"wake": self.wake, "inbox": self.mail, "chat": self.chat, "buzz": self.buzz}
