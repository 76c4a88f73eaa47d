"""Group chats: create with a name and members (API.md §5 has no route to add or remove members later); the
channels you archived, listed with what arrived since, to unarchive."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Awaitable

from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.widgets import DataTable

from ..client import limits
from ..client.api import ApiError, ConnectionFailed
from ..client.models import Channel, age_text, counted
from ..screens.form import Field, FormValues
from .base import Command, OpsHost, OpsScreen, identity_list, run_form


def new_group(host: OpsHost) -> None:
    fields = [Field("name", "Name", required=True, max_len=limits.CHAT_GROUP_NAME, wire="name"),
              Field("members", "Members (identities, comma-separated; you are included)", required=True,
                    wire="members", names=True)]

    def submit(values: FormValues) -> Awaitable[Any]:
        return host.client.create_group(values["name"], identity_list(values["members"]))

    run_form(host, "New group chat", fields, "Create", submit, lambda _id: "Group chat created",
             after=host.show_channel)


class ArchivedChannelsScreen(OpsScreen[Channel]):
    """The channels you archived (only for you): one with messages since says so; u unarchives, enter unarchives
    and opens it."""

    TITLE_TEXT = "Archived chats"
    COLUMNS = ("Channel", "Members", "New", "Last message")
    GIVE_WAY = ("Members",)
    HINT = "u unarchive · enter unarchive and open"
    BINDINGS = [Binding("u", "unarchive", "Unarchive")]

    async def fetch(self) -> list[Channel]:
        return await self.client.channels(archived=True)

    def row(self, channel: Channel) -> tuple[str | Text, ...]:
        me = self.host.session.identity or ""
        new = Text(f"{channel.unread} new", style="bold") if channel.unread else Text("")
        last = f"{age_text(channel.last_at, self.host.session.now())} ago" if channel.last_at else ""
        return Text(channel.label(me)), Text(", ".join(channel.members)), new, last

    def summary(self, items: list[Channel]) -> str:
        waiting = sum(1 for c in items if c.unread)
        return f"{counted(len(items), 'archived chat')}" + (f" · {waiting} with new messages" if waiting else "")

    def detail(self, channel: Channel) -> str:
        return channel.last_body or ""

    def action_unarchive(self) -> None:
        channel = self.need()
        if channel is not None:
            self.unarchive(channel, open_it=False)

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        channel = self.need()
        if channel is not None:
            self.unarchive(channel, open_it=True)

    @work(group="ops-action", exit_on_error=False)
    async def unarchive(self, channel: Channel, open_it: bool) -> None:
        try:
            await self.client.unarchive_channel(channel.id)
        except (ApiError, ConnectionFailed) as exc:
            self.notify(f"Not unarchived: {exc}", severity="error", timeout=5)
            return
        label = channel.label(self.host.session.identity or "")
        self.notify(f"{label} is back in Chat", timeout=3)
        if open_it:
            self.app.pop_screen()
            self.host.show_channel(channel.id)
        else:
            self.reload()


def commands(host: OpsHost) -> Iterator[Command]:
    yield "New group chat", "Name and members (Chat pane: g)", lambda: new_group(host)
    yield "Archived chats", "Channels you archived, with what arrived since; unarchive (Chat pane: X)", \
        lambda: host.app.push_screen(ArchivedChannelsScreen(host))
