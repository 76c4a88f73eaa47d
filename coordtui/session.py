"""The session: what the app knows of the server it talks to (the SDK client, who we are there, the unread
counts and kept alerts the server sent) and the clock. The app owns it and keeps it current; panes, screens
and operator actions are given it and only read it, instead of reaching into the app."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable

from .alerts import AlertStore
from .client.api import ConnectionFailed, CoordClient
from .client.models import Channel, Wake
from .unread import UnreadCounts, wake_view


@dataclass(eq=False)
class Session:
    clock: Callable[[], datetime] | None = None  # tests freeze it; else the machine's clock, in UTC
    backoff: tuple[float, float] = (0.25, 8.0)  # reconnect delays (seconds) of the event stream and notebook pages
    open_marks_read: bool = True  # keys.toml [options]: opening a message acknowledges it
    client: CoordClient | None = None  # None until a profile is chosen
    identity: str | None = None  # None until the server said who the token is
    is_admin: bool = False
    counts: UnreadCounts = field(default_factory=UnreadCounts)  # what the server last said is waiting
    alerts: AlertStore = field(default_factory=AlertStore)  # one-shot wake items, kept until dismissed

    def now(self) -> datetime:
        return self.clock() if self.clock else datetime.now(timezone.utc)

    def connected_client(self) -> CoordClient:
        """The client, for an action that needs the server: before there is one, the action is refused the way an
        unreachable server refuses it."""
        if self.client is None:
            raise ConnectionFailed("Not connected yet")
        return self.client

    def wake_view(self, wake: Wake, channels: list[Channel] | None = None) -> Wake:
        """The wake list as shown (unread.wake_view), with the channels given or else the ones last counted."""
        return wake_view(wake, self.counts.channels if channels is None else channels, self.identity or "",
                         self.alerts, self.now())
